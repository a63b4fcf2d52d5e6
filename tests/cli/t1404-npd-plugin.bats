#!/usr/bin/env bats
# t1404-npd-plugin: contrib/kubernetes/npd/vramguard-npd, the Node Problem Detector custom
# plugin, maps `vramguard handoff node` onto NPD's protocol (exit 0 OK, 1 NonOK, 2 Unknown; the
# first line is the condition's message), one condition per script argument; and its monitor
# configuration is valid JSON naming the script and both conditions.

load lib

bats_require_minimum_version 1.5.0

NPD=$ROOT/contrib/kubernetes/npd

setup() {
    vg_fake_dev >/dev/null
    TMP=$(vg_tmpdir)
    vg_require_jq
    # The plugin runs "$VRAMGUARD $VRAMGUARD_OPTIONS handoff node".
    export VRAMGUARD=$VG VRAMGUARD_OPTIONS="--nvml $FAKE_FULL --dev $DEVDIR --nvml-timeout 1s"
}

gpus() {
    vg_scenario < <(
        echo 'gpu index=0 uuid=GPU-00000000-0000-0000-0000-000000000000 name="NVIDIA H100" minor=0 total=80GiB reserved=512MiB util=0'
        echo 'gpu index=1 uuid=GPU-11111111-0000-0000-0000-000000000000 name="NVIDIA H100" minor=1 total=80GiB reserved=512MiB util=0'
        printf '%s\n' "$@"
    )
}

@test "a clean node: both conditions OK, with vramguard's line as the message" {
    gpus
    run "$NPD/vramguard-npd" dirty
    [ "$status" -eq 0 ] && [ "$output" = "vramguard: clean: GPUs 0,1 free" ]
    run "$NPD/vramguard-npd" wedged
    [ "$status" -eq 0 ]
}

@test "leftover memory: dirty is NonOK, wedged OK" {
    vg_spawn --pgrp --orphan --comm pt_data_worker --open "$DEVDIR/nvidia1" -- python train.py >/dev/null
    gpus "proc gpu=1 pid=$VG_PID type=compute mem=3GiB sm=0"
    run "$NPD/vramguard-npd" dirty
    echo "$output"
    [ "$status" -eq 1 ]
    [[ $output == "vramguard: dirty: GPU 1 held by pid $VG_PID ("*"), a leftover of an ended job, 3 GiB" ]]
    run "$NPD/vramguard-npd" wedged
    [ "$status" -eq 0 ]
}

@test "a hung GPU: wedged is NonOK; no driver: Unknown; a bad argument: Unknown" {
    gpus "hang func=nvmlDeviceGetMemoryInfo_v2 gpu=0 seconds=30"
    run "$NPD/vramguard-npd" wedged
    echo "$output"
    [ "$status" -eq 1 ] && [[ $output == "vramguard: wedged: GPU 0 hung"* ]]
    run "$NPD/vramguard-npd" dirty
    [ "$status" -eq 0 ]
    FAKE_NVML_SCENARIO= run "$NPD/vramguard-npd" dirty
    [ "$status" -eq 2 ] && [[ $output == "vramguard: unknown: could not check: "* ]]
    run "$NPD/vramguard-npd" everything
    [ "$status" -eq 2 ] && [ "$output" = "usage: vramguard-npd dirty|wedged" ]
    VRAMGUARD=/nonexistent/vramguard run "$NPD/vramguard-npd" dirty
    [ "$status" -eq 2 ]
}

@test "the monitor configuration is valid and names the plugin for both conditions" {
    run jq -r '[.plugin, (.rules[] | .path + " " + (.args | join(" ")) + " " + .condition)] | join("\n")' "$NPD/vramguard-monitor.json"
    [ "$status" -eq 0 ]
    [ "$output" = "custom
/custom-plugins/vramguard-npd dirty GPUMemoryDirty
/custom-plugins/vramguard-npd wedged GPUWedged" ]
    [ "$(jq -r '[.conditions[].type] | join(",")' "$NPD/vramguard-monitor.json")" = GPUMemoryDirty,GPUWedged ]
}
