# shellcheck shell=bash disable=SC2034 # the variables set here are for the test files
# tests/slurm/lib.bash: a real one-node Slurm cluster (Debian's slurmctld, slurmd and munged) that
# a bats file starts for itself, for the scheduler hand-off tests of issue 14. Load it from a
# file in tests/cli with `load ../slurm/lib`; it needs nothing from tests/cli/lib.bash.
#
# Everything lives in one temporary directory, VG_SLURM_DIR (short, under /tmp: a unix socket's
# path is limited to 108 bytes): munge's key, socket, seed and log; slurm.conf and gres.conf;
# slurmctld's state, slurmd's spool, pid files and logs; the stand-in GPUs; the jobs' output.
# Nothing outside it is written, no port is fixed (two free loopback ports are picked), nothing
# is mounted, so two clusters (two worktrees testing at once) do not meet.
#
# Starting (vg_slurm_start, normally in setup_file). Set before the call:
#   VG_SLURM_PROLOG, VG_SLURM_EPILOG  absolute paths of executables slurmd runs as Prolog= and
#                        Epilog= (none when unset); vg_slurm_recorder writes one that records.
#   VG_SLURM_CONF_EXTRA  lines for slurm.conf (e.g. $'PrologFlags=Alloc\nEpilogMsgTime=100'); a
#                        Key= given here replaces the default line with that key.
#   VG_SLURM_GPUS        how many stand-in GPUs (default 4): Gres=gpu:N over $VG_SLURM_DIR/dev/
#                        nvidia0..N-1, character devices of the null device (mknod c 1 3, mode
#                        666): slurmd hands out only character devices, and job processes can
#                        open these.
#   VG_SLURM_START_TIMEOUT  seconds to wait for the node to be idle (default 60).
#   VG_SLURM_REQUIRE=1   a cluster that cannot start fails the caller instead of skipping.
#   VG_SLURM_LIFETIME    seconds after which a watchdog kills the cluster whatever happens
#                        (default 900); it also kills it as soon as the bats process that started
#                        it is gone (bats killed midway, even with SIGKILL).
# It skips, with the reason, when not root, when a program is missing, when the device nodes
# cannot be made or when the daemons do not come up (their logs' tails on stderr), having
# stopped what it started: inside a test with bats' `skip`; in setup_file, where bats 1.8 has
# no skip, it exports VG_SLURM_SKIP (the reason) and returns 0, and the file's setup() calls
# vg_slurm_require, which skips each test with that reason.
# After it: SLURM_CONF (exported: every client command finds the cluster through it),
# VG_SLURM_DIR, VG_SLURM_NODE (the node's name), VG_SLURM_DEVDIR (the stand-in GPUs),
# VG_SLURM_JOBDIR (world-writable: the default working directory and output of jobs). They are
# exported, so setup_file's values reach the tests.
#
# Stopping (vg_slurm_stop, in teardown_file; safe to call twice or with nothing started): every
# process the cluster started dies, daemons, slurmstepd, prolog, epilog and job processes, also
# those that called setsid and were reparented: all of them are in a cgroup made for the cluster
# (the cgroup v2 tree, else v1's pids tree), killed through cgroup.kill or pid by pid until it is
# empty; where no cgroup can be made (or VG_SLURM_CGROUP=0), the jobs are cancelled first, then
# the daemons' pids and every process whose environment holds VG_SLURM_TAG=$VG_SLURM_DIR (the
# daemons' and the jobs vg_slurm_sbatch submitted, their leftovers too) are killed. Then
# the directory is removed (VG_SLURM_KEEP=1 keeps it, for reading the logs).
#
# Jobs and the node (every wait is a bounded poll):
#   vg_slurm_sbatch [--as USER] ARGS...  sbatch --parsable, working directory and output
#                        (%j.out) in VG_SLURM_JOBDIR unless ARGS say otherwise, stdin an empty
#                        file (not /dev/null: on some sandboxes only root may open it, and the
#                        job then fails to launch); prints the job id.
#                        --as submits as USER (runuser), so the job runs as that user.
#   vg_slurm_job_state ID       prints the job's state (PENDING, RUNNING, COMPLETING, COMPLETED..).
#   vg_slurm_wait_job ID [TIMEOUT]  waits until the job has ended and its epilog is done (a final
#                        state, not COMPLETING; default 30 s); prints the state.
#   vg_slurm_node_state         prints the node's State= from scontrol (IDLE, MIXED, IDLE+DRAIN,
#                        IDLE+NOT_RESPONDING, ...).
#   vg_slurm_wait_node STATE [TIMEOUT]  waits until vg_slurm_node_state prints exactly STATE.
#   vg_slurm_node_reason        prints the node's drain reason (sinfo -R), empty when none.
#   vg_slurm_resume             scontrol update state=resume, then waits for IDLE.
#   vg_slurm_cancel_all [TIMEOUT]  cancels every job (all its processes) and waits until none is
#                        pending, running or completing.
#   vg_slurm_recorder PATH DIR [NAME]  writes an executable PATH that, run as a prolog or epilog,
#                        records into DIR: NAME.JOBID.env (its environment, sorted),
#                        NAME.JOBID.id (`id`), NAME.JOBID.time (start and end, epoch seconds),
#                        and exits with the number in DIR/NAME.rc (0 when absent). NAME defaults
#                        to PATH's base name.
#   vg_slurm_wrap PATH [NAME=VALUE...] -- CMD [ARGS...]  writes, atomically (so it may replace
#                        the Prolog or Epilog of a running cluster between jobs: slurmd runs the
#                        file afresh for each job), an executable PATH that sets a plain PATH and
#                        the NAME=VALUEs (e.g. FAKE_NVML_SCENARIO: slurmd gives its scripts an
#                        environment of its own), runs CMD ARGS, appends "job JOBID: rc N" and
#                        CMD's output to PATH.log, and exits with CMD's status.
#   vg_slurm_wait COND [TIMEOUT] evaluates the shell command COND every 0.1 s until it succeeds.
#   vg_slurm_logs               prints the tails of the daemons' logs (for a failing test).
#
# What this Slurm does (Debian 12: slurm-wlm 22.05.8, munge 0.5.15), learned with this harness:
# - Start: munged, slurmctld and slurmd are up and the node IDLE in about 1.5 s on 2 cores.
# - Prolog and Epilog run as root (uid 0) for every job, whoever submitted it, from slurmd, with
#   an environment built by Slurm: no PATH, HOME or USER; the working directory is slurmd's.
#   Both get: SLURM_JOB_ID (and SLURM_JOBID), SLURM_JOB_UID, SLURM_JOB_GID, SLURM_JOB_USER,
#   SLURM_UID, SLURM_JOB_GPUS, CUDA_VISIBLE_DEVICES, GPU_DEVICE_ORDINAL, ROCR_VISIBLE_DEVICES,
#   ZE_AFFINITY_MASK (all the same list), SLURMD_NODENAME, SLURM_NODELIST, SLURM_CLUSTER_NAME,
#   SLURM_CONF, SLURM_JOB_PARTITION, SLURM_JOB_NUM_NODES, SLURM_JOB_CPUS_PER_NODE,
#   SLURM_JOB_WORK_DIR, SLURM_JOB_STDIN, SLURM_JOB_STDOUT, SLURM_JOB_RESTART_COUNT and
#   SLURM_SCRIPT_CONTEXT (prolog_slurmd / epilog_slurmd); the epilog also SLURM_JOB_EXIT_CODE,
#   SLURM_JOB_EXIT_CODE2 and SLURM_JOB_DERIVED_EC. No SLURM_STEP_GPUS at either end.
# - GPUs are named by their index in gres.conf's File= order: a job given nvidia0 and nvidia1
#   sees SLURM_JOB_GPUS=0,1 and CUDA_VISIBLE_DEVICES=0,1 (plus SLURM_GPUS_ON_NODE=2 and
#   GPU_DEVICE_ORDINAL); the prolog and epilog see the same list.
# - A job given no GPU: no GPU variable at all in its prolog and epilog. PrologFlags=Alloc (the
#   prolog at allocation) gives the prolog the same variables.
# - The job ends; the epilog runs, meanwhile the job is COMPLETING and the node IDLE+COMPLETING;
#   only when the epilog has finished is the job COMPLETED and the node IDLE. Measured on the
#   2 loaded cores (t1401 prints it): job end -> epilog start 0.1-0.3 s, job end -> node seen
#   IDLE 0.5-1.0 s with a trivial epilog. sbatch -> job running: 0.3-1.2 s (the first job after
#   the start about 2.7 s), with SchedulerParameters=batch_sched_delay=0,sched_min_interval=0
#   (without them, about 2.5 s for every job).
# - A process of the job that calls setsid and outlives it is reparented (to init) and keeps
#   running: with proctrack/linuxproc nothing kills it; the epilog must.
# - An epilog that exits non-zero drains the node: State=IDLE+DRAIN (sinfo: drained), reason
#   "Epilog error" (by root); the job itself stays COMPLETED. A prolog that exits non-zero drains
#   it too, reason "Prolog error", and the job goes back to PENDING, held, with
#   Reason=launch_failed_requeued_held (it never runs until released). `scontrol update
#   nodename=N state=resume` makes it IDLE again, after a moment of IDLE+NOT_RESPONDING.
# - With --export=NONE, slurmd runs `su - USER` to get a login environment for the job.
# - A job's stdin is /dev/null unless sbatch --input says otherwise; where /dev/null is not
#   world-readable (this sandbox: mode 700) a job of another user than root then fails to
#   launch ("Could not open stdin file /dev/null: Permission denied"), hence --input.
# - A Slurm client (scontrol, squeue, ...) whose slurm.conf has been removed retries for minutes
#   instead of failing: hence the bounded wrappers below.

