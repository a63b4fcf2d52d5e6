#!/usr/bin/env bats
# t0205-doctor-foreign: memory the processes this /proc shows cannot explain: foreign-pid (NVML
# reports a PID /proc does not show: another PID namespace, or gone) and unattributed (used memory
# beyond the holders and the driver's reservation), with their thresholds and near misses.

load lib
load diag

setup() {
    DEVDIR=$(vg_fake_dev)
}

# Above PID_MAX_LIMIT (4194304): no /proc anywhere can show it.
FOREIGN=4194400

# The namespace evidence depends on where the tests run: read our own NSpid depth.
ns_depth() {
    awk '$1 == "NSpid:" { print NF - 1 }' /proc/self/status
}

# Whether /proc is the initial PID namespace's, from the same fact vramguard reads: the inode of
# the namespace (the kernel's PROC_PID_INIT_INO is 4026531836). initial, nested or unknown.
ns_kind() {
    local l
    l=$(readlink /proc/1/ns/pid 2>/dev/null) || l=
    if [ -n "$l" ]; then
        [ "$l" = "pid:[4026531836]" ] && echo initial || echo nested
        return
    fi
    l=$(readlink /proc/self/ns/pid 2>/dev/null) || l=
    if [ "$l" = "pid:[4026531836]" ]; then
        echo initial
    elif [ -n "$l" ] && [ "$(ns_depth)" = 1 ]; then
        echo nested
    else
        echo unknown
    fi
}

# -------------------------------------------------------------------------------- foreign-pid

@test "foreign-pid: a PID no /proc shows, on its GPU, with its memory" {
    homogeneous_host "proc gpu=2 pid=$FOREIGN type=compute mem=2GiB"
    vgd --json doctor
    show
    [ "$status" -eq 1 ]
    # Its memory is accounted for by the driver's list: not also unattributed.
    [ "$(rules_fired)" = foreign-pid ]
    finding_is foreign-pid '[2]' "[$FOREIGN]"
    json_ok '.findings[0] | .severity == "warning" and .memory == 2147483648'
    json_ok '.findings[0].title == "the driver reports PID \($p) holding 2 GiB, but /proc shows no such process"' \
        --arg p "$FOREIGN"
    # the procfs's namespace decides first: the initial one shows every process, whatever our
    # own depth below it
    if [ "$(ns_kind)" != initial ] && [ "$(ns_depth)" -gt 1 ]; then
        json_ok '.findings[0].evidence | any(startswith("vramguard runs inside a PID namespace"))'
    else
        case $(ns_kind) in
        initial)
            json_ok '.findings[0].evidence | any(. == "/proc is the initial PID namespace'"'"'s, in which every process has a PID: the process has exited while the driver still holds its memory")'
            json_ok '.findings[0].fix | any(contains("GPU reset"))'
            ;;
        nested)
            json_ok '.findings[0].evidence | any(startswith("vramguard runs in a PID namespace of its own"))'
            json_ok '.findings[0].fix | any(contains("--proc /host/proc"))'
            ;;
        *)
            json_ok '.findings[0].evidence | any(contains("another container") and contains("has exited while the driver still holds its memory"))'
            json_ok '.findings[0].fix | any(contains("--proc"))'
            ;;
        esac
        json_ok '[.findings[0].evidence[] | select(contains("no nested PID namespace"))] == []'
    fi
}

@test "foreign-pid: in a PID namespace with its own /proc, vramguard says it runs in one" {
    # NSpid has one level there, as on the host: only the namespace's inode tells them apart
    homogeneous_host "proc gpu=2 pid=$FOREIGN type=compute mem=2GiB"
    vgd_alone --json doctor
    show
    [ "$status" -eq 1 ]
    finding_is foreign-pid '[2]' "[$FOREIGN]"
    json_ok '.findings[0].evidence | any(startswith("vramguard runs in a PID namespace of its own, with its own /proc"))'
    json_ok '.findings[0].fix | any(contains("--proc /host/proc"))'
    json_ok '[.findings[0].evidence[], .findings[0].fix[] | select(test("no nested|exited while|reset"))] == []'
    vgd_alone --json status
    json_ok '.host.pid_namespace == "nested" and .host.pid_namespace_depth == 1'
}

