#!/usr/bin/env bats
# t0102-status-json: the `status --json` document (docs/json.md, vramguard.status/1) field by
# field: its shape (every documented field always present), the host, driver and scan objects,
# each GPU's identity, memory (total/used/free/reserved, held, unexplained and its flags),
# utilisation and modes, unknowns as null (never 0), and strings from processes escaped so
# the document always parses.

# shellcheck disable=SC2119,SC2120,SC2154 # vgs: optional arguments; bats sets $stderr*
load lib

bats_require_minimum_version 1.5.0

setup() {
    TMP=$(vg_tmpdir)
    DEVDIR=$(vg_fake_dev)
    vg_require_jq
}

# vgs ARGS...: `vramguard --json ARGS` with the fake driver and this test's device directory;
# stdout in $output (checked to be one vramguard.status/1 document), stderr in $stderr.
vgs() {
    run --separate-stderr "$VG" --nvml "${VG_NVML:-$FAKE_FULL}" --dev "$DEVDIR" --json "$@"
    if ! jq -e '.schema == "vramguard.status/1"' <<<"$output" >/dev/null; then
        echo "not a vramguard.status/1 document (status $status): $output $stderr"
        return 1
    fi
}

GIB=1073741824
MIB=1048576

# The documented keys, sorted as jq's `keys` sorts them.
TOP_KEYS='["driver","gpus","host","path_only","replay","scan","schema","time","unmatched_holders","vramguard_version"]'
HOST_KEYS='["dev_dir","pid_namespace","pid_namespace_depth","proc_root"]'
DRIVER_KEYS='["available","cuda_version","driver_version","error","errors","library","memory_api","nvml_version","process_api","process_stride_535"]'
GPU_KEYS='["compute_capability","compute_mode","errors","health","holder_count","holders","hung","index","lost","memory","mig_devices","mig_mode","minor","name","pci_bus_id","persistence_mode","processes_known","utilization","uuid"]'
GPU_MEM_KEYS='["free","held_by_holders","reserved","total","unexplained","unexplained_includes_reserved","unexplained_is_upper_bound","used"]'
MIG_KEYS='["compute_instance","errors","gpu_instance","holders","index","memory","name","uuid"]'
MIG_MEM_KEYS='["free","reserved","total","used"]'
HOLDER_KEYS='["bogus_pid","comm","command","container","device_nodes","device_nodes_more","in_proc","memory","mig_device","nspid","pid","pod_uid","ppid","seen_by","stale","start_ticks","state","types","uid","user"]'
ERROR_KEYS='["code","function","message"]'
SCAN_KEYS='["denied","maps","method","processes","reason","vanished"]'

