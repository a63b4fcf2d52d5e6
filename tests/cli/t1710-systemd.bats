#!/usr/bin/env bats
# t1710-systemd: what `watch` and `serve` tell systemd, received the way systemd would: a
# datagram socket named by NOTIFY_SOCKET (socat reads it) gets READY=1 after the first sample
# (watch) or once listening (serve), WATCHDOG=1 pings at half WATCHDOG_USEC and STOPPING=1 at
# the end; with JOURNAL_STREAM naming their output, each line starts with its syslog priority;
# nothing of the kind without those variables. Also: the units pass `systemd-analyze verify`
# and keep `systemd-analyze security` exposure at 2.5 (what it was before Type=notify), and a
# taken port is reported with the process holding it.

load lib
load watch
load serve

bats_require_minimum_version 1.5.0

setup() {
    DEVDIR=$(vg_fake_dev)
    TMP=$(vg_tmpdir)
}

teardown() {
    show_watch
    serve_teardown
}

# notify_start: a receiver on $TMP/notify (every datagram appended to $NOTIFIED, no separator)
notify_start() {
    command -v socat >/dev/null || skip "socat is missing (scripts/install-deps --test)"
    NOTIFY=$TMP/notify
    NOTIFIED=$TMP/notified
    : >"$NOTIFIED"
    socat -u "UNIX-RECV:$NOTIFY,unlink-early" "OPEN:$NOTIFIED,append" </dev/null 3>&- &
    _vg_record socat $!
    wait_for "[ -S '$NOTIFY' ]"
}

# count WORD: how many times WORD=1 arrived
count() {
    grep -o "$1=1" "$NOTIFIED" | wc -l
}

@test "watch: READY=1 after the first sample, WATCHDOG=1 at half WATCHDOG_USEC, STOPPING=1" {
    notify_start
    A=$(vg_spawn --open "$(dev 1)" -- python train.py)
    host "proc gpu=1 pid=$A type=compute mem=2GiB"
    NOTIFY_SOCKET=$NOTIFY WATCHDOG_USEC=200000 watch_start --interval 1s
    wait_for "[ \$(count READY) -eq 1 ]"
    # the first sample's events are out before READY=1
    [ "$(nlines 'holder-present')" -eq 1 ]
    # pings every 100 ms between samples 1 s apart: several per sample
    wait_for "[ \$(count WATCHDOG) -ge 4 ]"
    [ "$(count STOPPING)" -eq 0 ]
    watch_stop
    [ "$WSTATUS" -eq 0 ]
    wait_for "[ \$(count STOPPING) -eq 1 ]"
    [ "$(count READY)" -eq 1 ]
}

@test "watch: WATCHDOG_PID of another process means no pings; no NOTIFY_SOCKET means nothing sent" {
    notify_start
    host
    NOTIFY_SOCKET=$NOTIFY WATCHDOG_USEC=100000 WATCHDOG_PID=1 watch_start
    wait_for "[ \$(count READY) -eq 1 ]"
    wait_samples 5
    [ "$(count WATCHDOG)" -eq 0 ]
    watch_stop
    # without the variable: a plain run, nothing reaches the socket
    : >"$NOTIFIED"
    WATCHDOG_USEC=100000 watch_start
    wait_samples 5
    watch_stop
    [ "$WSTATUS" -eq 0 ]
    [ ! -s "$NOTIFIED" ]
}

@test "watch: a socket nobody reads is reported once, and watch goes on" {
    host
    NOTIFY_SOCKET=$TMP/nobody-here WATCHDOG_USEC=100000 watch_start
    wait_samples 5
    watch_stop
    [ "$WSTATUS" -eq 0 ]
    [ "$(grep -c "cannot notify the service manager at '$TMP/nobody-here'" "$WERR")" -eq 1 ]
}

