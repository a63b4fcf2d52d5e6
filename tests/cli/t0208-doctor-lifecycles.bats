#!/usr/bin/env bats
# t0208-doctor-lifecycles: the leftover model (docs/diagnoses.md, "orphan-holder") on the job
# lifecycles real GPU hosts have, each staged with real processes: what is left of a job that
# ended is orphan-holder, with a confidence; what only looks like it (a nohup job, daemons and
# services, a job in a tmux pane whose shell exited, a Jupyter kernel, a stopped process) is
# not. Which of these clean actually signals is t0605's.

load lib
load diag

setup() {
    DEVDIR=$(vg_fake_dev)
    TMP=$(vg_tmpdir)
}

teardown() {
    if [[ -n ${SOCK:-} ]]; then tmux -L "$SOCK" kill-server 2>/dev/null || true; fi
    vg_cleanup
}

# host_with_unexplained GPU SIZE [PROC LINES...]: homogeneous_host where GPU carries SIZE that
# no listed process accounts for (what a leftover's inherited context keeps).
host_with_unexplained() {
    local gpu=$1 size=$2
    shift 2
    homogeneous_host "$@"
    vg_scenario <<<"$(sed "s/^\(gpu index=$gpu .*\) used=auto/\1 used=$size/" "$FAKE_NVML_SCENARIO")"
}

# orphan_of_job ARGS...: a worker whose main process (the leader of its own process group, as a
# job-control shell makes it) exited: O is the worker, its job's group PID G is gone.
orphan_of_job() {
    vg_spawn --pgrp --orphan "$@"
    O=$VG_PID
    G=$VG_PARENT_PID
    wait_for "vg_gone $G"
    [ "$(vg_stat "$O" pgrp)" = "$G" ]
}

leftover() {
    json "[.findings[] | select(.rule == \"orphan-holder\" and (.pids | index($1)))] | .[0]"
}

# ------------------------------------------------------------------------ what is left over

@test "DataLoader workers of a dead main process, adopted by init: a sure leftover, critical" {
    orphan_of_job --comm pt_data_worker --children 1 --child-comm pt_data_worker \
        --open "$(dev 1)" --open "$DEVDIR/nvidiactl" -- python train.py
    W=${VG_CHILD_PIDS[0]}
    [ "$(vg_stat "$O" ppid)" = 1 ]
    host_with_unexplained 1 6GiB
    vgd --json doctor
    show
    [ "$status" -eq 2 ]
    [ "$(rules_fired)" = orphan-holder,unattributed ]
    [ "$(nfind orphan-holder)" -eq 1 ]
    json_ok '.findings[0] | .severity == "critical" and .confidence == "high" and (.pids | sort) == ([$o, $w] | sort)' \
        --argjson o "$O" --argjson w "$W"
    json_ok '.findings[0].evidence | any(startswith("PID \($o) (") and contains("): leftover at high confidence, weight +") and contains("; +1 parent is now PID 1 (init); +2 its process group leader (PID \($g)) has exited; +2 holds the device node only, inherited: no context of its own;") and contains("; +2 named as a PyTorch DataLoader worker (a hint)") and contains("; 0 ms of CPU time"))' \
        --arg o "$O" --arg g "$G"
    json_ok '.findings[0].evidence | any(startswith("PID \($w) (") and contains("; +3 a worker of leftover PID \($o)"))' \
        --arg o "$O" --arg w "$W"
    # The same facts as data: each with its weight, summed into the score.
    json_ok '.findings[0].verdicts | map(select(.pid == $o)) | .[0] | .verdict == "leftover" and .confidence == "high" and .score == ([.facts[].weight] | add) and ([.facts[].fact] | index("group-leader-gone") and index("inherited-nodes") and index("worker-name"))' \
        --argjson o "$O"
    json_ok '.findings[0].evidence | any(startswith("6 GiB on GPU 1 ") and endswith("most likely what these processes keep"))'
    json_ok '.findings[0].evidence | any(startswith("confidence high"))'
    json_ok '.findings[0].fix[0] | startswith("stop them: kill -TERM ")'
    json_ok '.findings[0].fix | any(contains("vramguard clean --orphans --force"))'
    vgd doctor
    [[ $output == *"CRITICAL orphan-holder: 2 leftover processes of a finished job (process group $G) still hold NVIDIA device nodes open"* ]]
}

