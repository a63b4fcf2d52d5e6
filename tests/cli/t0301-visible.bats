#!/usr/bin/env bats
# t0301-visible: `vramguard visible [VALUE]` on a fake host mixing GPU models (and one with MIG):
# which physical GPU a CUDA program sees as cuda:0, cuda:1, ...; the cut at the first entry CUDA
# stops at; duplicates, UUID prefixes, '-1', order differences, --order, --unset, --json, exit
# statuses, and hostile values.

load lib
load diag

# In bus (NVML, nvidia-smi) order: T4 (7.5), H100 (9.0), A100 (8.0), A100 (8.0). CUDA's default
# FASTEST_FIRST numbering: cuda 0 = GPU 1, cuda 1 = GPU 2, cuda 2 = GPU 3, cuda 3 = GPU 0.
# V0 and V1 share the prefix GPU-ab; minor numbers differ from indices on GPUs 2 and 3.
V0=GPU-ab120000-0000-4000-8000-000000000000
V1=GPU-ab340000-0000-4000-8000-000000000000
V2=GPU-c2000000-0000-4000-8000-000000000000
V3=GPU-d3000000-0000-4000-8000-000000000000
M0=MIG-e0000000-0000-4000-8000-000000000000
M1=MIG-e1000000-0000-4000-8000-000000000000

setup() {
    DEVDIR=$(vg_fake_dev)
    vg_scenario <<EOF
driver 550.54.15
gpu index=0 uuid=$V0 name="Tesla T4" minor=0 bus=00000000:07:00.0 total=15GiB cc=7.5
gpu index=1 uuid=$V1 name="NVIDIA H100 80GB HBM3" minor=1 bus=00000000:0F:00.0 total=80GiB cc=9.0
gpu index=2 uuid=$V2 name="NVIDIA A100-SXM4-80GB" minor=3 bus=00000000:47:00.0 total=80GiB cc=8.0
gpu index=3 uuid=$V3 name="NVIDIA A100-SXM4-80GB" minor=2 bus=00000000:4E:00.0 total=80GiB cc=8.0
EOF
}

# devs: the NVML indices of what CUDA sees, in cuda order, comma-separated (from --json output).
devs() {
    json '[.devices[].gpu] | map(tostring) | join(",")'
}

# statuses: each entry's status, comma-separated.
statuses() {
    json '[.entries[].status] | join(",")'
}

@test "unset: every GPU in CUDA's FASTEST_FIRST order, with the ordering caveat" {
    vgd visible --unset
    show
    [ "$status" -eq 0 ]
    [ -z "$stderr" ]
    [ "${lines[0]}" = "CUDA_VISIBLE_DEVICES unset (every GPU), CUDA_DEVICE_ORDER unset (FASTEST_FIRST)" ]
    [[ $output == *"A CUDA program here sees:"* ]]
    [[ $output == *"  cuda:0  GPU 1  NVIDIA H100 80GB HBM3  GPU-ab340000  minor 1"* ]]
    [[ $output == *"  cuda:1  GPU 2  NVIDIA A100-SXM4-80GB  GPU-c2000000  minor 3"* ]]
    [[ $output == *"  cuda:2  GPU 3  NVIDIA A100-SXM4-80GB  GPU-d3000000  minor 2"* ]]
    [[ $output == *"  cuda:3  GPU 0  Tesla T4  GPU-ab120000  minor 0"* ]]
    [[ $output == *"Ordering: this host mixes GPU models"* ]]
    [[ $output == *"  CUDA index 0 = nvidia-smi GPU 1  "* ]]
    [[ $output == *"export CUDA_DEVICE_ORDER=PCI_BUS_ID to make them agree, or use UUIDs."* ]]
    [[ $output != *"Entries:"* && $output != *"Suggested:"* ]]
    # With the variable unset in the shell, no argument means the same.
    vgd visible
    [ "$status" -eq 0 ]
    [[ ${lines[0]} == "CUDA_VISIBLE_DEVICES unset (every GPU)"* ]]
}

@test "unset in JSON: value null, devices in CUDA order, nothing cut or suggested" {
    vgd --json visible --unset
    show
    [ "$status" -eq 0 ]
    [ "$(json .schema)" = vramguard.visible/1 ]
    json_ok '.value == null and .order == null and .effective_order == "FASTEST_FIRST"'
    json_ok '.order_invalid == false and .order_differs_from_nvidia_smi == true'
    [ "$(devs)" = 1,2,3,0 ]
    json_ok '[.devices[].cuda_index] == [0,1,2,3]'
    json_ok '.devices[0] == {"cuda_index": 0, "gpu": 1, "mig_device": null, "uuid": $u, "name": "NVIDIA H100 80GB HBM3", "minor": 1}' \
        --arg u "$V1"
    json_ok '.entries == [] and .cut_at == null and .suggested == null'
}

