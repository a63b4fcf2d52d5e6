#!/usr/bin/env bats
# t0602-clean-force: `vramguard clean --force` on real processes: orphans holding a device node
# are stopped with SIGTERM; one that ignores SIGTERM is killed after --grace; live jobs are left
# alone; the report after (memory freed, what is left, exit status); a PID the driver still
# lists after its process exited.

load lib
load clean

setup() {
    vg_fake_dev >/dev/null
}

orphan() {
    vg_spawn --open "$DEVDIR/nvidia0" --orphan --setsid --comm pt_data_worker "$@" -- python train.py >/dev/null
    O=$VG_PID
    O_START=$(vg_stat "$O" starttime)
}

@test "--force stops an orphan holding a device node; nothing left, exit 0" {
    orphan
    two_gpus
    vgc clean --force
    show
    [ "$status" -eq 0 ]
    [ -z "$stderr" ]
    wait_for "vg_gone $O"
    [[ ${lines[0]} == "Clean: SIGTERM through a pidfd after re-checking each process, SIGKILL 10.0s later if it is still there." ]]
    [[ $output == *"1 target:"* ]]
    [[ $output == *"PID $O  $VG_USER  GPU 0  device node only"* ]]
    [[ $output =~ result:\ exited\ after\ SIGTERM\ \([0-9.]+s\) ]]
    [[ $output == *"Memory after:"* ]]
    [[ $output == *"GPU 0  NVIDIA A100-SXM4-80GB  GPU-0c1ea000: nothing freed; now 0 B of 80 GiB used, 0 holders"* ]]
    [[ $output == *"Nothing left to fix on these GPUs"* ]]
}

@test "--force stops an orphan holding the node only by mapping (its descriptors closed)" {
    vg_spawn --map "$DEVDIR/nvidia0" --map "$DEVDIR/nvidiactl" --orphan --setsid \
        --comm pt_data_worker -- python train.py >/dev/null
    O=$VG_PID
    [ -z "$(find "/proc/$O/fd/" -lname "$DEVDIR/*")" ]
    two_gpus
    vgc clean
    show
    [[ $output == *"PID $O  $VG_USER  GPU 0  device node only"* ]]
    vgc clean --force --json
    show
    [ "$status" -eq 0 ]
    wait_for "vg_gone $O"
    [ "$(json '.processes[0].pid')" -eq "$O" ]
    [ "$(json '.processes[0].result.outcome')" = terminated ]
    json_ok '.gpus[0].before.holders == 1 and .gpus[0].after.holders == 0'
}

@test "--force in JSON: the outcome per process and the GPUs after" {
    orphan
    two_gpus
    vgc clean --force --json
    show
    [ "$status" -eq 0 ]
    wait_for "vg_gone $O"
    [ "$(json .mode)" = force ]
    [ "$(json '.processes[0].pid')" -eq "$O" ]
    [ "$(json '.processes[0].result.outcome')" = terminated ]
    json_ok '.processes[0].result.signals == ["SIGTERM"]'
    json_ok '.processes[0].result.seconds >= 0 and .processes[0].result.still_listed == false'
    json_ok '.gpus[0].before.holders == 1 and .gpus[0].after.holders == 0'
    json_ok '.findings_after == []'
    json_ok '.summary.terminated == 1 and .summary.killed == 0 and .summary.failed == 0'
}

@test "a target that ignores SIGTERM is killed after --grace" {
    orphan --ignore-term
    two_gpus
    vgc clean --force --grace 1s --json
    show
    [ "$status" -eq 0 ]
    wait_for "vg_gone $O"
    [ "$(json '.processes[0].result.outcome')" = killed ]
    json_ok '.processes[0].result.signals == ["SIGTERM", "SIGKILL"]'
    json_ok '.processes[0].result.seconds >= 1'
    json_ok '.options.grace_ms == 1000'
}

@test "the text says when SIGKILL was needed" {
    orphan --ignore-term
    two_gpus
    vgc clean --force --grace 300ms
    show
    [ "$status" -eq 0 ]
    wait_for "vg_gone $O"
    [[ $output == *"SIGKILL 0.3s later"* ]]
    [[ $output == *"result: still running 0.3s after SIGTERM: killed with SIGKILL"* ]]
}

@test "--force leaves live jobs alone, even on the same GPU" {
    vg_spawn --open "$DEVDIR/nvidia0" -- python serve.py >/dev/null
    J=$VG_PID
    J_START=$(vg_stat "$J" starttime)
    orphan
    two_gpus "proc gpu=0 pid=$J type=compute mem=20GiB sm=90"
    vgc clean --force
    show
    [ "$status" -eq 0 ]
    wait_for "vg_gone $O"
    alive_as_before "$J" "$J_START"
    [[ $output != *"PID $J "* ]]
    [[ $output == *"now 20 GiB of 80 GiB used, 1 holder"* ]]
}

@test "several leftovers of one job are stopped together" {
    vg_spawn --open "$DEVDIR/nvidia0" --orphan --setsid --comm pt_data_worker -- python w1.py >/dev/null
    A=$VG_PID
    vg_spawn --open "$DEVDIR/nvidia1" --orphan --setsid --comm pt_data_worker --ignore-term -- python w2.py >/dev/null
    B=$VG_PID
    two_gpus
    vgc clean --force --grace 1s --json
    show
    [ "$status" -eq 0 ]
    wait_for "vg_gone $A && vg_gone $B"
    [ "$(json '[.processes[] | "\(.pid):\(.result.outcome)"] | sort | join(",")')" = \
        "$(printf '%s\n' "$A:terminated" "$B:killed" | sort | paste -sd,)" ]
}

@test "the driver still lists a stopped PID: said, exit 1" {
    orphan
    two_gpus "proc gpu=0 pid=$O type=compute mem=4GiB sm=0"
    vgc clean --force
    show
    [ "$status" -eq 1 ]
    wait_for "vg_gone $O"
    [[ $output == *"exited after SIGTERM"* ]]
    [[ $output == *"the driver still lists this PID: its memory should come back once the driver tears the context down"* ]]
    # foreign-pid once it is reaped; zombie-holder where init has not reaped it yet.
    [[ $output == *"Still found (vramguard doctor says):"* ]]
    [[ $output == *"foreign-pid"* || $output == *"zombie-holder"* ]]
    # The same host again: the fake driver keeps listing it, and nothing is signalled.
    vgc clean --force --json --pid "$O"
    show
    [ "$status" -eq 1 ]
    [[ $(json '.processes[0].refusal') == not-visible || $(json '.processes[0].refusal') == zombie ]]
    json_ok '.processes[0].result == null'
}

@test "--force with nothing to do: exit 0, nothing signalled" {
    vg_spawn --open "$DEVDIR/nvidia0" -- python serve.py >/dev/null
    J=$VG_PID
    J_START=$(vg_stat "$J" starttime)
    two_gpus
    vgc clean --force
    show
    [ "$status" -eq 0 ]
    [[ $output == *"Nothing to clean"* ]]
    alive_as_before "$J" "$J_START"
}

@test "--force with another PID namespace's procfs is refused, exit 3" {
    orphan
    two_gpus
    mkdir -p "$BATS_TEST_TMPDIR/fakeproc"
    vgc clean --force --proc "$BATS_TEST_TMPDIR/fakeproc"
    show
    [ "$status" -eq 3 ]
    [[ $stderr == *"vramguard: clean: --force needs the procfs of vramguard's own PID namespace"* ]]
    alive_as_before "$O" "$O_START"
}
