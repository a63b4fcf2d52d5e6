#!/usr/bin/env bats
# t0212-lifecycle-lab-terminals: the lifecycle lab's terminal multiplexer cases
# (tests/lifecycles/README.md): a job started with `&` in the interactive shell of a detached tmux
# session and of a detached GNU screen session, running, crashed, with the server
# killed and with the shell exited; the -attach cases the same with a client on a real terminal
# (pty-client.py) that made the session and was detached (tmux detach-client, screen -d).
# Each test compares one case in one state with tests/lifecycles/cases.tsv (see t0209).

load lib
load clean
load ../lifecycles/lab

setup() {
    lab_setup
}

teardown() {
    lab_teardown
}

@test "lab: tmux running" {
    lab tmux running
}

@test "lab: tmux crash" {
    lab tmux crash
}

@test "lab: tmux launcher-killed" {
    lab tmux launcher-killed
}

@test "lab: tmux session-ended" {
    lab tmux session-ended
}

@test "lab: tmux-attach running" {
    lab tmux-attach running
}

@test "lab: tmux-attach crash" {
    lab tmux-attach crash
}

@test "lab: tmux-attach launcher-killed" {
    lab tmux-attach launcher-killed
}

@test "lab: tmux-attach session-ended" {
    lab tmux-attach session-ended
}

@test "lab: screen running" {
    lab screen running
}

@test "lab: screen crash" {
    lab screen crash
}

@test "lab: screen launcher-killed" {
    lab screen launcher-killed
}

@test "lab: screen session-ended" {
    lab screen session-ended
}

@test "lab: screen-attach running" {
    lab screen-attach running
}

@test "lab: screen-attach crash" {
    lab screen-attach crash
}

@test "lab: screen-attach launcher-killed" {
    lab screen-attach launcher-killed
}

@test "lab: screen-attach session-ended" {
    lab screen-attach session-ended
}
