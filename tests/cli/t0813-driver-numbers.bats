#!/usr/bin/env bats
# t0813-driver-numbers: a lying driver's numbers are sanity-checked. A device count of
# 4294967295 (or 100000) is capped at the 256 GPUs NVML can address, with an error that still
# comes with the whole JSON document, quickly; memory figures of 2^63 bytes add up to 2^64-1
# (saturated), never wrap round to a small number, in status, clean's plan and serve. The count
# is faked with the fake driver's `count N` directive. See docs/reliability.md.

load lib
load clean
load serve

bats_require_minimum_version 1.5.0

BIG=9223372036854775808 # 2^63
MAX=18446744073709551615

setup() {
    vg_require_jq
    vg_fake_dev >/dev/null
}

teardown() {
    serve_teardown
}

# timed ARGS...: vgc under an outer bound; ELAPSED_MS.
timed() {
    local t0 t1
    t0=${EPOCHREALTIME/[.,]/}
    vgc "$@"
    t1=${EPOCHREALTIME/[.,]/}
    ELAPSED_MS=$(((t1 - t0) / 1000))
}

@test "a device count of 4294967295: 256 GPUs read, the error said, the JSON document whole" {
    two_gpus "count 4294967295"
    timed status --json
    echo "exit $status after $ELAPSED_MS ms; stderr: $stderr"
    [ "$status" -eq 0 ]
    ((ELAPSED_MS < 10000))
    json_ok '.schema == "vramguard.status/1" and .driver.available and (.gpus | length) == 256
        and (.driver.errors | length) == 1
        and .driver.errors[0].function == "nvmlDeviceGetCount_v2"
        and (.driver.errors[0].message | test("reports 4294967295 GPUs, more than NVML can address \\(at most 256"))
        and .gpus[0].memory.total == 85899345920 and (.gpus[0].lost | not)
        and .gpus[1].uuid == $u and (.gpus[2:] | all(.lost and .index >= 2))' --arg u "$U1"
    timed status
    [ "$status" -eq 0 ]
    [[ $output == *"! nvmlDeviceGetCount_v2: the driver reports 4294967295 GPUs, more than NVML can address (at most 256, one per minor number of /dev/nvidia*): only the first 256 are read"* ]]
    timed doctor --json --no-shell
    ((ELAPSED_MS < 10000))
    json_ok '.schema == "vramguard.doctor/1" and .driver.available'
}

@test "a device count of 100000 is capped too, in about the time of 256" {
    two_gpus "count 100000"
    timed status --json
    echo "exit $status after $ELAPSED_MS ms"
    [ "$status" -eq 0 ]
    ((ELAPSED_MS < 10000))
    json_ok '(.gpus | length) == 256 and (.driver.errors[0].message | test("reports 100000 GPUs"))'
    # 256 is what NVML can mean: no error
    two_gpus "count 256"
    timed status --json
    json_ok '(.gpus | length) == 256 and (.driver.errors | length) == 0'
}

@test "two holders of 2^63 bytes: the sums saturate at 2^64-1 in status, clean and serve" {
    vg_spawn --open "$DEVDIR/nvidia0" --open "$DEVDIR/nvidia1" --orphan --setsid \
        --comm pt_data_worker -- python a.py >/dev/null
    local a=$VG_PID
    vg_spawn --open "$DEVDIR/nvidia0" --orphan --setsid --comm pt_data_worker -- python b.py >/dev/null
    local b=$VG_PID
    USED0=80GiB USED1=80GiB two_gpus "proc gpu=0 pid=$a type=compute mem=$BIG sm=0" \
        "proc gpu=0 pid=$b type=compute mem=$BIG sm=0" "proc gpu=1 pid=$a type=compute mem=$BIG sm=0"
    vgc status --json
    [ "$status" -eq 0 ]
    json_ok ".gpus[0].memory.held_by_holders == $MAX and .gpus[0].memory.unexplained == 0"
    vgc clean
    show
    [[ $output == *"stopping 2 processes frees the 16 EiB the driver attributes to them"* ]]
    # a's memory over both GPUs, in the plan
    vgc clean --json
    json_ok ".processes[] | select(.pid == \$a) | .memory == $MAX" --argjson a "$a"
    command -v curl >/dev/null || skip "curl is missing (apt-get install curl)"
    serve_start --interval 200ms
    wait_scrape "grep -q '^vramguard_gpu_memory_held_bytes{gpu=\"0\",.*} $MAX\$' <<<\"\$SCRAPE\""
}
