#!/usr/bin/env bats
# t0206-doctor-filters: --gpu and --pid select findings (text, JSON, summary and exit status
# follow the selection), and the exit statuses: 0 nothing or info only, 1 warnings, 2 critical,
# 3 the driver's view was unavailable and nothing critical was found, 64 bad usage.

load lib
load diag

setup() {
    DEVDIR=$(vg_fake_dev)
}

FOREIGN=4194400

# Three problems on one host: an orphan holding 3 GiB on GPU 1 (critical), a process working on
# GPU 0 with a stray context on GPU 2 (warning), and a foreign PID on GPU 3 (warning).
three_problems() {
    vg_spawn --pgrp --orphan --comm pt_data_worker --open "$(dev 1)" -- python worker.py
    O=$VG_PID
    vg_gone "$VG_PARENT_PID"
    vg_spawn --open "$(dev 0)" --open "$(dev 2)" -- python train.py
    P=$VG_PID
    homogeneous_host "proc gpu=1 pid=$O type=compute mem=3GiB sm=0" \
        "proc gpu=0 pid=$P type=compute mem=30GiB sm=90" \
        "proc gpu=2 pid=$P type=compute mem=400MiB sm=0" \
        "proc gpu=3 pid=$FOREIGN type=compute mem=2GiB"
}

@test "unfiltered: every finding in rule order, summary of all, exit 2 for the critical one" {
    three_problems
    vgd --json doctor
    show
    [ "$status" -eq 2 ]
    [ "$(json '[.findings[].rule] | join(",")')" = stray-contexts,orphan-holder,foreign-pid ]
    json_ok '.summary == {"critical": 1, "warning": 2, "info": 0}'
    # Rule order is the table's, as --list and checked.rules give it.
    json_ok '[.findings[].rule] as $f | [.checked.rules[] | select(IN($f[]))] == $f'
    vgd doctor
    [ "$status" -eq 2 ]
    [[ ${lines[-1]} == "3 findings: 1 critical, 2 warnings, 0 info." ]]
    # Worst first in the text.
    crit=$(grep -n '^CRITICAL orphan-holder' <<<"$output" | cut -d: -f1)
    warn=$(grep -n '^WARNING ' <<<"$output" | head -1 | cut -d: -f1)
    [ "$crit" -lt "$warn" ]
}

@test "--gpu by index: only findings about that GPU; the exit status follows them" {
    three_problems
    vgd --json doctor --gpu 1
    show
    [ "$status" -eq 2 ]
    [ "$(rules_fired)" = orphan-holder ]
    finding_is orphan-holder '[1]' "[$O]"
    json_ok '.summary == {"critical": 1, "warning": 0, "info": 0}'
    vgd --json doctor --gpu 2
    [ "$status" -eq 1 ]
    [ "$(rules_fired)" = stray-contexts ]
    json_ok '.summary == {"critical": 0, "warning": 1, "info": 0}'
    # GPU 0 is where P works: its stray-contexts finding concerns GPU 2, not GPU 0.
    vgd --json doctor --gpu 0
    [ "$status" -eq 0 ]
    json_ok '.findings == [] and .summary.warning == 0'
}

@test "--gpu by UUID or unique UUID prefix; the text shows that GPU only" {
    three_problems
    vgd --json doctor --gpu "$U3"
    show
    [ "$status" -eq 1 ]
    [ "$(rules_fired)" = foreign-pid ]
    vgd doctor --gpu "${U3:0:9}"
    show
    [ "$status" -eq 1 ]
    [[ $output == "GPU 3  NVIDIA A100-SXM4-80GB  GPU-33333333"* ]]
    [[ $output != *"GPU 0  "* && $output != *"GPU 1  "* && $output != *"GPU 2  "* ]]
    [[ $output == *"WARNING foreign-pid:"* ]]
    [[ $output != *orphan-holder* && $output != *stray-contexts* ]]
    [[ ${lines[-1]} == "1 finding: 0 critical, 1 warning, 0 info." ]]
}

