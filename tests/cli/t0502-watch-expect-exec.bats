#!/usr/bin/env bats
# t0502-watch-expect-exec: expectations (--expect) raise alerts for unexpected holders only,
# gpu-not-empty for memory nobody listed holds on a GPU expected empty, cleared when resolved;
# --exec runs per alert without a shell (--shell to ask for one), with the details in
# VRAMGUARD_* variables and the JSON event on stdin, under a timeout, with a bound on how many
# run at once; the config file (strict, FILE:LINE errors) and SIGHUP; idle-holder.

load lib
load watch

setup() {
    DEVDIR=$(vg_fake_dev)
    TMP=$(vg_tmpdir)
}

teardown() {
    watch_teardown
}

# A recorder for --exec: appends its arguments, its VRAMGUARD_* environment and its stdin to
# $TMP/exec.log, one block per run.
recorder() {
    cat >"$TMP/record" <<EOF
#!/bin/sh
{
    echo "=== run"
    for a in "\$@"; do echo "arg: \$a"; done
    env | grep '^VRAMGUARD_' | sort
    echo "stdin: \$(cat)"
} >>"$TMP/exec.log"
EOF
    chmod +x "$TMP/record"
    printf '%s\n' "$TMP/record"
}

@test "alerts fire for unexpected holders only, once, and clear when resolved" {
    A=$(vg_spawn --open "$(dev 1)" -- python train.py)
    B=$(vg_spawn --open "$(dev 1)" -- python intruder.py)
    C=$(vg_spawn --open "$(dev 0)" -- python small.py)
    # GPU 1 may carry A only; GPU 0 nothing. B is unexpected on GPU 1 (warning); C holds less
    # than the threshold on GPU 0 (no alert yet).
    host "proc gpu=1 pid=$A type=compute mem=20GiB" "proc gpu=1 pid=$B type=compute mem=1GiB" \
        "proc gpu=0 pid=$C type=compute mem=5MiB"
    watch_start --expect 1="$A" --expect 0=none --threshold 10MiB
    wait_line "alert WARNING GPU 1 (GPU-11111111) may carry only PID $A (expect 1=$A): PID $B holds 1 GiB, $VG_USER: "
    wait_samples 3
    [ "$(nlines ' alert ')" -eq 1 ]
    # C grows past the threshold on the GPU that should be empty: critical
    host "proc gpu=1 pid=$A type=compute mem=20GiB" "proc gpu=1 pid=$B type=compute mem=1GiB" \
        "proc gpu=0 pid=$C type=compute mem=2GiB"
    wait_line "alert CRITICAL GPU 0 (GPU-00000000) should be empty (expect 0=none): PID $C holds 2 GiB, $VG_USER: "
    # B goes: its alert clears; A never raises one
    host "proc gpu=1 pid=$A type=compute mem=20GiB" "proc gpu=0 pid=$C type=compute mem=2GiB"
    wait_line "alert-cleared GPU 1 (GPU-11111111) may carry only PID $A (expect 1=$A): PID $B"
    wait_samples 3
    [ "$(nlines ' alert ')" -eq 2 ]
    [ "$(nlines alert-cleared)" -eq 1 ]
    [ "$(grep -F ' alert ' "$WOUT" | grep -c "PID $A holds")" -eq 0 ]
}

@test "users: a user's processes are expected, anyone else's are not; gpu-not-empty" {
    A=$(vg_spawn --open "$(dev 1)" -- python train.py)
    host "proc gpu=1 pid=$A type=compute mem=2GiB" "proc gpu=1 pid=4000000 type=compute mem=1GiB"
    watch_start --expect "1=$VG_USER" --expect "$U0"=none --once
    wait_for "! kill -0 $WPID 2>/dev/null"
    [ "$(nlines ' alert ')" -eq 1 ]
    [ "$(nlines "alert WARNING GPU 1 (GPU-11111111) may carry only $VG_USER (expect 1=$VG_USER): PID 4000000 holds 1 GiB, not in this /proc")" -eq 1 ]
    # Memory on a GPU expected empty that no listed process holds: gpu-not-empty
    vg_scenario <<EOF
gpu index=0 uuid=$U0 name="NVIDIA A100-SXM4-80GB" minor=2 total=80GiB reserved=512MiB used=3GiB util=0
EOF
    run --separate-stderr "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" watch --once --expect 0=none
    [ "$status" -eq 0 ]
    [[ $output == *"alert CRITICAL GPU 0 (GPU-00000000) should be empty (expect 0=none) but 3 GiB of 80 GiB is used, and no process the driver lists holds more than the threshold"* ]]
    # an expectation naming no GPU is said once on stderr
    run --separate-stderr "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" watch --once --expect 5=none
    [ "$status" -eq 0 ]
    [ "$stderr" = "vramguard: watch: expect 5=none: no GPU with that index" ]
}

