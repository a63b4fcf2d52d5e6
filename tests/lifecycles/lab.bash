# shellcheck shell=bash disable=SC2034,SC2154 # the variables set here are for the test files
# tests/lifecycles/lab.bash: the lifecycle lab's runner (tests/lifecycles/README.md), loaded by
# the t0209-t0212 bats files after tests/cli/lib.bash and clean.bash.
#
# lab CASE STATE: starts CASE with the real tool that makes it in the field (start_CASE below),
# brings it to STATE (running, crash, zombie, launcher-killed, session-ended), writes the fake
# driver's scenario as the real driver would see the job then, runs `vramguard doctor --json`,
# `clean --json` and `clean --force --json`, and compares what each process of the job (main,
# worker, launcher) is, is called and gets with the rows of tests/lifecycles/cases.tsv for
# CASE and STATE. Every mismatch is printed; the test fails at the end when there was one.
# With LAB_JSON=DIR, doctor's and clean's JSON are kept as DIR/CASE.STATE.{doctor,plan}.json.
# With LAB_RESULTS set, one line per process is appended to that file:
#   CASE STATE ROLE PID expected(alive verdict clean) got(alive verdict clean) | vramguard's words
# lab_teardown: kills everything the case started (tmux and screen servers, Jupyter kernels,
# Slurm jobs, every process carrying this test's tag), on every path.

LAB_DIR=$ROOT/tests/lifecycles
LAB_TABLE=${LAB_TABLE:-$LAB_DIR/cases.tsv}
LAB_PY=/usr/bin/python3 # Debian's python: the one with jupyter_client and ipykernel
LAB_WAIT=${LAB_WAIT:-20}

# lab_rows CASE STATE: the table's rows for them, tab-separated: role alive verdict clean.
lab_rows() {
    awk -F'\t' -v c="$1" -v s="$2" '
        $1 !~ /^#/ && $1 == c && $2 == s { print $3 "\t" $4 "\t" $5 "\t" $6 }' "$LAB_TABLE"
}

lab_setup() {
    DEVDIR=$(vg_fake_dev)
    TMP=$(vg_tmpdir)
    SIGLOG=$TMP/signals
    : >"$SIGLOG"
    LIBDIR=$(vg_fake_lib libcuda.so.1)
    JOB=("$LAB_PY" "$LAB_DIR/job.py" --dev "$DEVDIR" --pidfile "$TMP/job.pids" --signal-log "$SIGLOG"
        --map "$LIBDIR/libcuda.so.1")
    MAIN='' WORKERS=() LAUNCHER='' NOINHERIT=0 INNS=0 LAB_SID='' LAB_NOLIST=0
    export VG_HELPER_TAG=$_VG_TAG LAB_KEEP=$TMP/keep.fifo
    mkfifo "$LAB_KEEP"
}

lab_teardown() {
    if [[ -n ${TMUX_SOCK:-} ]]; then tmux -L "$TMUX_SOCK" kill-server 2>/dev/null || true; fi
    if [[ -n ${SCREEN_NAME:-} ]]; then screen -S "$SCREEN_NAME" -X quit >/dev/null 2>&1 || true; fi
    if [[ -n ${LAB_SLURM_JOB:-} ]]; then scancel "$LAB_SLURM_JOB" 2>/dev/null || true; fi
    if [[ -n ${KCLIENT:-} ]]; then kill -KILL "$KCLIENT" 2>/dev/null || true; fi
    if [[ -n ${PODMAN_NAME:-} ]]; then
        timeout 60 podman rm -f -t 0 "$PODMAN_NAME" >/dev/null 2>&1 || true
    fi
    clean_teardown
    if [[ -n ${LAB_SLURM:-} ]]; then vg_slurm_cancel_all 20 >/dev/null 2>&1 || true; fi
}

