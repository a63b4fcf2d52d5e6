#!/usr/bin/env bats
# t1502-top-gpus: more of `vramguard top` in tmux (tests/cli/top.bash) on four fake GPUs with
# their sensors: temperature, power against the limit and fan on each GPU line, "-" where a
# board gives none; host RSS per holder; the tree groups a DDP job (a launcher holding no GPU
# and four ranks, one per GPU) under its launcher; one GPU's driver call hung while the three
# others answer: that GPU shows hung, the others keep every figure, keys still answer (issue
# 18's fault isolation, as t0812 for status, doctor, watch and serve); the mouse: a click
# selects a holder, the wheel scrolls, m turns it off and on. Every wait is a bounded poll.

load lib
load top

bats_require_minimum_version 1.5.0

H0=GPU-0b000000-0000-4000-8000-000000000000
H1=GPU-0b111111-0000-4000-8000-000000000000
H2=GPU-0b222222-0000-4000-8000-000000000000
H3=GPU-0b333333-0000-4000-8000-000000000000

setup() {
    command -v tmux >/dev/null || skip "tmux is not installed"
    vg_fake_dev >/dev/null
    SOCK=vgtop2-$$-${BATS_TEST_NUMBER:-0}
    SOCKS=("$SOCK")
}

teardown() {
    local s
    for s in "${SOCKS[@]}"; do tmux -L "$s" kill-server 2>/dev/null || true; done
    vg_cleanup
}

# four PID0 PID1 PID2 PID3 [LINES...]: four H100s; GPU i holds i+1 GiB for PIDi (busy), runs at
# 60+i C, draws (300+i*10) W of 700 W with its fan at 40+i %; GPU 3 has no fan (a fanless SXM
# board: NOT_SUPPORTED) and no power reading. Then LINES. FAKE_NVML_SCENARIO names the file.
four() {
    local p=("$1" "$2" "$3" "$4")
    shift 4
    vg_scenario <<EOF2
driver 550.54.15
cuda 12040
gpu index=0 uuid=$H0 name="NVIDIA H100 80GB HBM3" minor=0 bus=00000000:17:00.0 total=80GiB reserved=512MiB util=50 cc=9.0 mig=0 temp=60 power_mw=300000 power_limit_mw=700000 fan=40
gpu index=1 uuid=$H1 name="NVIDIA H100 80GB HBM3" minor=1 bus=00000000:18:00.0 total=80GiB reserved=512MiB util=50 cc=9.0 mig=0 temp=61 power_mw=310000 power_limit_mw=700000 fan=41
gpu index=2 uuid=$H2 name="NVIDIA H100 80GB HBM3" minor=2 bus=00000000:19:00.0 total=80GiB reserved=512MiB util=50 cc=9.0 mig=0 temp=62 power_mw=320000 power_limit_mw=700000 fan=42
gpu index=3 uuid=$H3 name="NVIDIA H100 80GB HBM3" minor=3 bus=00000000:1A:00.0 total=80GiB reserved=512MiB util=50 cc=9.0 mig=0 temp=63 power_limit_mw=700000
proc gpu=0 pid=${p[0]} type=compute mem=1GiB sm=40 exits=1
proc gpu=1 pid=${p[1]} type=compute mem=2GiB sm=41 exits=1
proc gpu=2 pid=${p[2]} type=compute mem=3GiB sm=42 exits=1
proc gpu=3 pid=${p[3]} type=compute mem=4GiB sm=43 exits=1
$(printf '%s\n' "$@")
EOF2
}

# gpu_line I: GPU I's line on the screen.
gpu_line() {
    screen | grep -E "^ +$1 NVIDIA H100" || true
}

# one holder per GPU, each holding its node (P0..P3)
holders() {
    local i
    P=()
    for i in 0 1 2 3; do
        vg_spawn --comm "train$i" --open "$DEVDIR/nvidia$i" -- python train.py >/dev/null
        P+=("$VG_PID")
    done
    four "${P[@]}" "$@"
}

