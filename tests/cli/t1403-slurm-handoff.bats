#!/usr/bin/env bats
# t1403-slurm-handoff: `vramguard handoff` as a real Slurm runs it. A one-node cluster
# (tests/slurm/lib.bash: slurmctld, slurmd, munged, Gres=gpu:4) runs the project's own
# contrib/slurm/vramguard-prolog and vramguard-epilog, through a shim that gives vramguard the
# fake driver and this test's device files (slurmd starts them with an environment of its own).
# Jobs are real sbatch jobs; their leftovers are real processes holding the device files, and
# the fake driver lists their memory only while they run (exits=1), as the real one does.
# Skipped, with the reason, where Slurm cannot start.

load lib
load ../slurm/lib

bats_require_minimum_version 1.5.0

setup_file() {
    local d
    # Jobs run as nobody: what they read or write lives where nobody reaches (bats' own
    # directories are not), removed by teardown_file.
    d=$(mktemp -d /tmp/vg-ho.XXXXXX)
    chmod 1777 "$d"
    export HO=$d
    export VG_SLURM_PROLOG=$d/prolog VG_SLURM_EPILOG=$d/epilog
    # The shim: the vramguard the contrib scripts run, with the fake driver and device files.
    # Their directories must be reachable by the jobs' user (nobody) too.
    export VGDEV=$d/dev
    mkdir -p "$VGDEV"
    for i in 0 1 2 3; do : >"$VGDEV/nvidia$i"; done
    chmod 755 "$VGDEV" && chmod 644 "$VGDEV"/*
    cp "$HELPER" "$d/vg-helper"
    chmod 755 "$d/vg-helper"
    export JOBHELPER=$d/vg-helper
    export SCENARIO=$d/scenario
    cat >"$d/vramguard" <<EOF
#!/bin/sh
FAKE_NVML_SCENARIO=$SCENARIO exec "$VG" --nvml "$FAKE_FULL" --dev "$VGDEV" --nvml-timeout 2s "\$@"
EOF
    for end in prolog epilog; do
        cat >"$d/$end" <<EOF
#!/bin/sh
VRAMGUARD=$d/vramguard VRAMGUARD_HANDOFF_LOG=$d/\$SLURM_JOB_ID.$end.log \\
VRAMGUARD_EPILOG_OPTIONS="--timeout 8s --grace 2s" VRAMGUARD_HANDOFF_DEFAULTS=/nonexistent \\
    exec "$ROOT/contrib/slurm/vramguard-$end"
EOF
    done
    chmod 755 "$d/vramguard" "$d/prolog" "$d/epilog"
    scenario
    vg_slurm_start
}

teardown_file() {
    vg_slurm_stop
    if [[ ${HO:-} == /tmp/vg-ho.* ]]; then rm -rf -- "$HO"; fi
}

setup() {
    vg_slurm_require
    scenario
}

# Each test leaves the node idle, no job queued, and kills what it started.
teardown() {
    if [[ -n ${VG_SLURM_DIR:-} && -f ${SLURM_CONF:-} ]]; then
        vg_slurm_cancel_all 20 || true
        if [[ $(vg_slurm_node_state) != IDLE ]]; then vg_slurm_resume 30 || true; fi
    fi
    vg_cleanup
}

# scenario LINE...: four GPUs (Slurm's 0-3 are minors 0-3) and the given lines, atomically.
scenario() {
    local i
    {
        for i in 0 1 2 3; do
            echo "gpu index=$i uuid=GPU-$i$i$i$i$i$i$i$i-0000-0000-0000-000000000000 name=\"NVIDIA H100\" minor=$i total=80GiB reserved=512MiB util=0"
        done
        printf '%s\n' "$@"
    } >"$SCENARIO.tmp" && mv -f "$SCENARIO.tmp" "$SCENARIO"
}

# A job script that starts a leftover (vg-helper ARGS...), waits until the test has told the
# driver about it ($HO/go.JOBID), and exits; the leftover's pid goes to $HO/w.JOBID.
leftover_job() {
    printf '#!/bin/sh\n"%s" --pidfile "%s/w.$SLURM_JOB_ID" --lifetime 300 %s\n' "$JOBHELPER" "$HO" "$*"
    printf 'i=0; while [ ! -e "%s/go.$SLURM_JOB_ID" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done\n' "$HO"
    printf 'date +%%s.%%N > "%s/end.$SLURM_JOB_ID"\n' "$HO"
}

# submit SCRIPT_TEXT: submits it with one GPU (as nobody); sets J and G (its Slurm GPU).
submit() {
    printf '%s\n' "$1" >"$HO/job.sh"
    chmod 755 "$HO/job.sh"
    J=$(vg_slurm_sbatch --as nobody --gres=gpu:1 "$HO/job.sh")
    [[ $J =~ ^[0-9]+$ ]]
}

# leftover_pid: waits for the job's leftover and prints its pid.
leftover_pid() {
    vg_slurm_wait "[[ -s $HO/w.$J ]]" 30
    awk '$1 == "main" { print $2 }' "$HO/w.$J"
}

# The job's GPU: from the prolog's log (SLURM_JOB_GPUS is not in the job's script output),
# whose detail lines read "clean: GPU 0 (...) free; ...".
job_gpu() {
    vg_slurm_wait "[[ -s $HO/$J.prolog.log ]]" 30
    sed -n 's/^[a-z]*: GPU \([0-9]\) .*/\1/p' "$HO/$J.prolog.log" | head -n 1
}

