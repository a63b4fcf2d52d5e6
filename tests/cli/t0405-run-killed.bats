#!/usr/bin/env bats
# t0405-run-killed: `vramguard run` killed with SIGKILL (or crashing) under a live job. The
# invariant: no second run gets a GPU that a live process of the first job still uses, and
# nothing of the first job is left running unnoticed. The job inherits its reservations (one
# read-only lock descriptor per GPU), so they last while it keeps them; in cgroup mode the
# guard stops what is left after the grace period, workers that closed the descriptor included,
# and keeps the GPUs reserved until the cgroup is empty. `pick` and a refused `run` name the
# processes that keep a reservation whose run is gone. The cgroup tests need root and a
# delegatable cgroup2; where that is not possible they are skipped, saying why.

load lib

bats_require_minimum_version 1.5.0

setup() {
    TMP=$(vg_tmpdir)
    DEVDIR=$(vg_fake_dev)
    export VRAMGUARD_RUNTIME_DIR=$TMP/locks
    # One GPU: a second run either waits for it or is refused, never shares it.
    vg_scenario <<'EOF'
driver 550.54.15
gpu index=0 uuid=GPU-00000000-0000-0000-0000-000000000000 name=A minor=0 bus=00000000:07:00.0 total=80GiB reserved=512MiB used=auto util=0
EOF
}

U0=GPU-00000000-0000-0000-0000-000000000000

vgr() {
    run --separate-stderr env VG_HELPER_TAG="$TMP" "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" "$@"
}

# require_cgroup: skips the test, saying why, unless run can track a job with a cgroup here.
require_cgroup() {
    local out
    out=$("$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" run -q --track cgroup --gpus 0 -- true 2>&1) ||
        skip "cgroup v2 tracking is not possible here: ${out#vramguard: run: }"
}

# start_run ARGS...: `vramguard run --verbose ARGS...` in the background (no core dumps; stderr
# in $TMP/run.err); sets RUN_PID (the vramguard process itself) and records it for cleanup.
start_run() {
    (ulimit -c 0; exec env VG_HELPER_TAG="$TMP" "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" \
        run --verbose "$@" </dev/null >"$TMP/run.out" 2>"$TMP/run.err" 3>&-) &
    RUN_PID=$!
    _vg_dir
    _vg_record launcher "$RUN_PID"
}

# guard_pid: the guard's pid from run's --verbose notes (empty in subreaper mode).
guard_pid() {
    sed -n 's/^vramguard: run: guard pid \([0-9]*\): .*/\1/p' "$TMP/run.err"
}

# cgroup_dir: the job's cgroup from run's --verbose notes.
cgroup_dir() {
    sed -n 's/^vramguard: run: tracking the job (pid [0-9]*) with cgroup \([^ ]*\).*/\1/p' "$TMP/run.err"
}

# kill_run SIG: sends SIG to the run and waits for it; its status must say it died of it.
kill_run() {
    local rc=0
    kill -"$1" "$RUN_PID"
    wait "$RUN_PID" || rc=$?
    [ "$rc" -eq $((128 + $(kill -l "$1"))) ] || { echo "run ended with $rc, not by SIG$1"; return 1; }
}

# reserved_state: pick's JSON view of GPU 0's reservation, "reserved reserved_by alive held_by".
reserved_state() {
    vg_require_jq
    "$VG" --nvml "$FAKE_FULL" pick --json --max-util 100 --min-free 0 2>/dev/null |
        jq -r '.gpus[0] | "\(.reserved) \(.reserved_by) \(.reserved_by_alive) \(.reservation_held_by // [] | join(","))"'
}

# A job that ignores SIGTERM (so the death signal run gives it does nothing) and keeps the
# descriptors it inherited, the reservation among them.
stubborn_job() {
    echo "trap '' TERM; echo \$\$ >'$TMP/job'; exec sleep 120"
}

kept_while_job_lives() {
    local mode=$1 job guard cg
    start_run --track "$mode" --grace 1h --gpus auto:1 -- sh -c "$(stubborn_job)"
    wait_for "[ -s '$TMP/job' ] && [ \"\$(vg_stat \$(cat '$TMP/job') comm)\" = sleep ]"
    job=$(cat "$TMP/job")
    guard=$(guard_pid)
    cg=$(cgroup_dir)
    kill_run KILL
    # The job lives on: SIGTERM is ignored, and the guard gives it the whole grace period.
    ! vg_gone "$job"
    vgr run -q --gpus auto:1 -- true
    [ "$status" -eq 1 ]
    [[ $stderr == "vramguard: run: not enough free GPUs: asked for 1 GPU, 0 free enough (GPU 0: reserved by another vramguard run (pid $RUN_PID, gone; its job still holds it: $job (sleep)"* ]]
    vgr run -q --gpus 0 -- true
    [ "$status" -eq 1 ]
    [[ $stderr == *"GPU 0 (A, $U0) is reserved by another vramguard run (pid $RUN_PID, gone; its job still holds it: $job (sleep)"* ]]
    if [ -n "$guard" ]; then
        [[ $stderr == *"$job (sleep), $guard (vramguard-guard))"* ]]
        ! vg_gone "$guard"
    fi
    [[ $(reserved_state) == "true $RUN_PID false $job"* ]]
    # The job ends: so does the reservation, and the guard goes with the emptied cgroup.
    kill -KILL "$job"
    vgr run -q --gpus auto:1 --wait 30s -- sh -c 'echo "$CUDA_VISIBLE_DEVICES"'
    [ "$status" -eq 0 ]
    [ "$output" = "$U0" ]
    if [ -n "$guard" ]; then
        wait_for "vg_gone $guard"
        wait_for "[ ! -e '$cg' ]"
    fi
}

