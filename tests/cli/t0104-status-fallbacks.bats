#!/usr/bin/env bats
# t0104-status-fallbacks: `vramguard status` against the other fake driver builds (legacy: only
# the unversioned symbols; r535: the 32-byte _v3 entries of drivers 535.43-535.98), the
# versioned-call fallbacks (memory v2 -> v1, process lists v3 -> v2), and a driver that fails:
# errors injected per GPU, GPU_IS_LOST on one GPU of four, init and count failures, no scenario,
# no library, a hung call. Exit status 0 while some GPU answered, 3 when the driver's view is
# missing; device-node holders are listed either way.

# shellcheck disable=SC2119,SC2120,SC2154 # vgs: optional arguments; bats sets $stderr*
load lib

bats_require_minimum_version 1.5.0

GIB=1073741824
MIB=1048576

setup() {
    TMP=$(vg_tmpdir)
    DEVDIR=$(vg_fake_dev)
    vg_require_jq
}

# vgs ARGS...: `vramguard --json ARGS` with the fake driver VG_NVML (default the full build)
# and this test's device directory; the output must be one vramguard.status/1 document.
vgs() {
    run --separate-stderr "$VG" --nvml "${VG_NVML:-$FAKE_FULL}" --dev "$DEVDIR" --json "$@"
    if ! jq -e '.schema == "vramguard.status/1"' <<<"$output" >/dev/null; then
        echo "not a vramguard.status/1 document (status $status): $output $stderr"
        return 1
    fi
}

# vgt ARGS...: the same as text.
vgt() {
    run --separate-stderr "$VG" --nvml "${VG_NVML:-$FAKE_FULL}" --dev "$DEVDIR" "$@"
}

# hf GPU PID FIELD: one field of the holder PID under gpus[GPU].
hf() {
    json ".gpus[$1].holders[] | select(.pid == $2) | .$3"
}

# four_gpus [EXTRA_LINES...]: four GPUs, minors 0-3 in reverse order, two processes on each
# (PID 4000GM), plus the given lines.
four_gpus() {
    local g m
    {
        echo "driver 550.54.15"
        echo "cuda 12040"
        for g in 0 1 2 3; do
            echo "gpu index=$g uuid=GPU-$g$g$g$g$g$g$g$g-0000-0000-0000-000000000000 name=\"NVIDIA A100-SXM4-80GB\" minor=$((3 - g)) bus=00000000:0$g:00.0 total=80GiB reserved=512MiB util=$((g * 10)) cc=8.0 persistence=1 compute_mode=0 mig=0"
        done
        for g in 0 1 2 3; do
            for m in 1 2; do
                echo "proc gpu=$g pid=4000$g$m type=compute mem=$((g + m))GiB"
            done
        done
        printf '%s\n' "$@"
    } >"$TMP/scenario.new"
    vg_scenario <"$TMP/scenario.new"
}

# check_gpu_intact G: GPU G of four_gpus has its memory and both processes.
check_gpu_intact() {
    local g=$1 m
    json_ok ".gpus[$g].lost == false and .gpus[$g].errors == [] and .gpus[$g].processes_known"
    [ "$(json ".gpus[$g].memory.total")" = $((80 * GIB)) ]
    [ "$(json ".gpus[$g].memory.used")" = $(((2 * g + 3) * GIB)) ]
    [ "$(json ".gpus[$g].memory.reserved")" = $((512 * MIB)) ]
    [ "$(json ".gpus[$g].memory.free")" = $((80 * GIB - (2 * g + 3) * GIB - 512 * MIB)) ]
    [ "$(json ".gpus[$g].memory.unexplained")" = 0 ]
    [ "$(json ".gpus[$g].minor")" = $((3 - g)) ]
    for m in 1 2; do
        [ "$(hf "$g" "4000$g$m" memory)" = $(((g + m) * GIB)) ]
    done
    [ "$(json ".gpus[$g].holder_count")" = 2 ]
}

