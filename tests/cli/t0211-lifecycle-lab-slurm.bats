#!/usr/bin/env bats
# t0211-lifecycle-lab-slurm: the lifecycle lab's Slurm cases (tests/lifecycles/README.md) on the
# suite's real one-node Slurm (tests/slurm/lib.bash, started once for the file): a batch job
# (sbatch) and a step (srun), running, crashed, a zombie under a stopped batch script or
# slurmstepd, with their slurmstepd killed, and (srun) with its login session hung up. Each test
# compares one case in one state with tests/lifecycles/cases.tsv (see t0209). Skipped, with the
# reason, where Slurm cannot start.

load lib
load clean
load ../slurm/lib
load ../lifecycles/lab

setup_file() {
    vg_slurm_start
}

teardown_file() {
    vg_slurm_stop
}

setup() {
    vg_slurm_require
    lab_setup
}

teardown() {
    lab_teardown
}

@test "lab: sbatch running" {
    lab sbatch running
}

@test "lab: sbatch crash" {
    lab sbatch crash
}

@test "lab: sbatch zombie" {
    lab sbatch zombie
}

@test "lab: sbatch launcher-killed" {
    lab sbatch launcher-killed
}

@test "lab: srun running" {
    lab srun running
}

@test "lab: srun crash" {
    lab srun crash
}

@test "lab: srun zombie" {
    lab srun zombie
}

@test "lab: srun launcher-killed" {
    lab srun launcher-killed
}

@test "lab: srun session-ended" {
    lab srun session-ended
}