@test "subreaper: kill -9 of run under a job ignoring SIGTERM: the GPU stays reserved until the job ends" {
    kept_while_job_lives subreaper
    [ -z "$(guard_pid)" ]
}

@test "cgroup: kill -9 of run under a job ignoring SIGTERM: the GPU stays reserved until the job ends" {
    require_cgroup
    kept_while_job_lives cgroup
    [ -n "$(guard_pid)" ]
}

@test "cgroup: run killed or crashing: the guard stops the whole job, workers that closed the lock included, before the GPU is free" {
    require_cgroup
    local sig worker sleeper guard cg
    for sig in KILL ABRT; do
        rm -f "$TMP/w" "$TMP/job" "$TMP/second"
        # The worker closes every descriptor it inherited (vg-helper does, as Python's
        # subprocess does by default) and ignores SIGTERM; the main process dies of SIGTERM.
        start_run --track cgroup --grace 1s --gpus auto:1 -- sh -c \
            "'$HELPER' --ignore-term --open '$DEVDIR/nvidia0' --pidfile '$TMP/w' & echo \$\$ >'$TMP/job'; exec sleep 120"
        wait_for "[ -s '$TMP/w' ] && [ -s '$TMP/job' ] && [ \"\$(vg_stat \$(cat '$TMP/job') comm)\" = sleep ]"
        worker=$(awk '$1 == "main" { print $2 }' "$TMP/w")
        sleeper=$(cat "$TMP/job")
        guard=$(guard_pid)
        cg=$(cgroup_dir)
        [ -n "$guard" ] && [ -n "$cg" ]
        ! vg_holds "$worker" "$VRAMGUARD_RUNTIME_DIR/$U0"
        vg_holds "$sleeper" "$VRAMGUARD_RUNTIME_DIR/$U0"
        kill_run "$sig"
        # A second run waits for the GPU; once it has it, nothing of the first job may run.
        vgr run -q --gpus auto:1 --wait 60s -- sh -c "
            for p in $worker $sleeper $guard; do
                s=\$(awk '{ print \$3 }' /proc/\$p/stat 2>/dev/null) || continue
                case \$s in Z|X|'') ;; *) echo \"\$p still runs (\$s)\" ;; esac
            done
            echo \"\$CUDA_VISIBLE_DEVICES\""
        [ "$status" -eq 0 ]
        [ "$output" = "$U0" ]
        vg_gone "$worker"
        vg_gone "$sleeper"
        vg_gone "$guard"
        wait_for "[ ! -e '$cg' ]"
    done
}

@test "cgroup: kill -9 of run and of its guard: the job's own descriptor still holds the reservation" {
    require_cgroup
    start_run --track cgroup --grace 1h --gpus auto:1 -- sh -c "$(stubborn_job)"
    wait_for "[ -s '$TMP/job' ] && [ \"\$(vg_stat \$(cat '$TMP/job') comm)\" = sleep ]"
    job=$(cat "$TMP/job")
    guard=$(guard_pid)
    kill -KILL "$guard"
    wait_for "vg_gone $guard"
    kill_run KILL
    vgr run -q --gpus auto:1 -- true
    [ "$status" -eq 1 ]
    [[ $stderr == *"(pid $RUN_PID, gone; its job still holds it: $job (sleep))"* ]]
    kill -KILL "$job"
    vgr run -q --gpus auto:1 --wait 30s -- true
    [ "$status" -eq 0 ]
}

@test "cgroup: a run that ends leaves no guard behind" {
    require_cgroup
    vgr run --verbose --track cgroup --gpus auto:1 -- true
    [ "$status" -eq 0 ]
    guard=$(sed -n 's/^vramguard: run: guard pid \([0-9]*\): .*/\1/p' <<<"$stderr")
    [ -n "$guard" ]
    vg_gone "$guard"
    [[ $stderr != *"stays until"* ]]
}
