#!/usr/bin/env bats
# t0804-hang: a driver call that never returns (the fake's `hang func=X seconds=60`) makes
# status, doctor, visible and check end within --nvml-timeout with a clear error, still showing
# what /proc says (the device-node holder); the default deadline is 10 s. Each major call of the
# client is hung in turn: a host-wide one (init, versions, count) costs the whole driver view
# (exit 3); a per-GPU one costs only that GPU, marked hung with the call named (here the host's
# only GPU: exit 3, check critical; t0812 has a hung GPU among healthy ones); nvmlShutdown apart:
# a hung shutdown costs the wait, never the figures (t0811). watch keeps sampling through a hang
# and says when the driver hangs and recovers. See docs/reliability.md.

load lib
load watch

bats_require_minimum_version 1.5.0

HOST_CALLS=(nvmlInit_v2 nvmlSystemGetDriverVersion nvmlDeviceGetCount_v2)
GPU_CALLS=(nvmlDeviceGetHandleByIndex_v2 nvmlDeviceGetUUID nvmlDeviceGetMemoryInfo_v2
    nvmlDeviceGetComputeRunningProcesses_v3 nvmlDeviceGetProcessUtilization)

setup() {
    TMP=$(vg_tmpdir)
    DEVDIR=$(vg_fake_dev "" 2)
    vg_require_jq
    HOLDER=$(vg_spawn --open "$DEVDIR/nvidia0" --comm hang-holder)
}

# scenario_hang FUNC [SECONDS]: one GPU held by HOLDER, FUNC hangs for SECONDS (default a
# minute); SECONDS 0 writes no hang at all.
scenario_hang() {
    local hang="hang func=$1 seconds=${2:-60}"
    if [[ ${2:-60} == 0 ]]; then hang=; fi
    vg_scenario <<EOF2
driver 550.54.15
cuda 12040
gpu index=0 uuid=GPU-0a000000-0000-0000-0000-000000000000 name="NVIDIA H100 80GB HBM3" minor=0 bus=00000000:17:00.0 total=80GiB reserved=512MiB util=5 cc=9.0 persistence=1 compute_mode=0 mig=0
proc gpu=0 pid=$HOLDER type=compute mem=1GiB sm=10
$hang
EOF2
}

# timed ARGS...: runs vramguard (separate stderr) and sets ELAPSED_MS.
timed() {
    local t0 t1
    t0=${EPOCHREALTIME/[.,]/}
    run --separate-stderr timeout -k 5 90 "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" "$@"
    t1=${EPOCHREALTIME/[.,]/}
    ELAPSED_MS=$(((t1 - t0) / 1000))
}

