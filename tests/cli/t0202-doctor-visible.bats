#!/usr/bin/env bats
# t0202-doctor-visible: the rules about what a process (or this shell) was allowed to see:
# outside-visible, invalid-visible and order-mismatch. Processes carry their variables in the
# exec-time environment (vg-helper --env); the shell's are set per call (leading NAME=VALUE words of vgd) and otherwise
# always removed, whatever the runner's environment holds.

load lib
load diag

setup() {
    DEVDIR=$(vg_fake_dev)
}

# The container test's cgroup goes once its processes are gone, whatever failed.
teardown() {
    vg_cleanup
    if [[ -n ${dir:-} && -d $dir ]]; then rmdir "$dir" 2>/dev/null || true; fi
}

# A host mixing GPU models, in bus order T4 (7.5), H100 (9.0), A100 (8.0): CUDA's default
# FASTEST_FIRST numbering is H100, A100, T4, i.e. CUDA's device 0 is nvidia-smi's GPU 1.
H0=GPU-7e570000-0000-4000-8000-000000000000
H1=GPU-a1000000-0000-4000-8000-000000000000
H2=GPU-b2000000-0000-4000-8000-000000000000
heterogeneous_host() {
    vg_scenario <<EOF
driver 550.54.15
gpu index=0 uuid=$H0 name="Tesla T4" minor=0 bus=00000000:07:00.0 total=15GiB reserved=256MiB used=auto util=0 cc=7.5
gpu index=1 uuid=$H1 name="NVIDIA H100 80GB HBM3" minor=1 bus=00000000:0F:00.0 total=80GiB reserved=512MiB used=auto util=0 cc=9.0
gpu index=2 uuid=$H2 name="NVIDIA A100-SXM4-80GB" minor=2 bus=00000000:47:00.0 total=80GiB reserved=512MiB used=auto util=0 cc=8.0
$(printf '%s\n' "$@")
EOF
}

# ---------------------------------------------------------------------------- outside-visible

@test "outside-visible: memory on a GPU the index value excludes, on that GPU and PID" {
    vg_spawn --open "$(dev 2)" --open "$(dev 0)" --env CUDA_VISIBLE_DEVICES=2
    P=$VG_PID
    homogeneous_host "proc gpu=2 pid=$P type=compute mem=20GiB" \
        "proc gpu=0 pid=$P type=compute mem=6GiB"
    vgd --json doctor
    show
    [ "$status" -eq 1 ]
    [ "$(rules_fired)" = outside-visible ]
    [ "$(nfind outside-visible)" -eq 1 ]
    finding_is outside-visible '[0]' "[$P]"
    json_ok '.findings[0] | .severity == "warning" and .memory == 6442450944'
    json_ok '.findings[0].gpu_uuids == [$u]' --arg u "$U0"
    json_ok '.findings[0].title | contains("outside its CUDA_VISIBLE_DEVICES='"'"'2'"'"'")'
    json_ok '.findings[0].evidence | any(contains("allows 1 GPU, not this one"))'
    # The exec-time caveat: a value set later inside the program is invisible here.
    json_ok '.findings[0].evidence | any(contains($e))' \
        --arg e "/proc/$P/environ shows the environment the process was started with"
    json_ok '.findings[0].fix | any(contains("before importing torch"))'
    vgd doctor
    [[ $output == *"GPU 0  NVIDIA A100-SXM4-80GB"*"why:  outside-visible (PID $P)"* ]]
    [[ $output == *"WARNING outside-visible: "*"  GPU: 0   PID: $P"* ]]
}

@test "outside-visible: a context-sized stray outside the value is reported once, not also as stray-contexts" {
    vg_spawn --open "$(dev 1)" --open "$(dev 3)" --env CUDA_VISIBLE_DEVICES="$U1"
    P=$VG_PID
    homogeneous_host "proc gpu=1 pid=$P type=compute mem=20GiB" \
        "proc gpu=3 pid=$P type=compute mem=500MiB"
    vgd --json doctor
    show
    [ "$status" -eq 1 ]
    [ "$(rules_fired)" = outside-visible ]
    finding_is outside-visible '[3]' "[$P]"
    json_ok '.findings[0].memory == 524288000'
}

