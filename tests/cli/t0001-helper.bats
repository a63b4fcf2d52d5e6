#!/usr/bin/env bats
# t0001-helper: the test helper (tests/helpers/vg-helper.c) and lib.bash, against the real /proc.
# Needs neither vramguard nor the fake driver: every later CLI test relies on these states being
# exactly what they claim to be.

load lib

setup() {
    if [[ ! -x $HELPER ]]; then
        echo "$HELPER is missing: run 'make helper'" >&2
        return 1
    fi
    DEV=$(vg_fake_dev)
    LIB=$(vg_fake_lib libcuda.so.1 libnccl.so.2 libtensorflow_framework.so.2)
    TMP=$(vg_tmpdir)
}

# The fd number under /proc/$1/fd linking to $2 (first one), for fdinfo checks.
fd_of() {
    local fd
    for fd in /proc/"$1"/fd/*; do
        if [[ $(readlink "$fd") == "$2" ]]; then
            printf '%s\n' "${fd##*/}"
            return 0
        fi
    done
    return 1
}

environ_has() {
    tr '\0' '\n' <"/proc/$1/environ" | grep -qxF -- "$2"
}

@test "--help lists every option and exits 0" {
    run "$HELPER" --help
    [ "$status" -eq 0 ]
    for o in --open --map --env --clear-env --comm --child-comm --children --zombie \
        --zombie-leader --dstate --orphan --setsid --uid --gid --pidfile --ready-fd --lifetime \
        --alive-fd --ignore-term --exit-on-term; do
        [[ $output == *"  $o "* ]] || { echo "missing $o"; return 1; }
    done
}

@test "usage errors exit 2 with a vg-helper: message" {
    run "$HELPER" --bogus
    [ "$status" -eq 2 ]
    [[ $output == *"vg-helper: unknown option '--bogus'"* ]]
    run "$HELPER" --children many
    [ "$status" -eq 2 ]
    [[ $output == *"vg-helper: --children: 'many' is not a number"* ]]
    run "$HELPER" --lifetime
    [ "$status" -eq 2 ]
    [[ $output == *"needs a value"* ]]
    run "$HELPER" --env NOVALUE
    [ "$status" -eq 2 ]
    run "$HELPER" --setsid
    [ "$status" -eq 2 ]
}

@test "a setup error exits 1, writes no pidfile, and vg_spawn shows the log at once" {
    run "$HELPER" --open "$TMP/absent" --pidfile "$TMP/p"
    [ "$status" -eq 1 ]
    [[ $output == "vg-helper: cannot open '$TMP/absent': No such file or directory" ]]
    [ ! -e "$TMP/p" ]
    run "$HELPER" --orphan --map "$TMP/absent" --pidfile "$TMP/p"
    [ "$status" -eq 1 ]
    [[ $output == *"cannot open '$TMP/absent' to map it"* ]]
    [ ! -e "$TMP/p" ]
    run vg_spawn --open "$TMP/absent"
    [ "$status" -eq 1 ]
    [[ $output == *"exited with status 1 before it was ready"* ]]
    [[ $output == *"cannot open '$TMP/absent'"* ]]
}

