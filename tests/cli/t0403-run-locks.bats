#!/usr/bin/env bats
# t0403-run-locks: GPU reservations between concurrent `vramguard run`s: eight `--gpus auto:1`
# at once on a four-GPU host give four distinct GPUs and make the rest fail or wait, a killed
# run's GPU is free once its job is gone, the job inherits its reservations (read-only) and
# nothing else of run's, and the lock directory is not fooled by symlinks.

load lib

bats_require_minimum_version 1.5.0

setup() {
    TMP=$(vg_tmpdir)
    DEVDIR=$(vg_fake_dev)
    export VRAMGUARD_RUNTIME_DIR=$TMP/locks
    vg_scenario <<'EOF'
driver 550.54.15
gpu index=0 uuid=GPU-00000000-0000-0000-0000-000000000000 name=A minor=0 bus=00000000:07:00.0 total=80GiB reserved=512MiB used=auto util=0
gpu index=1 uuid=GPU-11111111-1111-1111-1111-111111111111 name=A minor=1 bus=00000000:0F:00.0 total=80GiB reserved=512MiB used=auto util=0
gpu index=2 uuid=GPU-22222222-2222-2222-2222-222222222222 name=A minor=2 bus=00000000:47:00.0 total=80GiB reserved=512MiB used=auto util=0
gpu index=3 uuid=GPU-33333333-3333-3333-3333-333333333333 name=A minor=3 bus=00000000:4E:00.0 total=80GiB reserved=512MiB used=auto util=0
EOF
    # The job: logs "start UUIDS" and "end UUIDS" (one O_APPEND write each), and holds its GPU
    # until $TMP/go exists (bounded: 60 s).
    cat >"$TMP/job" <<EOF
#!/bin/sh
echo "start \$CUDA_VISIBLE_DEVICES" >>"$TMP/log"
i=0
while [ ! -e "$TMP/go" ] && [ \$i -lt 1200 ]; do sleep 0.05; i=\$((i+1)); done
echo "end \$CUDA_VISIBLE_DEVICES" >>"$TMP/log"
EOF
    chmod +x "$TMP/job"
}

vgr() {
    run --separate-stderr env VG_HELPER_TAG="$TMP" "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" "$@"
}

# launch N ARGS...: start `vramguard ARGS` N times at once in the background; run i writes
# $TMP/out.i, $TMP/err.i and, once it ends, $TMP/rc.i.
launch() {
    local n=$1 i
    shift
    _vg_dir
    for ((i = 0; i < n; i++)); do
        (
            rc=0
            env VG_HELPER_TAG="$TMP" "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" "$@" \
                </dev/null >"$TMP/out.$i" 2>"$TMP/err.$i" || rc=$?
            echo "$rc" >"$TMP/rc.$i"
        ) 3>&- &
        _vg_record launcher "$!"
    done
}

count() {
    grep -c "$1" "$TMP/log" 2>/dev/null || true
}

# rcs: the exit statuses written so far, sorted, space-separated.
rcs() {
    cat "$TMP"/rc.* 2>/dev/null | sort -n | tr '\n' ' '
}

# no_overlap: replays the log; a GPU may never start while it is still in use.
no_overlap() {
    local -A busy=()
    local what uuid
    while read -r what uuid; do
        if [[ $what == start ]]; then
            if [[ -n ${busy[$uuid]:-} ]]; then
                echo "$uuid given to two jobs at once" >&2
                return 1
            fi
            busy[$uuid]=1
        else
            unset "busy[$uuid]"
        fi
    done <"$TMP/log"
}

