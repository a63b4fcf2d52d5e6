#!/usr/bin/env bats
# t0103-status-holders: real processes (tests/helpers/vg-helper) holding fake device nodes, and
# PIDs in the fake driver's process lists, joined by `vramguard status --json`: fd-only, NVML-only
# and both; the minor-number mapping where minor != index; per-holder memory and unknown memory;
# bogus PIDs; workers, orphans, zombies and a zombie leader; the user; MIG devices.

# shellcheck disable=SC2119,SC2120,SC2154 # vgs: optional arguments; bats sets $stderr*
load lib

bats_require_minimum_version 1.5.0

GIB=1073741824
MIB=1048576

setup() {
    TMP=$(vg_tmpdir)
    DEVDIR=$(vg_fake_dev)
    LIB=$(vg_fake_lib libcuda.so.1 libnccl.so.2)
    vg_require_jq
}

# scenario [PROC_LINES...]: GPU 0 with minor 3 and GPU 1 with minor 1 (no GPU has minor 0),
# plus the given `proc` (or other) lines.
scenario() {
    {
        cat <<'EOF'
driver 550.54.15
cuda 12040
gpu index=0 uuid=GPU-8a1b2c3d-0000-0000-0000-000000000000 name="NVIDIA H100 80GB HBM3" minor=3 bus=00000000:17:00.0 total=80GiB reserved=512MiB util=97 cc=9.0 persistence=1 compute_mode=0 mig=0
gpu index=1 uuid=GPU-1f0e9d8c-0000-0000-0000-000000000000 name="NVIDIA H100 80GB HBM3" minor=1 bus=00000000:2A:00.0 total=80GiB reserved=512MiB util=0 cc=9.0 persistence=1 compute_mode=0 mig=0
EOF
        printf '%s\n' "$@"
    } | vg_scenario "$TMP/scenario"
    export FAKE_NVML_SCENARIO=$TMP/scenario # vg_scenario ran in a pipeline's subshell
}

# vgs ARGS...: `vramguard --json ARGS` with the fake driver and this test's device directory.
vgs() {
    run --separate-stderr "$VG" --nvml "${VG_NVML:-$FAKE_FULL}" --dev "$DEVDIR" --json "$@"
    if ! jq -e '.schema == "vramguard.status/1"' <<<"$output" >/dev/null; then
        echo "not a vramguard.status/1 document (status $status): $output $stderr"
        return 1
    fi
}

# vgt ARGS...: the same as text.
vgt() {
    run --separate-stderr "$VG" --nvml "${VG_NVML:-$FAKE_FULL}" --dev "$DEVDIR" "$@"
}

# holder GPU PID: the holder object of PID under gpus[GPU] (compact JSON; empty when absent).
holder() {
    json ".gpus[$1].holders[] | select(.pid == $2)" -c
}

# hf GPU PID FIELD: one field of that holder.
hf() {
    json ".gpus[$1].holders[] | select(.pid == $2) | .$3"
}

