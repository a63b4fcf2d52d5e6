#!/usr/bin/env bats
# t0106-status-kernel-scan: the in-kernel holder scan (--scan=kernel, a BPF task_file iterator;
# issue 16) finds exactly the holders the /proc scan finds, and --scan=auto reads /proc, and says
# why under --verbose, on a host of fewer than 1,000 processes or where the program cannot load.
#
# The staged host: real character devices held through O_PATH (mknod; no driver answers an
# open: a GPU, nvidiactl, nvidia-uvm, an nvidia-caps node), which both scans report as path
# only, never as holders, and of plain stand-ins
# (matched by inode), workers that inherit them, a thread-group leader that exited while a
# thread holds the table (--zombie-leader), a thread with a descriptor table of its own
# (--thread-open), holders in a PID namespace of their own, and churn
# (processes that start, open a node and exit while the scans run), and a process and its worker
# holding nodes only by memory mapping (the iterator sees descriptors; their maps are read from
# /proc in both modes). Both scans run on it again
# and again, and the holders among the staged processes must be identical: pid, GPU, comm and
# nodes (the churned ones come and go between two runs, so they are left out of the compare).
#
# Real nodes use major 4000 declared as the NVIDIA major in a /proc/devices bound over the real
# one in a private mount namespace, as t0105 explains: a held node of major 195 would show up
# in the holder lists of every other test running in parallel.
#
# The differential tests need root, a kernel with BTF and libbpf.so.1 (CI has them); they skip,
# saying why, where the kernel scan cannot run at all.

load lib

bats_require_minimum_version 1.5.0

setup() {
    [[ $(id -u) -eq 0 ]] || skip "needs root (mknod, mount namespaces, BPF)"
    command -v unshare >/dev/null || skip "unshare (util-linux) is not installed"
    vg_require_jq
    TMP=$(vg_tmpdir)
    DEVDIR=$(vg_fake_dev "$TMP" 4)
    printf 'Character devices:\n  1 mem\n4000 nvidia-frontend\n4001 nvidia-uvm\n4002 nvidia-caps\n\nBlock devices:\n' \
        >"$TMP/devices"
    vg_scenario_host h100x4
}

teardown() {
    vg_cleanup
    if [[ -n ${PUB:-} && $PUB == /tmp/vg-kscan.* ]]; then rm -rf -- "$PUB"; fi
}

# vgp ARGS...: vramguard ARGS with the fake driver and --dev $DEVDIR, in a private mount
# namespace whose /proc/devices makes 4000 the NVIDIA major (see the header).
vgp() {
    run --separate-stderr vg_with_devices "$TMP/devices" "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" "$@"
}

# need_kernel_scan: skip when the kernel scan cannot run here at all (no BTF, no libbpf, a
# build without it), with its own reason.
need_kernel_scan() {
    vgp --json --scan=kernel status
    if [[ $status -ne 0 ]]; then
        skip "the kernel scan cannot run here: $stderr"
    fi
}

# holders: one sorted line per holder in the JSON document in $output: pid, where it is
# listed, comm, descriptor count and nodes.
holders() {
    json '[(.gpus[] | .index as $g | .holders[] | select(.seen_by != "nvml")
              | "\(.pid) gpu\($g) \(.comm) \(.device_nodes | join(","))"),
           (.unmatched_holders[] | "\(.holder.pid) unmatched\(.minor) \(.holder.comm) \(.holder.device_nodes | join(","))"),
           (.path_only[] | . as $p | .gpus[] | "\($p.pid) path-gpu\(.) \($p.comm) \($p.device_nodes | join(","))")]
          | sort | .[]'
}

# staged: the holders of the staged processes only (comm ks-*), not the churn's.
staged() {
    holders | awk '$3 ~ /^ks-/'
}

