#!/usr/bin/env bats
# t0201-doctor-basic: `vramguard doctor` on a healthy host (no findings), --list, --help, usage
# errors, the JSON document's shape, hostile process names, and a host without a driver.

load lib
load diag

setup() {
    DEVDIR=$(vg_fake_dev)
    LIB=$(vg_fake_lib libcuda.so.1)
}

ALL_RULES="gpu-missing recovery-action ecc-uncorrected remap-failed remap-pending
retirement-pending throttled xid invalid-visible outside-visible order-mismatch ddp-gpu0 nccl-all-gpus preallocation
stray-contexts orphan-holder zombie-holder d-state-holder foreign-pid stale-pid unmatched-node
unattributed idle-holder allocator-cache"

# A healthy host: two jobs, each working on its own GPU with the variable set by UUID, each with
# a live DataLoader-like child holding the device node too.
healthy() {
    vg_spawn --open "$(dev 1)" --open "$DEVDIR/nvidiactl" --map "$LIB/libcuda.so.1" \
        --env CUDA_VISIBLE_DEVICES="$U1" --children 1 -- python train.py
    A=$VG_PID A_CHILD=${VG_CHILD_PIDS[0]}
    vg_spawn --open "$(dev 2)" --env CUDA_VISIBLE_DEVICES=2 --env CUDA_DEVICE_ORDER=PCI_BUS_ID \
        -- python serve.py
    B=$VG_PID
    homogeneous_host "proc gpu=1 pid=$A type=compute mem=20GiB sm=80" \
        "proc gpu=2 pid=$B type=compute mem=12GiB sm=40"
}

@test "a healthy host: 'No problems found' with what was checked, exit 0" {
    healthy
    vg_unread_stable --got vg_unread_text vgd doctor
    show
    [ "$status" -eq 0 ]
    [ -z "$stderr" ]
    # Per GPU, the path walked: who holds it, and why nothing is wrong.
    [[ $output == *"GPU 1  NVIDIA A100-SXM4-80GB  GPU-11111111  20 GiB of 80 GiB used"* ]]
    [[ $output == *"who:  PID $A 20 GiB, driver and device node, $VG_USER: ${HELPER:0:20}"* ]]
    [[ $output == *"      PID $A_CHILD no context, device node only, $VG_USER: ${HELPER:0:20}"* ]]
    [[ $output == *"who:  PID $B 12 GiB, driver and device node, $VG_USER: ${HELPER:0:20}"* ]]
    [ "$(grep -c 'why:  nothing wrong found' <<<"$output")" -eq 4 ]
    [[ $output != *WARNING* && $output != *CRITICAL* && $output != *INFO* ]]
    # What was not seen is said, never taken as absent: on this machine some process (a
    # sandbox's init) may deny even root its open files.
    if [ "$hidden" -eq 0 ]; then
        [[ $output == *"No problems found. Checked 4 GPUs and 3 holders against 24 rules (vramguard doctor --list)."* ]]
        [ "$(grep -c 'who:  nobody holds it' <<<"$output")" -eq 2 ]
        [[ $output != *"Not seen"* ]]
    else
        [[ $output == *"No problems found in what could be checked. Checked 4 GPUs and 3 holders against 24 rules"* ]]
        [ "$(grep -c 'who:  unknown: no process vramguard could read holds its node' <<<"$output")" -eq 2 ]
        [[ $output == *"Not seen: the open files of $hidden process"* ]]
    fi
}

@test "a healthy host in JSON: no findings, zero counts, what was checked" {
    healthy
    vg_unread_stable --got vg_unread_json vgd --json doctor
    show
    [ "$status" -eq 0 ]
    [ -z "$stderr" ]
    [ "$(json .schema)" = vramguard.doctor/1 ]
    json_ok '.findings == []'
    json_ok '.summary == {"critical": 0, "warning": 0, "info": 0}'
    json_ok '.driver == {"available": true, "error": null}'
    [ "$(json .checked.gpus)" -eq 4 ]
    [ "$(json .checked.holders)" -eq 3 ]
    [ "$(json '.checked.rules | join(" ")')" = "$(echo $ALL_RULES)" ]
    json_ok '.gpus | length == 4 and all(.fully_checked == (.not_checked == []))'
    json_ok '.unread.descriptors == $n and .unread.environments == 0' --argjson n "$hidden"
    [[ $(json .time) =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$ ]]
    [ "$(json .vramguard_version)" = "$(cat "$ROOT/VERSION")" ]
}