# The processes for the fallback builds: a real one holding GPU 0's node and listed by the
# driver, and several the driver alone reports, one with memory "not available".
fallback_scenario() {
    vg_scenario <<EOF
driver 535.54.03
nvml 12.535.54.03
cuda 12020
gpu index=0 uuid=GPU-aaaaaaaa-0000-0000-0000-000000000000 name="Tesla V100-SXM2-16GB" minor=2 bus=00000000:07:00.0 total=16GiB reserved=256MiB util=5 cc=7.0 persistence=1 compute_mode=3 mig=0
gpu index=1 uuid=GPU-bbbbbbbb-0000-0000-0000-000000000000 name="Tesla V100-SXM2-16GB" minor=0 bus=00000000:0A:00.0 total=16GiB reserved=256MiB util=0 cc=7.0 persistence=0 compute_mode=0 mig=0
proc gpu=0 pid=$1 type=compute mem=1GiB
proc gpu=0 pid=4000001 type=compute mem=2GiB
proc gpu=0 pid=4000002 type=compute mem=na
proc gpu=0 pid=4000003 type=compute mem=300MiB
proc gpu=0 pid=4000004 type=graphics mem=3MiB
proc gpu=1 pid=4000005 type=compute mem=5MiB
proc gpu=1 pid=4000006 type=compute mem=7MiB
proc gpu=1 pid=$1 type=compute mem=11MiB
EOF
}

# check_fallback_holders PID: what fallback_scenario lists, PID being the real process.
check_fallback_holders() {
    local p=$1
    [ "$(json '[.gpus[0].holders[].pid] | join(",")')" = "$p,4000001,4000002,4000003,4000004" ]
    [ "$(json '[.gpus[0].holders[].memory] | join(",")')" = \
        "$GIB,$((2 * GIB)),,$((300 * MIB)),$((3 * MIB))" ]
    json_ok '.gpus[0].holders[] | select(.pid == 4000002) | .memory == null'
    json_ok '.gpus[0].holders[] | select(.pid == 4000004) | .types == ["graphics"]'
    [ "$(hf 0 "$p" seen_by)" = both ]
    [ "$(hf 0 "$p" state)" = S ]
    [ "$(json '[.gpus[1].holders[] | "\(.pid)=\(.memory)"] | join(",")')" = \
        "$p=$((11 * MIB)),4000005=$((5 * MIB)),4000006=$((7 * MIB))" ]
    [ "$(hf 1 "$p" seen_by)" = nvml ]
    [ "$(json '.gpus[0].memory.held_by_holders')" = $((GIB + 2 * GIB + 300 * MIB + 3 * MIB)) ]
    json_ok '.gpus[0].memory.unexplained_is_upper_bound == true'
    json_ok '.gpus[1].memory.unexplained_is_upper_bound == false'
}

@test "legacy driver (old symbols only): memory v1, reservation inside used, process lists v1" {
    vg_spawn --open "$DEVDIR/nvidia2"
    fallback_scenario "$VG_PID"
    VG_NVML=$FAKE_LEGACY vgs
    [ "$status" -eq 0 ]
    [ -z "$stderr" ]
    json_ok '.driver.available == true and .driver.errors == []'
    [ "$(json .driver.library)" = "$FAKE_LEGACY" ]
    [ "$(json .driver.memory_api)" = v1 ]
    [ "$(json .driver.process_api)" = v1 ]
    json_ok '.driver.process_stride_535 == false'
    [ "$(json .driver.driver_version)" = 535.54.03 ]
    json_ok '.driver.nvml_version == null and .driver.cuda_version == null' # no such symbols
    # v1 memory: used counts the reservation, which is not known apart.
    json_ok '.gpus[].memory.reserved == null'
    json_ok '.gpus[].memory.unexplained_includes_reserved == true'
    held=$((GIB + 2 * GIB + 300 * MIB + 3 * MIB)) # the fake's used=auto: its processes' sum
    [ "$(json '.gpus[0].memory.used')" = $((held + 256 * MIB)) ]
    [ "$(json '.gpus[0].memory.free')" = $((16 * GIB - held - 256 * MIB)) ]
    [ "$(json '.gpus[0].memory.total')" = $((16 * GIB)) ]
    # Unexplained: exactly the reservation.
    [ "$(json '.gpus[0].memory.unexplained')" = $((256 * MIB)) ]
    check_fallback_holders "$VG_PID"
    # What the old symbols answer, and only that.
    [ "$(json '.gpus[0].pci_bus_id')" = 00000000:07:00.0 ]
    [ "$(json '.gpus[0].minor')" = 2 ]
    [ "$(json '.gpus[0].name')" = Tesla\ V100-SXM2-16GB ]
    [ "$(json '.gpus[0].compute_mode')" = exclusive_process ]
    json_ok '.gpus[0].persistence_mode == true and .gpus[0].utilization.gpu == 5'
    json_ok '.gpus[0].compute_capability == null and .gpus[0].mig_mode.current == null'

    VG_NVML=$FAKE_LEGACY vgt status
    [ "$status" -eq 0 ]
    [ "${lines[0]}" = "driver 535.54.03, 2 GPUs" ]
    [[ $output == *$'\n  memory '*' of 16 GiB used, '*$' free, util 5%\n  '*"(includes the driver's reservation)"* ]]
    [[ $output != *" reserved"* ]]
}

