#!/usr/bin/env bats
# t1402-handoff: `vramguard handoff prolog|epilog` on real processes and the fake driver, with
# the job given as Slurm gives it to a prolog or epilog (SLURM_JOB_ID, SLURM_JOB_UID,
# SLURM_JOB_GPUS). Each helper logs the signals it takes (--signal-log), so the test sees who
# was signalled, not only what vramguard says. The driver entries use `exits=1`: the fake
# driver drops them when their process exits, as the real one frees a context. The same
# scenarios against a real Slurm are t1403-slurm-handoff.

load lib

bats_require_minimum_version 1.5.0

setup() {
    vg_fake_dev >/dev/null
    TMP=$(vg_tmpdir)
    LOG=$TMP/signals
    vg_require_jq
}

# start NAME ARGS...: vg-helper logging its signals; sets NAME=pid.
teardown() {
    vg_cleanup
    if [[ -n ${PUB:-} && $PUB == /tmp/vg-opath.* ]]; then rm -rf -- "$PUB"; fi
}

start() {
    local name=$1
    shift
    vg_spawn --signal-log "$LOG" "$@" >/dev/null
    printf -v "$name" '%s' "$VG_PID"
}

# gpus LINE...: four GPUs (minors 0-3, indices 0-3) and the given proc/error/hang lines.
gpus() {
    local i
    vg_scenario < <(
        for i in 0 1 2 3; do
            echo "gpu index=$i uuid=GPU-$i$i$i$i$i$i$i$i-0000-0000-0000-000000000000 name=\"NVIDIA H100\" minor=$i total=80GiB reserved=512MiB util=0"
        done
        printf '%s\n' "$@"
    )
}

# ho ARGS...: vramguard handoff with the fake driver; stdout in $output, stderr in $stderr.
ho() {
    run --separate-stderr "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" handoff "$@"
}

# job ID GPUS: the variables Slurm gives a prolog or epilog, for the next ho.
job() {
    export SLURM_JOB_ID=$1 SLURM_JOB_UID=$(id -u) SLURM_JOB_GPUS=$2
}

signalled() {
    [ -n "$(vg_signals "$1" "$LOG")" ]
}

show() {
    echo "status $status"
    echo "stdout: $output"
    echo "stderr: $stderr"
}

@test "a job that left nothing: clean, exit 0, one line on stdout" {
    gpus
    job 41 0,1
    ho epilog
    show
    [ "$status" -eq 0 ]
    [ "$output" = "vramguard: clean: GPUs 0,1 free" ]
    [[ $stderr == *"clean: GPU 0 (GPU-00000000): free, nothing to stop"* ]]
}

@test "epilog: an orphaned worker of the job is stopped, the memory comes back: cleaned" {
    start W --pgrp --orphan --comm pt_data_worker --env SLURM_JOB_ID=42 --open "$DEVDIR/nvidia1" -- python train.py
    gpus "proc gpu=1 pid=$W type=compute mem=6GiB exits=1"
    job 42 0,1
    ho epilog --timeout 20s --json
    show
    [ "$status" -eq 0 ]
    [ "$(json .outcome)" = cleaned ]
    [ "$(json .signalled)" = 1 ]
    [ "$(json '.gpus[1].outcome')" = cleaned ]
    [ "$(json '.gpus[1].holders[0].owner')" = job ]
    [ "$(json '.gpus[1].holders[0].evidence | join(",")')" = uid,environment ]
    [ "$(json '.gpus[0].outcome')" = clean ]
    signalled "$W"
    wait_for "vg_gone $W"
}

