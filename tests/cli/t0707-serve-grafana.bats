#!/usr/bin/env bats
# t0707-serve-grafana: the Grafana dashboard contrib/grafana/vramguard.json asks Prometheus only
# what `serve` exports. Every panel's query (each target's expr, extracted with jq, Grafana's
# variables put to what "All" means) runs against a real Prometheus scraping `serve` on a
# staged host (a holder, a foreign PID's memory and its finding) and returns data.

load lib
load diag
load serve

DASH=$ROOT/contrib/grafana/vramguard.json

setup() {
    vg_require_jq
    DEVDIR=$(vg_fake_dev)
}

@test "the dashboard is valid JSON with a query in every panel and only known variables" {
    jq -e . "$DASH" >/dev/null
    [ "$(jq -r .uid "$DASH")" = vramguard ]
    # every panel that is not a row has at least one target with an expr
    [ "$(jq '[.panels[] | select(.type != "row") | select(([.targets[]?.expr] | length) == 0)] | length' "$DASH")" = 0 ]
    # the variables the queries use are the dashboard's own, or Grafana's $__rate_interval
    local v
    for v in $(jq -r '.. | .expr? // empty' "$DASH" | grep -o '\$[a-z_]*' | sort -u); do
        case $v in
        \$__rate_interval) ;;
        *) jq -e --arg n "${v#\$}" '.templating.list | map(.name) | index($n) != null' "$DASH" >/dev/null ||
            { echo "unknown variable $v"; return 1; } ;;
        esac
    done
    # the metrics it names are ones serve documents
    local m
    for m in $(jq -r '.. | .expr? // empty' "$DASH" | grep -o 'vramguard_[a-z_]*' | sort -u); do
        grep -q "\`${m}[{\`]" "$ROOT/docs/metrics.md" || { echo "undocumented metric $m"; return 1; }
    done
}

@test "every panel's query returns data from a real Prometheus scraping serve" {
    command -v promtool >/dev/null || skip "promtool is missing (apt-get install prometheus)"
    command -v prometheus >/dev/null || skip "prometheus is missing (apt-get install prometheus)"
    command -v curl >/dev/null || skip "curl is missing (apt-get install curl)"
    vg_spawn --comm train --open "$(dev 1)" -- python train.py
    local A=$VG_PID
    homogeneous_host "proc gpu=1 pid=$A type=compute mem=20GiB sm=40" \
        "proc gpu=2 pid=2000000000 type=compute mem=3GiB"
    serve_start --interval 500ms
    prom_start "$SERVE_PORT"
    # rate() needs two samples of a counter in its window: wait for a few scrapes
    wait_for 'prom_query "count_over_time(vramguard_collections_total[1m])" && [ "$(json ".data.result[0].value[1] // 0")" -ge 4 ]' 90
    local expr q n checked=0
    while IFS= read -r expr; do
        # "All" for the node and GPU variables; a fixed window for $__rate_interval
        q=${expr//\$instance/.*}
        q=${q//\$gpu/.*}
        q=${q//\$__rate_interval/1m}
        prom_query "$q"
        [ "$(json .status)" = success ] || { echo "query failed: $q: $output"; return 1; }
        n=$(json '.data.result | length')
        [ "$n" -gt 0 ] || { echo "no data: $q"; return 1; }
        checked=$((checked + 1))
    done < <(jq -r '.. | .expr? // empty' "$DASH")
    [ "$checked" -eq "$(jq '[.. | .expr? // empty] | length' "$DASH")" ]
    [ "$checked" -ge 12 ]
    # and the data is this host's: the holder's memory, the foreign PID's reason and finding
    prom_query 'topk(20, vramguard_process_memory_bytes{instance=~".*", gpu=~".*"})'
    [ "$(json "[.data.result[] | select(.metric.pid == \"$A\")] | length")" = 1 ]
    prom_query 'sum by (instance, reason) (vramguard_gpu_memory_held_bytes{instance=~".*"})'
    [ "$(json '[.data.result[] | select(.metric.reason == "foreign_pid")][0].value[1]')" = 3221225472 ]
    prom_query 'sum by (instance, rule, severity) (vramguard_findings{instance=~".*"})'
    [ "$(json '[.data.result[] | select(.metric.rule == "foreign-pid")] | length')" = 1 ]
}