@test "an idle host with nobody on any GPU: no findings, whatever the runner's environment" {
    homogeneous_host
    # vgd removes the runner's own CUDA variables: these must not reach vramguard.
    export CUDA_VISIBLE_DEVICES=GPU-zzz CUDA_DEVICE_ORDER=bogus
    # alone in a PID namespace: every process there can be read, so "nobody" can be said
    vgd_alone doctor
    show
    [ "$status" -eq 0 ]
    [ "$(grep -c 'who:  nobody holds it' <<<"$output")" -eq 4 ]
    [[ $output == *"No problems found. Checked 4 GPUs and 0 holders against 24 rules"* ]]
    vgd_alone --json doctor
    json_ok '.unread == {"processes": 0, "descriptors": 0, "environments": 0, "list": [], "list_more": 0, "kernel_threads": 0, "read_by_kernel": 0, "thread_tables": 0, "hidden": false, "causes": []}'
    json_ok '.gpus | all(.fully_checked)'
}

@test "a GPU with many holders lists six and counts the rest" {
    vg_spawn --open "$(dev 3)" --children 8 --child-comm pt_data_worker -- python train.py
    P=$VG_PID
    homogeneous_host "proc gpu=3 pid=$P type=compute mem=40GiB sm=90"
    vgd doctor
    show
    [ "$status" -eq 0 ]
    [[ $output == *"who:  PID $P 40 GiB, driver and device node"* ]]
    [ "$(grep -c ', device node only, ' <<<"$output")" -eq 5 ]
    [[ $output == *"        ... and 3 more (vramguard status)"* ]]
    [[ $output == *"No problems found"*". Checked 4 GPUs and 9 holders"* ]]
}

@test "--list: every rule id with one line, without needing a driver" {
    unset FAKE_NVML_SCENARIO
    vgd doctor --list
    show
    [ "$status" -eq 0 ]
    [ -z "$stderr" ]
    [ "$(wc -l <<<"$output")" -eq 24 ]
    for r in $ALL_RULES; do
        grep -qE "^$r +[a-zA-Z]" <<<"$output" || { echo "rule $r not listed"; return 1; }
    done
    [[ $output == *"idle-holder"*"watch only"* ]]
}

@test "--help and -h: usage on stdout, exit 0" {
    for h in --help -h; do
        vgd doctor "$h"
        [ "$status" -eq 0 ]
        [ -z "$stderr" ]
        [[ ${lines[0]} == "usage: vramguard doctor [--gpu G] [--pid P] [options]" ]]
        for o in --gpu --pid --context-max --unattributed-min --no-shell --list --json; do
            [[ $output == *"  $o"* ]] || { echo "$h: $o not described"; return 1; }
        done
        [[ $output == *"Exit status: 0 no findings"* ]]
    done
}

@test "bad usage exits 64 with one line on stderr and nothing on stdout" {
    homogeneous_host
    for args in "--bogus" "-x" "--gpu" "--pid" "--pid abc" "--pid 0" "--pid -5" \
        "--pid 99999999999" "--context-max lots" "--context-max -1GiB" "--unattributed-min x" \
        "extra" "--list=yes" "--gpu 9" "--gpu GPU-9" "--gpu GPU-"; do
        # shellcheck disable=SC2086 # split on purpose
        vgd doctor $args
        if [ "$status" -ne 64 ] || [ -n "$output" ] || [ "$(wc -l <<<"$stderr")" -ne 1 ] ||
            [[ $stderr != "vramguard: doctor: "* ]]; then
            echo "doctor $args:"
            show
            return 1
        fi
    done
    vgd doctor --pid abc
    [[ $stderr == *"--pid takes a process id, not 'abc'"* ]]
    vgd doctor --gpu 9
    [[ $stderr == *"no GPU with index 9 on this host (4 GPUs)"* ]]
    vgd doctor --gpu GPU-
    [[ $stderr == *"matches several GPUs"* ]]
    vgd doctor --context-max lots
    [[ $stderr == *"--context-max takes a size such as 512MiB or 1GiB, not 'lots'"* ]]
}

@test "--json: every finding has rule, severity, title, gpus, gpu_uuids, pids, memory, evidence, fix, verdicts" {
    # A process working on GPU 0 with a stray context on GPU 3, and a PID no /proc shows.
    vg_spawn --open "$(dev 0)" --open "$(dev 3)" -- python train.py
    P=$VG_PID
    homogeneous_host "proc gpu=0 pid=$P type=compute mem=30GiB sm=70" \
        "proc gpu=3 pid=$P type=compute mem=400MiB sm=0" \
        "proc gpu=2 pid=4194400 type=compute mem=2GiB"
    vgd --json doctor
    show
    [ "$status" -eq 1 ]
    [ "$(json .schema)" = vramguard.doctor/1 ]
    [ "$(rules_fired)" = foreign-pid,stray-contexts ]
    json_ok 'all(.findings[];
        (keys | sort) == (["confidence","evidence","fix","gpu_uuids","gpus","memory","pids","rule","severity","title","verdicts"]) and
        (.verdicts | type == "array") and
        (.rule | type) == "string" and
        (.severity | IN("info", "warning", "critical")) and
        (.confidence | IN("low", "medium", "high")) and
        (.title | type == "string" and length > 0) and
        (.gpus | type == "array" and all(.[]; type == "number")) and
        (.gpu_uuids | length) == (.gpus | length) and
        (.pids | type == "array" and all(.[]; type == "number")) and
        (.memory == null or (.memory | type) == "number") and
        (.evidence | length > 0 and all(.[]; type == "string")) and
        (.fix | length > 0 and all(.[]; type == "string")))'
    finding_is stray-contexts '[3]' "[$P]"
    json_ok '.findings[] | select(.rule == "stray-contexts") | .gpu_uuids == [$u]' --arg u "$U3"
    json_ok '.findings[] | select(.rule == "stray-contexts") | .memory == 419430400'
    finding_is foreign-pid '[2]' '[4194400]'
    json_ok '.findings[] | select(.rule == "foreign-pid") | .memory == 2147483648'
    json_ok '.summary == {"critical": 0, "warning": 2, "info": 0}'
    json_ok '.checked.holders == 3'
}