@test "foreign-pid: below the procfs's PID namespace, the procfs's namespace decides" {
    [[ $(id -u) -eq 0 ]] || skip "needs root for a PID namespace"
    command -v unshare >/dev/null || skip "unshare (util-linux) is not installed"
    homogeneous_host "proc gpu=2 pid=$FOREIGN type=compute mem=2GiB"
    # a PID namespace of its own but this /proc: NSpid has two levels there
    run --separate-stderr unshare --pid --fork env -u CUDA_VISIBLE_DEVICES -u CUDA_DEVICE_ORDER \
        "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" --json doctor
    show
    finding_is foreign-pid '[2]' "[$FOREIGN]"
    if [ "$(ns_kind)" = initial ]; then
        # the initial namespace's /proc shows every process: gone, whatever our own depth
        json_ok '.findings[0].evidence | any(startswith("/proc is the initial PID namespace'"'"'s"))'
        json_ok '[.findings[0].evidence[] | select(startswith("vramguard runs inside"))] == []'
    else
        json_ok '.findings[0].evidence | any(startswith("vramguard runs inside a PID namespace (NSpid depth"))'
    fi
}

@test "foreign-pid: one finding per PID, naming every GPU it holds" {
    homogeneous_host "proc gpu=0 pid=$FOREIGN type=compute mem=1GiB" \
        "proc gpu=3 pid=$FOREIGN type=graphics mem=3GiB" \
        "proc gpu=1 pid=$((FOREIGN + 1)) type=compute mem=na"
    vgd --json doctor
    show
    [ "$status" -eq 1 ]
    [ "$(nfind foreign-pid)" -eq 2 ]
    finding_is foreign-pid '[0,3]' "[$FOREIGN]"
    json_ok '.findings[] | select(.pids == [$p]) | .memory == 4294967296' --argjson p "$FOREIGN"
    finding_is foreign-pid '[1]' "[$((FOREIGN + 1))]"
}

@test "foreign-pid: a process that exited while the driver still lists it" {
    vg_spawn --open "$(dev 1)"
    P=$VG_PID
    kill -KILL "$P"
    wait_for "vg_gone $P"
    wait_for "[ ! -e /proc/$P ]"
    homogeneous_host "proc gpu=1 pid=$P type=compute mem=5GiB"
    vgd --json doctor
    show
    [ "$status" -eq 1 ]
    finding_is foreign-pid '[1]' "[$P]"
}

@test "foreign-pid: --proc naming another procfs says so; /proc spelled differently does not" {
    homogeneous_host "proc gpu=0 pid=$FOREIGN type=compute mem=1GiB"
    vgd --proc /proc/self/.. --json doctor
    show
    finding_is foreign-pid '[0]' "[$FOREIGN]"
    # /proc/self/.. is this /proc: its namespace is read as /proc's is, and only an unknown one
    # leaves "another procfs"
    case $(ns_depth):$(ns_kind) in
    *:initial)
        json_ok '.findings[0].evidence | any(startswith("/proc/self/.. is the initial PID namespace'"'"'s"))' ;;
    1:nested)
        json_ok '.findings[0].evidence | any(startswith("/proc/self/.. is the procfs of a PID namespace other than the initial one"))' ;;
    1:unknown)
        json_ok '.findings[0].evidence | any(. == "/proc/self/.. is another procfs: the process may live in a PID namespace it does not cover")' ;;
    esac
    if [ "$(ns_depth)" -le 1 ]; then
        for p in /proc/ //proc /proc//; do
            vgd --proc "$p" --json doctor
            if json_ok '.findings[0].evidence | any(contains("another procfs"))'; then
                echo "--proc $p is /proc, not another procfs"
                show
                return 1
            fi
        done
    fi
}

