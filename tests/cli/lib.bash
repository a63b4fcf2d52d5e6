# shellcheck shell=bash disable=SC2034 # the variables set here are for the test files
# tests/cli/lib.bash: what every bats CLI test shares (`load lib` at the top of the file).
#
# Paths: ROOT, VG_BUILD (default $ROOT/build; build-san for the sanitizer build), VG (the
# vramguard binary), HELPER (tests/helpers/vg-helper.c, built by `make helper`), FAKE_FULL,
# FAKE_LEGACY, FAKE_535 (the fake NVML builds).
#
# Processes: vg_spawn starts vg-helper in the background, waits (bounded) for its pidfile and
# records every pid it reports; vg_cleanup kills all of them, with their children and session
# members and anything carrying this test's tag, and waits (bounded) until they are gone. The
# default teardown below calls vg_cleanup; a file that defines its own teardown must call it too.
#
# Everything per test lives under vg_tmpdir (inside BATS_TEST_TMPDIR when bats provides it).
# State is kept in files there, not in variables, so the functions also work inside $(...).
# The functions are written for bats' errexit: none of them fails on a false test by accident.
# No test may depend on timing: every wait here is a bounded poll (VG_WAIT_TIMEOUT, default 10 s).

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
VG_BUILD=${VG_BUILD:-$ROOT/build}
VG=$VG_BUILD/vramguard
HELPER=$VG_BUILD/tests/vg-helper
FAKE_FULL=$VG_BUILD/fake-nvml/full/libnvidia-ml.so.1
FAKE_LEGACY=$VG_BUILD/fake-nvml/legacy/libnvidia-ml.so.1
FAKE_535=$VG_BUILD/fake-nvml/r535/libnvidia-ml.so.1
# The kernel log the xid rule reads: none (an empty log), unless a test gives one (--kmsg FILE
# or its own VRAMGUARD_KMSG), so that a host whose own log carries Xids changes no other test.
export VRAMGUARD_KMSG=${VRAMGUARD_KMSG:-/dev/null}
VG_WAIT_TIMEOUT=${VG_WAIT_TIMEOUT:-10}
# The user the suite runs as: the owner vramguard names for the processes a test starts.
VG_USER=$(id -un)

# Sets _VG_DIR (this test's directory), _VG_STATE and _VG_TAG; creates them. Deterministic per
# test, so calling it again (or in a subshell) gives the same paths.
_vg_dir() {
    if [[ -n ${BATS_TEST_TMPDIR:-} ]]; then
        _VG_DIR=$BATS_TEST_TMPDIR/vg
    else
        _VG_DIR=${TMPDIR:-/tmp}/vg-test.$$.${BATS_TEST_NUMBER:-0}
    fi
    _VG_STATE=$_VG_DIR/.state
    _VG_TAG=$_VG_DIR
    mkdir -p "$_VG_STATE"
}

# Each test gets its directory, state and tag when this file loads, so that a test may use
# $_VG_TAG and record pids even when its first call to vg_tmpdir ran in a subshell ($(...)),
# where _vg_dir's variables do not reach the test. bats also loads this file once outside any
# test (no BATS_TEST_TMPDIR then): nothing to create.
if [[ -n ${BATS_TEST_TMPDIR:-} ]]; then
    _vg_dir
fi

# vg_tmpdir: prints this test's temporary directory (created; removed by bats or vg_cleanup).
vg_tmpdir() {
    _vg_dir || return 1
    printf '%s\n' "$_VG_DIR"
}

# vg_fake_dev [DIR [N]]: creates DIR/dev (DIR defaults to vg_tmpdir) holding regular files
# nvidia0..nvidia(N-1) (N defaults to 8), nvidiactl and nvidia-uvm; sets DEVDIR and prints it
# (the directory holding the files: pass it to --dev, and $DEVDIR/nvidia0 to --open).
vg_fake_dev() {
    local dir n=${2:-8} i
    if [[ -n ${1:-} ]]; then
        dir=$1/dev
    else
        _vg_dir || return 1
        dir=$_VG_DIR/dev
    fi
    mkdir -p "$dir" || return 1
    for ((i = 0; i < n; i++)); do
        : >"$dir/nvidia$i" || return 1
    done
    : >"$dir/nvidiactl" && : >"$dir/nvidia-uvm" || return 1
    DEVDIR=$dir
    printf '%s\n' "$dir"
}

