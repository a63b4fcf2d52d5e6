#!/usr/bin/env bats
# t1501-top: `vramguard top` in a real terminal (tmux on a private socket: send-keys,
# capture-pane) on staged hosts of the fake driver and real processes: the screen shows the GPUs,
# their bars by reason and a holder with its finding; sort and filter keys change the list; the
# detail pane; the tree groups a job's workers; 80x24 and 200x50 render and a resize redraws;
# NO_COLOR gives a monochrome screen that still marks severity; a hung driver call keeps keys
# answering and shows the GPU hung; k on a sure leftover shows clean's plan, n leaves it alive,
# y stops it; a nohup job and another user's process are refused with the reason; --read-only
# turns the keys off; q restores the terminal. Every wait is a bounded poll.

load lib
load clean
load top

bats_require_minimum_version 1.5.0

setup() {
    command -v tmux >/dev/null || skip "tmux is not installed"
    vg_fake_dev >/dev/null
    SOCK=vgtop-$$-${BATS_TEST_NUMBER:-0}
    SOCKS=("$SOCK")
}

teardown() {
    local s
    for s in "${SOCKS[@]}"; do tmux -L "$s" kill-server 2>/dev/null || true; done
    clean_teardown
}

# A sure leftover on GPU 0 (an orphaned DataLoader worker of a dead job, idle) and a working job
# on GPU 1 (busy, CPU and GPU), each listed by the driver while it runs.
host() {
    vg_spawn --open "$DEVDIR/nvidia0" --orphan --setsid --comm pt_data_worker -- python train.py >/dev/null
    O=$VG_PID
    vg_spawn --open "$DEVDIR/nvidia1" --busy 50 --env CUDA_VISIBLE_DEVICES=1 -- python serve.py >/dev/null
    J=$VG_PID
    two_gpus "proc gpu=0 pid=$O type=compute mem=5GiB sm=0 exits=1" \
        "proc gpu=1 pid=$J type=compute mem=20GiB sm=60 exits=1" "$@"
}

@test "the screen: GPUs, bars by reason, a holder and its finding; q restores the terminal" {
    host
    top_start 120 30 --
    wait_screen "orphan-holder"
    show_screen=$(screen)
    echo "$show_screen"
    [[ $show_screen == *" 0 NVIDIA A100-SXM4-80GB"* ]]
    [[ $show_screen == *"[OOO"* ]]  # GPU 0's memory: an orphan's
    [[ $show_screen == *"[###"* ]]  # GPU 1's: expected
    [[ $show_screen == *"O orphan"* && $show_screen == *"r reserved"* ]]
    [[ $(row "$O") == *"5.0G"*"!! orphan-holder"* ]]
    [[ $(row "$J") == *"20.0G"*"60"* ]]
    keys q
    wait_screen "TOP-EXIT=0"
    lacks "q quit"
}

@test "sort and filter keys change the list" {
    host
    top_start 120 30 --
    wait_screen "!! orphan-holder"
    # by memory, biggest first: the job above the orphan
    [[ $(screen | grep -nE "^ *($O|$J) " | head -1) == *" $J "* ]]
    keys r
    wait_screen "sort mem^"
    [[ $(screen | grep -nE "^ *($O|$J) " | head -1) == *" $O "* ]]
    keys '<'
    wait_screen "sort gpu^"
    keys r '<' '<'
    wait_screen "sort pid"
    lacks "sort pid\\^"
    # GPU filter: GPU 0 holds only the orphan
    keys g
    wait_screen "gpu=0"
    [ -n "$(row "$O")" ]
    [ -z "$(row "$J")" ]
    keys Escape
    wait_gone "gpu=0"
    [ -n "$(row "$J")" ]
    # text search
    keys / s e r v e Enter
    wait_screen "/serve"
    [ -z "$(row "$O")" ]
    [ -n "$(row "$J")" ]
    keys Escape
    wait_gone "/serve"
    # the finding of the selected holder (the orphan, first by PID)
    keys Home f
    wait_screen "finding=orphan-holder"
    [ -n "$(row "$O")" ]
    [ -z "$(row "$J")" ]
    keys f u
    wait_screen "user=$VG_USER"
}

