#!/usr/bin/env bats
# t0806-unprivileged: status, doctor, visible and clean run as an unprivileged user (nobody,
# through setpriv) on a host where root owns some holders. What nobody may not read (another
# user's fd/, environ, maps) degrades to unknown: the root holder is still shown from the
# driver's list, with what is world-readable (owner, command); the scan counts it as denied and
# says so; no rule fires on an environment it could not read; clean refuses to touch another
# user's process. Never a crash. Skipped when not run as root. See docs/reliability.md.

load lib

bats_require_minimum_version 1.5.0

setup() {
    [[ $(id -u) -eq 0 ]] || skip "needs root (to run processes as root and vramguard as nobody)"
    command -v setpriv >/dev/null || skip "setpriv (util-linux) is not installed"
    vg_require_jq
    # Everything nobody must read lives in a world-readable directory outside bats' (0700),
    # the binary and the fake driver too (the build tree may be private: a clone under /root).
    PUB=$(mktemp -d /tmp/vg-unpriv.XXXXXX)
    chmod 755 "$PUB"
    vg_public_bin "$PUB"
    DEVDIR=$(vg_fake_dev "$PUB" 4)
    # R1: root, holds GPU 0's node, told to use only GPU 1. R2: a root leftover (orphaned, its
    # session leader gone) on GPU 1. U1: nobody's, holds GPU 2's node, told to use only GPU 0.
    R1=$(vg_spawn --open "$DEVDIR/nvidia0" --env CUDA_VISIBLE_DEVICES=1 --comm root-job)
    vg_spawn --orphan --setsid --open "$DEVDIR/nvidia1" --comm root-leftover -- python -c \
        "from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=5)" --multiprocessing-fork >/dev/null
    R2=$VG_ORPHAN_PID
    U1=$(vg_spawn --uid nobody --open "$DEVDIR/nvidia2" --env CUDA_VISIBLE_DEVICES=0 --comm nobody-job)
    vg_scenario "$PUB/scenario" <<EOF2
driver 550.54.15
cuda 12040
gpu index=0 uuid=GPU-0d000000-0000-0000-0000-000000000000 name="NVIDIA H100 80GB HBM3" minor=0 bus=00000000:17:00.0 total=80GiB reserved=512MiB util=40 cc=9.0 persistence=1 compute_mode=0 mig=0
gpu index=1 uuid=GPU-1d000000-0000-0000-0000-000000000000 name="NVIDIA H100 80GB HBM3" minor=1 bus=00000000:2A:00.0 total=80GiB reserved=512MiB util=0 cc=9.0 persistence=1 compute_mode=0 mig=0
gpu index=2 uuid=GPU-2d000000-0000-0000-0000-000000000000 name="NVIDIA H100 80GB HBM3" minor=2 bus=00000000:3B:00.0 total=80GiB reserved=512MiB util=30 cc=9.0 persistence=1 compute_mode=0 mig=0
proc gpu=0 pid=$R1 type=compute mem=2GiB
proc gpu=1 pid=$R2 type=compute mem=1GiB sm=0
proc gpu=2 pid=$U1 type=compute mem=3GiB
EOF2
    chmod 644 "$PUB/scenario"
}

teardown() {
    vg_cleanup
    if [[ -n ${PUB:-} && $PUB == /tmp/vg-unpriv.* ]]; then rm -rf -- "$PUB"; fi
}

# as_nobody ARGS...: vramguard ARGS as nobody:nogroup without supplementary groups.
as_nobody() {
    run --separate-stderr setpriv --reuid=65534 --regid=65534 --clear-groups \
        "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" "$@"
}

as_root() {
    run --separate-stderr "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" "$@"
}

no_garbage() {
    [[ $output != *"(null)"* && $stderr != *Sanitizer* && $stderr != *"runtime error"* ]]
}

@test "status as nobody: the root holder from the driver's list with its world-readable fields, denied counted" {
    as_root --json status
    [ "$status" -eq 0 ]
    json_ok '.gpus[0].holders[] | select(.pid == $r) | .seen_by == "both"' --argjson r "$R1"

    as_nobody --json status
    echo "$output $stderr"
    [ "$status" -eq 0 ]
    [ -z "$stderr" ]
    no_garbage
    json_ok '.scan.denied > 0'
    # fd/ is unreadable: the driver's list still names R1, with its owner and command.
    json_ok '.gpus[0].holders[] | select(.pid == $r)
        | .seen_by == "nvml" and .in_proc and .user == "root" and .comm == "root-job"' --argjson r "$R1"
    json_ok '.gpus[2].holders[] | select(.pid == $u)
        | .seen_by == "both" and .user == "nobody"' --argjson u "$U1"
    json_ok 'any(.gpus[1].holders[]; .pid == $r and .in_proc)' --argjson r "$R2"

    as_nobody status
    [ "$status" -eq 0 ]
    no_garbage
    [[ $output == *"vramguard is not root: run it as root to see other users' processes"* ]]
}