@test "every documented field is present, in every object, whatever is known" {
    vg_spawn --open "$DEVDIR/nvidia2" --open "$DEVDIR/nvidia5"
    # GPU 0 knows everything; GPU 1 nothing but its index (and its minor, for the fd holder);
    # GPU 2 has MIG devices; minor 5 is no GPU's.
    vg_scenario <<EOF
driver 550.54.15
nvml 12.550.54.15
cuda 12040
gpu index=0 uuid=GPU-00000000-0000-0000-0000-000000000000 name="NVIDIA A100-SXM4-80GB" minor=0 bus=00000000:07:00.0 total=80GiB reserved=512MiB util=37 mem_util=12 cc=8.0 persistence=1 compute_mode=0 mig=0
gpu index=1 minor=2
gpu index=2 uuid=GPU-22222222-0000-0000-0000-000000000000 name="NVIDIA A100-SXM4-80GB" minor=1 bus=00000000:0F:00.0 total=80GiB reserved=512MiB util=0 cc=8.0 persistence=1 compute_mode=0 mig=1
mig parent=2 index=0 uuid=MIG-aaaaaaaa-0000-0000-0000-000000000000 name="1g.10gb" gi=7 ci=0 total=10GiB
proc gpu=0 pid=4000000 type=compute mem=1GiB
proc gpu=0 pid=0 type=graphics mem=na
proc mig=2/0 pid=$VG_PID type=compute mem=2GiB
error func=nvmlDeviceGetMemoryInfo_v2 gpu=0 code=999 times=1
EOF
    vgs
    [ "$status" -eq 0 ]
    keys() { json "[$1 | keys] | unique | .[]" -c; }
    [ "$(keys .)" = "$TOP_KEYS" ]
    [ "$(keys .host)" = "$HOST_KEYS" ]
    [ "$(keys .driver)" = "$DRIVER_KEYS" ]
    [ "$(keys .scan)" = "$SCAN_KEYS" ]
    [ "$(json '.gpus | length')" = 3 ]
    [ "$(keys '.gpus[]')" = "$GPU_KEYS" ]
    [ "$(keys '.gpus[].memory')" = "$GPU_MEM_KEYS" ]
    [ "$(keys '.gpus[].utilization')" = '["gpu","memory"]' ]
    [ "$(keys '.gpus[].mig_mode')" = '["current","pending"]' ]
    [ "$(keys '.gpus[].health')" = '["clock_event_reasons","ecc","recovery_action","recovery_action_code","remapped_rows","retired_pages"]' ]
    [ "$(keys '.gpus[].health.ecc')" = '["aggregate","current","pending","volatile"]' ]
    [ "$(keys '.gpus[].health.remapped_rows')" = '["corrected","failure","pending","uncorrected"]' ]
    [ "$(keys '.gpus[].health.retired_pages')" = '["double_bit","pending","single_bit"]' ]
    [ "$(keys '.gpus[].mig_devices[]')" = "$MIG_KEYS" ]
    [ "$(keys '.gpus[].mig_devices[].memory')" = "$MIG_MEM_KEYS" ]
    # Holders of every kind: both, nvml-only in and out of /proc, bogus, fd-only, MIG, unmatched.
    [ "$(json '[.gpus[].holders[], .gpus[].mig_devices[].holders[], .unmatched_holders[].holder] | length')" = 5 ]
    [ "$(keys '.gpus[].holders[], .gpus[].mig_devices[].holders[], .unmatched_holders[].holder')" = "$HOLDER_KEYS" ]
    [ "$(keys '.unmatched_holders[]')" = '["holder","minor"]' ]
    [ "$(keys '.gpus[].errors[], .gpus[].mig_devices[].errors[], .driver.errors[]')" = "$ERROR_KEYS" ]
}

@test "schema, version, time, host, driver and scan" {
    vg_scenario <<'EOF'
driver 550.54.15
nvml 12.550.54.15
cuda 12040
gpu index=0 minor=0 total=16GiB reserved=256MiB
EOF
    before=$(date -u +%s)
    vgs
    after=$(date -u +%s)
    [ "$status" -eq 0 ]
    [ -z "$stderr" ]
    [ "$(json .schema)" = vramguard.status/1 ]
    [ "$(json .vramguard_version)" = "$(cat "$ROOT/VERSION")" ]
    [[ $(json .time) =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$ ]]
    t=$(json '.time | fromdateiso8601')
    ((t >= before - 1 && t <= after + 1))

    [ "$(json .host.proc_root)" = /proc ]
    [ "$(json .host.dev_dir)" = "$DEVDIR" ]
    depth=$(awk '$1 == "NSpid:" { print NF - 1 }' /proc/self/status)
    [ "$(json .host.pid_namespace_depth)" = "${depth:-0}" ]
    # the same inode fact vramguard reads: the initial namespace's is 4026531836
    if [ "$(readlink /proc/self/ns/pid)" = "pid:[4026531836]" ]; then
        [ "$(json .host.pid_namespace)" = initial ]
    elif [ "${depth:-0}" = 1 ]; then
        [ "$(json .host.pid_namespace)" = nested ]
    fi

    json_ok '.driver.available == true and .driver.error == null'
    [ "$(json .driver.library)" = "$FAKE_FULL" ]
    [ "$(json .driver.driver_version)" = 550.54.15 ]
    [ "$(json .driver.nvml_version)" = 12.550.54.15 ]
    [ "$(json .driver.cuda_version)" = 12.4 ]
    [ "$(json .driver.memory_api)" = v2 ]
    [ "$(json .driver.process_api)" = v3 ]
    json_ok '.driver.process_stride_535 == false and .driver.errors == []'
    json_ok '.unmatched_holders == []'

    json_ok '.scan.processes | type == "number" and . > 0 and . == floor'
    json_ok '.scan.vanished | type == "number" and . >= 0'
    json_ok '.scan.denied | type == "number" and . >= 0'
    procs=$(ls -d /proc/[0-9]* | wc -l)
    # Give or take the processes that came and went meanwhile.
    (($(json .scan.processes) > procs / 2 && $(json .scan.processes) < procs * 2))

    # Versions the driver does not report are null, not "" or 0.
    vg_scenario <<'EOF'
gpu index=0 minor=0 total=16GiB
EOF
    vgs
    [ "$status" -eq 0 ]
    json_ok '.driver.driver_version == null and .driver.nvml_version == null'
    json_ok '.driver.cuda_version == null and .driver.available == true'
}