@test "hostile values from a process's environment: text output escapes them, JSON stays valid" {
    vg_require_jq
    long=$(printf '0%.0s' {1..3000})
    vg_spawn --open "$(dev 0)" --env CUDA_VISIBLE_DEVICES=$'0,\e[31mred\e[0m,\x01\xff\xfe,'"$long" \
        -- $'\e]0;title\a'
    P=$VG_PID
    homogeneous_host "proc gpu=0 pid=$P type=compute mem=30GiB"
    vgd doctor
    show
    [ "$status" -eq 1 ]
    [[ $output == *"WARNING invalid-visible: PID $P"* ]]
    # No raw control character other than newline reaches the terminal.
    no_raw_controls
    vgd --json doctor
    [ "$status" -eq 1 ]
    jq -e . <<<"$output" >/dev/null
    finding_is invalid-visible '[]' "[$P]"
    json_ok '.findings[0].title | contains("\u001b[31mred")'
    # Bytes that are not UTF-8 became U+FFFD.
    json_ok '.findings[0].title | contains("\u0001\ufffd\ufffd")'
    json_ok '.findings[0].evidence | any(contains("entry 2 ") and contains("no such GPU index") and contains("CUDA stops reading the list here"))'
}

@test "without a driver: said in one line, /proc checks still run, exit 3" {
    unset FAKE_NVML_SCENARIO
    vgd doctor
    show
    [ "$status" -eq 3 ]
    [[ ${lines[0]} == "no NVIDIA driver view: "* ]]
    [[ $output == *"Only what /proc shows can be checked"* ]]
    [[ $output == *"No problems found. Checked 0 GPUs"* ]]
    vgd --json doctor
    [ "$status" -eq 3 ]
    json_ok '.driver.available == false and (.driver.error | type) == "string"'
    json_ok '.checked.gpus == 0 and .findings == []'
    # --gpu cannot be honoured without the driver's list of GPUs.
    vgd doctor --gpu 0
    [ "$status" -eq 3 ]
    [[ $stderr == *"--gpu needs the driver's view"* ]]
}

@test "--color=always colours the verdict; a pipe and --color=never stay plain" {
    homogeneous_host
    vgd_alone --color=always doctor
    [ "$status" -eq 0 ]
    [[ $output == *$'\e['*"No problems found."* ]]
    vgd doctor
    [[ $output != *$'\e['* ]]
    vgd --color=never doctor
    [[ $output != *$'\e['* ]]
}

@test "allocator-cache needs real 0% samples: none from the driver (NOT_FOUND), or 0% from a busy GPU's only holder, is not idleness" {
    vg_spawn --open "$(dev 1)" --map "$LIB/libcuda.so.1" --busy 30 -- python train.py
    T=$VG_PID
    # The driver has no per-process samples while the GPU works at 25%.
    homogeneous_host "proc gpu=1 pid=$T type=compute mem=20GiB sm=0" \
        "error func=nvmlDeviceGetProcessUtilization gpu=1 code=6"
    sed 's/^\(gpu index=1 .*\)util=0 /\1util=25 /' "$FAKE_NVML_SCENARIO" | vg_scenario
    vgd --json doctor
    show
    [ "$status" -eq 0 ]
    json_ok '[.findings[] | select(.rule == "allocator-cache")] == []'
    # 0% samples from its only holder while the GPU works: not believed either.
    homogeneous_host "proc gpu=1 pid=$T type=compute mem=20GiB sm=0"
    sed 's/^\(gpu index=1 .*\)util=0 /\1util=25 /' "$FAKE_NVML_SCENARIO" | vg_scenario
    vgd --json doctor
    show
    json_ok '[.findings[] | select(.rule == "allocator-cache")] == []'
    # The near miss: the GPU idle too, so the 0% is real.
    homogeneous_host "proc gpu=1 pid=$T type=compute mem=20GiB sm=0"
    vgd --json doctor
    show
    [ "$(rules_fired)" = allocator-cache ]
}