stage_host() {
    REAL=$TMP/real
    mkdir -p "$REAL"
    mknod "$REAL/nvidia0" c 4000 0
    mknod "$REAL/nvidiactl" c 4000 255
    mknod "$REAL/nvidia-uvm" c 4001 0
    mknod "$REAL/nvidia2" c 4000 2
    mkdir -p "$REAL/nvidia-caps"
    mknod "$REAL/nvidia-caps/nvidia-cap1" c 4002 1
    mknod "$TMP/mygpu" c 4000 1 # a container's own node: another inode, the same numbers
    vg_spawn --open-path "$REAL/nvidia0" --open-path "$REAL/nvidiactl" --open-path "$REAL/nvidia-uvm" \
        --open-path "$REAL/nvidia-caps/nvidia-cap1" --comm ks-real >/dev/null
    vg_spawn --open-path "$TMP/mygpu" --children 3 --comm ks-mknod >/dev/null
    vg_spawn --open "$DEVDIR/nvidia3" --open "$DEVDIR/nvidiactl" --children 2 --comm ks-plain >/dev/null
    vg_spawn --open-path "$REAL/nvidia2" --zombie-leader --comm ks-zleader >/dev/null
    vg_spawn --open "$DEVDIR/nvidia1" --comm ks-other --zombie >/dev/null
    vg_spawn --open /dev/null --comm ks-none >/dev/null
    # a node held only in a thread's own descriptor table (unshare(CLONE_FILES)): fd/ (the
    # leader's) shows only GPU 3's node, task/TID/fd GPU 1's (issue 27)
    vg_spawn --open "$DEVDIR/nvidia3" --thread-open "$DEVDIR/nvidia1" --comm ks-tables >/dev/null
    # nodes held by memory mapping alone, every descriptor closed: the iterator sees no file of
    # it; its maps, read from /proc, do
    vg_spawn --map "$DEVDIR/nvidia3" --map "$DEVDIR/nvidiactl" --children 1 --comm ks-mapped >/dev/null
    # holders in a PID namespace of their own (the host's /proc shows them by the host's pids)
    VG_HELPER_TAG=$_VG_TAG unshare --pid --fork "$HELPER" --pidfile "$TMP/ns.pid" --reaper \
        --open-path "$REAL/nvidia0" --open "$DEVDIR/nvidia2" --children 2 --comm ks-inns \
        </dev/null >"$TMP/ns.log" 2>&1 &
    _vg_record launcher "$!"
    wait_for "[[ -s $TMP/ns.pid ]]"
}

@test "kernel and /proc scans report identical holders on a staged host, in PID namespaces and under churn" {
    need_kernel_scan
    stage_host
    local churn=$VG_BUILD/tests/vg-churn cpid=
    if [[ -x $churn ]]; then
        "$churn" --dev "$DEVDIR/nvidia0" --log "$TMP/churn.log" --seconds 8 --rate 300 &
        cpid=$!
    fi
    local i k p
    for i in 1 2 3; do
        vgp --json --verbose --scan=kernel status
        [ "$status" -eq 0 ]
        [[ $stderr == *"scan: kernel"* ]]
        k=$(staged)
        vgp --json --verbose --scan=proc status
        [ "$status" -eq 0 ]
        [[ $stderr == *"scan: /proc (--scan=proc)"* ]]
        p=$(staged)
        echo "kernel:"$'\n'"$k"$'\n'"proc:"$'\n'"$p"
        [ "$k" = "$p" ]
    done
    # every staged holder is there: ks-real, ks-mknod + 3 workers, ks-plain + 2, ks-zleader,
    # ks-other, ks-inns (its init and main process) + 2 workers, ks-tables on two GPUs;
    # ks-none is nobody's
    [ "$(grep -c . <<<"$k")" -ge 14 ]
    [[ $k == *" gpu1 ks-tables $DEVDIR/nvidia3,$DEVDIR/nvidia1"* ]]
    [[ $k == *" gpu3 ks-tables $DEVDIR/nvidia3,$DEVDIR/nvidia1"* ]]
    # the real nodes, taken by O_PATH (no driver answers an open here), are path only in both
    # scans: the kernel's records carry the descriptor's O_PATH flag
    [[ $k == *" path-gpu0 ks-real $REAL/nvidia0,$REAL/nvidiactl,$REAL/nvidia-uvm,$REAL/nvidia-caps/nvidia-cap1"* ]]
    [[ $k == *" path-gpu1 ks-mknod $TMP/mygpu"* ]]
    [[ $k == *" path-gpu2 ks-zleader "* ]]
    [[ $k == *" path-gpu0 ks-inns "* ]]
    [[ $k != *" gpu0 ks-real"* && $k != *" gpu1 ks-mknod"* ]]
    [[ $k == *" gpu3 ks-plain "* ]]
    [[ $k == *" gpu2 ks-inns "* ]]
    [ "$(grep -c " gpu3 ks-mapped $DEVDIR/nvidia" <<<"$k")" -eq 2 ]
    [[ $k != *ks-none* ]]
    if [[ -n $cpid ]]; then wait "$cpid" || true; fi

    # auto on this host (far below 1,000 processes, where loading the program costs more than
    # the /proc scan): /proc, said, and the same holders
    vgp --json --verbose status
    [ "$status" -eq 0 ]
    [[ $stderr == *"scan: /proc (the kernel scan did not run: "*" processes: below 1000 the /proc scan costs less than loading the kernel's)"* ]]
    [ "$(staged)" = "$k" ]

    # JSON says which scan ran and why
    vgp --json --scan=kernel status
    json_ok '.scan.method == "kernel" and .scan.reason == null'
    vgp --json --scan=proc status
    json_ok '.scan.method == "proc" and .scan.maps == "proc" and .scan.reason == null'
    vgp --json status
    json_ok '.scan.method == "proc" and (.scan.reason | test("below 1000"))'

    # every command that scans goes through the same scan: doctor and clean --json too
    vgp --json --verbose --scan=kernel doctor
    [[ $stderr == *"doctor: scan: kernel"* ]]
    vgp --json --verbose --scan=kernel clean
    [[ $stderr == *"clean: scan: kernel"* ]]
}

