#!/usr/bin/env bats
# vramguard demo: the README's main job on a machine without GPUs. It must label itself a
# simulation, diagnose every staged problem, and leave no process or file behind on any way
# out: a reader that goes away (| head -1), a write error, SIGINT, SIGTERM, a closed terminal
# (SIGHUP), SIGKILL of the command. --keep leaves the simulation as it was until --stop or its
# lifetime, which ends it whole, without zombies; a SIGKILLed keeper takes its processes along.

load lib

bats_require_minimum_version 1.5.0

# Every process that still refers to the demo's directory: in its command line, its
# environment (the helper's options), its open files or its cwd.
demo_leftovers() {
    local dir=$1 f p
    # Two processes in all, not a few per process: this runs in polling loops.
    {
        grep -lsF -- "$dir" /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null
        find /proc/[0-9]*/fd -lname "$dir*" 2>/dev/null
    } | while IFS= read -r f; do
        p=${f#/proc/}
        p=${p%%/*}
        [ "$p" = "$$" ] && continue
        # A zombie left to init refers to nothing any more.
        [ "$(vg_stat "$p" state 2>/dev/null)" = Z ] && continue
        echo "$p"
    done | sort -u
}

demo_dir_of() {
    sed -n '1s/.* in \(.*\))\.$/\1/p' "$1"
}

# demo_procs: the PIDs of this build's vramguard running `demo` (the command and its keeper),
# zombies left to init apart.
demo_procs() {
    local f p args
    find /proc/[0-9]*/exe -maxdepth 0 -lname "$VG" 2>/dev/null | while IFS= read -r f; do
        p=${f#/proc/}
        p=${p%/exe}
        mapfile -d '' args <"/proc/$p/cmdline" 2>/dev/null || continue
        [[ " ${args[*]} " == *" demo "* ]] || continue
        [ "$(vg_stat "$p" state 2>/dev/null)" = Z ] && continue
        echo "$p"
    done
}

# nothing_left DIR: DIR is gone, no process refers to it, no keeper runs (bounded waits).
nothing_left() {
    local dir=$1 # (wait_for's eval sees it; its own $1 is the condition)
    wait_for '[ -z "$(demo_leftovers "$dir")" ]' 15
    wait_for '[ -z "$(demo_procs)" ]' 15 || {
        ps -o pid,ppid,stat,args -p "$(demo_procs | paste -sd, -)"
        return 1
    }
    [ ! -e "$dir" ]
}

# frozen_demo ARGS...: starts `vramguard demo ARGS` writing into a FIFO whose reader never
# reads and has shrunk the pipe to 4 KiB, so the demo (8 KiB of text) blocks in the middle of
# its output with the whole simulation staged; sets DEMO (its PID), READER and DIR.
frozen_demo() {
    mkfifo "$TMPDIR/fifo"
    perl -e 'open(my $f, "<", $ARGV[0]) or die "$!"; fcntl($f, 1031, 4096) or die "$!"; sleep 120' \
        "$TMPDIR/fifo" 2>"$TMPDIR/reader.err" 3>&- &
    READER=$!
    _vg_record reader "$READER"
    "$VG" demo "$@" >"$TMPDIR/fifo" 2>"$TMPDIR/err" 3>&- &
    DEMO=$!
    _vg_record demo "$DEMO"
    wait_for '[[ $(cat /proc/$DEMO/wchan 2>/dev/null) == *pipe_w* ]]' 60 # pipe_write, anon_pipe_write; pipe_wait before 5.5
    DIR=$(ls -d "$TMPDIR"/vramguard-demo-*)
    [ -e "$DIR/tf.pid" ]
    [ -n "$(demo_leftovers "$DIR")" ] # the simulation really runs
}

# demo_exit: waits (bounded) for DEMO to exit; its status in DEMO_STATUS.
demo_exit() {
    wait_for "! kill -0 $DEMO 2>/dev/null" 30
    DEMO_STATUS=0
    wait "$DEMO" || DEMO_STATUS=$?
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

@test "demo: usage errors and a missing helper are one-line errors" {
    run "$VG" demo --bogus
    [ "$status" -eq 64 ]
    [ "${#lines[@]}" -eq 1 ]
    run "$VG" demo --helper /nonexistent/vg-helper
    [ "$status" -eq 3 ]
    [[ "$output" == *"cannot find the process helper"* ]]
}

@test "demo | head -1: exit 0, quietly, and nothing left behind (SIGPIPE is an EPIPE)" {
    export TMPDIR=$(vg_tmpdir)
    run --separate-stderr bash -c '"$0" demo | head -1; exit ${PIPESTATUS[0]}' "$VG"
    echo "exit $status; stderr: $stderr"
    [ "$status" -eq 0 ]
    [[ $output == SIMULATION:* ]]
    [ -z "$stderr" ]
    echo "$output" >"$TMPDIR/out"
    nothing_left "$(demo_dir_of "$TMPDIR/out")"
}

@test "a write error (stdout is /dev/full): exit 70 with the reason, nothing left behind" {
    export TMPDIR=$(vg_tmpdir)
    run --separate-stderr bash -c '"$0" demo >/dev/full' "$VG"
    [ "$status" -eq 70 ]
    [[ $stderr == *"vramguard: demo: cannot write the output: No space left on device"* ]]
    [ -z "$(ls -d "$TMPDIR"/vramguard-demo-* 2>/dev/null)" ]
    wait_for '[ -z "$(demo_procs)" ]' 15
}

@test "SIGINT or SIGTERM in the middle: 128 + the signal, everything removed first" {
    export TMPDIR=$(vg_tmpdir)
    local sig
    for sig in INT TERM; do
        frozen_demo
        kill -"$sig" "$DEMO"
        kill "$READER"
        demo_exit
        echo "SIG$sig: exit $DEMO_STATUS"
        [ "$DEMO_STATUS" -eq $((128 + $(kill -l "$sig"))) ]
        nothing_left "$DIR"
        rm -f "$TMPDIR/fifo"
    done
}

@test "a closed terminal (SIGHUP, the reader gone) in the middle: exit 129, nothing left" {
    export TMPDIR=$(vg_tmpdir)
    frozen_demo
    # What a hang-up does: SIGHUP to the foreground job, and writes fail from then on.
    kill -HUP "$DEMO"
    kill "$READER"
    demo_exit
    [ "$DEMO_STATUS" -eq 129 ]
    nothing_left "$DIR"
}

@test "SIGKILL of the demo in the middle: its keeper removes everything" {
    export TMPDIR=$(vg_tmpdir)
    frozen_demo
    kill -KILL "$DEMO"
    kill "$READER"
    demo_exit
    nothing_left "$DIR"
}

@test "--keep: the simulation stays as it was until --stop; a stopped process is reaped" {
    export TMPDIR=$(vg_tmpdir)
    run --separate-stderr timeout 120 "$VG" demo --keep
    [ "$status" -eq 0 ]
    [[ $output == *"keeps running, as it is, until 'vramguard demo --stop' (or for 1h)"* ]]
    echo "$output" >"$TMPDIR/out"
    local dir
    dir=$(demo_dir_of "$TMPDIR/out")
    [ -d "$dir" ]
    # Another command sees the same story ...
    run env FAKE_NVML_SCENARIO="$dir/scenario" "$VG" --nvml "$FAKE_FULL" --dev "$dir/dev" doctor --json
    [ "$(jq -r '[.findings[].rule] | sort | unique | join(",")' <<<"$output")" = \
        "ddp-gpu0,foreign-pid,orphan-holder,outside-visible,preallocation,unattributed" ]
    # ... a second --keep is refused ...
    run --separate-stderr "$VG" demo --keep
    [ "$status" -eq 1 ]
    [[ $stderr == *"a kept simulation is already running"* ]]
    # ... a staged process that is stopped does not linger as a zombie of the keeper ...
    local tf
    tf=$(awk '$1 == "main" { print $2 }' "$dir/tf.pid")
    kill -KILL "$tf"
    wait_for "[ ! -e /proc/$tf ]" 10
    # ... and --stop removes it all.
    run "$VG" demo --stop
    [ "$status" -eq 0 ]
    [[ $output == "Simulation cleaned up: "*" processes stopped, its directory removed." ]]
    nothing_left "$dir"
    run --separate-stderr "$VG" demo --stop
    [ "$status" -eq 1 ]
    [[ $stderr == *"no simulation kept by 'vramguard demo --keep' is running"* ]]
}

@test "--keep=DUR: at the end of its lifetime the simulation is removed whole, no zombies" {
    export TMPDIR=$(vg_tmpdir)
    run timeout 120 "$VG" demo --keep=3s
    [ "$status" -eq 0 ]
    echo "$output" >"$TMPDIR/out"
    local dir pids p
    dir=$(demo_dir_of "$TMPDIR/out")
    pids=$(cat "$dir"/*.pid | awk '{ print $2 }' | sort -u)
    nothing_left "$dir"
    for p in $pids; do
        # Gone, not a zombie of a keeper that stopped reaping.
        [ ! -e "/proc/$p" ] || [ "$(vg_stat "$p" ppid)" = 1 ] || { echo "PID $p lingers"; false; }
    done
    run --separate-stderr "$VG" demo --keep=0s
    [ "$status" -eq 64 ]
}

@test "--keep under a terminal that closes: the kept simulation stays; --stop removes it" {
    command -v script >/dev/null || skip "script is missing (apt-get install util-linux)"
    export TMPDIR=$(vg_tmpdir)
    script -qec "'$VG' demo --keep" "$TMPDIR/typescript" </dev/null >/dev/null 2>&1 3>&- &
    local term=$!
    _vg_record script "$term"
    wait_for "grep -q 'keeps running' '$TMPDIR/typescript'" 60
    # Whether script is still there or has already ended with its command, the pty is gone.
    kill -KILL "$term" 2>/dev/null || true
    wait "$term" || true
    local dir
    dir=$(ls -d "$TMPDIR"/vramguard-demo-*)
    [ -n "$(demo_leftovers "$dir")" ]
    run "$VG" demo --stop
    [ "$status" -eq 0 ]
    nothing_left "$dir"
}

@test "SIGKILL of a kept simulation's keeper: its processes end with it" {
    export TMPDIR=$(vg_tmpdir)
    run timeout 120 "$VG" demo --keep
    [ "$status" -eq 0 ]
    echo "$output" >"$TMPDIR/out"
    local dir keeper
    dir=$(demo_dir_of "$TMPDIR/out")
    keeper=$(demo_procs)
    [ -n "$keeper" ]
    kill -KILL $keeper
    wait_for '[ -z "$(demo_leftovers "$dir")" ]' 10
    # The directory is what a SIGKILL leaves (documented); nothing runs.
    rm -rf "$dir"
}