@test "--pid: only findings naming that process" {
    three_problems
    vgd --json doctor --pid "$P"
    show
    [ "$status" -eq 1 ]
    [ "$(rules_fired)" = stray-contexts ]
    vgd --json doctor --pid "$O"
    [ "$status" -eq 2 ]
    [ "$(rules_fired)" = orphan-holder ]
    vgd --json doctor --pid "$FOREIGN"
    [ "$status" -eq 1 ]
    [ "$(rules_fired)" = foreign-pid ]
    # A process no finding names: nothing, exit 0.
    vgd --json doctor --pid $$
    [ "$status" -eq 0 ]
    json_ok '.findings == []'
    vgd doctor --pid $$
    [ "$status" -eq 0 ]
    [[ ${lines[-1]} == "No problems found"* ]]
}

@test "--gpu and --pid together: findings matching both" {
    three_problems
    vgd --json doctor --gpu 2 --pid "$P"
    show
    [ "$status" -eq 1 ]
    [ "$(rules_fired)" = stray-contexts ]
    vgd --json doctor --gpu 1 --pid "$P"
    [ "$status" -eq 0 ]
    json_ok '.findings == []'
    vgd --json doctor --pid "$O" --gpu 3
    [ "$status" -eq 0 ]
    json_ok '.findings == []'
}

@test "exit 0: nothing found, or information only" {
    homogeneous_host
    vgd doctor
    [ "$status" -eq 0 ]
    # A mixed host whose shell leaves CUDA_DEVICE_ORDER unset gets an info finding only.
    vg_scenario <<EOF
gpu index=0 uuid=$U0 name="Tesla T4" minor=2 bus=00000000:07:00.0 total=15GiB used=auto cc=7.5
gpu index=1 uuid=$U1 name="NVIDIA H100 80GB HBM3" minor=0 bus=00000000:0F:00.0 total=80GiB used=auto cc=9.0
EOF
    vgd --json doctor
    show
    [ "$status" -eq 0 ]
    json_ok '.summary == {"critical": 0, "warning": 0, "info": 1}'
}

@test "exit 3: no driver view and nothing critical, even with warnings from /proc" {
    vg_spawn --pgrp --orphan --comm pt_data_worker --open "$(dev 1)"
    O=$VG_PID
    vg_gone "$VG_PARENT_PID"
    unset FAKE_NVML_SCENARIO
    vgd --json doctor
    show
    [ "$status" -eq 3 ]
    # /proc alone still finds the orphan holding a device node.
    finding_is orphan-holder '[]' "[$O]"
    json_ok '.driver.available == false'
    # A scenario the driver cannot load is the same: init fails.
    vg_scenario <<<"gpu index=1"
    vgd --json doctor
    [ "$status" -eq 3 ]
    json_ok '.driver.available == false and (.driver.error | length > 0)'
}

@test "exit 2: critical beats an unavailable driver view" {
    vg_spawn --zombie-leader --open "$(dev 0)"
    P=$VG_PID
    wait_for '[ "$(vg_stat "$P" state)" = Z ]'
    unset FAKE_NVML_SCENARIO
    vgd --json doctor
    show
    [ "$status" -eq 2 ]
    finding_is zombie-holder '[]' "[$P]"
    json_ok '.findings[0] | .severity == "critical" and .memory == null'
    json_ok '.findings[0].title | endswith("(device node open)")'
}

@test "exit 64: filters that name nothing on this host" {
    three_problems
    for args in "--gpu 4" "--gpu GPU-9" "--gpu -1" "--gpu ''" "--pid 0" "--pid x1"; do
        eval "vgd doctor $args"
        if [ "$status" -ne 64 ] || [ -n "$output" ]; then
            echo "doctor $args:"
            show
            return 1
        fi
    done
}