@test "535.43-535.98 window: 32-byte _v3 entries detected and read right, 3+ entries per list" {
    vg_spawn --open "$DEVDIR/nvidia2"
    fallback_scenario "$VG_PID"
    VG_NVML=$FAKE_535 vgs
    [ "$status" -eq 0 ]
    [ -z "$stderr" ]
    [ "$(json .driver.library)" = "$FAKE_535" ]
    json_ok '.driver.process_stride_535 == true'
    [ "$(json .driver.process_api)" = v3 ]
    [ "$(json .driver.memory_api)" = v2 ]
    [ "$(json .driver.cuda_version)" = 12.2 ]
    check_fallback_holders "$VG_PID"
    [ "$(json '.gpus[0].memory.reserved')" = $((256 * MIB)) ]
    json_ok '.gpus[].memory.unexplained_includes_reserved == false'
    json_ok '[.gpus[].holders[].bogus_pid] | unique == [false]'
    # The full build reads the same lists through 24-byte entries.
    vgs
    [ "$status" -eq 0 ]
    json_ok '.driver.process_stride_535 == false and .driver.process_api == "v3"'
    check_fallback_holders "$VG_PID"
}

@test "memory v2 NOT_SUPPORTED or FUNCTION_NOT_FOUND: v1 is used, reserved null" {
    for code in 3 13; do
        four_gpus "error func=nvmlDeviceGetMemoryInfo_v2 code=$code"
        vgs
        [ "$status" -eq 0 ]
        [ "$(json .driver.memory_api)" = v1 ]
        json_ok '.gpus[].memory.reserved == null'
        json_ok '.gpus[].memory.unexplained_includes_reserved == true'
        json_ok '.gpus[].errors == [] and .driver.errors == []'
        [ "$(json '.gpus[2].memory.used')" = $((7 * GIB + 512 * MIB)) ]
        [ "$(json '.gpus[2].memory.unexplained')" = $((512 * MIB)) ]
        [ "$(hf 2 400021 memory)" = $((3 * GIB)) ]
    done
}

@test "process lists v3 FUNCTION_NOT_FOUND: v2 is used" {
    four_gpus "error func=nvmlDeviceGetComputeRunningProcesses_v3 code=13" \
        "error func=nvmlDeviceGetGraphicsRunningProcesses_v3 code=13" \
        "error func=nvmlDeviceGetMPSComputeRunningProcesses_v3 code=13"
    vgs
    [ "$status" -eq 0 ]
    [ "$(json .driver.process_api)" = v2 ]
    for g in 0 1 2 3; do check_gpu_intact "$g"; done
}

@test "a process list that grows between the two calls is read whole" {
    four_gpus "grow gpu=1 type=compute by=1 times=2" "grow gpu=3 type=compute by=2"
    vgs
    [ "$status" -eq 0 ]
    for g in 0 1 2 3; do check_gpu_intact "$g"; done
}