# where PID: every place PID is listed, e.g. "gpu0 unmatched3".
where() {
    json "[(.gpus[] | .index as \$i | .holders[] | select(.pid == $1) | \"gpu\(\$i)\"),
           (.gpus[] | .index as \$i | .mig_devices[] | .index as \$m | .holders[]
               | select(.pid == $1) | \"gpu\(\$i)/mig\(\$m)\"),
           (.unmatched_holders[] | select(.holder.pid == $1) | \"unmatched\(.minor)\")] | join(\" \")"
}

# cmdline PID: /proc/PID/cmdline with its arguments joined by spaces.
cmdline() {
    local -a args
    mapfile -d '' args <"/proc/$1/cmdline"
    local IFS=' '
    printf '%s' "${args[*]}"
}

@test "an fd-only holder field by field (environment, mapped libraries, command line)" {
    vg_spawn --open "$DEVDIR/nvidia3" --open "$DEVDIR/nvidiactl" --open "$DEVDIR/nvidia-uvm" \
        --env CUDA_VISIBLE_DEVICES=0 --env VG_SECRET_TOKEN=hunter2-s3cr3t \
        --map "$LIB/libcuda.so.1" --map "$LIB/libnccl.so.2" -- python train.py --lr 3e-4
    scenario
    vgs
    [ "$status" -eq 0 ]
    [ "$(where "$VG_PID")" = gpu0 ]
    h=$(holder 0 "$VG_PID")
    echo "$h"
    [ "$(hf 0 "$VG_PID" pid)" = "$VG_PID" ]
    json_ok ".gpus[0].holders[] | select(.pid == $VG_PID) | .memory == null and .types == []"
    [ "$(hf 0 "$VG_PID" seen_by)" = fd ]
    [ "$(hf 0 "$VG_PID" in_proc)" = true ]
    [ "$(hf 0 "$VG_PID" bogus_pid)" = false ]
    [ "$(hf 0 "$VG_PID" mig_device)" = null ]
    [ "$(hf 0 "$VG_PID" user)" = "$(id -un)" ]
    [ "$(hf 0 "$VG_PID" uid)" = "$(id -u)" ]
    [ "$(hf 0 "$VG_PID" state)" = S ]
    [ "$(hf 0 "$VG_PID" ppid)" = "$(vg_stat "$VG_PID" ppid)" ]
    [ "$(hf 0 "$VG_PID" start_ticks)" = "$(vg_stat "$VG_PID" starttime)" ]
    [ "$(hf 0 "$VG_PID" comm)" = "$(cat "/proc/$VG_PID/comm")" ]
    [ "$(hf 0 "$VG_PID" command)" = "$(cmdline "$VG_PID")" ]
    [[ $(hf 0 "$VG_PID" command) == "$HELPER --pidfile "*" -- python train.py --lr 3e-4" ]]
    [ "$(hf 0 "$VG_PID" pod_uid)" = null ]
    json_ok ".gpus[0].holders[] | select(.pid == $VG_PID) | .container | . == null or (type == \"string\" and test(\"^[0-9a-f]{64}\$\"))"
    nspid=$(awk '$1 == "NSpid:" { $1 = ""; print }' "/proc/$VG_PID/status" | xargs | tr ' ' ,)
    [ "$(json ".gpus[0].holders[] | select(.pid == $VG_PID) | .nspid | join(\",\")")" = "$nspid" ]
    [ "$(json '.gpus[0].holder_count')" = 1 ]
    json_ok '.gpus[1].holders == [] and .gpus[1].holder_count == 0 and .unmatched_holders == []'
    # An fd-only holder adds nothing to what holders hold.
    json_ok '.gpus[0].memory.held_by_holders == 0'
    # status never prints the environment, not even the variables it reads: the values are
    # only in the command line (vg-helper's --env arguments).
    rest=$(json 'walk(if type == "object" then del(.command) else . end)' -c)
    [[ $rest != *hunter2* && $rest != *VG_SECRET_TOKEN* && $rest != *CUDA_VISIBLE_DEVICES* ]]
    vgt status
    [ "$(grep -c hunter2 <<<"$output")" -eq 1 ]
    [ "$(grep -c CUDA_VISIBLE_DEVICES <<<"$output")" -eq 1 ]
    grep -E "^ +$VG_PID .* --env CUDA_VISIBLE_DEVICES=0 --env VG_SECRET_TOKEN=hunter2" <<<"$output"
}

@test "minor != index: nvidia3 is GPU 0's; nvidia0 is no GPU's: unmatched_holders" {
    scenario
    vg_spawn --open "$DEVDIR/nvidia3"
    on3=$VG_PID
    vg_spawn --open "$DEVDIR/nvidia0"
    on0=$VG_PID
    vg_spawn --open "$DEVDIR/nvidia1"
    on1=$VG_PID
    vg_spawn --open "$DEVDIR/nvidia3" --open "$DEVDIR/nvidia1" --open "$DEVDIR/nvidia3"
    both=$VG_PID
    vg_spawn --open "$DEVDIR/nvidia7" --open "$DEVDIR/nvidia0"
    two_unmatched=$VG_PID
    vg_spawn --open "$DEVDIR/nvidiactl" --open "$DEVDIR/nvidia-uvm"
    ctl_only=$VG_PID
    vgs
    [ "$status" -eq 0 ]
    [ "$(where "$on3")" = gpu0 ]
    [ "$(where "$on0")" = unmatched0 ]
    [ "$(where "$on1")" = gpu1 ]
    [ "$(where "$both")" = "gpu0 gpu1" ] # once per GPU, however many descriptors
    [ "$(where "$two_unmatched")" = "unmatched0 unmatched7" ]
    [ -z "$(where "$ctl_only")" ] # nvidiactl and nvidia-uvm are no GPU
    [ "$(json '.gpus[0].holder_count')" = 2 ]
    [ "$(json '.gpus[1].holder_count')" = 2 ]
    json_ok '[.unmatched_holders[].holder.seen_by] | unique == ["fd"]'
    json_ok '[.unmatched_holders[].holder.memory] | unique == [null]'
    # Sorted by minor, then PID.
    json_ok '[.unmatched_holders[] | [.minor, .holder.pid]] | . == sort'
    [ "$(json '.unmatched_holders | length')" = 3 ]

    vgt status
    [ "$status" -eq 0 ]
    [[ $output == *$'\nDevice nodes no GPU answers for\n  '"$DEVDIR/nvidia0"$'\n'* ]]
    [[ $output == *$'\n  '"$DEVDIR/nvidia7"$'\n'* ]]
    gpu0=$(sed -n '/^GPU 0 /,/^$/p' <<<"$output")
    grep -qE "^ +$on3 " <<<"$gpu0"
    if grep -qE "^ +$on0 " <<<"$gpu0"; then return 1; fi
}

@test "seen by both: a process NVML lists that holds the node; memory and types per holder" {
    vg_spawn --open "$DEVDIR/nvidia3" -- python train.py
    p=$VG_PID
    scenario "proc gpu=0 pid=$p type=compute mem=3GiB" \
        "proc gpu=0 pid=$p type=graphics mem=na" \
        "proc gpu=1 pid=$p type=compute mem=519MiB"
    vgs
    [ "$status" -eq 0 ]
    [ "$(where "$p")" = "gpu0 gpu1" ]
    [ "$(hf 0 "$p" seen_by)" = both ]
    [ "$(hf 0 "$p" memory)" = $((3 * GIB)) ]
    json_ok ".gpus[0].holders[] | select(.pid == $p) | .types == [\"compute\", \"graphics\"]"
    [ "$(hf 0 "$p" in_proc)" = true ]
    [ "$(hf 0 "$p" comm)" = vg-helper ]
    # On GPU 1 the driver lists it, but it holds no /dev/nvidia1 although its descriptors were
    # read: not the process the driver means there (a stale entry of a reused PID), though its
    # /proc entry is read in full and shown for what it is.
    [ "$(hf 1 "$p" seen_by)" = nvml ]
    [ "$(hf 1 "$p" memory)" = $((519 * MIB)) ]
    [ "$(hf 1 "$p" in_proc)" = true ]
    [ "$(hf 1 "$p" stale)" = true ]
    [ "$(hf 0 "$p" stale)" = false ]
    [ "$(hf 1 "$p" state)" = S ]
    [ "$(hf 1 "$p" user)" = "$(id -un)" ]
    [[ $(hf 1 "$p" command) == *" -- python train.py" ]]
    json_ok '.gpus[0].holder_count == 1 and .gpus[1].holder_count == 1'
    [ "$(json '.gpus[0].memory.held_by_holders')" = $((3 * GIB)) ]
    [ "$(json '.gpus[1].memory.held_by_holders')" = $((519 * MIB)) ]

    vgt status
    row=$(sed -n '/^GPU 0 /,/^$/p' <<<"$output" | grep -E "^ +$p ")
    [[ $row =~ ^\ +$p\ +[^\ ]+\ +3\ GiB\ C\+G\ +S\ +both\  ]]
    row=$(sed -n '/^GPU 1 /,/^$/p' <<<"$output" | grep -E "^ +$p ")
    [[ $row =~ ^\ +$p\ +[^\ ]+\ +519\ MiB\ C\ +S\ +nvml\  ]]
}

@test "NVML-only PIDs: one this /proc does not show; unknown memory is null and n/a" {
    scenario "proc gpu=0 pid=4000000 type=compute mem=2GiB" \
        "proc gpu=0 pid=4000001 type=compute mem=na" \
        "proc gpu=1 pid=4000002 type=mps mem=0"
    vgs
    [ "$status" -eq 0 ]
    h='.gpus[0].holders[] | select(.pid == 4000000)'
    json_ok "$h | .seen_by == \"nvml\" and .in_proc == false and .bogus_pid == false"
    json_ok "$h | .memory == $((2 * GIB)) and .types == [\"compute\"] and .mig_device == null"
    for f in user uid state ppid start_ticks comm command container pod_uid nspid; do
        json_ok "$h | .$f == null" || { echo "$f is not null"; return 1; }
    done
    json_ok '.gpus[0].holders[] | select(.pid == 4000001) | .memory == null and .seen_by == "nvml"'
    # 0 is a figure the driver gave: 0, not null.
    json_ok '.gpus[1].holders[] | select(.pid == 4000002) | .memory == 0 and .types == ["mps"]'
    json_ok '.gpus[0].memory.unexplained_is_upper_bound == true'
    json_ok '.gpus[1].memory.unexplained_is_upper_bound == false'
    [ "$(json '.gpus[0].memory.held_by_holders')" = $((2 * GIB)) ]
    json_ok '.unmatched_holders == []'

    vgt status
    [[ $output =~ \ 4000000\ +\?\ +2\ GiB\ C\ +\?\ +nvml\ +-\ +\(not\ in\ this\ /proc\) ]]
    [[ $output =~ \ 4000001\ +\?\ +n/a\ C\ +\?\ +nvml\  ]]
    [[ $output =~ \ 4000002\ +\?\ +0\ B\ M\ +\?\ +nvml\  ]]
}

@test "bogus PIDs 0 and 4294967295: flagged, never looked up, sorted first and last" {
    vg_spawn --open "$DEVDIR/nvidia3"
    scenario "proc gpu=0 pid=4294967295 type=compute mem=1MiB" \
        "proc gpu=0 pid=0 type=graphics mem=2MiB" \
        "proc gpu=0 pid=4000000 type=compute mem=4MiB"
    vgs
    [ "$status" -eq 0 ]
    [ "$(json '[.gpus[0].holders[].pid] | join(",")')" = "0,$VG_PID,4000000,4294967295" ]
    for p in 0 4294967295; do
        h=".gpus[0].holders[] | select(.pid == $p)"
        json_ok "$h | .bogus_pid == true and .in_proc == false and .seen_by == \"nvml\""
        json_ok "$h | .user == null and .state == null and .comm == null and .command == null"
    done
    [ "$(hf 0 0 memory)" = $((2 * MIB)) ]
    [ "$(hf 0 4294967295 memory)" = "$MIB" ]
    [ "$(hf 0 4000000 bogus_pid)" = false ]
    [ "$(hf 0 "$VG_PID" bogus_pid)" = false ]
    [ "$(json '.gpus[0].memory.held_by_holders')" = $((7 * MIB)) ]

    vgt status
    [[ $output =~ \ 0\ +\?\ +2\ MiB\ G\ +\?\ +nvml\ +-\ +\(bogus\ PID\ from\ the\ driver\) ]]
    [[ $output =~ \ 4294967295\ +\?\ +1\ MiB\ C\ +\?\ +nvml\ +-\ +\(bogus\ PID\ from\ the\ driver\) ]]
}

@test "workers inheriting the node are holders too, each with its comm and parent" {
    vg_spawn --open "$DEVDIR/nvidia3" --children 2 --child-comm pt_data_worker -- python train.py
    scenario "proc gpu=0 pid=$VG_PID type=compute mem=10GiB"
    vgs
    [ "$status" -eq 0 ]
    [ "$(json '.gpus[0].holder_count')" = 3 ]
    [ "$(hf 0 "$VG_PID" seen_by)" = both ]
    for c in "${VG_CHILD_PIDS[@]}"; do
        [ "$(where "$c")" = gpu0 ]
        [ "$(hf 0 "$c" seen_by)" = fd ]
        [ "$(hf 0 "$c" memory)" = null ]
        [ "$(hf 0 "$c" comm)" = pt_data_worker ]
        [ "$(hf 0 "$c" ppid)" = "$VG_PID" ]
        [ "$(hf 0 "$c" state)" = S ]
    done
}

@test "holders by mapping only (descriptors closed): seen_by both with a context, map without" {
    # CUDA maps /dev/nvidiaN and nvidiactl; the kernel keeps a mapped file open, and mappings
    # survive fork, so a worker that closed what it inherited still holds them (lsof: "mem").
    vg_spawn --map "$DEVDIR/nvidia1" --map "$DEVDIR/nvidiactl" --children 1 -- python train.py
    c=${VG_CHILD_PIDS[0]}
    for p in "$VG_PID" "$c"; do
        [ -z "$(find "/proc/$p/fd/" -lname "$DEVDIR/*")" ]
        grep -q "$DEVDIR/nvidia1" "/proc/$p/maps"
    done
    scenario "proc gpu=1 pid=$VG_PID type=compute mem=2GiB"
    vgs
    [ "$status" -eq 0 ]
    [ "$(where "$VG_PID")" = gpu1 ]
    [ "$(where "$c")" = gpu1 ]
    [ "$(hf 1 "$VG_PID" seen_by)" = both ]
    [ "$(hf 1 "$VG_PID" memory)" = $((2 * GIB)) ]
    [ "$(hf 1 "$c" seen_by)" = map ]
    [ "$(hf 1 "$c" memory)" = null ]
    [ "$(hf 1 "$c" ppid)" = "$VG_PID" ]
    json_ok ".gpus[1].holders[] | select(.pid == $c) | .device_nodes | sort == ([\"$DEVDIR/nvidia1\", \"$DEVDIR/nvidiactl\"] | sort)"
    vgt status
    [ "$status" -eq 0 ]
    grep -E "^ +$c .* map +" <<<"$output"
}

@test "an orphaned worker: reparented, its session leader gone, still holding the node" {
    vg_spawn --orphan --setsid --open "$DEVDIR/nvidia1" --children 1 -- python train.py
    scenario
    vgs
    [ "$status" -eq 0 ]
    [ "$(where "$VG_PID")" = gpu1 ]
    [ "$(where "${VG_CHILD_PIDS[0]}")" = gpu1 ]
    [ -z "$(where "$VG_PARENT_PID")" ]
    ppid=$(hf 1 "$VG_PID" ppid)
    [ "$ppid" = "$(vg_stat "$VG_PID" ppid)" ]
    [ "$ppid" != "$VG_PARENT_PID" ]
    [ "$(hf 1 "$VG_PID" seen_by)" = fd ]
    [ "$(hf 1 "$VG_PID" state)" = S ]
    [ "$(hf 1 "${VG_CHILD_PIDS[0]}" ppid)" = "$VG_PID" ]
}

@test "a zombie the driver still lists: state Z, shown red on a colour screen" {
    vg_spawn --zombie --open "$DEVDIR/nvidia3"
    z=${VG_ZOMBIE_PIDS[0]}
    [ "$(vg_stat "$z" state)" = Z ]
    scenario "proc gpu=0 pid=$z type=compute mem=1GiB"
    vgs
    [ "$status" -eq 0 ]
    [ "$(where "$z")" = gpu0 ] # a zombie has no descriptors: listed by NVML only
    [ "$(hf 0 "$z" seen_by)" = nvml ]
    [ "$(hf 0 "$z" in_proc)" = true ]
    [ "$(hf 0 "$z" state)" = Z ]
    [ "$(hf 0 "$z" ppid)" = "$VG_PID" ]
    [ "$(hf 0 "$z" memory)" = "$GIB" ]
    [ "$(hf 0 "$VG_PID" state)" = S ]
    vgt --color=never status
    [[ $output =~ \ $z\ +[^\ ]+\ +1\ GiB\ C\ +Z\ +nvml\  ]]
    vgt --color=always status
    row=$(grep -E "^ +$z " <<<"$output")
    [[ $row == *$'\e[31mZ\e[0m'* ]]
}

@test "a zombie leader whose live thread holds the node: found through its threads, state Z" {
    vg_spawn --zombie-leader --open "$DEVDIR/nvidia3"
    [ "$(vg_stat "$VG_PID" state)" = Z ]
    scenario
    vgs
    [ "$status" -eq 0 ]
    [ "$(where "$VG_PID")" = gpu0 ]
    [ "$(hf 0 "$VG_PID" seen_by)" = fd ]
    [ "$(hf 0 "$VG_PID" state)" = Z ]
    [ "$(hf 0 "$VG_PID" in_proc)" = true ]
    # Listed by the driver as well: both.
    scenario "proc gpu=0 pid=$VG_PID type=compute mem=6GiB"
    vgs
    [ "$(hf 0 "$VG_PID" seen_by)" = both ]
    [ "$(hf 0 "$VG_PID" memory)" = $((6 * GIB)) ]
}

@test "comm with spaces, parentheses and a newline is read whole" {
    vg_spawn --open "$DEVDIR/nvidia3" --comm $'a) (b c\n) Z 1'
    scenario
    vgs
    [ "$status" -eq 0 ]
    [ "$(json ".gpus[0].holders[] | select(.pid == $VG_PID) | .comm" -j)" = $'a) (b c\n) Z 1' ]
    # The fields after comm are not fooled by it.
    [ "$(hf 0 "$VG_PID" state)" = S ]
    [ "$(hf 0 "$VG_PID" ppid)" = "$(vg_stat "$VG_PID" ppid)" ]
    [ "$(hf 0 "$VG_PID" start_ticks)" = "$(vg_stat "$VG_PID" starttime)" ]
}

@test "another user's process: user and uid" {
    if [[ $(id -u) != 0 ]]; then skip "needs root"; fi
    vg_spawn --uid 65534 --open "$DEVDIR/nvidia3" --children 1
    scenario
    vgs
    [ "$status" -eq 0 ]
    name=$(getent passwd 65534 | cut -d: -f1)
    for p in "$VG_PID" "${VG_CHILD_PIDS[0]}"; do
        [ "$(hf 0 "$p" uid)" = 65534 ]
        [ "$(hf 0 "$p" user)" = "${name:-65534}" ]
        [ "$(hf 0 "$p" seen_by)" = fd ]
    done
}

@test "MIG devices: their own memory and holders; the parent keeps only what no MIG device lists" {
    vg_spawn --open "$DEVDIR/nvidia3" -- python mig_job.py
    p=$VG_PID
    vg_scenario <<EOF
driver 550.54.15
gpu index=0 uuid=GPU-8a1b2c3d-0000-0000-0000-000000000000 name="NVIDIA A100-SXM4-80GB" minor=3 bus=00000000:17:00.0 total=80GiB reserved=512MiB util=12 cc=8.0 mig=1
mig parent=0 index=0 uuid=MIG-11111111-0000-0000-0000-000000000000 name="NVIDIA A100-SXM4-80GB MIG 1g.10gb" gi=7 ci=0 total=10GiB
mig parent=0 index=1 uuid=MIG-22222222-0000-0000-0000-000000000000 name="NVIDIA A100-SXM4-80GB MIG 3g.40gb" gi=1 ci=2 total=40GiB used=5GiB
gpu index=1 uuid=GPU-1f0e9d8c-0000-0000-0000-000000000000 name="NVIDIA A100-SXM4-80GB" minor=1 bus=00000000:2A:00.0 total=80GiB reserved=512MiB util=0 cc=8.0 mig=0
proc mig=0/0 pid=$p type=compute mem=1GiB
proc mig=0/1 pid=4000000 type=compute mem=2GiB
proc mig=0/1 pid=4000001 type=compute mem=na
proc gpu=0 pid=4000002 type=compute mem=512MiB
EOF
    vgs
    [ "$status" -eq 0 ]
    json_ok '.gpus[0].mig_mode == {"current": true, "pending": true}'
    [ "$(json '.gpus[0].mig_devices | length')" = 2 ]
    m0='.gpus[0].mig_devices[0]'
    m1='.gpus[0].mig_devices[1]'
    [ "$(json "$m0.index")" = 0 ]
    [ "$(json "$m0.uuid")" = MIG-11111111-0000-0000-0000-000000000000 ]
    [ "$(json "$m0.name")" = "NVIDIA A100-SXM4-80GB MIG 1g.10gb" ]
    [ "$(json "$m0.gpu_instance")" = 7 ]
    [ "$(json "$m0.compute_instance")" = 0 ]
    [ "$(json "$m0.memory.total")" = $((10 * GIB)) ]
    [ "$(json "$m0.memory.used")" = "$GIB" ]
    [ "$(json "$m0.memory.free")" = $((9 * GIB)) ]
    [ "$(json "$m0.memory.reserved")" = 0 ]
    json_ok "$m0.errors == []"
    [ "$(json "$m1.gpu_instance")" = 1 ]
    [ "$(json "$m1.compute_instance")" = 2 ]
    [ "$(json "$m1.memory.used")" = $((5 * GIB)) ]
    [ "$(json "$m1.memory.free")" = $((35 * GIB)) ]
    # The helper holds the parent's node and is on MIG device 0: both, under that device.
    [ "$(where "$p")" = gpu0/mig0 ]
    h="$m0.holders[] | select(.pid == $p)"
    json_ok "$h | .seen_by == \"both\" and .mig_device == 0 and .memory == $GIB and .in_proc == true"
    [ "$(json "[$m1.holders[].pid] | join(\",\")")" = 4000000,4000001 ]
    json_ok "$m1.holders[] | select(.pid == 4000000) | .mig_device == 1 and .memory == $((2 * GIB))"
    json_ok "$m1.holders[] | select(.pid == 4000001) | .mig_device == 1 and .memory == null"
    # The parent's own list names every one of them; only the PID no MIG device reported stays.
    [ "$(json '[.gpus[0].holders[].pid] | join(",")')" = 4000002 ]
    json_ok '.gpus[0].holders[0].mig_device == null'
    [ "$(json '.gpus[0].holder_count')" = 4 ]
    [ "$(json '.gpus[0].memory.held_by_holders')" = $((3 * GIB + 512 * MIB)) ]
    json_ok '.gpus[0].memory.unexplained_is_upper_bound == true'
    json_ok '.gpus[1].mig_devices == [] and .gpus[1].mig_mode.current == false'

    vgt status
    [ "$status" -eq 0 ]
    [[ $output == *$'\n  MIG 0  NVIDIA A100-SXM4-80GB MIG 1g.10gb  MIG-11111111\n'* ]]
    [[ $output == *$'\n    memory 1 GiB of 10 GiB used, 9 GiB free, 0 B reserved\n'* ]]
    mig0=$(sed -n '/^  MIG 0 /,/^  MIG 1 /p' <<<"$output")
    grep -qE "^ +$p +[^ ]+ +1 GiB C +S +both " <<<"$mig0"
}