@test "foreign-pid near miss: the driver's bookkeeping PIDs 0 and 4294967295, and live processes" {
    vg_spawn --open "$(dev 0)"
    P=$VG_PID
    homogeneous_host "proc gpu=0 pid=$P type=compute mem=20GiB" \
        "proc gpu=1 pid=0 type=compute mem=1MiB" \
        "proc gpu=1 pid=4294967295 type=compute mem=1MiB"
    vgd --json doctor
    show
    [ "$status" -eq 0 ]
    json_ok '.findings == []'
}

# ------------------------------------------------------------------------------- unattributed

# gpu_used G SIZE: rewrites the scenario's GPU G line with used=SIZE.
gpu_used() {
    vg_scenario <<<"$(sed "s/^\(gpu index=$1 .*\) used=[^ ]*/\1 used=$2/" "$FAKE_NVML_SCENARIO")"
    grep -q "^gpu index=$1 .* used=$2 " "$FAKE_NVML_SCENARIO"
}

@test "unattributed: memory on an idle GPU nobody holds; a reset is possible, never run" {
    homogeneous_host
    gpu_used 1 6GiB
    # alone in a PID namespace, so that nothing hides a holder from it
    vgd_alone --json doctor
    show
    [ "$status" -eq 1 ]
    [ "$(rules_fired)" = unattributed ]
    finding_is unattributed '[1]' '[]'
    json_ok '.findings[0] | .severity == "warning" and .memory == 6442450944'
    json_ok '.findings[0].title | startswith("6 GiB of memory on GPU 1 ") and endswith("is held by no process the driver lists")'
    json_ok '.findings[0].evidence | any(. == "used 6 GiB, of which holders account for 0 B; the driver'"'"'s reservation (512 MiB) is counted apart")'
    json_ok '.findings[0].evidence | any(. == "no process holds this GPU: a reset is possible now")'
    json_ok '.findings[0].fix[0] | startswith("as root, with nothing using the GPU: nvidia-smi --gpu-reset -i \($u) ")' --arg u "$U1"
    vgd_alone doctor
    [[ $output == *"GPU 1  "*"  unexplained: 6 GiB"*"why:  unattributed"* ]]
    # Seen from this host's /proc, where some process may hide its open files even from root:
    # no reset is offered then, and the evidence says why.
    vg_unread_stable --got vg_unread_json vgd --json doctor
    if [ "$hidden" -gt 0 ]; then
        json_ok '.findings[0].evidence | all(. != "no process holds this GPU: a reset is possible now")'
        json_ok '.findings[0].evidence | any(contains("could not be read: any of them may hold it"))'
        json_ok '.findings[0].fix | all(contains("--gpu-reset") | not)'
    fi
}

@test "unattributed: beyond a holder's memory; a reset must wait for it" {
    vg_spawn --open "$(dev 2)"
    P=$VG_PID
    homogeneous_host "proc gpu=2 pid=$P type=compute mem=2GiB"
    gpu_used 2 10GiB
    vgd --json doctor
    show
    [ "$status" -eq 1 ]
    [ "$(rules_fired)" = unattributed ]
    finding_is unattributed '[2]' '[]'
    json_ok '.findings[0].memory == 8589934592'
    json_ok '.findings[0].evidence | any(. == "1 process still holds the GPU, so a reset is not possible yet")'
    json_ok '.findings[0].fix | any(. == "once nothing holds the GPU: nvidia-smi --gpu-reset -i \($u)")' --arg u "$U2"
}