@test "the detail pane: command, GPU variables, the finding's evidence and fix" {
    host
    top_start 120 40 -- --sort pid
    wait_screen "!! orphan-holder"
    keys Home Enter
    wait_screen "Detail (Enter or Esc"
    screen
    screen | grep -qF "PID $O  user $VG_USER"
    screen | grep -qF "command: "
    screen | grep -qF "orphan-holder (critical, high confidence)"
    screen | grep -qF "fix:"
    screen | grep -qF "seen:"
    keys Escape Down Enter
    wait_screen "PID $J  user $VG_USER"
    screen | grep -qF "environment: CUDA_VISIBLE_DEVICES=1"
}

@test "tree: a job's workers under the process that started them" {
    vg_spawn --open "$DEVDIR/nvidia0" --children 2 --child-comm pt_worker -- torchrun train.py >/dev/null
    M=$VG_PID
    two_gpus "proc gpu=0 pid=$M type=compute mem=4GiB sm=50 exits=1"
    top_start 120 30 -- --sort pid
    wait_screen "q quit"
    wait_for "[ -n \"\$(row ${VG_CHILD_PIDS[1]})\" ]"
    keys t
    wait_screen "sort pid  tree"
    screen
    [[ $(row "${VG_CHILD_PIDS[0]}") == *'`- '* ]]
    [[ $(row "${VG_CHILD_PIDS[1]}") == *'`- '* ]]
    [[ $(row "$M") != *'`- '* ]]
}

@test "80x24 shows a useful screen, 200x50 more columns; a resize redraws" {
    host
    top_start 200 50 --
    wait_screen "!! orphan-holder"
    screen | grep -qF "CONTAINER"
    screen | grep -qF "TIME"
    tmux -L "$SOCK" resize-window -x 80 -y 24
    wait_gone "CONTAINER"
    screen
    [ "$(screen | perl -CSD -ne 'chomp; $n++ if length > 80; END { print $n + 0 }')" -eq 0 ]
    screen | grep -qF "FINDING"
    [[ $(row "$O") == *"!! orphan-holder"* ]]
    screen | grep -qF " 1 A100-SXM4"
    tmux -L "$SOCK" resize-window -x 200 -y 50
    wait_screen "CONTAINER"
}

@test "NO_COLOR: no colour on the screen, severity still marked; --read-only: k and K are off" {
    host
    top_start 120 30 --
    wait_screen "!! orphan-holder"
    screen -e | grep -q $'\e\\[3[1-7]m'
    top_again
    top_start 120 30 NO_COLOR=1 -- --read-only
    wait_screen "!! orphan-holder"
    lacks $'\e\\[3[1-7]m' -e
    screen | grep -qF "[read-only]"
    keys k
    wait_screen "read-only (--read-only): k is off"
    keys K
    wait_screen "read-only (--read-only): K is off"
    alive "$O"
}

@test "a hung driver call: the GPU shows hung, keys still answer" {
    host "hang func=nvmlDeviceGetMemoryInfo_v2 gpu=1 seconds=60"
    top_start 120 30 --
    wait_screen "HUNG"
    keys '?'
    wait_screen "Keys of vramguard top"
    keys x
    wait_gone "Keys of vramguard top"
    keys q
    wait_screen "TOP-EXIT=0"
}

@test "k on a sure leftover: the plan, n leaves it alive, y stops it" {
    host
    O_START=$(vg_stat "$O" starttime)
    top_start 120 30 -- --sort pid
    wait_screen "!! orphan-holder"
    keys Home k
    wait_screen "Stop PID $O?"
    screen | grep -qF "stop:   PID $O  $VG_USER  GPU 0  5.0G"
    screen | grep -qF "why: orphan-holder: 1 leftover process"
    keys n
    wait_screen "nothing stopped"
    alive_as_before "$O" "$O_START"
    keys k
    wait_screen "Stop PID $O?"
    keys y
    wait_for "vg_gone $O"
    wait_screen "PID $O exited after SIGTERM"
    alive_as_before "$J" "$(vg_stat "$J" starttime)"
}