@test "outside-visible: '-1' hides every GPU, so any memory is outside it" {
    vg_spawn --open "$(dev 0)" --env CUDA_VISIBLE_DEVICES=-1
    P=$VG_PID
    homogeneous_host "proc gpu=0 pid=$P type=compute mem=300MiB"
    vgd --json doctor
    show
    [ "$status" -eq 1 ]
    [ "$(rules_fired)" = outside-visible ]
    finding_is outside-visible '[0]' "[$P]"
    json_ok '.findings[0].evidence | any(contains("allows 0 GPUs"))'
}

@test "outside-visible near miss: CUDA_VISIBLE_DEVICES set and only allowed GPUs held" {
    vg_spawn --open "$(dev 1)" --open "$(dev 3)" --env CUDA_VISIBLE_DEVICES=1,3
    P=$VG_PID
    vg_spawn --open "$(dev 2)" --env CUDA_VISIBLE_DEVICES=" ${U2:0:12} "
    Q=$VG_PID
    homogeneous_host "proc gpu=1 pid=$P type=compute mem=20GiB" \
        "proc gpu=3 pid=$P type=compute mem=18GiB" \
        "proc gpu=2 pid=$Q type=compute mem=400MiB"
    vgd --json doctor
    show
    [ "$status" -eq 0 ]
    json_ok '.findings == []'
}

@test "outside-visible near miss: unset variable, or only the device node outside the value" {
    vg_spawn --open "$(dev 0)" --open "$(dev 1)"
    P=$VG_PID
    # Holds GPU 2's device node (a worker's inherited fd) but has no context there.
    vg_spawn --open "$(dev 3)" --open "$(dev 2)" --env CUDA_VISIBLE_DEVICES=3
    Q=$VG_PID
    homogeneous_host "proc gpu=0 pid=$P type=compute mem=20GiB" \
        "proc gpu=1 pid=$P type=compute mem=20GiB" \
        "proc gpu=3 pid=$Q type=compute mem=9GiB"
    vgd --json doctor
    show
    [ "$status" -eq 0 ]
    json_ok '.findings == []'
}

@test "outside-visible follows CUDA's FASTEST_FIRST numbering on a mixed host" {
    # CUDA_VISIBLE_DEVICES=0 means the H100 (nvidia-smi's GPU 1) to CUDA here.
    vg_spawn --open "$DEVDIR/nvidia0" --env CUDA_VISIBLE_DEVICES=0
    P=$VG_PID
    vg_spawn --open "$DEVDIR/nvidia1" --env CUDA_VISIBLE_DEVICES=0
    Q=$VG_PID
    heterogeneous_host "proc gpu=0 pid=$P type=compute mem=10GiB" \
        "proc gpu=1 pid=$Q type=compute mem=40GiB"
    vgd --json doctor --no-shell
    show
    [ "$status" -eq 1 ]
    [ "$(nfind outside-visible)" -eq 1 ]
    finding_is outside-visible '[0]' "[$P]"
    # Both pick by index without PCI_BUS_ID on a mixed host.
    [ "$(nfind order-mismatch)" -eq 2 ]
    finding_is order-mismatch '[]' "[$P]"
    finding_is order-mismatch '[]' "[$Q]"
}

@test "outside-visible near miss: with CUDA_DEVICE_ORDER=PCI_BUS_ID index 0 is nvidia-smi's GPU 0" {
    vg_spawn --open "$DEVDIR/nvidia0" --env CUDA_VISIBLE_DEVICES=0 --env CUDA_DEVICE_ORDER=PCI_BUS_ID
    P=$VG_PID
    heterogeneous_host "proc gpu=0 pid=$P type=compute mem=10GiB"
    vgd --json doctor --no-shell
    show
    [ "$status" -eq 0 ]
    json_ok '.findings == []'
}

# ---------------------------------------------------------------------------- invalid-visible