# host_pidns: whether this procfs is the host's PID namespace (its kthreadd is seen), so the
# driver's PIDs are ours and vramguard weighs what it charges to dead ones.
host_pidns() {
    [ "$(awk '{print $2}' /proc/2/stat 2>/dev/null)" = "(kthreadd)" ]
}

# main_with_workers LAUNCHER... : a main process started by LAUNCHER (setsid, or a parent
# that never reaps) that opens GPU 0's node and nvidiactl and forks two idle DataLoader
# workers, which inherit them. M is the main, W1 and W2 the workers.
main_with_workers() {
    VG_HELPER_TAG=$_VG_TAG "$@" "$HELPER" --pidfile "$TMP/main" --open "$(dev 0)" \
        --open "$DEVDIR/nvidiactl" --children 2 --children-outlive --child-comm pt_data_worker \
        -- python train.py </dev/null >/dev/null 2>&1 3>&- &
    _vg_record launcher $!
    wait_for "[ \"\$(vg_role child $TMP/main | wc -l)\" -eq 2 ]"
    M=$(vg_role main "$TMP/main")
    W1=$(vg_role child "$TMP/main" | sed -n 1p)
    W2=$(vg_role child "$TMP/main" | sed -n 2p)
    _vg_record main "$M"
    _vg_record child "$W1"
    _vg_record child "$W2"
}

# The seed's case when the main led its own session (setsid, `ssh host python train.py`, a
# Jupyter kernel): its workers have a double-forked daemon's lineage, and the driver still
# charges the dead main's PID, because their inherited files keep its context alive.
crashed_leader_verdicts() {
    vgd --json doctor
    show
    [ "$status" -eq 2 ]
    [ "$(nfind orphan-holder)" -eq 1 ]
    json_ok '.findings[] | select(.rule == "orphan-holder") | .confidence == "high" and (.pids | sort) == ([$a, $b] | sort)' \
        --argjson a "$W1" --argjson b "$W2"
    json_ok '[.findings[] | select(.rule == "orphan-holder") | .verdicts[] | .facts[] | .fact] | index("sibling-workers") and index("inherited-nodes")'
    if host_pidns; then
        json_ok '[.findings[] | select(.rule == "orphan-holder") | .verdicts[] | .facts[] | select(.fact == "driver-charges-dead-leader") | .text] | length == 2 and all(contains("to PID \($m), its dead"))' \
            --arg m "$M"
        # The dead (or defunct) main's own finding says who keeps its memory, and no reset.
        json_ok '[.findings[] | select((.rule == "foreign-pid" or .rule == "zombie-holder") and (.pids | index($m)))] | length == 1 and all((.evidence | any(contains("its context lives on because PIDs"))) and (.fix | all(contains("reset") | not)))' \
            --argjson m "$M"
    else
        echo "# not the host's PID namespace: the driver's PIDs are not compared" >&3
        json_ok '[.findings[] | select(.rule == "orphan-holder") | .verdicts[] | .facts[] | .fact] | index("driver-pids-unverified")'
    fi
    vgd --json clean
    json_ok '[.processes[] | select(.action == "signal") | .pid] | sort == ([$a, $b] | sort)' \
        --argjson a "$W1" --argjson b "$W2"
}

@test "workers of a main that led its own session (setsid) and crashed: sure leftovers, not a daemon's shape" {
    main_with_workers setsid
    [ "$(vg_stat "$M" session)" = "$M" ]
    kill -KILL "$M"
    wait_for "vg_gone $M"
    [ "$(vg_stat "$W1" ppid)" = 1 ] || [ "$(vg_stat "$W1" session)" = "$M" ]
    homogeneous_host "proc gpu=0 pid=$M type=compute mem=4GiB sm=0"
    crashed_leader_verdicts
}