VG_SLURM_START_TIMEOUT=${VG_SLURM_START_TIMEOUT:-60}
VG_SLURM_CLIENT_TIMEOUT=${VG_SLURM_CLIENT_TIMEOUT:-20}
VG_SLURM_LIFETIME=${VG_SLURM_LIFETIME:-900}
VG_SLURM_SBIN=${VG_SLURM_SBIN:-/usr/sbin}

# The client commands, bounded: a Slurm client whose controller is gone, or whose SLURM_CONF
# has been removed, retries for minutes. Each runs under timeout(1) (VG_SLURM_CLIENT_TIMEOUT,
# default 20 s), and fails at once, saying so, when the cluster's slurm.conf is gone (stopped,
# or removed by the watchdog). These functions shadow the programs for the test files too.
_vg_slurm_client() {
    local prog=$1
    shift
    if [[ -n ${SLURM_CONF:-} && ! -f $SLURM_CONF ]]; then
        echo "$prog: the test cluster is gone ($SLURM_CONF is missing)" >&2
        return 1
    fi
    timeout -k 2 "$VG_SLURM_CLIENT_TIMEOUT" "$prog" "$@"
}
sbatch() { _vg_slurm_client sbatch "$@"; }
scontrol() { _vg_slurm_client scontrol "$@"; }
sinfo() { _vg_slurm_client sinfo "$@"; }
squeue() { _vg_slurm_client squeue "$@"; }
scancel() { _vg_slurm_client scancel "$@"; }
srun() { _vg_slurm_client srun "$@"; }

