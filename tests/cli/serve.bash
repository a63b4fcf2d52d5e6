# shellcheck shell=bash disable=SC2034 # the variables set here are for the test files
# tests/cli/serve.bash: what the `vramguard serve` tests (t07xx) share, loaded after lib (and
# diag, for its scenarios): starting and stopping the exporter, scraping it, reading samples,
# and a Prometheus server for the end-to-end test. Only 127.0.0.1 is ever used. Every wait is
# bounded; serve_teardown (the teardown below) stops whatever a test started.
#
# serve_start ARGS...: starts "vramguard --nvml ... --dev ... serve --listen 127.0.0.1:0 ARGS"
#   in the background (stderr in $SERVE_LOG) and waits until it prints the port it listens on;
#   sets SERVE_PID, SERVE_PORT and SERVE_URL (http://127.0.0.1:PORT). Fails, showing the log,
#   if it exits first or is not listening within VG_SERVE_START (default 30 s).
# serve_stop [SIGNAL]: sends SIGNAL (default TERM), waits (bounded) for the exit; its status in
#   SERVE_STATUS.
# scrape [PATH]: GET $SERVE_URL/PATH (default metrics) with curl; the body in $SCRAPE (and the
#   file $SCRAPE_FILE), the HTTP status in $SCRAPE_CODE. Fails only if curl does.
# sample NAME [LABELS]: prints the value of the sample NAME{LABELS} in $SCRAPE ("NAME" alone
#   when LABELS is empty; LABELS exactly as printed, e.g. 'gpu="0",uuid="GPU-..."'); fails
#   when there is no such line.
# nseries NAME [FILTER]: how many samples of NAME are in $SCRAPE (whose labels contain FILTER).
# wait_scrape COND [TIMEOUT]: scrapes until the shell condition COND holds (bounded).
# free_port: prints a loopback port nobody listens on now (for programs without port 0).
# prom_start TARGET_PORT: starts Prometheus scraping 127.0.0.1:TARGET_PORT every second with its
#   storage in the test directory; sets PROM_PID, PROM_URL; waits (bounded) until it is ready.
# prom_query QUERY: an instant query through the HTTP API; the JSON answer in $output.
# serve_teardown (the default teardown): stops them all, then vg_cleanup; fails when a serve
#   log holds a sanitizer report.

VG_SERVE_START=${VG_SERVE_START:-30}

serve_start() {
    local dir log limit
    dir=$(vg_tmpdir) || return 1
    if [[ -z ${DEVDIR:-} ]]; then
        DEVDIR=$dir/dev
        [[ -d $DEVDIR ]] || vg_fake_dev >/dev/null || return 1
    fi
    log=$dir/serve.$RANDOM.log
    SERVE_LOG=$log
    env -u CUDA_VISIBLE_DEVICES -u CUDA_DEVICE_ORDER \
        "$VG" --nvml "${VG_NVML:-$FAKE_FULL}" --dev "$DEVDIR" serve --listen 127.0.0.1:0 "$@" \
        </dev/null >/dev/null 2>"$log" 3>&- &
    SERVE_PID=$!
    _vg_record serve "$SERVE_PID"
    printf '%s\n' "$SERVE_PID" >>"$dir/.state/serve-pids"
    if ! wait_for "grep -q 'listening on http://127.0.0.1:[0-9]*/metrics' '$log' || ! kill -0 $SERVE_PID 2>/dev/null" "$VG_SERVE_START"; then
        echo "serve_start: not listening after ${VG_SERVE_START}s; its log:" >&2
        sed 's/^/  /' "$log" >&2
        return 1
    fi
    SERVE_PORT=$(sed -n 's|.*listening on http://127\.0\.0\.1:\([0-9]*\)/metrics.*|\1|p' "$log" | head -n 1)
    if [[ -z $SERVE_PORT ]]; then
        echo "serve_start: vramguard serve exited before listening; its log:" >&2
        sed 's/^/  /' "$log" >&2
        return 1
    fi
    SERVE_URL=http://127.0.0.1:$SERVE_PORT
}