# Reads the job's pidfile (ns pids mapped to the host's for a case in a PID namespace).
lab_read_pids() {
    local role pid
    wait_for "[[ -s $TMP/job.pids ]]" "$LAB_WAIT" || { echo "the job never wrote its pids"; return 1; }
    WORKERS=()
    while read -r role pid; do
        if ((INNS)); then pid=$(lab_host_pid "$pid") || return 1; fi
        _vg_record "$role" "$pid"
        case $role in
        main) MAIN=$pid ;;
        worker) WORKERS+=("$pid") ;;
        esac
    done <"$TMP/job.pids"
}

# lab_host_pid NSPID: the host's number of the tagged process that is NSPID in its namespace.
lab_host_pid() {
    local p
    for p in $(vg_pids_with_env "VG_HELPER_TAG=$_VG_TAG"); do
        if awk -v n="$1" '/^NSpid:/ { exit !(NF == 3 && $3 == n) }' "/proc/$p/status" 2>/dev/null; then
            printf '%s\n' "$p"
            return 0
        fi
    done
    echo "no host pid for namespace pid $1" >&2
    return 1
}

# lab_alive PID: yes, zombie or no.
lab_alive() {
    local st
    st=$(vg_stat "$1" state 2>/dev/null) || { echo no; return; }
    case $st in
    Z) echo zombie ;;
    X) echo no ;;
    *) echo yes ;;
    esac
}

# lab_bg NAME CMD...: CMD in the background, stdin /dev/null, output to TMP/NAME.log, bats'
# descriptor 3 closed; its pid in LAB_BG, recorded.
lab_bg() {
    local name=$1
    shift
    "$@" </dev/null >"$TMP/$name.log" 2>&1 3>&- &
    LAB_BG=$!
    _vg_record "$name" "$LAB_BG"
}

# A login shell stand-in: bash that keeps running (and reaping its children as they die) whatever
# its job does, blocked in a read of a FIFO nobody writes (a sleep it restarts could be restarted
# just as the teardown kills the old one, and escape it).
# shellcheck disable=SC2016 # expanded by that shell
KEEP='exec 9<>"$LAB_KEEP"; while :; do read -r -u 9 _; done'

# ---------------------------------------------------------------------------------- the cases