@test "sensors on each GPU line, - where the board gives none; RSS per holder, sortable" {
    holders
    top_start 160 40 -- --sort pid
    wait_screen "fan 40%"
    screen
    [[ $(gpu_line 0) == *" 1.0G/80.0G"*" 60C  300/700W fan 40%"* ]]
    [[ $(gpu_line 2) == *" 3.0G/80.0G"*" 62C  320/700W fan 42%"* ]]
    [[ $(gpu_line 3) == *" 63C    -/700W fan -"* ]]
    screen | grep -qE "RSS +S"
    # the helper's resident set, as /proc says (statm's second field, in pages), in MiB
    local rss
    rss=$(($(cut -d' ' -f2 "/proc/${P[1]}/statm") * $(getconf PAGESIZE) >> 20))
    [[ $(row "${P[1]}") =~ " ${rss}M " ]]
    # sort by RSS: the last key before the wrap (pid -> < -> rss)
    keys '<'
    wait_screen "sort rss"
    # the driver's figures change while top runs: the next sample shows them
    sed 's/temp=60 power_mw=300000/temp=77 power_mw=650000/' "$FAKE_NVML_SCENARIO" >"$FAKE_NVML_SCENARIO.new"
    mv "$FAKE_NVML_SCENARIO.new" "$FAKE_NVML_SCENARIO"
    wait_for "[[ \$(gpu_line 0) == *' 77C  650/700W fan 40%'* ]]"
}

# ddp_job: a launcher (L, a shell as torchrun would be: it holds no GPU) starts four ranks
# (R[0..3]), rank i holding nvidiactl and GPU i's node and listed by the driver on GPU i. The
# processes carry this test's VG_HELPER_TAG, so vg_cleanup ends them.
ddp_job() {
    local i
    _vg_dir || return 1
    VG_HELPER_TAG=$_VG_TAG bash -c 'for i in 0 1 2 3; do
            "$0" --pidfile "$1/rank$i" --open "$2/nvidia$i" --open "$2/nvidiactl" \
                --comm pt_rank --env LOCAL_RANK=$i -- python train.py --local-rank $i &
        done
        wait' "$HELPER" "$_VG_DIR" "$DEVDIR" </dev/null >/dev/null 2>&1 3>&- &
    L=$!
    R=()
    for i in 0 1 2 3; do
        wait_for "[ -s $_VG_DIR/rank$i ]"
        R+=("$(awk '$1 == "main" { print $2 }' "$_VG_DIR/rank$i")")
    done
    four "${R[@]}"
}

@test "tree: a DDP job's four ranks, one per GPU, under their launcher" {
    ddp_job
    top_start 160 40 -- --sort pid
    wait_for "[ -n \"\$(row ${R[3]})\" ]"
    [ -z "$(row "$L")" ] # the launcher holds no GPU: not a holder
    keys t
    wait_screen "launcher (holds no GPU itself): 4 processes of one job"
    screen
    local i lines
    for i in 0 1 2 3; do
        [[ $(row "${R[$i]}") == *" $i "*"$((i + 1)).0G"*'`- '* ]]
    done
    # the launcher's line first, its ranks right under it
    lines=$(screen | grep -nE "^ *($L launcher|${R[0]} |${R[1]} |${R[2]} |${R[3]} )" | cut -d: -f1)
    [ "$(echo "$lines" | head -1)" -eq "$(screen | grep -nF "$L launcher" | cut -d: -f1)" ]
    [ "$(echo "$lines" | awk 'NR > 1 && $1 != prev + 1 { bad = 1 } { prev = $1 } END { print bad + 0 }')" -eq 0 ]
    # Enter on the launcher's line says what it is
    keys Home Enter
    wait_screen "PID $L launched the processes below it; it holds no GPU itself."
}