serve_stop() {
    local sig=${1:-TERM}
    SERVE_STATUS=
    [[ -n ${SERVE_PID:-} ]] || return 0
    kill -"$sig" "$SERVE_PID" 2>/dev/null || true
    if ! wait_for "! kill -0 $SERVE_PID 2>/dev/null || [[ \$(vg_stat $SERVE_PID state 2>/dev/null) == Z ]]" 20; then
        kill -KILL "$SERVE_PID" 2>/dev/null || true
    fi
    SERVE_STATUS=0
    wait "$SERVE_PID" 2>/dev/null || SERVE_STATUS=$?
    SERVE_PID=
}

scrape() {
    local path=${1:-metrics}
    SCRAPE_FILE=$(vg_tmpdir)/scrape.out
    SCRAPE_CODE=$(curl -sS --max-time 20 -o "$SCRAPE_FILE" -w '%{http_code}' "$SERVE_URL/$path") || return 1
    SCRAPE=$(cat "$SCRAPE_FILE")
}

sample() {
    local name=$1 labels=${2:-} line
    if [[ -n $labels ]]; then
        line=$(grep -F -m 1 -- "$name{$labels} " <<<"$SCRAPE") || return 1
    else
        line=$(grep -E -m 1 -- "^$name " <<<"$SCRAPE") || return 1
    fi
    printf '%s\n' "${line##* }"
}

nseries() {
    local name=$1 filter=${2:-}
    grep -E -- "^$name(\{| )" <<<"$SCRAPE" | grep -cF -- "$filter" || true
}

wait_scrape() {
    wait_for "scrape && $1" "${2:-$VG_WAIT_TIMEOUT}"
}

free_port() {
    local p i
    for ((i = 0; i < 50; i++)); do
        p=$((20000 + RANDOM % 40000))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
            printf '%s\n' "$p"
            return 0
        fi
    done
    return 1
}

prom_start() {
    local target=$1 dir try port
    dir=$(vg_tmpdir)/prometheus
    mkdir -p "$dir/data" || return 1
    cat >"$dir/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: vramguard
    static_configs:
      - targets: ['127.0.0.1:$target']
EOF
    for ((try = 0; try < 5; try++)); do
        port=$(free_port) || return 1
        prometheus --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/data" \
            --web.listen-address="127.0.0.1:$port" --storage.tsdb.retention.time=1h \
            </dev/null >"$dir/log" 2>&1 3>&- &
        PROM_PID=$!
        _vg_record prometheus "$PROM_PID"
        printf '%s\n' "$PROM_PID" >>"$(vg_tmpdir)/.state/prom-pids"
        PROM_URL=http://127.0.0.1:$port
        if wait_for "curl -sf --max-time 2 -o /dev/null '$PROM_URL/-/ready' || ! kill -0 $PROM_PID 2>/dev/null" 60 &&
            kill -0 "$PROM_PID" 2>/dev/null; then
            return 0
        fi
        # Lost the port to someone else, or slow to start: show why and try another.
        sed 's/^/  prometheus: /' "$dir/log" | tail -n 5 >&2
        kill -KILL "$PROM_PID" 2>/dev/null || true
        wait "$PROM_PID" 2>/dev/null || true
    done
    return 1
}

prom_query() {
    output=$(curl -sS --max-time 10 -G --data-urlencode "query=$1" "$PROM_URL/api/v1/query")
}

# Stops (TERM, then KILL after a bounded wait) every serve and Prometheus this test started,
# then the helpers through vg_cleanup.
serve_teardown() {
    local dir pid
    dir=$(vg_tmpdir) || return 0
    for pid in $(cat "$dir/.state/serve-pids" "$dir/.state/prom-pids" 2>/dev/null); do
        kill -TERM "$pid" 2>/dev/null || true
    done
    for pid in $(cat "$dir/.state/serve-pids" "$dir/.state/prom-pids" 2>/dev/null); do
        wait_for "! kill -0 $pid 2>/dev/null || [[ \$(vg_stat $pid state 2>/dev/null) == Z ]]" 20 ||
            kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    rm -f "$dir/.state/serve-pids" "$dir/.state/prom-pids"
    vg_cleanup || return 1
    # Under the sanitizers a report in a log fails the test, even one printed at exit.
    if grep -l -e 'ERROR: AddressSanitizer' -e 'ERROR: LeakSanitizer' -e 'runtime error:' \
        "$dir"/serve.*.log 2>/dev/null; then
        echo "serve_teardown: a sanitizer report in the logs above:" >&2
        cat "$dir"/serve.*.log >&2
        return 1
    fi
}

teardown() {
    serve_teardown
}
