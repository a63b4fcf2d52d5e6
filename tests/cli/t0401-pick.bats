#!/usr/bin/env bats
# t0401-pick: `vramguard pick` against the fake driver: the order GPUs come in, each limit,
# reservations held by a running `vramguard run`, waiting, the output formats, and hostile
# values (each a one-line error with exit status 64).

load lib

bats_require_minimum_version 1.5.0

setup() {
    TMP=$(vg_tmpdir)
    DEVDIR=$(vg_fake_dev)
    export VRAMGUARD_RUNTIME_DIR=$TMP/locks
    # GPU 1: all free, idle. GPU 3: 1 GiB held. GPU 0: 20 GiB held. GPU 2: free but 99% busy.
    vg_scenario_host pick4 "proc gpu=0 pid=4000000 type=compute mem=20GiB" \
        "proc gpu=3 pid=4000001 type=compute mem=1GiB"
}

U0=GPU-00000000-0000-0000-0000-000000000000
U1=GPU-11111111-1111-1111-1111-111111111111
U2=GPU-22222222-2222-2222-2222-222222222222
U3=GPU-33333333-3333-3333-3333-333333333333

# vgp ARGS...: `vramguard ARGS` with the fake driver, stdout in $output, stderr in $stderr.
vgp() {
    run --separate-stderr env VG_HELPER_TAG="$TMP" "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" "$@"
}

# hold_gpu GPU: a background `vramguard run --gpus GPU -- sleep`, recorded for cleanup, that
# holds the GPU's reservation; sets HOLD_PID once pick sees the reservation.
hold_gpu() {
    vg_require_jq
    VG_HELPER_TAG=$TMP "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" run -q --gpus "$1" -- \
        sleep 120 </dev/null >/dev/null 2>"$TMP/hold.err" 3>&- &
    HOLD_PID=$!
    _vg_dir
    _vg_record launcher "$HOLD_PID"
    wait_for "reserved $1"
}

# reserved GPU: true when pick's JSON calls the GPU with this index reserved. Looking goes
# through /proc/locks, so it never disturbs the run holding the lock.
reserved() {
    local out
    out=$("$VG" --nvml "$FAKE_FULL" pick --json --max-util 100 --min-free 0 2>/dev/null) || true
    [ "$(jq -r --argjson i "$1" '.gpus[] | select(.index == $i) | .reserved' <<<"$out")" = true ]
}

@test "default: the most free GPU's UUID, nothing on stderr" {
    vgp pick
    [ "$status" -eq 0 ]
    [ "$output" = "$U1" ]
    [ -z "$stderr" ]
}

@test "-n: most free first; a busy GPU is never picked by default" {
    vgp pick -n 3
    [ "$status" -eq 0 ]
    [ "$output" = "$U1,$U3,$U0" ]
    vgp pick -n 2 --format index
    [ "$output" = "1,3" ]
    vgp pick --count 4 --max-util 100
    [ "$status" -eq 0 ]
    [ "$output" = "$U1,$U2,$U3,$U0" ] # 2 and 1 tie on memory; 1 is idler
}

@test "--min-free as a size or a fraction; --max-util; --exclude by index or UUID" {
    vgp pick -n 2 --min-free 70GiB
    [ "$output" = "$U1,$U3" ]
    vgp pick -n 3 --min-free 0.9
    [ "$status" -eq 1 ]
    vgp pick -n 2 --min-free 0.9
    [ "$status" -eq 0 ]
    vgp pick --max-util 0
    [ "$output" = "$U1" ]
    vgp pick --exclude 1,GPU-3333
    [ "$status" -eq 0 ]
    [ "$output" = "$U0" ]
    vgp pick -n 2 --exclude " 1 , GPU-3333" --max-util 100
    [ "$output" = "$U2,$U0" ]
}

@test "not enough: exit 1 and one line naming each GPU's reason" {
    vgp pick -n 4
    [ "$status" -eq 1 ]
    [ -z "$output" ]
    [ "$(wc -l <<<"$stderr")" -eq 1 ]
    [[ $stderr == "vramguard: pick: not enough free GPUs: asked for 4 GPUs, 3 free enough (GPU 2: utilisation 99% above 50%); --wait TIMEOUT waits for them" ]]
    vgp pick -n 2 --min-free 79.5GiB
    [ "$status" -eq 1 ]
    [[ $stderr == *"asked for 2 GPUs, 1 free enough (GPU 0: 59.5 GiB free of 80 GiB, needs 79.5 GiB; GPU 2: utilisation 99% above 50%; GPU 3: 78.5 GiB free of 80 GiB, needs 79.5 GiB)"* ]]
    vgp pick -n 5
    [ "$status" -eq 64 ]
    [ "$stderr" = "vramguard: pick: asked for 5 GPUs but this host has 4" ]
}

@test "a GPU reserved by a running 'vramguard run' is skipped, and says by whom" {
    vg_require_jq
    hold_gpu 1
    vgp pick
    [ "$status" -eq 0 ]
    [ "$output" = "$U3" ]
    vgp pick --json -n 3
    [ "$status" -eq 1 ]
    [[ $stderr == *"GPU 1: reserved by another vramguard run (pid $HOLD_PID)"* ]]
    [ "$(json '.ok')" = false ]
    [ "$(json '.cuda_visible_devices')" = null ]
    [ "$(json '.gpus[] | select(.index == 1) | .reserved_by')" = "$HOLD_PID" ]
    # Looking does not get in the way: the reservation is still held, and others still work.
    [ "$(vg_stat "$HOLD_PID" state)" = S ]
    [ "$(json '.gpus[] | select(.index == 1) | .reserved_by_alive')" = true ]
    [ "$(json '.gpus[] | select(.index == 1) | .reservation_held_by')" = null ]
    kill -KILL "$HOLD_PID"
    wait "$HOLD_PID" || true
    # Its job (sleep) inherited the reservation and dies of the SIGTERM run's death sends it.
    wait_for "! reserved 1"
    vgp pick
    [ "$output" = "$U1" ]
}

