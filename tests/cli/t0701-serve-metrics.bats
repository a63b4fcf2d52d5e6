#!/usr/bin/env bats
# t0701-serve-metrics: `vramguard serve` against the fake driver and real processes in known
# states: the exposition passes `promtool check metrics`, carries the per-GPU, per-holder,
# by-reason and findings series with the right values, keeps label cardinality within the
# --per-process bound with 500 holders, and rejects bad command lines.

load lib
load diag
load serve

setup() {
    command -v promtool >/dev/null || skip "promtool is missing (apt-get install prometheus)"
    command -v curl >/dev/null || skip "curl is missing (apt-get install curl)"
    DEVDIR=$(vg_fake_dev)
    ME=$(id -un)
}

# The exposition must pass Prometheus's own linter.
promtool_ok() {
    run promtool check metrics <"$SCRAPE_FILE"
    printf 'promtool: %s\n' "$output"
    [ "$status" -eq 0 ]
    [ -z "$output" ]
}

FOREIGN=2000000000 # above any pid_max: NVML reports it, no /proc shows it

# Four GPUs (index i has minor MINOR[i], as in diag.bash):
#   GPU 0: B holds 2 GiB although its CUDA_VISIBLE_DEVICES names GPU 3
#   GPU 1: A works (20 GiB); Z, a defunct leader with a live thread, holds 1 GiB; D has a
#          thread in D state and holds the device node only, like V, the child that thread
#          waits for
#   GPU 2: O, a multiprocessing worker orphaned (parent and session leader gone), idle,
#          holds 3 GiB
#   GPU 3: a PID from another namespace holds 2 GiB; 10 GiB used in all, so 8 GiB unexplained
known_host() {
    vg_spawn --comm train --open "$(dev 1)" --env CUDA_VISIBLE_DEVICES="$U1" -- python train.py
    A=$VG_PID
    vg_spawn --comm latecvd --open "$(dev 0)" --env CUDA_VISIBLE_DEVICES="$U3" -- python late.py
    B=$VG_PID
    vg_spawn --comm zombie --zombie-leader --open "$(dev 1)" -- python zombie.py
    Z=$VG_PID
    vg_spawn --comm stuck --dstate --open "$(dev 1)" -- python stuck.py
    D=$VG_PID V=$VG_VFORK_PID # the child D waits for shares its descriptors
    vg_spawn --comm worker --orphan --setsid --open "$(dev 2)" -- python -c \
        "from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=5, pipe_handle=7)" \
        --multiprocessing-fork
    O=$VG_PID
    vg_scenario <<EOF
driver 550.54.15
nvml 12.550.54.15
cuda 12040
gpu index=0 uuid=$U0 name="NVIDIA A100-SXM4-80GB" minor=2 bus=00000000:07:00.0 total=80GiB reserved=512MiB used=auto util=7 cc=8.0
gpu index=1 uuid=$U1 name="NVIDIA A100-SXM4-80GB" minor=0 bus=00000000:0F:00.0 total=80GiB reserved=512MiB used=auto util=97 cc=8.0
gpu index=2 uuid=$U2 name="NVIDIA A100-SXM4-80GB" minor=3 bus=00000000:47:00.0 total=80GiB reserved=512MiB used=auto util=0 cc=8.0
gpu index=3 uuid=$U3 name="NVIDIA A100-SXM4-80GB" minor=1 bus=00000000:4E:00.0 total=80GiB reserved=512MiB used=10GiB util=0 cc=8.0
proc gpu=0 pid=$B type=compute mem=2GiB
proc gpu=1 pid=$A type=compute mem=20GiB
proc gpu=1 pid=$Z type=compute mem=1GiB
proc gpu=2 pid=$O type=compute mem=3GiB sm=0
proc gpu=3 pid=$FOREIGN type=compute mem=2GiB
EOF
}

gpu() { # gpu INDEX: the per-GPU labels
    local u=U$1
    printf 'gpu="%s",uuid="%s",name="NVIDIA A100-SXM4-80GB"' "$1" "${!u}"
}

GiB=1073741824