# vg_public_bin DIR: copies the vramguard binary, the fake driver's three builds and vg-helper
# into DIR/bin (world-readable) and points VG, FAKE_FULL, FAKE_LEGACY, FAKE_535 and HELPER at the
# copies, for the tests that run them as another user (nobody): the build tree may sit where
# only its owner can reach it (a clone under /root, mode 0700). DIR is a directory the test
# made under /tmp with mode 755 and removes in its teardown; the copies go with it.
vg_public_bin() {
    local bin=$1/bin f
    mkdir -p "$bin/full" "$bin/legacy" "$bin/r535" && chmod 755 "$bin" "$bin"/* || return 1
    cp "$VG" "$bin/vramguard" && cp "$HELPER" "$bin/vg-helper" || return 1
    for f in full legacy r535; do
        cp "$VG_BUILD/fake-nvml/$f/libnvidia-ml.so.1" "$bin/$f/" || return 1
    done
    chmod 755 "$bin/vramguard" "$bin/vg-helper" && chmod 644 "$bin"/*/libnvidia-ml.so.1 || return 1
    VG=$bin/vramguard HELPER=$bin/vg-helper
    FAKE_FULL=$bin/full/libnvidia-ml.so.1
    FAKE_LEGACY=$bin/legacy/libnvidia-ml.so.1
    FAKE_535=$bin/r535/libnvidia-ml.so.1
}

# vg_infra_bin NAME [MODE]: a real-looking infrastructure program for the tests that need one:
# vg-helper copied as NAME (e.g. Xorg, nvidia-persistenced) into a fresh root-owned directory
# /opt/vg-test-infra.XXXXXX (mode MODE, default 755; 1777 makes it one others may write), the
# file root's with mode 755: what vramguard takes for infrastructure is a root-owned executable
# named as the program installs, in directories only root can change (act/infra.h), wherever
# it is, so no test-only path or switch is needed. Needs root; prints the copy's path; the
# directory is removed by vg_cleanup. Start it with HELPER=PATH vg_spawn ....
vg_infra_bin() {
    local name=$1 mode=${2:-755} dir
    _vg_dir || return 1
    if [[ $(id -u) -ne 0 ]]; then
        echo "vg_infra_bin: needs root (a root-owned directory under /opt)" >&2
        return 1
    fi
    dir=$(mktemp -d /opt/vg-test-infra.XXXXXX) || return 1
    printf '%s\n' "$dir" >>"$_VG_STATE/dirs"
    chmod "$mode" "$dir" && cp "$HELPER" "$dir/$name" && chmod 755 "$dir/$name" || return 1
    printf '%s\n' "$dir/$name"
}

# vg_fake_lib NAME...: creates small regular files NAME (e.g. libcuda.so.1) in vg_tmpdir/lib
# for vg-helper --map, and prints the directory.
vg_fake_lib() {
    local name
    _vg_dir || return 1
    mkdir -p "$_VG_DIR/lib" || return 1
    for name in "$@"; do
        printf 'fake %s for vg-helper --map\n' "$name" >"$_VG_DIR/lib/$name" || return 1
    done
    printf '%s\n' "$_VG_DIR/lib"
}