@test "--open holds the file on an inheritable fd" {
    vg_spawn --open "$DEV/nvidia0" --open "$DEV/nvidiactl"
    vg_holds "$VG_PID" "$DEV/nvidia0"
    vg_holds "$VG_PID" "$DEV/nvidiactl"
    run vg_holds "$VG_PID" "$DEV/nvidia1"
    [ "$status" -eq 1 ]
    fd=$(fd_of "$VG_PID" "$DEV/nvidia0")
    flags=$(awk '$1 == "flags:" { print $2 }' "/proc/$VG_PID/fdinfo/$fd")
    (((8#$flags & 8#2000000) == 0)) # no O_CLOEXEC
    # Only 0-2 and what was asked for: bats' own descriptors were closed.
    [ "$(ls "/proc/$VG_PID/fd" | wc -l)" -eq 5 ]
}

@test "--env shows in /proc/PID/environ, with cmdline unchanged" {
    vg_spawn --env CUDA_VISIBLE_DEVICES=1,0 --env 'ODD=a b=c' --env LOCAL_RANK=0 \
        --env LOCAL_RANK=3 -- python train.py
    environ_has "$VG_PID" CUDA_VISIBLE_DEVICES=1,0
    environ_has "$VG_PID" 'ODD=a b=c'
    environ_has "$VG_PID" LOCAL_RANK=3
    [ "$(tr '\0' '\n' <"/proc/$VG_PID/environ" | grep -c '^LOCAL_RANK=')" -eq 1 ]
    environ_has "$VG_PID" "PATH=$PATH" # the rest is kept
    [[ $(tr '\0' ' ' <"/proc/$VG_PID/cmdline") == *" --env LOCAL_RANK=3 -- python train.py " ]]
}

@test "--clear-env leaves only the --env variables" {
    vg_spawn --clear-env --env CUDA_DEVICE_ORDER=PCI_BUS_ID --env EMPTY=
    [ "$(tr '\0' '\n' <"/proc/$VG_PID/environ")" = "CUDA_DEVICE_ORDER=PCI_BUS_ID
EMPTY=" ]
}

@test "--map shows the libraries in /proc/PID/maps, empty files too" {
    : >"$LIB/libempty.so"
    vg_spawn --map "$LIB/libcuda.so.1" --map "$LIB/libnccl.so.2" \
        --map "$LIB/libtensorflow_framework.so.2" --map "$LIB/libempty.so"
    for l in libcuda.so.1 libnccl.so.2 libtensorflow_framework.so.2 libempty.so; do
        grep -qF " $LIB/$l" "/proc/$VG_PID/maps" || { echo "$l not mapped"; return 1; }
    done
    run vg_holds "$VG_PID" "$LIB/libcuda.so.1" # mapped, not held open
    [ "$status" -eq 1 ]
}

@test "--comm takes a hostile name; --child-comm names the workers" {
    vg_spawn --comm 'a) (b c' --children 2 --child-comm pt_data_worker
    [ "$(cat "/proc/$VG_PID/comm")" = 'a) (b c' ]
    [ "$(vg_stat "$VG_PID" comm)" = 'a) (b c' ]
    [ "$(vg_stat "$VG_PID" state)" = S ]
    for c in "${VG_CHILD_PIDS[@]}"; do
        [ "$(cat "/proc/$c/comm")" = pt_data_worker ]
    done
}

@test "--children inherit fds, environment and maps, and die with their parent" {
    vg_spawn --children 3 --open "$DEV/nvidia2" --env LOCAL_RANK=1 --map "$LIB/libcuda.so.1"
    [ "${#VG_CHILD_PIDS[@]}" -eq 3 ]
    for c in "${VG_CHILD_PIDS[@]}"; do
        [ "$(vg_stat "$c" ppid)" = "$VG_PID" ]
        vg_holds "$c" "$DEV/nvidia2"
        environ_has "$c" LOCAL_RANK=1
        grep -qF "$LIB/libcuda.so.1" "/proc/$c/maps"
    done
    kill -KILL "$VG_PID"
    for c in "${VG_CHILD_PIDS[@]}"; do
        wait_for "vg_gone $c"
    done
}

@test "a worker that dies is reaped, not left a zombie" {
    vg_spawn --children 2
    kill -TERM "${VG_CHILD_PIDS[0]}"
    wait_for "[ ! -e /proc/${VG_CHILD_PIDS[0]} ]"
    [ "$(vg_stat "${VG_CHILD_PIDS[1]}" state)" = S ]
    [ "$(vg_stat "$VG_PID" state)" = S ]
}

@test "--orphan: the carrier holds everything, is reparented, and its launcher is gone" {
    vg_spawn --orphan --open "$DEV/nvidia0" --env RANK=0 --children 1 -- torchrun train.py
    [ -n "$VG_PARENT_PID" ]
    [ "$VG_ORPHAN_PID" = "$VG_PID" ]
    vg_gone "$VG_PARENT_PID"
    ppid=$(vg_stat "$VG_PID" ppid)
    [ "$ppid" != "$VG_PARENT_PID" ]
    [ "$ppid" != "$$" ] # init or the nearest subreaper, never the test shell
    vg_holds "$VG_PID" "$DEV/nvidia0"
    environ_has "$VG_PID" RANK=0
    [ "$(vg_stat "${VG_CHILD_PIDS[0]}" ppid)" = "$VG_PID" ]
    vg_holds "${VG_CHILD_PIDS[0]}" "$DEV/nvidia0"
    # Without --setsid the session is the test's own.
    [ "$(vg_stat "$VG_PID" session)" = "$(vg_stat $$ session)" ]
}

@test "--orphan --setsid: the carrier's session leader is gone" {
    vg_spawn --orphan --setsid --open "$DEV/nvidia1" --children 1
    vg_gone "$VG_PARENT_PID"
    [ "$(vg_stat "$VG_PID" session)" = "$VG_PARENT_PID" ]
    [ "$(vg_stat "$VG_PID" pgrp)" = "$VG_PARENT_PID" ]
    [ "$(vg_stat "$VG_PID" ppid)" != "$VG_PARENT_PID" ]
    [ "$(vg_stat "${VG_CHILD_PIDS[0]}" session)" = "$VG_PARENT_PID" ]
    [ "$(vg_stat "$VG_PID" session)" != "$(vg_stat $$ session)" ]
}

@test "--zombie: children in state Z that are never reaped" {
    vg_spawn --zombie --zombie --open "$DEV/nvidia0"
    [ "${#VG_ZOMBIE_PIDS[@]}" -eq 2 ]
    for z in "${VG_ZOMBIE_PIDS[@]}"; do
        [ "$(vg_stat "$z" state)" = Z ]
        [ "$(vg_stat "$z" ppid)" = "$VG_PID" ]
    done
    [ "$(vg_stat "$VG_PID" state)" = S ]
}

@test "--zombie-leader: a Z leader with a live thread still holding the fds" {
    vg_spawn --zombie-leader --open "$DEV/nvidia3" --children 1
    [ "$(vg_stat "$VG_PID" state)" = Z ]
    [ -n "$VG_THREAD_TID" ] && [ "$VG_THREAD_TID" != "$VG_PID" ]
    [ -d "/proc/$VG_PID/task/$VG_THREAD_TID" ]
    [ "$(vg_stat "$VG_PID/task/$VG_THREAD_TID" state)" = S ]
    [ "$(ls "/proc/$VG_PID/task" | wc -l)" -eq 2 ]
    [ "$(readlink "/proc/$VG_PID/task/$VG_THREAD_TID/fd/3")" = "$DEV/nvidia3" ]
    [ "$(vg_stat "${VG_CHILD_PIDS[0]}" ppid)" = "$VG_PID" ]
    vg_holds "$VG_PID" "$DEV/nvidia3"
}

@test "--dstate: a thread in D; killing its child releases it" {
    vg_spawn --dstate --open "$DEV/nvidia0"
    [ "$(vg_stat "$VG_PID/task/$VG_DSTATE_TID" state)" = D ]
    [ "$(vg_stat "$VG_PID" state)" = S ]
    [ "$(vg_stat "$VG_VFORK_PID" ppid)" = "$VG_PID" ]
    kill -KILL "$VG_VFORK_PID"
    wait_for "[ ! -e /proc/$VG_PID/task/$VG_DSTATE_TID ]"
    [ "$(vg_stat "$VG_PID" state)" = S ]
}

@test "--lifetime ends every process it created" {
    vg_spawn --lifetime 1 --children 2 --zombie --dstate
    pids=("$VG_PID" "${VG_CHILD_PIDS[@]}" "$VG_VFORK_PID")
    vg_spawn --lifetime 1 --orphan --setsid --children 1 --zombie-leader
    pids+=("$VG_PID" "${VG_CHILD_PIDS[@]}")
    for p in "${pids[@]}"; do
        wait_for "vg_gone $p" 15
    done
}

@test "SIGTERM: exit 0 by default; --ignore-term survives it" {
    vg_spawn --children 1
    kill -TERM "$VG_PID"
    rc=0
    wait "$VG_PID" || rc=$?
    [ "$rc" -eq 0 ]
    wait_for "vg_gone ${VG_CHILD_PIDS[0]}"

    vg_spawn --ignore-term --children 1
    sigign=$(awk '$1 == "SigIgn:" { print $2 }' "/proc/$VG_PID/status")
    (((16#$sigign & (1 << 14)) != 0)) # SIGTERM is 15
    kill -TERM "$VG_PID" "${VG_CHILD_PIDS[0]}"
    sleep 0.2
    [ "$(vg_stat "$VG_PID" state)" = S ]
    [ "$(vg_stat "${VG_CHILD_PIDS[0]}" state)" = S ]
}

@test "--uid: the process and its workers belong to another user, fds still held" {
    if [[ $(id -u) != 0 ]]; then skip "needs root"; fi
    vg_spawn --uid 65534 --open "$DEV/nvidia0" --children 1
    for p in "$VG_PID" "${VG_CHILD_PIDS[0]}"; do
        [ "$(awk '$1 == "Uid:" { print $2, $3, $4, $5 }' "/proc/$p/status")" = \
            "65534 65534 65534 65534" ]
        [ "$(stat -c %u "/proc/$p/environ")" = 65534 ] # dumpable, like any user's process
        vg_holds "$p" "$DEV/nvidia0"
    done
}

@test "--ready-fd: 'ready' once set up, and nobody keeps the descriptor" {
    exec 5>"$TMP/ready"
    vg_spawn --ready-fd 5 --children 1 --orphan
    exec 5>&-
    [ "$(cat "$TMP/ready")" = ready ]
    [ ! -e "/proc/$VG_PID/fd/5" ]
    [ ! -e "/proc/${VG_CHILD_PIDS[0]}/fd/5" ]
}

@test "--alive-fd: every process it created ends when the pipe's writer is gone" {
    # The writer is a sleep holding the write end; the helper gets the read end as fd 6.
    mkfifo "$TMP/alive"
    sleep 600 >"$TMP/alive" 3>&- &
    local writer=$!
    _vg_record writer "$writer"
    exec 6<"$TMP/alive"
    vg_spawn --alive-fd 6 --children 1 --orphan --setsid
    exec 6<&-
    pids=("$VG_PID" "${VG_CHILD_PIDS[@]}")
    for p in "${pids[@]}"; do [ "$(vg_stat "$p" state)" = S ]; done
    kill -KILL "$writer"
    for p in "${pids[@]}"; do
        wait_for "vg_gone $p" 10
    done
}

@test "vg_cleanup leaves nothing behind" {
    vg_spawn --orphan --setsid --children 2 --zombie --dstate --open "$DEV/nvidia0"
    pids=("$VG_PID" "${VG_CHILD_PIDS[@]}" "${VG_ZOMBIE_PIDS[@]}" "$VG_VFORK_PID")
    vg_spawn --zombie-leader --children 1 --ignore-term
    pids+=("$VG_PID" "${VG_CHILD_PIDS[@]}")
    pid=$(vg_spawn --children 1) # also from a subshell: recorded in files, not variables
    pids+=("$pid" $(vg_role child))
    [ "${#pids[@]}" -eq 9 ]
    vg_cleanup
    for p in "${pids[@]}"; do
        vg_gone "$p" || { echo "$p survived"; return 1; }
    done
    [ -z "$(grep -lzxF -- "VG_HELPER_TAG=$(vg_tmpdir)" /proc/[0-9]*/environ 2>/dev/null)" ]
    vg_cleanup # idempotent
}

@test "lib: wait_for is bounded, vg_scenario is atomic, json reads \$output" {
    run wait_for false 0.2
    [ "$status" -eq 1 ]
    [[ $output == *"still false after 0.2s: false"* ]]
    wait_for "[ -d '$TMP' ]" 1

    vg_scenario <<'EOF'
gpu 0 name=fake
EOF
    [ "$FAKE_NVML_SCENARIO" = "$TMP/scenario" ]
    [ "$(cat "$FAKE_NVML_SCENARIO")" = "gpu 0 name=fake" ]
    [ -z "$(ls "$TMP" | grep '\.tmp\.')" ]

    vg_require_jq
    output='{"gpus": [{"index": 0, "used": null}, {"index": 1, "used": 5}]}'
    [ "$(json '.gpus | length')" = 2 ]
    [ "$(json '.gpus[1].used')" = 5 ]
    json_ok '.gpus[0].used == null'
    if json_ok '.gpus[0].used'; then return 1; fi
}