@test "a known host: per-GPU series with the driver's values, and promtool accepts it" {
    known_host
    serve_start
    scrape
    [ "$SCRAPE_CODE" = 200 ]
    promtool_ok
    [ "$(sample vramguard_last_collect_success)" = 1 ]
    [ "$(sample vramguard_build_info "version=\"$(cat "$ROOT/VERSION")\"")" = 1 ]
    [ "$(sample vramguard_driver_info 'driver_version="550.54.15",nvml_version="12.550.54.15",cuda_version="12.4"')" = 1 ]
    [ "$(nseries vramguard_gpu_info)" -eq 4 ]
    [ "$(sample vramguard_gpu_info "$(gpu 2),pci_bus_id=\"00000000:47:00.0\",minor=\"3\"")" = 1 ]
    [ "$(sample vramguard_gpu_memory_total_bytes "$(gpu 0)")" = $((80 * GiB)) ]
    [ "$(sample vramguard_gpu_memory_used_bytes "$(gpu 0)")" = $((2 * GiB)) ]
    [ "$(sample vramguard_gpu_memory_reserved_bytes "$(gpu 0)")" = $((GiB / 2)) ]
    [ "$(sample vramguard_gpu_memory_free_bytes "$(gpu 0)")" = $((80 * GiB - GiB / 2 - 2 * GiB)) ]
    [ "$(sample vramguard_gpu_memory_used_bytes "$(gpu 1)")" = $((21 * GiB)) ]
    [ "$(sample vramguard_gpu_memory_used_bytes "$(gpu 3)")" = $((10 * GiB)) ]
    [ "$(sample vramguard_gpu_utilization_ratio "$(gpu 1)")" = 0.97 ]
    [ "$(sample vramguard_gpu_holders "$(gpu 0)")" = 1 ]
    [ "$(sample vramguard_gpu_holders "$(gpu 1)")" = 4 ]
    [ "$(sample vramguard_gpu_holders "$(gpu 2)")" = 1 ]
    [ "$(sample vramguard_gpu_holders "$(gpu 3)")" = 1 ]
    [ "$(sample vramguard_gpu_lost "$(gpu 3)")" = 0 ]
    [ "$(sample vramguard_gpu_nvml_errors "$(gpu 3)")" = 0 ]
    [ "$(sample vramguard_collections_total)" -ge 1 ]
    [ "$(sample vramguard_collect_failures_total)" = 0 ]
    # Every collection scanned /proc one way or the other; the first scan is a full one.
    full=$(sample vramguard_scans_total 'kind="full"')
    incremental=$(sample vramguard_scans_total 'kind="incremental"')
    [ "$full" -ge 1 ]
    [ $((full + incremental)) -eq "$(sample vramguard_collections_total)" ]
    [ "$(nseries vramguard_scans_total)" -eq 2 ]
    # what the collection could not read, as this machine lets root see: processes of the
    # tests running beside this one (zombies, processes on their way out) come and go between
    # a collection and the count here, so the two are taken again until they agree (bounded)
    [ "$(nseries vramguard_unread_processes)" -eq 3 ]
    local got want tries=0
    while :; do
        want=$(vg_unreadable_fds)
        got=$(sample vramguard_unread_processes 'what="descriptors"')
        [ "$got" -eq "$want" ] && break
        tries=$((tries + 1))
        [ "$tries" -lt 10 ] || { echo "unread descriptors: serve says $got, /proc $want"; false; }
        sleep 1
        scrape
    done
}