# vg_scenario [FILE] <<EOF ... EOF: writes the fake-nvml scenario from stdin, atomically (the
# fake driver re-reads it when it changes and must never see half a file), and exports
# FAKE_NVML_SCENARIO. A FILE without a slash goes into vg_tmpdir; the default is "scenario".
vg_scenario() {
    local file=${1:-scenario} tmp
    if [[ $file != */* ]]; then
        _vg_dir || return 1
        file=$_VG_DIR/$file
    fi
    tmp=$file.tmp.$BASHPID
    cat >"$tmp" && mv -f "$tmp" "$file" || return 1
    export FAKE_NVML_SCENARIO=$file
}

# vg_scenario_host HOST [LINE...]: vg_scenario of a host several files share,
# tests/cli/scenarios/HOST.scen, followed by each LINE (the processes, the errors).
vg_scenario_host() {
    local host=$ROOT/tests/cli/scenarios/$1.scen
    shift
    [[ -f $host ]] || { echo "vg_scenario_host: no $host" >&2; return 1; }
    vg_scenario < <(
        cat "$host"
        if (($#)); then printf '%s\n' "$@"; fi
    )
}

# run_vg ARGS...: bats `run` of vramguard with the fake driver (VG_NVML, default FAKE_FULL) and
# the fake device directory (DEVDIR, default: vg_fake_dev's, created when missing).
run_vg() {
    if [[ -z ${DEVDIR:-} ]]; then
        _vg_dir || return 1
        DEVDIR=$_VG_DIR/dev
        [[ -d $DEVDIR ]] || vg_fake_dev >/dev/null || return 1
    fi
    run "$VG" --nvml "${VG_NVML:-$FAKE_FULL}" --dev "$DEVDIR" "$@"
}

# _vg_usec VAR SECONDS: VAR = SECONDS (integer or decimal) in microseconds.
_vg_usec() {
    local s=$2 int frac=
    if [[ ! $s =~ ^[0-9]+(\.[0-9]+)?$ ]]; then
        echo "lib.bash: '$s' is not a number of seconds" >&2
        return 1
    fi
    int=${s%%.*}
    if [[ $s == *.* ]]; then frac=${s#*.}; fi
    frac=${frac}000000
    printf -v "$1" '%d' "$((10#$int * 1000000 + 10#${frac:0:6}))"
}

# Microseconds in _VG_NOW ($EPOCHREALTIME without its locale's decimal point; whole seconds
# from $SECONDS on a bash older than 5.0).
_vg_now() {
    _VG_NOW=${EPOCHREALTIME//[!0-9]/}
    if [[ -z $_VG_NOW ]]; then _VG_NOW=$((SECONDS * 1000000)); fi
}

# wait_for COND [TIMEOUT]: evaluates the shell command COND every 0.05 s until it succeeds;
# fails with a message after TIMEOUT seconds (default VG_WAIT_TIMEOUT).
wait_for() {
    local cond=$1 timeout=${2:-$VG_WAIT_TIMEOUT} limit start
    _vg_usec limit "$timeout" || return 1
    _vg_now
    start=$_VG_NOW
    while :; do
        if eval "$cond"; then return 0; fi
        _vg_now
        if ((_VG_NOW - start >= limit)); then break; fi
        sleep 0.05
    done
    echo "wait_for: still false after ${timeout}s: $cond" >&2
    return 1
}

# vg_stat PID FIELD: prints FIELD of /proc/PID/stat: state, ppid, pgrp, session, comm or
# starttime (parsed after the last ')', since comm may hold anything); fails if PID is gone.
# PID may be PID/task/TID for a thread.
vg_stat() {
    local pid=$1 field=$2 line='' rest state ppid pgrp sid
    # The whole file, not its first line: comm may hold a newline.
    { IFS= read -r -d '' line <"/proc/$pid/stat"; } 2>/dev/null
    [[ -n $line ]] || return 1
    line=${line%$'\n'}
    rest=${line##*) }
    read -r state ppid pgrp sid _ <<<"$rest"
    case $field in
    state) printf '%s\n' "$state" ;;
    ppid) printf '%s\n' "$ppid" ;;
    pgrp) printf '%s\n' "$pgrp" ;;
    session) printf '%s\n' "$sid" ;;
    comm) rest=${line#*(}; printf '%s\n' "${rest%)*}" ;;
    starttime) read -r -a rest <<<"$rest"; printf '%s\n' "${rest[19]}" ;;
    *) echo "vg_stat: unknown field '$field'" >&2; return 1 ;;
    esac
}

# vg_gone PID: true when PID no longer runs (no /proc entry, or a zombie).
vg_gone() {
    local state
    state=$(vg_stat "$1" state) || return 0
    [[ $state == Z || $state == X ]]
}

# vg_holds PID PATH: true when some thread of PID has PATH open (works for a zombie leader,
# whose own fd table is gone, through /proc/PID/task/*/fd).
vg_holds() {
    local pid=$1 path=$2 fd
    for fd in /proc/"$pid"/fd/* /proc/"$pid"/task/*/fd/*; do
        if [[ $(readlink "$fd" 2>/dev/null) == "$path" ]]; then return 0; fi
    done
    return 1
}

# Appends "ROLE PID STARTTIME" to the state file, so vg_cleanup never kills a recycled pid.
_vg_record() {
    local start
    _vg_dir || return 1
    start=$(vg_stat "$2" starttime 2>/dev/null) || start=-
    printf '%s %s %s\n' "$1" "$2" "$start" >>"$_VG_STATE/pids"
}

# vg_spawn ARGS...: starts "$HELPER --pidfile F ARGS..." in the background (stdin /dev/null,
# output to a log, bats' descriptors closed), waits until F appears (VG_WAIT_TIMEOUT; fails at
# once if the helper exits non-zero first, showing its log) and records every pid in it for
# vg_cleanup. Prints the main pid and sets VG_PID, VG_PIDFILE, VG_LOG, VG_ORPHAN_PID,
# VG_PARENT_PID, VG_THREAD_TID, VG_DSTATE_TID, VG_VFORK_PID (empty when absent) and the arrays
# VG_CHILD_PIDS, VG_ZOMBIE_PIDS (variables are lost when called inside $(...): use vg_role).
# With --uid the pidfile lives in a fresh world-writable directory under /tmp. With VG_ARGV0 set,
# the helper's argv[0] is that (bash's exec -a), so its command line starts with it.
vg_spawn() {
    local dir pidfile log bg rc launcher_done=0 limit start a role pid
    _vg_dir || return 1
    if [[ ! -x $HELPER ]]; then
        echo "vg_spawn: $HELPER is missing: run 'make helper'" >&2
        return 1
    fi
    dir=
    for a in "$@"; do
        if [[ $a == -- ]]; then break; fi
        if [[ $a == --uid || $a == --uid=* ]]; then
            dir=$(mktemp -d /tmp/vg-spawn.XXXXXX) && chmod 1777 "$dir" || return 1
            printf '%s\n' "$dir" >>"$_VG_STATE/dirs"
            break
        fi
    done
    if [[ -z $dir ]]; then
        dir=$(mktemp -d "$_VG_STATE/spawn.XXXXXX") || return 1
    fi
    pidfile=$dir/pids
    log=$dir/log
    local ns=()
    if [[ -n ${VG_NS:-} ]]; then ns=(nsenter --target "$VG_NS" --pid --mount --); fi
    # VG_ARGV0: the helper runs with that argv[0] (exec -a), as a process may choose it
    local a0=()
    if [[ -n ${VG_ARGV0:-} ]]; then a0=(bash -c 'exec -a "$0" "$@"' "$VG_ARGV0"); fi
    VG_HELPER_TAG=$_VG_TAG "${ns[@]}" "${a0[@]}" "$HELPER" --pidfile "$pidfile" "$@" </dev/null >"$log" 2>&1 3>&- &
    bg=$!
    _vg_record launcher "$bg"
    printf '%s\n' "$pidfile" >"$_VG_STATE/last"

    _vg_usec limit "$VG_WAIT_TIMEOUT" || return 1
    _vg_now
    start=$_VG_NOW
    while [[ ! -s $pidfile ]]; do
        if ((!launcher_done)) && ! kill -0 "$bg" 2>/dev/null; then
            launcher_done=1
            rc=0
            wait "$bg" || rc=$?
            # With --orphan the launcher exits 0 before the carrier writes the pidfile.
            if ((rc != 0)) && [[ ! -s $pidfile ]]; then
                echo "vg_spawn: vg-helper $* exited with status $rc before it was ready; its log:" >&2
                sed 's/^/  /' "$log" >&2
                return 1
            fi
        fi
        _vg_now
        if ((_VG_NOW - start >= limit)); then
            echo "vg_spawn: vg-helper $* not ready after ${VG_WAIT_TIMEOUT}s; its log:" >&2
            sed 's/^/  /' "$log" >&2
            return 1
        fi
        sleep 0.05
    done

    VG_PID='' VG_ORPHAN_PID='' VG_PARENT_PID='' VG_THREAD_TID='' VG_DSTATE_TID='' VG_VFORK_PID=''
    VG_REAPER_PID='' VG_LEADER_PID=''
    VG_CHILD_PIDS=() VG_ZOMBIE_PIDS=()
    VG_PIDFILE=$pidfile
    VG_LOG=$log
    while read -r role pid; do
        # A namespace's numbers name other processes here: those die with its init instead.
        if [[ -z ${VG_NS:-} ]]; then _vg_record "$role" "$pid"; fi
        case $role in
        main) VG_PID=$pid ;;
        orphan) VG_ORPHAN_PID=$pid ;;
        parent) VG_PARENT_PID=$pid ;;
        thread) VG_THREAD_TID=$pid ;;
        dstate) VG_DSTATE_TID=$pid ;;
        vfork) VG_VFORK_PID=$pid ;;
        child) VG_CHILD_PIDS+=("$pid") ;;
        zombie) VG_ZOMBIE_PIDS+=("$pid") ;;
        reaper) VG_REAPER_PID=$pid ;;
        leader) VG_LEADER_PID=$pid ;;
        esac
    done <"$pidfile"
    printf '%s\n' "$VG_PID"
}

# vg_role ROLE [PIDFILE]: prints the pids of ROLE (main, child, zombie, ...) from PIDFILE
# (default: the last vg_spawn's of this test), one a line.
vg_role() {
    local want=$1 file=${2:-} role pid
    if [[ -z $file ]]; then
        _vg_dir || return 1
        file=$(cat "$_VG_STATE/last" 2>/dev/null) || {
            echo "vg_role: nothing spawned yet" >&2
            return 1
        }
    fi
    while read -r role pid; do
        if [[ $role == "$want" ]]; then printf '%s\n' "$pid"; fi
    done <"$file"
}

# vg_cleanup: SIGKILLs every process vg_spawn recorded for this test (when still the same
# process: same start time), every process whose parent, process group or session is one of
# them, and every process carrying this test's VG_HELPER_TAG; then waits (bounded) until none
# runs (zombies left to init count as gone). Fails, naming them, if some survive.
vg_cleanup() {
    local -A victims=()
    local role pid start cur d f left limit
    _vg_dir || return 0
    if [[ -f $_VG_STATE/pids ]]; then
        while read -r role pid start; do
            cur=$(vg_stat "$pid" starttime 2>/dev/null) || continue
            if [[ $start == - || $cur == "$start" ]]; then victims[$pid]=1; fi
        done <"$_VG_STATE/pids"
    fi
    for f in $(grep -lzxF -- "VG_HELPER_TAG=$_VG_TAG" /proc/[0-9]*/environ 2>/dev/null); do
        pid=${f#/proc/}
        victims[${pid%/environ}]=1
    done
    # Descendants and session/group members, found before anything dies and gets reparented.
    # One awk over every stat file, not a shell loop: bats traps every shell command, and a
    # loop over /proc cost more than most tests themselves. Nothing recorded or tagged: no
    # process can descend from this test's, so there is nothing to look for.
    if ((${#victims[@]})); then
        while read -r pid; do
            victims[$pid]=1
        done < <(cat /proc/[0-9]*/stat 2>/dev/null | awk -v seeds="${!victims[*]}" '
            # comm may hold anything, a newline included: the fields are read after the
            # last ") ", and a line that does not start with "PID (" is a piece of a comm.
            $1 ~ /^[0-9]+$/ && substr($0, length($1) + 2, 1) == "(" {
                rest = $0
                if (!sub(/^.*\) /, "", rest)) next
                split(rest, f, " ")
                if (f[2] !~ /^[0-9]+$/ || f[3] !~ /^[0-9]+$/ || f[4] !~ /^[0-9]+$/) next
                n++; pid[n] = $1; ppid[n] = f[2]; pgrp[n] = f[3]; sid[n] = f[4]
            }
            END {
                k = split(seeds, s, " ")
                for (i = 1; i <= k; i++) v[s[i]] = 1
                for (round = 0; round < 8; round++) {
                    changed = 0
                    for (i = 1; i <= n; i++) {
                        if (pid[i] in v) continue
                        if ((ppid[i] in v) || (pgrp[i] in v) || (sid[i] in v)) {
                            v[pid[i]] = 1; changed = 1; print pid[i]
                        }
                    }
                    if (!changed) break
                }
            }')
    fi
    # Never ourselves, our parents or init, whatever the files say.
    unset 'victims[0]' 'victims[1]' "victims[$$]" "victims[$BASHPID]" "victims[$PPID]"
    for pid in "${!victims[@]}"; do
        kill -KILL "$pid" 2>/dev/null || true
    done
    _vg_usec limit "$VG_WAIT_TIMEOUT" || return 1
    _vg_now
    start=$_VG_NOW
    while :; do
        left=
        for pid in "${!victims[@]}"; do
            if ! vg_gone "$pid"; then left+=" $pid"; fi
        done
        if [[ -z $left ]]; then break; fi
        _vg_now
        if ((_VG_NOW - start >= limit)); then
            echo "vg_cleanup: still running after ${VG_WAIT_TIMEOUT}s:$left" >&2
            return 1
        fi
        sleep 0.05
    done
    # Reap our own background launchers (no-op for pids that are not children of this shell).
    while read -r role pid start; do
        if [[ $role == launcher ]]; then wait "$pid" 2>/dev/null || true; fi
    done < <(cat "$_VG_STATE/pids" 2>/dev/null)
    if [[ -f $_VG_STATE/dirs ]]; then
        while read -r d; do
            if [[ $d == /tmp/vg-spawn.* || $d == /opt/vg-test-infra.* ]]; then rm -rf -- "$d"; fi
        done <"$_VG_STATE/dirs"
    fi
    rm -f "$_VG_STATE/pids" "$_VG_STATE/dirs" "$_VG_STATE/last"
    if [[ -z ${BATS_TEST_TMPDIR:-} && $_VG_DIR == */vg-test.* ]]; then rm -rf -- "$_VG_DIR"; fi
    return 0
}

# vg_require_jq: skips the test when jq is not installed.
vg_require_jq() {
    command -v jq >/dev/null 2>&1 || skip "jq is not installed (apt-get install jq)"
}

# json FILTER [JQ_OPTIONS...]: applies FILTER to $output (set by bats' run) with jq -r, e.g.
# [ "$(json '.gpus | length')" = 8 ]. Skips the test without jq (call vg_require_jq first when
# using json inside $(...), where a skip cannot reach the test).
json() {
    vg_require_jq
    jq -r "${@:2}" "$1" <<<"$output"
}

# json_ok FILTER [JQ_OPTIONS...]: true when FILTER's last result on $output is neither false
# nor null, e.g. json_ok '.gpus[0].memory.used == null'.
json_ok() {
    vg_require_jq
    jq -e "${@:2}" "$1" <<<"$output" >/dev/null
}

# json_file FILE FILTER [JQ_OPTIONS...]: the same on a file.
json_file() {
    vg_require_jq
    jq -r "${@:3}" "$2" "$1"
}

# vg_pidns_start: from here on the test runs its processes in a PID namespace with a /proc of
# its own, where every process (its helpers and vramguard alike) can be read by root, whatever
# hides processes on this machine (a sandbox's init may deny even root its open files): for what
# vramguard does only when nothing is hidden (a GPU reset). VG_NS is the host's pid of the
# namespace's init (a vg-helper --reaper). vg_in_ns CMD... runs a command inside; vg_spawn,
# vgd and vgc started after this run inside too, so the pids they report are the namespace's
# (the fake driver's scenario must use those). Everything in it dies with its init, which
# vg_cleanup kills. Skips without root, unshare or nsenter.
vg_pidns_start() {
    local p
    [[ $(id -u) -eq 0 ]] || skip "needs root for a PID namespace"
    command -v unshare >/dev/null && command -v nsenter >/dev/null ||
        skip "unshare and nsenter (util-linux) are needed"
    _vg_dir || return 1
    VG_HELPER_TAG=$_VG_TAG unshare --pid --fork --mount-proc "$HELPER" --reaper \
        --pidfile "$_VG_STATE/nsinit" </dev/null >"$_VG_STATE/nsinit.log" 2>&1 &
    _vg_record launcher "$!"
    wait_for "[[ -s $_VG_STATE/nsinit ]]" || return 1
    VG_NS=
    for p in $(vg_pids_with_env "VG_HELPER_TAG=$_VG_TAG"); do
        if awk '/^NSpid:/ { exit !(NF == 3 && $3 == 1) }' "/proc/$p/status" 2>/dev/null; then
            VG_NS=$p
        fi
    done
    if [[ -z $VG_NS ]]; then
        echo "vg_pidns_start: no init of the new PID namespace found" >&2
        return 1
    fi
    _vg_record nsinit "$VG_NS"
}

vg_in_ns() {
    nsenter --target "$VG_NS" --pid --mount -- "$@"
}

# vg_ns_gone PID: vg_gone for a pid of the namespace.
vg_ns_gone() {
    local line
    line=$(vg_in_ns cat "/proc/$1/stat" 2>/dev/null) || return 0
    [[ ${line##*) } == [ZX]* ]]
}

# vg_unreadable_fds: how many processes have open files this user cannot read (fd/ denied, or
# its links): what vramguard must report as not seen. Processes that exit meanwhile are not
# counted. Where vramguard's kernel scan runs (--scan=auto as root, a kernel with BTF, a host
# of 1,000 processes or more), every descriptor table is walked inside the kernel and none is
# unread: 0.
vg_unreadable_fds() {
    local d f n=0
    if "$VG" --verbose status --no-nvml 2>&1 >/dev/null | grep -q 'status: scan: kernel'; then
        printf '0\n'
        return
    fi
    for d in /proc/[0-9]*; do
        if ! ls "$d/fd" >/dev/null 2>&1; then
            # A leader that exited has a root-owned fd/ whatever its user; as its user,
            # vramguard reads its table through a live thread, and so does this count.
            if [[ -O $d ]] && ls -A "$d"/task/*/fd 2>/dev/null | grep -q '^[0-9]'; then
                continue
            fi
            if [[ -e $d/stat ]]; then n=$((n + 1)); fi
            continue
        fi
        for f in "$d"/fd/*; do
            [[ -L $f ]] || continue
            if ! readlink "$f" >/dev/null 2>&1 && [[ -e $d/stat ]]; then n=$((n + 1)); fi
            break
        done
    done
    printf '%s\n' "$n"
}

# vg_unread_stable [--got FN] CMD...: runs CMD (a `run` of vramguard) between two counts of
# vg_unreadable_fds, again until the two agree (and, with --got, agree with the count FN
# prints from CMD's output) at most 10 times, and leaves the count in $hidden beside CMD's
# results. The tests running beside this one (and, for a user other than root, every other
# user's processes) start and end, so a count taken once can differ from what vramguard saw.
vg_unread_stable() {
    local before got=- tries=0
    if [[ $1 == --got ]]; then
        got=$2
        shift 2
    fi
    while :; do
        before=$(vg_unreadable_fds)
        "$@"
        hidden=$(vg_unreadable_fds)
        if [[ $before == "$hidden" && ($got == - || $($got) == "$hidden") ]] ||
            ((++tries >= 10)); then
            return 0
        fi
        sleep 0.5
    done
}

# vg_unread_text / vg_unread_json: the count of unread processes vramguard gave in $output, in
# its text ("Not seen: the open files of N processes") or its JSON (.unread.descriptors).
vg_unread_text() {
    local n
    n=$(grep -o 'Not seen: the open files of [0-9]*' <<<"$output" | grep -o '[0-9]*$')
    printf '%s\n' "${n:-0}"
}
vg_unread_json() {
    jq -r '.unread.descriptors' <<<"$output" 2>/dev/null
}

# vg_pids_with_env NAME=VALUE: prints the pids (as this /proc numbers them) of the processes
# whose environment holds exactly NAME=VALUE, ascending: how a test finds, by the host's
# numbers, helpers that run in another PID namespace and report their own numbers.
vg_pids_with_env() {
    local f pid
    for f in $(grep -lzxF -- "$1" /proc/[0-9]*/environ 2>/dev/null); do
        pid=${f#/proc/}
        printf '%s\n' "${pid%/environ}"
    done | sort -n
}

# vg_signals PID LOG: prints the signals the helper with that pid logged to its --signal-log
# LOG, one name per line (TERM, KILL never shows: it cannot be caught).
vg_signals() {
    local pid sig
    [[ -f $2 ]] || return 0
    while read -r pid sig; do
        if [[ $pid == "$1" ]]; then printf '%s\n' "$sig"; fi
    done <"$2"
}

teardown() {
    vg_cleanup
}

# vg_with_devices FILE CMD...: CMD in a private mount namespace whose /proc/devices is FILE (a
# staged major list: the tests make an unused major, 4000, the NVIDIA one, so the nodes they
# hold cannot show in other tests running beside them).
vg_with_devices() {
    unshare --mount --propagation private \
        sh -c 'mount --bind "$1" /proc/devices && shift && exec "$@"' sh "$@"
}
