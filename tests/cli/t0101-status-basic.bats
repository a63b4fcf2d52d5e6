#!/usr/bin/env bats
# t0101-status-basic: `vramguard status` as a command: help, version, usage errors, the default
# command, the text screen (first line, n/a, columns, colour, hostile strings), --proc, --dev,
# --no-nvml and VRAMGUARD_NVML. The JSON document field by field is t0102; holders t0103;
# driver fallbacks and failures t0104.

# shellcheck disable=SC2119,SC2120,SC2154 # vgs: optional arguments; bats sets $stderr*
load lib

bats_require_minimum_version 1.5.0

setup() {
    TMP=$(vg_tmpdir)
    DEVDIR=$(vg_fake_dev)
    # GPU 0 has minor 3 (never assume minor == index); nothing answers for minor 0.
    vg_scenario <<'EOF'
driver 550.54.15
nvml 12.550.54.15
cuda 12040
gpu index=0 uuid=GPU-8a1b2c3d-0000-0000-0000-000000000000 name="NVIDIA H100 80GB HBM3" minor=3 bus=00000000:17:00.0 total=80GiB reserved=512MiB used=50GiB util=97 cc=9.0 persistence=1 compute_mode=0 mig=0
gpu index=1 uuid=GPU-1f0e9d8c-0000-0000-0000-000000000000 name="NVIDIA H100 80GB HBM3" minor=1 bus=00000000:2A:00.0 total=80GiB reserved=512MiB util=0 cc=9.0 persistence=1 compute_mode=0 mig=0
proc gpu=0 pid=4000000 type=compute mem=10GiB
proc gpu=1 pid=4000001 type=compute mem=na
EOF
}

# vgs ARGS...: vramguard with the fake driver (VG_NVML, default the full build) and this test's
# device directory; stdout in $output, stderr in $stderr.
vgs() {
    run --separate-stderr "$VG" --nvml "${VG_NVML:-$FAKE_FULL}" --dev "$DEVDIR" "$@"
}

# usage_error ARGS...: vramguard ARGS is bad usage: exit 64, nothing on stdout, exactly one
# line on stderr in the house format.
usage_error() {
    run --separate-stderr "$VG" "$@"
    echo "vramguard $*: status $status, stdout '$output', stderr '$stderr'"
    [ "$status" -eq 64 ]
    [ -z "$output" ]
    [ "${#stderr_lines[@]}" -eq 1 ]
    [[ $stderr == "vramguard: "* ]]
}