@test "8 concurrent 'run --gpus auto:1' on 4 GPUs: 4 distinct GPUs, the other 4 fail" {
    launch 8 run -q --gpus auto:1 -- "$TMP/job"
    # The four that get no GPU fail on their own; the four that do hold on until "go".
    wait_for '[ "$(count ^start)" -eq 4 ] && [ "$(rcs)" = "1 1 1 1 " ]' 30
    [ "$(awk '/^start/ { print $2 }' "$TMP/log" | sort -u | wc -l)" -eq 4 ]
    for f in "$TMP"/err.*; do
        if [ -s "$f" ]; then
            grep -q "^vramguard: run: not enough free GPUs: asked for 1 GPU, 0 free enough (GPU 0: reserved by another vramguard run (pid [0-9]*); GPU 1: reserved" "$f"
        fi
    done
    touch "$TMP/go"
    wait_for '[ "$(rcs)" = "0 0 0 0 1 1 1 1 " ]' 30
    no_overlap
}

@test "8 concurrent 'run --gpus auto:1 --wait': 4 at a time, all 8 run in the end" {
    launch 8 run --gpus auto:1 --wait 60s -- "$TMP/job"
    wait_for '[ "$(count ^start)" -eq 4 ] && [ "$(cat "$TMP"/err.* | grep -c "waiting up to 1m")" -eq 4 ]' 30
    [ "$(awk '/^start/ { print $2 }' "$TMP/log" | sort -u | wc -l)" -eq 4 ]
    [ -z "$(rcs)" ]
    touch "$TMP/go"
    wait_for '[ "$(rcs)" = "0 0 0 0 0 0 0 0 " ]' 60
    [ "$(count ^start)" -eq 8 ]
    [ "$(count ^end)" -eq 8 ]
    no_overlap
}

@test "explicit --gpus: a GPU another run holds fails at once, or is waited for" {
    launch 1 run -q --gpus 2 -- "$TMP/job"
    wait_for '[ "$(count ^start)" -eq 1 ]'
    vgr run --gpus 1,2 -- true
    [ "$status" -eq 1 ]
    [[ $stderr == "vramguard: run: not enough free GPUs: GPU 2 (A, GPU-22222222-2222-2222-2222-222222222222) is reserved by another vramguard run (pid "[0-9]*"); --wait TIMEOUT waits for them" ]]
    # GPU 1 was not kept reserved by the failed attempt.
    vgr run -q --gpus 1 -- true
    [ "$status" -eq 0 ]
    (sleep 0.3; touch "$TMP/go") &
    vgr run -q --gpus 2 --wait 30s -- sh -c 'echo "$CUDA_VISIBLE_DEVICES"'
    [ "$status" -eq 0 ]
    [ "$output" = GPU-22222222-2222-2222-2222-222222222222 ]
    wait
}

@test "kill -9 of run: its job is told to stop, and the GPU is free once the job is gone" {
    launch 1 run -q --gpus 0 -- "$TMP/job"
    wait_for '[ "$(count ^start)" -eq 1 ]'
    runpid=$(awk '$1 == "launcher" { print $2 }' "$(vg_tmpdir)/.state/pids")
    vgpid=
    for c in $(cat /proc/"$runpid"/task/*/children); do
        if [ "$(vg_stat "$c" comm)" = vramguard ]; then vgpid=$c; fi
    done
    [ -n "$vgpid" ]
    # run's children: the job, and in cgroup mode its guard.
    job=
    for c in $(cat /proc/"$vgpid"/task/*/children); do
        if [ "$(vg_stat "$c" comm)" != vramguard-guard ]; then job=$c; fi
    done
    [ -n "$job" ]
    vgr run -q --gpus 0 -- true
    [ "$status" -eq 1 ]
    kill -KILL "$vgpid"
    wait_for "vg_gone $vgpid"
    # PR_SET_PDEATHSIG: the job's main process got SIGTERM when run died, and its end (with
    # whatever it started) ends the reservation it inherited (t0405 for a job that ignores it).
    wait_for "vg_gone $job"
    vgr run -q --gpus 0 --wait 30s -- sh -c 'echo "$CUDA_VISIBLE_DEVICES"'
    [ "$status" -eq 0 ]
    [ "$output" = GPU-00000000-0000-0000-0000-000000000000 ]
    [ "$(count ^end)" -eq 0 ] # told to stop, it never finished its work
}

