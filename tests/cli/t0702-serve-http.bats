#!/usr/bin/env bats
# t0702-serve-http: the HTTP side of `vramguard serve` under abuse: paths and methods (404,
# 405, HEAD), /healthz, 200 concurrent scrapes, a client trickling one byte a second (others
# keep being served; it is closed at the timeout), a 1 MiB request line, garbage requests,
# request bodies; serve never crashes and exits 0 on SIGTERM and SIGINT.

load lib
load diag
load serve

setup() {
    command -v curl >/dev/null || skip "curl is missing (apt-get install curl)"
    DEVDIR=$(vg_fake_dev)
    homogeneous_host "proc gpu=0 pid=2000000000 type=compute mem=3GiB"
}

# serve is still there and answers a scrape with a full exposition.
alive() {
    kill -0 "$SERVE_PID"
    scrape
    [ "$SCRAPE_CODE" = 200 ]
    [[ $SCRAPE == *"vramguard_last_collect_success 1"* ]]
}

# status METHOD PATH: the HTTP status curl gets.
code() {
    curl -sS --max-time 10 -o /dev/null -w '%{http_code}' -X "$1" "$SERVE_URL$2"
}

@test "paths and methods: 200, 404, 405 with Allow, HEAD without a body" {
    serve_start
    [ "$(code GET /metrics)" = 200 ]
    [ "$(code GET /healthz)" = 200 ]
    [ "$(code GET /)" = 404 ]
    [ "$(code GET /metrics/)" = 404 ]
    [ "$(code GET /METRICS)" = 404 ]
    [ "$(code GET /favicon.ico)" = 404 ]
    [ "$(code GET '/metrics%2F')" = 404 ]
    [ "$(code GET '/../metrics')" = 200 ] # curl normalises the path itself
    [ "$(code POST /metrics)" = 405 ]
    [ "$(code PUT /healthz)" = 405 ]
    [ "$(code DELETE /metrics)" = 405 ]
    [ "$(code OPTIONS /metrics)" = 405 ]
    [ "$(code BREW /metrics)" = 405 ]
    [ "$(code POST /nothing)" = 404 ]
    # Query strings do not change the route.
    [ "$(code GET '/metrics?name[]=x')" = 200 ]
    run curl -sS --max-time 10 -i -X POST "$SERVE_URL/metrics"
    [[ $output == *"HTTP/1.1 405"* && $output == *"Allow: GET, HEAD"* ]]
    run curl -sS --max-time 10 -I "$SERVE_URL/metrics"
    [[ $output == *"HTTP/1.1 200"* ]]
    [[ $output == *"Content-Type: text/plain; version=0.0.4; charset=utf-8"* ]]
    [[ $output != *vramguard_build_info* ]]
    run curl -sS --max-time 10 "$SERVE_URL/healthz"
    [[ $output == "ok: the last collection finished "*" s ago and succeeded" ]]
    # Good requests keep the connection open for the next scrape; errors close it.
    run curl -sS --max-time 10 -v -o /dev/null -o /dev/null "$SERVE_URL/metrics" "$SERVE_URL/healthz"
    [[ $output == *"Re-using existing connection"* ]]
    run curl -sS --max-time 10 -v -o /dev/null -o /dev/null "$SERVE_URL/nothing" "$SERVE_URL/metrics"
    [[ $output != *"Re-using existing connection"* ]]
    alive
}

@test "a request body is not read: 405 and the connection closed, serve unharmed" {
    serve_start
    local body
    body=$(vg_tmpdir)/body
    head -c 1048576 /dev/zero >"$body"
    run curl -sS --max-time 20 -o /dev/null -w '%{http_code}' --data-binary "@$body" "$SERVE_URL/metrics"
    # curl may see the status or a reset while still sending: either way, no crash.
    [[ $output == 405 || $output == *"Connection reset"* || $output == *"Send failure"* ]]
    alive
}

@test "200 concurrent scrapes all get the full exposition" {
    serve_start
    scrape
    local want dir i pids=() n=0
    want=$(grep -c '' <<<"$SCRAPE")
    dir=$(vg_tmpdir)/many
    mkdir -p "$dir"
    for ((i = 0; i < 200; i++)); do
        curl -sS --max-time 60 -o "$dir/$i.out" -w '%{http_code}\n' "$SERVE_URL/metrics" \
            >"$dir/$i.code" 2>"$dir/$i.err" 3>&- &
        pids+=($!)
    done
    for i in "${pids[@]}"; do
        wait "$i" || true
    done
    for ((i = 0; i < 200; i++)); do
        if [[ $(cat "$dir/$i.code") == 200 ]] && [ "$(grep -c '' "$dir/$i.out")" -eq "$want" ] &&
            grep -q '^vramguard_findings{' "$dir/$i.out"; then
            n=$((n + 1))
        else
            echo "scrape $i: $(cat "$dir/$i.code" "$dir/$i.err")"
        fi
    done
    echo "$n of 200 complete"
    [ "$n" -eq 200 ]
    alive
}

