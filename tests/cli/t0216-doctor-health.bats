#!/usr/bin/env bats
# t0216-doctor-health: the GPU's own health (issue 28) over fake scenarios: each health rule
# fires with its evidence and fix, status --json carries the facts under "health", status's
# text says a wrong GPU in one line, and a fact the driver does not give (NOT_SUPPORTED,
# NO_PERMISSION, a missing symbol) is unknown: null, no finding, never "healthy".

load lib
load diag

setup() {
    DEVDIR=$(vg_fake_dev)
}

GPU0="gpu index=0 uuid=GPU-aaaa0000-0000 name=\"NVIDIA H100 80GB HBM3\" minor=0 bus=00000000:17:00.0 total=80GiB reserved=512MiB util=0 cc=9.0 persistence=0 compute_mode=0 mig=0"
GPU1="gpu index=1 uuid=GPU-bbbb1111-1111 name=\"NVIDIA H100 80GB HBM3\" minor=1 bus=00000000:18:00.0 total=80GiB reserved=512MiB util=0 cc=9.0 persistence=0 compute_mode=0 mig=0"
HEALTHY="ecc=1 ecc_vol_corr=0 ecc_vol_uncorr=0 ecc_agg_corr=0 ecc_agg_uncorr=0 retired_sbe=0 retired_dbe=0 retired_pending=0 remap_corr=0 remap_uncorr=0 remap_pending=0 remap_failure=0 recovery_action=0 clocks_event_reasons=0x1"

