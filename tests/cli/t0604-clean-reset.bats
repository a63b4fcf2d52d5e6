#!/usr/bin/env bats
# t0604-clean-reset: memory held with no process left. `clean` prints the exact
# `nvidia-smi --gpu-reset -i UUID` and its preconditions; only `--reset --force`, as root, runs
# it (a fake nvidia-smi first in PATH records its arguments and "frees" the memory by rewriting
# the fake driver's scenario), and never while something holds the GPU, without root, or on a
# GPU whose process list the driver failed to give. A reset needs to have seen every holder, so
# these tests run in a PID namespace of their own, where every process can be read
# (vg_pidns_start); the one test outside shows that hidden processes forbid a reset.

load lib
load clean

setup() {
    vg_fake_dev >/dev/null
    fake_smi
}

# After the reset the GPU is empty.
freed_scenario() {
    _vg_dir
    SMI_AFTER=$_VG_DIR/after
    export SMI_AFTER
    cat >"$SMI_AFTER" <<EOF
driver 550.54.15
gpu index=0 uuid=$U0 name="NVIDIA A100-SXM4-80GB" minor=0 bus=00000000:07:00.0 total=80GiB reserved=512MiB used=auto
gpu index=1 uuid=$U1 name="NVIDIA A100-SXM4-80GB" minor=1 bus=00000000:0F:00.0 total=80GiB reserved=512MiB used=auto
EOF
}

@test "--reset --force as root: cleans the orphan, then resets the GPU it left memory on" {
    [ "$(id -u)" -eq 0 ] || skip "needs root"
    vg_pidns_start
    vg_spawn --open "$DEVDIR/nvidia1" --orphan --setsid --comm pt_data_worker -- python train.py >/dev/null
    O=$VG_PID
    USED1=12GiB two_gpus
    freed_scenario
    vgc clean --reset --force
    show
    [ "$status" -eq 0 ]
    wait_for "vg_ns_gone $O"
    [ "$(cat "$SMI_LOG")" = "--gpu-reset -i $U1" ]
    [[ $output == *"exited after SIGTERM"* ]]
    [[ $output == *"GPU 1: 12 GiB held."*"nvidia-smi --gpu-reset -i $U1"*"ran it: nvidia-smi exited 0"* ]]
    [[ $output == *"GPU 1  NVIDIA A100-SXM4-80GB  GPU-0c1ea111: freed 12 GiB; now 0 B of 80 GiB used, 0 holders"* ]]
    # nvidia-smi's own output goes to stderr: stdout stays vramguard's.
    [[ $stderr == *"was successfully reset"* ]]
    [[ $output != *"successfully reset"* ]]
}

@test "--reset --force in JSON: the command, that it ran, its status, the memory after" {
    [ "$(id -u)" -eq 0 ] || skip "needs root"
    vg_pidns_start
    USED1=6GiB two_gpus
    freed_scenario
    vgc clean --reset --force --json --gpu 1
    show
    [ "$status" -eq 0 ]
    [ "$(cat "$SMI_LOG")" = "--gpu-reset -i $U1" ]
    [ "$(json '.gpus | length')" -eq 1 ]
    [ "$(json '.gpus[0].reset.command')" = "nvidia-smi --gpu-reset -i $U1" ]
    json_ok '.gpus[0].reset.attempted == true and .gpus[0].reset.exit_status == 0'
    json_ok '.gpus[0].reset.refused == null'
    [ "$(json '.gpus[0].freed')" -eq $((6 << 30)) ]
    json_ok '.gpus[0].after.used == 0 and .findings_after == []'
}

@test "without --force, or without --reset, nvidia-smi is never run" {
    vg_pidns_start
    USED1=6GiB two_gpus
    vgc clean --reset
    show
    [ "$status" -eq 0 ]
    [[ $output == *"nvidia-smi --gpu-reset -i $U1"* ]]
    vgc clean --force
    show
    # Memory still held with no process: something is left, exit 1.
    [ "$status" -eq 1 ]
    [[ $output == *"'vramguard clean --gpu 1 --reset --force', as root, runs it"* ]]
    [[ $output == *"unattributed"* ]]
    [ ! -e "$SMI_LOG" ]
}

