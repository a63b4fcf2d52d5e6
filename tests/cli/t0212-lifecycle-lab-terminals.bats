#!/usr/bin/env bats
# t0212-lifecycle-lab-terminals: the lifecycle lab's terminal multiplexer cases
# (tests/lifecycles/README.md): a job started with `&` in the interactive shell of a detached tmux
# session and of a detached GNU screen session, running, crashed, with the server
# killed and with the shell exited. Each test compares one case in one state with
# tests/lifecycles/cases.tsv (see t0209).

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