@test "workers of a main that is a zombie (its parent never reaps): its job has ended" {
    # The parent starts the main and sleeps without ever waiting for it.
    main_with_workers /usr/bin/python3 -c 'import os, sys, time
pid = os.fork()
if pid == 0:
    os.setsid()
    os.execvp(sys.argv[1], sys.argv[1:])
time.sleep(600)'
    kill -KILL "$M"
    wait_for "[ \"\$(vg_stat $M state)\" = Z ]"
    homogeneous_host "proc gpu=0 pid=$M type=compute mem=4GiB sm=0"
    crashed_leader_verdicts
    vgd --json doctor
    json_ok '[.findings[] | select(.rule == "orphan-holder") | .verdicts[] | .facts[] | select(.fact == "group-leader-gone") | .text] | any(contains("(PID \($m)) is a zombie"))' \
        --arg m "$M"
}

@test "a worker's worker whose own parent died while its job's main (holding nothing) runs: not a sure leftover" {
    # main (no GPU) -> trainer (opens the node) -> data worker; the trainer dies, the main
    # runs on. The worker is adopted, but an older live process of its session runs its
    # command line: its job may still run, and clean must leave it alone.
    /usr/bin/python3 -c 'import os, sys, time
tmp, node = sys.argv[1], sys.argv[2]
if os.fork() == 0:
    fd = os.open(node, os.O_RDWR)
    w = os.fork()
    if w == 0:
        time.sleep(600)
        os._exit(0)
    open(tmp + "/w", "w").write(str(w))
    open(tmp + "/t", "w").write(str(os.getpid()))
    time.sleep(600)
    os._exit(0)
open(tmp + "/m", "w").write(str(os.getpid()))
time.sleep(600)' "$TMP" "$(dev 0)" </dev/null >/dev/null 2>&1 3>&- &
    _vg_record launcher $!
    wait_for '[[ -s $TMP/m && -s $TMP/t && -s $TMP/w ]]'
    M=$(cat "$TMP/m") T=$(cat "$TMP/t") W=$(cat "$TMP/w")
    _vg_record main "$M"
    _vg_record child "$T"
    _vg_record child "$W"
    kill -KILL "$T"
    wait_for "vg_gone $T"
    vg_holds "$W" "$(dev 0)"
    homogeneous_host
    vgd --json doctor
    show
    json_ok '[.findings[] | select(.rule == "orphan-holder" and .confidence == "high")] | length == 0'
    vgd --json clean --force
    json_ok '[.processes[] | select(.action == "signal")] | length == 0'
    json_ok '.processes[] | select(.pid == $w) | .action == "leave" and (.verdict | contains("runs its command line: the job it was forked from may still run"))' \
        --argjson w "$W"
    kill -0 "$W"
}

@test "adopted by a subreaper in another session (systemd --user): a leftover" {
    vg_spawn --reaper --leader --pgrp --orphan --comm pt_data_worker --open "$(dev 0)" -- python a.py
    O=$VG_PID
    wait_for "vg_gone $VG_PARENT_PID"
    [ "$(vg_stat "$O" ppid)" = "$VG_REAPER_PID" ]
    [ "$(vg_stat "$O" session)" = "$VG_LEADER_PID" ]
    homogeneous_host
    vgd --json doctor
    show
    [ "$status" -eq 1 ]
    json_ok '.findings[0] | .rule == "orphan-holder" and .confidence == "high" and .pids == [$o]' --argjson o "$O"
    json_ok '.findings[0].evidence | any(contains("parent is now PID \($r) (a subreaper in another session)"))' \
        --arg r "$VG_REAPER_PID"
}