@test "a GPU field by field: identity, memory, utilisation, modes" {
    vg_scenario <<'EOF'
driver 550.54.15
gpu index=0 uuid=GPU-6f1c2a3e-1111-2222-3333-444455556666 name="NVIDIA A100-SXM4-80GB" minor=4 bus=00000000:07:00.0 total=80GiB reserved=512MiB used=20GiB util=37 mem_util=12 cc=8.0 persistence=1 compute_mode=0 mig=0 mig_pending=1
gpu index=1 uuid=GPU-b1 name="Tesla T4" minor=0 bus=0000000A:AF:1F.7 total=15GiB reserved=256MiB util=100 mem_util=0 cc=7.5 persistence=0 compute_mode=1 mig=0
gpu index=2 uuid=GPU-b2 minor=2 total=1GiB compute_mode=2
gpu index=3 uuid=GPU-b3 minor=1 total=1GiB compute_mode=3
proc gpu=0 pid=4000000 type=compute mem=5GiB
proc gpu=0 pid=4000001 type=graphics mem=3GiB
EOF
    vgs
    [ "$status" -eq 0 ]
    [ "$(json '.gpus | map(.index) | join(",")')" = 0,1,2,3 ]
    [ "$(json '.gpus[0].uuid')" = GPU-6f1c2a3e-1111-2222-3333-444455556666 ]
    [ "$(json '.gpus[0].name')" = "NVIDIA A100-SXM4-80GB" ]
    [ "$(json '.gpus[0].minor')" = 4 ]
    [ "$(json '.gpus[0].pci_bus_id')" = 00000000:07:00.0 ]
    [ "$(json '.gpus[1].pci_bus_id')" = 0000000A:AF:1F.7 ]
    json_ok '.gpus[0].lost == false'
    [ "$(json '.gpus[0].memory.total')" = $((80 * GIB)) ]
    [ "$(json '.gpus[0].memory.used')" = $((20 * GIB)) ]
    [ "$(json '.gpus[0].memory.reserved')" = $((512 * MIB)) ]
    [ "$(json '.gpus[0].memory.free')" = $((80 * GIB - 20 * GIB - 512 * MIB)) ]
    [ "$(json '.gpus[0].memory.held_by_holders')" = $((8 * GIB)) ]
    [ "$(json '.gpus[0].memory.unexplained')" = $((12 * GIB)) ]
    json_ok '.gpus[0].memory.unexplained_includes_reserved == false'
    json_ok '.gpus[0].memory.unexplained_is_upper_bound == false'
    [ "$(json '.gpus[0].utilization.gpu')" = 37 ]
    [ "$(json '.gpus[0].utilization.memory')" = 12 ]
    [ "$(json '.gpus[1].utilization.gpu')" = 100 ]
    [ "$(json '.gpus[1].utilization.memory')" = 0 ]
    [ "$(json '.gpus[0].compute_capability')" = 8.0 ]
    [ "$(json '.gpus[1].compute_capability')" = 7.5 ]
    json_ok '.gpus[0].persistence_mode == true and .gpus[1].persistence_mode == false'
    [ "$(json '.gpus | map(.compute_mode) | join(",")')" = \
        default,exclusive_thread,prohibited,exclusive_process ]
    json_ok '.gpus[0].mig_mode == {"current": false, "pending": true}'
    json_ok '.gpus[1].mig_mode == {"current": false, "pending": false}'
    json_ok '.gpus[0].processes_known == true and .gpus[0].holder_count == 2'
    json_ok '.gpus[0].mig_devices == [] and .gpus[0].errors == []'
    # A GPU nothing holds: memory as the driver says, nothing held, nothing unexplained.
    [ "$(json '.gpus[1].memory.used')" = 0 ]
    [ "$(json '.gpus[1].memory.free')" = $((15 * GIB - 256 * MIB)) ]
    json_ok '.gpus[1].memory.held_by_holders == 0 and .gpus[1].memory.unexplained == 0'
    json_ok '.gpus[1].holder_count == 0 and .gpus[1].holders == []'
}