start_jobctl() { # bash job control (set -m): the job leads its own group in the shell's session
    lab_bg shell setsid bash -c 'set -m; "$@" & '"$KEEP" bash "${JOB[@]}" "${JOB_ARGS[@]}"
    LAUNCHER=$LAB_BG
}
start_jobctl_nolist() { # the driver cannot list GPU 0's processes (lab_scenario)
    LAB_NOLIST=1
    start_jobctl
}
start_jobctl_busy() {
    JOB_ARGS=(-n 1 --busy)
    start_jobctl
}
start_nohup() {
    lab_bg shell setsid bash -c 'set -m; nohup "$@" & '"$KEEP" bash "${JOB[@]}" -n 1
    LAUNCHER=$LAB_BG
}
start_setsid() { # setsid from a script (not a group leader: setsid execs, no fork)
    lab_bg shell setsid bash -c 'setsid "$@" & '"$KEEP" bash "${JOB[@]}"
    LAUNCHER=$LAB_BG
}
# The daemons are typed in a login shell (a stand-in: its own session, kept alive by KEEP), the
# launcher here: the tool itself exits once the daemon runs, the shell's session can end.
start_setsid_f() { # setsid -f: forks, the parent exits; init adopts the job at once
    lab_bg shell setsid bash -c 'setsid -f "$@"; '"$KEEP" bash "${JOB[@]}" -n 1
    LAUNCHER=$LAB_BG
}
start_daemon3() {
    lab_bg shell setsid bash -c '"$@"; '"$KEEP" bash "${JOB[@]}" --daemonize daemon3
    LAUNCHER=$LAB_BG
}
start_double_fork() {
    lab_bg shell setsid bash -c '"$@"; '"$KEEP" bash "${JOB[@]}" --daemonize double -n 1
    LAUNCHER=$LAB_BG
}
start_ssd() {
    command -v start-stop-daemon >/dev/null || skip "start-stop-daemon (dpkg) is not installed"
    lab_bg shell setsid bash -c '"$@"; '"$KEEP" bash start-stop-daemon --start --background \
        --make-pidfile --pidfile "$TMP/ssd.pid" --startas "$LAB_PY" -- "${JOB[@]:1}" -n 1
    LAUNCHER=$LAB_BG
}
start_tmux() {
    command -v tmux >/dev/null || skip "tmux is not installed"
    TMUX_SOCK=vg-lab-$$-$BATS_TEST_NUMBER
    tmux -L "$TMUX_SOCK" -f /dev/null new-session -d -x 250 -y 20 \
        "env VG_HELPER_TAG=$_VG_TAG PS1='$ ' bash --norc --noprofile -i" </dev/null 3>&-
    LAUNCHER=$(tmux -L "$TMUX_SOCK" display-message -p '#{pid}')
    _vg_record tmux "$LAUNCHER"
    tmux -L "$TMUX_SOCK" send-keys "${JOB[*]} &" Enter
}
# tmux-attach: a client on a real terminal (pty-client.py) makes the session and stays attached
# while the job is typed; then `tmux detach-client` detaches it, as a user does before logging
# out, and the client exits.
start_tmux_attach() {
    command -v tmux >/dev/null || skip "tmux is not installed"
    TMUX_SOCK=vg-lab-$$-$BATS_TEST_NUMBER
    lab_bg client "$LAB_PY" "$LAB_DIR/pty-client.py" tmux -L "$TMUX_SOCK" -f /dev/null \
        new-session -s lab "env VG_HELPER_TAG=$_VG_TAG PS1='$ ' bash --norc --noprofile -i"
    local client=$LAB_BG
    wait_for "[[ -n \$(tmux -L $TMUX_SOCK list-clients -F '#{client_pid}' 2>/dev/null) ]]" \
        "$LAB_WAIT" || { cat "$TMP/client.log"; echo "the tmux client never attached"; return 1; }
    LAUNCHER=$(tmux -L "$TMUX_SOCK" display-message -p -t lab '#{pid}')
    _vg_record tmux "$LAUNCHER"
    tmux -L "$TMUX_SOCK" send-keys -t lab "${JOB[*]} &" Enter
    lab_detach "$client" "tmux -L $TMUX_SOCK detach-client -s lab" \
        "[[ -z \$(tmux -L $TMUX_SOCK list-clients 2>/dev/null) ]]"
}
# lab_detach CLIENT DETACH GONE: once the job runs, runs DETACH, waits until the client CLIENT
# (a pty-client.py of this shell) has exited with status 0 and GONE holds.
lab_detach() {
    local rc=0
    wait_for "[[ -s $TMP/job.pids ]]" "$LAB_WAIT" || { echo "the job never wrote its pids"; return 1; }
    eval "$2" || { echo "could not detach: $2"; return 1; }
    wait_for "[ \"\$(lab_alive $1)\" != yes ]" "$LAB_WAIT" || { echo "the client stayed"; return 1; }
    wait "$1" || rc=$?
    ((rc == 0)) || { cat "$TMP/client.log"; echo "the client exited with $rc"; return 1; }
    wait_for "$3" "$LAB_WAIT" || { echo "still attached after the detach"; return 1; }
}
# lab_screen_ready: the SCREEN process of session SCREEN_NAME (LAUNCHER), once its window's shell
# reads its terminal.
lab_screen_ready() {
    wait_for "screen -ls $SCREEN_NAME | grep -q '[0-9]\.$SCREEN_NAME'" "$LAB_WAIT" || return 1
    LAUNCHER=$(screen -ls "$SCREEN_NAME" | grep -o "[0-9]*\.$SCREEN_NAME" | head -1)
    LAUNCHER=${LAUNCHER%%.*}
    _vg_record screen "$LAUNCHER"
    # the window's shell must be reading its terminal before it is typed to
    wait_for "pgrep -P $LAUNCHER bash >/dev/null" "$LAB_WAIT"
    sleep 0.5
}
start_screen() {
    command -v screen >/dev/null || skip "screen is not installed (scripts/install-deps --test)"
    SCREEN_NAME=vg-lab-$$-$BATS_TEST_NUMBER
    PS1='$ ' screen -dmS "$SCREEN_NAME" -c /dev/null bash --norc --noprofile -i </dev/null 3>&-
    lab_screen_ready
    screen -S "$SCREEN_NAME" -p 0 -X stuff "${JOB[*]} &"$'\n'
}
# screen-attach: the same with a client on a real terminal that made the session, detached by
# `screen -d` once the job runs.
start_screen_attach() {
    command -v screen >/dev/null || skip "screen is not installed (scripts/install-deps --test)"
    SCREEN_NAME=vg-lab-$$-$BATS_TEST_NUMBER
    lab_bg client env PS1='$ ' "$LAB_PY" "$LAB_DIR/pty-client.py" screen -S "$SCREEN_NAME" \
        -c /dev/null bash --norc --noprofile -i
    local client=$LAB_BG
    wait_for "screen -ls $SCREEN_NAME | grep -q 'Attached'" "$LAB_WAIT" ||
        { cat "$TMP/client.log"; echo "the screen client never attached"; return 1; }
    lab_screen_ready
    screen -S "$SCREEN_NAME" -p 0 -X stuff "${JOB[*]} &"$'\n'
    lab_detach "$client" "screen -d $SCREEN_NAME >/dev/null" \
        "screen -ls $SCREEN_NAME | grep -q 'Detached'"
}
start_mp_fork() {
    lab_bg shell setsid bash -c '"$@" & '"$KEEP" bash "${JOB[@]}" --workers mp-fork
    LAUNCHER=$LAB_BG
}
start_mp_spawn() {
    NOINHERIT=1
    lab_bg shell setsid bash -c '"$@" & '"$KEEP" bash "${JOB[@]}" --workers mp-spawn
    LAUNCHER=$LAB_BG
}
start_mp_forkserver() {
    NOINHERIT=1
    lab_bg shell setsid bash -c '"$@" & '"$KEEP" bash "${JOB[@]}" --workers mp-forkserver -n 1
    LAUNCHER=$LAB_BG
}
start_futures() {
    lab_bg shell setsid bash -c '"$@" & '"$KEEP" bash "${JOB[@]}" --workers futures -n 1
    LAUNCHER=$LAB_BG
}
start_jupyter() {
    "$LAB_PY" -c 'import jupyter_client, ipykernel' 2>/dev/null ||
        skip "python3-jupyter-client and python3-ipykernel are not installed (scripts/install-deps --test)"
    mkdir -p "$TMP/jupyter"
    lab_bg kclient setsid env PATH="/usr/bin:/bin:$PATH" JUPYTER_RUNTIME_DIR="$TMP/jupyter" \
        JUPYTER_DATA_DIR="$TMP/jupyter" IPYTHONDIR="$TMP/jupyter" \
        "$LAB_PY" "$LAB_DIR/kernel-client.py" "$TMP/kernel.ready" "${JOB[@]:1}"
    KCLIENT=$LAB_BG
    LAUNCHER=$LAB_BG
    wait_for "[[ -s $TMP/kernel.ready ]] || ! kill -0 $KCLIENT" 60 || true
    if [[ ! -s $TMP/kernel.ready ]]; then
        cat "$TMP/kclient.log"
        echo "the Jupyter kernel did not start"
        return 1
    fi
}
start_unshare() {
    unshare --pid --fork --mount-proc true 2>/dev/null ||
        skip "unshare --pid --fork --mount-proc is not permitted here (needs root or user namespaces)"
    INNS=1
    lab_bg unshare setsid unshare --pid --fork --mount-proc bash -c '"$@" & '"$KEEP" bash "${JOB[@]}" -n 1
    LAUNCHER=$LAB_BG
}
# podman: a real rootful container (`podman run -d`, the OCI runtime runc: crun 1.8 refuses this
# host's hybrid cgroup layout) from an image imported from a local rootfs (no registry, no
# network), with the host's /usr read-only; bash is its init and reaps. The launcher is conmon.
# The hard limits are lowered: a runtime may not raise them without CAP_SYS_RESOURCE.
LAB_IMAGE=localhost/vg-lab-scratch:1
lab_podman_image() {
    local r=$TMP/rootfs d
    podman image exists "$LAB_IMAGE" 2>/dev/null && return 0
    mkdir -p "$r" && for d in usr tmp proc dev sys etc run root; do mkdir -p "$r/$d"; done
    for d in bin lib lib64 sbin; do ln -s "usr/$d" "$r/$d"; done
    echo 'root:x:0:0:root:/root:/bin/sh' >"$r/etc/passwd"
    echo 'root:x:0:' >"$r/etc/group"
    tar -C "$r" -cf "$TMP/rootfs.tar" . && timeout 60 podman import "$TMP/rootfs.tar" "$LAB_IMAGE" >/dev/null
}
start_podman() {
    if ! command -v podman >/dev/null || ! command -v runc >/dev/null; then
        skip "podman and runc are not installed (scripts/install-deps --test)"
    fi
    lab_podman_image || { echo "podman import failed"; return 1; }
    INNS=1
    PODMAN_NAME=vg-lab-$$-$BATS_TEST_NUMBER
    local out
    out=$(timeout 60 podman --runtime runc run -d --name "$PODMAN_NAME" --network none \
        --ulimit nofile=1024:4096 --ulimit nproc=4096:4096 \
        -e VG_HELPER_TAG="$_VG_TAG" -e LAB_KEEP="$LAB_KEEP" -v /usr:/usr:ro \
        -v "$LAB_DIR:$LAB_DIR:ro" -v "$LIBDIR:$LIBDIR:ro" -v "$DEVDIR:$DEVDIR" -v "$TMP:$TMP" \
        "$LAB_IMAGE" bash -c '"$@" & '"$KEEP" bash "${JOB[@]}" -n 1 </dev/null 2>&1 3>&-) ||
        { echo "podman run: $out"; return 1; }
    LAUNCHER=$(podman inspect --format '{{.State.ConmonPid}}' "$PODMAN_NAME" 2>&1) || LAUNCHER=
    [[ $LAUNCHER =~ ^[1-9][0-9]*$ ]] || { echo "no conmon for $PODMAN_NAME: $LAUNCHER"; return 1; }
    _vg_record conmon "$LAUNCHER"
}
start_sbatch() {
    vg_slurm_require
    LAB_SLURM=1
    LAB_SLURM_JOB=$(vg_slurm_sbatch --wrap "${JOB[*]}; echo the job ended")
    [[ $LAB_SLURM_JOB =~ ^[0-9]+$ ]] || { echo "sbatch: $LAB_SLURM_JOB"; return 1; }
}
start_srun() {
    vg_slurm_require
    LAB_SLURM=1
    # the real srun, not lib.bash's bounded wrapper: it stays for the job's life
    # (in a session of its own, a login's stand-in: LAB_SID, for session-ended)
    lab_bg srun setsid /usr/bin/srun -N1 --input=none "${JOB[@]}" -n 1
    LAB_SID=$LAB_BG
}

