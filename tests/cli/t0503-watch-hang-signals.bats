#!/usr/bin/env bats
# t0503-watch-hang-signals: a driver call that hangs (the fake's hang injection) is reported as
# an event while `watch` keeps running and keeps following /proc; nothing closes or reopens
# because it merely cannot be seen; recovery is reported; SIGTERM and SIGINT end it with exit
# 0 even while the driver is stuck; SIGHUP without a config file is harmless.

load lib
load watch

setup() {
    DEVDIR=$(vg_fake_dev)
    TMP=$(vg_tmpdir)
}

teardown() {
    watch_teardown
}

@test "a hung driver call is an event; /proc is still followed; SIGTERM exits 0 at once" {
    A=$(vg_spawn --open "$(dev 1)" -- python train.py)
    host "proc gpu=1 pid=$A type=compute mem=2GiB"
    export FAKE_NVML_LOG=$TMP/nvml.log
    watch_start --nvml-timeout 1s
    wait_line "holder-present PID $A on GPU 1"
    # From now on every device count hangs for 30 s.
    host "proc gpu=1 pid=$A type=compute mem=2GiB" "hang func=nvmlDeviceGetCount_v2 seconds=30"
    wait_line "driver-hung CRITICAL the NVIDIA driver has not answered for 1.0 s (a driver call is hung"
    calls=$(grep -c nvmlDeviceGetCount "$TMP/nvml.log")
    # /proc is still sampled: a new device-node holder appears, on the GPU its minor names ...
    B=$(vg_spawn --open "$(dev 0)" -- python eval.py)
    wait_line "holder-appeared PID $B on GPU 0 (GPU-00000000): device node only, $VG_USER: "
    # ... and a holder that exits leaves
    kill -KILL "$A"
    wait_line "holder-left PID $A left GPU 1 (GPU-11111111): it held 2 GiB, $VG_USER: "
    wait_samples 5
    # reported once; no GPU, finding or alert event made up from the missing view
    [ "$(nlines driver-hung)" -eq 1 ]
    [ "$(nlines gpu-lost)" -eq 0 ]
    [ "$(nlines finding-closed)" -eq 0 ]
    # later samples did not queue more driver calls behind the stuck one
    [ "$(grep -c nvmlDeviceGetCount "$TMP/nvml.log")" -eq "$calls" ]
    # SIGTERM: exit 0 now, not when the driver call returns
    watch_stop TERM
    [ "$WSTATUS" -eq 0 ]
}

@test "the driver recovers: driver-recovered, and what was open stays open" {
    host "proc gpu=0 pid=4000000 type=compute mem=1GiB"
    watch_start --nvml-timeout 300ms --expect 0=none
    wait_line "finding-present WARNING foreign-pid"
    wait_line "alert CRITICAL GPU 0"
    host "proc gpu=0 pid=4000000 type=compute mem=1GiB" \
        "hang func=nvmlDeviceGetCount_v2 seconds=1 times=1"
    wait_line driver-hung
    wait_line "driver-recovered the NVIDIA driver answers again (2 GPUs)"
    wait_samples 3
    [ "$(nlines finding-closed)" -eq 0 ]
    [ "$(nlines finding-opened)" -eq 0 ]
    [ "$(nlines alert-cleared)" -eq 0 ]
    [ "$(nlines ' alert ')" -eq 1 ]
    [ "$(nlines holder-left)" -eq 0 ]
    [ "$(nlines holder-appeared)" -eq 0 ]
}

@test "a hang at the very first sample: driver-hung first, holders by minor number" {
    A=$(vg_spawn --open "$(dev 1)" -- python train.py)
    host "hang func=nvmlDeviceGetCount_v2 seconds=30"
    watch_start --nvml-timeout 500ms
    wait_line "driver-hung CRITICAL"
    wait_line "holder-present PID $A on /dev/nvidia1: device node only"
    watch_stop INT
    [ "$WSTATUS" -eq 0 ]
}

@test "SIGINT exits 0; SIGHUP without --config says so and goes on" {
    host
    watch_start
    wait_line gpu-present 2
    kill -HUP "$WPID"
    wait_line "SIGHUP: there is no --config file to read again" 1 "$WERR"
    wait_samples 2
    watch_stop INT
    [ "$WSTATUS" -eq 0 ]
}

@test "a reader that goes away (watch | head) ends watch quietly, without waiting for an event" {
    host
    run timeout 20 bash -c "'$VG' --nvml '$FAKE_FULL' --dev '$DEVDIR' watch --interval 100ms | head -n 1; exit \${PIPESTATUS[0]}"
    [ "$status" -eq 0 ]
    [[ $output == *gpu-present* ]]
}