# two_gpus GPU1_EXTRA [LINES...]: GPU 0 healthy, GPU 1 healthy but for GPU1_EXTRA's keys.
two_gpus() {
    local extra=$1
    shift
    vg_scenario < <(
        echo "$GPU0 $HEALTHY"
        echo "$GPU1 $extra"
        if (($#)); then printf '%s\n' "$@"; fi
    )
}

H1="ecc=1 ecc_vol_corr=0 ecc_agg_corr=0 ecc_agg_uncorr=0 retired_sbe=0 retired_dbe=0"

@test "a healthy pair: no health finding, the facts in status --json" {
    two_gpus "$HEALTHY"
    vgd --json doctor
    [ "$(rules_fired)" = "" ]
    vgd --json status
    [ "$status" -eq 0 ]
    [ "$(json '.gpus[1].health.ecc.current')" = true ]
    [ "$(json '.gpus[1].health.remapped_rows.pending')" = false ]
    [ "$(json '.gpus[1].health.recovery_action')" = none ]
    [ "$(json '.gpus[1].health.clock_event_reasons | join(",")')" = gpu_idle ]
    vgd status
    [[ $output != *"health:"* ]]
}

@test "remap-pending: the reset, with the holder that blocks it" {
    vg_spawn --open "$DEVDIR/nvidia1" -- python train.py
    P=$VG_PID
    two_gpus "$H1 ecc_vol_uncorr=0 retired_pending=0 remap_corr=0 remap_uncorr=2 remap_pending=1 remap_failure=0 recovery_action=0" \
        "proc gpu=1 pid=$P type=compute mem=2GiB"
    vgd --json doctor
    show
    [ "$status" -eq 2 ]
    [ "$(rules_fired)" = remap-pending ]
    finding_is remap-pending '[1]' "[$P]"
    [ "$(json '.findings[0].severity')" = critical ]
    vgd doctor
    [[ $output == *"GPU 1 (NVIDIA H100 80GB HBM3, GPU-bbbb1111) has a row remap pending: the remap happens at the next GPU reset"* ]]
    [[ $output == *"stop its holders (PIDs $P "*"), then \`nvidia-smi -r -i GPU-bbbb1111-1111\`"* ]]
    vgd status
    [[ $output == *"! health: row remap pending"* ]]
}

@test "remap-failed, ecc-uncorrected, retirement-pending, recovery-action and throttled" {
    two_gpus "$H1 ecc_vol_uncorr=3 retired_pending=1 remap_uncorr=1 remap_failure=1 recovery_action=4 clocks_event_reasons=0x48"
    vgd --json doctor
    show
    [ "$status" -eq 2 ]
    [ "$(rules_fired)" = ecc-uncorrected,recovery-action,remap-failed,retirement-pending,throttled ]
    [ "$(nfind remap-pending)" -eq 0 ]
    finding_is throttled '[1]' '[]'
    [ "$(json '[.findings[] | select(.rule == "throttled")][0].severity')" = warning ]
    vgd doctor
    [[ $output == *"the driver asks for a drain, then a GPU reset of GPU 1"* ]]
    [[ $output == *"has 3 uncorrected ECC errors since the driver loaded"* ]]
    [[ $output == *"is held back: HW slowdown, HW thermal slowdown"* ]]
    [[ $output == *"no process holds the GPU: \`nvidia-smi -r -i GPU-bbbb1111-1111\`"* ]]
    vgd status
    line=$(grep "health:" <<<"$output")
    [ "${#line}" -le 80 ]
}

@test "recovery-action: a node reboot is not a reset" {
    two_gpus "$H1 ecc_vol_uncorr=0 retired_pending=0 remap_pending=0 recovery_action=2"
    vgd doctor
    [ "$status" -eq 2 ]
    [[ $output == *"the driver asks for a node reboot of GPU 1"* ]]
    [[ $output == *"a GPU reset is not enough: drain the node's jobs, then reboot it"* ]]
}

@test "gpu-missing: --expect-gpus, and the PCI bus of a fake sysfs" {
    two_gpus "$HEALTHY"
    vgd --json doctor --expect-gpus 3
    [ "$status" -eq 2 ]
    [ "$(rules_fired)" = gpu-missing ]
    [ "$(json '.findings[0].confidence')" = high ]
    vgd --json doctor --expect-gpus 2
    [ "$(rules_fired)" = "" ]
    _vg_dir
    sys=$_VG_DIR/sys
    for a in 0000:17:00.0 0000:18:00.0 0000:19:00.0 0000:1a:00.0; do
        mkdir -p "$sys/bus/pci/devices/$a"
        echo 0x10de >"$sys/bus/pci/devices/$a/vendor"
        echo 0x030200 >"$sys/bus/pci/devices/$a/class"
    done
    echo 0x8086 >"$sys/bus/pci/devices/0000:1a:00.0/vendor" # not NVIDIA
    vgd doctor --sysfs "$sys"
    show
    [ "$status" -eq 2 ]
    [[ $output == *"1 GPU is missing: the driver shows 2 of 3"* ]]
    [[ $output == *"0000:19:00.0 is on the bus, not in the driver's list"* ]]
    vgd --json doctor --sysfs "$sys" --expect-gpus 2
    [ "$(rules_fired)" = "" ]
}

@test "unknown is not healthy: NOT_SUPPORTED and NO_PERMISSION leave null, fire nothing, and a refusal is said" {
    two_gpus "remap_pending=1 recovery_action=1 ecc_vol_uncorr=5" \
        "error func=nvmlDeviceGetRemappedRows gpu=1 code=4" \
        "error func=nvmlDeviceGetFieldValues gpu=1 code=3" \
        "error func=nvmlDeviceGetTotalEccErrors gpu=1 code=3"
    vgd --json status
    show
    [ "$(json '.gpus[1].health.remapped_rows.pending')" = null ]
    [ "$(json '.gpus[1].health.recovery_action')" = null ]
    [ "$(json '.gpus[1].health.ecc.volatile.uncorrected')" = null ]
    [ "$(json '.gpus[1].health.ecc.current')" = null ]
    [ "$(json '[.gpus[1].errors[].function] | join(",")')" = nvmlDeviceGetRemappedRows ]
    vgd --json doctor
    [ "$(rules_fired)" = "" ]
    vgd status
    [[ $output == *"! GPU 1: nvmlDeviceGetRemappedRows: Insufficient Permissions"* ]]
    [[ $output != *"health:"* ]]
}

@test "the legacy driver has none of the health calls: all null, no error" {
    vg_scenario < <(echo "$GPU0"; echo "$GPU1 remap_pending=1 recovery_action=1")
    VG_NVML=$FAKE_LEGACY vgd --json status
    show
    [ "$(json '.gpus[1].health.remapped_rows.pending')" = null ]
    [ "$(json '.gpus[1].errors | length')" -eq 0 ]
    VG_NVML=$FAKE_LEGACY vgd --json doctor
    [ "$(nfind remap-pending)" -eq 0 ]
}

@test "a hung health call: the GPU is hung, its health null" {
    two_gpus "$HEALTHY" "hang func=nvmlDeviceGetRemappedRows gpu=1 seconds=3 times=1"
    vgd --json --nvml-timeout 300ms status
    show
    [ "$(json '.gpus[1].hung')" = true ]
    [ "$(json '.gpus[1].health.remapped_rows.pending')" = null ]
    [ "$(json '.gpus[0].health.remapped_rows.pending')" = false ]
}
