#!/usr/bin/env bats
# t0402-run: `vramguard run` with the fake driver and real processes: what the job's
# environment says, the command line passed through untouched, exit statuses and signals
# propagated, exec failures reported like a shell, the terminal handed over, and usage errors.

load lib

bats_require_minimum_version 1.5.0

setup() {
    TMP=$(vg_tmpdir)
    DEVDIR=$(vg_fake_dev)
    export VRAMGUARD_RUNTIME_DIR=$TMP/locks
    vg_scenario_host pick4 "proc gpu=0 pid=4000000 type=compute mem=20GiB"
}

U0=GPU-00000000-0000-0000-0000-000000000000
U1=GPU-11111111-1111-1111-1111-111111111111
U2=GPU-22222222-2222-2222-2222-222222222222
U3=GPU-33333333-3333-3333-3333-333333333333

# vgr ARGS...: `vramguard ARGS` with the fake driver and this test's tag (so vg_cleanup finds
# everything a job leaves), stdout in $output, stderr in $stderr.
vgr() {
    local expect=
    if [[ $1 =~ ^-[0-9]+$ ]]; then expect=$1; shift; fi
    run $expect --separate-stderr env VG_HELPER_TAG="$TMP" "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" "$@"
}

# bg_run ARGS...: `vramguard ARGS` in the background with SIGINT and SIGQUIT at their defaults
# (a non-interactive shell ignores them in background jobs), output to $TMP/bg.out and
# $TMP/bg.err; sets BG_PID and records it for cleanup.
bg_run() {
    env --default-signal=INT,QUIT VG_HELPER_TAG="$TMP" "$VG" --nvml "$FAKE_FULL" \
        --dev "$DEVDIR" "$@" </dev/null >"$TMP/bg.out" 2>"$TMP/bg.err" 3>&- &
    BG_PID=$!
    _vg_dir
    _vg_record launcher "$BG_PID"
}