@test "--order PCI_BUS_ID (or the shell's CUDA_DEVICE_ORDER): nvidia-smi's numbering, no caveat" {
    vgd --json visible --unset --order PCI_BUS_ID
    show
    [ "$status" -eq 0 ]
    [ "$(devs)" = 0,1,2,3 ]
    json_ok '.order == "PCI_BUS_ID" and .effective_order == "PCI_BUS_ID" and .order_differs_from_nvidia_smi == false'
    vgd CUDA_DEVICE_ORDER=PCI_BUS_ID --json visible 0,1
    [ "$status" -eq 0 ]
    [ "$(devs)" = 0,1 ]
    vgd CUDA_DEVICE_ORDER=PCI_BUS_ID visible 0,1
    [[ $output == *"CUDA_DEVICE_ORDER=PCI_BUS_ID"* ]]
    [[ $output != *"Ordering:"* ]]
    # --order wins over the shell's.
    vgd CUDA_DEVICE_ORDER=PCI_BUS_ID --json visible 0,1 --order FASTEST_FIRST
    [ "$(devs)" = 1,2 ]
}

@test "indices mean different GPUs in the two orders" {
    vgd --json visible 0
    show
    [ "$status" -eq 0 ]
    [ "$(devs)" = 1 ]
    json_ok '.entries == [{"text": "0", "status": "ok", "device": {"gpu": 1, "mig_device": null, "uuid": $u, "name": "NVIDIA H100 80GB HBM3", "minor": 1}}]' \
        --arg u "$V1"
    vgd --json visible 0 --order PCI_BUS_ID
    [ "$(devs)" = 0 ]
    vgd --json visible 3,0
    [ "$(devs)" = 0,1 ]
    vgd --json visible --order PCI_BUS_ID 3,0
    [ "$(devs)" = 3,0 ]
    # The text gives the order-proof spelling.
    vgd visible 3,0
    [[ $output == *"By UUID (the same whatever the order): CUDA_VISIBLE_DEVICES=$V0,$V1"* ]]
    [[ $output == *"Ordering: "* ]]
}

@test "the value comes from the shell unless given; --unset ignores both" {
    vgd CUDA_VISIBLE_DEVICES=2 --json visible
    show
    [ "$status" -eq 0 ]
    json_ok '.value == "2"'
    [ "$(devs)" = 3 ]
    vgd CUDA_VISIBLE_DEVICES=2 --json visible 1
    json_ok '.value == "1"'
    [ "$(devs)" = 2 ]
    vgd CUDA_VISIBLE_DEVICES=2 --json visible --unset
    json_ok '.value == null'
    [ "$(devs)" = 1,2,3,0 ]
}

@test "the cut: '0,2,-1,1' stops at -1; later entries are ignored but shown" {
    vgd --json visible 0,2,-1,1
    show
    [ "$status" -eq 1 ]
    [ "$(devs)" = 1,3 ]
    [ "$(statuses)" = ok,ok,negative,after_cut ]
    json_ok '.cut_at == 2 and .entries[3].device == null'
    vgd visible 0,2,-1,1
    [ "$status" -eq 1 ]
    [[ $output == *"  3  '-1'  negative index; CUDA stops reading the list here"* ]]
    [[ $output == *"  4  '1'  ignored: after the entry where CUDA stopped (would be GPU 2  "* ]]
    [[ $output == *"Suggested: export CUDA_VISIBLE_DEVICES=$V1,$V3"* ]]
}

@test "'0,,1': an empty entry cuts the list" {
    vgd --json visible 0,,1
    show
    [ "$status" -eq 1 ]
    [ "$(devs)" = 1 ]
    [ "$(statuses)" = ok,empty,after_cut ]
    json_ok '.cut_at == 1 and .suggested == "\($a),\($b)"' --arg a "$V1" --arg b "$V2"
    for v in "," ",,," "0," ",0"; do
        vgd --json visible "$v"
        if [ "$status" -ne 1 ] || ! json_ok '.cut_at != null'; then
            echo "value '$v'"
            show
            return 1
        fi
    done
}

@test "duplicates cut the list: '1,0,1'" {
    vgd --json visible 1,0,1
    show
    [ "$status" -eq 1 ]
    [ "$(devs)" = 2,1 ]
    [ "$(statuses)" = ok,ok,duplicate ]
    json_ok '.cut_at == 2 and .suggested == "\($a),\($b)"' --arg a "$V2" --arg b "$V1"
    # A UUID naming a GPU an index already named is a duplicate too (after a mixed-form cut).
    vgd --json visible "$V1,${V1:0:8}"
    [ "$status" -eq 1 ]
    [ "$(statuses)" = ok,duplicate ]
}