@test "a known host: memory by reason partitions each GPU's used memory" {
    known_host
    serve_start
    scrape
    held() { sample vramguard_gpu_memory_held_bytes "$(gpu "$1"),reason=\"$2\""; }
    [ "$(held 0 outside_visible)" = $((2 * GiB)) ]
    [ "$(held 0 expected)" = 0 ]
    [ "$(held 1 expected)" = $((20 * GiB)) ]
    [ "$(held 1 zombie)" = $((1 * GiB)) ]
    [ "$(held 2 orphan)" = $((3 * GiB)) ]
    [ "$(held 3 foreign_pid)" = $((2 * GiB)) ]
    [ "$(held 3 unattributed)" = $((8 * GiB)) ]
    [ "$(held 1 unattributed)" = 0 ]
    [ "$(held 2 context_only)" = 0 ]
    [ "$(nseries vramguard_gpu_memory_held_bytes)" -eq 28 ]
    # Dirty: memory no running job holds (zombie, orphan, unattributed) beyond 64 MiB; a
    # process outside its visible set still works there, and a foreign PID may be a job.
    [ "$(sample vramguard_gpu_dirty "$(gpu 0)")" = 0 ]
    [ "$(sample vramguard_gpu_dirty "$(gpu 1)")" = 1 ]
    [ "$(sample vramguard_gpu_dirty "$(gpu 2)")" = 1 ]
    [ "$(sample vramguard_gpu_dirty "$(gpu 3)")" = 1 ]
    # The reasons add up to used memory on every GPU.
    local g sum
    for g in 0 1 2 3; do
        sum=$(grep -F "vramguard_gpu_memory_held_bytes{$(gpu $g)," <<<"$SCRAPE" |
            awk '{ s += $NF } END { printf "%.0f", s }')
        [ "$sum" = "$(sample vramguard_gpu_memory_used_bytes "$(gpu $g)")" ]
    done
}

@test "a known host: per-holder series with identity labels, never the command line" {
    known_host
    serve_start
    scrape
    holder() { # holder GPU PID COMM SEEN
        local u=U$1
        printf 'gpu="%s",uuid="%s",pid="%s",user="%s",comm="%s",seen_by="%s"' "$1" "${!u}" "$2" \
            "$ME" "$3" "$4"
    }
    [ "$(sample vramguard_process_memory_bytes "$(holder 1 "$A" train both)")" = $((20 * GiB)) ]
    [ "$(sample vramguard_process_memory_bytes "$(holder 0 "$B" latecvd both)")" = $((2 * GiB)) ]
    [ "$(sample vramguard_process_memory_bytes "$(holder 2 "$O" worker both)")" = $((3 * GiB)) ]
    [ "$(sample vramguard_process_memory_bytes "gpu=\"3\",uuid=\"$U3\",pid=\"$FOREIGN\",seen_by=\"nvml\"")" = $((2 * GiB)) ]
    # The D-state holder has the device node only: it is listed, with no memory figure.
    [ "$(sample vramguard_process_info "$(holder 1 "$D" stuck fd)")" = 1 ]
    [ "$(sample vramguard_process_info "$(holder 1 "$V" stuck fd)")" = 1 ]
    [ "$(nseries vramguard_process_memory_bytes "pid=\"$D\"")" -eq 0 ]
    [ "$(nseries vramguard_process_info)" -eq 7 ]
    [ "$(nseries vramguard_process_memory_bytes)" -eq 5 ]
    [ "$(nseries vramguard_process_memory_bytes 'pid="other"')" -eq 0 ]
    [[ $SCRAPE != *train.py* && $SCRAPE != *CUDA_VISIBLE_DEVICES* ]]
}

@test "a known host: findings by rule, severity and GPU" {
    known_host
    serve_start
    scrape
    [ "$(sample vramguard_findings 'rule="outside-visible",severity="warning",gpu="0"')" = 1 ]
    [ "$(sample vramguard_findings 'rule="zombie-holder",severity="critical",gpu="1"')" = 1 ]
    [ "$(sample vramguard_findings 'rule="d-state-holder",severity="warning",gpu="1"')" = 1 ]
    [ "$(sample vramguard_findings 'rule="orphan-holder",severity="critical",gpu="2"')" = 1 ]
    [ "$(sample vramguard_findings 'rule="foreign-pid",severity="warning",gpu="3"')" = 1 ]
    [ "$(sample vramguard_findings 'rule="unattributed",severity="warning",gpu="3"')" = 1 ]
    [ "$(nseries vramguard_findings)" -eq 6 ]
}