@test "k refuses a nohup job, and another user's process when not root" {
    [ "$(id -u)" -eq 0 ] || skip "needs root to run vramguard as nobody"
    command -v setpriv >/dev/null || skip "setpriv is not installed"
    clean_world
    vg_spawn --open "$DEVDIR/nvidia0" --orphan --setsid --ignore-hup -- python nohup_job.py >/dev/null
    N=$VG_PID
    vg_spawn --open "$DEVDIR/nvidia1" --orphan --setsid --comm pt_data_worker -- python train.py >/dev/null
    O=$VG_PID
    two_gpus "proc gpu=0 pid=$N type=compute mem=3GiB sm=0 exits=1" \
        "proc gpu=1 pid=$O type=compute mem=5GiB sm=0 exits=1"
    top_start 120 30 setpriv --reuid=65534 --regid=65534 --clear-groups -- --sort pid
    wait_for "[ -n \"\$(row $O)\" ]"
    keys Home k
    wait_screen "Stop PID $N?"
    screen
    screen | grep -qE "leave: +PID $N"
    screen | grep -qF "Nothing to stop"
    keys n Down k
    wait_screen "Stop PID $O?"
    screen
    screen | grep -qE "refuse: PID $O  root"
    screen | grep -qF "belongs to root, another user, and you are not root"
    keys y
    alive "$O"
    alive "$N"
}

@test "not a terminal: top says so" {
    run_vg top </dev/null
    [ "$status" -eq 64 ]
    [[ $output == *"needs a terminal"* ]]
}

@test "no per-process samples from the driver (NOT_FOUND): SM% is n/a, not 0, and no allocator-cache" {
    host "error func=nvmlDeviceGetProcessUtilization gpu=1 code=6"
    top_start 120 30 -- --sort pid
    wait_screen "orphan-holder"
    screen
    [[ $(row "$J") =~ 20\.0G\ +n/a\  ]]
    lacks "allocator-cache"
    keys Home Down Enter
    wait_screen "PID $J  user $VG_USER"
    screen | grep -qF "GPU 1: 20.0G (SM n/a)"
}

@test "q while a stop is under way: top waits for its SIGKILL round and says on stderr what it did" {
    # A sure leftover that ignores SIGTERM: only the SIGKILL round, after the grace period,
    # stops it. Before the fix, q left with the stop thread abandoned: no SIGKILL, no word.
    vg_spawn --open "$DEVDIR/nvidia0" --orphan --setsid --ignore-term --comm pt_data_worker \
        -- python train.py >/dev/null
    O=$VG_PID
    vg_spawn --open "$DEVDIR/nvidia1" --busy 50 --env CUDA_VISIBLE_DEVICES=1 -- python serve.py >/dev/null
    J=$VG_PID
    two_gpus "proc gpu=0 pid=$O type=compute mem=5GiB sm=0 exits=1" \
        "proc gpu=1 pid=$J type=compute mem=20GiB sm=60 exits=1"
    top_start 200 40 -- --sort pid
    wait_screen "!! orphan-holder"
    keys Home k
    wait_screen "Stop PID $O?"
    keys y
    wait_screen "SIGKILL after 10s if still there"
    keys q
    wait_screen "vramguard: top: finishing the stop under way"
    # the grace period (10s) and the SIGKILL round, then the last look: bounded
    wait_for "screen -J | grep -qF TOP-EXIT=0" 40
    vg_gone "$O"
    screen -J | grep -qF "vramguard: top: PID $O still running 10.0s after SIGTERM: killed with SIGKILL"
    alive_as_before "$J" "$(vg_stat "$J" starttime)"
}