@test "UUIDs and unique prefixes; ambiguous, unknown and bare prefixes" {
    vgd --json visible "$V3"
    show
    [ "$status" -eq 0 ]
    [ "$(devs)" = 3 ]
    vgd --json visible "GPU-ab3,GPU-c"
    [ "$status" -eq 0 ]
    [ "$(devs)" = 1,2 ]
    vgd --json visible GPU-ab
    [ "$status" -eq 1 ]
    [ "$(statuses)" = ambiguous_uuid ]
    json_ok '.devices == [] and .cut_at == 0'
    for v in GPU- GPU-zzz MIG- "MIG-$V0" "${V0,,}x"; do
        vgd --json visible "$v"
        if [ "$status" -ne 1 ] || [ "$(json '.devices | length')" -ne 0 ]; then
            echo "value '$v'"
            show
            return 1
        fi
    done
    vgd --json visible GPU-zzz
    [ "$(statuses)" = unknown_uuid ]
    vgd --json visible gpu-ab34
    [ "$(statuses)" = bad_index ]
}

@test "a value naming no GPU points at the host's UUIDs, listed in full" {
    vgd visible GPU-ab --order PCI_BUS_ID
    show
    [ "$status" -eq 1 ]
    [[ $output == *"UUID prefix matches several devices; CUDA stops reading the list here"* ]]
    [[ $output == *"Suggested: no entry names a GPU on this host; use the UUIDs below"* ]]
    for u in "$V0" "$V1" "$V2" "$V3"; do
        [[ $output == *"$u"* ]] || { echo "$u not listed"; return 1; }
    done
}

@test "'-1' and '' hide every GPU on purpose (exit 0); '-1,0' is cut at once (exit 1)" {
    for v in -1 ""; do
        vgd --json visible "$v"
        show
        [ "$status" -eq 0 ]
        json_ok '.devices == [] and .suggested == null'
        vgd visible "$v"
        [ "$status" -eq 0 ]
        [[ $output == *"A CUDA program here sees no GPU."* ]]
    done
    vgd --json visible -1,0
    show
    [ "$status" -eq 1 ]
    [ "$(statuses)" = negative,after_cut ]
    json_ok '.devices == [] and .cut_at == 0'
    vgd --json visible 0,-1
    [ "$status" -eq 1 ]
    [ "$(devs)" = 1 ]
    # A negative value as an argument is the value, not an option.
    vgd --json visible --order PCI_BUS_ID -1,0
    [ "$status" -eq 1 ]
    json_ok '.value == "-1,0" and .order == "PCI_BUS_ID"'
    vgd --json visible -- -x
    json_ok '.value == "-x"'
    [ "$(statuses)" = bad_index ]
}

@test "'--' ends the options: what follows is the value, even when it looks like an option" {
    vgd CUDA_VISIBLE_DEVICES=2 --json visible --
    show
    [ "$status" -eq 0 ]
    json_ok '.value == "2"'
    vgd --json visible --order PCI_BUS_ID -- -1
    [ "$status" -eq 0 ]
    json_ok '.value == "-1" and .order == "PCI_BUS_ID"'
    vgd visible -- --json
    [ "$status" -eq 1 ]
    [[ ${lines[0]} == "CUDA_VISIBLE_DEVICES='--json', "* ]]
    vgd visible -- 0 1
    [ "$status" -eq 64 ]
    [[ $stderr == *"one value at a time; unexpected '1'"* ]]
}

@test "blanks around entries are ignored" {
    vgd --json visible " 0, 1"
    show
    [ "$status" -eq 0 ]
    [ "$(devs)" = 1,2 ]
    json_ok '[.entries[].text] == ["0", "1"]'
    vgd --json visible $'\t2 ,\n3 '
    [ "$status" -eq 0 ]
    [ "$(devs)" = 3,0 ]
}

@test "mixing indices and UUIDs stops at the first entry of the other form" {
    vgd --json visible "0,$V2"
    show
    [ "$status" -eq 1 ]
    [ "$(statuses)" = ok,mixed ]
    [ "$(devs)" = 1 ]
    vgd --json visible "$V2,0,1"
    [ "$status" -eq 1 ]
    [ "$(statuses)" = ok,mixed,after_cut ]
    [ "$(devs)" = 2 ]
}