@test "a node held only by an io_uring's registered files: a holder in both scans when the driver lists it (issue 27)" {
    # the ring holds the file open; fd/ shows only anon_inode:[io_uring]; the ring's fdinfo
    # names the file. Rings are read for the driver's processes and for holders only.
    vg_spawn --uring "$DEVDIR/nvidia1" --comm ring-held >/dev/null
    R=$VG_PID
    vg_scenario <<EOF
driver 550.54.15
cuda 12040
gpu index=0 uuid=GPU-00000000-0000-0000-0000-000000000000 name="NVIDIA H100 80GB HBM3" minor=0 total=80GiB
gpu index=1 uuid=GPU-11111111-0000-0000-0000-000000000000 name="NVIDIA H100 80GB HBM3" minor=1 total=80GiB
proc gpu=1 pid=$R type=compute mem=2GiB
EOF
    for scan in proc kernel; do
        if [[ $scan == kernel ]]; then need_kernel_scan; fi
        vgp --json --scan=$scan status
        [ "$status" -eq 0 ]
        json_ok ".gpus[1].holders[] | select(.pid == $R) | .seen_by == \"both\" and .stale == false"
    done
    vgp --json doctor
    json_ok "[.findings[] | select(.rule == \"stale-pid\") | .pids[]] | index($R) == null"
}

@test "inside a PID namespace with its own /proc: the namespace's numbers, identical holders" {
    need_kernel_scan
    vg_pidns_start
    vg_spawn --open "$DEVDIR/nvidia1" --children 2 --comm ks-nsd >/dev/null
    local k p
    run --separate-stderr vg_in_ns unshare --mount --propagation private \
        sh -c 'mount --bind "$1" /proc/devices && shift && exec "$@"' sh "$TMP/devices" \
        "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" --json --verbose --scan=kernel status
    [ "$status" -eq 0 ]
    [[ $stderr == *"scan: kernel"* ]]
    k=$(staged)
    run --separate-stderr vg_in_ns "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" --json --scan=proc status
    [ "$status" -eq 0 ]
    p=$(staged)
    echo "kernel:"$'\n'"$k"$'\n'"proc:"$'\n'"$p"
    [ "$k" = "$p" ]
    [ "$(grep -c ' ks-nsd ' <<<"$k")" -eq 3 ]
    # small pids: the namespace's numbering, not the host's
    [ "$(awk '{ print $1 }' <<<"$k" | sort -n | head -1)" -lt 100 ]
}

@test "a view of an outer PID namespace: auto falls back to /proc and says why; kernel fails" {
    need_kernel_scan
    vg_spawn --open "$DEVDIR/nvidia0" --comm ks-outer >/dev/null
    # a new PID namespace that still has the host's /proc: the view is of an outer namespace
    run --separate-stderr unshare --pid --fork "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" \
        --json --verbose status
    [ "$status" -eq 0 ]
    [[ $stderr == *"scan: /proc (the kernel scan did not run: "* ]]
    [[ $(staged) == *" gpu0 ks-outer "* ]]
    run --separate-stderr unshare --pid --fork "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" \
        --scan=kernel status
    [ "$status" -eq 3 ]
    [ "$(grep -c . <<<"$stderr")" -eq 1 ]
    [[ $stderr == "vramguard: status: the kernel scan cannot run: the --proc view is of an outer PID namespace"* ]]
}

