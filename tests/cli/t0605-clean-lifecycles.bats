#!/usr/bin/env bats
# t0605-clean-lifecycles: what `clean --force` without filters actually signals on a host where
# sure leftovers live beside everything that only looks like one (docs/diagnoses.md). Every
# helper logs each signal it receives (--signal-log), so the test sees who was signalled, not
# only what vramguard says it did. And a PID the driver still lists after its process exited,
# now reused by an unrelated process, is never touched, even when a filter names its GPU.

load lib
load clean

setup() {
    vg_fake_dev >/dev/null
    TMP=$(vg_tmpdir)
    LOG=$TMP/signals
}

# start NAME ARGS...: vg-helper logging its signals; sets NAME=pid and NAME_START.
start() {
    local name=$1
    shift
    vg_spawn --signal-log "$LOG" "$@" >/dev/null
    printf -v "$name" '%s' "$VG_PID"
    printf -v "${name}_START" '%s' "$(vg_stat "$VG_PID" starttime)"
}

untouched() {
    local pid=$1 start=$2
    alive_as_before "$pid" "$start" || { echo "PID $pid is gone or changed"; return 1; }
    [ -z "$(vg_signals "$pid" "$LOG")" ] || { echo "PID $pid got: $(vg_signals "$pid" "$LOG")"; return 1; }
}

@test "clean --force without filters signals the sure leftovers and nothing else" {
    MP='from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=5, pipe_handle=7)'
    # Sure leftovers: a DataLoader worker and a multiprocessing child of dead main processes.
    start L1 --pgrp --orphan --comm pt_data_worker --open "$DEVDIR/nvidia0" -- python train.py
    start L2 --pgrp --orphan --open "$DEVDIR/nvidia1" -- /usr/bin/python3 -c "$MP" --multiprocessing-fork
    # Only looking like one: a working nohup job (and its worker), a forking daemon, a service,
    # a stopped worker of a dead job, a working leftover, a Jupyter-style kernel under its live
    # server, and a live worker of a live job.
    start N1 --setsid --orphan --own-group --ignore-hup --busy 30 --children 1 --open "$DEVDIR/nvidia1" -- python nohup.py
    N1W=${VG_CHILD_PIDS[0]}
    N1W_START=$(vg_stat "$N1W" starttime)
    start N2 --setsid --orphan --open "$DEVDIR/nvidia0" -- /usr/sbin/mydaemon
    VG_HELPER_TAG=$_VG_TAG setsid -f "$HELPER" --pidfile "$TMP/svc" --signal-log "$LOG" \
        --open "$DEVDIR/nvidia0" -- /usr/bin/myservice </dev/null >/dev/null 2>&1 3>&-
    wait_for "[[ -s $TMP/svc ]]"
    N3=$(vg_role main "$TMP/svc")
    _vg_record service "$N3"
    N3_START=$(vg_stat "$N3" starttime)
    start N4 --pgrp --orphan --comm pt_data_worker --open "$DEVDIR/nvidia1" -- python stopped.py
    kill -STOP "$N4"
    wait_for "[ \"\$(vg_stat $N4 state)\" = T ]"
    start N5 --pgrp --orphan --comm pt_data_worker --busy 40 --open "$DEVDIR/nvidia0" -- python busy.py
    VG_HELPER_TAG=$_VG_TAG bash -c 'setsid "$0" --pidfile "$1" --signal-log "$2" --open "$3" \
        -- python -m ipykernel_launcher & wait' "$HELPER" "$TMP/kernel" "$LOG" "$DEVDIR/nvidia1" \
        </dev/null >/dev/null 2>&1 &
    _vg_record server "$!"
    wait_for "[[ -s $TMP/kernel ]]"
    N6=$(vg_role main "$TMP/kernel")
    N6_START=$(vg_stat "$N6" starttime)
    start N7 --children 1 --open "$DEVDIR/nvidia0" -- python live.py
    N7W=${VG_CHILD_PIDS[0]}
    N7W_START=$(vg_stat "$N7W" starttime)
    two_gpus "proc gpu=1 pid=$L2 type=compute mem=3GiB sm=0" \
        "proc gpu=1 pid=$N1 type=compute mem=20GiB sm=97" \
        "proc gpu=0 pid=$N2 type=compute mem=900MiB sm=0" \
        "proc gpu=0 pid=$N3 type=compute mem=900MiB sm=0" \
        "proc gpu=1 pid=$N6 type=compute mem=8GiB sm=0" \
        "proc gpu=0 pid=$N7 type=compute mem=30GiB sm=88"

    vgc clean --json
    show
    [ "$(json '[.processes[] | select(.action == "signal") | .pid] | sort | map(tostring) | join(" ")')" = \
        "$(printf '%s\n' "$L1" "$L2" | sort -n | paste -sd' ')" ]

    vgc clean --force --grace 2s --json
    show
    # 1: the (fake) driver still lists L2's context after it exited, as a real one may for a
    # moment; nothing else is left
    [ "$status" -eq 1 ]
    json_ok '[.processes[] | select(.result.still_listed)] | map(.pid) == [$l]' --argjson l "$L2"
    # what vramguard says it did
    [ "$(json '[.processes[] | select(.result.signals | length > 0) | .pid] | sort | map(tostring) | join(" ")')" = \
        "$(printf '%s\n' "$L1" "$L2" | sort -n | paste -sd' ')" ]
    # (the service, N3, leads its session and nothing of its job is gone: not even listed)
    json_ok '[.processes[] | select(.action == "leave") | .pid] | sort == ([$a, $b, $d, $e] | sort)' \
        --argjson a "$N1" --argjson b "$N2" --argjson d "$N4" --argjson e "$N5"
    # what the processes saw
    wait_for "vg_gone $L1 && vg_gone $L2"
    [ "$(vg_signals "$L1" "$LOG")" = TERM ]
    [ "$(vg_signals "$L2" "$LOG")" = TERM ]
    kill -CONT "$N4"
    wait_for "[ \"\$(vg_stat $N4 state)\" != T ]"
    untouched "$N1" "$N1_START"
    untouched "$N1W" "$N1W_START"
    untouched "$N2" "$N2_START"
    untouched "$N3" "$N3_START"
    untouched "$N5" "$N5_START"
    untouched "$N6" "$N6_START"
    untouched "$N7" "$N7_START"
    untouched "$N7W" "$N7W_START"
    # a stopped process would have taken a pending SIGTERM once continued
    sleep 0.3
    untouched "$N4" "$N4_START"
}