@test "--exec: the details in VRAMGUARD_* variables, the JSON event on stdin, no shell" {
    vg_require_jq
    rec=$(recorder)
    A=$(vg_spawn --open "$(dev 0)" -- python train.py --lr 3e-4)
    host "proc gpu=0 pid=$A type=compute mem=3GiB"
    # $HOME and ';' reach the command as they are: there is no shell
    watch_start --expect 0=none --exec "$rec 'two words' \$HOME;x"
    wait_for "[ -s $TMP/exec.log ] && grep -q '^stdin: ' $TMP/exec.log"
    log=$(cat "$TMP/exec.log")
    echo "$log"
    [[ $log == *"arg: two words"$'\n'"arg: \$HOME;x"* ]]
    [[ $log == *"VRAMGUARD_EVENT=alert"* ]]
    [[ $log == *"VRAMGUARD_ALERT=unexpected-holder"* ]]
    [[ $log == *"VRAMGUARD_SEVERITY=critical"* ]]
    [[ $log == *"VRAMGUARD_GPU=0"* ]]
    [[ $log == *"VRAMGUARD_GPU_UUID=$U0"* ]]
    [[ $log == *"VRAMGUARD_PID=$A"* ]]
    [[ $log == *"VRAMGUARD_USER=$VG_USER"* ]]
    [[ $log == *"VRAMGUARD_MEMORY=3221225472"* ]]
    [[ $log == *"VRAMGUARD_EXPECT=0=none"* ]]
    [[ $log == *"VRAMGUARD_COMMAND="*"python train.py --lr 3e-4"* ]]
    [[ $log == *"VRAMGUARD_MESSAGE=GPU 0 (GPU-00000000) should be empty (expect 0=none): PID $A holds 3 GiB"* ]]
    [[ $log =~ VRAMGUARD_TIME=[0-9]{4}-[0-9]{2}-[0-9]{2}T ]]
    json=$(sed -n 's/^stdin: //p' "$TMP/exec.log")
    jq -e --argjson a "$A" '.schema == "vramguard.event/1" and .event == "alert" and
        .pid == $a and .gpu == 0 and .memory == 3221225472 and .alert == "unexpected-holder"' <<<"$json"
    # one alert, one run, even after more samples
    wait_samples 4
    [ "$(grep -c '^=== run' "$TMP/exec.log")" -eq 1 ]
    # the command's own output goes to stderr, never into the event stream
    [ "$(grep -vc '^20' "$WOUT")" -eq 0 ]
}

@test "--exec --shell runs it through /bin/sh -c; inherited VRAMGUARD_* variables are not passed" {
    A=$(vg_spawn --open "$(dev 0)" -- python x.py)
    host "proc gpu=0 pid=$A type=compute mem=3GiB"
    VRAMGUARD_STALE=1 watch_start --expect 0=none --shell \
        --exec "echo \"pid=\$VRAMGUARD_PID stale=\${VRAMGUARD_STALE:-unset}\" >> $TMP/shell.log"
    wait_for "[ -s $TMP/shell.log ]"
    [ "$(cat "$TMP/shell.log")" = "pid=$A stale=unset" ]
}

@test "--exec-timeout: a command that hangs is killed and reported; sampling goes on meanwhile" {
    A=$(vg_spawn --open "$(dev 0)" -- python x.py)
    host "proc gpu=0 pid=$A type=compute mem=3GiB"
    printf '#!/bin/sh\nexec sleep 60\n' >"$TMP/hang"
    chmod +x "$TMP/hang"
    watch_start --expect 0=none --exec "$TMP/hang" --exec-timeout 300ms
    wait_line "did not finish within 300 ms and was killed" 1 "$WERR"
    # nothing is left running from it
    wait_for "! pgrep -f '^sleep 60\$' -P $WPID >/dev/null"
    B=$(vg_spawn --open "$(dev 1)" -- python y.py)
    wait_line "holder-appeared PID $B"
}

@test "more alerts than may run at once: the excess is dropped with a counted warning" {
    lines=()
    for i in 1 2 3 4 5 6 7 8 9 10; do lines+=("proc gpu=0 pid=$((4000000 + i)) type=compute mem=1GiB"); done
    host "${lines[@]}"
    watch_start --expect 0=none --exec "sleep 60" --exec-timeout 30s
    wait_line "alert command not run: 8 already running (2 dropped so far)" 1 "$WERR"
    [ "$(nlines ' alert ')" -eq 10 ]
    # sampling goes on while they run
    wait_samples 3
}

