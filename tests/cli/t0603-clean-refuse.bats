#!/usr/bin/env bats
# t0603-clean-refuse: what `vramguard clean --force` never signals, with real processes: another
# user's process when not root (and the other direction: root may), a zombie (the plan says act
# on the parent, which is not signalled for you), a defunct leader whose threads still run,
# infrastructure (known by its executable: a root-owned copy named as the program installs, while
# a process that merely calls itself Xorg is not), a process stuck in D state, vramguard itself
# and its ancestors.
# (A PID whose start time changed since the plan is tested in tests/unit/test_plan.c, where the
# plan entry can be made to disagree with a live process deterministically.)

load lib
load clean

setup() {
    vg_fake_dev >/dev/null
}

@test "not root: another user's orphan is refused, and survives --force" {
    [ "$(id -u)" -eq 0 ] || skip "needs root to run vramguard as nobody"
    command -v setpriv >/dev/null || skip "setpriv is not installed"
    clean_world
    # Root's leftover; nobody cannot read its fds, so the driver's list is what shows it.
    vg_spawn --open "$DEVDIR/nvidia0" --orphan --setsid --comm pt_data_worker -- python train.py >/dev/null
    O=$VG_PID
    O_START=$(vg_stat "$O" starttime)
    two_gpus "proc gpu=0 pid=$O type=compute mem=5GiB sm=0"
    vgc as_nobody clean
    show
    [ "$status" -eq 0 ]
    [[ $output == *"Will not touch 1 process:"* ]]
    [[ $output == *"PID $O  root  GPU 0  5 GiB"* ]]
    [[ $output == *"not touched: belongs to root, another user, and you are not root: ask its owner, or run as root"* ]]
    vgc as_nobody clean --force --json
    show
    [ "$status" -eq 1 ]
    [ "$(json '.processes[0].refusal')" = other-user ]
    [ "$(json '.processes[0].action')" = refuse ]
    json_ok '.processes[0].result == null and .summary.to_signal == 0'
    alive_as_before "$O" "$O_START"
}

@test "not root: your own orphan is still cleaned" {
    [ "$(id -u)" -eq 0 ] || skip "needs root to run vramguard as nobody"
    command -v setpriv >/dev/null || skip "setpriv is not installed"
    clean_world
    vg_spawn --open "$DEVDIR/nvidia0" --orphan --setsid --comm pt_data_worker --uid nobody -- python mine.py >/dev/null
    O=$VG_PID
    two_gpus
    vgc as_nobody clean --force
    show
    [ "$status" -eq 0 ]
    wait_for "vg_gone $O"
    [[ $output == *"PID $O  nobody  GPU 0"* ]]
    [[ $output == *"exited after SIGTERM"* ]]
}

@test "as root: another user's orphan is allowed" {
    [ "$(id -u)" -eq 0 ] || skip "needs root"
    vg_spawn --open "$DEVDIR/nvidia0" --orphan --setsid --comm pt_data_worker --uid nobody -- python theirs.py >/dev/null
    O=$VG_PID
    two_gpus
    vgc clean --force --json
    show
    [ "$status" -eq 0 ]
    wait_for "vg_gone $O"
    [ "$(json '.processes[0].user')" = nobody ]
    [ "$(json '.processes[0].result.outcome')" = terminated ]
}

@test "a zombie is never signalled: the plan says act on its parent, which is left alone" {
    vg_spawn --open "$DEVDIR/nvidia0" --zombie -- python parent.py >/dev/null
    P=$VG_PID
    P_START=$(vg_stat "$P" starttime)
    Z=${VG_ZOMBIE_PIDS[0]}
    [ "$(vg_stat "$Z" state)" = Z ]
    two_gpus "proc gpu=0 pid=$Z type=compute mem=2GiB"
    vgc clean
    show
    [ "$status" -eq 0 ]
    [[ $output == *"Will not touch 1 process:"* ]]
    [[ $output == *"PID $Z  $VG_USER  GPU 0  2 GiB  state Z"* ]]
    [[ $output == *"why: zombie-holder:"* ]]
    [[ $output == *"not touched: a zombie (defunct): vramguard never signals one; act on its parent, PID $P, which must reap it"* ]]
    [[ $output == *"The parent is not signalled for you"* ]]
    vgc clean --force --json
    show
    [ "$status" -eq 1 ]
    [ "$(json '.processes[0].pid')" -eq "$Z" ]
    [ "$(json '.processes[0].refusal')" = zombie ]
    [ "$(json '.processes[0].act_on_pid')" -eq "$P" ]
    json_ok '.summary.to_signal == 0'
    # The parent is not an orphan target: untouched, and its zombie is still there.
    alive_as_before "$P" "$P_START"
    [ "$(vg_stat "$Z" state)" = Z ]
    # Even when a filter names the zombie's GPU, only the live parent may be a target.
    vgc clean --gpu 0 --json
    [ "$(json '[.processes[] | "\(.pid):\(.action)"] | sort | join(",")')" = \
        "$(printf '%s\n' "$P:signal" "$Z:refuse" | sort | paste -sd,)" ]
}

