#!/usr/bin/env bats
# t1401-slurm-harness: the real one-node Slurm cluster of tests/slurm/lib.bash, on its own,
# before any vramguard hand-off is configured in it (issue 14). The cluster starts once for the
# file; its prolog and epilog are recorders (vg_slurm_recorder) that keep the environment and
# identity they ran with. What it shows is what the hand-off tests rely on: a job given
# --gres=gpu:2 sees two stand-in GPUs; the prolog and epilog run as root with the job's id, user
# and GPUs; a process the job leaves behind with setsid outlives the job (only an epilog can
# clean it); the node is idle again after each job; an epilog that fails drains the node with
# a reason until it is resumed; and stopping a cluster leaves no process, cgroup or directory.
# Skipped, with the reason, where Slurm cannot start (not root, packages missing).

load lib
load ../slurm/lib

setup_file() {
    export REC=$BATS_FILE_TMPDIR/rec
    export VG_SLURM_PROLOG=$BATS_FILE_TMPDIR/prolog VG_SLURM_EPILOG=$BATS_FILE_TMPDIR/epilog
    vg_slurm_recorder "$VG_SLURM_PROLOG" "$REC"
    vg_slurm_recorder "$VG_SLURM_EPILOG" "$REC"
    vg_slurm_start
}

teardown_file() {
    vg_slurm_stop
}

setup() {
    vg_slurm_require
}

# Each test leaves the node as it found it: the recorders in place and exiting 0, the node idle.
teardown() {
    rm -f "$REC/prolog.rc" "$REC/epilog.rc"
    if [[ -n ${VG_SLURM_DIR:-} ]] && ! grep -q vg_slurm_recorder "$VG_SLURM_EPILOG"; then
        vg_slurm_recorder "$VG_SLURM_EPILOG" "$REC"
    fi
    if [[ -n ${VG_SLURM_DIR:-} && -f ${SLURM_CONF:-} && $(vg_slurm_node_state) != IDLE ]]; then
        vg_slurm_cancel_all 20 || true
        vg_slurm_resume 20 || true
    fi
    vg_cleanup
}

# var FILE NAME: the value of NAME in an `env` dump FILE (fails when absent).
var() {
    local line
    line=$(grep -m 1 "^$2=" "$1") || return 1
    printf '%s\n' "${line#*=}"
}

@test "a job given --gres=gpu:2 runs, ends within the wait and sees two GPUs" {
    local j state gpus
    j=$(vg_slurm_sbatch --gres=gpu:2 --wrap 'env > out')
    [[ $j =~ ^[0-9]+$ ]]
    state=$(vg_slurm_wait_job "$j" 30)
    [ "$state" = COMPLETED ]
    gpus=$(var "$VG_SLURM_JOBDIR/out" SLURM_JOB_GPUS)
    echo "SLURM_JOB_GPUS=$gpus"
    [[ $gpus =~ ^[0-3],[0-3]$ ]]
    [ "${gpus%,*}" != "${gpus#*,}" ]
    [ "$(var "$VG_SLURM_JOBDIR/out" CUDA_VISIBLE_DEVICES)" = "$gpus" ]
    [ "$(var "$VG_SLURM_JOBDIR/out" SLURM_JOB_ID)" = "$j" ]
    vg_slurm_wait_node IDLE 20
}

@test "the prolog and epilog run as root with the job's id, user and GPUs" {
    local j f gpus
    j=$(vg_slurm_sbatch --as nobody --gres=gpu:1 --wrap 'env > out.$SLURM_JOB_ID')
    [ "$(vg_slurm_wait_job "$j" 30)" = COMPLETED ]
    gpus=$(var "$VG_SLURM_JOBDIR/out.$j" SLURM_JOB_GPUS)
    [[ $gpus =~ ^[0-3]$ ]]
    [ "$(var "$VG_SLURM_JOBDIR/out.$j" CUDA_VISIBLE_DEVICES)" = "$gpus" ]
    for f in "$REC/prolog.$j" "$REC/epilog.$j"; do
        echo "--- $f.env"
        cat "$f.env"
        grep -q '^uid=0(root)' "$f.id"
        [ "$(var "$f.env" SLURM_JOB_ID)" = "$j" ]
        [ "$(var "$f.env" SLURM_JOB_UID)" = "$(id -u nobody)" ]
        [ "$(var "$f.env" SLURM_JOB_USER)" = nobody ]
        [ "$(var "$f.env" SLURM_JOB_GPUS)" = "$gpus" ]
        [ "$(var "$f.env" CUDA_VISIBLE_DEVICES)" = "$gpus" ]
    done
    [ "$(var "$REC/prolog.$j.env" SLURM_SCRIPT_CONTEXT)" = prolog_slurmd ]
    [ "$(var "$REC/epilog.$j.env" SLURM_SCRIPT_CONTEXT)" = epilog_slurmd ]
    # The environment is Slurm's own, not slurmd's: no PATH for a script to rely on.
    run var "$REC/epilog.$j.env" PATH
    [ "$status" -ne 0 ]
    vg_slurm_wait_node IDLE 20
}

