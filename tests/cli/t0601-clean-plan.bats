#!/usr/bin/env bats
# t0601-clean-plan: `vramguard clean` without --force: the plan (who would be signalled, why,
# the memory at stake), what the default and each filter select, that a dry run changes
# nothing, the JSON document, --help and usage errors, a host without a driver.

load lib
load clean

setup() {
    vg_fake_dev >/dev/null
}

# An orphaned worker of a dead job holding GPU 0's device node (its job's session is gone).
orphan() {
    vg_spawn --open "$DEVDIR/nvidia0" --orphan --setsid --comm pt_data_worker "$@" -- python train.py --epochs 90 \
        >/dev/null
    O=$VG_PID
    O_START=$(vg_stat "$O" starttime)
}

@test "a dry run names the orphan, why and the memory, and changes nothing" {
    orphan
    two_gpus "proc gpu=0 pid=$O type=compute mem=3GiB sm=0"
    vgc clean
    show
    [ "$status" -eq 0 ]
    [ -z "$stderr" ]
    [[ ${lines[0]} == "Plan (dry run: nothing was signalled; add --force to act)." ]]
    [[ $output == *"Would stop 1 process (SIGTERM, then SIGKILL after 10.0s):"* ]]
    [[ $output == *"PID $O  $VG_USER  GPU 0  3 GiB"* ]]
    [[ $output == *"python train.py --epochs 90"* ]]
    [[ $output == *"why: orphan-holder: 1 leftover process of a finished job"* ]]
    [[ $output == *"GPU 0  NVIDIA A100-SXM4-80GB  GPU-0c1ea000: 3 GiB of 80 GiB used; stopping 1 process frees the 3 GiB the driver attributes to it"* ]]
    [[ $output == *"GPU 1  NVIDIA A100-SXM4-80GB  GPU-0c1ea111: 0 B of 80 GiB used; nothing to stop here"* ]]
    [[ $output != *"Will not touch"* ]]
    # Nothing happened to it.
    alive_as_before "$O" "$O_START"
    vg_holds "$O" "$DEVDIR/nvidia0"
}

@test "the plan in JSON: vramguard.clean/1 with the target's identity, reason and memory" {
    orphan
    two_gpus "proc gpu=0 pid=$O type=compute mem=3GiB sm=0"
    vgc clean --json
    show
    [ "$status" -eq 0 ]
    [ -z "$stderr" ]
    [ "$(json .schema)" = vramguard.clean/1 ]
    [ "$(json .mode)" = plan ]
    json_ok '.driver == {"available": true, "error": null}'
    json_ok '.options.orphans == true and .options.force == false and .options.grace_ms == 10000'
    [ "$(json '.processes | length')" -eq 1 ]
    [ "$(json '.processes[0].pid')" -eq "$O" ]
    [ "$(json '.processes[0].start_ticks')" -eq "$O_START" ]
    [ "$(json '.processes[0].uid')" -eq "$(id -u)" ]
    [ "$(json '.processes[0].action')" = signal ]
    [ "$(json '.processes[0].reason')" = orphan-holder ]
    [ "$(json '.processes[0].memory')" -eq $((3 << 30)) ]
    [ "$(json '.processes[0].seen')" = both ]
    json_ok '.processes[0].gpus == [0] and .processes[0].gpu_uuids == [$u]' --arg u "$U0"
    json_ok '.processes[0].refusal == null and .processes[0].result == null'
    json_ok '.findings_after == null'
    [ "$(json '.gpus | length')" -eq 2 ]
    [ "$(json '.gpus[0].targets_memory')" -eq $((3 << 30)) ]
    json_ok '.gpus[0].after == null and .gpus[0].freed == null and .gpus[0].reset == null'
    json_ok '.summary.to_signal == 1 and .summary.refused == 0'
    alive_as_before "$O" "$O_START"
}

@test "a device-node-only orphan: the unexplained memory on its GPU is most likely its" {
    orphan
    USED0=9GiB two_gpus
    vgc clean
    show
    [ "$status" -eq 0 ]
    [[ $output == *"PID $O  $VG_USER  GPU 0  device node only"* ]]
    [[ $output == *"stopping 1 process likely frees the 9 GiB no listed process accounts for"* ]]
}

@test "without filters only leftovers are targets: a live job is never 'everything'" {
    vg_spawn --open "$DEVDIR/nvidia1" -- python serve.py >/dev/null
    J=$VG_PID
    two_gpus "proc gpu=1 pid=$J type=compute mem=20GiB sm=90"
    vgc clean
    show
    [ "$status" -eq 0 ]
    [[ $output == *"Nothing to clean: no leftover of a finished job holds a GPU."* ]]
    [[ $output != *"PID $J"* ]]
    # Named by a filter, it is a target, with no finding behind it.
    vgc clean --gpu 1
    show
    [ "$status" -eq 0 ]
    [[ $output == *"Would stop 1 process"* ]]
    [[ $output == *"PID $J  $VG_USER  GPU 1  20 GiB"* ]]
    [[ $output == *"why: holds the GPU and matches --gpu 1"* ]]
    # --orphans narrows any filter to leftovers again.
    vgc clean --gpu 1 --orphans
    [ "$status" -eq 0 ]
    [[ $output == *"No process holding a GPU matches --gpu 1 --orphans."* ]]
    vgc clean --pid "$J"
    [[ $output == *"PID $J  $VG_USER  GPU 1"* ]]
    # Filters combine: the job is on GPU 1, not 0.
    vgc clean --gpu 0 --pid "$J"
    [[ $output == *"No process holding a GPU matches --gpu 0 --pid $J."* ]]
}