@test "--wait: gives up after the timeout, or picks once a reservation is released" {
    vgp pick -n 4 --wait 300ms
    [ "$status" -eq 1 ]
    [[ $stderr == *"waiting up to 300ms"* ]]
    [[ $stderr == *"; gave up waiting" ]]

    hold_gpu 1
    env VG_HELPER_TAG="$TMP" "$VG" --nvml "$FAKE_FULL" pick -n 3 --wait 20s \
        >"$TMP/pick.out" 2>"$TMP/pick.err" &
    picker=$!
    wait_for "grep -q 'waiting up to 20s' '$TMP/pick.err'"
    kill -KILL "$HOLD_PID"
    rc=0
    wait "$picker" || rc=$?
    [ "$rc" -eq 0 ]
    [ "$(cat "$TMP/pick.out")" = "$U1,$U3,$U0" ]
    grep -q "waiting up to 20s: asked for 3 GPUs, 2 free enough (GPU 1: reserved by another vramguard run (pid $HOLD_PID)" "$TMP/pick.err"
}

@test "--format json / --json: a vramguard.pick/1 document" {
    vg_require_jq
    vgp pick -n 2 --json
    [ "$status" -eq 0 ]
    [ "$(json '.schema')" = vramguard.pick/1 ]
    [ "$(json '.ok')" = true ]
    [ "$(json '.cuda_visible_devices')" = "$U1,$U3" ]
    [ "$(json '.picked | join(",")')" = "1,3" ]
    [ "$(json '.gpus | length')" = 4 ]
    [ "$(json '[.gpus[] | .index] | join(",")')" = "1,3,0,2" ]
    [ "$(json '.gpus[3].reason')" = "too busy" ]
    [ "$(json '.gpus[3].utilization')" = 99 ]
    [ "$(json '.gpus[0].memory.free')" = $((80 * 1024 * 1024 * 1024 - 512 * 1024 * 1024)) ]
    [ "$(json '.criteria.min_free_fraction')" = 0.5 ]
    vgp pick --format json
    [ "$(json '.cuda_visible_devices')" = "$U1" ]
    vgp pick --json --format index
    [ "$status" -eq 64 ]
}

@test "unknown utilisation: fine by default, not with an explicit --max-util" {
    vg_scenario <<'EOF'
gpu index=0 uuid=GPU-aaaaaaaa-0000-0000-0000-000000000000 name=X minor=0 bus=00000000:07:00.0 total=16GiB reserved=0 used=auto util=na
EOF
    vgp pick
    [ "$status" -eq 0 ]
    vgp pick --max-util 90
    [ "$status" -eq 1 ]
    [[ $stderr == *"GPU 0: utilisation unknown"* ]]
}

@test "hostile values: one-line errors, exit 64, nothing on stdout" {
    for args in "--min-free -1" "--min-free 1e400" "--min-free 1.5" "--min-free ''" \
        "-n 0" "-n 999" "-n -1" "-n 2x" "--max-util 101" "--max-util -5" "--max-util 50.5" \
        "--format xml" "--wait forever" "--wait 30d" "--exclude 9" "--exclude GPU-zz" \
        "--exclude 1,,2" "-n" "--bogus" "extra-arg"; do
        eval "vgp pick $args"
        if [ "$status" -ne 64 ] || [ -n "$output" ] || [ "$(wc -l <<<"$stderr")" -ne 1 ] ||
            [[ $stderr != "vramguard: pick: "* ]]; then
            echo "pick $args: status $status, stdout '$output', stderr '$stderr'"
            return 1
        fi
    done
    vgp pick --min-free -1
    [ "$stderr" = "vramguard: pick: --min-free takes a size (20GiB, 512MiB) or a fraction of the total from 0 to 1 (0.5), not '-1'" ]
    vgp pick --min-free 1e400
    [[ $stderr == *"not '1e400'" ]]
    vgp pick -n 0
    [ "$stderr" = "vramguard: pick: -n takes a number of GPUs from 1 to 64, not '0'" ]
    vgp pick -n 999
    [ "$stderr" = "vramguard: pick: -n takes a number of GPUs from 1 to 64, not '999'" ]
    vgp pick --max-util 101
    [ "$stderr" = "vramguard: pick: --max-util takes a utilisation percentage from 0 to 100, not '101'" ]
    vgp pick --exclude 9
    [ "$stderr" = "vramguard: pick: --exclude: '9' is not a GPU of this host (no such GPU index; see 'vramguard status')" ]
}

@test "no driver: exit 3 in one line" {
    run --separate-stderr "$VG" --nvml "$TMP/no-such-libnvidia-ml.so.1" pick
    [ "$status" -eq 3 ]
    [ -z "$output" ]
    [ "$(wc -l <<<"$stderr")" -eq 1 ]
    [[ $stderr == "vramguard: pick: cannot read the GPUs: "* ]]
}

@test "--help documents every option" {
    vgp pick --help
    [ "$status" -eq 0 ]
    for o in --count --min-free --max-util --exclude --format --wait; do
        [[ $output == *"$o"* ]] || { echo "missing $o"; return 1; }
    done
}