@test "a driver PID reused by an unrelated process is a stale entry: never signalled" {
    # The driver still lists PID P with 5 GiB on GPU 1; P is now a process holding no NVIDIA node.
    start P -- /bin/bash
    two_gpus "proc gpu=1 pid=$P type=compute mem=5GiB sm=0"
    vgc --json doctor
    show
    json_ok '[.findings[] | select(.rule == "stale-pid") | .pids] == [[$p]]' --argjson p "$P"
    json_ok '[.findings[] | select(.rule == "orphan-holder" or .rule == "foreign-pid")] == []'
    # Not a default target, and refused when a filter selects every holder of its GPU.
    vgc clean --force --json
    show
    json_ok '[.processes[] | select(.pid == $p)] == []' --argjson p "$P"
    vgc clean --force --gpu 1 --json
    show
    [ "$status" -eq 1 ]
    json_ok '.processes[0] | .pid == $p and .action == "refuse" and .refusal == "stale-entry"' \
        --argjson p "$P"
    vgc clean --force --pid "$P"
    show
    [[ $output == *"not touched: the driver lists this PID, but the process now under it holds no node of the GPU"* ]]
    untouched "$P" "$P_START"
    vgc --json status
    json_ok '.gpus[1].holders[0] | .pid == $p and .stale == true and .seen_by == "nvml"' --argjson p "$P"
}