@test "doctor as nobody: no rule fires on an environment it could not read; the readable one still does" {
    as_root --json doctor --no-shell
    echo "root: $output"
    json_ok 'any(.findings[]; .rule == "outside-visible" and (.pids | index($r)))' --argjson r "$R1"

    as_nobody --json doctor --no-shell
    echo "nobody: $output $stderr"
    ((status <= 2))
    no_garbage
    json_ok 'any(.findings[]; .rule == "outside-visible" and (.pids | index($u)))' --argjson u "$U1"
    json_ok 'all(.findings[]; (.rule == "outside-visible" or .rule == "stray-contexts" or .rule == "ddp-gpu0" or .rule == "preallocation" or .rule == "nccl-all-gpus") and (.pids | index($r)) | not)' --argjson r "$R1"
    json_ok 'all(.findings[]; .rule != "foreign-pid")'

    # what it could not read is said, with the cause it saw, and no GPU is called checked
    json_ok '.unread.descriptors > 0 and .unread.environments >= 2 and (.unread.causes | index("not-root"))'
    json_ok '.gpus | all(.fully_checked == false and (.not_checked | index("descriptors")))'

    as_nobody doctor --no-shell
    ((status <= 2))
    no_garbage
    [[ $output == *"Not seen: the open files of "*" processes could not be read, so any GPU holders among them are missing above;"* ]]
    [[ $output == *"vramguard is not root: run it as root to see other users' processes."* ]]
}

@test "a kernel thread under a PID the driver lists (a stale entry's reused PID) is never its framework's cache, as nobody too" {
    [[ $(cat /proc/2/comm 2>/dev/null) == kthreadd ]] || skip "no kernel threads in this PID namespace"
    echo "proc gpu=1 pid=2 type=compute mem=4GiB sm=0" >>"$PUB/scenario"
    # nobody cannot read its descriptors, so the entry is not known to be stale
    as_nobody --json doctor --no-shell
    echo "nobody: $output $stderr"
    ((status <= 2))
    no_garbage
    json_ok 'all(.findings[]; .rule != "allocator-cache" or (.pids | index(2) | not))'
    as_root --json doctor --no-shell
    echo "root: $output"
    json_ok 'all(.findings[]; .rule != "allocator-cache" or (.pids | index(2) | not))'
}

@test "visible as nobody: the driver's view is enough" {
    as_nobody visible 0,2 --order PCI_BUS_ID
    [ "$status" -eq 0 ]
    no_garbage
    [[ $output == *"cuda:1  GPU 2"* ]]
}

@test "clean as nobody: another user's leftover is refused, never signalled" {
    as_nobody --json clean
    echo "plan: $output $stderr"
    no_garbage
    json_ok 'all(.processes[]; .action == "refuse" or .uid == 65534)'
    json_ok 'all(.processes[] | select(.pid == $r); .action == "refuse" and .refusal == "other-user")' --argjson r "$R2"

    as_nobody --json clean --force --grace 1s
    echo "force: $output $stderr"
    no_garbage
    json_ok 'all(.processes[]; (.result.signals // []) | length == 0)'
    ! vg_gone "$R2"
    ! vg_gone "$R1"
}

@test "the hint names the cause it saw: not root, hidepid, a user namespace" {
    command -v unshare >/dev/null || skip "unshare is not installed"
    as_nobody --json doctor --no-shell
    json_ok '.unread.causes == ["not-root", "no-ptrace", "no-dac-read"]'
    # a procfs mounted with hidepid=invisible: other users' processes are not even listed
    run --separate-stderr unshare --mount --fork sh -c '
        mkdir -p "$1" && mount -t proc -o hidepid=invisible proc "$1" &&
        exec setpriv --reuid=65534 --regid=65534 --clear-groups "$2" --proc "$1" --nvml "$3" \
            --dev "$4" --json doctor --no-shell' sh "$PUB/proc" "$VG" "$FAKE_FULL" "$DEVDIR"
    echo "hidepid: $output $stderr"
    no_garbage
    json_ok '.unread.causes | index("hidepid")'
    # nothing was denied (nothing else is even listed), yet nothing is called checked
    json_ok '.unread.hidden == true and (.gpus | all(.fully_checked == false))'
    # root in a user namespace of its own: the host's processes are out of its reach
    run --separate-stderr unshare --user --map-root-user \
        "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" doctor --no-shell
    echo "userns: $output $stderr"
    no_garbage
    [[ $output == *"vramguard runs in a user namespace that does not map every user"* ]]
}