# hung_one CALL: GPU 1's CALL hangs (60 s, longer than the test) while GPUs 0, 2 and 3 answer.
hung_one() {
    holders "hang func=$1 gpu=1 seconds=60"
    top_start 160 40 -- --sort pid
    wait_screen "HUNG"
    screen
    [[ $(gpu_line 1) == *"HUNG: the driver did not answer for it"* ]]
    [[ $(gpu_line 0) == *" 1.0G/80.0G"*"60C  300/700W fan 40%"* ]]
    [[ $(gpu_line 2) == *" 3.0G/80.0G"*"62C  320/700W fan 42%"* ]]
    [[ $(gpu_line 3) == *" 4.0G/80.0G"*"63C    -/700W fan -"* ]]
    [[ $(row "${P[2]}") == *"3.0G"* ]]
    # keys answer at once while the call hangs, and later samples keep the three GPUs whole
    keys '?'
    wait_screen "Keys of vramguard top"
    keys x
    wait_gone "Keys of vramguard top"
    sleep 2.5
    [[ $(gpu_line 1) == *"HUNG"* ]]
    [[ $(gpu_line 0) == *" 1.0G/80.0G"*"60C"* ]]
    [[ $(gpu_line 3) == *" 4.0G/80.0G"*"63C"* ]]
    keys q
    wait_screen "TOP-EXIT=0"
}

@test "one GPU's memory call hung, three answer: that GPU hung, the others whole, keys answer" {
    hung_one nvmlDeviceGetMemoryInfo_v2
}

@test "one GPU's temperature call hung, three answer: the same" {
    hung_one nvmlDeviceGetTemperature
}

# mouse_report B X Y: an xterm (X10) mouse report at cell X, Y (0-based): ESC [ M, then
# 32 + B (0 button 1 pressed, 3 released, 64 wheel up, 65 wheel down), 32 + X + 1, 32 + Y + 1.
mouse_report() {
    keys -H 1b 5b 4d "$(printf '%x' $((32 + $1)))" "$(printf '%x' $((33 + $2)))" "$(printf '%x' $((33 + $3)))"
}

# click X Y [WHEEL]: a press and its release at X, Y; with WHEEL (64 up, 65 down) a wheel notch.
click() {
    if [[ -n ${3:-} ]]; then
        mouse_report "$3" "$1" "$2"
    else
        mouse_report 0 "$1" "$2"
        mouse_report 3 "$1" "$2"
    fi
}

# line_of PID: the screen line (0-based) of PID's row.
line_of() {
    screen | grep -nE "^ *$1 " | head -1 | cut -d: -f1 | awk '{ print $1 - 1 }'
}

@test "mouse: a click selects a holder, the wheel scrolls, m turns it off and on" {
    holders
    top_start 160 40 -- --sort pid
    wait_for "[ -n \"\$(row ${P[3]})\" ]"
    click 3 "$(line_of "${P[2]}")"
    keys Enter
    wait_screen "PID ${P[2]}  user"
    keys Escape
    wait_gone "Detail (Enter"
    click 3 "$(line_of "${P[0]}")"
    keys Enter
    wait_screen "PID ${P[0]}  user"
    keys Escape
    wait_gone "Detail (Enter"
    # the wheel: three lines down from the first, then back up
    click 3 10 65
    keys Enter
    wait_screen "PID ${P[3]}  user"
    keys Escape
    click 3 10 64
    keys Enter
    wait_screen "PID ${P[0]}  user"
    keys Escape
    keys m
    wait_screen "mouse off"
    keys m
    wait_screen "mouse on"
    keys q
    wait_screen "TOP-EXIT=0"
    lacks "q quit"
}

@test "--no-mouse: clicks are not top's" {
    holders
    top_start 160 40 -- --sort pid --no-mouse
    wait_for "[ -n \"\$(row ${P[3]})\" ]"
    click 3 "$(line_of "${P[2]}")"
    keys Enter
    wait_screen "Detail (Enter"
    screen | grep -qF "PID ${P[0]}  user"
}