@test "watch: with JOURNAL_STREAM naming its output, each line carries its priority" {
    A=$(vg_spawn --open "$(dev 1)" -- python train.py)
    B=$(vg_spawn --open "$(dev 1)" -- python intruder.py)
    C=$(vg_spawn --open "$(dev 0)" -- python small.py)
    host "proc gpu=1 pid=$A type=compute mem=20GiB" "proc gpu=1 pid=$B type=compute mem=1GiB" \
        "proc gpu=0 pid=$C type=compute mem=2GiB"
    local out=$TMP/journal.out
    : >"$out"
    # one stream for both, as systemd gives a service
    JOURNAL_STREAM=$(stat -c '%d:%i' "$out") "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" watch \
        --interval 100ms --expect 1="$A" --expect 0=none >>"$out" 2>&1 </dev/null 3>&- &
    WPID=$!
    _vg_record watch "$WPID"
    WOUT=$out
    wait_line "alert CRITICAL GPU 0"
    kill -HUP "$WPID" # no --config: an error message on stderr
    wait_line "SIGHUP: there is no --config file"
    watch_stop
    grep -q "^<2>.* alert CRITICAL GPU 0 (GPU-00000000) should be empty" "$out"
    grep -q "^<4>.* alert WARNING GPU 1 (GPU-11111111) may carry only PID $A" "$out"
    grep -q "^<6>.* holder-present PID $A on GPU 1" "$out"
    grep -q "^<6>.* gpu-present GPU 0" "$out"
    grep -q "^<3>vramguard: watch: SIGHUP: there is no --config file" "$out"
    # every line has one, and only one
    run ! grep -v '^<[0-7]>' "$out"
    run ! grep '^<[0-7]><' "$out"
}

@test "watch: JSON lines carry the prefix too; a stream that is not the journal's gets none" {
    host "proc gpu=0 pid=4000000 type=compute mem=1GiB"
    local out=$TMP/journal.json other=$TMP/other
    : >"$out"
    : >"$other"
    JOURNAL_STREAM=$(stat -c '%d:%i' "$out") run "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" \
        --json watch --once
    # redirected by bats' run (a pipe): not the journal's stream, so no prefix
    [ "$status" -eq 0 ]
    [[ ${lines[0]} == '{'* ]]
    JOURNAL_STREAM=$(stat -c '%d:%i' "$out") "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" \
        --json watch --once >"$out" 2>"$other"
    grep -q '^<4>{.*"event":"finding-present".*"severity":"warning"' "$out"
    grep -q '^<6>{.*"event":"gpu-present"' "$out"
    run ! grep -v '^<[0-7]>{' "$out"
}

@test "serve: READY=1 once listening, WATCHDOG=1 while collecting, STOPPING=1; journald priorities" {
    command -v curl >/dev/null || skip "curl is missing (apt-get install curl)"
    notify_start
    host
    local log
    NOTIFY_SOCKET=$NOTIFY WATCHDOG_USEC=400000 serve_start --interval 200ms
    wait_for "[ \$(count READY) -eq 1 ]"
    scrape healthz
    [ "$SCRAPE_CODE" = 200 ]
    wait_for "[ \$(count WATCHDOG) -ge 3 ]"
    serve_stop
    [ "$SERVE_STATUS" -eq 0 ]
    [ "$(count STOPPING)" -eq 1 ]
    [ "$(count READY)" -eq 1 ]
    # stderr as the journal's stream: notices at info, errors at err
    log=$TMP/serve-journal.log
    : >"$log"
    JOURNAL_STREAM=$(stat -c '%d:%i' "$log") "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" serve \
        --listen 127.0.0.1:0 --interval 200ms >/dev/null 2>>"$log" </dev/null 3>&- &
    SERVE_PID=$!
    _vg_record serve "$SERVE_PID"
    wait_for "grep -q 'listening on' '$log'"
    kill -HUP "$SERVE_PID"
    wait_for "grep -q 'SIGHUP' '$log'"
    serve_stop
    grep -q '^<6>vramguard: serve: listening on http://127.0.0.1:[0-9]*/metrics' "$log"
    grep -q '^<6>vramguard: serve: SIGHUP: there is no configuration file' "$log"
    grep -q '^<6>vramguard: serve: stopping on' "$log"
    JOURNAL_STREAM=1:1 run "$VG" serve --listen 10.0.0.1:1
    [ "$status" -eq 64 ]
    [[ $output == "vramguard: serve: "* ]] # not the journal's stream: no prefix
}