@test "a GPU somebody still holds is not reset" {
    [ "$(id -u)" -eq 0 ] || skip "needs root (a root-owned directory for the program)"
    vg_pidns_start
    # A protected holder stays; the memory is not 'held with no process'.
    # a real-looking nv-hostengine: root's binary in root's directory (act/infra.h)
    HELPER=$(vg_infra_bin nv-hostengine) vg_spawn --open "$DEVDIR/nvidia1" --orphan --setsid >/dev/null
    USED1=6GiB two_gpus
    vgc clean --reset --force
    show
    [ "$status" -eq 1 ]
    [[ $output == *"infrastructure (nv-hostengine)"* ]]
    [[ $output != *"GPU reset"* ]]
    [ ! -e "$SMI_LOG" ]
}

@test "not root: the reset is refused, nvidia-smi not run" {
    [ "$(id -u)" -eq 0 ] || skip "needs root to run vramguard as nobody"
    command -v setpriv >/dev/null || skip "setpriv is not installed"
    clean_world
    USED1=6GiB two_gpus
    # as nobody, other users' processes are hidden: no reset is even offered
    vgc as_nobody clean --reset --force
    show
    [ "$status" -eq 1 ]
    [[ $output != *"GPU reset:"* ]]
    [[ $output == *"unattributed"* ]]
    [ ! -e "$SMI_LOG" ]
    vgc as_nobody doctor
    [[ $output == *"could not be read: any of them may hold it"* ]]
    [[ $output == *"vramguard is not root"* ]]
}

@test "processes hidden from vramguard forbid a reset; seeing them all allows it" {
    [ "$(id -u)" -eq 0 ] || skip "needs root"
    USED1=6GiB two_gpus
    freed_scenario
    # this machine may hide some process even from root: then no reset, and said why. Where it
    # hides none the run resets, so each try (and the namespace's run after) starts from the
    # scenario before any reset.
    cp "$FAKE_NVML_SCENARIO" "$SMI_AFTER.before"
    hidden_try() {
        rm -f "$SMI_LOG"
        cp "$SMI_AFTER.before" "$FAKE_NVML_SCENARIO"
        vgc clean --reset --force --gpu 1 --json
    }
    vg_unread_stable hidden_try
    if [ "$hidden" -gt 0 ]; then
        show
        [ "$status" -eq 1 ]
        [ ! -e "$SMI_LOG" ]
        json_ok '.gpus[0].reset == null'
    fi
    rm -f "$SMI_LOG"
    cp "$SMI_AFTER.before" "$FAKE_NVML_SCENARIO"
    vg_pidns_start
    vgc clean --reset --force --gpu 1 --json
    show
    [ "$status" -eq 0 ]
    [ "$(cat "$SMI_LOG")" = "--gpu-reset -i $U1" ]
}

@test "nvidia-smi missing from PATH, or failing: said, exit 1" {
    [ "$(id -u)" -eq 0 ] || skip "needs root"
    vg_pidns_start
    USED1=6GiB two_gpus
    PATH=/usr/bin:/bin vgc clean --reset --force --gpu 1
    show
    [ "$status" -eq 1 ]
    [[ $output == *"not run: nvidia-smi is not in PATH"* ]]
    fake_smi 3
    vgc clean --reset --force --gpu 1 --json
    show
    [ "$status" -eq 1 ]
    json_ok '.gpus[0].reset.attempted == true and .gpus[0].reset.exit_status == 3'
    [ "$(wc -l <"$SMI_LOG")" -eq 1 ]
}

@test "a GPU whose process list failed is never offered a reset, nor called unattributed" {
    [ "$(id -u)" -eq 0 ] || skip "needs root"
    vg_require_jq
    vg_pidns_start
    # 6 GiB used on GPU 1 and no holder anyone can see: but the driver could not list its
    # compute processes, so the memory may well belong to a running job.
    USED1=6GiB two_gpus "error func=nvmlDeviceGetComputeRunningProcesses_v3 gpu=1 code=999"
    vgc clean --reset --force
    show
    [ ! -e "$SMI_LOG" ]
    [[ $output != *"--gpu-reset"* ]]
    [[ $output != *"unattributed"* ]]
    vgc doctor
    show
    [[ $output == *"who:  unknown: the driver's process list failed; no process holds its node"* ]]
    [[ $output == *"GPU 1: not fully checked: the driver's process list failed (vramguard status)."* ]]
    [[ $output != *"unattributed"* ]]
    vgc --json status
    json_ok '.gpus[1].processes_known == false and .gpus[1].memory.unexplained == null'
    json_ok '.gpus[0].processes_known == true'
    vgc status
    [[ $output == *"no process holds its device node; the driver's process list failed"* ]]
}