# The Slurm cases' launcher is the step's slurmstepd: the job's main's nearest such ancestor.
lab_find_stepd() {
    local p=$MAIN i
    for ((i = 0; i < 4; i++)); do
        p=$(vg_stat "$p" ppid) || return 1
        if [[ $(vg_stat "$p" comm) == slurmstepd ]]; then
            LAUNCHER=$p
            return 0
        fi
    done
    return 1
}

# ------------------------------------------------------------------------------ the states

# lab_hangup SID: what a logout does to a session: SIGHUP to every process in it (the
# terminal's hangup reaches the foreground group and the shell; an interactive shell sends it
# on to every job).
lab_hangup() {
    local p
    for p in $(ps -e -o pid=,sid= | awk -v s="$1" '$2 == s { print $1 }'); do
        kill -HUP "$p" 2>/dev/null || true
    done
}

state_running() { :; }
state_crash() {
    kill -KILL "$MAIN"
    wait_for "[ \"\$(lab_alive $MAIN)\" != yes ]" "$LAB_WAIT"
}
state_zombie() { # its parent alive but not reaping: stopped
    local parent
    parent=$(vg_stat "$MAIN" ppid)
    if [[ $parent == 1 ]]; then
        echo "zombie: the main's parent is init, which reaps it"
        return 1
    fi
    _vg_record parent "$parent"
    kill -STOP "$parent"
    wait_for "[ \"\$(vg_stat $parent state)\" = T ]" "$LAB_WAIT"
    kill -KILL "$MAIN"
    wait_for "[ \"\$(lab_alive $MAIN)\" = zombie ]" "$LAB_WAIT"
}
state_launcher_killed() {
    [[ -n $LAUNCHER ]] || { echo "this case has no launcher"; return 1; }
    kill -KILL "$LAUNCHER"
}
state_session_ended() {
    case $CASE in
    tmux | tmux-attach) tmux -L "$TMUX_SOCK" send-keys "exit" Enter ;;
    screen | screen-attach) screen -S "$SCREEN_NAME" -p 0 -X stuff "exit"$'\n' ;;
    *) lab_hangup "${LAB_SID:-$(vg_stat "$LAUNCHER" session)}" ;;
    esac
}

