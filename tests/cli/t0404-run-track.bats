#!/usr/bin/env bats
# t0404-run-track: how `vramguard run` tracks a job's process tree, in both modes (its own
# cgroup v2; child subreaper), what it does with leftovers (orphaned, setsid, stopped, zombie
# leaders holding device nodes), and the last check through NVML and the fd scan that nothing
# still holds the job's GPUs. The cgroup tests need root and a delegatable cgroup2: where that
# is not possible they are skipped, saying why.

load lib

bats_require_minimum_version 1.5.0

setup() {
    TMP=$(vg_tmpdir)
    DEVDIR=$(vg_fake_dev)
    export VRAMGUARD_RUNTIME_DIR=$TMP/locks
    vg_scenario <<'EOF'
driver 550.54.15
gpu index=0 uuid=GPU-00000000-0000-0000-0000-000000000000 name=A minor=2 bus=00000000:07:00.0 total=80GiB reserved=512MiB used=auto util=0
gpu index=1 uuid=GPU-11111111-1111-1111-1111-111111111111 name=A minor=0 bus=00000000:0F:00.0 total=80GiB reserved=512MiB used=auto util=0
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

# gone_all FILE: every pid in a vg-helper pidfile (but the launcher that already exited) gone.
gone_all() {
    local role pid
    [ -s "$1" ] || { echo "no pidfile $1"; return 1; }
    while read -r role pid; do
        if [ "$role" = parent ]; then continue; fi
        vg_gone "$pid" || { echo "$role $pid survived"; return 1; }
    done <"$1"
}

# A job that double-forks workers into a new session, all holding GPU 0's device node (minor
# 2), and exits at once; and one that also leaves a worker ignoring SIGTERM.
leftovers() {
    local mode=$1
    vgr run --verbose --track "$mode" --gpus 0 --grace 500ms -- sh -c \
        "'$HELPER' --orphan --setsid --open '$DEVDIR/nvidia2' --children 2 --pidfile '$TMP/p1' &&
         '$HELPER' --orphan --ignore-term --open '$DEVDIR/nvidia2' --pidfile '$TMP/p2'"
    [ "$status" -eq 0 ]
    gone_all "$TMP/p1"
    gone_all "$TMP/p2"
    [[ $stderr == *"the job left 4 processes behind: "*"; sent SIGTERM (SIGKILL after 500ms)"* ]]
    [[ $stderr == *"still running after the 500ms grace period: $(awk '$1 == "main" { print $2 }' "$TMP/p2") (vg-helper); sent SIGKILL"* ]]
    [[ $stderr != *warning* ]]
}

@test "subreaper mode: --verbose says so; double-forked and setsid workers are cleaned up" {
    leftovers subreaper
    [[ $stderr == *"tracking the job (pid "*") as child subreaper: no cgroup (--track subreaper)"* ]]
}

@test "cgroup mode: --verbose says so; double-forked and setsid workers are cleaned up" {
    require_cgroup
    leftovers cgroup
    [[ $stderr == *"tracking the job (pid "*") with cgroup "*"/vramguard-run-"* ]]
}

@test "cgroup mode: the job runs in its own cgroup, removed afterwards" {
    require_cgroup
    vgr run --verbose --track cgroup --gpus 0 -- sh -c 'grep "^0::" /proc/self/cgroup'
    [ "$status" -eq 0 ]
    [[ $output == "0::"*"/vramguard-run-"* ]]
    cg=$(sed -n 's/.*tracking the job (pid [0-9]*) with cgroup \([^ ]*\).*/\1/p' <<<"$stderr")
    [ -n "$cg" ]
    [[ $output == "0::"*"${cg##*/}" ]]
    [ ! -e "$cg" ]
}

@test "auto mode: a cgroup where one can be created, else subreaper, and says which" {
    vgr run --verbose --gpus 0 -- true
    [ "$status" -eq 0 ]
    if "$VG" --nvml "$FAKE_FULL" run -q --track cgroup --gpus 0 -- true 2>/dev/null; then
        [[ $stderr == *"with cgroup "* ]]
    else
        [[ $stderr == *"as child subreaper: no cgroup ("* ]]
    fi
}

@test "no cgroup possible: auto falls back to subreaper saying why; --track cgroup fails" {
    # VRAMGUARD_CGROUP_PARENT names where job cgroups go; a plain directory cannot hold one.
    mkdir "$TMP/plain"
    VRAMGUARD_CGROUP_PARENT=$TMP/plain vgr run --verbose --gpus 0 -- sh -c \
        "'$HELPER' --orphan --open '$DEVDIR/nvidia2' --pidfile '$TMP/p1'"
    [ "$status" -eq 0 ]
    [[ $stderr == *"as child subreaper: no cgroup ('$TMP/plain' is not a cgroup2 directory)"* ]]
    gone_all "$TMP/p1"
    [ -z "$(ls "$TMP/plain")" ]
    VRAMGUARD_CGROUP_PARENT=$TMP/plain vgr run --track cgroup --gpus 0 -- touch "$TMP/ran"
    [ "$status" -eq 1 ]
    [ "$stderr" = "vramguard: run: the job gets GPU 0 (A, $U0) as cuda:0
vramguard: run: cannot track the job with a cgroup: '$TMP/plain' is not a cgroup2 directory" ]
    [ ! -e "$TMP/ran" ]
}

@test "a zombie leader whose thread holds the device node, and a stopped worker, are cleaned up" {
    for mode in subreaper cgroup; do
        if [ "$mode" = cgroup ] && ! "$VG" --nvml "$FAKE_FULL" run -q --track cgroup --gpus 0 -- true 2>/dev/null; then
            continue
        fi
        rm -f "$TMP/p1" "$TMP/stopped"
        cat >"$TMP/job" <<EOF
#!/bin/sh
'$HELPER' --orphan --zombie-leader --open '$DEVDIR/nvidia2' --pidfile '$TMP/p1' || exit 1
sleep 120 &
kill -STOP \$!
echo \$! >'$TMP/stopped'
EOF
        chmod +x "$TMP/job"
        SECONDS=0
        vgr run --track "$mode" --gpus 0 --grace 60s -- "$TMP/job"
        [ "$status" -eq 0 ]
        gone_all "$TMP/p1"
        vg_gone "$(cat "$TMP/stopped")"
        [ "$SECONDS" -lt 30 ] # SIGTERM and SIGCONT did it: no need for the grace period
        [[ $stderr != *"sent SIGKILL"* ]]
    done
}

@test "after the job: memory the driver still holds for a process of the job is reported" {
    # The job registers itself with the fake driver as holding 1 GiB on GPU 0, and exits.
    cat >"$TMP/job" <<EOF
#!/bin/sh
cp "$FAKE_NVML_SCENARIO" "$TMP/sc.new"
echo "proc gpu=0 pid=\$\$ type=compute mem=1GiB" >>"$TMP/sc.new"
mv "$TMP/sc.new" "$FAKE_NVML_SCENARIO"
echo \$\$ >"$TMP/jobpid"
exit 5
EOF
    chmod +x "$TMP/job"
    vgr run --gpus 0 -- "$TMP/job"
    [ "$status" -eq 5 ]
    [[ $stderr == *"vramguard: run: warning: GPU 0 (A, $U0): 1 GiB still used: PID $(cat "$TMP/jobpid"), which held it, has exited, but the driver still lists it and has not released its memory yet (look again with 'vramguard doctor')"* ]]
}

@test "after the job: another process holding its GPU is named, apart from the job" {
    vg_spawn --open "$DEVDIR/nvidia0" -- python notebook.py
    vgr run --gpus 1 -- true
    [ "$status" -eq 0 ]
    [[ $stderr == *"note: GPU 1 (A, GPU-11111111-1111-1111-1111-111111111111) also has device node held open by PID $VG_PID ("*"python notebook.py), not started by this job"* ]]
    # Not on the job's GPUs: not mentioned.
    vgr run --gpus 0 -- true
    [[ $stderr != *note* ]]
}

@test "after the job: used memory that grew and that nobody holds is reported" {
    cat >"$TMP/job" <<EOF
#!/bin/sh
sed 's/^\(gpu index=0 .*\)used=auto/\1used=9GiB/' "$FAKE_NVML_SCENARIO" >"$TMP/sc.new"
mv "$TMP/sc.new" "$FAKE_NVML_SCENARIO"
EOF
    chmod +x "$TMP/job"
    vgr run --gpus 0 -- "$TMP/job"
    [ "$status" -eq 0 ]
    [[ $stderr == *"warning: GPU 0 (A, $U0) has 9 GiB more memory in use than before the job, and no process holds it"* ]]
}