@test "an unknown CUDA_DEVICE_ORDER: FASTEST_FIRST applies, exit 1" {
    vgd --json visible 0 --order bus
    show
    [ "$status" -eq 1 ]
    json_ok '.order == "bus" and .order_invalid and .effective_order == "FASTEST_FIRST"'
    [ "$(devs)" = 1 ]
    vgd CUDA_DEVICE_ORDER=pci_bus_id visible 0
    [ "$status" -eq 1 ]
    [[ ${lines[0]} == *"CUDA_DEVICE_ORDER=pci_bus_id (not a value CUDA knows: FASTEST_FIRST applies)" ]]
}

@test "MIG: a MIG UUID names that device; a second MIG device is ignored, not a cut" {
    vg_scenario <<EOF
gpu index=0 uuid=$V0 name="Tesla T4" minor=0 bus=00000000:07:00.0 total=15GiB cc=7.5
gpu index=1 uuid=$V1 name="NVIDIA A100-SXM4-80GB" minor=1 bus=00000000:0F:00.0 total=80GiB cc=8.0 mig=1
mig parent=1 index=0 uuid=$M0 name="NVIDIA A100-SXM4-80GB MIG 3g.40gb" gi=1 ci=0 total=40GiB
mig parent=1 index=1 uuid=$M1 name="NVIDIA A100-SXM4-80GB MIG 1g.10gb" gi=7 ci=0 total=10GiB
EOF
    vgd --json visible "$M1"
    show
    [ "$status" -eq 0 ]
    json_ok '.devices == [{"cuda_index": 0, "gpu": 1, "mig_device": 1, "uuid": $u, "name": "NVIDIA A100-SXM4-80GB MIG 1g.10gb", "minor": 1}]' \
        --arg u "$M1"
    vgd --json visible "$M1,$M0"
    [ "$status" -eq 1 ]
    [ "$(statuses)" = ok,extra_mig ]
    json_ok '.cut_at == null and (.devices | length) == 1 and .suggested == $u' --arg u "$M1"
    # The GPU in MIG mode named by index stands for its first MIG device.
    vgd --json visible 0
    [ "$(json '.devices[0].mig_device')" = 0 ]
    vgd visible "${M1:0:6}"
    [ "$status" -eq 0 ]
    [[ $output == *"cuda:0  GPU 1 MIG 1  NVIDIA A100-SXM4-80GB MIG 1g.10gb  MIG-e1000000"* ]]
}

@test "hostile values: very long, control characters, bytes that are not UTF-8" {
    vg_require_jq
    long=$(printf '0,%.0s' {1..20000})
    vgd --json visible "${long%,}"
    [ "$status" -eq 1 ]
    [ "$(json '.entries | length')" -eq 20000 ]
    json_ok '.cut_at == 1 and (.devices | length) == 1'
    vgd visible "${long%,}"
    [ "$status" -eq 1 ]
    # The echoed value is cut short; every entry is still accounted for.
    [ "${#lines[0]}" -lt 400 ]
    [[ $output == *"  20000  '0'  ignored"* ]]
    nines=$(printf '9%.0s' {1..50000})
    vgd --json visible "$nines"
    [ "$status" -eq 1 ]
    [ "$(statuses)" = bad_index ]
    vgd --json visible "GPU-$(printf 'a%.0s' {1..50000})"
    [ "$status" -eq 1 ]
    [ "$(statuses)" = unknown_uuid ]
    vgd --json visible $'1,\e[31m,\x01\xff\xfe'
    [ "$status" -eq 1 ]
    jq -e . <<<"$output" >/dev/null
    json_ok '.entries[1].text == "\u001b[31m" and (.entries[2].text | contains("\ufffd"))'
    vgd visible $'1,\e[31m,\x01\xff\xfe'
    [ "$status" -eq 1 ]
    no_raw_controls
}

@test "exit statuses: 3 without a driver, 64 for bad usage" {
    unset FAKE_NVML_SCENARIO
    vgd visible 0
    show
    [ "$status" -eq 3 ]
    [ -z "$output" ]
    [[ $stderr == "vramguard: visible: cannot resolve without the driver's list of GPUs: "* ]]
    vg_scenario </dev/null
    for args in "--bogus" "0 1" "--order" "-z" "--unset=1"; do
        # shellcheck disable=SC2086 # split on purpose
        vgd visible $args
        if [ "$status" -ne 64 ] || [ -n "$output" ] || [[ $stderr != "vramguard: visible: "* ]]; then
            echo "visible $args"
            show
            return 1
        fi
    done
    vgd visible --help
    [ "$status" -eq 0 ]
    [[ ${lines[0]} == "usage: vramguard visible [VALUE] [--order ORDER] [--unset]" ]]
}
