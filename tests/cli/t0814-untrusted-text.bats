#!/usr/bin/env bats
# t0814-untrusted-text: text vramguard did not write reaches no output raw. A driver whose
# version, GPU name and UUID carry terminal escapes (ESC, an OSC title sequence ended by BEL)
# and a UUID with commas in it: no byte of them reaches status, doctor, visible, check, clean,
# watch, pick or run output, on stdout or stderr, unescaped; a UUID that is not a well-formed
# UUID never becomes a CUDA_VISIBLE_DEVICES value (pick leaves that GPU out and says why, run
# refuses it in one line, clean --reset never hands it to nvidia-smi -i, which reads a comma
# as a list of GPUs). A local user's command line with a newline and escapes reaches
# --exec alert commands escaped in VRAMGUARD_COMMAND and VRAMGUARD_MESSAGE, with every byte
# kept in the JSON event on stdin. See docs/reliability.md.

load lib
load watch
load clean

bats_require_minimum_version 1.5.0

ESC=$'\033'
BEL=$'\007'
UGOOD=GPU-0b000000-0000-4000-8000-000000000000

setup() {
    vg_require_jq
    TMP=$(vg_tmpdir)
    DEVDIR=$(vg_fake_dev "" 4)
    export VRAMGUARD_RUNTIME_DIR=$TMP/locks
}

teardown() {
    watch_teardown
}