@test "adopted by its container's init (tini, pid 1 of a PID namespace): a leftover" {
    [[ $(id -u) -eq 0 ]] || skip "needs root for a PID namespace"
    VG_HELPER_TAG=$_VG_DIR unshare --pid --fork "$HELPER" --pidfile "$TMP/tini" --reaper --pgrp \
        --orphan --env "VG_CASE=tini-$BATS_TEST_NUMBER" --comm pt_data_worker --open "$(dev 2)" \
        </dev/null >"$TMP/tini.log" 2>&1 &
    wait_for "[[ -s $TMP/tini ]]"
    # The pidfile speaks the namespace's numbers; find the worker by the host's.
    O=
    for p in $(vg_pids_with_env "VG_CASE=tini-$BATS_TEST_NUMBER"); do
        if [[ $(vg_stat "$p" comm) == pt_data_worker ]]; then O=$p; fi
    done
    [ -n "$O" ]
    # two levels: the host's number and the namespace's
    awk '/^NSpid:/ { exit !(NF == 3) }' "/proc/$O/status"
    homogeneous_host
    vgd --json doctor
    show
    json_ok '.findings[] | select(.rule == "orphan-holder") | .pids == [$o] and .confidence == "high"' --argjson o "$O"
    json_ok '.findings[] | select(.rule == "orphan-holder") | .evidence | any(contains("(its container'"'"'s init)"))'
}

@test "adopted by the launching shell, a subreaper in the job's own session: a leftover" {
    vg_spawn --reaper --reaper-setsid --pgrp --orphan --comm pt_data_worker --open "$(dev 3)" -- python b.py
    O=$VG_PID
    wait_for "vg_gone $VG_PARENT_PID"
    [ "$(vg_stat "$O" ppid)" = "$VG_REAPER_PID" ]
    [ "$(vg_stat "$O" session)" = "$VG_REAPER_PID" ]
    homogeneous_host
    vgd --json doctor
    show
    json_ok '.findings[0] | .rule == "orphan-holder" and .confidence == "high" and .pids == [$o]' --argjson o "$O"
    json_ok '.findings[0].evidence | any(contains("(a subreaper in its own session, such as the launching shell)"))'
}

@test "a multiprocessing child with a context of its own whose parent died: sure when idle, medium when working" {
    orphan_of_job --open "$(dev 1)" -- /usr/bin/python3 -c \
        "from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=5, pipe_handle=7)" --multiprocessing-fork
    homogeneous_host "proc gpu=1 pid=$O type=compute mem=3GiB sm=0"
    vgd --json doctor
    show
    [ "$status" -eq 2 ]
    [ "$(rules_fired)" = orphan-holder ]
    json_ok '.findings[0] | .severity == "critical" and .confidence == "high" and .memory == 3221225472'
    json_ok '.findings[0].evidence | any(contains("a multiprocessing worker by its command line") and contains("0% GPU"))'
    homogeneous_host "proc gpu=1 pid=$O type=compute mem=3GiB sm=60"
    vgd --json doctor
    show
    [ "$status" -eq 1 ]
    json_ok '.findings[0] | .rule == "orphan-holder" and .severity == "warning" and .confidence == "medium"'
    json_ok '.findings[0].title | contains("may be left over from a finished job")'
    json_ok '.findings[0].evidence | any(startswith("confidence medium: it is working"))'
    json_ok '.findings[0].fix[0] == "look before acting: vramguard doctor --pid \($o)"' --arg o "$O"
}

# agent RANKS...: a stand-in for a torchrun agent (bash) that starts each rank in a session of
# its own, as torchrun does; sets AGENT and R0, R1...
agent() {
    VG_HELPER_TAG=$_VG_TAG bash -c '
        h=$0 tmp=$1; shift
        for r in "$@"; do
            setsid "$h" --pidfile "$tmp/rank$r" --env LOCAL_RANK=$r --env RANK=$r \
                --env TORCHELASTIC_RUN_ID=none --open "$(cat "$tmp/dev$r")" -- python -u train.py &
        done
        wait' "$HELPER" "$TMP" "$@" </dev/null >/dev/null 2>&1 &
    AGENT=$!
    _vg_record agent "$AGENT"
    local r
    for r in "$@"; do
        wait_for "[[ -s $TMP/rank$r ]]"
        printf -v "R$r" '%s' "$(vg_role main "$TMP/rank$r")"
    done
}