@test "GPU_IS_LOST on GPU 1 of 4: its memory null, the error listed, the others intact, exit 0" {
    vg_spawn --open "$DEVDIR/nvidia2" # GPU 1's node
    four_gpus "error func=nvmlDeviceGetMemoryInfo_v2 gpu=1 code=15"
    vgs
    [ "$status" -eq 0 ]
    json_ok '.driver.available == true'
    for f in total used free reserved unexplained; do
        json_ok ".gpus[1].memory.$f == null" || { echo "memory.$f is not null"; return 1; }
    done
    json_ok '.gpus[1].lost == true'
    [ "$(json '.gpus[1].errors | length')" -ge 1 ]
    json_ok '.gpus[1].errors[0] | .function == "nvmlDeviceGetMemoryInfo_v2" and .code == 15'
    [[ $(json '.gpus[1].errors[0].message') == *"GPU is lost"* ]]
    # Its holders are still there, with their memory; the fd holder too.
    [ "$(hf 1 400011 memory)" = $((2 * GIB)) ]
    [ "$(hf 1 400012 memory)" = $((3 * GIB)) ]
    [ "$(hf 1 "$VG_PID" seen_by)" = fd ]
    [ "$(json '.gpus[1].memory.held_by_holders')" = $((5 * GIB)) ]
    for g in 0 2 3; do check_gpu_intact "$g"; done

    vgt status
    [ "$status" -eq 0 ]
    [[ $output == *$'\nGPU 1  NVIDIA A100-SXM4-80GB  GPU-11111111  minor 2  LOST\n  memory n/a of n/a used, n/a free, util 10%\n'* ]]
    [[ $output == *"GPU is lost"* ]]
    [[ $output == *$'\nGPU 2  NVIDIA A100-SXM4-80GB  GPU-22222222  minor 1\n  memory 7 GiB of 80 GiB used, 72.5 GiB free, 512 MiB reserved, util 20%\n'* ]]
}

@test "one GPU's handle lost: that GPU is marked, the others intact, exit 0" {
    four_gpus "error func=nvmlDeviceGetHandleByIndex_v2 gpu=2 code=15"
    vgs
    [ "$status" -eq 0 ]
    [ "$(json '.gpus | length')" = 4 ]
    json_ok '.gpus[2].lost == true and .gpus[2].memory.total == null'
    json_ok '.gpus[2].errors[0].function == "nvmlDeviceGetHandleByIndex_v2"'
    for g in 0 1 3; do check_gpu_intact "$g"; done
}

@test "init fails: driver unavailable, exit 3, device-node holders listed in unmatched_holders" {
    vg_spawn --open "$DEVDIR/nvidia1" --children 1
    vg_spawn --open "$DEVDIR/nvidia3"
    other=$VG_PID
    four_gpus "error func=nvmlInit_v2 code=9"
    vgs
    [ "$status" -eq 3 ]
    json_ok '.driver.available == false and .gpus == []'
    [[ $(json .driver.error) == *"Driver Not Loaded"* ]]
    json_ok '.driver | .memory_api == null and .process_api == null and .driver_version == null'
    [ "$(json '.unmatched_holders | length')" = 3 ]
    [ "$(json '[.unmatched_holders[].minor] | join(",")')" = 1,1,3 ]
    json_ok '.unmatched_holders[] | select(.minor == 3) | .holder.pid == '"$other"
    json_ok '[.unmatched_holders[].holder | .seen_by == "fd" and .memory == null and .in_proc] | all'

    vgt status
    [ "$status" -eq 3 ]
    [[ ${lines[0]} == "no NVIDIA driver view: "*"Driver Not Loaded"* ]]
    [[ $output == *$'\nProcesses holding NVIDIA device nodes\n  '"$DEVDIR/nvidia1"$'\n'* ]]
    [[ $output == *$'\n  '"$DEVDIR/nvidia3"$'\n'* ]]
}

@test "count fails: driver unavailable, exit 3, the reason given" {
    four_gpus "error func=nvmlDeviceGetCount_v2 code=999"
    vgs
    [ "$status" -eq 3 ]
    json_ok '.driver.available == false and .gpus == []'
    [[ $(json .driver.error) == *nvmlDeviceGetCount* ]]
}

