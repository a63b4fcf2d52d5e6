#!/usr/bin/env bats
# t0805-churn: thousands of processes start and exit (and PIDs get reused once the kernel's
# counter wraps) while status, doctor and clean --force run over and over: no crash, no phantom
# holder (every holder reported is a process that held the device node, with that process's
# identity, or a PID the driver lists), no signal to a process outside clean's plan, all
# within a bounded time. The churn comes from tests/reliability/vg-churn.c. See
# docs/reliability.md.

load lib

bats_require_minimum_version 1.5.0

CHURN=$VG_BUILD/tests/vg-churn
FOREIGN=4000000 # a PID the driver lists and no /proc here can show (pid_max <= 4194304)

setup() {
    TMP=$(vg_tmpdir)
    DEVDIR=$(vg_fake_dev "" 2)
    vg_require_jq
    [[ -x $CHURN ]] || skip "$CHURN is missing: run 'make check' (or make $CHURN)"
    STABLE=$(vg_spawn --open "$DEVDIR/nvidia0" --comm stable-holder)
    vg_scenario <<EOF2
driver 550.54.15
cuda 12040
gpu index=0 uuid=GPU-0c000000-0000-0000-0000-000000000000 name="NVIDIA H100 80GB HBM3" minor=0 bus=00000000:17:00.0 total=80GiB reserved=512MiB used=2GiB util=5 cc=9.0 persistence=1 compute_mode=0 mig=0
gpu index=1 uuid=GPU-1c000000-0000-0000-0000-000000000000 name="NVIDIA H100 80GB HBM3" minor=1 bus=00000000:2A:00.0 total=80GiB reserved=512MiB used=1GiB util=0 cc=9.0 persistence=1 compute_mode=0 mig=0
proc gpu=0 pid=$STABLE type=compute mem=2GiB
proc gpu=1 pid=$FOREIGN type=compute mem=1GiB
EOF2
}

@test "churn: status and doctor never crash or report a phantom holder, clean signals only its plan" {
    local t0 t1 n=0 rc bad=() f line pid seen comm churned holders wrapped signalled vanished
    local orphan
    # A leftover for clean to stop: an orphan holding GPU 1's node.
    vg_spawn --orphan --setsid --open "$DEVDIR/nvidia1" --comm orphan-holder -- python -c \
        "from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=5)" --multiprocessing-fork >/dev/null
    orphan=$VG_ORPHAN_PID
    t0=$SECONDS
    # 25 s of churn, and rounds until it ends and at least 10 ran (a round under ASan, with the
    # in-kernel scan on a host that lists 1,000 processes or more, takes 2 s on a loaded CI)
    "$CHURN" --dev "$DEVDIR/nvidia0" --log "$TMP/churn.log" --seconds 25 --rate 1000 &
    local churn_pid=$!
    while { kill -0 "$churn_pid" 2>/dev/null || ((n < 10)); } && ((SECONDS - t0 < 50)); do
        rc=0
        "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" --json status >"$TMP/status.$n.json" 2>"$TMP/status.$n.err" || rc=$?
        ((rc == 0)) || bad+=("status run $n: exit $rc: $(head -c 300 "$TMP/status.$n.err")")
        rc=0
        "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" --json doctor --no-shell >"$TMP/doctor.$n.json" 2>"$TMP/doctor.$n.err" || rc=$?
        ((rc <= 2)) || bad+=("doctor run $n: exit $rc: $(head -c 300 "$TMP/doctor.$n.err")")
        if ((n % 4 == 0)); then
            rc=0
            "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" --json clean --force --grace 1s >"$TMP/clean.$n.json" 2>"$TMP/clean.$n.err" || rc=$?
            ((rc <= 1)) || bad+=("clean run $n: exit $rc: $(head -c 300 "$TMP/clean.$n.err")")
        fi
        n=$((n + 1))
    done
    wait "$churn_pid"
    t1=$SECONDS
    read -r _ _ churned _ holders _ wrapped _ signalled < <(tail -n 1 "$TMP/churn.log")

    # Who may be reported: processes that held the node (by PID, with their comm), and the
    # PIDs the driver lists.
    local -A fd_ok=() nvml_ok=()
    fd_ok[$STABLE]=1 fd_ok[$orphan]=1
    while read -r kind pid; do
        if [[ $kind == H ]]; then fd_ok[$pid]=1; fi
    done <"$TMP/churn.log"
    nvml_ok[$STABLE]=1 nvml_ok[$FOREIGN]=1

    jq -r '[.gpus[].holders[], .unmatched_holders[].holder] | .[]
        | "\(.pid) \(.seen_by) \(.comm // "-")"' "$TMP"/status.*.json >"$TMP/holders" ||
        bad+=("a status document is not valid JSON")
    while read -r pid seen comm; do
        case $seen in
        fd | both)
            [[ -n ${fd_ok[$pid]:-} ]] || bad+=("phantom: PID $pid ($comm) seen $seen never held the node")
            [[ $comm == churn-holder || $comm == stable-holder || $comm == orphan-holder || $comm == - ]] ||
                bad+=("identity mix-up: PID $pid reported holding the node as '$comm'")
            ;;
        nvml) [[ -n ${nvml_ok[$pid]:-} ]] || bad+=("phantom: PID $pid seen by nvml is not listed") ;;
        *) bad+=("PID $pid: seen_by '$seen'") ;;
        esac
    done <"$TMP/holders"
    jq -r '.findings[].pids[]' "$TMP"/doctor.*.json >"$TMP/finding-pids" ||
        bad+=("a doctor document is not valid JSON")
    while read -r pid; do
        [[ -n ${fd_ok[$pid]:-} || -n ${nvml_ok[$pid]:-} ]] || bad+=("a finding names PID $pid")
    done <"$TMP/finding-pids"
    # clean: only the orphan was ever signalled; no churn child died of a signal.
    jq -r '.processes[] | select(.result != null and (.result.signals | length) > 0) | .pid' \
        "$TMP"/clean.*.json >"$TMP/signalled" || bad+=("a clean document is not valid JSON")
    while read -r pid; do
        [[ $pid == "$orphan" ]] || bad+=("clean signalled PID $pid, not the orphan $orphan")
    done <"$TMP/signalled"
    ((signalled == 0)) || bad+=("$signalled churn children died of a signal")
    vg_gone "$orphan" || bad+=("the orphan $orphan is still running")
    vanished=$(jq -s 'map(.scan.vanished) | add' "$TMP"/status.*.json)

    echo "# churn: $churned processes ($holders holding the node), PID counter wrapped: $wrapped; $n status + $n doctor + $(((n + 3) / 4)) clean --force runs in $((t1 - t0)) s; $(wc -l <"$TMP/holders") holders checked, $vanished processes vanished mid-scan" >&3
    if ((${#bad[@]})); then
        printf '%s\n' "${bad[@]:0:40}"
        return 1
    fi
    ((n >= 10)) || { echo "only $n rounds"; return 1; }
    ((churned >= 2000)) || { echo "only $churned processes churned"; return 1; }
    ((t1 - t0 < 60))
}