# GPU 0: escapes in its name and UUID; GPU 1: a UUID with commas; GPU 2: well-formed. The
# driver's version carries an SGR sequence.
hostile() {
    vg_scenario <<EOF
driver 550.54${ESC}[31m.15
cuda 12040
gpu index=0 uuid=GPU-0a${ESC}[2J00000-0000-4000-8000-000000000000 name="H100${ESC}]0;pwned${BEL}" minor=0 bus=00000000:17:00.0 total=80GiB reserved=512MiB util=0 cc=9.0
gpu index=1 uuid=GPU-a,1,b name="NVIDIA T4" minor=1 bus=00000000:18:00.0 total=16GiB reserved=256MiB util=0 cc=7.5
gpu index=2 uuid=$UGOOD name="NVIDIA H100 80GB HBM3" minor=2 bus=00000000:19:00.0 total=80GiB reserved=512MiB util=0 cc=9.0
proc gpu=0 pid=2000000000 type=compute mem=1GiB
$(printf '%s\n' "$@")
EOF
}

# raw_free TEXT: true when TEXT holds no ESC and no BEL byte.
raw_free() {
    [[ $1 != *"$ESC"* && $1 != *"$BEL"* ]]
}

# vgx ARGS...: vramguard with the fake; stdout and stderr in $output and $stderr.
vgx() {
    run --separate-stderr env VG_HELPER_TAG="$TMP" "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" "$@"
}

@test "a driver's escapes reach no text output raw: status, doctor, visible, check, clean, watch" {
    hostile
    local cmd fails=()
    for cmd in "status" "doctor --no-shell" "visible 0,1,2" "visible GPU-0a" "check" "clean" \
        "watch --once" "status --json" "doctor --json --no-shell"; do
        # shellcheck disable=SC2086 # the words of cmd are the arguments
        vgx $cmd
        raw_free "$output" || fails+=("$cmd: stdout: $(printf '%q' "$output")")
        raw_free "$stderr" || fails+=("$cmd: stderr: $(printf '%q' "$stderr")")
        ((status < 64)) || fails+=("$cmd: exit $status: $stderr")
    done
    if ((${#fails[@]})); then
        printf '%s\n' "${fails[@]}"
        return 1
    fi
    vgx status
    [[ $output == *'driver 550.54\x1b[31m.15'* ]]
    [[ $output == *'GPU 0  H100\x1b]0;pwned\x07  GPU-0a\x1b[2J00  minor 0'* ]]
    vgx doctor --no-shell
    [[ $output == *'GPU 0  H100\x1b]0;pwned\x07  GPU-0a\x1b[2J00  '* ]]
    # JSON keeps the bytes, escaped as JSON
    vgx status --json
    json_ok '.gpus[0].name == "H100\u001b]0;pwned\u0007" and .gpus[1].uuid == "GPU-a,1,b"'
    # visible: no "By UUID" value made of UUIDs that are not well-formed
    vgx visible 0,1,2
    [[ $output != *"By UUID"* ]]
    vgx visible 2 --order PCI_BUS_ID
    [[ $output == *"By UUID (the same whatever the order): CUDA_VISIBLE_DEVICES=$UGOOD"* ]]
}

@test "pick and run: a UUID that is not well-formed never becomes CUDA_VISIBLE_DEVICES" {
    hostile
    # pick leaves GPUs 0 and 1 out, and says why when it cannot do without them
    vgx pick -n 1 --min-free 1
    [ "$status" -eq 0 ]
    [ "$output" = "$UGOOD" ]
    vgx pick -n 2 --min-free 1
    [ "$status" -eq 1 ]
    [ -z "$output" ]
    [ "$stderr" = "vramguard: pick: not enough free GPUs: asked for 2 GPUs, 1 free enough (GPU 0: its UUID is not well-formed; GPU 1: its UUID is not well-formed); --wait TIMEOUT waits for them" ]
    vgx pick -n 1 --min-free 1 --format json
    json_ok '.cuda_visible_devices == $u and .picked == [2]
        and ([.gpus[] | select(.index < 2) | .reason] | all(. == "its UUID is not well-formed"))' \
        --arg u "$UGOOD"
    # run refuses a named GPU whose UUID is not well-formed, in one line, and runs nothing
    vgx run --gpus 1 -- touch "$TMP/ran"
    echo "$stderr"
    [ "$status" -eq 1 ]
    [ ! -e "$TMP/ran" ]
    [ "$stderr" = "vramguard: run: GPU 1 (NVIDIA T4, GPU-a,1,b): the driver's UUID is not a well-formed UUID, so it cannot go into CUDA_VISIBLE_DEVICES" ]
    vgx run --gpus 0 -- touch "$TMP/ran"
    [ "$status" -eq 1 ]
    [ ! -e "$TMP/ran" ]
    raw_free "$stderr"
    [ "$(wc -l <<<"$stderr")" -eq 1 ]
    [[ $stderr == *'(H100\x1b]0;pwned\x07, GPU-0a\x1b[2J00000-0000-4000-8000-000000000000): the driver'* ]]
    # auto picks the well-formed one
    vgx run --gpus auto:1 --min-free 1 -q -- sh -c 'printf %s "$CUDA_VISIBLE_DEVICES"'
    [ "$status" -eq 0 ]
    [ "$output" = "$UGOOD" ]
}

@test "--exec: a command line with a newline and escapes is escaped in VRAMGUARD_* variables" {
    cat >"$TMP/record" <<EOF
#!/bin/sh
printf '%s' "\$VRAMGUARD_COMMAND" >"$TMP/command"
printf '%s' "\$VRAMGUARD_MESSAGE" >"$TMP/message"
cat >"$TMP/stdin"
EOF
    chmod +x "$TMP/record"
    local evil="train.py"$'\n'"rm -rf /${ESC}[8m"
    A=$(vg_spawn --open "$DEVDIR/nvidia2" -- python "$evil")
    hostile "proc gpu=2 pid=$A type=compute mem=3GiB"
    WOUT=$TMP/watch.out WERR=$TMP/watch.err
    watch_start --expect 2=none --exec "$TMP/record"
    wait_for "[ -s $TMP/stdin ]"
    local command message
    command=$(cat "$TMP/command")
    message=$(cat "$TMP/message")
    echo "command: $(printf '%q' "$command")"
    echo "message: $(printf '%q' "$message")"
    raw_free "$command"
    raw_free "$message"
    [[ $command != *$'\n'* && $message != *$'\n'* ]]
    [[ $command == *'python train.py\nrm -rf /\x1b[8m' ]]
    [[ $message == *'python train.py\nrm -rf /\x1b[8m'* ]]
    # stdin keeps every byte, as JSON
    jq -e --arg c "python $evil" '.command | endswith($c)' "$TMP/stdin"
    # and watch's own line is escaped too
    raw_free "$(cat "$WOUT")"
}

@test "clean --reset: a UUID with a comma never reaches nvidia-smi -i (a list of GPUs there)" {
    [ "$(id -u)" -eq 0 ] || skip "needs root"
    vg_pidns_start
    fake_smi
    vg_scenario <<EOF
driver 550.54.15
gpu index=0 uuid=GPU-a,1,b name="NVIDIA T4" minor=0 bus=00000000:07:00.0 total=16GiB reserved=256MiB used=6GiB
gpu index=1 uuid=$UGOOD name="NVIDIA H100 80GB HBM3" minor=1 bus=00000000:0F:00.0 total=80GiB reserved=512MiB used=auto
EOF
    vgc clean --reset --force --gpu 0
    show
    [ "$status" -eq 1 ]
    [ ! -s "$SMI_LOG" ]
    [[ $output == *"its UUID is not a well-formed UUID: nvidia-smi -i could read it as other GPUs"* ]]
    # the command it prints names no GPU list either
    [[ $output == *"nvidia-smi --gpu-reset -i <UUID>"* && $output != *"-i GPU-a,1,b"* ]]
    vgc clean --reset --json --gpu 0
    json_ok '.gpus[0].reset.command == "nvidia-smi --gpu-reset -i <UUID>"'
}
