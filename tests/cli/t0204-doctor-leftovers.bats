#!/usr/bin/env bats
# t0204-doctor-leftovers: processes that cannot or will not let go: orphan-holder (a job's
# leftovers: re-parented, and the job's process group or session leader gone), zombie-holder
# and d-state-holder, with the near misses (a live worker of a live parent, a process re-parented
# while its job still runs, a daemon that detached on purpose, zombies and D threads away from
# any GPU).

load lib
load diag

setup() {
    DEVDIR=$(vg_fake_dev)
    TMP=$(vg_tmpdir)
}

# ------------------------------------------------------------------------------ orphan-holder

# A DataLoader worker of a dead main process (vg-helper --pgrp --orphan): the job's main process,
# leader of its own process group, is gone and init (or a subreaper) adopted the worker, which
# waits, idle. The lifecycles around it are t0208's.
orphan() {
    vg_spawn --pgrp --orphan --comm pt_data_worker "$@" -- python -c 'worker loop'
    O=$VG_PID
    vg_gone "$VG_PARENT_PID"
    [ "$(vg_stat "$O" pgrp)" = "$VG_PARENT_PID" ]
}

@test "orphan-holder: a leftover with memory on GPU 1, critical, on that GPU and PID" {
    orphan --open "$(dev 1)" --open "$DEVDIR/nvidiactl"
    homogeneous_host "proc gpu=1 pid=$O type=compute mem=3GiB sm=0"
    vgd --json doctor
    show
    [ "$status" -eq 2 ]
    [ "$(rules_fired)" = orphan-holder ]
    [ "$(nfind orphan-holder)" -eq 1 ]
    finding_is orphan-holder '[1]' "[$O]"
    json_ok '.findings[0] | .severity == "critical" and .confidence == "high" and .memory == 3221225472'
    json_ok '.findings[0].title == "1 leftover process of a finished job (process group \($g)) still holds 3 GiB of GPU memory"' \
        --arg g "$VG_PARENT_PID"
    json_ok '.findings[0].evidence | any(contains("leftover at high confidence, weight +") and contains("; holds 3 GiB; +1 parent is now PID 1 (init); +2 its process group leader (PID \($g)) has exited;"))' \
        --arg g "$VG_PARENT_PID"
    json_ok '.findings[0].fix[0] == "stop them: kill -TERM \($o) (then kill -KILL if they stay)"' --arg o "$O"
    json_ok '.findings[0].fix | any(contains("vramguard run"))'
    vgd doctor
    [ "$status" -eq 2 ]
    [[ $output == *"CRITICAL orphan-holder: 1 leftover process"* ]]
    [[ $output == *"why:  orphan-holder (PID $O)"* ]]
}

@test "orphan-holder: a worker holding only the device node is a warning" {
    orphan --open "$(dev 2)"
    homogeneous_host
    vgd --json doctor
    show
    [ "$status" -eq 1 ]
    [ "$(rules_fired)" = orphan-holder ]
    finding_is orphan-holder '[2]' "[$O]"
    json_ok '.findings[0].severity == "warning"'
    json_ok '.findings[0].title | endswith("still holds NVIDIA device nodes open")'
    json_ok '.findings[0].evidence | any(startswith("a worker that inherited the device file keeps"))'
}

