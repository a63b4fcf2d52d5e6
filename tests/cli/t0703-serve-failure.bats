#!/usr/bin/env bats
# t0703-serve-failure: collection failures show as vramguard_last_collect_success 0, never as
# GPUs silently missing or as zeros: the driver failing at start, a driver that hangs after a
# good collection (and comes back), an NVML error on one GPU, /proc unreadable.

load lib
load diag
load serve

setup() {
    command -v curl >/dev/null || skip "curl is missing (apt-get install curl)"
    command -v promtool >/dev/null || skip "promtool is missing (apt-get install prometheus)"
    DEVDIR=$(vg_fake_dev)
}

promtool_ok() {
    run promtool check metrics <"$SCRAPE_FILE"
    printf 'promtool: %s\n' "$output"
    [ "$status" -eq 0 ]
    [ -z "$output" ]
}

@test "nvmlInit_v2 fails: success 0, no GPU invented, /healthz still up, the reason logged" {
    homogeneous_host "error func=nvmlInit_v2 code=9" "error func=nvmlInit code=9"
    serve_start
    scrape
    promtool_ok
    [ "$(sample vramguard_last_collect_success)" = 0 ]
    [ "$(sample vramguard_collect_failures_total)" -ge 1 ]
    [ "$(sample vramguard_driver_hangs_total)" = 0 ]
    # Never a good collection: no GPU is listed, no value is made up.
    [ "$(nseries vramguard_gpu_info)" -eq 0 ]
    [ "$(nseries vramguard_gpu_memory_used_bytes)" -eq 0 ]
    [ "$(nseries vramguard_last_successful_collect_timestamp_seconds)" -eq 0 ]
    [[ $SCRAPE != *vramguard_gpu_memory_held_bytes* ]]
    grep -q 'vramguard: serve: collection failed: .*Driver Not Loaded' "$SERVE_LOG"
    scrape healthz
    [ "$SCRAPE_CODE" = 200 ]
    [[ $SCRAPE == *"failed (see vramguard_last_collect_success)"* ]]
}

@test "the driver hangs after a good collection: success 0, GPUs still listed, then it recovers" {
    homogeneous_host "proc gpu=1 pid=2000000000 type=compute mem=3GiB"
    serve_start --interval 300ms --nvml-timeout 1s
    scrape
    [ "$(sample vramguard_last_collect_success)" = 1 ]
    [ "$(nseries vramguard_gpu_info)" -eq 4 ]
    local good
    good=$(sample vramguard_last_successful_collect_timestamp_seconds)
    # Every call that lists devices now sleeps 10 s, once.
    homogeneous_host "proc gpu=1 pid=2000000000 type=compute mem=3GiB" \
        "hang func=nvmlDeviceGetCount_v2 seconds=10 times=1" \
        "hang func=nvmlDeviceGetCount seconds=10 times=1"
    wait_scrape '[ "$(sample vramguard_last_collect_success)" = 0 ]' 30
    promtool_ok
    [ "$(sample vramguard_driver_hangs_total)" -ge 1 ]
    # The GPUs of the last good collection are still listed; their measurements are absent.
    [ "$(nseries vramguard_gpu_info)" -eq 4 ]
    [ "$(sample vramguard_gpu_info "gpu=\"1\",uuid=\"$U1\",name=\"NVIDIA A100-SXM4-80GB\",pci_bus_id=\"00000000:0F:00.0\",minor=\"0\"")" = 1 ]
    [ "$(nseries vramguard_gpu_memory_used_bytes)" -eq 0 ]
    [ "$(nseries vramguard_process_memory_bytes)" -eq 0 ]
    [[ $SCRAPE != *vramguard_gpu_memory_held_bytes* ]]
    # When the data is from shows apart from the last attempt.
    local when
    when=$(sample vramguard_last_successful_collect_timestamp_seconds)
    [ "$(awk -v a="$when" -v b="$(sample vramguard_last_collect_timestamp_seconds)" 'BEGIN { print (a < b) }')" = 1 ]
    [ "$(awk -v a="$when" -v b="$good" 'BEGIN { print (a >= b) }')" = 1 ]
    grep -Eq 'vramguard: serve: collection failed: .*(did|has) not answered' "$SERVE_LOG"
    [ "$(grep -c 'collection failed' "$SERVE_LOG")" -eq 1 ]
    # /metrics and /healthz keep answering at once while the driver is stuck.
    local t0=$SECONDS
    scrape healthz
    [ "$SCRAPE_CODE" = 200 ]
    [ $((SECONDS - t0)) -le 10 ]
    # Once the call returns, collections succeed again.
    wait_scrape '[ "$(sample vramguard_last_collect_success)" = 1 ]' 40
    [ "$(sample vramguard_gpu_memory_used_bytes "gpu=\"1\",uuid=\"$U1\",name=\"NVIDIA A100-SXM4-80GB\"")" = 3221225472 ]
    grep -q 'vramguard: serve: collection succeeds again' "$SERVE_LOG"
}

@test "SIGTERM while the driver is hung: still a prompt, clean exit" {
    homogeneous_host "hang func=nvmlDeviceGetCount_v2 seconds=60" "hang func=nvmlDeviceGetCount seconds=60"
    serve_start --interval 300ms --nvml-timeout 1s
    scrape
    [ "$(sample vramguard_last_collect_success)" = 0 ]
    local t0=$SECONDS
    serve_stop TERM
    [ "$SERVE_STATUS" -eq 0 ]
    [ $((SECONDS - t0)) -le 15 ]
}

@test "one GPU's memory call fails: success stays 1, that GPU's memory is absent and counted" {
    homogeneous_host "proc gpu=1 pid=2000000000 type=compute mem=3GiB" \
        "error func=nvmlDeviceGetMemoryInfo_v2 gpu=1 code=999" \
        "error func=nvmlDeviceGetMemoryInfo gpu=1 code=999"
    serve_start
    scrape
    promtool_ok
    [ "$(sample vramguard_last_collect_success)" = 1 ]
    local g1="gpu=\"1\",uuid=\"$U1\",name=\"NVIDIA A100-SXM4-80GB\""
    [ "$(nseries vramguard_gpu_memory_used_bytes)" -eq 3 ]
    [ "$(nseries vramguard_gpu_memory_total_bytes "$g1")" -eq 0 ]
    [ "$(sample vramguard_gpu_nvml_errors "$g1")" -ge 1 ]
    [ "$(sample vramguard_gpu_nvml_errors "gpu=\"0\",uuid=\"$U0\",name=\"NVIDIA A100-SXM4-80GB\"")" = 0 ]
    # Its holders are still known; only what needs its used memory is absent.
    [ "$(sample vramguard_gpu_memory_held_bytes "$g1,reason=\"foreign_pid\"")" = 3221225472 ]
    [ "$(nseries vramguard_gpu_memory_held_bytes "$g1,reason=\"unattributed\"")" -eq 0 ]
}

@test "--proc that cannot be read: exit 70 at start, saying why" {
    homogeneous_host
    run "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" --proc "$(vg_tmpdir)/no-such-proc" serve \
        --listen 127.0.0.1:0
    [ "$status" -eq 70 ]
    [[ $output == "vramguard: serve: "*no-such-proc* ]]
}
