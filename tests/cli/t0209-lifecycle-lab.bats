#!/usr/bin/env bats
# t0209-lifecycle-lab: the lifecycle lab (tests/lifecycles/README.md), the cases started by
# shell tools: bash job control (also on a GPU that cannot list its processes), nohup, setsid,
# setsid -f, daemon(3), a double fork and start-stop-daemon. Each test starts one case with the
# real tool, brings it to one state and compares what doctor, clean and clean --force say and do
# with the rows of tests/lifecycles/cases.tsv. The Python cases are t0210's, the Slurm ones t0211's, tmux and
# screen t0212's. The table is the truth a user expects, written before the model was: a row
# that fails is the model's mistake, not the table's.

load lib
load clean
load ../lifecycles/lab

setup() {
    lab_setup
}

teardown() {
    lab_teardown
}

@test "lab: every row of the table has its test, and docs/diagnoses.md shows the table" {
    local c s missing=
    while IFS=$'\t' read -r c s _; do
        [[ $c == \#* || -z $c ]] && continue
        grep -qx "    lab $c $s" "$BATS_TEST_DIRNAME"/t02*-lifecycle-lab*.bats || missing+=" $c/$s"
    done <"$LAB_TABLE"
    [ -z "$missing" ] || { echo "rows without a test:$missing"; return 1; }
    run "$LAB_DIR/doc-table" --check "$ROOT/docs/diagnoses.md"
    echo "$output"
    [ "$status" -eq 0 ]
}

@test "lab: jobctl running" {
    lab jobctl running
}

@test "lab: jobctl crash" {
    lab jobctl crash
}

@test "lab: jobctl zombie" {
    lab jobctl zombie
}

@test "lab: jobctl launcher-killed" {
    lab jobctl launcher-killed
}

@test "lab: jobctl session-ended" {
    lab jobctl session-ended
}

@test "lab: jobctl-busy crash" {
    lab jobctl-busy crash
}

@test "lab: jobctl-nolist running" {
    lab jobctl-nolist running
}

@test "lab: jobctl-nolist crash" {
    lab jobctl-nolist crash
}

@test "lab: nohup running" {
    lab nohup running
}

@test "lab: nohup crash" {
    lab nohup crash
}

@test "lab: nohup zombie" {
    lab nohup zombie
}

@test "lab: nohup launcher-killed" {
    lab nohup launcher-killed
}

@test "lab: nohup session-ended" {
    lab nohup session-ended
}

@test "lab: setsid running" {
    lab setsid running
}

@test "lab: setsid crash" {
    lab setsid crash
}

@test "lab: setsid zombie" {
    lab setsid zombie
}

@test "lab: setsid launcher-killed" {
    lab setsid launcher-killed
}

@test "lab: setsid session-ended" {
    lab setsid session-ended
}

@test "lab: setsid-f running" {
    lab setsid-f running
}

@test "lab: setsid-f crash" {
    lab setsid-f crash
}

@test "lab: setsid-f launcher-killed" {
    lab setsid-f launcher-killed
}

@test "lab: setsid-f session-ended" {
    lab setsid-f session-ended
}

@test "lab: daemon3 running" {
    lab daemon3 running
}

@test "lab: daemon3 crash" {
    lab daemon3 crash
}

@test "lab: daemon3 launcher-killed" {
    lab daemon3 launcher-killed
}

@test "lab: daemon3 session-ended" {
    lab daemon3 session-ended
}

@test "lab: double-fork running" {
    lab double-fork running
}

@test "lab: double-fork crash" {
    lab double-fork crash
}

@test "lab: double-fork launcher-killed" {
    lab double-fork launcher-killed
}

@test "lab: double-fork session-ended" {
    lab double-fork session-ended
}

@test "lab: ssd running" {
    lab ssd running
}

@test "lab: ssd crash" {
    lab ssd crash
}

@test "lab: ssd launcher-killed" {
    lab ssd launcher-killed
}

@test "lab: ssd session-ended" {
    lab ssd session-ended
}