# ------------------------------------------------------------------------------- the check

# lab_scenario: the driver's view now. The main's context (4 GiB on GPU 0) is listed while the
# main lives, and after it died while anything still holds its nodes (a worker that inherited
# them): the real driver frees a context only when the last file or mapping referring to it is
# gone. The listing keeps the dead main's PID, as the real driver does. With LAB_NOLIST, GPU 0
# holds that memory but answers Not Supported for its process lists and per-process samples, as
# GPUs without per-process accounting do: the driver says nobody's name.
lab_scenario() {
    local held=0 w
    if [[ $(lab_alive "$MAIN") == yes ]]; then held=1; fi
    for w in "${WORKERS[@]}"; do
        if [[ $(lab_alive "$w") == yes ]] && vg_holds "$w" "$DEVDIR/nvidia0"; then held=1; fi
    done
    local nolist=()
    if ((LAB_NOLIST)); then # a GPU that cannot list its processes (Not Supported, as some do)
        for w in Compute Graphics MPSCompute; do
            nolist+=("error func=nvmlDeviceGet${w}RunningProcesses_v3 gpu=0 code=3"
                "error func=nvmlDeviceGet${w}RunningProcesses_v2 gpu=0 code=3"
                "error func=nvmlDeviceGet${w}RunningProcesses gpu=0 code=3")
        done
        nolist+=("error func=nvmlDeviceGetProcessUtilization gpu=0 code=3")
    fi
    if ((held)); then
        two_gpus "proc gpu=0 pid=$MAIN type=compute mem=4GiB sm=0" "${nolist[@]}"
    else
        two_gpus
    fi
}