@test "the scenario changes: the next collection shows it without a restart" {
    known_host
    serve_start --interval 200ms
    scrape
    [ "$(sample vramguard_gpu_memory_used_bytes "$(gpu 3)")" = $((10 * GiB)) ]
    sed -i 's/used=10GiB/used=12GiB/' "$FAKE_NVML_SCENARIO"
    wait_scrape '[ "$(sample vramguard_gpu_memory_used_bytes "$(gpu 3)")" = $((12 * GiB)) ]'
    [ "$(sample vramguard_gpu_memory_held_bytes "$(gpu 3),reason=\"unattributed\"")" = $((10 * GiB)) ]
}

@test "--full-scan: 0 makes every collection a full scan; by default later ones are incremental" {
    known_host
    serve_start --interval 100ms --full-scan 0
    wait_scrape '[ "$(sample vramguard_collections_total)" -ge 4 ]'
    [ "$(sample vramguard_scans_total 'kind="incremental"')" = 0 ]
    [ "$(sample vramguard_scans_total 'kind="full"')" = "$(sample vramguard_collections_total)" ]
    serve_stop
    serve_start --interval 100ms
    wait_scrape '[ "$(sample vramguard_scans_total kind=\"incremental\")" -ge 2 ]'
    [ "$(sample vramguard_scans_total 'kind="full"')" -ge 1 ]
    promtool_ok
}

# 500 NVML entries on GPU 0 (PIDs no /proc shows, 1..500 MiB), 2 on GPU 1.
many_holders() {
    local i lines=()
    for ((i = 1; i <= 500; i++)); do
        lines+=("proc gpu=0 pid=$((FOREIGN + i)) type=compute mem=${i}MiB")
    done
    vg_scenario <<EOF
driver 550.54.15
gpu index=0 uuid=$U0 name="NVIDIA A100-SXM4-80GB" minor=2 total=80GiB reserved=512MiB used=auto util=50
gpu index=1 uuid=$U1 name="NVIDIA A100-SXM4-80GB" minor=0 total=80GiB reserved=512MiB used=auto util=50
$(printf '%s\n' "${lines[@]}")
proc gpu=1 pid=$((FOREIGN + 1001)) type=compute mem=1GiB
proc gpu=1 pid=$((FOREIGN + 1002)) type=compute mem=2GiB
EOF
}

MiB=1048576

@test "500 holders: top 10 per GPU by memory, the rest in one pid=\"other\" series" {
    many_holders
    serve_start
    scrape
    promtool_ok
    [ "$(nseries vramguard_process_memory_bytes 'gpu="0"')" -eq 11 ]
    [ "$(nseries vramguard_process_info 'gpu="0"')" -eq 10 ]
    [ "$(nseries vramguard_process_memory_bytes 'gpu="1"')" -eq 2 ]
    # The biggest ten: 491..500 MiB.
    local i
    for ((i = 491; i <= 500; i++)); do
        [ "$(sample vramguard_process_memory_bytes "gpu=\"0\",uuid=\"$U0\",pid=\"$((FOREIGN + i))\",seen_by=\"nvml\"")" = $((i * MiB)) ]
    done
    # The other 490 summed: 1 + ... + 490 MiB.
    [ "$(sample vramguard_process_memory_bytes "gpu=\"0\",uuid=\"$U0\",pid=\"other\"")" = $((490 * 491 / 2 * MiB)) ]
    [ "$(sample vramguard_process_other_holders "gpu=\"0\",uuid=\"$U0\",name=\"NVIDIA A100-SXM4-80GB\"")" = 490 ]
    [ "$(sample vramguard_gpu_holders "gpu=\"0\",uuid=\"$U0\",name=\"NVIDIA A100-SXM4-80GB\"")" = 500 ]
    # Findings stay one series per rule, severity and GPU however many there are.
    [ "$(sample vramguard_findings 'rule="foreign-pid",severity="warning",gpu="0"')" = 500 ]
    # Nothing else grows with the number of holders.
    [ "$(grep -cv '^#' <<<"$SCRAPE")" -lt 120 ]
}