@test "a process the job leaves with setsid outlives it; the node is idle again soon after" {
    local j pid end epi idle
    j=$(vg_slurm_sbatch --gres=gpu:2 --wrap \
        'setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $! > left.$SLURM_JOB_ID; date +%s.%N > end.$SLURM_JOB_ID')
    [ "$(vg_slurm_wait_job "$j" 30)" = COMPLETED ]
    vg_slurm_wait_node IDLE 20
    _vg_now
    idle=$_VG_NOW
    pid=$(cat "$VG_SLURM_JOBDIR/left.$j")
    _vg_record leftover "$pid"
    if vg_gone "$pid"; then
        echo "the setsid leftover $pid died with its job"
        return 1
    fi
    [ "$(vg_stat "$pid" session)" = "$pid" ]
    [ "$(vg_stat "$pid" comm)" = sleep ]
    # It still carries the job's identity: what the epilog goes by.
    grep -qzx "SLURM_JOB_ID=$j" "/proc/$pid/environ"
    [ "$(stat -c %u "/proc/$pid")" = 0 ]
    # Timings, for the record (TAP comments): job end -> epilog start -> node seen idle.
    end=$(cat "$VG_SLURM_JOBDIR/end.$j")
    epi=$(sed -n 's/^start //p' "$REC/epilog.$j.time")
    awk -v end="$end" -v epi="$epi" -v idle="${idle:0:-6}.${idle: -6}" 'BEGIN {
        printf "# job end -> epilog start %.3f s, -> node seen idle %.3f s\n", epi - end, idle - end
    }' >&3
    kill -KILL "$pid"
}

@test "an epilog that exits non-zero drains the node with its reason; resume makes it idle" {
    local j
    echo 3 >"$REC/epilog.rc"
    j=$(vg_slurm_sbatch --gres=gpu:1 --wrap true)
    [ "$(vg_slurm_wait_job "$j" 30)" = COMPLETED ]
    vg_slurm_wait_node IDLE+DRAIN 20
    [ -f "$REC/epilog.$j.env" ]
    [ "$(vg_slurm_node_reason)" = "Epilog error" ]
    run scontrol show node "$VG_SLURM_NODE"
    [[ $output == *"Reason=Epilog error"* ]]
    run sinfo -h -n "$VG_SLURM_NODE" -o %T
    [ "$output" = drained ]
    rm -f "$REC/epilog.rc"
    vg_slurm_resume 20
    [ -z "$(vg_slurm_node_reason)" ]
    # And it runs jobs again.
    j=$(vg_slurm_sbatch --gres=gpu:4 --wrap true)
    [ "$(vg_slurm_wait_job "$j" 30)" = COMPLETED ]
    vg_slurm_wait_node IDLE 20
}

@test "a prolog that exits non-zero drains the node and holds the job" {
    local j
    echo 4 >"$REC/prolog.rc"
    j=$(vg_slurm_sbatch --gres=gpu:1 --wrap true)
    vg_slurm_wait_node IDLE+DRAIN 20
    [ "$(vg_slurm_node_reason)" = "Prolog error" ]
    vg_slurm_wait "[[ \$(vg_slurm_job_state $j) == PENDING ]]" 20
    run scontrol -o show job "$j"
    [[ $output == *Reason=launch_failed_requeued_held* ]]
    scancel "$j"
    rm -f "$REC/prolog.rc"
    vg_slurm_resume 20
}

@test "an epilog replaced between jobs (vg_slurm_wrap) runs with the variables it sets" {
    local j saved=$BATS_TEST_TMPDIR/recorder
    cp "$VG_SLURM_EPILOG" "$saved"
    vg_slurm_wrap "$VG_SLURM_EPILOG" VG_HANDOFF_TEST='two words' -- "$saved"
    j=$(vg_slurm_sbatch --gres=gpu:1 --wrap true)
    [ "$(vg_slurm_wait_job "$j" 30)" = COMPLETED ]
    [ "$(var "$REC/epilog.$j.env" VG_HANDOFF_TEST)" = 'two words' ]
    [ "$(var "$REC/epilog.$j.env" SLURM_JOB_ID)" = "$j" ]
    grep -qx "job $j: rc 0" "$VG_SLURM_EPILOG.log"
    vg_slurm_recorder "$VG_SLURM_EPILOG" "$REC"
    vg_slurm_wait_node IDLE 20
}

@test "vg_slurm_stop leaves no process, cgroup, mount or directory, even a job's setsid leftover" {
    local dir cg pid left
    (
        # A second cluster of its own, without the file's prolog and epilog.
        unset VG_SLURM_PROLOG VG_SLURM_EPILOG
        vg_slurm_start
        j=$(vg_slurm_sbatch --wrap 'setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $! > left')
        vg_slurm_wait_job "$j" 30 >/dev/null
        echo "$VG_SLURM_DIR $(cat "$VG_SLURM_DIR/run/cgroup") $(cat "$VG_SLURM_JOBDIR/left")" >"$BATS_TEST_TMPDIR/second"
        vg_slurm_stop
    )
    read -r dir cg pid <"$BATS_TEST_TMPDIR/second"
    [ -n "$dir" ] && [ -n "$pid" ]
    vg_gone "$pid"
    [ ! -e "$dir" ]
    [ -z "$cg" ] || [ ! -e "$cg" ]
    run grep -F "$dir" /proc/self/mountinfo
    [ "$status" -ne 0 ]
    left=$(grep -lzxF -- "VG_SLURM_TAG=$dir" /proc/[0-9]*/environ 2>/dev/null) || true
    [ -z "$left" ] || { echo "still running: $left"; return 1; }
    # The file's own cluster is unharmed.
    [ "$(vg_slurm_node_state)" = IDLE ]
}
