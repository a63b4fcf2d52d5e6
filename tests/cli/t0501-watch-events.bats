#!/usr/bin/env bats
# t0501-watch-events: `vramguard watch` reports each change once, while the test changes the
# world under it (the fake driver re-reads its scenario; real processes hold device nodes):
# the first sample as present events, then holders appearing and leaving, memory moving past
# the threshold, findings opening and closing, GPUs lost, back and new; silence when nothing
# changes; JSON lines; --once; usage errors.

load lib
load watch

setup() {
    DEVDIR=$(vg_fake_dev)
    TMP=$(vg_tmpdir)
}

teardown() {
    watch_teardown
}

@test "the first sample is reported as present events, then nothing while nothing changes" {
    A=$(vg_spawn --open "$(dev 1)" -- python train.py)
    host "proc gpu=1 pid=$A type=compute mem=2GiB sm=60"
    watch_start
    wait_line "holder-present PID $A on GPU 1 (GPU-11111111): 2 GiB, $VG_USER: "
    [ "$(nlines 'gpu-present GPU 0 NVIDIA A100-SXM4-80GB (GPU-00000000): 0 B of 80 GiB used')" -eq 1 ]
    [ "$(nlines 'gpu-present GPU 1 NVIDIA A100-SXM4-80GB (GPU-11111111): 2 GiB of 80 GiB used')" -eq 1 ]
    [[ $(grep -F holder-present "$WOUT") == *"python train.py"* ]]
    # Every line: an ISO time in UTC, the event, the message.
    while read -r line; do
        [[ $line =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z\ [a-z-]+\ . ]]
    done <"$WOUT"
    n=$(wc -l <"$WOUT")
    wait_samples 5
    [ "$(wc -l <"$WOUT")" -eq "$n" ]
    # The details came from the cache after the first sample.
    [[ $(tail -n 1 "$WERR") =~ cache\ [1-9][0-9]*\ hits ]]
}

@test "a holder appears, its memory moves past the threshold, it leaves: one event each" {
    A=$(vg_spawn --open "$(dev 1)" -- python train.py)
    host "proc gpu=1 pid=$A type=compute mem=2GiB sm=60"
    watch_start --threshold 100MiB
    wait_line holder-present
    # B opens GPU 0's node first (a process with a context holds it), then the driver lists it:
    # it appears through the node holding nothing of its own, then allocates
    B=$(vg_spawn --open "$(dev 0)" -- python eval.py)
    wait_line "holder-appeared PID $B on GPU 0 (GPU-00000000): device node only, $VG_USER: "
    host "proc gpu=1 pid=$A type=compute mem=2GiB sm=60" "proc gpu=0 pid=$B type=compute mem=1GiB sm=60"
    wait_line "holder-memory PID $B on GPU 0 (GPU-00000000): 0 B -> 1 GiB (+1 GiB), $VG_USER: "
    # below the threshold: nothing
    host "proc gpu=1 pid=$A type=compute mem=2GiB sm=60" "proc gpu=0 pid=$B type=compute mem=1074MiB sm=60"
    wait_samples 4
    [ "$(nlines holder-memory)" -eq 1 ]
    # past it: once, from the figure last reported
    host "proc gpu=1 pid=$A type=compute mem=2GiB sm=60" "proc gpu=0 pid=$B type=compute mem=3GiB sm=60"
    wait_line "holder-memory PID $B on GPU 0 (GPU-00000000): 1 GiB -> 3 GiB (+2 GiB), $VG_USER: "
    # the driver forgets its context (it still holds the node), then the process exits
    host "proc gpu=1 pid=$A type=compute mem=2GiB sm=60"
    wait_line "holder-memory PID $B on GPU 0 (GPU-00000000): 3 GiB -> 0 B (-3 GiB), $VG_USER: "
    kill -KILL "$B"
    wait_line "holder-left PID $B left GPU 0 (GPU-00000000): it held device node only, $VG_USER: "
    wait_samples 4
    [ "$(nlines "holder-appeared PID $B")" -eq 1 ]
    [ "$(nlines holder-memory)" -eq 3 ]
    [ "$(nlines holder-left)" -eq 1 ]
    [ "$(nlines "PID $A")" -eq 1 ]
}

@test "a device-node-only holder is reported by minor number; its first allocation too" {
    host
    watch_start
    wait_line gpu-present 2
    W=$(vg_spawn --open "$(dev 0)" -- python worker)
    wait_line "holder-appeared PID $W on GPU 0 (GPU-00000000): device node only, $VG_USER: "
    # the driver now lists it with memory: same holder, its memory moved from none
    host "proc gpu=0 pid=$W type=compute mem=1GiB"
    wait_line "holder-memory PID $W on GPU 0 (GPU-00000000): 0 B -> 1 GiB (+1 GiB), $VG_USER: "
    [ "$(nlines "holder-appeared PID $W")" -eq 1 ]
    # a node no GPU has: named by its path
    X=$(vg_spawn --open "$DEVDIR/nvidia7" -- stray)
    wait_line "holder-appeared PID $X on /dev/nvidia7: device node only"
}

