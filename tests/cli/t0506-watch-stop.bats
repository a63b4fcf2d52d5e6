#!/usr/bin/env bats
# t0506-watch-stop: every way `watch` stops is bounded. A config file replaced by a FIFO is
# refused at SIGHUP (and at start) without blocking in open(), and SIGTERM still works after;
# alert commands still running when watch exits are stopped (SIGTERM to their process group,
# SIGKILL after a second), also one that ignores SIGTERM and one that started children, and
# also when `watch --once` is waiting for them. See docs/reliability.md.

load lib
load watch

setup() {
    DEVDIR=$(vg_fake_dev)
    TMP=$(vg_tmpdir)
    # Alert commands carry the test's tag, so vg_cleanup finds any that outlive the watch.
    _vg_dir
    export VG_HELPER_TAG=$_VG_TAG
}

teardown() {
    watch_teardown
}

# alert_cmd NAME [trap]: an --exec command that records its PID in $TMP/NAME.pid, starts a
# child (recorded in $TMP/NAME.child) in its process group, and waits ten minutes; with
# "trap" it ignores SIGTERM.
alert_cmd() {
    local ign=
    if [[ ${2:-} == trap ]]; then ign="trap '' TERM"; fi
    cat >"$TMP/$1" <<EOF
#!/bin/sh
$ign
sleep 600 &
echo \$! >"$TMP/$1.child"
echo \$\$ >"$TMP/$1.pid"
while :; do sleep 1; done
EOF
    chmod +x "$TMP/$1"
}

# gone_within NAME SECONDS: the alert command NAME and its child are gone within SECONDS.
gone_within() {
    local pid child
    pid=$(cat "$TMP/$1.pid")
    child=$(cat "$TMP/$1.child")
    wait_for "vg_gone $pid && vg_gone $child" "$2"
}

@test "the config file turned into a FIFO: SIGHUP says so at once, SIGTERM still stops watch" {
    host
    printf 'threshold = 20MiB\n' >"$TMP/watch.conf"
    watch_start --config "$TMP/watch.conf"
    wait_line gpu-present 2
    rm "$TMP/watch.conf"
    mkfifo "$TMP/watch.conf"
    kill -HUP "$WPID"
    wait_line "SIGHUP: $TMP/watch.conf: not a regular file" 1 "$WERR"
    wait_line "keeping the configuration in effect" 1 "$WERR"
    wait_samples 2
    watch_stop TERM
    [ "$WSTATUS" -eq 0 ]
}

@test "a FIFO or a directory as --config at start: a usage error, not a hang" {
    host
    mkfifo "$TMP/fifo.conf"
    run --separate-stderr timeout 20 "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" watch \
        --config "$TMP/fifo.conf" --once
    [ "$status" -eq 64 ]
    [[ $stderr == "vramguard: watch: $TMP/fifo.conf: not a regular file"* ]]
    run --separate-stderr timeout 20 "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" watch \
        --config "$TMP" --once
    [ "$status" -eq 64 ]
    [[ $stderr == *"not a regular file"* ]]
}

@test "SIGTERM stops the alert commands still running, their children and one ignoring SIGTERM" {
    A=$(vg_spawn --open "$(dev 0)" -- python x.py)
    host "proc gpu=0 pid=$A type=compute mem=3GiB"
    alert_cmd stubborn trap
    watch_start --expect 0=none --exec "$TMP/stubborn" --exec-timeout 10m
    wait_for "[ -s $TMP/stubborn.pid ] && [ -s $TMP/stubborn.child ]"
    kill -0 "$(cat "$TMP/stubborn.pid")"
    watch_stop TERM
    [ "$WSTATUS" -eq 0 ]
    gone_within stubborn 5
    wait_line "alert command (PID $(cat "$TMP/stubborn.pid")) stopped: watch is exiting" 1 "$WERR"
}

@test "watch --once waits for its alert commands, but SIGTERM stops them and it at once" {
    A=$(vg_spawn --open "$(dev 0)" -- python x.py)
    host "proc gpu=0 pid=$A type=compute mem=3GiB"
    alert_cmd slow
    watch_start --once --expect 0=none --exec "$TMP/slow" --exec-timeout 10m
    wait_for "[ -s $TMP/slow.pid ] && [ -s $TMP/slow.child ]"
    # --once waits for the command it started ...
    wait_line "alert CRITICAL GPU 0"
    kill -0 "$WPID"
    # ... until asked to stop.
    watch_stop TERM
    [ "$WSTATUS" -eq 0 ]
    gone_within slow 5
}