@test "the config file is equivalent to the flags; flags win; strict errors name FILE:LINE" {
    A=$(vg_spawn --open "$(dev 0)" -- python x.py)
    host "proc gpu=0 pid=$A type=compute mem=3GiB"
    cat >"$TMP/watch.conf" <<EOF
# vramguard watch configuration
interval = 200ms
threshold = 1GiB
expect = 0=none
expect = 1=$VG_USER,uid:1000
format = json
exec_timeout = 5s
idle_after = 2h
shell = false
nvml_timeout = 2s
full_scan = 30s
EOF
    run --separate-stderr "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" watch --config "$TMP/watch.conf" --once
    [ "$status" -eq 0 ]
    [[ $output == *'"event":"alert"'* ]]
    # a flag wins over the file; expect flags replace the file's expect lines
    run --separate-stderr "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" watch --config "$TMP/watch.conf" \
        --once --format text --expect "0=$VG_USER"
    [ "$status" -eq 0 ]
    [[ $output == *"holder-present PID $A"* ]]
    [[ $output != *alert* ]]
    for bad in "colour = red|unknown key 'colour'" "interval = 1x|interval takes a duration" \
        "full_scan = -5s|full_scan takes a duration" \
        "just words|expected 'key = value'" "threshold=|'threshold' has no value" \
        "interval = 1s
interval = 2s|'interval' is given twice (first on line 2)" "expect = 0=alice,none|none cannot be combined"; do
        printf '# comment\n%s\n' "${bad%%|*}" >"$TMP/bad.conf"
        run --separate-stderr "$VG" watch --config "$TMP/bad.conf" --once
        echo "$bad: $status $stderr"
        [ "$status" -eq 64 ]
        [[ $stderr == "vramguard: watch: $TMP/bad.conf:"[23]": "*"${bad#*|}"* ]]
    done
    # the shipped example parses
    run --separate-stderr "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" watch \
        --config "$ROOT/contrib/vramguard/watch.conf" --once
    [ "$status" -eq 0 ]
    [ -z "$stderr" ]
    run --separate-stderr "$VG" watch --config "$TMP/missing.conf" --once
    [ "$status" -eq 64 ]
    [[ $stderr == "vramguard: watch: $TMP/missing.conf: cannot read: No such file or directory" ]]
}

@test "SIGHUP reads the config file again; a broken one is refused and the old one kept" {
    A=$(vg_spawn --open "$(dev 0)" -- python x.py)
    host "proc gpu=0 pid=$A type=compute mem=3GiB"
    printf 'expect = 0=none\n' >"$TMP/watch.conf"
    watch_start --config "$TMP/watch.conf"
    wait_line "alert CRITICAL GPU 0 (GPU-00000000) should be empty"
    printf 'expect = 0=%s\n' "$A" >"$TMP/watch.conf"
    kill -HUP "$WPID"
    wait_line "alert-cleared GPU 0 (GPU-00000000) should be empty"
    wait_line "SIGHUP: configuration read again from '$TMP/watch.conf'" 1 "$WERR"
    printf 'expect = 0=none\nbogus = 1\n' >"$TMP/watch.conf"
    kill -HUP "$WPID"
    wait_line "$TMP/watch.conf:2: unknown key 'bogus'" 1 "$WERR"
    wait_line "keeping the configuration in effect" 1 "$WERR"
    wait_samples 3
    [ "$(nlines ' alert ')" -eq 1 ]
    kill -0 "$WPID"
    # full_scan is the sampler's: a new value waits for a restart, and the log says so
    printf 'expect = 0=%s\nfull_scan = 0\n' "$A" >"$TMP/watch.conf"
    kill -HUP "$WPID"
    wait_line "SIGHUP: configuration read again from '$TMP/watch.conf' (full_scan takes effect at the next start)" 1 "$WERR"
    wait_samples 2
    [[ $(grep 'watch: sample [0-9]*:' "$WERR" | tail -n 1) != *"incremental scans are off"* ]]
}

@test "idle-holder: memory held with no utilisation for --idle-after opens a finding; work closes it" {
    A=$(vg_spawn --open "$(dev 1)" -- python notebook.py)
    host "proc gpu=1 pid=$A type=compute mem=2GiB sm=0"
    watch_start --idle-after 300ms
    wait_line "finding-opened INFO idle-holder: PID $A"
    host "proc gpu=1 pid=$A type=compute mem=2GiB sm=35"
    wait_line "finding-closed idle-holder: PID $A"
    wait_samples 3
    [ "$(nlines idle-holder)" -eq 2 ]
}