# What vramguard calls PID: from doctor's JSON in $DOC, clean's in $PLAN.
lab_verdict() {
    local c
    c=$(jq -r --argjson p "$1" '[.findings[] | select(.rule == "orphan-holder" and
        (.pids | index($p)))][0].confidence // "none"' <<<"$DOC")
    case $c in
    none) echo not ;;
    *) echo "leftover-$c" ;;
    esac
}
lab_action() {
    local a
    a=$(jq -r --argjson p "$1" '[.processes[] | select(.pid == $p)][0].action // "none"' <<<"$PLAN")
    case $a in
    none) echo "not listed" ;;
    signal) echo signalled ;;
    leave | refuse) echo "left alone" ;; # listed, not signalled (a refusal says why)
    *) echo "$a" ;;
    esac
}
lab_words() {
    local c d
    c=$(jq -r --argjson p "$1" '[.processes[] | select(.pid == $p)][0] |
        if . == null then "" else "clean: \(.verdict // .refusal // .action)" end' <<<"$PLAN")
    d=$(jq -r --arg p "PID $1 (" '[.findings[] | select(.rule == "orphan-holder") | .evidence[] |
        select(startswith($p))][0] // "" | sub("^PID [0-9]+ \\([^)]*\\): "; "")' <<<"$DOC")
    printf '%s%s\n' "$c" "${d:+; doctor: $d}"
}

# lab_record FILE: the snapshot doctor just diagnosed ($TMP/lab.vgsnap), kept as FILE for the
# unit tests' replay of the lab (tests/unit/test_lab_replay.c), with a comment line per process
# of the case naming its role. The paths of this run (the test's directory, the stand-in nodes,
# the build, the checkout) become fixed ones, so a record replays the same anywhere and does
# not change when recorded again; they are replaced everywhere alike, so command lines that
# were equal stay equal.
lab_record() {
    local out=$1 text pid
    text=$(<"$TMP/lab.vgsnap") || return 1
    text=${text//"$DEVDIR"/\/lab\/dev}
    text=${text//"$LIBDIR"/\/lab\/lib}
    text=${text//"$TMP"/\/lab\/tmp}
    text=${text//"$VG_BUILD"/\/lab\/build}
    text=${text//"$ROOT"/\/lab\/src}
    {
        printf '# the lifecycle lab: %s %s (tests/lifecycles/README.md)\n' "$CASE" "$STATE"
        for pid in $(printf '%s\n' "${!rolemap[@]}" | sort -n); do
            printf '# lab role %s %s\n' "${rolemap[$pid]}" "$pid"
        done
        printf '%s\n' "$text"
    } >"$out"
}

# lab_t WHAT: with LAB_DEBUG set, a timestamp on stderr (where the time goes).
lab_t() {
    if [[ -n ${LAB_DEBUG:-} ]]; then echo "lab: $EPOCHREALTIME $*" >>"$LAB_DEBUG"; fi
}

lab() {
    CASE=$1 STATE=$2
    local fn=start_${1//-/_} rows role alive verdict clean pid pids got_alive got_v got_c bad=0
    local -A expect_alive=() expect_v=() expect_c=() rolemap=() start=()
    rows=$(lab_rows "$CASE" "$STATE")
    [[ -n $rows ]] || { echo "no row for $CASE $STATE in $LAB_TABLE"; return 1; }
    declare -F "$fn" >/dev/null || { echo "no starter $fn"; return 1; }
    JOB_ARGS=()
    lab_t start
    "$fn"
    lab_read_pids
    lab_t started
    case $CASE in sbatch | srun) lab_find_stepd || { echo "no slurmstepd above $MAIN"; return 1; } ;; esac

    "state_${STATE//-/_}"
    lab_t state    # Let what the state sets off settle (a hangup, a server's death): wait, bounded, until
    # every process is as the table says; a difference left after the wait is a mismatch below.
    local cond=
    while IFS=$'\t' read -r role alive verdict clean; do
        case $role in
        main) pids=$MAIN ;;
        worker) pids=${WORKERS[*]} ;;
        launcher) pids=$LAUNCHER ;;
        esac
        for pid in $pids; do
            rolemap[$pid]=$role expect_alive[$pid]=$alive expect_v[$pid]=$verdict expect_c[$pid]=$clean
            cond+="[ \"\$(lab_alive $pid)\" = $alive ] && "
        done
    done <<<"$rows"
    wait_for "${cond}true" "$LAB_WAIT" || true
    sleep 0.3 # what dies of a signal has had its chance to (the reparenting is immediate)

    local -A was_alive=() shape=()
    for pid in "${!rolemap[@]}"; do
        was_alive[$pid]=$(lab_alive "$pid")
        shape[$pid]="ppid=$(vg_stat "$pid" ppid 2>/dev/null || echo -) pgrp=$(vg_stat "$pid" pgrp 2>/dev/null || echo -) sid=$(vg_stat "$pid" session 2>/dev/null || echo -)"
    done
    lab_t scenario
    lab_scenario
    local rec=()
    if [[ -n ${VG_LAB_RECORD:-} ]]; then rec=(--record "$TMP/lab.vgsnap"); fi
    vgc --json "${rec[@]}" doctor
    DOC=$output
    if [[ -n ${VG_LAB_RECORD:-} ]]; then lab_record "$VG_LAB_RECORD/$CASE.$STATE.vgsnap"; fi
    printf 'doctor --json:\n%s\n' "$DOC" >"$TMP/doctor.json"
    vgc clean --json
    PLAN=$output
    printf '%s\n' "$PLAN" >"$TMP/plan.json"
    if [[ -n ${LAB_JSON:-} ]]; then # kept for a report: DIR/CASE.STATE.{doctor,plan}.json
        mkdir -p "$LAB_JSON" && printf '%s\n' "$DOC" >"$LAB_JSON/$CASE.$STATE.doctor.json" &&
            printf '%s\n' "$PLAN" >"$LAB_JSON/$CASE.$STATE.plan.json"
    fi
    for pid in "${!rolemap[@]}"; do start[$pid]=$(vg_stat "$pid" starttime 2>/dev/null || echo -); done
    local before
    before=$(wc -l <"$SIGLOG")
    lab_t force
    vgc clean --force --grace 2s --json
    FORCE=$output
    lab_t forced
    # what the processes saw: a signalled one logs TERM and dies of it
    for pid in "${!rolemap[@]}"; do
        got_alive=${was_alive[$pid]}
        got_v=$(lab_verdict "$pid")
        got_c=$(lab_action "$pid")
        # one clean says it signalled has its time to log the signal and die of it
        if jq -e --argjson p "$pid" 'any(.processes[]; .pid == $p and (.result.signals // [] | length > 0))' \
            <<<"$FORCE" >/dev/null 2>&1; then
            wait_for "[ \"\$(lab_alive $pid)\" != yes ]" "$LAB_WAIT" >/dev/null 2>&1 || true
        fi
        local sig
        sig=$(tail -n +"$((before + 1))" "$SIGLOG" | awk -v p="$pid" '$1 == p { print $2 }' | paste -sd,)
        # job.py logs its SIGTERM; a launcher (not job.py) is seen signalled in clean's report
        # (one that exits by itself meanwhile, slurmstepd once the workers are gone, is not)
        local fate=untouched
        if [[ -n $sig ]]; then
            fate="signalled($sig)"
        elif jq -e --argjson p "$pid" 'any(.processes[]; .pid == $p and (.result.signals // [] | length > 0))' \
            <<<"$FORCE" >/dev/null 2>&1; then
            fate="signalled(clean says)"
        fi
        local want_fate=untouched
        if [[ ${expect_c[$pid]} == signalled ]]; then want_fate=signalled; fi
        local ok=1
        [[ $got_alive == "${expect_alive[$pid]}" ]] || ok=0
        [[ $got_v == "${expect_v[$pid]}" ]] || ok=0
        [[ $got_c == "${expect_c[$pid]}" ]] || ok=0
        if [[ $want_fate == signalled ]]; then
            [[ $fate != untouched ]] || ok=0
        else
            [[ $fate == untouched ]] || ok=0
        fi
        local line
        line=$(printf '%s %s %s %s (%s) want(%s, %s, %s) got(%s, %s, %s, %s) | %s' "$CASE" "$STATE" \
            "${rolemap[$pid]}" "$pid" "${shape[$pid]}" "${expect_alive[$pid]}" "${expect_v[$pid]}" \
            "${expect_c[$pid]}" "$got_alive" "$got_v" "$got_c" "$fate" "$(lab_words "$pid")")
        if ((ok)); then line="ok   $line"; else line="FAIL $line"; bad=1; fi
        echo "$line"
        if [[ -n ${LAB_RESULTS:-} ]]; then echo "$line" >>"$LAB_RESULTS"; fi
    done
    if ((bad)); then
        echo "--- doctor:"
        jq -c '.findings[] | {rule, confidence, pids, title}' <<<"$DOC"
        echo "--- clean plan:"
        jq -c '.processes[] | {pid, action, verdict}' <<<"$PLAN"
        return 1
    fi
}