@test "findings open and close once; present at the first sample" {
    # 4000000: a PID the driver reports and /proc does not show (foreign-pid)
    host "proc gpu=0 pid=4000000 type=compute mem=1GiB"
    watch_start
    wait_line "finding-present WARNING foreign-pid: the driver reports PID 4000000 holding 1 GiB"
    host "proc gpu=0 pid=4000000 type=compute mem=1GiB" "proc gpu=1 pid=4000001 type=compute mem=2GiB"
    wait_line "finding-opened WARNING foreign-pid: the driver reports PID 4000001"
    host "proc gpu=1 pid=4000001 type=compute mem=2GiB"
    wait_line "finding-closed foreign-pid: the driver reports PID 4000000"
    wait_samples 4
    [ "$(nlines foreign-pid)" -eq 3 ]
    [ "$(nlines finding-closed)" -eq 1 ]
}

@test "a GPU is lost and comes back; a new GPU appears; one that disappears is lost" {
    host
    watch_start
    wait_line gpu-present 2
    # NVML_ERROR_GPU_IS_LOST (15) on GPU 1's memory call
    host "error func=nvmlDeviceGetMemoryInfo_v2 gpu=1 code=15"
    wait_line "gpu-lost CRITICAL GPU 1 NVIDIA A100-SXM4-80GB (GPU-11111111) is lost"
    host
    wait_line "gpu-back GPU 1 NVIDIA A100-SXM4-80GB (GPU-11111111) is back: 0 B of 80 GiB used"
    host "gpu index=2 uuid=$U2 name=\"Tesla T4\" minor=3 total=15GiB reserved=256MiB util=0"
    wait_line "gpu-appeared GPU 2 Tesla T4 (GPU-22222222): 0 B of 15 GiB used"
    host
    wait_line "gpu-lost CRITICAL GPU 2 Tesla T4 (GPU-22222222) is no longer listed by the driver"
    host "gpu index=2 uuid=$U2 name=\"Tesla T4\" minor=3 total=15GiB reserved=256MiB util=0"
    wait_line "gpu-back GPU 2 Tesla T4 (GPU-22222222)"
    wait_samples 4
    [ "$(nlines gpu-lost)" -eq 2 ]
    [ "$(nlines gpu-back)" -eq 2 ]
    [ "$(nlines gpu-appeared)" -eq 1 ]
}

@test "--format json: one vramguard.event/1 object per line, every field present" {
    vg_require_jq
    A=$(vg_spawn --open "$(dev 1)" -- python train.py)
    host "proc gpu=1 pid=$A type=compute mem=2GiB"
    watch_start --format json
    wait_line '"event":"holder-present"'
    host "proc gpu=1 pid=$A type=compute mem=4GiB"
    wait_line '"event":"holder-memory"'
    fields='["alert","command","driver_error","event","expect","gpu","gpu_uuid","gpus","memory","message","mig_device","pid","pids","previous_memory","rule","sample","schema","severity","time","user"]'
    while read -r line; do
        jq -e --argjson f "$fields" '(keys == $f) and .schema == "vramguard.event/1"' <<<"$line" >/dev/null
    done <"$WOUT"
    ev=$(grep '"holder-memory"' "$WOUT")
    jq -e --argjson a "$A" --arg u "$U1" --arg user "$VG_USER" '.pid == $a and .pids == [$a] and .gpu == 1 and
        .gpus == [1] and .gpu_uuid == $u and .memory == 4294967296 and
        .previous_memory == 2147483648 and .user == $user and .severity == "info" and
        .rule == null and .alert == null and .mig_device == null and (.sample > 1)' <<<"$ev"
    # --json means --format json
    watch_stop
    watch_start --json --once
    wait_for "! kill -0 $WPID 2>/dev/null"
    jq -e '.schema == "vramguard.event/1"' <"$(head -n 1 "$WOUT" >"$TMP/first"; echo "$TMP/first")"
}

@test "--full-scan 0: every sample is a full scan; by default a steady state scans incrementally" {
    A=$(vg_spawn --open "$(dev 1)" -- python train.py)
    host "proc gpu=1 pid=$A type=compute mem=2GiB sm=60"
    watch_start --full-scan 0
    wait_samples 5
    watch_stop
    [ "$WSTATUS" -eq 0 ]
    n=$(samples)
    [ "$(grep -c 'watch: sample [0-9]*: .*; full scan (incremental scans are off); ' "$WERR")" -eq "$n" ]
    [ "$(grep -c '; incremental scan (' "$WERR")" -eq 0 ]
    # Defaults: the first sample is a full scan, then nothing opens a device node, so later
    # samples carry the unchanged processes over.
    watch_start
    wait_line 'incremental scan (' 1 "$WERR"
    [[ $(grep -m 1 'watch: sample 1:' "$WERR") == *"; full scan (first scan); "* ]]
    wait_samples 3
    [[ $(grep 'watch: sample [0-9]*:' "$WERR" | tail -n 1) == *"; incremental scan ("*" processes carried over, 0 named openers read); "* ]]
    [ "$(nlines "holder-present PID $A")" -eq 1 ]
    [ "$(nlines holder-left)" -eq 0 ]
}

