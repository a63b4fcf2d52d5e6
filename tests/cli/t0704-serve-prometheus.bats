#!/usr/bin/env bats
# t0704-serve-prometheus: the fleet side. The shipped alert rules load and pass their
# `promtool test rules` unit tests; a real Prometheus server (loopback only, storage in the test
# directory) scrapes `vramguard serve` and the series read back through its HTTP API carry the
# values the exporter served; the shipped rules evaluate against live data.

load lib
load diag
load serve

setup() {
    command -v promtool >/dev/null || skip "promtool is missing (apt-get install prometheus)"
    command -v curl >/dev/null || skip "curl is missing (apt-get install curl)"
    DEVDIR=$(vg_fake_dev)
}

@test "contrib/prometheus/alerts.yml loads and passes its promtool unit tests" {
    run promtool check rules "$ROOT/contrib/prometheus/alerts.yml"
    printf '%s\n' "$output"
    [ "$status" -eq 0 ]
    [[ $output == *"SUCCESS: 9 rules found"* ]]
    # promtool resolves rule_files relative to the test file.
    run promtool test rules "$ROOT/contrib/prometheus/alerts_test.yml"
    printf '%s\n' "$output"
    [ "$status" -eq 0 ]
    [[ $output == *SUCCESS* ]]
}

@test "every alert in alerts.yml has a unit test" {
    local name
    for name in $(sed -n 's/^ *- alert: *//p' "$ROOT/contrib/prometheus/alerts.yml"); do
        grep -q "alertname: $name\$" "$ROOT/contrib/prometheus/alerts_test.yml" ||
            { echo "no test for $name"; return 1; }
    done
}

@test "a real Prometheus scrapes serve; the series read back through its HTTP API" {
    command -v prometheus >/dev/null || skip "prometheus is missing (apt-get install prometheus)"
    vg_require_jq
    vg_spawn --comm train --open "$(dev 1)" -- python train.py
    local A=$VG_PID
    homogeneous_host "proc gpu=1 pid=$A type=compute mem=20GiB" \
        "proc gpu=2 pid=2000000000 type=compute mem=3GiB"
    serve_start --interval 500ms
    prom_start "$SERVE_PORT"
    # Bounded wait for the first scrapes to be stored.
    wait_for 'prom_query "vramguard_last_collect_success" && [ "$(json ".data.result | length")" = 1 ]' 60
    [ "$(json .status)" = success ]
    [ "$(json '.data.result[0].value[1]')" = 1 ]
    [ "$(json '.data.result[0].metric.job')" = vramguard ]
    [ "$(json '.data.result[0].metric.instance')" = "127.0.0.1:$SERVE_PORT" ]

    prom_query 'up{job="vramguard"}'
    [ "$(json '.data.result[0].value[1]')" = 1 ]
    prom_query 'vramguard_gpu_memory_used_bytes{gpu="1"}'
    [ "$(json '.data.result[0].value[1]')" = 21474836480 ]
    [ "$(json '.data.result[0].metric.uuid')" = "$U1" ]
    prom_query 'count(vramguard_gpu_info)'
    [ "$(json '.data.result[0].value[1]')" = 4 ]
    prom_query "vramguard_process_memory_bytes{pid=\"$A\"}"
    [ "$(json '.data.result[0].value[1]')" = 21474836480 ]
    [ "$(json '.data.result[0].metric.comm')" = train ]
    [ "$(json '.data.result[0].metric.seen_by')" = both ]
    prom_query 'vramguard_gpu_memory_held_bytes{gpu="2",reason="foreign_pid"}'
    [ "$(json '.data.result[0].value[1]')" = 3221225472 ]
    prom_query 'vramguard_findings{rule="foreign-pid"}'
    [ "$(json '.data.result[0].metric.gpu')" = 2 ]
    [ "$(json '.data.result[0].metric.severity')" = warning ]
    # The expressions of the shipped rules run against live data: outside-visible memory is
    # 0 here, so that rule selects nothing; the foreign PID's GPU has no unattributed memory.
    prom_query 'vramguard_gpu_memory_held_bytes{reason="outside_visible"} > 0'
    [ "$(json '.data.result | length')" = 0 ]
    prom_query 'sum by (instance) (vramguard_gpu_memory_held_bytes) == sum by (instance) (vramguard_gpu_memory_used_bytes)'
    [ "$(json '.data.result | length')" = 1 ]
}