@test "invalid-visible: a process started with '0,,1' (CUDA stops at the empty entry)" {
    vg_spawn --open "$(dev 0)" --open "$(dev 1)" --env CUDA_VISIBLE_DEVICES=0,,1
    P=$VG_PID
    homogeneous_host "proc gpu=0 pid=$P type=compute mem=20GiB"
    vgd --json doctor
    show
    [ "$status" -eq 1 ]
    [ "$(rules_fired)" = invalid-visible ]
    [ "$(nfind invalid-visible)" -eq 1 ]
    finding_is invalid-visible '[]' "[$P]"
    json_ok '.findings[0].severity == "warning"'
    json_ok '.findings[0].evidence | any(. == "its value: entry 2 '"''"': empty entry; CUDA stops reading the list here")'
    json_ok '.findings[0].evidence | any(. == "its value: CUDA sees 1 GPU; 1 later entry is ignored")'
    json_ok '.findings[0].fix[0] == "export CUDA_VISIBLE_DEVICES=\($a),\($b)"' --arg a "$U0" --arg b "$U1"
}

@test "invalid-visible: one finding per process however many GPUs it holds" {
    vg_spawn --open "$(dev 0)" --open "$(dev 1)" --env CUDA_VISIBLE_DEVICES=1,0,1
    P=$VG_PID
    homogeneous_host "proc gpu=0 pid=$P type=compute mem=20GiB" \
        "proc gpu=1 pid=$P type=compute mem=20GiB"
    vgd --json doctor
    show
    [ "$(nfind invalid-visible)" -eq 1 ]
    finding_is invalid-visible '[]' "[$P]"
    json_ok '.findings[0].evidence | any(contains("entry 3 '"'1'"': duplicate; CUDA stops"))'
    json_ok '.findings[0].fix[0] == "export CUDA_VISIBLE_DEVICES=\($a),\($b)"' --arg a "$U1" --arg b "$U0"
}

@test "invalid-visible: this shell's value, with the corrected value; --no-shell skips it" {
    homogeneous_host
    vgd CUDA_VISIBLE_DEVICES=1,7 --json doctor
    show
    [ "$status" -eq 1 ]
    [ "$(rules_fired)" = invalid-visible ]
    finding_is invalid-visible '[]' '[]'
    json_ok '.findings[0].title == "CUDA_VISIBLE_DEVICES='"'1,7'"' in this shell has an entry CUDA stops at"'
    json_ok '.findings[0].evidence | any(. == "this shell: entry 2 '"'7'"': no such GPU index; CUDA stops reading the list here")'
    json_ok '.findings[0].fix[0] == "export CUDA_VISIBLE_DEVICES=\($u)"' --arg u "$U1"
    vgd CUDA_VISIBLE_DEVICES=1,7 --json doctor --no-shell
    [ "$status" -eq 0 ]
    json_ok '.findings == []'
    # The text names the shell and the fix.
    vgd CUDA_VISIBLE_DEVICES=1,7 doctor
    [[ $output == *"WARNING invalid-visible: CUDA_VISIBLE_DEVICES='1,7' in this shell"* ]]
    [[ $output == *"    - export CUDA_VISIBLE_DEVICES=$U1"* ]]
}

@test "invalid-visible: unknown UUIDs, a bare 'GPU-', mixed forms, '-1,0'" {
    homogeneous_host
    for v in GPU-zzz GPU- "0,$U1" "$U1,0" "-1,0" "0,-1" "a" "0x1" "1,9999999999999999999999"; do
        vgd CUDA_VISIBLE_DEVICES="$v" --json doctor
        if [ "$status" -ne 1 ] || [ "$(rules_fired)" != invalid-visible ]; then
            echo "value '$v':"
            show
            return 1
        fi
    done
    vgd CUDA_VISIBLE_DEVICES=GPU-zzz --json doctor
    json_ok '.findings[0].fix[0] | startswith("no entry names a GPU on this host")'
    vgd CUDA_VISIBLE_DEVICES="0,$U1" --json doctor
    json_ok '.findings[0].evidence | any(contains("mixes indices and UUIDs"))'
}

@test "invalid-visible near miss: valid values, '', '-1', blanks and UUID prefixes" {
    homogeneous_host
    for v in "" "-1" "0" " 0, 1" "3,2,1,0" "${U2:0:8}" "$U3,$U0" "	1	"; do
        vgd CUDA_VISIBLE_DEVICES="$v" --json doctor
        if [ "$status" -ne 0 ] || ! json_ok '.findings == []'; then
            echo "value '$v':"
            show
            return 1
        fi
    done
    vg_spawn --open "$(dev 1)" --env CUDA_VISIBLE_DEVICES=" 1 "
    homogeneous_host "proc gpu=1 pid=$VG_PID type=compute mem=20GiB"
    vgd --json doctor
    [ "$status" -eq 0 ]
    json_ok '.findings == []'
}