@test "a defunct leader whose threads still hold the GPU is refused too" {
    vg_spawn --open "$DEVDIR/nvidia0" --zombie-leader --orphan --setsid --comm pt_data_worker -- python zl.py >/dev/null
    P=$VG_PID
    wait_for "[ \"\$(vg_stat $P state)\" = Z ]"
    two_gpus
    vgc clean --force
    show
    [ "$status" -eq 1 ]
    [[ $output == *"PID $P  $VG_USER  GPU 0  device node only  state Z"* ]]
    [[ $output == *"why: zombie-holder:"* ]]
    [[ $output == *"not touched: a zombie (defunct)"* ]]
    [ "$(grep -cE '^[0-9]+ targets?:' <<<"$output")" -eq 0 ]
    # Not signalled: its live thread still holds the device node.
    vg_holds "$P" "$DEVDIR/nvidia0"
    vgc clean --gpu 0 --force --json
    [ "$status" -eq 1 ]
    [ "$(json '.processes[0].refusal')" = zombie ]
    vg_holds "$P" "$DEVDIR/nvidia0"
}

@test "infrastructure is never signalled, known by what it runs; a name alone is not enough" {
    [ "$(id -u)" -eq 0 ] || skip "needs root (a root-owned directory for the programs)"
    # root's copies, named as the programs install, in directories only root may change
    PERSIST=$(vg_infra_bin nvidia-persistenced)
    XORG=$(vg_infra_bin Xorg)
    HELPER=$PERSIST vg_spawn --open "$DEVDIR/nvidia0" --orphan --setsid >/dev/null
    A=$VG_PID
    A_START=$(vg_stat "$A" starttime)
    HELPER=$XORG vg_spawn --open "$DEVDIR/nvidia1" --orphan --setsid >/dev/null
    B=$VG_PID
    B_START=$(vg_stat "$B" starttime)
    # named Xorg by prctl, running vg-helper: no infrastructure, an ordinary process
    vg_spawn --open "$DEVDIR/nvidia1" --pgrp --orphan --comm Xorg -- python leftover.py >/dev/null
    C=$VG_PID
    two_gpus
    vgc clean --force --json
    show
    [ "$(json '[.processes[] | select(.pid != '"$C"') | "\(.pid):\(.refusal):\(.protected_name)"] | sort | join(",")')" = \
        "$(printf '%s\n' "$A:infrastructure:nvidia-persistenced" "$B:infrastructure:Xorg" | sort | paste -sd,)" ]
    [ "$(json '[.processes[] | select(.pid == '"$A"') | .infrastructure_check.verdict] | join(",")')" = proven ]
    [ "$(json '[.processes[] | select(.pid == '"$C"') | .refusal] | join(",")')" != infrastructure ]
    [ "$(json '[.processes[] | select(.pid == '"$C"') | .infrastructure_check.verdict] | join(",")')" = impostor ]
    alive_as_before "$A" "$A_START"
    alive_as_before "$B" "$B_START"
    # Named explicitly, still no.
    vgc clean --force --pid "$A"
    [ "$status" -eq 1 ]
    [[ $output == *"not touched: infrastructure (nvidia-persistenced): never signalled by a cleanup"* ]]
    alive_as_before "$A" "$A_START"
    # Its binary deleted (as an upgrade leaves a real daemon): unproven, still never signalled,
    # and worded apart
    rm -f "$PERSIST"
    vgc clean --force --pid "$A"
    show
    [ "$status" -eq 1 ]
    [[ $output == *"not touched: named like infrastructure (nvidia-persistenced), but its executable was deleted or replaced since it started: never signalled by a cleanup"* ]]
    alive_as_before "$A" "$A_START"
}

@test "a process stuck in D state: refused; only a reset or reboot frees it" {
    vg_spawn --open "$DEVDIR/nvidia0" --orphan --setsid --comm pt_data_worker --dstate -- python stuck.py >/dev/null
    P=$VG_PID
    P_START=$(vg_stat "$P" starttime)
    two_gpus
    vgc clean --force --pid "$P"
    show
    [ "$status" -eq 1 ]
    [[ $output == *"PID $P  $VG_USER  GPU 0"* ]]
    [[ $output == *"not touched: a thread is in uninterruptible sleep (D), waiting in the driver: no signal reaches it. Only a GPU reset (once nothing else uses the GPU) or a reboot frees its memory"* ]]
    alive_as_before "$P" "$P_START"
    [ "$(vg_stat "$P/task/$VG_DSTATE_TID" state)" = D ]
}

@test "vramguard never signals itself or the shell that runs it" {
    two_gpus
    # The shell holds GPU 0's node and runs vramguard as a child, which inherits it: the
    # shell is an ancestor, the child vramguard itself.
    run --separate-stderr bash -c '
        exec 3<"$1/nvidia0"
        "$2" --nvml "$3" --dev "$1" clean --gpu 0 --force --json
        rc=$?
        exit $rc' _ "$DEVDIR" "$VG" "$FAKE_FULL"
    show
    [ "$status" -eq 1 ]
    [ "$(json '[.processes[] | "\(.comm):\(.refusal)"] | sort | join(",")')" = \
        "bash:ancestor,vramguard:self" ]
    json_ok '.summary.to_signal == 0'
    # vramguard itself holding the node (inherited descriptor): itself.
    run --separate-stderr bash -c 'exec 3<"$1/nvidia0"; exec "$2" --nvml "$3" --dev "$1" clean --gpu 0 --force --json' \
        _ "$DEVDIR" "$VG" "$FAKE_FULL"
    show
    [ "$status" -eq 1 ]
    [ "$(json '[.processes[].refusal] | join(",")')" = self ]
}