# on_tty CMD...: runs CMD with its stdout on a pseudo-terminal; its output (CR LF made LF)
# goes to $output.
on_tty() {
    command -v script >/dev/null 2>&1 || skip "script(1) is not installed (util-linux)"
    local cmd='' a
    for a in "$@"; do cmd+=" $(printf '%q' "$a")"; done
    run timeout 20 script -qec "$cmd" /dev/null </dev/null
    output=${output//$'\r'/}
}

@test "--help and status --help: usage and every global option on stdout, exit 0" {
    for args in --help -h "status --help" "status -h" "--json status --help"; do
        # shellcheck disable=SC2086 # word splitting intended
        run --separate-stderr "$VG" $args
        [ "$status" -eq 0 ]
        [ -z "$stderr" ]
        [[ ${lines[0]} == "usage: vramguard "* ]]
        for o in --json --color --proc --dev --nvml --nvml-timeout; do
            [[ $output == *"  $o"* ]] || { echo "$args: $o missing"; return 1; }
        done
    done
    run "$VG" --help
    [[ $output == *"  status "* ]]
    [[ $output == *"Exit status"* ]]
    run "$VG" status --help
    [[ $output == *"--no-nvml"* ]]
    [[ $output == *"3 the driver's view was unavailable"* ]]
}

@test "--version prints the version from VERSION, exit 0" {
    run --separate-stderr "$VG" --version
    [ "$status" -eq 0 ]
    [ "$output" = "vramguard $(cat "$ROOT/VERSION")" ]
    [ -z "$stderr" ]
}

@test "bad usage: exit 64, nothing on stdout, one line on stderr" {
    usage_error --bogus
    [[ $stderr == *"unknown option '--bogus'"* ]]
    usage_error status --bogus
    [[ $stderr == *"unknown option '--bogus'"* ]]
    usage_error status -x
    [[ $stderr == *"unknown option '-x'"* ]]
    usage_error status extra
    [[ $stderr == *"unexpected argument 'extra'"* ]]
    usage_error nosuch-command
    [[ $stderr == *"'nosuch-command' is not a vramguard command"* ]]
    usage_error --color=sometimes status
    [[ $stderr == *"sometimes"* ]]
    usage_error status --color=sometimes
    usage_error --nvml-timeout 0 status
    usage_error status --nvml-timeout abc
    usage_error status --nvml-timeout -1s
    usage_error --nvml
    [[ $stderr == *"'--nvml' needs a value"* ]]
    usage_error status --proc
    usage_error status --dev
}

@test "no command is status: same text, same JSON, global options before or after" {
    vgs status
    [ "$status" -eq 0 ]
    want=$(grep -v '^scanned ' <<<"$output")
    vgs
    [ "$status" -eq 0 ]
    [ "$(grep -v '^scanned ' <<<"$output")" = "$want" ]
    [[ ${lines[0]} == "driver 550.54.15, CUDA 12.4, 2 GPUs" ]]

    vg_require_jq
    strip='del(.time, .scan)'
    vgs --json
    [ "$status" -eq 0 ]
    want=$(json "$strip")
    [ "$(json .schema)" = vramguard.status/1 ]
    vgs --json status
    [ "$(json "$strip")" = "$want" ]
    vgs status --json
    [ "$(json "$strip")" = "$want" ]
    run --separate-stderr "$VG" status --json --dev "$DEVDIR" --nvml "$FAKE_FULL"
    [ "$status" -eq 0 ]
    [ "$(json "$strip")" = "$want" ]
}

@test "text: first line, GPU and memory lines, n/a, unexplained memory, last line" {
    vg_spawn --open "$DEVDIR/nvidia3" -- python train.py --lr 3e-4
    vgs status
    [ "$status" -eq 0 ]
    [ -z "$stderr" ]
    printf '%s\n' "$output"
    [ "${lines[0]}" = "driver 550.54.15, CUDA 12.4, 2 GPUs" ]
    [ "${lines[1]}" = "GPU 0  NVIDIA H100 80GB HBM3  GPU-8a1b2c3d  minor 3" ]
    [ "${lines[2]}" = "  memory 50 GiB of 80 GiB used, 29.5 GiB free, 512 MiB reserved, util 97%" ]
    [ "${lines[3]}" = "  40 GiB held by no listed process" ]
    [[ ${lines[4]} == *"PID USER"*"MEMORY TYPE"*"ST SEEN CONTAINER"*"COMMAND" ]]
    # The device-node holder: no memory figure (-), seen through its fd.
    row=$(grep -E "^ +$VG_PID " <<<"$output")
    [[ $row =~ ^\ +$VG_PID\ +[^\ ]+\ +-\ +-\ +S\ +fd\ +[^\ ]+\ +.*vg-helper.*\ --\ python\ train\.py\ --lr\ 3e-4$ ]]
    # The NVML-only PID: its memory, and that this /proc does not show it.
    row=$(grep -E '^ +4000000 ' <<<"$output")
    [[ $row =~ ^\ +4000000\ +\?\ +10\ GiB\ +C\ +\?\ +nvml\ +-\ +\(not\ in\ this\ /proc\)$ ]]
    # GPU 1: an NVML process whose memory the driver cannot tell reads n/a, never 0.
    [[ $output == *$'\nGPU 1  NVIDIA H100 80GB HBM3  GPU-1f0e9d8c  minor 1\n'* ]]
    row=$(grep -E '^ +4000001 ' <<<"$output")
    [[ $row =~ ^\ +4000001\ +\?\ +n/a\ +C\ +\?\ +nvml\  ]]
    [[ ${lines[-1]} =~ ^scanned\ [0-9]+\ process ]]
}

@test "text: the rows' columns line up with the header" {
    vg_spawn --open "$DEVDIR/nvidia3"
    vgs status
    [ "$status" -eq 0 ]
    header=$(grep -m1 'PID USER' <<<"$output")
    fd_row=$(grep -E "^ +$VG_PID " <<<"$output")
    nvml_row=$(grep -E '^ +4000000 ' <<<"$output")
    printf '%s\n' "$header" "$fd_row" "$nvml_row"
    # col TEXT LINE: 0-based column of the first TEXT in LINE.
    col() { local pre=${2%%"$1"*}; echo "${#pre}"; }
    # PID and MEMORY are right-aligned: they end where their titles end.
    [ $(($(col PID "$header") + 3)) -eq $(($(col "$VG_PID " "$fd_row") + ${#VG_PID})) ]
    [ $(($(col MEMORY "$header") + 6)) -eq $(($(col '10 GiB' "$nvml_row") + 6)) ]
    # The others start where their titles start.
    [ "$(col ' C ' "$nvml_row")" -eq $(($(col TYPE "$header") - 1)) ]
    [ "$(col ' S ' "$fd_row")" -eq $(($(col ' ST ' "$header"))) ]
    [ "$(col ' fd ' "$fd_row")" -eq $(($(col ' SEEN ' "$header"))) ]
    [ "$(col ' nvml ' "$nvml_row")" -eq $(($(col ' SEEN ' "$header"))) ]
    [ "$(col '(not in' "$nvml_row")" -eq "$(col COMMAND "$header")" ]
    [ "$(col "$HELPER" "$fd_row")" -eq "$(col COMMAND "$header")" ]
}

@test "colour: never off a terminal by default; --color=always; NO_COLOR and --color=never" {
    vg_spawn --open "$DEVDIR/nvidia3"
    esc=$'\e'
    vgs status
    [[ $output != *"$esc"* ]]
    vgs --color=always status
    [ "$status" -eq 0 ]
    [[ $output == *"${esc}["*m* ]]
    vgs status --color
    [[ $output == *"${esc}["*m* ]]
    vgs --color=never status
    [[ $output != *"$esc"* ]]
    NO_COLOR=1 vgs status
    [[ $output != *"$esc"* ]]
    # --json never carries colour, even when asked for.
    vgs --json --color=always status
    [[ $output != *"$esc"* ]]
    json_ok '.schema == "vramguard.status/1"'

    # On a terminal: colour by default, none with NO_COLOR=1 or --color=never.
    on_tty "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" status
    [[ $output == *"${esc}["*m* ]]
    [[ $output == *"driver 550.54.15"* ]]
    on_tty env NO_COLOR=1 "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" status
    [[ $output == *"driver 550.54.15"* ]]
    [[ $output != *"$esc"* ]]
    on_tty "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR" --color=never status
    [[ $output == *"driver 550.54.15"* ]]
    [[ $output != *"$esc"* ]]
}

@test "a hostile command line and comm never put a raw ESC or newline on the screen" {
    vg_spawn --open "$DEVDIR/nvidia3" --comm $'\e]0;x\a' -- $'\e[31mred' $'two\nlines' $'\x9b31m'
    for color in never always; do
        vgs --color=$color status
        [ "$status" -eq 0 ]
        [[ $output != *$'\e[31mred'* ]]
        [[ $output != *$'\e]0'* ]]
        [[ $output != *$'\x9b'* ]]
        [[ $output != *$'\a'* ]]
        if [ $color = never ]; then [[ $output != *$'\e'* ]]; fi
        row=$(grep -E "^ +$VG_PID " <<<"$output")
        [[ $row == *'\x1b[31mred two\nlines '* ]]
        [[ $output != *$'\nlines'* ]]
    done
    vgs --json status
    [ "$(json ".gpus[0].holders[] | select(.pid == $VG_PID) | .comm" -j)" = $'\e]0;x\a' ]
    [[ $(json ".gpus[0].holders[] | select(.pid == $VG_PID) | .command" -j) == *" -- "$'\e[31mred two\nlines'* ]]
}

@test "hostile strings from the driver (version, name, UUID) are escaped on the screen too" {
    esc=$'\e' bel=$'\a'
    vg_scenario <<EOF
driver 550.54${esc}[31m
gpu index=0 uuid=GPU-${esc}[2J0000-1111 name="A100${esc}]0;t${bel}" minor=3 total=80GiB mig=1
mig parent=0 index=0 uuid=MIG-${esc}[5m name="MIG${esc}[1m" gi=1 ci=0 total=10GiB
EOF
    vgs --color=never status
    [ "$status" -eq 0 ]
    printf '%s\n' "$output"
    [[ $output != *"$esc"* ]]
    [[ $output != *"$bel"* ]]
    [ "${lines[0]}" = 'driver 550.54\x1b[31m, 1 GPU' ]
    [ "${lines[1]}" = 'GPU 0  A100\x1b]0;t\x07  GPU-\x1b[2J0000  minor 3' ]
    [[ $output == *'MIG 0  MIG\x1b[1m  MIG-\x1b[5m'* ]]
    vgs --json status
    [ "$(json .driver.driver_version -j)" = "550.54${esc}[31m" ]
    [ "$(json .gpus[0].name -j)" = "A100${esc}]0;t${bel}" ]
}

@test "--proc DIR that does not exist: a clear one-line error, exit 3, no half document" {
    for json in "" --json; do
        # shellcheck disable=SC2086 # an empty $json is no argument
        vgs --proc "$TMP/no-such-proc" $json status
        [ "$status" -eq 3 ]
        [ -z "$output" ]
        [ "${#stderr_lines[@]}" -eq 1 ]
        [[ $stderr == "vramguard: status: "*"$TMP/no-such-proc"* ]]
    done
}

@test "--proc and --dev are honoured and reported in host" {
    vg_spawn --open "$DEVDIR/nvidia3"
    vgs --json --proc /proc status
    [ "$status" -eq 0 ]
    [ "$(json .host.proc_root)" = /proc ]
    [ "$(json .host.dev_dir)" = "$DEVDIR" ]
    json_ok "[.gpus[0].holders[].pid] | index($VG_PID) != null"
    # Another device directory: the helper's file is not an NVIDIA node there.
    other=$(vg_fake_dev "$TMP/other")
    run --separate-stderr "$VG" --nvml "$FAKE_FULL" --dev "$other" --json status
    [ "$status" -eq 0 ]
    [ "$(json .host.dev_dir)" = "$other" ]
    json_ok "[.gpus[].holders[].pid, .unmatched_holders[].holder.pid] | index($VG_PID) == null"
    # A trailing slash on --dev matches the same nodes.
    run --separate-stderr "$VG" --nvml "$FAKE_FULL" --dev "$DEVDIR/" --json status
    [ "$status" -eq 0 ]
    json_ok "[.gpus[0].holders[].pid] | index($VG_PID) != null"
}

@test "--no-nvml: the driver is not asked, device-node holders still listed, exit 3" {
    vg_spawn --open "$DEVDIR/nvidia3"
    vg_scenario <<<'this is not a scenario' # the driver would fail loudly if it were loaded
    vgs --no-nvml --json
    [ "$status" -eq 3 ]
    [ -z "$stderr" ]
    json_ok '.driver.available == false'
    [[ $(json .driver.error) == *"--no-nvml"* ]]
    json_ok '.gpus == []'
    [ "$(json '.unmatched_holders | length')" = 1 ]
    [ "$(json '.unmatched_holders[0].minor')" = 3 ]
    [ "$(json '.unmatched_holders[0].holder.pid')" = "$VG_PID" ]
    vgs status --no-nvml
    [ "$status" -eq 3 ]
    [[ ${lines[0]} == "no NVIDIA driver view: "*"--no-nvml"* ]]
    [[ $output == *"$DEVDIR/nvidia3"* ]]
}

@test "VRAMGUARD_NVML names the library; --nvml wins over it" {
    vg_require_jq
    VRAMGUARD_NVML=$FAKE_LEGACY run --separate-stderr "$VG" --dev "$DEVDIR" --json status
    [ "$status" -eq 0 ]
    [ "$(json .driver.library)" = "$FAKE_LEGACY" ]
    [ "$(json .driver.memory_api)" = v1 ]
    VRAMGUARD_NVML=$TMP/absent.so run --separate-stderr "$VG" --dev "$DEVDIR" --json status
    [ "$status" -eq 3 ]
    [[ $(json .driver.error) == *"$TMP/absent.so"* ]]
    VRAMGUARD_NVML=$TMP/absent.so run --separate-stderr "$VG" --nvml "$FAKE_FULL" \
        --dev "$DEVDIR" --json status
    [ "$status" -eq 0 ]
    [ "$(json .driver.library)" = "$FAKE_FULL" ]
    [ "$(json .driver.memory_api)" = v2 ]
}