# ----------------------------------------------------------------------------- order-mismatch

@test "order-mismatch: this shell on a mixed host without CUDA_DEVICE_ORDER (info, exit 0)" {
    heterogeneous_host
    vgd --json doctor
    show
    [ "$status" -eq 0 ]
    [ "$(rules_fired)" = order-mismatch ]
    finding_is order-mismatch '[]' '[]'
    json_ok '.findings[0].severity == "info"'
    json_ok '.summary == {"critical": 0, "warning": 0, "info": 1}'
    json_ok '.findings[0].title | contains("CUDA_DEVICE_ORDER is unset in this shell")'
    json_ok '.findings[0].evidence | any(startswith("CUDA'"'"'s device 0 is GPU 1 (NVIDIA H100 80GB HBM3"))'
    json_ok '.findings[0].evidence | any(startswith("CUDA'"'"'s device 2 is GPU 0 (Tesla T4"))'
    json_ok '.findings[0].fix[0] | startswith("export CUDA_DEVICE_ORDER=PCI_BUS_ID")'
    vgd doctor
    [ "$status" -eq 0 ]
    [[ $output == *"INFO order-mismatch: "* ]]
    [[ $output == *"1 finding: 0 critical, 0 warnings, 1 info."* ]]
}

@test "order-mismatch: this shell picks GPUs by index on a mixed host (warning)" {
    heterogeneous_host
    vgd CUDA_VISIBLE_DEVICES=0 --json doctor
    show
    [ "$status" -eq 1 ]
    [ "$(rules_fired)" = order-mismatch ]
    json_ok '.findings[0].severity == "warning"'
    json_ok '.findings[0].evidence | any(contains("this shell'"'"'s CUDA_VISIBLE_DEVICES='"'0'"' uses indices"))'
    # An explicit FASTEST_FIRST is the same numbering.
    vgd CUDA_VISIBLE_DEVICES=1 CUDA_DEVICE_ORDER=FASTEST_FIRST --json doctor
    [ "$status" -eq 1 ]
    [ "$(rules_fired)" = order-mismatch ]
    json_ok '.findings[0].title | contains("CUDA_DEVICE_ORDER is not PCI_BUS_ID in this shell")'
    # UUIDs mean the same GPU whatever the order: the caveat stays informational.
    vgd CUDA_VISIBLE_DEVICES="$H0" --json doctor
    [ "$status" -eq 0 ]
    [ "$(rules_fired)" = order-mismatch ]
    json_ok '.findings[0].severity == "info"'
}

@test "order-mismatch near miss: PCI_BUS_ID in the shell, or --no-shell" {
    heterogeneous_host
    vgd CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=0 --json doctor
    show
    [ "$status" -eq 0 ]
    json_ok '.findings == []'
    vgd CUDA_VISIBLE_DEVICES=0 --json doctor --no-shell
    [ "$status" -eq 0 ]
    json_ok '.findings == []'
}

@test "order-mismatch: a process picking GPUs by index without PCI_BUS_ID, on that PID" {
    vg_spawn --open "$DEVDIR/nvidia1" --env CUDA_VISIBLE_DEVICES=0
    P=$VG_PID
    vg_spawn --open "$DEVDIR/nvidia2" --env CUDA_VISIBLE_DEVICES="$H2"
    Q=$VG_PID
    vg_spawn --open "$DEVDIR/nvidia0" --env CUDA_VISIBLE_DEVICES=0 --env CUDA_DEVICE_ORDER=PCI_BUS_ID
    R=$VG_PID
    vg_spawn --open "$DEVDIR/nvidia1" --open "$DEVDIR/nvidia2"
    S=$VG_PID
    heterogeneous_host "proc gpu=1 pid=$P type=compute mem=40GiB" \
        "proc gpu=2 pid=$Q type=compute mem=40GiB" \
        "proc gpu=0 pid=$R type=compute mem=10GiB" \
        "proc gpu=1 pid=$S type=compute mem=20GiB" \
        "proc gpu=2 pid=$S type=compute mem=20GiB"
    vgd --json doctor --no-shell
    show
    [ "$status" -eq 1 ]
    [ "$(rules_fired)" = order-mismatch ]
    [ "$(nfind order-mismatch)" -eq 1 ]
    finding_is order-mismatch '[]' "[$P]"
    json_ok '.findings[0].severity == "warning"'
    json_ok '.findings[0].title | contains("CUDA_VISIBLE_DEVICES='"'0'"'")'
}