@test "epilog: a worker holding the node only by mapping (descriptors closed) is stopped too" {
    start W --pgrp --orphan --comm pt_data_worker --env SLURM_JOB_ID=44 --map "$DEVDIR/nvidia1" \
        --map "$DEVDIR/nvidiactl" -- python train.py
    [ -z "$(find "/proc/$W/fd/" -lname "$DEVDIR/*")" ]
    gpus
    job 44 1
    ho epilog --timeout 20s --json
    show
    [ "$status" -eq 0 ]
    [ "$(json .outcome)" = cleaned ]
    [ "$(json .signalled)" = 1 ]
    [ "$(json '.gpus[0].holders[0].pid')" = "$W" ]
    [ "$(json '.gpus[0].holders[0].seen_by')" = map ]
    [ "$(json '.gpus[0].holders[0].owner')" = job ]
    signalled "$W"
    wait_for "vg_gone $W"
}

@test "epilog: a setsid daemon the job started is the job's too: stopped" {
    start D --setsid --orphan --env SLURM_JOB_ID=43 --open "$DEVDIR/nvidia2" -- /usr/bin/mydaemon
    gpus "proc gpu=2 pid=$D type=compute mem=900MiB exits=1"
    job 43 2
    ho epilog --timeout 20s
    show
    [ "$status" -eq 0 ]
    [[ $output == "vramguard: cleaned: stopped 1 leftover process of job 43; GPU 2 free after "* ]]
    signalled "$D"
}

@test "epilog: another user's process on the job's GPU is dirty and left alone" {
    [ "$(id -u)" -eq 0 ] || skip "needs root (starts a process as nobody)"
    start O --uid nobody --open "$DEVDIR/nvidia1" -- python other.py
    gpus "proc gpu=1 pid=$O type=compute mem=3GiB exits=1"
    job 44 1
    ho epilog --timeout 5s --json
    show
    [ "$status" -eq 1 ]
    [ "$(json .outcome)" = dirty ]
    [ "$(json '.gpus[0].holders[0].owner')" = other ]
    [ "$(json '.gpus[0].holders[0].signalled')" = false ]
    [[ $(json .reason) == "vramguard: dirty: GPU 1 held by pid $O (nobody, "*"), not job 44, 3 GiB" ]]
    ! signalled "$O"
    ! vg_gone "$O"
}

@test "epilog: the same user's process with no mark of the job, or another job's, is left alone" {
    start U --open "$DEVDIR/nvidia0" -- python notebook.py
    start J --env SLURM_JOB_ID=99 --open "$DEVDIR/nvidia0" -- python next_job.py
    gpus "proc gpu=0 pid=$U type=compute mem=1GiB exits=1" "proc gpu=0 pid=$J type=compute mem=1GiB exits=1"
    job 45 0
    ho epilog --timeout 2s --json
    show
    [ "$status" -eq 1 ]
    [ "$(json '[.gpus[0].holders[] | select(.pid == '"$J"') | .evidence[]] | join(",")')" = uid,other-job ]
    ! signalled "$U"
    ! signalled "$J"
}

@test "epilog: a holder stuck in D state: wedged within the timeout, nothing signalled" {
    [ "$(id -u)" -eq 0 ] || skip "needs root (starts a process as nobody)"
    # Not the job's: the helper's D state waits on a vfork child that holds the node too and
    # exits at SIGTERM, which would end the D state; a driver's D state ends for no signal.
    start S --dstate --uid nobody --env SLURM_JOB_ID=46 --open "$DEVDIR/nvidia3" -- python stuck.py
    gpus "proc gpu=3 pid=$S type=compute mem=2GiB"
    job 46 3
    SECONDS=0
    ho epilog --timeout 2s --json
    show
    [ "$status" -eq 2 ]
    [ "$(json '.gpus[0].cause')" = d-state ]
    [ "$(json .timed_out)" = true ]
    [ "$(json .signalled)" = 0 ]
    ((SECONDS < 30))
    ! signalled "$S"
}

@test "epilog: a hung driver makes the GPU wedged within --nvml-timeout and signals nothing" {
    start W --env SLURM_JOB_ID=47 --open "$DEVDIR/nvidia1" -- python train.py
    gpus "proc gpu=1 pid=$W type=compute mem=2GiB exits=1" \
        "hang func=nvmlDeviceGetMemoryInfo_v2 gpu=1 seconds=60"
    job 47 1
    SECONDS=0
    run --separate-stderr "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" --nvml-timeout 1s handoff epilog --timeout 5s
    show
    [ "$status" -eq 2 ]
    [[ $output == "vramguard: wedged: GPU 1 hung"* ]]
    ((SECONDS < 30))
    ! signalled "$W"
}

@test "epilog: memory that does not come back after the job's holders are gone is wedged" {
    start W --pgrp --orphan --env SLURM_JOB_ID=48 --open "$DEVDIR/nvidia0" -- python train.py
    # The GPU reports memory used whatever happens to the process: a leak in the driver.
    gpus "proc gpu=0 pid=$W type=compute mem=5GiB exits=1"
    sed 's/^\(gpu index=0 .*\)util=0$/\1util=0 used=5GiB/' "$FAKE_NVML_SCENARIO" | vg_scenario
    job 48 0
    ho epilog --timeout 2s --json
    show
    [ "$status" -eq 2 ]
    [ "$(json '.gpus[0].cause')" = stuck ]
    signalled "$W"
}

@test "prolog: a GPU that is not empty is refused (dirty), and nothing is touched" {
    start W --pgrp --orphan --env SLURM_JOB_ID=40 --open "$DEVDIR/nvidia2" -- python old_job.py
    gpus "proc gpu=2 pid=$W type=compute mem=4GiB exits=1"
    job 49 1,2
    ho prolog
    show
    [ "$status" -eq 1 ]
    [[ $output == "vramguard: dirty: GPU 2 held by pid $W ("*"), 4 GiB" ]]
    ! signalled "$W"
    ! vg_gone "$W"
}

@test "prolog: an O_PATH descriptor of a node another user took is path only: clean, and said apart by status (issue 27)" {
    [[ $(id -u) -eq 0 ]] || skip "needs root to become nobody"
    command -v setpriv >/dev/null || skip "setpriv (util-linux) is not installed"
    # a 0600 root-owned node nobody cannot open, only take by path (os.open(path, O_PATH)),
    # in a directory nobody can reach (bats' own is 0700); removed in teardown
    PUB=$(mktemp -d /tmp/vg-opath.XXXXXX)
    chmod 755 "$PUB"
    DEVDIR=$(vg_fake_dev "$PUB" 4)
    chmod 0600 "$DEVDIR/nvidia1"
    setpriv --reuid=65534 --regid=65534 --clear-groups /usr/bin/python3 -c '
import os, sys, time
os.open(sys.argv[1], os.O_PATH)
try:
    os.open(sys.argv[1], os.O_RDONLY)
    sys.exit(3)
except PermissionError:
    pass
print(os.getpid(), flush=True)
time.sleep(60)' "$DEVDIR/nvidia1" >"$TMP/squat.pid" 2>"$TMP/squat.err" &
    _vg_record squatter "$!"
    wait_for "[[ -s $TMP/squat.pid ]] || ! kill -0 $! 2>/dev/null"
    cat "$TMP/squat.err"
    [[ -s $TMP/squat.pid ]]
    S=$(cat "$TMP/squat.pid")
    gpus
    job 50 1
    ho prolog
    show
    [ "$status" -eq 0 ]
    [[ $output == "vramguard: clean"* ]]
    run --separate-stderr "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" --json status
    json_ok "[.gpus[1].holders[].pid] | index($S) == null"
    json_ok ".path_only[] | select(.pid == $S) | .gpus == [1] and .user == \"nobody\""
}

@test "prolog: memory used with no holder is dirty; a GPU the driver does not list is wedged; no driver is 3" {
    gpus
    sed 's/^\(gpu index=1 .*\)util=0$/\1util=0 used=3GiB/' "$FAKE_NVML_SCENARIO" | vg_scenario
    job 50 1
    ho prolog
    show
    [ "$status" -eq 1 ]
    [ "$output" = "vramguard: dirty: GPU 1: 3 GiB used and no process holds it" ]
    job 50 7
    ho prolog
    show
    [ "$status" -eq 2 ]
    [ "$output" = "vramguard: wedged: GPU /dev/nvidia7 not found by the driver" ]
    FAKE_NVML_SCENARIO= ho prolog
    show
    [ "$status" -eq 3 ]
    [[ $output == "vramguard: unknown: could not check: "* ]]
    # The whole driver hung: wedged (it frees nothing by itself), within the deadline.
    gpus "hang func=nvmlDeviceGetCount_v2 seconds=60"
    SECONDS=0
    run --separate-stderr "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" --nvml-timeout 1s handoff prolog --json
    show
    [ "$status" -eq 2 ] && [ "$(json .driver.hung)" = true ] && ((SECONDS < 30))
    # /proc unreadable: could not check, and still the reason line.
    gpus
    run --separate-stderr "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" --proc /nonexistent handoff prolog
    show
    [ "$status" -eq 3 ] && [ "$output" = "vramguard: unknown: could not check: the host's processes could not be read" ]
}

@test "GPUs from --gpus (indices, UUIDs), SLURM_STEP_GPUS, CUDA_VISIBLE_DEVICES, ranges" {
    gpus
    unset SLURM_JOB_GPUS
    ho prolog --gpus 0,GPU-3333
    [ "$status" -eq 0 ] && [ "$output" = "vramguard: clean: GPUs 0,3 free" ]
    SLURM_STEP_GPUS=1-3 ho prolog --json
    [ "$(json .gpus_from)" = SLURM_STEP_GPUS ] && [ "$(json '.gpus | length')" = 3 ]
    CUDA_VISIBLE_DEVICES=GPU-2222 ho prolog --json
    [ "$(json .gpus_from)" = CUDA_VISIBLE_DEVICES ] && [ "$(json '.gpus[0].index')" = 2 ]
}

@test "bad usage: no mode, a bad mode, no GPUs, an epilog without the job, bad values" {
    gpus
    unset SLURM_JOB_GPUS SLURM_JOB_ID SLURM_JOB_UID CUDA_VISIBLE_DEVICES SLURM_STEP_GPUS
    ho
    [ "$status" -eq 64 ] && [[ $stderr == *"say which check"* ]]
    ho teardown
    [ "$status" -eq 64 ] && [[ $stderr == *"is not 'prolog', 'epilog' or 'node'"* ]]
    ho node --gpus 0
    [ "$status" -eq 64 ] && [[ $stderr == *"node checks every GPU and no job"* ]]
    ho prolog
    [ "$status" -eq 64 ] && [[ $stderr == *"no GPUs named"* ]]
    # From Slurm (SLURM_JOB_ID set), a job without GPUs has nothing to hand over.
    SLURM_JOB_ID=9 SLURM_JOB_UID=0 ho epilog
    [ "$status" -eq 0 ] && [ "$output" = "vramguard: clean: job 9 has no GPUs here: nothing to hand over" ]
    ho epilog --gpus 0
    [ "$status" -eq 64 ] && [[ $stderr == *"needs the job's id and user"* ]]
    SLURM_JOB_GPUS=0,x ho prolog
    [ "$status" -eq 64 ] && [[ $stderr == *"'x' is not a GPU"* ]]
    ho epilog --gpus 0 --job 1 --uid 0 --timeout forever
    [ "$status" -eq 64 ] && [[ $stderr == *"--timeout takes a duration"* ]]
    ho prolog --gpus 0 --tolerance lots
    [ "$status" -eq 64 ]
}

@test "--drain runs scontrol with the node and the reason line when the node is not ready" {
    mkdir -p "$TMP/bin"
    printf '#!/bin/sh\nprintf "%%s\\n" "$@" > %s/scontrol.args\n' "$TMP" >"$TMP/bin/scontrol"
    chmod +x "$TMP/bin/scontrol"
    gpus
    sed 's/^\(gpu index=1 .*\)util=0$/\1util=0 used=3GiB/' "$FAKE_NVML_SCENARIO" | vg_scenario
    job 51 0
    PATH=$TMP/bin:$PATH SLURMD_NODENAME=gpu-node-7 ho prolog --drain
    [ "$status" -eq 0 ]
    [ ! -e "$TMP/scontrol.args" ]
    job 51 1
    PATH=$TMP/bin:$PATH SLURMD_NODENAME=gpu-node-7 ho prolog --drain --json
    show
    [ "$status" -eq 1 ]
    [ "$(json .drain.ran)" = true ] && [ "$(json .drain.exit_status)" = 0 ]
    [ "$(sed -n 1p "$TMP/scontrol.args")" = update ]
    [ "$(sed -n 2p "$TMP/scontrol.args")" = nodename=gpu-node-7 ]
    [ "$(sed -n 3p "$TMP/scontrol.args")" = state=drain ]
    [ "$(sed -n 4p "$TMP/scontrol.args")" = "reason=vramguard: dirty: GPU 1: 3 GiB used and no process holds it" ]
    # scontrol refusing: its status in the document, the message names it, exit 70
    printf '#!/bin/sh\nexit 3\n' >"$TMP/bin/scontrol"
    PATH=$TMP/bin:$PATH SLURMD_NODENAME=gpu-node-7 ho prolog --drain --json
    show
    [ "$status" -eq 70 ]
    [ "$(json .drain.ran)" = true ] && [ "$(json .drain.exit_status)" = 3 ]
    [[ $(json .drain.error) == "scontrol (PID "*") exited with status 3" ]]
    [[ $stderr == *"--drain failed: scontrol (PID "*") exited with status 3"* ]]
}

@test "node: leftover memory of an ended job is dirty (nothing signalled); a working job is not" {
    start L --pgrp --orphan --comm pt_data_worker --open "$DEVDIR/nvidia2" -- python train.py
    start J --open "$DEVDIR/nvidia0" -- python serve.py
    gpus "proc gpu=2 pid=$L type=compute mem=3GiB sm=0 exits=1" "proc gpu=0 pid=$J type=compute mem=30GiB sm=90 exits=1"
    unset SLURM_JOB_GPUS SLURM_JOB_ID SLURM_JOB_UID
    ho node --json
    show
    [ "$status" -eq 1 ]
    [ "$(json '.gpus | length')" = 4 ]
    [ "$(json '.gpus[0].outcome')" = clean ]
    [ "$(json '.gpus[2].outcome')" = dirty ] && [ "$(json '.gpus[2].cause')" = leftover ]
    [[ $(json .reason) == "vramguard: dirty: GPU 2 held by pid $L ("*"), a leftover of an ended job, 3 GiB" ]]
    [ "$(json .signalled)" = 0 ]
    ! signalled "$L"
    kill "$L"
    wait_for "vg_gone $L"
    ho node
    show
    [ "$status" -eq 0 ] && [ "$output" = "vramguard: clean: GPUs 0,1,2,3 free" ]
}

@test "node: memory no process explains next to a live holder: the reason names both, as the holder list does" {
    start J --open "$DEVDIR/nvidia3" -- python serve.py
    start K --open "$DEVDIR/nvidia3" --open "$DEVDIR/nvidia2" -- python worker.py
    gpus "proc gpu=3 pid=$J type=compute mem=10GiB sm=90 exits=1"
    sed -e 's/^\(gpu index=3 .*\)util=0$/\1util=0 used=12GiB/' \
        -e 's/^\(gpu index=2 .*\)util=0$/\1util=0 used=3GiB/' "$FAKE_NVML_SCENARIO" | vg_scenario
    unset SLURM_JOB_GPUS SLURM_JOB_ID SLURM_JOB_UID
    ho node --json
    show
    [ "$status" -eq 1 ]
    [ "$(json '.gpus[3].outcome')" = dirty ] && [ "$(json '.gpus[3].cause')" = unexplained ]
    [ "$(json '.gpus[3].holders | map(select(.present)) | length')" = 2 ]
    [[ $(json .reason) == "vramguard: dirty: GPU 2: 3 GiB used and unexplained; pid $K ("*") holds only its device node; 1 more GPU dirty" ]]
    [[ $(json '.gpus[3].reason') == "GPU 3: 12 GiB used, 10 GiB by pid $J ("*"), 2 GiB unexplained; pid $K ("*") holds only its device node" ]]
    [[ $(json .reason) != *"no process holds it"* ]]
    ! signalled "$J"
    ! signalled "$K"
}

# ---------------------------------------------------------------- infrastructure by what it is

# disguised: four nobody-owned leftovers of job 42, one a GPU, each holding 70 GiB and named as
# infrastructure by what a process chooses (issue 27): comm Xorg, argv[0] /usr/bin/nvidia-smi, comm
# vramguard, comm gdm-x-session. What each runs is vg-helper, a file under the build tree.
disguised() {
    start A --uid nobody --env SLURM_JOB_ID=42 --comm Xorg --open "$DEVDIR/nvidia0" -- Xorg :0
    VG_ARGV0=/usr/bin/nvidia-smi start B --uid nobody --env SLURM_JOB_ID=42 --open "$DEVDIR/nvidia1" -- -l 1
    start C --uid nobody --env SLURM_JOB_ID=42 --comm vramguard --open "$DEVDIR/nvidia2" -- vramguard watch
    start D --uid nobody --env SLURM_JOB_ID=42 --comm gdm-x-session --open "$DEVDIR/nvidia3" -- gdm-x-session
    gpus "proc gpu=0 pid=$A type=compute mem=70GiB exits=1" "proc gpu=1 pid=$B type=compute mem=70GiB exits=1" \
        "proc gpu=2 pid=$C type=compute mem=70GiB exits=1" "proc gpu=3 pid=$D type=compute mem=70GiB exits=1"
}

@test "epilog: a leftover named like infrastructure (comm, argv[0]) is a holder, never clean" {
    [ "$(id -u)" -eq 0 ] || skip "needs root (starts processes as nobody)"
    disguised
    # the job is root's: nobody's leftovers are another user's, so dirty and left alone
    job 42 0,1,2,3
    ho epilog --timeout 2s --json
    show
    [ "$status" -eq 1 ]
    [ "$(json .outcome)" = dirty ]
    [ "$(json '[.gpus[].outcome] | unique | join(",")')" = dirty ]
    [ "$(json '[.gpus[].holders[0].owner] | unique | join(",")')" = other ]
    [ "$(json '[.gpus[].holders[0].infrastructure] | unique | join(",")')" = "" ]
    [ "$(json '[.gpus[].holders[0].infrastructure_check.verdict] | unique | join(",")')" = impostor ]
    [ "$(json '[.gpus[].holders[0].infrastructure_check.claims] | join(",")')" = "Xorg,nvidia-smi,vramguard,gdm*" ]
    [ "$(json '.gpus[0].holders[0].infrastructure_check.facts | index("exe-other") != null')" = true ]
    [[ $(json .reason) == "vramguard: dirty: GPU 0 held by pid $A (nobody, "*"), not job 42, 70 GiB; 3 more GPUs dirty" ]]
    # the other modes agree: the prolog and the node check never call them clean either
    ho prolog
    show
    [ "$status" -eq 1 ]
    [[ $output == "vramguard: dirty: "* ]]
}

@test "epilog: the same disguised leftovers of the job's own user are stopped: cleaned" {
    [ "$(id -u)" -eq 0 ] || skip "needs root (starts processes as nobody)"
    disguised
    export SLURM_JOB_ID=42 SLURM_JOB_UID=$(id -u nobody) SLURM_JOB_GPUS=0,1,2,3
    ho epilog --timeout 20s --json
    show
    [ "$status" -eq 0 ]
    [ "$(json .outcome)" = cleaned ]
    [ "$(json .signalled)" = 4 ]
    [ "$(json '[.gpus[].holders[0].owner] | unique | join(",")')" = job ]
    # (nobody cannot write the signal log: the outcome and the processes gone tell instead)
    [ "$(json '[.gpus[].holders[0].outcome] | unique | join(",")')" = terminated ]
    for p in "$A" "$B" "$C" "$D"; do wait_for "vg_gone $p"; done
}

@test "epilog: real infrastructure (root's binary in root's directory, run by root) still counts; the same binary as nobody, deleted, or in a directory others may write does not" {
    [ "$(id -u)" -eq 0 ] || skip "needs root (a root-owned directory, processes as nobody)"
    X=$(vg_infra_bin Xorg)
    P=$(vg_infra_bin nvidia-persistenced)
    W=$(vg_infra_bin Xorg 1777)
    HELPER=$X start R --open "$DEVDIR/nvidia0" -- /usr/lib/xorg/Xorg :0
    HELPER=$X start N --uid nobody --open "$DEVDIR/nvidia1" -- Xorg :1
    HELPER=$P start G --open "$DEVDIR/nvidia2" -- nvidia-persistenced
    rm -f "$P"
    HELPER=$W start T --open "$DEVDIR/nvidia3" -- Xorg :3
    [ "$(vg_stat "$R" comm)" = Xorg ]
    [[ $(readlink "/proc/$G/exe") == *" (deleted)" ]]
    gpus "proc gpu=0 pid=$R type=graphics mem=1GiB" "proc gpu=1 pid=$N type=graphics mem=1GiB" \
        "proc gpu=2 pid=$G type=compute mem=1GiB" "proc gpu=3 pid=$T type=graphics mem=1GiB"
    # a user's job (a root job would make root's processes the job's)
    export SLURM_JOB_ID=50 SLURM_JOB_UID=$(id -u nobody) SLURM_JOB_GPUS=0,1,2,3
    ho epilog --timeout 2s --json
    show
    [ "$status" -eq 1 ]
    [ "$(json '.gpus[0].outcome')" = clean ]
    [ "$(json '.gpus[0].holders[0].owner')" = infrastructure ]
    [ "$(json '.gpus[0].holders[0].infrastructure')" = Xorg ]
    [ "$(json '.gpus[0].holders[0].infrastructure_check.verdict')" = proven ]
    # nobody's: the job's uid, never infrastructure, and here it carries no mark of the job
    [ "$(json '.gpus[1].outcome')" = dirty ]
    [ "$(json '.gpus[1].holders[0].owner')" = other ]
    [ "$(json '.gpus[2].outcome')" = dirty ]
    [ "$(json '.gpus[2].holders[0].infrastructure_check.verdict')" = unproven ]
    [ "$(json '.gpus[3].outcome')" = dirty ]
    [ "$(json '.gpus[3].holders[0].infrastructure_check.facts | index("dirs-untrusted") != null')" = true ]
    [ "$(json .signalled)" = 0 ]
    for p in "$R" "$N" "$G" "$T"; do ! signalled "$p"; done
    # the real one alone: clean
    gpus "proc gpu=0 pid=$R type=graphics mem=1GiB"
    export SLURM_JOB_GPUS=0
    ho epilog --timeout 2s
    show
    [ "$status" -eq 0 ]
    [ "$output" = "vramguard: clean: GPU 0 free" ]
}