@test "each hung host-wide call: status, doctor, visible and check give up after --nvml-timeout, exit 3" {
    local f fails=() n=0
    for f in "${HOST_CALLS[@]}"; do
        scenario_hang "$f"
        timed --nvml-timeout 300ms status --json
        n=$((n + 1))
        ((status == 3)) || fails+=("$f: status exit $status")
        ((ELAPSED_MS < 5000)) || fails+=("$f: status took $ELAPSED_MS ms")
        jq -e --argjson p "$HOLDER" '.driver.available == false
            and (.driver.error | test("did not answer within 0.300 s"))
            and any(.unmatched_holders[]; .holder.pid == $p)' <<<"$output" >/dev/null ||
            fails+=("$f: status document: $output")

        timed --nvml-timeout 300ms doctor --json --no-shell
        ((status == 3)) || fails+=("$f: doctor exit $status")
        ((ELAPSED_MS < 5000)) || fails+=("$f: doctor took $ELAPSED_MS ms")
        jq -e '.driver.available == false and (.driver.error | test("did not answer"))' \
            <<<"$output" >/dev/null || fails+=("$f: doctor document: $output")

        timed --nvml-timeout 300ms visible 0
        ((status == 3)) || fails+=("$f: visible exit $status")
        ((ELAPSED_MS < 5000)) || fails+=("$f: visible took $ELAPSED_MS ms")
        [[ -z $output && $stderr == "vramguard: visible: "*"did not answer within 0.300 s"* ]] ||
            fails+=("$f: visible said: $output / $stderr")

        timed --nvml-timeout 300ms check
        ((status == 3)) || fails+=("$f: check exit $status")
        ((ELAPSED_MS < 5000)) || fails+=("$f: check took $ELAPSED_MS ms")
        [[ ${lines[0]} == "VRAMGUARD UNKNOWN - "*"did not answer"* ]] ||
            fails+=("$f: check said: ${lines[0]:-} / $stderr")
        n=$((n + 3))
    done
    echo "# $n runs against ${#HOST_CALLS[@]} hung host-wide calls" >&3
    if ((${#fails[@]})); then
        printf '%s\n' "${fails[@]}"
        return 1
    fi
}

@test "each hung per-GPU call: only that GPU is lost, marked hung with the call named" {
    local f fails=() n=0
    for f in "${GPU_CALLS[@]}"; do
        scenario_hang "$f"
        # The host's only GPU hangs: no GPU answers, so status and doctor cannot check (3),
        # and check calls it critical; the holder is still shown, under the GPU when its
        # minor number was read before the hang, else under its device node.
        timed --nvml-timeout 300ms status --json
        n=$((n + 1))
        ((status == 3)) || fails+=("$f: status exit $status")
        ((ELAPSED_MS < 5000)) || fails+=("$f: status took $ELAPSED_MS ms")
        jq -e --argjson p "$HOLDER" --arg f "$f" '.driver.available
            and .gpus[0].hung and .gpus[0].memory.used == null
            and (.gpus[0].errors[0].function == $f)
            and (.gpus[0].errors[0].message | test("has not returned after"))
            and any(.unmatched_holders[].holder, .gpus[0].holders[]; .pid == $p)' \
            <<<"$output" >/dev/null || fails+=("$f: status document: $output")

        timed --nvml-timeout 300ms doctor --json --no-shell
        ((status == 3)) || fails+=("$f: doctor exit $status")
        ((ELAPSED_MS < 5000)) || fails+=("$f: doctor took $ELAPSED_MS ms")
        jq -e '.driver.available and (.gpus[0].not_checked | index("hung"))' \
            <<<"$output" >/dev/null || fails+=("$f: doctor document: $output")

        timed --nvml-timeout 300ms visible 0
        ((status == 3)) || fails+=("$f: visible exit $status")
        ((ELAPSED_MS < 5000)) || fails+=("$f: visible took $ELAPSED_MS ms")
        [[ -z $output && $stderr == "vramguard: visible: cannot resolve: GPU 0: $f has not returned"* ]] ||
            fails+=("$f: visible said: $output / $stderr")

        timed --nvml-timeout 300ms check
        ((status == 2)) || fails+=("$f: check exit $status")
        ((ELAPSED_MS < 5000)) || fails+=("$f: check took $ELAPSED_MS ms")
        [[ ${lines[0]} == "VRAMGUARD CRITICAL - 1 GPU hung (0)"* && $output == *"gpu-hung: GPU 0"* ]] ||
            fails+=("$f: check said: $output / $stderr")
        n=$((n + 3))
    done
    echo "# $n runs against ${#GPU_CALLS[@]} hung per-GPU calls" >&3
    if ((${#fails[@]})); then
        printf '%s\n' "${fails[@]}"
        return 1
    fi
}

@test "the default deadline is 10 s: a hung nvmlInit_v2 is given up on after it, exit 3" {
    scenario_hang nvmlInit_v2
    timed status
    echo "status $status after $ELAPSED_MS ms: $output $stderr"
    [ "$status" -eq 3 ]
    ((ELAPSED_MS >= 9900 && ELAPSED_MS < 16000))
    [[ $output == *"did not answer within 10.000 s"* ]]
    [[ $output == *"$HOLDER"* ]]
}

@test "a hang shorter than --nvml-timeout is waited for: the full view, exit 0" {
    scenario_hang nvmlDeviceGetMemoryInfo_v2 0.3
    timed --nvml-timeout 5s status --json
    [ "$status" -eq 0 ]
    jq -e '.driver.available and .gpus[0].memory.used != null' <<<"$output" >/dev/null
}

@test "watch keeps sampling through a hung driver: driver-hung, then driver-recovered" {
    # Healthy first.
    scenario_hang nvmlDeviceGetCount_v2 0
    watch_start --format json --nvml-timeout 300ms
    wait_line '-present"'
    # Every call of nvmlDeviceGetCount_v2 now sleeps 2 s: samples time out, watch goes on.
    scenario_hang nvmlDeviceGetCount_v2 2
    wait_line '"driver-hung"'
    local n
    n=$(samples)
    wait_samples 3
    kill -0 "$WPID"
    # The driver answers again.
    scenario_hang nvmlDeviceGetCount_v2 0
    wait_line '"driver-recovered"' 1 "$WOUT" || { show_watch; return 1; }
    watch_stop
    show_watch
    [ "$WSTATUS" -eq 0 ]
    [ "$(nlines '"driver-hung"')" -ge 1 ]
    (($(samples) > n))
}