@test "FAKE_NVML_SCENARIO unset: one line says there is no driver view, exit 3" {
    vg_spawn --open "$DEVDIR/nvidia0"
    unset FAKE_NVML_SCENARIO
    vgt status
    [ "$status" -eq 3 ]
    [ -z "$stderr" ]
    [[ ${lines[0]} == "no NVIDIA driver view: "* ]]
    [ "$(grep -c 'driver' <<<"$output")" -eq 1 ]
    [[ $output == *"$DEVDIR/nvidia0"* ]]
    grep -qE "^ +$VG_PID +[^ ]+ +- +- +S +fd " <<<"$output"
    vgs
    [ "$status" -eq 3 ]
    json_ok '.driver.available == false'
    [ "$(json '.unmatched_holders[0].holder.pid')" = "$VG_PID" ]
    # Nobody holding a node: said so.
    kill -KILL "$VG_PID"
    wait_for "vg_gone $VG_PID"
    vgt status
    [ "$status" -eq 3 ]
    [[ $output == *$'\nno process holds an NVIDIA device node\n'* ]]
}

@test "a malformed scenario: init fails with the fake's message on stderr, exit 3" {
    vg_scenario <<'EOF'
gpu index=0 minor=banana
EOF
    vgs
    [ "$status" -eq 3 ]
    json_ok '.driver.available == false'
    [[ $stderr == *"fake-nvml: $TMP/scenario:1:"* ]]
}

@test "--nvml /nonexistent: exit 3 with the dlopen message" {
    vg_scenario <<<'gpu index=0 minor=0 total=1GiB'
    run --separate-stderr "$VG" --nvml /nonexistent/libnvidia-ml.so.1 --dev "$DEVDIR" status
    [ "$status" -eq 3 ]
    [[ ${lines[0]} == "no NVIDIA driver view: "*"/nonexistent/libnvidia-ml.so.1"*"No such file or directory"* ]]
    run --separate-stderr "$VG" --nvml /nonexistent/libnvidia-ml.so.1 --dev "$DEVDIR" --json
    [ "$status" -eq 3 ]
    json_ok '.driver.available == false and .driver.library == null'
    [[ $(json .driver.error) == *"cannot open shared object file"* ]]
    # A file that is not a library at all.
    echo 'not ELF' >"$TMP/libbogus.so"
    run --separate-stderr "$VG" --nvml "$TMP/libbogus.so" --dev "$DEVDIR" --json
    [ "$status" -eq 3 ]
    [[ $(json .driver.error) == *"$TMP/libbogus.so"* ]]
}

@test "a hung driver call: --nvml-timeout gives up, says the driver did not answer, exit 3" {
    vg_spawn --open "$DEVDIR/nvidia1"
    vg_scenario <<'EOF'
gpu index=0 minor=0 total=1GiB
hang func=nvmlDeviceGetCount_v2 seconds=30
EOF
    _vg_now
    start=$_VG_NOW
    run --separate-stderr timeout 20 "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" \
        --nvml-timeout 1s status
    _vg_now
    elapsed=$(((_VG_NOW - start) / 1000000))
    echo "took ${elapsed}s: $output $stderr"
    [ "$status" -eq 3 ]
    ((elapsed < 15))
    [[ ${lines[0]} == "no NVIDIA driver view: "*"did not answer"* ]]
    [[ $output == *"$DEVDIR/nvidia1"* ]]

    _vg_now
    start=$_VG_NOW
    run --separate-stderr timeout 20 "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" \
        --nvml-timeout 500ms --json status
    _vg_now
    (((_VG_NOW - start) / 1000000 < 15))
    [ "$status" -eq 3 ]
    json_ok '.driver.available == false'
    [[ $(json .driver.error) == *"did not answer"* ]]
    [ "$(json '.unmatched_holders[0].holder.pid')" = "$VG_PID" ]
}

@test "a short hang within the timeout is waited for" {
    vg_scenario <<'EOF'
gpu index=0 minor=0 total=1GiB
hang func=nvmlDeviceGetCount_v2 seconds=0.3
EOF
    run --separate-stderr timeout 20 "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" \
        --nvml-timeout 10s --json status
    [ "$status" -eq 0 ]
    json_ok '.driver.available == true and (.gpus | length) == 1'
}
