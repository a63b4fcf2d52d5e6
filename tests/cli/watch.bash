# shellcheck shell=bash disable=SC2034 # the variables set here are for the test files
# tests/cli/watch.bash: what the `watch` and `check` tests (t05xx) share, loaded after lib
# (`load lib` then `load watch`).
#
# host [PROC LINES...]: writes a scenario of two GPUs whose minor numbers differ from their
#   indices (GPU 0 is /dev/nvidia2, GPU 1 is /dev/nvidia1), followed by the given lines;
#   rewriting it while watch runs changes the world (the fake re-reads it).
# dev GPU: the device node of that GPU.
#
# watch_start ARGS...: starts "vramguard --nvml FAKE --dev DEVDIR --verbose watch --interval
#   100ms ARGS" in the background, stdout to $WOUT, stderr to $WERR, and registers it with
#   vg_cleanup. --verbose makes every sample log a "sample N:" line on stderr.
# samples: prints how many samples watch has taken so far.
# wait_samples N: waits (bounded) until N more samples have been taken.
# nlines PATTERN [FILE]: prints how many lines of FILE (default $WOUT) contain PATTERN (fixed).
# wait_line PATTERN [N] [FILE]: waits (bounded) until at least N (default 1) lines contain it.
# watch_stop [SIGNAL]: sends SIGNAL (default TERM), waits (bounded) for the exit and sets
#   WSTATUS to its exit status.
#
# Nothing depends on timing: the interval is short only to keep the tests quick, every wait is
# a bounded poll, and "no more events" is checked after counting samples, not after sleeping.

bats_require_minimum_version 1.5.0

U0=GPU-00000000-0000-4000-8000-000000000000
U1=GPU-11111111-1111-4111-8111-111111111111
U2=GPU-22222222-2222-4222-8222-222222222222
MINOR=(2 1 3)

host() {
    vg_scenario <<EOF
driver 550.54.15
cuda 12040
gpu index=0 uuid=$U0 name="NVIDIA A100-SXM4-80GB" minor=2 bus=00000000:07:00.0 total=80GiB reserved=512MiB used=auto util=0 cc=8.0
gpu index=1 uuid=$U1 name="NVIDIA A100-SXM4-80GB" minor=1 bus=00000000:0F:00.0 total=80GiB reserved=512MiB used=auto util=0 cc=8.0
$(printf '%s\n' "$@")
EOF
}

dev() {
    printf '%s/nvidia%s\n' "$DEVDIR" "${MINOR[$1]}"
}

watch_start() {
    local dir
    dir=$(vg_tmpdir)
    WOUT=$dir/watch.out
    WERR=$dir/watch.err
    : >"$WOUT"
    : >"$WERR"
    "$VG" --nvml "${VG_NVML:-$FAKE_FULL}" --dev "$DEVDIR" --verbose watch --interval 100ms \
        "$@" >"$WOUT" 2>"$WERR" </dev/null 3>&- &
    WPID=$!
    _vg_record watch "$WPID"
}

samples() {
    grep -c 'watch: sample [0-9]*:' "$WERR" 2>/dev/null || true
}

wait_samples() {
    local target
    target=$(($(samples) + $1))
    wait_for "[ \$(samples) -ge $target ]"
}

nlines() {
    grep -cF -- "$1" "${2:-$WOUT}" 2>/dev/null || true
}

wait_line() {
    local pat=$1 n=${2:-1} file=${3:-$WOUT}
    wait_for "[ \$(nlines $(printf '%q' "$pat") $(printf '%q' "$file")) -ge $n ]"
}

watch_stop() {
    kill -"${1:-TERM}" "$WPID" 2>/dev/null || true
    wait_for "! kill -0 $WPID 2>/dev/null"
    WSTATUS=0
    wait "$WPID" || WSTATUS=$?
}

# watch_teardown: shows the watch's output (bats prints it when a test failed), then
# vg_cleanup, which kills the watch with its alert commands (its children) too.
watch_teardown() {
    show_watch
    vg_cleanup
}

# show_watch: the output and stderr of the watch under test.
show_watch() {
    echo "--- watch stdout:"
    cat "$WOUT" 2>/dev/null || true
    echo "--- watch stderr (samples left out):"
    grep -v 'watch: sample [0-9]*:' "$WERR" 2>/dev/null || true
}