# as_nobody_hidepid ARGS...: vramguard ARGS as nobody on a procfs of its own mounted with
# hidepid=invisible (in a mount namespace of its own): root's holders are not even listed.
as_nobody_hidepid() {
    run --separate-stderr unshare --mount --fork sh -c '
        mkdir -p "$1" && mount -t proc -o hidepid=invisible proc "$1" && d=$1 && vg=$2 &&
        nvml=$3 && dev=$4 && shift 4 &&
        exec setpriv --reuid=65534 --regid=65534 --clear-groups "$vg" --proc "$d" \
            --nvml "$nvml" --dev "$dev" "$@"' sh "$PUB/proc" "$VG" "$FAKE_FULL" "$DEVDIR" "$@"
}

@test "hidepid: a working root holder the procfs hides is hidden, not gone, with no reset advice" {
    command -v unshare >/dev/null || skip "unshare is not installed"
    as_nobody_hidepid --json doctor --no-shell
    echo "$output $stderr"
    no_garbage
    f='.findings[] | select(.rule == "foreign-pid" and .pids == [$p])'
    json_ok "$f" --argjson p "$R1"
    # hidepid is said first, and nothing calls it gone or advises a reset
    json_ok "$f"' | .title | contains("hidepid")' --argjson p "$R1"
    json_ok "$f"' | .evidence[0] | contains("hidepid") and contains("most likely another user'"'"'s, hidden, not gone")' \
        --argjson p "$R1"
    json_ok "$f"' | [.evidence[], .fix[] | select(test("exited while|reset|is gone"))] == []' \
        --argjson p "$R1"
    json_ok "$f"' | .fix[0] | contains("root") and contains("gid=")' --argjson p "$R1"
    as_nobody_hidepid status
    [[ $output == *"(not in this /proc: hidepid hides other users')"* ]]
    # the clean plan refuses it as hidden, not as a process in another namespace or gone
    as_nobody_hidepid --json clean --pid "$R1"
    echo "$output $stderr"
    no_garbage
    json_ok '.processes[] | select(.pid == $p) | .refusal == "not-visible" and (.refusal_message | contains("hidepid") and contains("not gone"))' \
        --argjson p "$R1"
}

@test "what could not be read is named: --verbose text and JSON unread.list give PID, owner, command" {
    as_nobody --json doctor --no-shell
    no_garbage
    # R1 is root's and holds a node: its open files are closed to nobody, its owner and comm are not
    json_ok '.unread.list | any(.pid == $p and .uid == 0 and .user == "root" and .comm == "root-job")' \
        --argjson p "$R1"
    json_ok '(.unread.list | length) + .unread.list_more + .unread.kernel_threads == .unread.descriptors'
    json_ok '.unread.list | map(.pid) | . == sort'
    as_nobody --verbose status
    no_garbage
    line=$(grep '^Open files not read:' <<<"$output")
    [[ $line == *"PID $R1 (root, root-job)"* ]]
    # past the bound: "and N more", never a silent cut; kernel threads are counted apart
    if [[ $line == *" more"* ]]; then [[ $line =~ ,\ and\ [0-9]+\ more(,\ and\ [0-9]+\ kernel\ threads?)?\.$ ]]; fi
    as_nobody --verbose clean
    [[ $output == *"Open files not read:"*"PID $R1 (root, root-job)"* ]]
    # without --verbose the text counts them only
    as_nobody status
    [[ $output != *"Open files not read:"* ]]
}

@test "hidepid: a prolog calls a hidden holder hidden, not gone, and says hidepid hides holders" {
    command -v unshare >/dev/null || skip "unshare is not installed"
    SLURM_JOB_ID=77 SLURM_JOB_UID=65534 SLURM_JOB_GPUS=0 as_nobody_hidepid handoff prolog
    echo "status $status"$'\n'"stdout: $output"$'\n'"stderr: $stderr"
    no_garbage
    [ "$status" -eq 1 ]
    [[ $output == "vramguard: dirty: GPU 0 held by pid $R1"*"(hidepid) does not show: most likely another user's, hidden, not gone"* ]]
    [[ $stderr == *"note: /proc is mounted with hidepid: other users' processes are hidden"* ]]
}