# vg_slurm_wait COND [TIMEOUT]: evaluates COND every 0.1 s until it succeeds; fails with a
# message after TIMEOUT seconds (default 30), or at once when the cluster has been stopped.
vg_slurm_wait() {
    local cond=$1 timeout=${2:-30} start now
    start=${EPOCHREALTIME//[!0-9]/}
    while :; do
        if eval "$cond"; then return 0; fi
        if [[ -n ${VG_SLURM_DIR:-} && ! -d $VG_SLURM_DIR/run ]]; then
            echo "vg_slurm_wait: the test cluster is gone: $cond" >&2
            return 1
        fi
        now=${EPOCHREALTIME//[!0-9]/}
        if ((now - start >= timeout * 1000000)); then break; fi
        sleep 0.1
    done
    echo "vg_slurm_wait: still false after ${timeout}s: $cond" >&2
    return 1
}

# A skip inside bats, a message and a failure outside it (or with VG_SLURM_REQUIRE=1).
# The cluster could not start: what was started is stopped (the logs are printed before), then
# a failure with VG_SLURM_REQUIRE=1 or outside bats; inside a test, a skip; in setup_file (where
# bats 1.8 cannot skip), VG_SLURM_SKIP is exported with the reason for vg_slurm_require.
_vg_slurm_skip() {
    vg_slurm_stop
    if [[ ${VG_SLURM_REQUIRE:-0} == 1 ]] || ! declare -F skip >/dev/null; then
        echo "vg_slurm_start: $1" >&2
        return 1
    fi
    export VG_SLURM_SKIP="Slurm cannot start here: $1"
    if [[ -n ${BATS_TEST_NAME:-} ]]; then skip "$VG_SLURM_SKIP"; fi
    echo "vg_slurm_start: $VG_SLURM_SKIP: every test of the file skips" >&2
    return 0
}

# vg_slurm_require: in setup(), skips the test with the reason when vg_slurm_start could not
# start the cluster in setup_file.
vg_slurm_require() {
    if [[ -n ${VG_SLURM_SKIP:-} ]]; then skip "$VG_SLURM_SKIP"; fi
}

# A loopback port nobody listens on, below the usual ephemeral range.
_vg_slurm_port() {
    local p i
    for ((i = 0; i < 50; i++)); do
        p=$((20000 + RANDOM % 12000))
        if ! (exec 9<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
            printf '%s\n' "$p"
            return 0
        fi
    done
    return 1
}

# Makes the cluster's cgroup (v2 first, else v1 pids) and prints its directory; prints nothing
# when none can be made (a read-only /sys/fs/cgroup in a container).
_vg_slurm_cgroup() {
    local root name=vg-slurm.${VG_SLURM_DIR##*.}
    if [[ ${VG_SLURM_CGROUP:-1} == 0 ]]; then return 0; fi
    for root in $(findmnt -n -t cgroup2 -o TARGET 2>/dev/null) \
        $(findmnt -n -t cgroup -O pids -o TARGET 2>/dev/null); do
        if mkdir "$root/$name" 2>/dev/null; then
            printf '%s\n' "$root/$name"
            return 0
        fi
    done
    return 0
}

# _vg_slurm_spawn NAME CMD...: starts CMD in the background inside the cluster's cgroup, with
# the tag in its environment, stdin closed, output to log/NAME.out and bats' descriptor 3
# closed (bats waits for whoever holds it); records its pid in run/NAME.pid. Started from a
# subshell that exits at once, so that it is not a job of the caller's shell (no "Killed"
# notices, no zombies for bats to reap).
_vg_slurm_spawn() {
    local name=$1 cg pid
    shift
    cg=$(cat "$VG_SLURM_DIR/run/cgroup" 2>/dev/null) || cg=
    (
        (
            if [[ -n $cg ]]; then echo "$BASHPID" >"$cg/cgroup.procs" || exit 1; fi
            export VG_SLURM_TAG=$VG_SLURM_DIR SLURM_CONF=$VG_SLURM_DIR/slurm.conf
            exec "$@"
        ) </dev/null >"$VG_SLURM_DIR/log/$name.out" 2>&1 &
        printf '%s\n' "$!" >"$VG_SLURM_DIR/run/$name.pid"
    ) 3>&-
    pid=$(cat "$VG_SLURM_DIR/run/$name.pid") || return 1
    printf '%s\n' "$pid" >>"$VG_SLURM_DIR/run/pids"
}

# Writes slurm.conf: the defaults, less the keys VG_SLURM_CONF_EXTRA sets, then the extra lines.
_vg_slurm_conf() {
    local d=$VG_SLURM_DIR ctld_port=$1 d_port=$2 key line
    local -A extra=()
    while IFS= read -r line; do
        [[ $line == *=* && $line != NodeName=* && $line != PartitionName=* ]] || continue
        key=${line%%=*}
        extra[${key,,}]=1
    done <<<"${VG_SLURM_CONF_EXTRA:-}"
    {
        cat <<EOF
ClusterName=vgtest
SlurmctldHost=$VG_SLURM_NODE(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$d_port
AuthType=auth/munge
AuthInfo=socket=$d/munge/run/munge.socket
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$d/state
SlurmdSpoolDir=$d/spool
SlurmctldPidFile=$d/run/slurmctld.pid
SlurmdPidFile=$d/run/slurmd.pid
SlurmctldLogFile=$d/log/slurmctld.log
SlurmdLogFile=$d/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=debug
SlurmdParameters=config_overrides
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
ReturnToService=2
KillWait=2
PrologEpilogTimeout=60
EOF
        if [[ -n ${VG_SLURM_PROLOG:-} ]]; then echo "Prolog=$VG_SLURM_PROLOG"; fi
        if [[ -n ${VG_SLURM_EPILOG:-} ]]; then echo "Epilog=$VG_SLURM_EPILOG"; fi
    } | while IFS= read -r line; do
        key=${line%%=*}
        if [[ -z ${extra[${key,,}]:-} ]]; then printf '%s\n' "$line"; fi
    done >"$d/slurm.conf"
    {
        if [[ -n ${VG_SLURM_CONF_EXTRA:-} ]]; then printf '%s\n' "$VG_SLURM_CONF_EXTRA"; fi
        echo "NodeName=$VG_SLURM_NODE NodeAddr=127.0.0.1 CPUs=$(nproc) Gres=gpu:${VG_SLURM_GPUS:-4} State=UNKNOWN"
        echo "PartitionName=debug Nodes=$VG_SLURM_NODE Default=YES MaxTime=INFINITE State=UP"
    } >>"$d/slurm.conf"
    {
        echo "AutoDetect=off"
        echo "Name=gpu File=$d/dev/nvidia[0-$((${VG_SLURM_GPUS:-4} - 1))]"
    } >"$d/gres.conf"
}

# The watchdog: kills the cluster and removes its directory when the process that started it
# (OWNER) is gone, or after VG_SLURM_LIFETIME seconds. A bash of its own that loads this file,
# in a session of its own and outside the cgroup, so that it outlives what it kills, a ^C to
# the terminal's process group and a SIGKILL to bats' whole group alike; deaf to INT, TERM and
# HUP; vg_slurm_stop ends it with SIGKILL. It waits on a FIFO nobody writes, not on sleep(1),
# so that killing it leaves no child behind.
_vg_slurm_watchdog() {
    local d=$VG_SLURM_DIR
    mkfifo "$d/run/tick" || return 1
    (
        setsid bash -c 'source "$1" && _vg_slurm_watch "$2" "$3"' vg-slurm-watchdog \
            "${BASH_SOURCE[0]}" "$1" "$d" </dev/null >/dev/null 2>&1 &
    ) 3>&-
    vg_slurm_wait "[[ -s $d/run/watchdog.pid ]]" 10
}

_vg_slurm_watch() {
    local owner=$1 d=$2 end fd
    echo "$$" >"$d/run/watchdog.pid"
    trap '' INT TERM HUP
    # Opened once: a FIFO opened read-write never blocks the open, and reopening it by name
    # each time would create a plain file where vg_slurm_stop is removing the directory.
    exec {fd}<>"$d/run/tick" || exit 1
    end=$((SECONDS + VG_SLURM_LIFETIME))
    while kill -0 "$owner" 2>/dev/null && ((SECONDS < end)); do
        read -r -t 1 -u "$fd"
        # Stopped already.
        [[ -d $d/run && ! -e $d/run/stopped ]] || exit 0
    done
    if [[ -d $d/run ]]; then
        echo "watchdog: owner $owner gone or lifetime over: stopping the cluster" >>"$d/log/watchdog.out"
        VG_SLURM_DIR=$d _vg_slurm_kill
        if [[ ${VG_SLURM_KEEP:-0} != 1 ]]; then rm -rf -- "$d"; fi
    fi
}

# vg_slurm_start: see the top of the file.
vg_slurm_start() {
    local prog ctld_port d_port i d limit
    unset VG_SLURM_SKIP
    [[ $(id -u) -eq 0 ]] || { _vg_slurm_skip "the Slurm tests need root (slurmd runs jobs as their users)"; return; }
    for prog in munged mungekey slurmctld slurmd sbatch scontrol sinfo squeue scancel findmnt; do
        if ! command -v "$prog" >/dev/null && [[ ! -x $VG_SLURM_SBIN/$prog ]]; then
            _vg_slurm_skip "$prog is missing (scripts/install-deps installs slurmctld, slurmd, slurm-client and munge)"
            return
        fi
    done
    export PATH=$PATH:$VG_SLURM_SBIN
    VG_SLURM_DIR=$(mktemp -d /tmp/vg-slurm.XXXXXX) || return 1
    export VG_SLURM_DIR
    d=$VG_SLURM_DIR
    export VG_SLURM_NODE=${VG_SLURM_NODE:-$(hostname -s)}
    export VG_SLURM_DEVDIR=$d/dev VG_SLURM_JOBDIR=$d/jobs
    export SLURM_CONF=$d/slurm.conf
    chmod 755 "$d"
    mkdir -p "$d/munge/etc" "$d/munge/run" "$d/munge/lib" "$d/dev" "$d/log" "$d/state" \
        "$d/spool" "$d/run" "$d/jobs" || return 1
    # munged insists: its key and state private, its socket's directory open to all.
    chmod 700 "$d/munge/etc" "$d/munge/lib"
    chmod 755 "$d/munge" "$d/munge/run"
    chmod 1777 "$d/jobs"
    : >"$d/empty"
    chmod 644 "$d/empty"
    _vg_slurm_cgroup >"$d/run/cgroup"
    _vg_slurm_watchdog "$$"

    for ((i = 0; i < ${VG_SLURM_GPUS:-4}; i++)); do
        if ! mknod "$d/dev/nvidia$i" c 1 3 2>"$d/log/mknod.out" || ! chmod 666 "$d/dev/nvidia$i"; then
            _vg_slurm_skip "cannot make stand-in GPU device nodes (mknod c 1 3): $(cat "$d/log/mknod.out")"
            return
        fi
    done
    if ! ctld_port=$(_vg_slurm_port) || ! d_port=$(_vg_slurm_port); then
        _vg_slurm_skip "no free loopback port for slurmctld and slurmd"
        return
    fi
    _vg_slurm_conf "$ctld_port" "$d_port"

    mungekey --create --keyfile="$d/munge/etc/munge.key" >"$d/log/mungekey.out" 2>&1 || {
        _vg_slurm_skip "mungekey failed: $(cat "$d/log/mungekey.out")"
        return
    }
    _vg_slurm_spawn munged munged --foreground --socket="$d/munge/run/munge.socket" \
        --key-file="$d/munge/etc/munge.key" --pid-file="$d/munge/run/munged.pid" \
        --log-file="$d/munge/lib/munged.log" --seed-file="$d/munge/lib/munged.seed"
    if ! vg_slurm_wait "[[ -S $d/munge/run/munge.socket ]] || ! kill -0 $(cat "$d/run/munged.pid") 2>/dev/null" \
        "$VG_SLURM_START_TIMEOUT" || [[ ! -S $d/munge/run/munge.socket ]]; then
        vg_slurm_logs >&2
        _vg_slurm_skip "munged did not start; $(_vg_slurm_last_error)"
        return
    fi
    _vg_slurm_spawn slurmctld slurmctld -D -f "$SLURM_CONF"
    _vg_slurm_spawn slurmd slurmd -D -f "$SLURM_CONF" -N "$VG_SLURM_NODE"
    limit=$VG_SLURM_START_TIMEOUT
    if ! vg_slurm_wait '_vg_slurm_up' "$limit" || [[ $(vg_slurm_node_state) != IDLE ]]; then
        vg_slurm_logs >&2
        _vg_slurm_skip "node $VG_SLURM_NODE not idle after ${limit}s; $(_vg_slurm_last_error)"
        return
    fi
}

# The last error a daemon printed (for a skip's reason: bats shows no output of setup_file).
_vg_slurm_last_error() {
    local line
    line=$(grep -hiE 'error|fatal' "$VG_SLURM_DIR"/log/*.out 2>/dev/null | tail -n 2 | paste -sd ';')
    printf '%s\n' "${line:-no error in the logs of the daemons}"
}

# True when the node is IDLE; false (and stops waiting: the caller checks the state) when a
# daemon has died.
_vg_slurm_up() {
    local name
    for name in munged slurmctld slurmd; do
        kill -0 "$(cat "$VG_SLURM_DIR/run/$name.pid")" 2>/dev/null || return 0
    done
    [[ $(vg_slurm_node_state 2>/dev/null) == IDLE ]]
}

# _vg_slurm_dead PID: true when PID runs no more (gone, or a zombie waiting for its parent).
_vg_slurm_dead() {
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
    stat=${stat##*) }
    [[ ${stat:0:1} == [ZX] ]]
}

# Kills everything the cluster started (see the top of the file); waits (bounded) until it is gone.
_vg_slurm_kill() {
    local d=$VG_SLURM_DIR cg pid f left i
    [[ -n $d && -d $d/run ]] || return 0
    : >"$d/run/stopped"
    cg=$(cat "$d/run/cgroup" 2>/dev/null) || cg=
    # Without a cgroup, slurmstepd (whose environment Slurm empties) is found by no tag: the
    # jobs are cancelled first, so that their slurmstepd exit by themselves (bounded).
    if [[ -z $cg && -f $d/slurm.conf ]]; then
        SLURM_CONF=$d/slurm.conf VG_SLURM_DIR=$d VG_SLURM_CLIENT_TIMEOUT=5 vg_slurm_cancel_all 10 >/dev/null 2>&1 || true
    fi
    for ((i = 0; i < 100; i++)); do
        left=
        if [[ -n $cg && -d $cg ]]; then
            if [[ -e $cg/cgroup.kill ]]; then echo 1 >"$cg/cgroup.kill" 2>/dev/null; fi
            while read -r pid; do
                kill -KILL "$pid" 2>/dev/null && left+=" $pid"
            done <"$cg/cgroup.procs"
        fi
        while read -r pid; do
            kill -KILL "$pid" 2>/dev/null && left+=" $pid"
        done < <(cat "$d/run/pids" 2>/dev/null)
        for f in $(grep -lzxF -- "VG_SLURM_TAG=$d" /proc/[0-9]*/environ 2>/dev/null); do
            pid=${f#/proc/}
            pid=${pid%/environ}
            [[ $pid == "$$" || $pid == "$BASHPID" ]] && continue
            kill -KILL "$pid" 2>/dev/null && left+=" $pid"
        done
        # A killed process stays a zombie until its parent reaps it: only live ones count.
        [[ -n $left ]] || break
        for pid in $left; do
            if ! _vg_slurm_dead "$pid"; then
                sleep 0.1
                continue 2
            fi
        done
        break
    done
    if [[ -n $cg && -d $cg ]]; then
        for ((i = 0; i < 50; i++)); do
            rmdir "$cg" 2>/dev/null && break
            sleep 0.1
        done
    fi
    return 0
}

# vg_slurm_stop: see the top of the file.
vg_slurm_stop() {
    local d=${VG_SLURM_DIR:-} pid
    [[ -n $d && -d $d ]] || return 0
    _vg_slurm_kill
    if pid=$(cat "$d/run/watchdog.pid" 2>/dev/null); then
        kill -KILL "$pid" 2>/dev/null || true
        vg_slurm_wait "_vg_slurm_dead $pid" 10 || true
    fi
    if [[ ${VG_SLURM_KEEP:-0} == 1 ]]; then
        echo "vg_slurm_stop: kept $d" >&2
    else
        rm -rf -- "$d"
    fi
    return 0
}

vg_slurm_logs() {
    local f
    for f in "$VG_SLURM_DIR"/log/*; do
        [[ -s $f ]] || continue
        echo "--- ${f#"$VG_SLURM_DIR"/} (last 25 lines)"
        tail -n 25 "$f"
    done
}

vg_slurm_sbatch() {
    local as=()
    if [[ ${1:-} == --as ]]; then
        as=(runuser -u "$2" --)
        shift 2
    fi
    if [[ ${#as[@]} -gt 0 ]]; then
        as=("${as[@]}" timeout -k 2 "$VG_SLURM_CLIENT_TIMEOUT")
    fi
    VG_SLURM_TAG=$VG_SLURM_DIR "${as[@]}" sbatch --parsable --chdir="$VG_SLURM_JOBDIR" \
        --input="$VG_SLURM_DIR/empty" --output="$VG_SLURM_JOBDIR/%j.out" "$@" </dev/null 3>&-
}

vg_slurm_job_state() {
    local out
    out=$(scontrol -o show job "$1" 2>/dev/null) || return 1
    out=${out#*JobState=}
    printf '%s\n' "${out%% *}"
}

vg_slurm_wait_job() {
    local id=$1 timeout=${2:-30}
    vg_slurm_wait "[[ \$(vg_slurm_job_state $id) =~ ^(COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL|DEADLINE|PREEMPTED)\$ ]]" "$timeout" || {
        echo "vg_slurm_wait_job: job $id is $(vg_slurm_job_state "$id")" >&2
        return 1
    }
    vg_slurm_job_state "$id"
}

vg_slurm_node_state() {
    local out
    out=$(scontrol -o show node "$VG_SLURM_NODE" 2>/dev/null) || return 1
    out=${out#* State=}
    printf '%s\n' "${out%% *}"
}

vg_slurm_wait_node() {
    local want=$1 timeout=${2:-30}
    vg_slurm_wait "[[ \$(vg_slurm_node_state) == '$want' ]]" "$timeout" || {
        echo "vg_slurm_wait_node: node $VG_SLURM_NODE is $(vg_slurm_node_state), not $want" >&2
        return 1
    }
}

vg_slurm_node_reason() {
    sinfo -h -R -n "$VG_SLURM_NODE" -o '%E'
}

vg_slurm_resume() {
    scontrol update nodename="$VG_SLURM_NODE" state=resume || return 1
    vg_slurm_wait_node IDLE "${1:-30}"
}

vg_slurm_cancel_all() {
    local ids
    ids=$(squeue -h -o %i) || return 1
    if [[ -n $ids ]]; then
        # shellcheck disable=SC2086 # one argument per job id
        scancel --full $ids || return 1
    fi
    vg_slurm_wait '[[ -z $(squeue -h -t PD,R,CG,S -o %i) ]]' "${1:-30}"
}

vg_slurm_wrap() {
    local path=$1 a tmp
    shift
    tmp=$path.tmp.$BASHPID
    {
        echo '#!/bin/bash'
        echo '# Written by tests/slurm/lib.bash (vg_slurm_wrap): bash, for the quoting of %q.'
        echo 'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
        echo 'export PATH'
        while [[ $# -gt 0 && $1 != -- ]]; do
            printf 'export %q\n' "$1"
            shift
        done
        [[ ${1:-} == -- ]] && shift
        printf 'out=$('
        for a in "$@"; do printf '%q ' "$a"; done
        printf '2>&1)\n'
        echo 'rc=$?'
        printf 'printf "job %%s: rc %%s\\n%%s\\n" "${SLURM_JOB_ID:-none}" "$rc" "$out" >>%q\n' "$path.log"
        echo 'exit "$rc"'
    } >"$tmp" && chmod 755 "$tmp" && mv -f "$tmp" "$path"
}

vg_slurm_recorder() {
    local path=$1 dir=$2 name=${3:-${1##*/}}
    mkdir -p "$dir" || return 1
    cat >"$path" <<EOF || return 1
#!/bin/sh
# Written by tests/slurm/lib.bash (vg_slurm_recorder): records what slurmd gives a $name.
f=$dir/$name.\${SLURM_JOB_ID:-none}
echo "start \$(date +%s.%N)" >"\$f.time"
env | LC_ALL=C sort >"\$f.env"
id >"\$f.id"
rc=0
if [ -f $dir/$name.rc ]; then rc=\$(cat $dir/$name.rc); fi
echo "end \$(date +%s.%N)" >>"\$f.time"
exit "\$rc"
EOF
    chmod 755 "$path"
}