# job_leaves MEM ARGS...: a job (of nobody, one GPU) leaves a leftover (vg-helper ARGS...)
# that the driver lists on the job's GPU with MEM, and ends; waits until Slurm says COMPLETED.
# Sets J, W (the leftover's pid) and G (the job's GPU).
job_leaves() {
    local mem=$1
    shift
    submit "$(leftover_job "$@")"
    W=$(leftover_pid)
    G=$(job_gpu)
    scenario "proc gpu=$G pid=$W type=compute mem=$mem exits=1"
    touch "$HO/go.$J"
    [ "$(vg_slurm_wait_job "$J" 40)" = COMPLETED ]
}

log() {
    echo "--- epilog log of job $J:"
    cat "$HO/$J.epilog.log" 2>/dev/null || true
}

@test "a job that exits cleanly: the epilog says clean and the node stays idle" {
    J=$(vg_slurm_sbatch --gres=gpu:2 --wrap 'true')
    [ "$(vg_slurm_wait_job "$J" 30)" = COMPLETED ]
    log
    grep -q '^vramguard: clean: GPUs [0-3],[0-3] free$' "$HO/$J.epilog.log"
    vg_slurm_wait_node IDLE 20
}

@test "an orphaned worker holding memory: the epilog stops it, cleaned, the node idle" {
    job_leaves 6GiB --pgrp --orphan --comm pt_data_worker --open "$VGDEV/nvidia\$SLURM_JOB_GPUS" -- python train.py
    vg_slurm_wait_node IDLE 20
    idle=$(date +%s.%N)
    log
    grep -q "^vramguard: cleaned: stopped 1 leftover process of job $J; GPU $G free after " "$HO/$J.epilog.log"
    wait_for "vg_gone $W"
    # For the record (closing note of issue 14): job end -> node idle, and the hand-off itself.
    echo "job end -> node idle: $(echo "$idle - $(cat "$HO/end.$J")" | bc) s" >&3
    grep '^epilog of' "$HO/$J.epilog.log" | sed 's/^/hand-off: /' >&3
    sed 's/^/  | /' "$HO/$J.epilog.log" >&3
}

@test "a setsid daemon the job left is the job's: stopped" {
    job_leaves 900MiB --setsid --orphan --open "$VGDEV/nvidia\$SLURM_JOB_GPUS" -- /usr/bin/mydaemon
    log
    grep -q "^vramguard: cleaned: stopped 1 leftover process of job $J" "$HO/$J.epilog.log"
    wait_for "vg_gone $W"
    vg_slurm_wait_node IDLE 20
}