@test "ranks of a torchrun whose agent died: leftovers; under a live agent: not" {
    dev 0 >"$TMP/dev0"
    dev 1 >"$TMP/dev1"
    agent 0 1
    [ "$(vg_stat "$R0" session)" = "$R0" ]
    [ "$(vg_stat "$R1" ppid)" = "$AGENT" ]
    homogeneous_host "proc gpu=0 pid=$R0 type=compute mem=10GiB sm=0" \
        "proc gpu=1 pid=$R1 type=compute mem=10GiB sm=0"
    vgd --json doctor
    show
    [ "$(nfind orphan-holder)" -eq 0 ]
    kill -KILL "$AGENT"
    wait_for "[ \"\$(vg_stat $R0 ppid)\" != $AGENT ] && [ \"\$(vg_stat $R1 ppid)\" != $AGENT ]"
    vgd --json doctor
    show
    [ "$status" -eq 2 ]
    [ "$(nfind orphan-holder)" -eq 2 ]
    json_ok '[.findings[] | select(.rule == "orphan-holder")] | all(.confidence == "high" and .severity == "critical")'
    json_ok '.findings[] | select(.pids == [$r]) | .evidence | any(contains("a launcher'"'"'s rank (LOCAL_RANK=1)"))' \
        --argjson r "$R1"
}

@test "a working leftover is reported at medium confidence, a warning" {
    orphan_of_job --comm pt_data_worker --busy 40 --open "$(dev 2)" -- python train.py
    homogeneous_host
    vgd --json doctor
    show
    [ "$status" -eq 1 ]
    json_ok '.findings[0] | .rule == "orphan-holder" and .confidence == "medium" and .pids == [$o]' --argjson o "$O"
    json_ok '.findings[0].evidence | any(startswith("confidence medium: it is working"))'
}

# ------------------------------------------------------------------- what only looks like it

@test "a nohup job whose login session ended, working or idle, and its workers: not leftovers" {
    vg_spawn --setsid --orphan --own-group --ignore-hup --children 2 --child-comm pt_data_worker \
        --busy 30 --open "$(dev 1)" -- python train.py
    O=$VG_PID
    [ "$(vg_stat "$O" pgrp)" = "$O" ]
    vg_gone "$VG_PARENT_PID"
    grep -q '^SigIgn:.*[13579bdf]$' "/proc/$O/status"
    homogeneous_host "proc gpu=1 pid=$O type=compute mem=20GiB sm=97"
    vgd --json doctor
    show
    [ "$status" -eq 0 ]
    json_ok '.findings == []'
    homogeneous_host "proc gpu=1 pid=$O type=compute mem=20GiB sm=0"
    vgd --json doctor
    show
    [ "$status" -eq 0 ]
    [ "$(rules_fired)" = allocator-cache ]
    vgd --json clean
    show
    json_ok '.processes | map(select(.pid == $o))[0] | .action == "leave" and .refusal == "not-leftover" and (.verdict | contains("leads its own process group"))' \
        --argjson o "$O"
    json_ok '[.processes[] | select(.action == "signal")] == []'
}

@test "daemons: a service in its own session, and a forking one with a context: not leftovers" {
    VG_HELPER_TAG=$_VG_TAG setsid -f "$HELPER" --pidfile "$TMP/service" --open "$(dev 3)" \
        -- /usr/bin/myservice </dev/null >/dev/null 2>&1 3>&-
    wait_for "[[ -s $TMP/service ]]"
    S=$(vg_role main "$TMP/service")
    _vg_record service "$S"
    [ "$(vg_stat "$S" session)" = "$S" ]
    vg_spawn --setsid --orphan --open "$(dev 2)" -- /usr/sbin/mydaemon --fork
    D=$VG_PID
    [ "$(vg_stat "$D" session)" != "$D" ] && [ "$(vg_stat "$D" pgrp)" != "$D" ]
    homogeneous_host "proc gpu=3 pid=$S type=compute mem=900MiB sm=0" \
        "proc gpu=2 pid=$D type=compute mem=900MiB sm=0"
    vgd --json doctor
    show
    [ "$status" -eq 0 ]
    json_ok '.findings == []'
    vgd --json clean
    show
    json_ok '.processes | map(select(.pid == $d))[0].verdict | contains("a daemon'"'"'s shape")' --argjson d "$D"
    # The service's job never ended (it leads its session, nothing of it is gone): not even
    # listed; the daemon's (its forking parent is gone) is, to say why it is left alone.
    json_ok '[.processes[] | select(.pid == $s)] == []' --argjson s "$S"
    json_ok '.summary.to_signal == 0 and .summary.left_alone == 1'
}

