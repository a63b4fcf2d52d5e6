#!/usr/bin/env bats
# t0706-serve-flood: `vramguard serve` keeps answering normal scrapes under connection floods on
# loopback: 600 idle sockets and 400 slowloris connections (a header byte a second), from the
# scraper's own address and from another one (127.0.0.2), each reopened as soon as serve closes
# it; the per-client and overall connection limits hold; SIGHUP is logged and ignored. The
# floods come from tests/reliability/vg-flood.c. See docs/reliability.md.

load lib
load diag
load serve

FLOOD=$VG_BUILD/tests/vg-flood

setup() {
    command -v curl >/dev/null || skip "curl is missing (apt-get install curl)"
    [[ -x $FLOOD ]] || skip "$FLOOD is missing: run 'make check' (or make $FLOOD)"
    DEVDIR=$(vg_fake_dev)
    homogeneous_host "proc gpu=0 pid=2000000000 type=compute mem=3GiB"
    TMP=$(vg_tmpdir)
}

# flood_start NAME ARGS...: vg-flood against serve (stats in $TMP/NAME.stats), recorded for
# cleanup; waits (bounded) until its first connects have completed.
flood_start() {
    local name=$1
    shift
    "$FLOOD" --port "$SERVE_PORT" --stats "$TMP/$name.stats" --seconds 120 "$@" \
        </dev/null >"$TMP/$name.log" 2>&1 3>&- &
    _vg_record flood $!
    wait_for "grep -q ready '$TMP/$name.stats' 2>/dev/null" 30
}

# flood_open NAME: how many of its connections are open now.
flood_open() {
    awk '$1 == "open" { print $2 }' "$TMP/$1.stats"
}

# scrapes N: N scrapes one after the other, each answered in full within 5 s (Prometheus'
# default scrape timeout is 10 s); prints the slowest time.
scrapes() {
    local i out code t slowest=0
    out=$TMP/scrape.body
    for ((i = 0; i < $1; i++)); do
        read -r code t < <(curl -s -o "$out" --max-time 5 -w '%{http_code} %{time_total}\n' \
            "$SERVE_URL/metrics" || true)
        if [[ $code != 200 ]] || ! grep -q '^vramguard_last_collect_success 1' "$out"; then
            echo "scrape $i: HTTP ${code:-none} after ${t:-?} s"
            return 1
        fi
        slowest=$(awk -v a="$slowest" -v b="$t" 'BEGIN { print (b > a) ? b : a }')
        sleep 0.1
    done
    echo "# $1 scrapes, slowest ${slowest} s" >&3
}

@test "600 idle sockets from the scraper's own address: every scrape is answered" {
    serve_start
    flood_start idle --count 600 --mode idle
    scrapes 10
    kill -0 "$SERVE_PID"
    grep -q 'connections full: [0-9]* waiting without a request were closed' "$SERVE_LOG"
}

@test "400 slowloris connections from the scraper's own address: every scrape is answered" {
    serve_start
    flood_start slow --count 400 --mode slowloris
    scrapes 10
    kill -0 "$SERVE_PID"
}

@test "idle and slowloris floods from another address: every scrape is answered" {
    serve_start
    flood_start idle --count 600 --mode idle --source 127.0.0.2
    flood_start slow --count 400 --mode slowloris --source 127.0.0.3
    scrapes 10
    kill -0 "$SERVE_PID"
}

@test "--max-per-client: a client keeps at most that many waiting connections" {
    serve_start --max-per-client 4 --conn-timeout 60s
    flood_start once --count 50 --mode idle --source 127.0.0.2 --once
    # Idle past the quarter second, all but 4 are closed to bring the client within its limit.
    wait_for '[ "$(flood_open once)" = 4 ]' 20
    scrapes 3
    [ "$(flood_open once)" = 4 ]
}

@test "--max-connections: at most that many are kept open, the longest-waiting go first" {
    serve_start --max-connections 20 --conn-timeout 60s
    flood_start a --count 15 --mode idle --source 127.0.0.2 --once
    flood_start b --count 15 --mode idle --source 127.0.0.3 --once
    wait_for '[ $(( $(flood_open a) + $(flood_open b) )) -eq 20 ]' 20
    # a connected first: its connections waited longest and made room for b's.
    [ "$(flood_open b)" = 15 ]
    # Each scrape is one more connection: it makes room too (its own closes after it).
    scrapes 3
    [ $(($(flood_open a) + $(flood_open b))) -le 20 ]
}

@test "SIGHUP is logged and ignored; SIGTERM still stops serve" {
    serve_start
    kill -HUP "$SERVE_PID"
    wait_for "grep -q 'SIGHUP: there is no configuration file to read again; going on' '$SERVE_LOG'"
    scrapes 2
    kill -0 "$SERVE_PID"
    serve_stop TERM
    [ "$SERVE_STATUS" -eq 0 ]
}