@test "500 holders: --per-process top:3, all and none" {
    many_holders
    serve_start --per-process top:3
    scrape
    [ "$(nseries vramguard_process_memory_bytes 'gpu="0"')" -eq 4 ]
    [ "$(sample vramguard_process_memory_bytes "gpu=\"0\",uuid=\"$U0\",pid=\"other\"")" = $((497 * 498 / 2 * MiB)) ]
    serve_stop
    serve_start --per-process all
    scrape
    promtool_ok
    [ "$(nseries vramguard_process_memory_bytes 'gpu="0"')" -eq 500 ]
    [ "$(nseries vramguard_process_memory_bytes 'pid="other"')" -eq 0 ]
    serve_stop
    serve_start --per-process none
    scrape
    promtool_ok
    [ "$(nseries vramguard_process_memory_bytes)" -eq 0 ]
    [ "$(nseries vramguard_process_info)" -eq 0 ]
    [ "$(sample vramguard_gpu_memory_held_bytes "gpu=\"0\",uuid=\"$U0\",name=\"NVIDIA A100-SXM4-80GB\",reason=\"foreign_pid\"")" = $((500 * 501 / 2 * MiB)) ]
}

@test "unknown values are absent samples, never 0" {
    vg_scenario <<EOF
gpu index=0 uuid=$U0 minor=2 total=80GiB used=na
gpu index=1 uuid=$U1 name="Tesla T4" minor=0 total=15GiB used=auto
proc gpu=1 pid=$FOREIGN type=compute mem=na
EOF
    serve_start
    scrape
    promtool_ok
    [ "$(sample vramguard_last_collect_success)" = 1 ]
    # GPU 0: no name, memory or utilisation from the driver.
    [ "$(sample vramguard_gpu_info "gpu=\"0\",uuid=\"$U0\",minor=\"2\"")" = 1 ]
    [ "$(nseries vramguard_gpu_memory_total_bytes 'gpu="0"')" -eq 0 ]
    [ "$(nseries vramguard_gpu_memory_used_bytes 'gpu="0"')" -eq 0 ]
    [ "$(nseries vramguard_gpu_utilization_ratio)" -eq 0 ]
    # No v2 memory call answers a reservation here: absent, not 0.
    [ "$(nseries vramguard_gpu_memory_reserved_bytes)" -eq 0 ]
    [ "$(nseries vramguard_gpu_memory_held_bytes 'gpu="0",uuid="'"$U0"'",reason="unattributed"')" -eq 0 ]
    # GPU 1: a holder without a figure is listed but has no memory sample.
    [ "$(sample vramguard_process_info "gpu=\"1\",uuid=\"$U1\",pid=\"$FOREIGN\",seen_by=\"nvml\"")" = 1 ]
    [ "$(nseries vramguard_process_memory_bytes)" -eq 0 ]
}

@test "--help, and bad command lines exit 64 with one line" {
    run "$VG" serve --help
    [ "$status" -eq 0 ]
    [[ $output == *"usage: vramguard serve"* && $output == *--per-process* && $output == *--allow-remote* ]]
    [[ $output == *"  --full-scan DUR"* ]]
    for args in "--listen 0.0.0.0:19835" "--listen :19835" "--listen 10.0.0.1:1" \
        "--listen nohost" "--listen 127.0.0.1:70000" "--listen example.com:80" \
        "--interval 0" "--interval soon" "--per-process top:0" "--per-process most" \
        "--conn-timeout 0" "--max-connections 0" "--full-scan -1" "--full-scan 2d" \
        "--full-scan never" "extra"; do
        # shellcheck disable=SC2086 # split on purpose
        run "$VG" serve $args
        printf '%s -> %s: %s\n' "$args" "$status" "$output"
        [ "$status" -eq 64 ]
        [[ $output == "vramguard: serve: "* ]]
        [ "$(wc -l <<<"$output")" -eq 1 ]
    done
    run "$VG" serve --listen 0.0.0.0:19835
    [[ $output == *--allow-remote* ]]
}

@test "the port is taken: exit 70 with the reason" {
    vg_scenario <<EOF
gpu index=0 uuid=$U0 minor=2 total=80GiB
EOF
    serve_start
    run "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" serve --listen "127.0.0.1:$SERVE_PORT"
    [ "$status" -eq 70 ]
    [[ $output == *"cannot listen on 127.0.0.1:$SERVE_PORT"*"in use"* ]]
}