@test "orphan-holder: a worker holding the node only by mapping, its descriptors closed, is one too" {
    # CUDA's mappings of the nodes outlive the descriptors a worker closes (lsof: "mem")
    orphan --map "$(dev 2)" --map "$DEVDIR/nvidiactl"
    [ -z "$(find "/proc/$O/fd/" -lname "$DEVDIR/*")" ]
    homogeneous_host
    vgd --json doctor
    show
    [ "$status" -eq 1 ]
    [ "$(rules_fired)" = orphan-holder ]
    finding_is orphan-holder '[2]' "[$O]"
    json_ok '.findings[0].severity == "warning"'
    vgd doctor
    [ "$status" -eq 1 ]
    [[ $output == *"why:  orphan-holder (PID $O)"* ]]
    [[ $output != *"no process holds its node"* ]]
}

@test "orphan-holder: memory nobody accounts for on the orphan's GPU makes it critical" {
    orphan --open "$(dev 2)"
    homogeneous_host
    vg_scenario <<<"$(sed 's/^\(gpu index=2 .*\) used=auto/\1 used=5GiB/' "$FAKE_NVML_SCENARIO")"
    vgd --json doctor
    show
    [ "$status" -eq 2 ]
    [ "$(rules_fired)" = orphan-holder,unattributed ]
    finding_is orphan-holder '[2]' "[$O]"
    json_ok '.findings[] | select(.rule == "orphan-holder") | .severity == "critical"'
    json_ok '.findings[] | select(.rule == "orphan-holder") | .evidence | any(startswith("5 GiB on GPU 2 ") and endswith("most likely what these processes keep"))'
    # unattributed points at the same process as the likely holder.
    finding_is unattributed '[2]' "[$O]"
}

@test "orphan-holder: the leftovers of one dead job are one finding with their total" {
    vg_require_jq
    # A session leader starts two workers and exits: both are adopted, their leader is gone.
    VG_HELPER_TAG=$TMP setsid bash -c '
        "$0" --pidfile "$1/w1" --open "$2" --comm pt_data_worker -- python worker1 &
        "$0" --pidfile "$1/w2" --open "$3" --comm pt_data_worker -- python worker2 &
        echo $$ >"$1/leader"' "$HELPER" "$TMP" "$(dev 0)" "$(dev 3)" </dev/null >/dev/null 2>&1 3>&- &
    wait_for '[[ -s $TMP/w1 && -s $TMP/w2 && -s $TMP/leader ]]'
    W1=$(vg_role main "$TMP/w1")
    W2=$(vg_role main "$TMP/w2")
    L=$(cat "$TMP/leader")
    _vg_record worker "$W1"
    _vg_record worker "$W2"
    wait_for "vg_gone $L"
    [ "$(vg_stat "$W1" session)" = "$L" ]
    [ "$(vg_stat "$W2" pgrp)" = "$L" ]
    homogeneous_host "proc gpu=0 pid=$W1 type=compute mem=1GiB sm=0" \
        "proc gpu=3 pid=$W2 type=compute mem=2GiB sm=0"
    vgd --json doctor
    show
    [ "$status" -eq 2 ]
    [ "$(rules_fired)" = orphan-holder ]
    [ "$(nfind orphan-holder)" -eq 1 ]
    json_ok '.findings[0] | (.pids | sort) == ([$a, $b] | sort) and (.gpus | sort) == [0, 3]' \
        --argjson a "$W1" --argjson b "$W2"
    json_ok '.findings[0].memory == 3221225472'
    json_ok '.findings[0].title | startswith("2 leftover processes of a finished job (process group \($l)) still hold 3 GiB")' \
        --arg l "$L"
    json_ok '.findings[0].fix[0] | test("^stop them: kill -TERM [0-9]+ [0-9]+ ")'
}

@test "orphan-holder near miss: a live child of a live parent holding a device fd" {
    vg_spawn --open "$(dev 0)" --children 2 --child-comm pt_data_worker -- python train.py
    P=$VG_PID
    [ "$(vg_stat "${VG_CHILD_PIDS[0]}" ppid)" = "$P" ]
    vg_holds "${VG_CHILD_PIDS[1]}" "$(dev 0)"
    homogeneous_host "proc gpu=0 pid=$P type=compute mem=10GiB"
    vgd --json doctor
    show
    [ "$status" -eq 0 ]
    json_ok '.findings == []'
    json_ok '.checked.holders == 3'
}

@test "orphan-holder near miss: re-parented while its job's group and session leaders live" {
    vg_spawn --orphan --open "$(dev 1)"
    O=$VG_PID
    g=$(vg_stat "$O" pgrp) s=$(vg_stat "$O" session)
    if ! kill -0 "$g" 2>/dev/null || ! kill -0 "$s" 2>/dev/null; then
        skip "the test runner's own process group or session leader has exited"
    fi
    [ "$(vg_stat "$O" ppid)" != "$VG_PARENT_PID" ]
    homogeneous_host "proc gpu=1 pid=$O type=compute mem=3GiB"
    vgd --json doctor
    show
    [ "$status" -eq 0 ]
    json_ok '.findings == []'
}

@test "orphan-holder near miss: a daemon that detached on purpose leads its own session" {
    VG_HELPER_TAG=$TMP setsid -f "$HELPER" --pidfile "$TMP/daemon" --open "$(dev 3)" \
        -- nvidia-persistenced </dev/null >/dev/null 2>&1 3>&-
    wait_for '[[ -s $TMP/daemon ]]'
    D=$(vg_role main "$TMP/daemon")
    _vg_record daemon "$D"
    [ "$(vg_stat "$D" session)" = "$D" ]
    [ "$(vg_stat "$D" pgrp)" = "$D" ]
    homogeneous_host "proc gpu=3 pid=$D type=compute mem=200MiB"
    vgd --json doctor
    show
    [ "$status" -eq 0 ]
    json_ok '.findings == []'
}

# ------------------------------------------------------------------------------ zombie-holder

@test "zombie-holder: a defunct leader whose live thread keeps the GPU" {
    vg_spawn --zombie-leader --open "$(dev 0)" -- python train.py
    P=$VG_PID
    wait_for '[ "$(vg_stat "$P" state)" = Z ]'
    homogeneous_host "proc gpu=0 pid=$P type=compute mem=8GiB"
    vgd --json doctor
    show
    [ "$status" -eq 2 ]
    [ "$(rules_fired)" = zombie-holder ]
    finding_is zombie-holder '[0]' "[$P]"
    json_ok '.findings[0] | .severity == "critical" and .memory == 8589934592'
    json_ok '.findings[0].title | endswith("is defunct, but 1 of its threads still runs and holds the GPU (8 GiB)")'
    json_ok '.findings[0].fix[0] == "end the whole process: kill -KILL \($p)"' --arg p "$P"
    # Its device node is seen through the live thread's descriptors.
    vgd --json status
    json_ok '.gpus[0].holders[0].seen_by == "both"'
}

@test "zombie-holder: an unreaped child the driver still lists; act on the parent" {
    vg_spawn --zombie --open "$(dev 2)"
    P=$VG_PID
    Z=${VG_ZOMBIE_PIDS[0]}
    wait_for '[ "$(vg_stat "$Z" state)" = Z ]'
    homogeneous_host "proc gpu=2 pid=$Z type=compute mem=2GiB"
    vgd --json doctor
    show
    [ "$status" -eq 2 ]
    [ "$(rules_fired)" = zombie-holder ]
    finding_is zombie-holder '[2]' "[$Z]"
    json_ok '.findings[0].title | endswith("is a zombie still listed on the GPU (2 GiB)")'
    json_ok '.findings[0].evidence | any(. == "it has exited; its parent, PID \($p), has not reaped it")' --arg p "$P"
    json_ok '.findings[0].fix[0] | startswith("act on the parent, PID \($p):")' --arg p "$P"
}

@test "zombie-holder near miss: zombies away from any GPU" {
    vg_spawn --zombie --zombie --open "$(dev 1)"
    P=$VG_PID
    wait_for '[ "$(vg_stat "${VG_ZOMBIE_PIDS[1]}" state)" = Z ]'
    homogeneous_host "proc gpu=1 pid=$P type=compute mem=20GiB"
    vgd --json doctor
    show
    [ "$status" -eq 0 ]
    json_ok '.findings == []'
}

# ----------------------------------------------------------------------------- d-state-holder

@test "d-state-holder: a thread stuck in D while holding GPU 3" {
    vg_spawn --dstate --open "$(dev 3)" -- python infer.py
    P=$VG_PID
    wait_for '[ "$(vg_stat "$P/task/$VG_DSTATE_TID" state)" = D ]'
    homogeneous_host "proc gpu=3 pid=$P type=compute mem=4GiB"
    vgd --json doctor
    show
    [ "$status" -eq 1 ]
    [ "$(rules_fired)" = d-state-holder ]
    [ "$(nfind d-state-holder)" -eq 1 ]
    finding_is d-state-holder '[3]' "[$P]"
    json_ok '.findings[0].severity == "warning"'
    json_ok '.findings[0].title | endswith("has 1 thread in uninterruptible sleep (D) while holding the GPU")'
    json_ok '.findings[0].fix | any(contains("only a GPU reset") and contains("reboot"))'
    json_ok '.findings[0].fix[0] | contains("vramguard doctor --pid \($p)")' --arg p "$P"
}

@test "d-state-holder: also when it holds only the device node" {
    vg_spawn --dstate --open "$(dev 1)"
    P=$VG_PID
    wait_for '[ "$(vg_stat "$P/task/$VG_DSTATE_TID" state)" = D ]'
    homogeneous_host
    vgd --json doctor
    show
    [ "$status" -eq 1 ]
    [ "$(rules_fired)" = d-state-holder ]
    finding_is d-state-holder '[1]' "[$P]"
}

@test "d-state-holder near miss: a D thread away from the GPU; holders asleep in S" {
    vg_spawn --dstate
    D=$VG_PID
    wait_for '[ "$(vg_stat "$D/task/$VG_DSTATE_TID" state)" = D ]'
    vg_spawn --open "$(dev 0)"
    P=$VG_PID
    homogeneous_host "proc gpu=0 pid=$P type=compute mem=20GiB"
    vgd --json doctor
    show
    [ "$status" -eq 0 ]
    json_ok '.findings == []'
}