# hold_job: a job that runs until the test says go ($HO/go.JOBID), so that the test can put
# things on its GPU between the prolog and the epilog.
hold_job() {
    submit "$(printf '#!/bin/sh\ni=0; while [ ! -e "%s/go.$SLURM_JOB_ID" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done\n' "$HO")"
    vg_slurm_wait "[[ -s $HO/$J.prolog.log ]]" 30
}

# squat ARGS...: a process of another user (daemon) holding all four device files.
squat() {
    vg_spawn --uid daemon --open "$VGDEV/nvidia0" --open "$VGDEV/nvidia1" --open "$VGDEV/nvidia2" \
        --open "$VGDEV/nvidia3" "$@" >/dev/null
}

@test "another user's process on the job's GPU: dirty, left alone, the node drained with the reason" {
    hold_job
    squat -- python notebook.py
    O=$VG_PID
    scenario "proc gpu=0 pid=$O type=compute mem=2GiB" "proc gpu=1 pid=$O type=compute mem=2GiB" \
        "proc gpu=2 pid=$O type=compute mem=2GiB" "proc gpu=3 pid=$O type=compute mem=2GiB"
    touch "$HO/go.$J"
    [ "$(vg_slurm_wait_job "$J" 40)" = COMPLETED ]
    vg_slurm_wait "[[ \$(vg_slurm_node_state) == *DRAIN* ]]" 30
    log
    reason=$(vg_slurm_node_reason)
    echo "drain reason: $reason"
    [[ $reason == *"vramguard: dirty: GPU "[0-3]" held by pid $O (daemon, "*"), not job $J, 2 GiB"* ]]
    ! vg_gone "$O"
}

@test "a holder stuck in D state: wedged within the timeout, the node drained" {
    hold_job
    squat --dstate -- python stuck.py
    touch "$HO/go.$J"
    [ "$(vg_slurm_wait_job "$J" 60)" = COMPLETED ]
    vg_slurm_wait "[[ \$(vg_slurm_node_state) == *DRAIN* ]]" 30
    log
    [[ $(vg_slurm_node_reason) == *"vramguard: wedged: GPU "[0-3]" held by pid "*", stuck in the driver (D state)"* ]]
}

@test "a hung driver: wedged within --nvml-timeout, the node drained" {
    hold_job
    scenario "hang func=nvmlDeviceGetMemoryInfo_v2 seconds=60"
    touch "$HO/go.$J"
    SECONDS=0
    [ "$(vg_slurm_wait_job "$J" 60)" = COMPLETED ]
    vg_slurm_wait "[[ \$(vg_slurm_node_state) == *DRAIN* ]]" 30
    log
    ((SECONDS < 45))
    [[ $(vg_slurm_node_reason) == *"vramguard: wedged: GPU "[0-3]" hung"* ]]
}

@test "the prolog refuses a GPU that is not empty: the job is held, the node drained" {
    squat -- python squatter.py
    O=$VG_PID
    scenario "proc gpu=0 pid=$O type=compute mem=1GiB" "proc gpu=1 pid=$O type=compute mem=1GiB" \
        "proc gpu=2 pid=$O type=compute mem=1GiB" "proc gpu=3 pid=$O type=compute mem=1GiB"
    J=$(vg_slurm_sbatch --as nobody --gres=gpu:1 --wrap 'touch ran')
    vg_slurm_wait "[[ \$(vg_slurm_node_state) == *DRAIN* ]]" 40
    echo "--- prolog log:"
    cat "$HO/$J.prolog.log"
    grep -q "^vramguard: dirty: GPU [0-3] held by pid $O (daemon, " "$HO/$J.prolog.log"
    vg_slurm_wait "[[ \$(vg_slurm_job_state $J) == PENDING ]]" 30
    [ ! -e "$VG_SLURM_JOBDIR/ran" ]
    ! vg_gone "$O"
}
