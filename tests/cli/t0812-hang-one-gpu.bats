#!/usr/bin/env bats
# t0812-hang-one-gpu: a driver call for one GPU that never returns (the fake's `hang func=X
# gpu=1`) costs only that GPU's figures. Four GPUs, each held by a real process the driver lists
# with its memory; GPU 1's call hangs while the three others answer. status (text and JSON),
# doctor, check, watch and serve all keep GPUs 0, 2 and 3 whole and say, for GPU 1 alone, that
# it hangs and in which call; each per-GPU call is hung in turn; nothing waits past
# --nvml-timeout, and later samples of watch and serve do not queue behind the stuck call.
# (top does not exist yet.) See docs/reliability.md.

load lib
load serve

bats_require_minimum_version 1.5.0

H0=GPU-0a000000-0000-4000-8000-000000000000
H1=GPU-0a111111-0000-4000-8000-000000000000
H2=GPU-0a222222-0000-4000-8000-000000000000
H3=GPU-0a333333-0000-4000-8000-000000000000

# Per-GPU calls the client makes, each hung in turn on GPU 1.
GPU_CALLS=(nvmlDeviceGetHandleByIndex_v2 nvmlDeviceGetName nvmlDeviceGetUUID
    nvmlDeviceGetMinorNumber nvmlDeviceGetPciInfo_v3 nvmlDeviceGetMemoryInfo_v2
    nvmlDeviceGetUtilizationRates nvmlDeviceGetMigMode nvmlDeviceGetComputeRunningProcesses_v3
    nvmlDeviceGetGraphicsRunningProcesses_v3 nvmlDeviceGetProcessUtilization)

setup() {
    vg_require_jq
    TMP=$(vg_tmpdir)
    DEVDIR=$(vg_fake_dev "" 4)
    P=()
    local i
    for i in 0 1 2 3; do
        P+=("$(vg_spawn --comm "train$i" --open "$DEVDIR/nvidia$i" -- python train.py)")
    done
}

teardown() {
    if [[ -n ${WOUT:-} ]]; then
        echo "--- watch stdout:"
        cat "$WOUT" 2>/dev/null || true
        echo "--- watch stderr (samples left out):"
        grep -v 'watch: sample [0-9]*:' "$WERR" 2>/dev/null || true
    fi
    serve_teardown
}

# four [HANG LINE...]: the host; GPU i holds (i+1) GiB for P[i], sampled busy.
four() {
    vg_scenario <<EOF
driver 550.54.15
cuda 12040
gpu index=0 uuid=$H0 name="NVIDIA H100 80GB HBM3" minor=0 bus=00000000:17:00.0 total=80GiB reserved=512MiB util=50 cc=9.0 mig=0
gpu index=1 uuid=$H1 name="NVIDIA H100 80GB HBM3" minor=1 bus=00000000:18:00.0 total=80GiB reserved=512MiB util=50 cc=9.0 mig=0
gpu index=2 uuid=$H2 name="NVIDIA H100 80GB HBM3" minor=2 bus=00000000:19:00.0 total=80GiB reserved=512MiB util=50 cc=9.0 mig=0
gpu index=3 uuid=$H3 name="NVIDIA H100 80GB HBM3" minor=3 bus=00000000:1A:00.0 total=80GiB reserved=512MiB util=50 cc=9.0 mig=0
proc gpu=0 pid=${P[0]} type=compute mem=1GiB sm=40
proc gpu=1 pid=${P[1]} type=compute mem=2GiB sm=40
proc gpu=2 pid=${P[2]} type=compute mem=3GiB sm=40
proc gpu=3 pid=${P[3]} type=compute mem=4GiB sm=40
$(printf '%s\n' "$@")
EOF
}

# timed ARGS...: runs vramguard (separate stderr) under an outer bound; ELAPSED_MS.
timed() {
    local t0 t1
    t0=${EPOCHREALTIME/[.,]/}
    run --separate-stderr timeout -k 5 60 "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" "$@"
    t1=${EPOCHREALTIME/[.,]/}
    ELAPSED_MS=$(((t1 - t0) / 1000))
}

