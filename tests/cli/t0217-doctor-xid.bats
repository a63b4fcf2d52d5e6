#!/usr/bin/env bats
# t0217-doctor-xid: the rule xid over a stand-in kernel log (--kmsg FILE, $VRAMGUARD_KMSG) with
# the fake driver: Xid 79 naming a live process is critical and names its Slurm job; Xid 13 is
# only noted; codes reclassified by --xid-fatal; an unreadable log is said, never "no Xid";
# records lost by the ring are said.

load lib
load diag

setup() {
    DEVDIR=$(vg_fake_dev)
    vg_scenario <<'SCEN'
driver 550.54.15
cuda 12040
gpu index=0 uuid=GPU-00000000-0000-0000-0000-000000000000 name="NVIDIA H100 80GB HBM3" minor=0 bus=00000000:17:00.0 total=80GiB
gpu index=1 uuid=GPU-11111111-0000-0000-0000-000000000000 name="NVIDIA H100 80GB HBM3" minor=1 bus=00000000:3B:00.0 total=80GiB
SCEN
    _vg_dir
    KMSG=$_VG_DIR/kmsg
}

# now_us: microseconds since boot, a little ahead (an Xid after the processes started)
now_us() {
    awk '{ printf "%.0f\n", ($1 + 5) * 1000000 }' /proc/uptime
}

@test "xid: Xid 79 naming a live process: critical, with its Slurm job, user and the reboot" {
    vg_spawn --comm python --env SLURM_JOB_ID=4711 -- python train.py
    local pid=$VG_PID ts
    ts=$(now_us)
    printf '6,0,0,-;Linux version\n4,1,%s,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=%s, name=python, GPU has fallen off the bus.\n' \
        "$ts" "$pid" >"$KMSG"
    vgd --json --kmsg "$KMSG" doctor
    show
    [ "$status" -eq 2 ]
    json_ok '.kernel_log.read and (.kernel_log.lost | not)'
    json_ok 'any(.findings[]; .rule == "xid" and .severity == "critical" and .gpus == [1] and .pids == [$p])' \
        --argjson p "$pid"
    json_ok '[.findings[] | select(.rule == "xid")][0].evidence | any(test("Slurm job 4711"))'
    json_ok '[.findings[] | select(.rule == "xid")][0].fix | any(test("reboot"))'
    vgd --kmsg "$KMSG" doctor
    [[ $output == *"CRITICAL xid: GPU 1"* ]]
}

@test "xid: Xid 13 is only noted; --xid-fatal makes it wedged; a bad list is a usage error" {
    printf '4,0,1000000,-;NVRM: Xid (PCI:0000:17:00): 13, pid=%s, name=gone, Graphics SM Warp Exception\n' \
        4194400 >"$KMSG"
    VRAMGUARD_KMSG=$KMSG vgd --json doctor
    show
    json_ok 'any(.findings[]; .rule == "xid" and .severity == "info" and .gpus == [0] and .pids == [])'
    json_ok '[.findings[] | select(.rule == "xid")][0].evidence | any(test("no longer running"))'
    vgd --json --kmsg "$KMSG" doctor --xid-fatal 13,31
    [ "$status" -eq 2 ]
    json_ok 'any(.findings[]; .rule == "xid" and .severity == "critical")'
    vgd --kmsg "$KMSG" doctor --xid-fatal 13,x
    [ "$status" -eq 64 ]
    [[ $stderr == *"--xid-fatal: 'x' is not an Xid code"* ]]
}

@test "xid: an unreadable kernel log is said, never taken as no Xid" {
    vgd --kmsg "$_VG_DIR/no-such-kmsg" doctor
    show
    [[ $output == *"Xid errors: not checked: cannot open"* ]]
    [[ $output != *"No problems found."* ]]
    vgd --json --kmsg "$_VG_DIR/no-such-kmsg" doctor
    json_ok '(.kernel_log.read | not) and (.kernel_log.error | test("cannot open"))'
}

@test "xid: records the ring overwrote are said" {
    printf '6,40,0,-;the ring starts at record 40\n' >"$KMSG"
    vgd --kmsg "$KMSG" doctor
    show
    [[ $output == *"Xid errors: none in the kernel log, which overwrote 40 records"* ]]
    vgd --json --kmsg "$KMSG" doctor
    json_ok '.kernel_log.lost and .kernel_log.lost_records == 40'
}