@test "unknown is null, never 0: a GPU that reports only its index" {
    vg_scenario <<'EOF'
driver 550.54.15
gpu index=0 minor=0 total=1GiB
gpu index=1
EOF
    vgs
    [ "$status" -eq 0 ]
    for f in uuid name minor pci_bus_id memory.total memory.used memory.free memory.reserved \
        memory.unexplained utilization.gpu utilization.memory compute_capability \
        persistence_mode compute_mode mig_mode.current mig_mode.pending; do
        json_ok ".gpus[1].$f == null" || { echo "gpus[1].$f is $(json ".gpus[1].$f")"; return 1; }
    done
    [ "$(json '.gpus[1].index')" = 1 ]
    json_ok '.gpus[1].memory.held_by_holders == 0 and .gpus[1].lost == false'
    json_ok '.gpus[1].mig_devices == [] and .gpus[1].holders == []'
    # used=na: memory unknown while the total of the other GPU stays known.
    vg_scenario <<'EOF'
gpu index=0 minor=0 total=8GiB used=na reserved=1GiB
proc gpu=0 pid=4000000 type=compute mem=1GiB
EOF
    vgs
    [ "$status" -eq 0 ]
    json_ok '.gpus[0].memory | .total == null and .used == null and .free == null'
    json_ok '.gpus[0].memory.unexplained == null'
    [ "$(json '.gpus[0].memory.held_by_holders')" = "$GIB" ]
}

@test "unexplained: used minus what holders hold, floored at 0; upper bound when some is unknown" {
    vg_scenario <<'EOF'
gpu index=0 minor=0 total=80GiB reserved=1GiB used=50GiB
gpu index=1 minor=1 total=80GiB reserved=1GiB used=2GiB
gpu index=2 minor=2 total=80GiB reserved=1GiB used=30GiB
proc gpu=0 pid=4000000 type=compute mem=8GiB
proc gpu=0 pid=4000001 type=compute mem=2GiB
proc gpu=1 pid=4000002 type=compute mem=5GiB
proc gpu=2 pid=4000003 type=compute mem=10GiB
proc gpu=2 pid=4000004 type=compute mem=na
EOF
    vgs
    [ "$status" -eq 0 ]
    [ "$(json '.gpus[0].memory.held_by_holders')" = $((10 * GIB)) ]
    [ "$(json '.gpus[0].memory.unexplained')" = $((40 * GIB)) ]
    json_ok '.gpus[0].memory.unexplained_is_upper_bound == false'
    # The holders claim more than the GPU uses: nothing unexplained, never negative.
    [ "$(json '.gpus[1].memory.held_by_holders')" = $((5 * GIB)) ]
    [ "$(json '.gpus[1].memory.unexplained')" = 0 ]
    # A holder whose memory is unknown: the figure may include its memory.
    [ "$(json '.gpus[2].memory.held_by_holders')" = $((10 * GIB)) ]
    [ "$(json '.gpus[2].memory.unexplained')" = $((20 * GIB)) ]
    json_ok '.gpus[2].memory.unexplained_is_upper_bound == true'
    json_ok '.gpus[].memory.unexplained_includes_reserved == false'

    # The text says the same.
    run --separate-stderr "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" status
    [[ $output == *"  40 GiB held by no listed process"* ]]
    [[ $output == *"  up to 20 GiB held by no listed process"* ]]
    [ "$(grep -c 'held by no listed process' <<<"$output")" -eq 2 ]
}