# The healthy GPUs of a status document: full figures and their holder with its memory.
HEALTHY='all(.gpus[] | select(.index != 1); .index as $i
    | (.hung | not) and .memory.used == ($i + 1) * 1073741824 and (.errors | length) == 0
    and any(.holders[]; .pid == $p[$i] and .memory == ($i + 1) * 1073741824))'

@test "status: each per-GPU call hung on GPU 1 costs GPU 1 alone, named, within the deadline" {
    local f fails=() pids
    pids=$(printf '%s\n' "${P[@]}" | jq -sc 'map(tonumber)')
    for f in "${GPU_CALLS[@]}"; do
        four "hang func=$f gpu=1 seconds=3600"
        timed --nvml-timeout 500ms status --json
        ((status == 0)) || fails+=("$f: status exit $status: $stderr")
        ((ELAPSED_MS < 8000)) || fails+=("$f: status took $ELAPSED_MS ms")
        jq -e --argjson p "$pids" --arg f "$f" "$HEALTHY"' and .driver.available
            and (.gpus | length) == 4
            and (.gpus[1] | .hung and .memory.used == null and (.holders | all(.memory == null))
                 and .errors[0].function == $f and .errors[0].code == 10
                 and (.errors[0].message | test("^GPU 1: " + $f + " has not returned after")))' \
            <<<"$output" >/dev/null || fails+=("$f: status document: $output")
    done
    echo "# ${#GPU_CALLS[@]} per-GPU calls hung in turn" >&3
    if ((${#fails[@]})); then
        printf '%s\n' "${fails[@]}"
        return 1
    fi
}

@test "status text: GPU 1 HUNG with the call named and its holder by device node; the others whole" {
    four "hang func=nvmlDeviceGetMemoryInfo_v2 gpu=1 seconds=3600"
    timed --nvml-timeout 500ms status
    echo "$output"
    [ "$status" -eq 0 ]
    [[ $output == *"GPU 0  NVIDIA H100 80GB HBM3  GPU-0a000000  minor 0"$'\n'"  memory 1 GiB of 80 GiB used"* ]]
    [[ $output == *"GPU 1  NVIDIA H100 80GB HBM3  GPU-0a111111  minor 1  HUNG"$'\n'"  memory n/a of n/a used"* ]]
    [[ $output == *"! GPU 1: nvmlDeviceGetMemoryInfo_v2 has not returned after 0."?" s (a driver call is hung): the GPU's figures are unknown"* ]]
    [[ $output == *"the driver did not answer for this GPU in time: holders with a context may be missing"* ]]
    [[ $output == *"memory 3 GiB of 80 GiB used"* && $output == *"memory 4 GiB of 80 GiB used"* ]]
    # GPU 1's holder is still seen under it, through its device node (the minor was read
    # before the hang), with no memory figure
    local block=${output#*"GPU 1  "}
    block=${block%%"GPU 2  "*}
    [[ $block =~ " ${P[1]} $VG_USER "" "+"- -     S  fd " ]]
}

@test "doctor and check: GPU 1 not fully checked because it hangs; the others checked" {
    four "hang func=nvmlDeviceGetComputeRunningProcesses_v3 gpu=1 seconds=3600"
    timed --nvml-timeout 500ms doctor --json --no-shell
    ((ELAPSED_MS < 8000))
    jq -e '.driver.available
        and (.gpus | map(select(.index == 1))[0].not_checked | index("hung"))
        and all(.gpus[] | select(.index != 1); (.not_checked | index("hung") | not)
                and (.not_checked | index("memory") | not)
                and (.not_checked | index("processes") | not))' <<<"$output"
    timed --nvml-timeout 500ms doctor --no-shell
    [[ $output == *"GPU 1: not fully checked: a driver call for it did not return in time, so its figures and holders are unknown"* ]]
    [[ $output == *"a driver call for this GPU did not return in time"* ]]
    [[ $output != *"GPU 0: not fully checked: "*"did not return"* ]]
    timed --nvml-timeout 500ms check
    echo "$output"
    [ "$status" -eq 2 ]
    [[ ${lines[0]} == "VRAMGUARD CRITICAL - 1 GPU hung (1)"* ]]
    [[ $output == *"CRITICAL gpu-hung: GPU 1 (GPU-0a111111)"* ]]
    timed --nvml-timeout 500ms check --json
    jq -e '.hung_gpus == [1] and .lost_gpus == []' <<<"$output"
}

@test "watch: GPU 1 hangs mid-run and recovers; the others go on, nothing is said to leave" {
    four
    WOUT=$TMP/watch.out WERR=$TMP/watch.err
    "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" --verbose watch --interval 100ms \
        --nvml-timeout 500ms --format json >"$WOUT" 2>"$WERR" </dev/null 3>&- &
    WPID=$!
    _vg_record watch "$WPID"
    wait_for "[ \$(grep -c '\"holder-present\"' '$WOUT') -ge 4 ]"
    # GPU 1's memory call hangs once, for 4 s; the three others keep answering.
    four "hang func=nvmlDeviceGetMemoryInfo_v2 gpu=1 seconds=4 times=1"
    wait_for "grep -q '\"gpu-hung\"' '$WOUT'"
    # Samples go on during the hang, without waiting for the stuck call each time.
    local n
    n=$(grep -c 'watch: sample [0-9]*:' "$WERR")
    wait_for "[ \$(grep -c 'watch: sample [0-9]*:' '$WERR') -ge $((n + 5)) ]" 10
    wait_for "grep -q '\"gpu-back\"' '$WOUT'" 20
    n=$(grep -c 'watch: sample [0-9]*:' "$WERR")
    wait_for "[ \$(grep -c 'watch: sample [0-9]*:' '$WERR') -ge $((n + 3)) ]"
    kill -TERM "$WPID"
    wait_for "! kill -0 $WPID 2>/dev/null"
    local st=0
    wait "$WPID" || st=$?
    [ "$st" -eq 0 ]
    jq -e -s --arg u "$H1" '
        (map(select(.event == "gpu-hung")) | length == 1 and .[0].gpu == 1
            and .[0].gpu_uuid == $u and .[0].severity == "critical")
        and (map(select(.event == "gpu-back")) | length == 1 and .[0].gpu == 1)
        and (map(select(.event == "holder-left" or .event == "holder-appeared"
                        or .event == "holder-memory" or .event == "driver-hung"
                        or .event == "finding-closed")) | length == 0)' "$WOUT"
}

@test "serve: GPU 1's series say it hangs; the others keep theirs; scrapes stay quick" {
    command -v curl >/dev/null || skip "curl is missing (apt-get install curl)"
    four "hang func=nvmlDeviceGetMemoryInfo_v2 gpu=1 seconds=3600"
    serve_start --interval 200ms --nvml-timeout 500ms
    wait_scrape "grep -q '^vramguard_gpu_hung{gpu=\"1\",' <<<\"\$SCRAPE\""
    local i t0 t1
    for i in 1 2 3; do
        t0=${EPOCHREALTIME/[.,]/}
        scrape
        t1=${EPOCHREALTIME/[.,]/}
        (((t1 - t0) / 1000 < 5000))
        [ "$SCRAPE_CODE" = 200 ]
    done
    [ "$(sample vramguard_last_collect_success)" = 1 ]
    [ "$(nseries vramguard_gpu_hung 'gpu="1"')" -eq 1 ]
    grep -q '^vramguard_gpu_hung{gpu="1",.*} 1$' <<<"$SCRAPE"
    grep -q '^vramguard_gpu_hung{gpu="0",.*} 0$' <<<"$SCRAPE"
    [ "$(nseries vramguard_gpu_memory_used_bytes 'gpu="1"')" -eq 0 ]
    grep -q '^vramguard_gpu_memory_used_bytes{gpu="0",.*} 1073741824$' <<<"$SCRAPE"
    grep -q '^vramguard_gpu_memory_used_bytes{gpu="2",.*} 3221225472$' <<<"$SCRAPE"
    grep -q '^vramguard_gpu_memory_used_bytes{gpu="3",.*} 4294967296$' <<<"$SCRAPE"
    grep -q "^vramguard_process_memory_bytes{gpu=\"2\",.*pid=\"${P[2]}\".*} 3221225472\$" <<<"$SCRAPE"
    # The stuck call is not queued again: the driver saw it once.
    [ "$(grep -c '^vramguard_driver_hangs_total 0$' <<<"$SCRAPE")" -eq 1 ]
}