@test "unprivileged: auto falls back to /proc and says so; --scan=kernel fails with one line" {
    command -v setpriv >/dev/null || skip "setpriv (util-linux) is not installed"
    # what nobody must read lives in a world-readable directory outside bats' (0700)
    PUB=$(mktemp -d /tmp/vg-kscan.XXXXXX)
    chmod 755 "$PUB"
    vg_public_bin "$PUB"
    DEVDIR=$(vg_fake_dev "$PUB" 4)
    vg_scenario "$PUB/scenario" <"$FAKE_NVML_SCENARIO"
    chmod 644 "$PUB/scenario"
    p=$(vg_spawn --uid nobody --open "$DEVDIR/nvidia2" --comm ks-nobody)
    run --separate-stderr setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all \
        "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" --json --verbose status
    echo "$stderr"
    [ "$status" -eq 0 ]
    [[ $stderr == *"status: scan: /proc (the kernel scan did not run: "* ]]
    [[ $(holders) == *"$p gpu2 ks-nobody "* ]]
    run --separate-stderr setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all \
        "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" --scan=kernel status
    [ "$status" -eq 3 ]
    [ "$(grep -c . <<<"$stderr")" -eq 1 ]
    [[ $stderr == "vramguard: status: the kernel scan cannot run: "* ]]
}

@test "without libbpf.so.1: status works on /proc, --scan=kernel fails with one line naming it" {
    # libbpf is loaded only when the kernel scan is tried: hide it in a private mount namespace
    # (a bind of /dev/null over the library, which dlopen refuses) where it is installed
    local lib
    lib=$(ldconfig -p | awk '$1 == "libbpf.so.1" { print $NF; exit }')
    nolib() {
        if [[ -n $lib ]]; then
            run --separate-stderr unshare -m sh -c 'mount --bind /dev/null "$1" && shift && exec "$@"' \
                sh "$lib" "$@"
        else
            run --separate-stderr "$@"
        fi
    }
    p=$(vg_spawn --open "$DEVDIR/nvidia3" --comm ks-nolib)
    nolib "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" --json --verbose status
    echo "$stderr"
    [ "$status" -eq 0 ]
    [[ $stderr == *"status: scan: /proc"* ]]
    [[ $(holders) == *"$p gpu3 ks-nolib "* ]]
    nolib "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" --scan=kernel status
    echo "$stderr"
    [ "$status" -eq 3 ]
    [ "$(grep -c . <<<"$stderr")" -eq 1 ]
    [[ $stderr == "vramguard: status: the kernel scan cannot run: libbpf.so.1 cannot be loaded ("* ]]
}

@test "root without CAP_SYS_PTRACE: what /proc refuses, the kernel scan's records give, and it is said" {
    command -v setpriv >/dev/null || skip "setpriv (util-linux) is not installed"
    need_kernel_scan
    p=$(vg_spawn --uid nobody --open "$DEVDIR/nvidia2" --comm ks-nobody)
    # the driver lists it, so the bounded list of unread processes names it whatever else runs
    vg_scenario_host h100x4 "proc gpu=2 pid=$p type=compute mem=1GiB"
    noptrace=(setpriv --bounding-set=-sys_ptrace --inh-caps=-sys_ptrace)
    # /proc alone: another user's open files are closed without CAP_SYS_PTRACE, even to root
    run --separate-stderr "${noptrace[@]}" "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" --json \
        --scan=proc doctor --no-shell
    echo "proc: $stderr"
    json_ok '.unread.list | any(.pid == $p and .user == "nobody" and .comm == "ks-nobody")' --argjson p "$p"
    json_ok '.unread.read_by_kernel == 0'
    # the kernel scan read its table: a holder, not unread, and the note says which source
    run --separate-stderr "${noptrace[@]}" "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" --json \
        --verbose --scan=kernel status
    echo "kernel: $stderr"
    [ "$status" -eq 0 ]
    [[ $(holders) == *"$p gpu2 ks-nobody "* ]]
    # its node's path is null (only /proc names it), which the schema allows
    json_ok '.gpus[2].holders[] | select(.pid == $p) | .device_nodes == [null]' --argjson p "$p"
    if python3 -c 'import jsonschema' 2>/dev/null; then
        printf '%s\n' "$output" >"$TMP/status.json"
        "$ROOT/tests/json-schema-check" "$ROOT/docs/schema" "$TMP/status.json"
    fi
    [[ $stderr == *"status: scan: kernel ("*"where it refused the open files of "*"the kernel scan's records of them were used)"* ]]
    run --separate-stderr "${noptrace[@]}" "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" --json \
        --scan=kernel doctor --no-shell
    json_ok '.unread.read_by_kernel >= 1'
    json_ok '.unread.list | all(.pid != $p)' --argjson p "$p"
    run --separate-stderr "${noptrace[@]}" "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" \
        --scan=kernel status
    [[ $output == *"whose open files /proc refused read by the kernel scan instead"* ]]
}
