#!/usr/bin/env bats
# t0504-check: `vramguard check`, one sample against the rules and the expectations with a
# Nagios-style summary line first and an exit status per level: 0 ok, 1 warning, 2 critical,
# 3 could not check; --json; --config; usage errors.

load lib
load watch

setup() {
    DEVDIR=$(vg_fake_dev)
    TMP=$(vg_tmpdir)
}

vgc() {
    run --separate-stderr "$VG" --nvml "${VG_NVML:-$FAKE_FULL}" --dev "$DEVDIR" check "$@"
    printf 'status %s\nstdout:\n%s\nstderr:\n%s\n' "$status" "$output" "$stderr"
}

@test "0 OK: nothing wrong, or nothing beyond what is expected" {
    A=$(vg_spawn --open "$(dev 1)" -- python train.py)
    host "proc gpu=1 pid=$A type=compute mem=2GiB"
    vg_unread_stable --got vg_unread_text vgc
    [ "$status" -eq 0 ]
    [ "${lines[0]}" = "VRAMGUARD OK - 2 GPUs, 1 holder, no problems found | critical=0 warning=0 info=0 alerts=0 holders=1" ]
    # and, when this machine hides some process even from root, a line that says so
    if [ "$hidden" -gt 0 ]; then
        [ "${#lines[@]}" -eq 2 ]
        [[ ${lines[1]} == "Not seen: the open files of "* ]]
    else
        [ "${#lines[@]}" -eq 1 ]
    fi
    [ -z "$stderr" ]
    vgc --expect "1=$VG_USER" --expect 0=none
    [ "$status" -eq 0 ]
    [[ ${lines[0]} == "VRAMGUARD OK - "* ]]
}

@test "1 WARNING: a warning finding, or a holder a GPU should not carry" {
    host "proc gpu=0 pid=4000000 type=compute mem=1GiB"
    vgc
    [ "$status" -eq 1 ]
    [[ ${lines[0]} == "VRAMGUARD WARNING - 1 finding: foreign-pid on GPU 0 (PID 4000000) | critical=0 warning=1 info=0 alerts=0 holders=1" ]]
    [[ ${lines[1]} == "WARNING foreign-pid: the driver reports PID 4000000 holding 1 GiB"* ]]
    [[ ${lines[2]} == "  fix: "* ]]
    A=$(vg_spawn --open "$(dev 1)" -- python train.py)
    host "proc gpu=1 pid=$A type=compute mem=2GiB"
    vgc --expect 1=nobody
    [ "$status" -eq 1 ]
    [[ ${lines[0]} == "VRAMGUARD WARNING - 1 alert: unexpected-holder on GPU 1 (PID $A) |"* ]]
    [[ ${lines[1]} == "WARNING alert unexpected-holder: GPU 1 (GPU-11111111) may carry only nobody (expect 1=nobody): PID $A holds 2 GiB, $VG_USER: "* ]]
}

@test "2 CRITICAL: memory on a GPU that should be empty; a critical finding" {
    A=$(vg_spawn --open "$(dev 0)" -- python train.py)
    host "proc gpu=0 pid=$A type=compute mem=2GiB" "proc gpu=1 pid=4000000 type=compute mem=1GiB"
    vgc --expect 0=none
    [ "$status" -eq 2 ]
    [[ ${lines[0]} == "VRAMGUARD CRITICAL - 1 alert, 1 finding: unexpected-holder on GPU 0 (PID $A); foreign-pid on GPU 1 (PID 4000000) | critical=0 warning=1 info=0 alerts=1 holders=2" ]]
    # worst first
    [[ ${lines[1]} == "CRITICAL alert unexpected-holder: GPU 0 (GPU-00000000) should be empty (expect 0=none): PID $A holds 2 GiB"* ]]
    [[ ${lines[2]} == "WARNING foreign-pid: "* ]]
    # a critical finding without any expectation: an orphaned worker keeping 9 GiB
    kill -KILL "$A"
    wait_for "vg_gone $A"
    vg_spawn --pgrp --orphan --comm pt_data_worker --open "$(dev 0)" -- python worker >/dev/null
    O=$VG_ORPHAN_PID
    vg_scenario <<EOF
gpu index=0 uuid=$U0 name="NVIDIA A100-SXM4-80GB" minor=2 total=80GiB reserved=512MiB used=9GiB util=0
EOF
    vgc
    [ "$status" -eq 2 ]
    [[ ${lines[0]} == "VRAMGUARD CRITICAL - "*"orphan-holder on GPU 0 (PID $O)"* ]]
    # a GPU that fell off the bus (NVML_ERROR_GPU_IS_LOST, 15)
    host "error func=nvmlDeviceGetMemoryInfo_v2 gpu=1 code=15"
    vgc
    [ "$status" -eq 2 ]
    [[ ${lines[0]} == "VRAMGUARD CRITICAL - 1 GPU lost (1)"* ]]
    [[ $output == *$'\n'"CRITICAL gpu-lost: GPU 1 (GPU-11111111) answers \"GPU is lost\""* ]]
}

