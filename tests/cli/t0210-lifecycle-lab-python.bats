#!/usr/bin/env bats
# t0210-lifecycle-lab-python: the lifecycle lab's Python and container cases
# (tests/lifecycles/README.md): multiprocessing pools with fork, spawn and forkserver,
# concurrent.futures, a real Jupyter kernel started by jupyter_client, an unshare PID namespace
# and a real rootful podman container.
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

@test "lab: mp-fork running" {
    lab mp-fork running
}

@test "lab: mp-fork crash" {
    lab mp-fork crash
}

@test "lab: mp-fork zombie" {
    lab mp-fork zombie
}

@test "lab: mp-fork launcher-killed" {
    lab mp-fork launcher-killed
}

@test "lab: mp-fork session-ended" {
    lab mp-fork session-ended
}

@test "lab: futures running" {
    lab futures running
}

@test "lab: futures crash" {
    lab futures crash
}

@test "lab: futures zombie" {
    lab futures zombie
}

@test "lab: futures launcher-killed" {
    lab futures launcher-killed
}

@test "lab: futures session-ended" {
    lab futures session-ended
}

@test "lab: mp-spawn running" {
    lab mp-spawn running
}

@test "lab: mp-spawn crash" {
    lab mp-spawn crash
}

@test "lab: mp-spawn zombie" {
    lab mp-spawn zombie
}

@test "lab: mp-spawn launcher-killed" {
    lab mp-spawn launcher-killed
}

@test "lab: mp-spawn session-ended" {
    lab mp-spawn session-ended
}

@test "lab: mp-forkserver running" {
    lab mp-forkserver running
}

@test "lab: mp-forkserver crash" {
    lab mp-forkserver crash
}

@test "lab: mp-forkserver zombie" {
    lab mp-forkserver zombie
}

@test "lab: mp-forkserver launcher-killed" {
    lab mp-forkserver launcher-killed
}

@test "lab: mp-forkserver session-ended" {
    lab mp-forkserver session-ended
}

@test "lab: jupyter running" {
    lab jupyter running
}

@test "lab: jupyter crash" {
    lab jupyter crash
}

@test "lab: jupyter zombie" {
    lab jupyter zombie
}

@test "lab: jupyter launcher-killed" {
    lab jupyter launcher-killed
}

@test "lab: jupyter session-ended" {
    lab jupyter session-ended
}

@test "lab: unshare running" {
    lab unshare running
}

@test "lab: unshare crash" {
    lab unshare crash
}

@test "lab: unshare zombie" {
    lab unshare zombie
}

@test "lab: unshare launcher-killed" {
    lab unshare launcher-killed
}

@test "lab: unshare session-ended" {
    lab unshare session-ended
}

@test "lab: podman running" {
    lab podman running
}

@test "lab: podman crash" {
    lab podman crash
}

@test "lab: podman zombie" {
    lab podman zombie
}

@test "lab: podman launcher-killed" {
    lab podman launcher-killed
}
