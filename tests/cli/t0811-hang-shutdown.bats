#!/usr/bin/env bats
# t0811-hang-shutdown: nvmlShutdown that never returns (the fake's `hang func=nvmlShutdown`)
# costs at most --nvml-timeout and never the figures already read: one-shot commands keep the
# driver's view and exit as usual; `watch --once`, `watch` on SIGTERM and `serve` on SIGTERM
# exit within the deadline instead of waiting forever on the driver worker. See
# docs/reliability.md.

load lib
load watch
load serve

bats_require_minimum_version 1.5.0

setup() {
    TMP=$(vg_tmpdir)
    DEVDIR=$(vg_fake_dev "" 2)
    vg_require_jq
}

teardown() {
    show_watch
    serve_teardown
}

# One GPU with 1 GiB held; nvmlShutdown sleeps an hour (longer than any test runs).
hung_shutdown() {
    vg_scenario <<EOF
driver 550.54.15
cuda 12040
gpu index=0 uuid=GPU-0a000000-0000-4000-8000-000000000000 name="NVIDIA H100 80GB HBM3" minor=0 bus=00000000:17:00.0 total=80GiB reserved=512MiB util=5 cc=9.0
proc gpu=0 pid=2000000000 type=compute mem=1GiB
hang func=nvmlShutdown seconds=3600
EOF
}

# timed ARGS...: runs vramguard under an outer timeout (separate stderr); ELAPSED_MS.
timed() {
    local t0 t1
    t0=${EPOCHREALTIME/[.,]/}
    run --separate-stderr timeout -k 5 60 "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" "$@"
    t1=${EPOCHREALTIME/[.,]/}
    ELAPSED_MS=$(((t1 - t0) / 1000))
}

# wait_exit PID SECONDS: waits (bounded) until PID has exited; its status in EXIT_STATUS.
wait_exit() {
    wait_for "! kill -0 $1 2>/dev/null" "$2"
    EXIT_STATUS=0
    wait "$1" || EXIT_STATUS=$?
}

@test "status, doctor and check keep the driver's figures when nvmlShutdown hangs" {
    hung_shutdown
    timed --nvml-timeout 1s status --json
    echo "status: exit $status after $ELAPSED_MS ms: $stderr"
    [ "$status" -eq 0 ]
    ((ELAPSED_MS < 8000))
    jq -e '.driver.available and .gpus[0].memory.used == 1073741824' <<<"$output"
    timed --nvml-timeout 1s doctor --json --no-shell
    echo "doctor: exit $status after $ELAPSED_MS ms"
    ((ELAPSED_MS < 8000))
    jq -e '.driver.available' <<<"$output"
    timed --nvml-timeout 1s check
    echo "check: exit $status after $ELAPSED_MS ms: ${lines[0]:-}"
    ((ELAPSED_MS < 8000))
    [[ ${lines[0]} != *UNKNOWN* ]]
}

@test "watch --once exits within the deadline when nvmlShutdown hangs" {
    hung_shutdown
    timed --nvml-timeout 1s watch --once
    echo "exit $status after $ELAPSED_MS ms: $output / $stderr"
    [ "$status" -eq 0 ]
    ((ELAPSED_MS < 8000))
    [[ $output == *gpu-present* ]]
}

@test "watch exits on SIGTERM within the deadline when nvmlShutdown hangs" {
    hung_shutdown
    watch_start --nvml-timeout 1s
    wait_line gpu-present
    wait_samples 2
    kill -TERM "$WPID"
    wait_exit "$WPID" 10
    [ "$EXIT_STATUS" -eq 0 ]
}

@test "serve exits on SIGTERM within the deadline when nvmlShutdown hangs" {
    command -v curl >/dev/null || skip "curl is missing (apt-get install curl)"
    hung_shutdown
    serve_start --interval 200ms --nvml-timeout 1s
    scrape
    [ "$SCRAPE_CODE" = 200 ]
    kill -TERM "$SERVE_PID"
    wait_exit "$SERVE_PID" 10
    SERVE_PID=
    [ "$EXIT_STATUS" -eq 0 ]
    grep -q 'stopping on Terminated' "$SERVE_LOG"
}