@test "3 UNKNOWN: no driver; an expectation naming no GPU; but critical stays critical" {
    unset FAKE_NVML_SCENARIO
    vgc
    [ "$status" -eq 3 ]
    [[ ${lines[0]} == "VRAMGUARD UNKNOWN - no NVIDIA driver view (cannot initialise NVML from "* ]]
    host
    vgc --expect 7=none
    [ "$status" -eq 3 ]
    [[ ${lines[0]} == "VRAMGUARD UNKNOWN - expect 7=none: no GPU with that index | "* ]]
    vgc --expect GPU-9=none
    [ "$status" -eq 3 ]
    [[ ${lines[0]} == *"expect GPU-9=none: no GPU with that UUID"* ]]
    A=$(vg_spawn --open "$(dev 0)" -- python train.py)
    host "proc gpu=0 pid=$A type=compute mem=2GiB"
    vgc --expect 0=none --expect 7=none
    [ "$status" -eq 2 ]
    [[ ${lines[0]} == "VRAMGUARD CRITICAL - expect 7=none: no GPU with that index; 1 alert: "* ]]
}

@test "--json: a vramguard.check/1 document with the status, alerts and findings" {
    vg_require_jq
    A=$(vg_spawn --open "$(dev 0)" -- python train.py)
    host "proc gpu=0 pid=$A type=compute mem=2GiB" "proc gpu=1 pid=4000000 type=compute mem=1GiB"
    vgc --json --expect "$U0"=none
    [ "$status" -eq 2 ]
    json_ok '.schema == "vramguard.check/1" and .status == "critical" and .exit_status == 2'
    json_ok '.summary | startswith("VRAMGUARD CRITICAL - 1 alert, 1 finding")'
    json_ok '.driver == {"available": true, "error": null} and .problem == null'
    json_ok '.alerts == [{"alert": "unexpected-holder",
        "severity": "critical", "gpu": 0, "gpu_uuid": $u, "mig_device": null, "pid": $a,
        "user": $user, "command": .alerts[0].command, "memory": 2147483648,
        "expect": ($u + "=none"), "message": .alerts[0].message}]' --argjson a "$A" --arg u "$U0" \
        --arg user "$VG_USER"
    json_ok '.findings | length == 1 and .[0].rule == "foreign-pid" and .[0].pids == [4000000]'
    json_ok '.counts == {"critical": 0, "warning": 1, "info": 0, "alerts": 1, "holders": 2}'
    unset FAKE_NVML_SCENARIO
    vgc --json
    [ "$status" -eq 3 ]
    json_ok '.status == "unknown" and .driver.available == false and (.driver.error | length > 0)'
}

@test "--config takes expect and threshold from a watch config file; flags win" {
    A=$(vg_spawn --open "$(dev 0)" -- python train.py)
    host "proc gpu=0 pid=$A type=compute mem=50MiB"
    printf 'interval = 5s\nexpect = 0=none\nthreshold = 100MiB\nexec = /bin/true\n' >"$TMP/c.conf"
    vgc --config "$TMP/c.conf"
    [ "$status" -eq 0 ]
    vgc --config "$TMP/c.conf" --threshold 10MiB
    [ "$status" -eq 2 ]
    printf 'expect = 0=none\nnope = 1\n' >"$TMP/bad.conf"
    vgc --config "$TMP/bad.conf"
    [ "$status" -eq 64 ]
    [[ $stderr == "vramguard: check: $TMP/bad.conf:2: unknown key 'nope'"* ]]
}

@test "bad usage: exit 64, one line on stderr; --help" {
    for args in "--expect 0" "--threshold x" "--bogus" "extra"; do
        # shellcheck disable=SC2086
        run --separate-stderr "$VG" check $args
        [ "$status" -eq 64 ]
        [ -z "$output" ]
        [ "${#stderr_lines[@]}" -eq 1 ]
        [[ $stderr == "vramguard: check: "* ]]
    done
    run --separate-stderr "$VG" check --help
    [ "$status" -eq 0 ]
    [[ $output == *"--expect"* && $output == *"--config"* && $output == *"3 could not check"* ]]
}