@test "no process list readable: processes_known false, unexplained null, the errors listed" {
    vg_scenario <<'EOF'
gpu index=0 uuid=GPU-0 name=T4 bus=00000000:01:00.0 minor=0 total=8GiB reserved=1GiB used=3GiB
gpu index=1 uuid=GPU-1 name=T4 bus=00000000:02:00.0 minor=1 total=8GiB reserved=1GiB
proc gpu=0 pid=4000000 type=compute mem=1GiB
proc gpu=1 pid=4000001 type=compute mem=1GiB
error func=nvmlDeviceGetComputeRunningProcesses_v3 gpu=0 code=999
error func=nvmlDeviceGetGraphicsRunningProcesses_v3 gpu=0 code=999
error func=nvmlDeviceGetMPSComputeRunningProcesses_v3 gpu=0 code=999
EOF
    vgs
    [ "$status" -eq 0 ]
    json_ok '.gpus[0].processes_known == false'
    json_ok '.gpus[0].memory.unexplained == null and .gpus[0].holders == []'
    [ "$(json '.gpus[0].memory.used')" = $((3 * GIB)) ]
    [ "$(json '[.gpus[0].errors[].function] | sort | join(",")')" = \
        nvmlDeviceGetComputeRunningProcesses_v3,nvmlDeviceGetGraphicsRunningProcesses_v3,nvmlDeviceGetMPSComputeRunningProcesses_v3 ]
    json_ok '.gpus[0].errors | all(.code == 999 and (.message | test("Unknown Error")))'
    # The other GPU is untouched.
    json_ok '.gpus[1].processes_known == true and .gpus[1].errors == []'
    [ "$(json '.gpus[1].holders[0].pid')" = 4000001 ]
    [ "$(json '.gpus[1].memory.unexplained')" = 0 ]
}

@test "process strings escaped: the document parses, bytes round-trip, bad UTF-8 is U+FFFD" {
    vg_spawn --open "$DEVDIR/nvidia0" --comm $'q"b\\c\nd)\t(' -- \
        $'tab\there' 'quote"back\slash' $'bell\a\x01' $'\xff\xfebad' 'ünïcødé ✓' $'\e[2J'
    vg_scenario <<'EOF'
gpu index=0 minor=0 total=8GiB
EOF
    vgs
    [ "$status" -eq 0 ]
    h=".gpus[0].holders[] | select(.pid == $VG_PID)"
    [ "$(json "$h | .comm" -j)" = $'q"b\\c\nd)\t(' ]
    cmd=$(json "$h | .command" -j)
    [[ $cmd == "$HELPER --pidfile "*" -- "$'tab\there quote"back\\slash bell\a\x01 \xef\xbf\xbd\xef\xbf\xbdbad ünïcødé ✓ \e[2J' ]]
    # Control characters appear only as \u escapes in the document itself.
    [[ $output != *$'\e'* && $output != *$'\a'* && $output != *$'\x01'* ]]
    [[ $output == *'\u001b[2J'* ]]
    # Valid UTF-8 throughout.
    iconv -f UTF-8 -t UTF-8 <<<"$output" >/dev/null
}

@test "--json with the driver missing is still one complete document" {
    vg_spawn --open "$DEVDIR/nvidia1"
    VG_NVML=$TMP/absent.so vgs
    [ "$status" -eq 3 ]
    json_ok '.driver.available == false and .gpus == []'
    json_ok '.driver | .library == null and .memory_api == null and .process_api == null'
    json_ok '.driver.process_stride_535 == false'
    [[ $(json .driver.error) == *"$TMP/absent.so"* ]]
    [ "$(json '.unmatched_holders | length')" = 1 ]
    [ "$(json '.unmatched_holders[0].minor')" = 1 ]
    [ "$(json '.unmatched_holders[0].holder.seen_by')" = fd ]
}