# full_scans: samples so far that were full scans for the reason given (a prefix).
full_scans() {
    grep -c "watch: sample [0-9]*: .*; full scan ($1" "$WERR" || true
}

@test "a process that keeps opening the nodes (an NVML poller) is named by fanotify and read alone; without CAP_SYS_ADMIN each open forces full scans" {
    [[ $(id -u) -eq 0 ]] || skip "needs root (fanotify names openers only with CAP_SYS_ADMIN)"
    A=$(vg_spawn --open "$(dev 1)" -- python train.py)
    host "proc gpu=1 pid=$A type=compute mem=2GiB sm=60"
    # The poller and a late holder exist before the watch starts, so the watch carries them
    # over; the poller opens GPU 0's node five times a second, the holder once, when told.
    (while :; do : <"$(dev 0)"; sleep 0.2; done) </dev/null >/dev/null 2>&1 3>&- &
    P=$!
    _vg_record poller "$P"
    (while [ ! -e "$TMP/go" ]; do sleep 0.1; done; exec 7<"$(dev 0)"; exec sleep 600) </dev/null >/dev/null 2>&1 3>&- &
    L=$!
    _vg_record late "$L"
    watch_start --full-scan 1h
    wait_line 'vramguard: watch: device-node opens: fanotify (openers named)' 1 "$WERR"
    wait_samples 15
    [ "$(full_scans)" -eq 1 ] && [ "$(full_scans 'first scan')" -eq 1 ]
    grep -Eq 'incremental scan \([0-9]+ of [0-9]+ processes carried over, [1-9][0-9]* named openers read\)' "$WERR"
    # the late holder opens and keeps the node: found at once, still without a full scan
    touch "$TMP/go"
    wait_line "holder-appeared PID $L on GPU 0 (GPU-00000000): device node only, $VG_USER: "
    [ "$(full_scans)" -eq 1 ]
    watch_stop
    [ "$WSTATUS" -eq 0 ]

    # The same without CAP_SYS_ADMIN (root otherwise): opens are seen but not named, so the
    # poller's opens make full scans.
    rm -f "$TMP/go"
    printf '#!/bin/sh\nexec setpriv --bounding-set=-sys_admin --inh-caps=-sys_admin "%s" "$@"\n' "$VG" >"$TMP/vg-nocap"
    chmod +x "$TMP/vg-nocap"
    VG=$TMP/vg-nocap watch_start --full-scan 1h
    wait_line 'vramguard: watch: device-node opens: inotify (openers not named: fanotify names openers only with CAP_SYS_ADMIN)' 1 "$WERR"
    wait_for "[ \$(full_scans 'a device node was opened') -ge 2 ]" 30
    watch_stop
    [ "$WSTATUS" -eq 0 ]
}

@test "--once: the present events, exit 0; without a driver: a driver-error event" {
    A=$(vg_spawn --open "$(dev 1)" -- python train.py)
    host "proc gpu=1 pid=$A type=compute mem=2GiB"
    run --separate-stderr "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" watch --once
    [ "$status" -eq 0 ]
    [ "${#lines[@]}" -eq 3 ]
    [[ ${lines[2]} == *"holder-present PID $A on GPU 1"* ]]
    unset FAKE_NVML_SCENARIO
    run --separate-stderr "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" watch --once
    [ "$status" -eq 0 ]
    [[ ${lines[0]} == *" driver-error WARNING cannot initialise NVML from "* ]]
    [[ $output == *"holder-present PID $A on /dev/nvidia1: device node only"* ]]
}

@test "bad usage: exit 64 and one line on stderr" {
    for args in "--interval 0" "--interval 1x" "--threshold lots" "--expect 0" "--expect 0=" \
        "--expect 0=none,alice" "--expect =alice" "--format xml" "--exec-timeout 0" \
        "--idle-after never" "--full-scan -1" "--full-scan 1x" "--full-scan 2d" "--bogus" "extra" \
        "--exec '' " "--exec \"'unbalanced\""; do
        eval "run --separate-stderr \"\$VG\" watch $args"
        echo "watch $args: $status '$stderr'"
        [ "$status" -eq 64 ]
        [ -z "$output" ]
        [ "${#stderr_lines[@]}" -eq 1 ]
        [[ $stderr == "vramguard: watch: "* ]]
    done
    run --separate-stderr "$VG" watch --expect 0=alice --expect 0=bob
    [ "$status" -eq 64 ]
    [[ $stderr == *"already has an expectation"* ]]
}

@test "--help documents every option" {
    run --separate-stderr "$VG" watch --help
    [ "$status" -eq 0 ]
    for o in --interval --expect --threshold --exec --shell --exec-timeout --format --idle-after \
        --full-scan --config --once --nvml-timeout; do
        [[ $output == *"  $o"* ]] || { echo "missing $o"; return 1; }
    done
}
