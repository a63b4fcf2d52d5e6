#!/usr/bin/env bats
# t1713-json-schema: every command's JSON document against its schema in docs/schema/ (JSON
# Schema 2020-12, validated by tests/json-schema-check with python3-jsonschema), on a staged
# host: the fake driver with a MIG GPU, a GPU whose memory call fails and one it lists without
# figures, real processes holding device nodes (one a leftover of a job that ended, one by a
# memory mapping alone), a PID only the driver reports; and again without a driver. The schemas
# are strict (every field required, no other field allowed), so a field removed or renamed
# fails: checked by removing and renaming each top-level field of each document, and a few
# deeper ones. Every field a schema names is in docs/json.md.

load lib

bats_require_minimum_version 1.5.0

SCHEMAS=$ROOT/docs/schema
CHECK=$ROOT/tests/json-schema-check

setup() {
    python3 -c 'import jsonschema' 2>/dev/null ||
        skip "python3-jsonschema is missing (scripts/install-deps --test installs it)"
    vg_require_jq
    TMP=$(vg_tmpdir)
    DEVDIR=$(vg_fake_dev)
    export VRAMGUARD_RUNTIME_DIR=$TMP/locks
    DOCS=$TMP/docs
    mkdir -p "$DOCS"
}

# stage: real holders and a scenario that names them.
stage() {
    vg_spawn --open "$DEVDIR/nvidia0" --comm trainer -- python train.py >/dev/null
    local holder=$VG_PID
    vg_spawn --orphan --open "$DEVDIR/nvidia1" --comm worker -- python dataloader >/dev/null
    local orphan=$VG_ORPHAN_PID
    # a worker holding GPU 1's node by a memory mapping alone (seen_by "map")
    vg_spawn --map "$DEVDIR/nvidia1" --comm mapper -- python worker >/dev/null
    vg_scenario <<EOF
driver 550.54.15
nvml 12.550.54.15
cuda 12040
gpu index=0 uuid=GPU-00000000-0000-4000-8000-000000000000 name="NVIDIA A100-SXM4-80GB" minor=0 bus=00000000:07:00.0 total=80GiB reserved=512MiB util=37 mem_util=12 cc=8.0 persistence=1 compute_mode=0 mig=0
gpu index=1 uuid=GPU-11111111-1111-4111-8111-111111111111 name="NVIDIA H100 80GB HBM3" minor=1 bus=00000000:0F:00.0 total=80GiB reserved=512MiB util=0 cc=9.0 persistence=1 compute_mode=0 mig=0
gpu index=2 uuid=GPU-22222222-2222-4222-8222-222222222222 name="NVIDIA A100-SXM4-80GB" minor=2 bus=00000000:47:00.0 total=80GiB reserved=512MiB util=0 cc=8.0 persistence=1 compute_mode=0 mig=1
mig parent=2 index=0 uuid=MIG-aaaaaaaa-0000-4000-8000-000000000000 name="1g.10gb" gi=7 ci=0 total=10GiB
gpu index=3 minor=3
proc gpu=0 pid=$holder type=compute mem=20GiB
proc gpu=1 pid=$orphan type=compute mem=6GiB
proc gpu=1 pid=4000000 type=compute mem=1GiB
proc mig=2/0 pid=$holder type=compute mem=2GiB
error func=nvmlDeviceGetMemoryInfo_v2 gpu=3 code=999 times=100
EOF
}

# doc NAME ARGS...: vramguard ARGS (with the fake driver unless VG_NVML says otherwise) into
# $DOCS/NAME.json; any exit status but 64 and 70 (bad usage, internal error) comes with a
# document.
doc() {
    local name=$1
    shift
    run --separate-stderr "$VG" --nvml "${VG_NVML:-$FAKE_FULL}" --dev "$DEVDIR" "$@"
    if [ "$status" -eq 64 ] || [ "$status" -eq 70 ] || [ -z "$output" ]; then
        echo "$name: vramguard $* exited $status: $stderr"
        return 1
    fi
    printf '%s\n' "$output" >"$DOCS/$name.json"
}

# every_document: every command's document on the staged host, then without a driver.
every_document() {
    stage
    doc status --json status
    doc status-no-nvml --json status --no-nvml
    doc doctor --json doctor
    doc doctor-gpu doctor --json --gpu 1
    doc rules doctor --list --json
    CUDA_VISIBLE_DEVICES=1,0,7 doc visible --json visible
    doc clean --json clean
    doc clean-pid --json clean --pid 4000000
    doc check --json check --expect 0=none --expect 1=root
    doc pick --json pick
    doc pick-fail pick --format json -n 4
    doc handoff-node --json handoff node
    doc handoff-prolog --json handoff prolog --gpus 0,1 --job 42 --uid 0
    doc events --json watch --once
    VG_NVML=/nonexistent/libnvidia-ml.so.1
    doc status-nodriver --json status
    doc doctor-nodriver --json doctor
    doc clean-nodriver --json clean
    doc check-nodriver --json check
    doc handoff-nodriver --json handoff node
    unset VG_NVML
}

@test "every command's --json document validates against its schema" {
    every_document
    run "$CHECK" "$SCHEMAS" "$DOCS"/*.json
    echo "$output"
    [ "$status" -eq 0 ]
    # each schema of docs/schema was used
    local s
    for s in "$SCHEMAS"/*.json; do
        s=$(basename "$s" .json)
        grep -q "\"schema\": *\"vramguard.$s/1\"" "$DOCS"/*.json || { echo "$s: no document"; false; }
    done
}

@test "a field removed or renamed fails the schema" {
    every_document
    local f k n=0 docs=()
    for f in "$DOCS"/*.json; do
        [[ $f != */events.json ]] || continue
        docs+=("$f")
        n=$((n + $(jq 'keys | length' "$f")))
    done
    [ "$n" -gt 100 ]
    run "$CHECK" --mutate "$SCHEMAS" "${docs[@]}"
    [ "$status" -eq 0 ]
    [ "${#lines[@]}" -eq $((2 * n)) ]
    [ "$(grep -c -- '-without-schema: invalid$' <<<"$output")" -eq "${#docs[@]}" ]
    if [[ $output == *": valid"* ]]; then
        grep ': valid$' <<<"$output"
        false
    fi
    # deeper: a GPU's memory figure, a holder's pid, a finding's rule, an event's kind
    jq 'del(.gpus[0].memory.used)' "$DOCS/status.json" >"$TMP/mut.json"
    run "$CHECK" "$SCHEMAS" "$TMP/mut.json"
    [ "$status" -eq 1 ] && [[ $output == *"'used' is a required property"* ]]
    jq '.gpus[0].holders[0].pdi = .gpus[0].holders[0].pid | del(.gpus[0].holders[0].pid)' \
        "$DOCS/status.json" >"$TMP/mut.json"
    run "$CHECK" "$SCHEMAS" "$TMP/mut.json"
    [ "$status" -eq 1 ]
    jq '.findings[0].rule = 7' "$DOCS/doctor.json" >"$TMP/mut.json"
    run "$CHECK" "$SCHEMAS" "$TMP/mut.json"
    [ "$status" -eq 1 ] && [[ $output == *"findings/0/rule"* ]]
    head -1 "$DOCS/events.json" | jq -c 'del(.event)' >"$TMP/mut.json"
    run "$CHECK" "$SCHEMAS" "$TMP/mut.json"
    [ "$status" -eq 1 ]
}

@test "every field a schema names is documented in docs/json.md" {
    run "$CHECK" --docs "$SCHEMAS" "$ROOT/docs/json.md"
    echo "$output"
    [ "$status" -eq 0 ]
}
