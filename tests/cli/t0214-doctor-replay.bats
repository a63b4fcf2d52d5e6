#!/usr/bin/env bats
# t0214-doctor-replay: --record FILE writes the snapshot a diagnosing command read, --replay FILE
# diagnoses that record instead of this host (docs/recording.md): the same findings and plan
# from the record after the processes are gone, every output labelled as a replay, acting and
# long-running commands refusing --replay, a malformed record refused with its line.

load lib
load clean

setup() {
    vg_fake_dev >/dev/null
    R=$(vg_tmpdir)/host.vgsnap
}

# An orphaned worker of a dead job holding GPU 0's device node, charged 3 GiB by the driver.
orphan() {
    vg_spawn --open "$DEVDIR/nvidia0" --orphan --setsid --comm pt_data_worker -- python train.py \
        >/dev/null
    O=$VG_PID
    two_gpus "proc gpu=0 pid=$O type=compute mem=3GiB sm=0"
}

@test "doctor --record, then --replay: the same findings once the process is gone, labelled" {
    orphan
    vgc --json --record "$R" doctor
    show
    live=$output live_status=$status
    [ -s "$R" ]
    [[ $(head -1 "$R") == "vramguard-snapshot 1" ]]
    [ "$(jq -r .replay <<<"$live")" = null ]
    kill -KILL "$O"
    wait_for "! kill -0 $O 2>/dev/null" 10
    vgc --json --replay "$R" doctor
    show
    [ "$status" -eq "$live_status" ]
    [ "$(json .replay.file)" = "$R" ]
    [ "$(json .time)" = "$(jq -r .time <<<"$live")" ]
    [ "$(json -c '[.findings[] | {rule, pids, confidence}]')" = \
        "$(jq -c '[.findings[] | {rule, pids, confidence}]' <<<"$live")" ]
    json_ok 'any(.findings[]; .rule == "orphan-holder" and (.pids | index($p)))' --argjson p "$O"
    vgc --replay "$R" doctor
    [[ ${lines[0]} == "Replay of $R, recorded "*": what vramguard saw then, not this host now." ]]
}

@test "status, check and clean's plan replay a record; a record of a replay is the same bytes" {
    orphan
    # doctor's record: doctor, check and clean measure whether suspects work, status does not
    vgc --record "$R" doctor
    [ -s "$R" ]
    vgc --replay "$R" status
    show
    [ "$status" -eq 0 ]
    [[ ${lines[0]} == "Replay of $R, recorded "* ]]
    [[ $output == *"$O"* ]]
    vgc --replay "$R" check
    show
    [[ ${lines[0]} == VRAMGUARD* ]] # the monitoring line stays first
    [[ ${lines[1]} == "Replay of $R"* ]]
    vgc --json --replay "$R" clean
    show
    [ "$status" -eq 0 ]
    [ "$(json .replay.file)" = "$R" ]
    [ "$(json '[.processes[] | select(.pid == '"$O"')][0].action')" = signal ]
    vgc --replay "$R" --record "$R.again" doctor
    cmp "$R" "$R.again"
    kill -0 "$O" # a plan: nothing was signalled
}

@test "acting and long-running commands refuse --replay; clean --force, --reset, --older-than too" {
    orphan
    vgc --record "$R" status
    local c
    for c in "clean --force" "clean --reset --force" "clean --older-than 1h" "run -- true" \
        "handoff epilog" "watch" "top" "pick" "serve"; do
        # shellcheck disable=SC2086 # the words of the command
        vgc --replay "$R" $c
        echo "$c: $status $stderr"
        [ "$status" -eq 64 ]
        [[ $stderr == *"replay"* ]]
    done
    kill -0 "$O"
}

@test "a record that is not one, or is malformed, is refused with its line" {
    printf 'not a record\n' >"$R"
    vgc --replay "$R" doctor
    show
    [ "$status" -eq 3 ]
    [[ $stderr == *"doctor: --replay: $R:1: not a vramguard snapshot record"* ]]
    printf 'vramguard-snapshot 1\ntaken_at 1.000000000\nbogus 1\nend\n' >"$R"
    vgc --replay "$R" status
    [ "$status" -eq 3 ]
    [[ $stderr == *"$R:3: unknown key 'bogus' in the snapshot"* ]]
    printf 'vramguard-snapshot 1\nproc_root "/proc"\n' >"$R"
    vgc --replay "$R" status
    [[ $stderr == *"$R:3: the record ends before its 'end' line"* ]]
    vgc --replay "$R.missing" status
    [ "$status" -eq 3 ]
    [[ $stderr == *"cannot read '$R.missing'"* ]]
    vgc --record /nonexistent/dir/x.vgsnap status
    [ "$status" -eq 3 ]
    [[ $stderr == *"--record: cannot write '/nonexistent/dir/x.vgsnap'"* ]]
}

@test "--help and the completion scripts name --record and --replay" {
    run "$VG" doctor --help
    [[ $output == *"--record FILE"* && $output == *"--replay FILE"* ]]
    run "$VG" completion bash
    [[ $output == *"--replay"* ]]
}