@test "serve: a port already taken names the process listening there" {
    command -v socat >/dev/null || skip "socat is missing (scripts/install-deps --test)"
    local port pid
    port=$(free_port)
    socat "TCP-LISTEN:$port,bind=127.0.0.1,reuseaddr,fork" /dev/null </dev/null 3>&- &
    pid=$!
    _vg_record socat "$pid"
    wait_for "grep -q ':$(printf '%04X' "$port") 00000000:0000 0A' /proc/net/tcp"
    run "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" serve --listen "127.0.0.1:$port"
    [ "$status" -eq 70 ]
    [ "$output" = "vramguard: serve: cannot listen on 127.0.0.1:$port: port $port is in use by pid $pid (socat); choose another port with --listen" ]
    # an IPv6 listener on the same port number is found through tcp6
    if [ -s /proc/net/tcp6 ]; then
        port=$(free_port)
        socat "TCP6-LISTEN:$port,bind=[::1],reuseaddr,fork" /dev/null </dev/null 3>&- &
        pid=$!
        _vg_record socat "$pid"
        wait_for "grep -q ':$(printf '%04X' "$port") 0*:0000 0A' /proc/net/tcp6"
        run "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" serve --listen "[::1]:$port"
        [ "$status" -eq 70 ]
        [[ $output == *"port $port is in use by pid $pid (socat)"* ]]
    fi
}

@test "the units pass systemd-analyze verify from any prefix and keep their security exposure" {
    command -v systemd-analyze >/dev/null || skip "systemd-analyze is missing (apt-get install systemd)"
    local u copy
    for u in vramguard-watch vramguard-exporter; do
        copy=$TMP/$u.service
        sed "s|@BINDIR@|${VG%/*}|g" "$ROOT/contrib/systemd/$u.service.in" >"$copy"
        run systemd-analyze verify --man=no "$copy"
        printf '%s\n' "$output"
        [ "$status" -eq 0 ]
        grep -qx 'Type=notify' "$copy"
        grep -qx 'WatchdogSec=60s' "$copy"
        # 2.5 before Type=notify and the watchdog: never worse (--threshold is exposure x 10)
        run systemd-analyze security --offline=true --threshold=25 --no-pager "$copy"
        printf '%s\n' "${lines[-1]}"
        [ "$status" -eq 0 ]
        [[ ${lines[-1]} == *"exposure level for $u.service: 2.5 "* ]]
    done
    # make install writes them with its BINDIR
    local dest=$TMP/dest
    # (PKGLIBDIR as the build has it, so nothing under test is rebuilt)
    make -C "$ROOT" -s install DESTDIR="$dest" PREFIX=/opt/vg BUILD="$VG_BUILD" \
        PKGLIBDIR="$(cat "$VG_BUILD/pkglibdir.stamp")" >/dev/null
    grep -qx 'ExecStart=/opt/vg/bin/vramguard serve --listen 127.0.0.1:19835 --interval 5s' \
        "$dest/opt/vg/lib/systemd/system/vramguard-exporter.service"
    grep -qx 'ExecStart=/opt/vg/bin/vramguard watch --config /etc/vramguard/watch.conf' \
        "$dest/opt/vg/lib/systemd/system/vramguard-watch.service"
    run ! grep -r '@BINDIR@' "$dest/opt/vg/lib/systemd/system"
}
