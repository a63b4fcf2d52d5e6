#!/usr/bin/env bats
# vramguard demo: the README's main job on a machine without GPUs. It must label itself a
# simulation, diagnose every staged problem, and leave no process or file behind, also when
# interrupted.

load lib

# Every process that still refers to the demo's directory: in its command line, its
# environment (the helper's options), its open files or its cwd.
demo_leftovers() {
    local dir=$1 p
    for p in /proc/[0-9]*; do
        [ "${p#/proc/}" = "$$" ] && continue
        if grep -qsF -- "$dir" "$p/environ" "$p/cmdline" 2>/dev/null ||
            ls -l "$p/fd/" 2>/dev/null | grep -qF -- "$dir"; then
            # A zombie left to init refers to nothing any more.
            [ "$(vg_stat "${p#/proc/}" state 2>/dev/null)" = Z ] && continue
            echo "${p#/proc/}"
        fi
    done
}

demo_dir_of() {
    sed -n '1s/.* in \(.*\))\.$/\1/p' "$1"
}

@test "demo labels itself, finds every staged problem, and cleans up" {
    export TMPDIR=$(vg_tmpdir)
    run timeout 120 "$VG" demo
    [ "$status" -eq 0 ]
    [[ "${lines[0]}" == SIMULATION:* ]]
    for rule in outside-visible ddp-gpu0 orphan-holder preallocation foreign-pid unattributed; do
        [[ "$output" == *"$rule"* ]] || { echo "missing $rule"; false; }
    done
    [[ "$output" == *"Simulation cleaned up"* ]]
    echo "$output" > "$TMPDIR/out"
    local dir
    dir=$(demo_dir_of "$TMPDIR/out")
    [ -n "$dir" ]
    [ ! -e "$dir" ]
    wait_for '[ -z "$(demo_leftovers "$dir")" ]' 10
}

@test "demo --json: the doctor document on stdout, the label on stderr" {
    vg_require_jq
    export TMPDIR=$(vg_tmpdir)
    timeout 120 "$VG" demo --json >"$TMPDIR/json" 2>"$TMPDIR/err"
    jq -e '.schema == "vramguard.doctor/1"' "$TMPDIR/json"
    [ "$(jq -r '[.findings[].rule] | sort | unique | join(",")' "$TMPDIR/json")" = \
        "ddp-gpu0,foreign-pid,orphan-holder,outside-visible,preallocation,unattributed" ]
    head -1 "$TMPDIR/err" | grep -q '^SIMULATION:'
}

@test "Ctrl-C while the simulation is kept running: exit 130, nothing left behind" {
    export TMPDIR=$(vg_tmpdir)
    mkfifo "$TMPDIR/in"
    # Hold the fifo open so the demo waits for Enter rather than seeing end of input.
    sleep 60 >"$TMPDIR/in" &
    local holder=$!
    "$VG" demo --keep <"$TMPDIR/in" >"$TMPDIR/out" 2>&1 &
    local demo=$!
    wait_for 'grep -q "keeps running" "$TMPDIR/out"' 60
    local dir
    dir=$(demo_dir_of "$TMPDIR/out")
    [ -d "$dir" ]
    [ -n "$(demo_leftovers "$dir")" ]   # the simulation really runs
    kill -INT "$demo"
    local rc=0
    wait_for '! kill -0 '"$demo"' 2>/dev/null' 30
    wait "$demo" || rc=$?
    kill "$holder" 2>/dev/null || true
    [ "$rc" -eq 130 ]
    [ ! -e "$dir" ]
    wait_for '[ -z "$(demo_leftovers "$dir")" ]' 10
}

@test "demo: usage errors and a missing helper are one-line errors" {
    run "$VG" demo --bogus
    [ "$status" -eq 64 ]
    [ "${#lines[@]}" -eq 1 ]
    run "$VG" demo --helper /nonexistent/vg-helper
    [ "$status" -eq 3 ]
    [[ "$output" == *"cannot find the process helper"* ]]
}