@test "--user and --older-than select holders by owner and age" {
    [ "$(id -u)" -eq 0 ] || skip "needs root (starts a process as nobody)"
    vg_spawn --open "$DEVDIR/nvidia0" --uid nobody -- python nb.py >/dev/null
    N=$VG_PID
    vg_spawn --open "$DEVDIR/nvidia0" -- python root.py >/dev/null
    R=$VG_PID
    two_gpus
    vgc clean --json --user nobody
    show
    [ "$status" -eq 0 ]
    [ "$(json '[.processes[].pid] | join(",")')" = "$N" ]
    [ "$(json '.processes[0].user')" = nobody ]
    [ "$(json '.options.uid')" -eq 65534 ]
    vgc clean --json --user 0
    [ "$(json '[.processes[].pid] | join(",")')" = "$R" ]
    # Both were started moments ago.
    vgc clean --json --older-than 1h
    [ "$status" -eq 0 ]
    json_ok '.processes == [] and .options.older_than_seconds == 3600'
    vgc clean --json --older-than 0s --gpu 0
    [ "$(json '[.processes[].pid] | sort | join(",")')" = "$(printf '%s\n' "$N" "$R" | sort | paste -sd,)" ]
    json_ok 'all(.processes[]; .age_seconds >= 0)'
}

@test "--pid of a process that holds no GPU: said, not an empty plan" {
    two_gpus
    vgc clean --pid $$
    show
    [ "$status" -eq 0 ]
    [[ $output == *"Will not touch 1 process:"* ]]
    [[ $output == *"PID $$"* ]]
    [[ $output == *"not touched: holds no GPU memory and no NVIDIA device node: nothing to free"* ]]
    vgc clean --json --pid $$
    [ "$(json '.processes[0].refusal')" = not-holder ]
    [ "$(json '.processes[0].action')" = refuse ]
}

@test "memory held with no process: the reset command and its preconditions, not run" {
    # a reset is offered only when no process was hidden: alone in a PID namespace
    vg_pidns_start
    fake_smi
    USED1=6GiB two_gpus
    vgc clean
    show
    [ "$status" -eq 0 ]
    [[ $output == *"GPU reset: memory held with no process left; only a reset (or a reboot) frees it."* ]]
    [[ $output == *"GPU 1: 6 GiB held."* ]]
    [[ $output == *"    nvidia-smi --gpu-reset -i $U1"* ]]
    [[ $output == *"Preconditions:"*"run it as root"*"no process may use the GPU"* ]]
    [[ $output == *"'vramguard clean --gpu 1 --reset --force', as root, runs it"* ]]
    # --reset alone is still a dry run.
    vgc clean --reset --gpu 1
    [ "$status" -eq 0 ]
    [[ $output == *"nvidia-smi --gpu-reset -i $U1"* ]]
    [ ! -e "$SMI_LOG" ]
    vgc clean --json
    [ "$(json '.gpus[1].reset.command')" = "nvidia-smi --gpu-reset -i $U1" ]
    json_ok '.gpus[1].reset.attempted == false and .gpus[0].reset == null'
    [ "$(json '.reset_preconditions | length')" -ge 3 ]
}

@test "without a driver: device-node orphans are still planned; exit 3" {
    orphan
    unset FAKE_NVML_SCENARIO
    vgc clean
    show
    [ "$status" -eq 3 ]
    [[ $output == *"no NVIDIA driver view:"* ]]
    [[ $output == *"PID $O  $VG_USER  GPU -  device node only"* ]]
    [[ $output == *"why: orphan-holder"* ]]
    vgc clean --gpu 0
    [ "$status" -eq 3 ]
    [[ $stderr == *"vramguard: clean: --gpu needs the driver's view"* ]]
    alive_as_before "$O" "$O_START"
}

@test "--help: usage on stdout, every option described, exit 0" {
    vgc clean --help
    [ "$status" -eq 0 ]
    [ -z "$stderr" ]
    [[ ${lines[0]} == "usage: vramguard clean [--gpu G] [--pid P] [--orphans] [--user U] [--older-than T]" ]]
    for o in --gpu --pid --user --older-than --orphans --grace --force --reset --json; do
        [[ $output == *"  $o"* ]] || { echo "$o not described"; return 1; }
    done
    [[ $output == *"Exit status: 0 plan printed"* ]]
    run "$VG" --help
    [[ $output == *"  clean "* ]]
}

@test "bad usage exits 64 with one line on stderr and nothing on stdout" {
    two_gpus
    for args in "--bogus" "--pid" "--pid abc" "--pid 0" "--grace x" "--grace 2h" \
        "--older-than soon" "--user no-such-user-here" "--gpu 7" "extra"; do
        # shellcheck disable=SC2086 # split on purpose
        vgc clean $args
        if [ "$status" -ne 64 ] || [ -n "$output" ] || [ "$(wc -l <<<"$stderr")" -ne 1 ] ||
            [[ $stderr != "vramguard: clean: "* ]]; then
            echo "clean $args:"
            show
            return 1
        fi
    done
}