@test "order-mismatch near miss: homogeneous GPUs and no CUDA_DEVICE_ORDER anywhere" {
    vg_spawn --open "$(dev 1)" --env CUDA_VISIBLE_DEVICES=1
    P=$VG_PID
    homogeneous_host "proc gpu=1 pid=$P type=compute mem=20GiB"
    vgd CUDA_VISIBLE_DEVICES=2,3 --json doctor
    show
    [ "$status" -eq 0 ]
    json_ok '.findings == []'
    vgd --json doctor
    [ "$status" -eq 0 ]
    json_ok '.findings == []'
}

@test "order-mismatch near miss: models differ but CUDA's order equals the bus order" {
    vg_spawn --open "$DEVDIR/nvidia0" --env CUDA_VISIBLE_DEVICES=0
    P=$VG_PID
    # Same compute capability: FASTEST_FIRST keeps bus order. Then fastest already first.
    vg_scenario <<EOF
gpu index=0 uuid=$H0 name="NVIDIA A100-SXM4-40GB" minor=0 bus=00000000:07:00.0 total=40GiB reserved=512MiB used=auto cc=8.0
gpu index=1 uuid=$H1 name="NVIDIA A100-SXM4-80GB" minor=1 bus=00000000:0F:00.0 total=80GiB reserved=512MiB used=auto cc=8.0
proc gpu=0 pid=$P type=compute mem=20GiB
EOF
    vgd CUDA_VISIBLE_DEVICES=1 --json doctor
    show
    [ "$status" -eq 0 ]
    json_ok '.findings == []'
    vg_scenario <<EOF
gpu index=0 uuid=$H1 name="NVIDIA H100 80GB HBM3" minor=0 bus=00000000:07:00.0 total=80GiB reserved=512MiB used=auto cc=9.0
gpu index=1 uuid=$H0 name="Tesla T4" minor=1 bus=00000000:0F:00.0 total=15GiB reserved=256MiB used=auto cc=7.5
proc gpu=0 pid=$P type=compute mem=20GiB
EOF
    vgd CUDA_VISIBLE_DEVICES=1 --json doctor
    show
    [ "$status" -eq 0 ]
    json_ok '.findings == []'
}

@test "outside-visible in a container: CUDA numbers the GPUs it was given in bus order, not the variable's" {
    [[ $(id -u) -eq 0 ]] || skip "needs root to make a cgroup"
    cg=/sys/fs/cgroup/unified
    [[ -w $cg/cgroup.procs ]] || skip "no writable cgroup2 hierarchy at $cg"
    cid=$(printf '%064x' $((RANDOM * 32768 + RANDOM)))
    dir=$cg/docker-$cid.scope
    mkdir "$dir"
    # given GPU 3 and GPU 1, in that order; CUDA_VISIBLE_DEVICES=0 is GPU 1 (bus order first)
    for on in 1 3; do
        vg_spawn --open "$(dev "$on")" --env "NVIDIA_VISIBLE_DEVICES=$U3,$U1" \
            --env CUDA_VISIBLE_DEVICES=0 -- python train.py
        eval "P$on=\$VG_PID"
        echo "$VG_PID" >"$dir/cgroup.procs"
    done
    homogeneous_host "proc gpu=1 pid=$P1 type=compute mem=4GiB" "proc gpu=3 pid=$P3 type=compute mem=4GiB"
    vgd --json doctor
    show
    # move them out before anything can fail, so the cgroup can go
    for p in "$P1" "$P3"; do echo "$p" >"$cg/cgroup.procs"; done
    rmdir "$dir"
    [ "$(rules_fired)" = outside-visible ]
    finding_is outside-visible '[3]' "[$P3]"
    json_ok '.findings[0].evidence | any(startswith("it runs in container \($c), which was given GPU 1 and GPU 3") and contains("CUDA_VISIBLE_DEVICES=0 gives cuda:0 = GPU 1"))' \
        --arg c "${cid:0:12}"
}