# children PID: the pids of PID's children, one a line.
children() {
    cat /proc/"$1"/task/*/children 2>/dev/null | tr ' ' '\n' | sed '/^$/d'
}

# child_comm PID COMM: true when some child of PID has this comm.
child_comm() {
    local c
    for c in $(children "$1"); do
        if [ "$(vg_stat "$c" comm)" = "$2" ]; then return 0; fi
    done
    return 1
}

@test "the job sees the GPUs' UUIDs in CUDA order and CUDA_DEVICE_ORDER=PCI_BUS_ID" {
    CUDA_VISIBLE_DEVICES=0 CUDA_DEVICE_ORDER=FASTEST_FIRST vgr run --gpus 3,GPU-0000 -- env
    [ "$status" -eq 0 ]
    [ "$(grep -c '^CUDA_VISIBLE_DEVICES=' <<<"$output")" -eq 1 ]
    [ "$(grep -c '^CUDA_DEVICE_ORDER=' <<<"$output")" -eq 1 ]
    grep -qx "CUDA_VISIBLE_DEVICES=$U3,$U0" <<<"$output"
    grep -qx "CUDA_DEVICE_ORDER=PCI_BUS_ID" <<<"$output"
    grep -qx "VRAMGUARD_RUNTIME_DIR=$VRAMGUARD_RUNTIME_DIR" <<<"$output" # the rest is kept
    [ "$stderr" = "vramguard: run: the job gets GPU 3 (NVIDIA H100 80GB HBM3, $U3) as cuda:0, GPU 0 (NVIDIA A100-SXM4-80GB, $U0) as cuda:1" ]
}

@test "auto:N chooses like pick; the default is auto:1; --quiet says nothing" {
    vgr run --gpus auto:2 -- sh -c 'echo "$CUDA_VISIBLE_DEVICES"'
    [ "$status" -eq 0 ]
    [ "$output" = "$U1,$U3" ]
    vgr run -q -- sh -c 'echo "$CUDA_VISIBLE_DEVICES"'
    [ "$output" = "$U1" ]
    [ -z "$stderr" ]
    vgr run --gpus auto:2 --min-free 70GiB --exclude 1 --max-util 100 -- \
        sh -c 'echo "$CUDA_VISIBLE_DEVICES"'
    [ "$output" = "$U3,$U2" ] # equally free: the idler first
    vgr run --gpus auto:4 -- true
    [ "$status" -eq 1 ]
    [[ $stderr == "vramguard: run: not enough free GPUs: asked for 4 GPUs, 3 free enough (GPU 2: utilisation 99% above 50%); --wait TIMEOUT waits for them" ]]
}

@test "--keep-env keeps CUDA_VISIBLE_DEVICES, reserves what it names, warns when it differs" {
    # Without --gpus: the GPUs the kept value names are the ones reserved.
    CUDA_VISIBLE_DEVICES=GPU-2222,GPU-1111 vgr run --keep-env -- sh -c \
        'echo "$CUDA_VISIBLE_DEVICES $CUDA_DEVICE_ORDER"; ls "$VRAMGUARD_RUNTIME_DIR"'
    [ "$status" -eq 0 ]
    [ "$(sed -n 1p <<<"$output")" = "GPU-2222,GPU-1111 PCI_BUS_ID" ]
    [ "$(sed -n '2,$p' <<<"$output" | sort | tr '\n' ' ')" = "$U1 $U2 " ]
    [[ $stderr == "vramguard: run: the job keeps CUDA_VISIBLE_DEVICES='GPU-2222,GPU-1111'; reserved: GPU 2 ("*"), GPU 1 ("* ]]
    # Indices depend on CUDA_DEVICE_ORDER: left as the user had it (unset).
    CUDA_VISIBLE_DEVICES=1 vgr run --keep-env -- sh -c 'echo "${CUDA_DEVICE_ORDER-unset}"'
    [ "$output" = unset ]
    # With --gpus: kept, with a warning when it is not what was reserved.
    CUDA_VISIBLE_DEVICES=0 vgr run --keep-env --gpus 1 -- sh -c 'echo "$CUDA_VISIBLE_DEVICES"'
    [ "$status" -eq 0 ]
    [ "$output" = 0 ]
    [[ $stderr == *"warning: keeping CUDA_VISIBLE_DEVICES='0', which is not what --gpus reserved (GPU 1 ("*"): the job may use GPUs it has not reserved"* ]]
    CUDA_VISIBLE_DEVICES=$U1 vgr run --keep-env --gpus 1 -- true
    [[ $stderr != *warning* ]]
    # Nothing to keep: set as usual.
    vgr run --keep-env --gpus 1 -- sh -c 'echo "$CUDA_VISIBLE_DEVICES"'
    [ "$output" = "$U1" ]
}

@test "the command line reaches the job untouched, options after CMD included" {
    vgr run -q -- sh -c 'for a in "$0" "$@"; do printf "[%s]" "$a"; done' a 'b  c' --gpus 7 \
        '' '-- x' --verbose
    [ "$status" -eq 0 ]
    [ "$output" = "[a][b  c][--gpus][7][][-- x][--verbose]" ]
    # Without "--" the first word that is not an option starts the command.
    vgr run -q printf '%s|' -q --help
    [ "$output" = "-q|--help|" ]
}

@test "exit status: the job's, 128+N when killed by signal N" {
    vgr run -q -- sh -c 'exit 3'
    [ "$status" -eq 3 ]
    vgr run -q -- sh -c 'exit 0'
    [ "$status" -eq 0 ]
    vgr run -q -- sh -c 'kill -KILL $$'
    [ "$status" -eq 137 ]
    vgr run -q -- sh -c 'kill -TERM $$'
    [ "$status" -eq 143 ]
    vgr run -q -- sh -c 'kill -USR1 $$'
    [ "$status" -eq 138 ]
}

@test "exec failures like a shell: 127 not found, 126 not executable; missing command 64" {
    # A PATH holding a directory this user cannot search makes "not found" 126, as in a shell
    # (su without -l keeps root's PATH, /root/... among it): searched here is a plain one.
    PATH=/usr/bin:/bin vgr -127 run -q -- vg-no-such-command
    [ "$status" -eq 127 ]
    [ "$stderr" = "vramguard: run: cannot run 'vg-no-such-command': No such file or directory" ]
    vgr -127 run -q -- "$TMP/absent/cmd"
    [ "$status" -eq 127 ]
    printf 'not a program\n' >"$TMP/plain"
    chmod 0644 "$TMP/plain"
    vgr run -q -- "$TMP/plain"
    [ "$status" -eq 126 ]
    [ "$stderr" = "vramguard: run: cannot run '$TMP/plain': Permission denied" ]
    vgr run -q -- "$TMP"
    [ "$status" -eq 126 ]
    # A script without #! runs under /bin/sh, as a shell would.
    printf 'echo from-script\n' >"$TMP/script"
    chmod 0755 "$TMP/script"
    vgr run -q -- "$TMP/script"
    [ "$status" -eq 0 ]
    [ "$output" = from-script ]
    vgr run
    [ "$status" -eq 64 ]
    [ "$stderr" = "vramguard: run: missing the command to run: vramguard run [options] -- CMD [ARGS...] (see 'vramguard run --help')" ]
    vgr run --gpus 0 --
    [ "$status" -eq 64 ]
}

@test "SIGTERM, SIGHUP, SIGUSR1 to run reach the job; run exits with the job's status" {
    cat >"$TMP/job" <<EOF
#!/bin/sh
trap 'echo USR1 >>"$TMP/got"' USR1
trap 'echo HUP >>"$TMP/got"' HUP
trap 'echo TERM >>"$TMP/got"; exit 42' TERM
: >"$TMP/ready"
i=0
while [ \$i -lt 600 ]; do sleep 0.05; i=\$((i+1)); done
exit 9
EOF
    chmod +x "$TMP/job"
    bg_run run -q --gpus 0 -- "$TMP/job"
    wait_for "[ -e '$TMP/ready' ]"
    kill -USR1 "$BG_PID"
    wait_for "grep -qx USR1 '$TMP/got'"
    kill -HUP "$BG_PID"
    wait_for "grep -qx HUP '$TMP/got'"
    kill -TERM "$BG_PID"
    rc=0
    wait "$BG_PID" || rc=$?
    [ "$rc" -eq 42 ]
    [ "$(cat "$TMP/got")" = "USR1
HUP
TERM" ]
}

@test "SIGINT to run: the job dies of it (130), its double-forked workers are cleaned up" {
    bg_run run --gpus 0 -- sh -c "'$HELPER' --orphan --setsid --open '$DEVDIR/nvidia2' \
        --children 2 --pidfile '$TMP/pids' && exec sleep 120"
    wait_for "[ -s '$TMP/pids' ] && child_comm $BG_PID sleep"
    pids=$(awk '$1 != "parent" { print $2 }' "$TMP/pids")
    for p in $pids; do vg_holds "$p" "$DEVDIR/nvidia2"; done
    kill -INT "$BG_PID"
    rc=0
    wait "$BG_PID" || rc=$?
    [ "$rc" -eq 130 ]
    for p in $pids; do
        vg_gone "$p" || { echo "$p survived"; return 1; }
    done
    grep -q "the job left 3 processes behind" "$TMP/bg.err"
}

@test "the job killed with SIGKILL: 137, and nothing it started survives" {
    vgr run --gpus 0 -- sh -c "'$HELPER' --orphan --setsid --open '$DEVDIR/nvidia2' \
        --children 2 --pidfile '$TMP/pids' && kill -KILL \$\$"
    [ "$status" -eq 137 ]
    [ -s "$TMP/pids" ]
    for p in $(awk '{ print $2 }' "$TMP/pids"); do
        vg_gone "$p" || { echo "$p survived"; return 1; }
    done
    [[ $stderr == *"the job left 3 processes behind: "*"; sent SIGTERM (SIGKILL after 10s)"* ]]
}

@test "--grace: a leftover that ignores SIGTERM gets SIGKILL after the grace period" {
    cat >"$TMP/job" <<EOF
#!/bin/sh
(trap '' TERM; : >"$TMP/ready"; exec sleep 120) &
i=0
while [ ! -e "$TMP/ready" ] && [ \$i -lt 200 ]; do sleep 0.05; i=\$((i+1)); done
EOF
    chmod +x "$TMP/job"
    SECONDS=0
    vgr run --grace 300ms -- "$TMP/job"
    [ "$status" -eq 0 ]
    [ "$SECONDS" -lt 8 ]
    [[ $stderr == *"the job left 1 process behind: "*" (sleep); sent SIGTERM"* ]]
    [[ $stderr == *"still running after the 300ms grace period: "*" (sleep); sent SIGKILL"* ]]
}

@test "a second SIGINT during the grace period skips the wait" {
    cat >"$TMP/job" <<EOF
#!/bin/sh
(trap '' TERM; : >"$TMP/ready"; exec sleep 120) &
exec sleep 120
EOF
    chmod +x "$TMP/job"
    bg_run run --grace 1h -- "$TMP/job"
    wait_for "[ -e '$TMP/ready' ]"
    kill -INT "$BG_PID"
    wait_for "grep -q 'sent SIGTERM' '$TMP/bg.err'"
    kill -INT "$BG_PID"
    rc=0
    wait "$BG_PID" || rc=$?
    [ "$rc" -eq 130 ]
    grep -q "sent SIGKILL without waiting" "$TMP/bg.err"
}

@test "on a terminal the job is the foreground process group, and run takes it back after" {
    command -v script >/dev/null || skip "script(1) from util-linux is not installed"
    cat >"$TMP/inner" <<EOF
#!/bin/sh
env VG_HELPER_TAG="$TMP" "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" run -q --gpus 0 -- \
    sh -c 'ps -o pgid= -o tpgid= -p \$\$ >"$TMP/job"'
echo "run \$?" >"$TMP/status"
ps -o pgid= -o tpgid= -p \$\$ >"$TMP/after"
EOF
    chmod +x "$TMP/inner"
    run timeout 20 script -qec "$TMP/inner" /dev/null
    [ "$(cat "$TMP/status")" = "run 0" ]
    read -r jpgid jtpgid <"$TMP/job"
    read -r spgid stpgid <"$TMP/after"
    [ "$jpgid" = "$jtpgid" ]  # the job had the terminal
    [ "$jpgid" != "$spgid" ]  # in a process group of its own
    [ "$spgid" = "$stpgid" ]  # and the shell has it back
}

@test "usage errors: one line, exit 64" {
    for args in "--grace -1" "--grace 2h" "--grace x" "--gpus auto:0" "--gpus auto:999" \
        "--gpus ''" "--track foo" "--gpus 0 --exclude 1" "--wait never" "--min-free 1e400" \
        "--max-util 101" "--gpus 9" "--gpus 0,0" "--gpus GPU-9999" "--bogus"; do
        eval "vgr run $args -- true"
        if [ "$status" -ne 64 ] || [ "$(wc -l <<<"$stderr")" -ne 1 ] ||
            [[ $stderr != "vramguard: run: "* ]]; then
            echo "run $args: status $status, stderr '$stderr'"
            return 1
        fi
    done
    vgr run --gpus 9 -- true
    [ "$stderr" = "vramguard: run: --gpus: '9' is not a GPU of this host (no such GPU index; see 'vramguard status')" ]
}

@test "--help documents every option" {
    vgr run --help
    [ "$status" -eq 0 ]
    for o in --gpus --min-free --max-util --exclude --wait --grace --keep-env --track --quiet \
        --verbose; do
        [[ $output == *"$o"* ]] || { echo "missing $o"; return 1; }
    done
}