@test "the job inherits its reservations, read-only, and nothing else of run's" {
    vgr run -q --gpus 0,3 -- sh -c 'for f in /proc/$$/fd/*; do
        printf "%s %s\n" "$(readlink "$f" || :)" "$(awk "/^flags:/ { print \$2 }" "/proc/$$/fdinfo/${f##*/}")"
    done'
    [ "$status" -eq 0 ]
    locks=$(grep -F "$VRAMGUARD_RUNTIME_DIR" <<<"$output")
    [ "$(wc -l <<<"$locks")" -eq 2 ]
    grep -qx "$VRAMGUARD_RUNTIME_DIR/GPU-00000000-0000-0000-0000-000000000000 [0-7]*" <<<"$locks"
    grep -qx "$VRAMGUARD_RUNTIME_DIR/GPU-33333333-3333-3333-3333-333333333333 [0-7]*" <<<"$locks"
    # Opened O_RDONLY (the access mode is the flags' last octal digit), without O_CLOEXEC.
    while read -r path flags; do
        [ $((8#$flags & 3)) -eq 0 ] || { echo "$path is writable ($flags)"; return 1; }
    done <<<"$locks"
    [[ $output != *signalfd* ]]
    [[ $output != *cgroup* ]]
    # The file still tells people who took the lock; the job cannot change that.
    [[ $(cat "$VRAMGUARD_RUNTIME_DIR/GPU-00000000-0000-0000-0000-000000000000") =~ ^[0-9]+$ ]]
}

@test "the lock directory: created 0700, refused when it is a symlink or writable by all" {
    vgr run -q -- true
    [ "$status" -eq 0 ]
    [ "$(stat -c %a "$VRAMGUARD_RUNTIME_DIR")" = 700 ]
    [ -f "$VRAMGUARD_RUNTIME_DIR/GPU-00000000-0000-0000-0000-000000000000" ]

    mkdir "$TMP/elsewhere"
    ln -s "$TMP/elsewhere" "$TMP/link"
    VRAMGUARD_RUNTIME_DIR=$TMP/link vgr run -q -- true
    [ "$status" -eq 1 ]
    [ "$stderr" = "vramguard: run: the lock directory '$TMP/link' is not a directory (a symlink?); remove it" ]

    chmod 0777 "$VRAMGUARD_RUNTIME_DIR"
    vgr run -q -- true
    [ "$status" -eq 1 ]
    [[ $stderr == *"is writable by others without the sticky bit: refusing to use it" ]]

    chmod 0700 "$VRAMGUARD_RUNTIME_DIR"
    ln -sf /etc/passwd "$VRAMGUARD_RUNTIME_DIR/GPU-11111111-1111-1111-1111-111111111111"
    vgr run -q --gpus 1 -- true
    [ "$status" -eq 1 ]
    [[ $stderr == *"cannot open the lock file"*"GPU-11111111-1111-1111-1111-111111111111': it is a symlink" ]]
    VRAMGUARD_RUNTIME_DIR=relative vgr run -q -- true
    [ "$status" -eq 1 ]
    [[ $stderr == *"VRAMGUARD_RUNTIME_DIR must be an absolute path, not 'relative'" ]]
}

@test "SIGINT while waiting for a GPU: exit 130, the job never started" {
    launch 1 run -q --gpus 0 -- "$TMP/job"
    wait_for '[ "$(count ^start)" -eq 1 ]'
    env --default-signal=INT VG_HELPER_TAG="$TMP" "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" \
        run --gpus 0 --wait 1h -- touch "$TMP/ran" </dev/null >/dev/null 2>"$TMP/w.err" 3>&- &
    waiter=$!
    _vg_record launcher "$waiter"
    wait_for "grep -q 'waiting up to 1h' '$TMP/w.err'"
    kill -INT "$waiter"
    rc=0
    wait "$waiter" || rc=$?
    [ "$rc" -eq 130 ]
    [ "$(tail -n 1 "$TMP/w.err")" = "vramguard: run: interrupted (Interrupt) while waiting for GPUs" ]
    [ ! -e "$TMP/ran" ]
    touch "$TMP/go"
}