@test "a job left in a tmux pane whose shell exited: not a leftover" {
    command -v tmux >/dev/null || skip "tmux is not installed"
    SOCK=vg-$$-$BATS_TEST_NUMBER
    tmux -L "$SOCK" -f /dev/null new-session -d -x 200 -y 20 \
        "env VG_HELPER_TAG=$_VG_TAG PS1='$ ' bash --norc --noprofile -i"
    tmux -L "$SOCK" send-keys "$HELPER --pidfile $TMP/job --open $(dev 2) -- python train.py &" Enter
    wait_for "[[ -s $TMP/job ]]"
    J=$(vg_role main "$TMP/job")
    _vg_record job "$J"
    SH=$(vg_stat "$J" session)
    tmux -L "$SOCK" send-keys "exit" Enter
    wait_for "vg_gone $SH"
    wait_for "[ \"\$(vg_stat $J ppid)\" = 1 ]"
    [ "$(vg_stat "$J" pgrp)" = "$J" ]
    homogeneous_host "proc gpu=2 pid=$J type=compute mem=8GiB sm=50"
    vgd --json doctor
    show
    [ "$status" -eq 0 ]
    json_ok '.findings == []'
    vgd --json clean
    json_ok '.processes[0] | .pid == $j and .action == "leave"' --argjson j "$J"
}

@test "a Jupyter kernel under its live server holding cached memory: allocator-cache, not a leftover" {
    LIB=$(vg_fake_lib libtorch_cuda.so libcuda.so.1)
    VG_HELPER_TAG=$_VG_TAG bash -c 'setsid "$0" --pidfile "$1/kernel" --open "$2" --map "$3/libtorch_cuda.so" \
        --map "$3/libcuda.so.1" -- python -m ipykernel_launcher -f kernel.json & wait' \
        "$HELPER" "$TMP" "$(dev 0)" "$LIB" </dev/null >/dev/null 2>&1 &
    _vg_record server "$!"
    wait_for "[[ -s $TMP/kernel ]]"
    K=$(vg_role main "$TMP/kernel")
    homogeneous_host "proc gpu=0 pid=$K type=compute mem=12GiB sm=0"
    vgd --json doctor
    show
    [ "$status" -eq 0 ]
    [ "$(rules_fired)" = allocator-cache ]
    json_ok '.findings[0] | .severity == "info" and .pids == [$k] and .memory == 12884901888' --argjson k "$K"
    json_ok '.findings[0].title | endswith("did no GPU work in the driver'"'"'s recent samples: memory its framework keeps, not a leak")'
    json_ok '.findings[0].evidence | any(startswith("PyTorch is loaded"))'
    json_ok '.findings[0].fix | any(contains("torch.cuda.empty_cache()"))'
    json_ok '.findings[0].evidence | any(contains("comes back when it exits"))'
    vgd --json clean
    json_ok '.processes == []'
}

@test "a stopped process (T) of a dead job: a possible leftover at medium, left alone" {
    orphan_of_job --comm pt_data_worker --open "$(dev 0)" -- python train.py
    kill -STOP "$O"
    wait_for "[ \"\$(vg_stat $O state)\" = T ]"
    homogeneous_host
    vgd --json doctor
    show
    # Its job's leader is gone and it holds inherited nodes, but someone stopped it: reported,
    # never a default target.
    [ "$status" -eq 1 ]
    [ "$(rules_fired)" = orphan-holder ]
    json_ok '.findings[0] | .confidence == "medium" and .severity == "warning" and (.evidence | any(startswith("confidence medium: it is stopped (T)")))'
    json_ok '.findings[0].verdicts[0].facts | any(.fact == "stopped" and .weight < 0)'
    vgd --json clean
    json_ok '.processes[0] | .pid == $o and .action == "leave" and (.verdict | startswith("it is stopped"))' \
        --argjson o "$O"
}