@test "unattributed: a live process's forked worker holding only the device node is not blamed" {
    vg_spawn --open "$(dev 3)" --children 1
    P=$VG_PID C=${VG_CHILD_PIDS[0]}
    homogeneous_host "proc gpu=3 pid=$P type=compute mem=1GiB"
    gpu_used 3 9GiB
    vgd --json doctor
    show
    [ "$status" -eq 1 ]
    [ "$(rules_fired)" = unattributed ]
    finding_is unattributed '[3]' '[]'
    json_ok '.findings[0].evidence | any(startswith("PID \($c) ") and contains("has the device node open as a process of a live job (its parent PID \($p), which started it, runs)") and endswith("so it is not blamed"))' \
        --arg c "$C" --arg p "$P"
    json_ok '.findings[0].evidence | any(. == "2 processes still hold the GPU, so a reset is not possible yet")'
    json_ok '.findings[0].evidence | any(. == "no process that holds its node explains it: do not stop them for this")'
    json_ok '.findings[0].fix | all(startswith("stop") | not)'
}

@test "unattributed: the ranks of a live DDP job hold every visible GPU's node; a dead job's memory on GPU 1 is not pinned on them" {
    # The launcher opened every visible GPU's node as CUDA does; its ranks inherit them and the
    # driver lists a context of each on its own GPU. GPU 1 carries 12 GiB a job that ended left.
    vg_spawn --open "$(dev 0)" --open "$(dev 1)" --open "$(dev 2)" --env LOCAL_RANK=0 --children 2 \
        -- python train.py
    L=$VG_PID R0=${VG_CHILD_PIDS[0]} R1=${VG_CHILD_PIDS[1]}
    homogeneous_host "proc gpu=0 pid=$R0 type=compute mem=20GiB sm=90" \
        "proc gpu=2 pid=$R1 type=compute mem=20GiB sm=90"
    gpu_used 1 12GiB
    vgd --json doctor
    show
    finding_is unattributed '[1]' '[]'
    json_ok '[.findings[] | select(.rule == "unattributed") | .evidence[] | select(contains("so it is not blamed"))] | length == 3'
    json_ok '.findings[] | select(.rule == "unattributed") | .evidence | any(startswith("PID \($r) ") and contains("its context is on GPU 0"))' --arg r "$R0"
    json_ok '.findings[] | select(.rule == "unattributed") | .fix | all(startswith("stop") | not)'
    json_ok '.findings[] | select(.rule == "unattributed") | .fix | any(contains("run vramguard on the host"))'
}

@test "unattributed: a monitor daemon that reads every GPU through NVML is not blamed; a daemon mapping CUDA may be" {
    LIB=$(vg_fake_lib libnvidia-ml.so.1 libcuda.so.1)
    vg_spawn --orphan --setsid --open "$(dev 0)" --open "$(dev 1)" --map "$LIB/libnvidia-ml.so.1" \
        --comm gpu-exporter -- gpu-exporter --all
    M=$VG_ORPHAN_PID
    vg_spawn --orphan --setsid --open "$(dev 1)" --map "$LIB/libcuda.so.1" --comm cuda-daemon \
        -- cuda-daemon
    D=$VG_ORPHAN_PID
    homogeneous_host
    gpu_used 1 6GiB
    vgd --json doctor
    show
    finding_is unattributed '[1]' "[$D]"
    json_ok '.findings[] | select(.rule == "unattributed") | .evidence | any(startswith("PID \($m) ") and contains("maps NVML and not CUDA"))' --arg m "$M"
    # Alone in its session with nodes and no context: a daemon's shape, but its job's leader
    # is gone and it maps CUDA: a possible leftover (medium), and so the GPU's likely holder.
    json_ok '.findings[] | select(.rule == "unattributed") | .evidence | any(startswith("PID \($d) ") and endswith("may be left over from a job that ended (orphan-holder, medium confidence): the likely holder"))' --arg d "$D"
    json_ok '.findings[] | select(.rule == "unattributed") | .fix[0] | startswith("stop PID \($d) (")' --arg d "$D"
}