@test "a client sending one byte a second: others are served, it is closed at the timeout" {
    serve_start --conn-timeout 2s
    local dir
    dir=$(vg_tmpdir)
    # Trickle "GET /metrics HTTP/1.1..." one byte a second for at most 40 s; note when the
    # server answers or closes (a read that ends other than by timing out).
    (
        trap '' PIPE
        exec 4<>"/dev/tcp/127.0.0.1/$SERVE_PORT" || exit 1
        echo open >"$dir/slow.state"
        req=$'GET /metrics HTTP/1.1\r\nHost: x\r\nX-Pad: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa'
        for ((i = 0; i < 40; i++)); do
            printf '%s' "${req:i:1}" >&4 2>/dev/null || { echo closed >"$dir/slow.state"; exit 0; }
            rc=0
            IFS= read -r -t 1 -u 4 line || rc=$?
            if ((rc <= 128)); then
                echo closed >"$dir/slow.state"
                exit 0
            fi
        done
        echo survived >"$dir/slow.state"
    ) 3>&- &
    local slow=$!
    wait_for "[ -s '$dir/slow.state' ]"
    # While it trickles, scrapes are answered at once.
    local t0 i
    for ((i = 0; i < 3; i++)); do
        t0=$SECONDS
        alive
        [ $((SECONDS - t0)) -le 10 ]
    done
    # Closed once it has spent longer than --conn-timeout on its request (2 s, plus the
    # reaper's one-second tick and slack for a loaded machine).
    wait_for "grep -qx closed '$dir/slow.state'" 30
    wait "$slow" || true
    alive
}

@test "a 1 MiB request line is refused without harm" {
    serve_start
    local dir
    dir=$(vg_tmpdir)
    (
        trap '' PIPE
        exec 4<>"/dev/tcp/127.0.0.1/$SERVE_PORT" || exit 1
        pad=$(head -c 1048576 /dev/zero | tr '\0' a)
        printf 'GET /%s HTTP/1.1\r\nHost: x\r\n\r\n' "$pad" >&4 2>/dev/null
        IFS= read -r -t 10 -u 4 line
        printf '%s\n' "${line%$'\r'}" >"$dir/big.status"
    ) 3>&- &
    local big=$!
    wait_for "! kill -0 $big 2>/dev/null" 30
    wait "$big" || true
    # An error status (414 or 431), or the connection simply closed: never 200, never a crash.
    echo "status line: $(cat "$dir/big.status" 2>/dev/null)"
    [[ ! -s $dir/big.status || $(cat "$dir/big.status") == "HTTP/1.1 4"* ]]
    alive
}

@test "garbage and odd requests never crash it" {
    serve_start
    local dir req i
    dir=$(vg_tmpdir)
    local reqs=(
        $'\x00\x01\x02\xff\r\n\r\n'
        $'GET\r\n\r\n'
        $'GET /metrics\r\n\r\n'
        $'GET /metrics HTTP/9.9\r\n\r\n'
        $'GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n'
        $'GET /metrics HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n'
        $'\r\n\r\n\r\n'
        $'GET http://example.com/metrics HTTP/1.1\r\nHost: example.com\r\n\r\n'
        $'GET /metrics HTTP/1.0\r\n\r\n'
    )
    for ((i = 0; i < ${#reqs[@]}; i++)); do
        (
            trap '' PIPE
            exec 4<>"/dev/tcp/127.0.0.1/$SERVE_PORT" || exit 1
            printf '%s' "${reqs[i]}" >&4 2>/dev/null
            IFS= read -r -t 10 -u 4 line
            printf '%s\n' "${line%$'\r'}"
        ) 3>&- >"$dir/odd.$i" || true
        echo "request $i -> $(cat "$dir/odd.$i")"
        kill -0 "$SERVE_PID"
    done
    # A plain HTTP/1.0 request is served.
    [[ $(cat "$dir/odd.8") == "HTTP/1.1 200"* || $(cat "$dir/odd.8") == "HTTP/1.0 200"* ]]
    alive
}

@test "SIGTERM and SIGINT: a clean exit 0, saying why" {
    serve_start
    alive
    serve_stop TERM
    [ "$SERVE_STATUS" -eq 0 ]
    grep -q 'vramguard: serve: stopping on Terminated' "$SERVE_LOG"
    serve_start
    alive
    serve_stop INT
    [ "$SERVE_STATUS" -eq 0 ]
    grep -q 'vramguard: serve: stopping on Interrupt' "$SERVE_LOG"
}