@test "unattributed: a dead job's worker adopted by a live subreaper, holding only the node, is the likely holder" {
    vg_spawn --reaper --orphan --pgrp --comm pt_data_worker --open "$(dev 1)" -- python train.py
    O=$VG_PID
    [ "$(vg_stat "$O" ppid)" != 1 ] # its parent lives: the subreaper that adopted it
    homogeneous_host
    gpu_used 1 6GiB
    vgd --json doctor
    show
    [ "$status" -eq 2 ]
    finding_is unattributed '[1]' "[$O]"
    json_ok '.findings[] | select(.rule == "unattributed") | .evidence | any(startswith("PID \($o) ") and endswith("holds the device node without a context the driver lists and is left over from a job that ended (orphan-holder, high confidence): the likely holder"))' \
        --arg o "$O"
    json_ok '.findings[] | select(.rule == "unattributed") | .fix[0] | startswith("stop PID \($o) (holding only the device node")' --arg o "$O"
}

@test "unattributed: 'up to' when a listed process reports no figure" {
    vg_spawn --open "$(dev 0)"
    P=$VG_PID
    homogeneous_host "proc gpu=0 pid=$P type=compute mem=na"
    gpu_used 0 4GiB
    vgd --json doctor
    show
    finding_is unattributed '[0]' '[]'
    json_ok '.findings[0].title | startswith("up to 4 GiB of memory on GPU 0")'
    json_ok '.findings[0].evidence | any(. == "1 listed process reports no figure, so part of this may be theirs")'
}

@test "unattributed: more than --unattributed-min (256 MiB by default) is a finding, not up to it" {
    vg_spawn --open "$(dev 1)"
    P=$VG_PID
    homogeneous_host "proc gpu=1 pid=$P type=compute mem=2GiB"
    gpu_used 1 2304MiB # 256 MiB beyond the holder
    vgd --json doctor
    show
    [ "$status" -eq 0 ]
    json_ok '.findings == []'
    gpu_used 1 2305MiB
    vgd --json doctor
    show
    [ "$status" -eq 1 ]
    finding_is unattributed '[1]' '[]'
    json_ok '.findings[0].memory == 269484032'
    vgd --json doctor --unattributed-min 1GiB
    [ "$status" -eq 0 ]
    json_ok '.findings == []'
    vgd --json doctor --unattributed-min 0
    finding_is unattributed '[1]' '[]'
}

@test "unattributed: a GPU whose UUID is unknown is named by its PCI bus id, then its index" {
    vg_scenario <<'EOF'
gpu index=0 name="NVIDIA A100-SXM4-80GB" minor=0 bus=00000000:07:00.0 total=80GiB reserved=512MiB used=6GiB
gpu index=1 name="NVIDIA A100-SXM4-80GB" minor=1 total=80GiB reserved=512MiB used=6GiB
EOF
    vgd_alone --json doctor
    show
    [ "$status" -eq 1 ]
    [ "$(nfind unattributed)" -eq 2 ]
    json_ok '.findings[0] | .gpus == [0] and .gpu_uuids == [null]'
    json_ok '.findings[0].fix[0] | contains("nvidia-smi --gpu-reset -i 00000000:07:00.0 ")'
    json_ok '.findings[1].fix[0] | contains("nvidia-smi --gpu-reset -i 1 ")'
}

@test "unattributed near miss: the v1 memory call counts the driver's reservation as used" {
    VG_NVML=$FAKE_LEGACY
    vg_spawn --open "$(dev 0)"
    P=$VG_PID
    homogeneous_host "proc gpu=0 pid=$P type=compute mem=20GiB"
    vgd --json doctor
    show
    [ "$status" -eq 0 ]
    json_ok '.findings == []'
    vgd --json status
    json_ok '.gpus[0].memory.unexplained == 536870912 and .gpus[0].memory.unexplained_includes_reserved'
    # Well beyond the reservation it is a finding again, and says how this driver counts.
    gpu_used 0 22GiB
    vgd --json doctor
    show
    [ "$status" -eq 1 ]
    finding_is unattributed '[0]' '[]'
    json_ok '.findings[0].evidence | any(endswith("this driver counts its own reservation as used"))'
}

@test "unattributed near miss: a GPU whose memory figures are unknown" {
    homogeneous_host
    gpu_used 2 na
    vgd --json doctor
    show
    [ "$status" -eq 0 ]
    json_ok '.findings == []'
}
