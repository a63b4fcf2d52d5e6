#!/usr/bin/env bats
# t0203-doctor-contexts: contexts in the wrong place: stray-contexts, ddp-gpu0, nccl-all-gpus and
# preallocation, each where it fires (right GPU, right PID) and the near misses where it must not
# (a process legitimately using two GPUs, DDP ranks each on their own GPU, TensorFlow with a small
# footprint). "Context-sized" is up to 1 GiB unless --context-max says otherwise.

load lib
load diag

setup() {
    DEVDIR=$(vg_fake_dev)
    LIB=$(vg_fake_lib libcuda.so.1 libnccl.so.2 libtorch_cuda.so libtensorflow_framework.so.2 \
        xla_extension.so)
}

# ----------------------------------------------------------------------------- stray-contexts

@test "stray-contexts: works on GPU 0, context-sized on GPUs 2 and 3" {
    vg_spawn --open "$(dev 0)" --open "$(dev 2)" --open "$(dev 3)" --map "$LIB/libcuda.so.1" \
        --map "$LIB/libtorch_cuda.so" -- python train.py
    P=$VG_PID
    homogeneous_host "proc gpu=0 pid=$P type=compute mem=30GiB" \
        "proc gpu=2 pid=$P type=compute mem=400MiB" \
        "proc gpu=3 pid=$P type=compute mem=300MiB"
    vgd --json doctor
    show
    [ "$status" -eq 1 ]
    [ "$(rules_fired)" = stray-contexts ]
    [ "$(nfind stray-contexts)" -eq 1 ]
    finding_is stray-contexts '[2,3]' "[$P]"
    json_ok '.findings[0] | .severity == "warning" and .memory == 734003200'
    json_ok '.findings[0].title | endswith("works on one GPU but holds contexts on 2 more (700 MiB)")'
    json_ok '.findings[0].evidence | any(startswith("30 GiB on GPU 0 ") and endswith("where it works"))'
    json_ok '[.findings[0].evidence[] | select(endswith("context-sized"))] | length == 2'
    json_ok '.findings[0].fix[0] | startswith("start it with CUDA_VISIBLE_DEVICES=\($u) ")' --arg u "$U0"
    # libtorch_cuda is mapped: the PyTorch advice comes too.
    json_ok '.findings[0].fix | any(startswith("PyTorch: torch.cuda.set_device(N)"))'
    vgd doctor
    [[ $output == *"GPU 2  "*"why:  stray-contexts (PID $P)"*"GPU 3  "*"why:  stray-contexts (PID $P)"* ]]
}

@test "stray-contexts: exactly --context-max counts, a byte more does not; the option moves it" {
    vg_spawn --open "$(dev 1)" --open "$(dev 3)"
    P=$VG_PID
    homogeneous_host "proc gpu=1 pid=$P type=compute mem=30GiB" \
        "proc gpu=3 pid=$P type=compute mem=1GiB"
    vgd --json doctor
    show
    finding_is stray-contexts '[3]' "[$P]"
    json_ok '.findings[0].fix | all(startswith("PyTorch") | not)' # no libtorch_cuda mapped
    homogeneous_host "proc gpu=1 pid=$P type=compute mem=30GiB" \
        "proc gpu=3 pid=$P type=compute mem=1025MiB"
    vgd --json doctor
    show
    [ "$status" -eq 0 ]
    json_ok '.findings == []'
    vgd --json doctor --context-max 2GiB
    [ "$status" -eq 1 ]
    finding_is stray-contexts '[3]' "[$P]"
    vgd --json doctor --context-max 512MiB
    [ "$status" -eq 0 ]
    json_ok '.findings == []'
}

@test "stray-contexts near miss: a process legitimately using two GPUs with big memory on both" {
    vg_spawn --open "$(dev 0)" --open "$(dev 1)" --map "$LIB/libcuda.so.1" --map "$LIB/libnccl.so.2" \
        --map "$LIB/libtorch_cuda.so" -- python pipeline_parallel.py
    P=$VG_PID
    homogeneous_host "proc gpu=0 pid=$P type=compute mem=30GiB" \
        "proc gpu=1 pid=$P type=compute mem=28GiB"
    vgd --json doctor
    show
    [ "$status" -eq 0 ]
    json_ok '.findings == []'
    vgd doctor
    [[ $output == *"No problems found"* ]]
}

@test "stray-contexts near miss: only contexts, unknown figures, or a device node without a context" {
    # A monitor with small contexts everywhere works nowhere in particular.
    vg_spawn --open "$(dev 0)" --open "$(dev 1)"
    P=$VG_PID
    # The driver cannot say how much the second holding is.
    vg_spawn --open "$(dev 2)" --open "$(dev 3)"
    Q=$VG_PID
    homogeneous_host "proc gpu=0 pid=$P type=compute mem=200MiB" \
        "proc gpu=1 pid=$P type=compute mem=200MiB" \
        "proc gpu=2 pid=$Q type=compute mem=30GiB" \
        "proc gpu=3 pid=$Q type=compute mem=na"
    vgd --json doctor
    show
    [ "$status" -eq 0 ]
    json_ok '.findings == []'
}

# ----------------------------------------------------------------------------------- ddp-gpu0

# ranks N [--env ...]: spawns N DDP ranks (LOCAL_RANK=i, RANK=i); RANKS[i] is rank i's pid.
ranks() {
    local n=$1 i
    shift
    RANKS=()
    for ((i = 0; i < n; i++)); do
        vg_spawn --open "$(dev "$i")" --open "$(dev 0)" --map "$LIB/libcuda.so.1" \
            --map "$LIB/libtorch_cuda.so" --env LOCAL_RANK=$i --env RANK=$i --env WORLD_SIZE=$n \
            "$@" -- python -m torch.distributed.run train.py >/dev/null
        RANKS+=("$VG_PID")
    done
}

@test "ddp-gpu0: ranks 1-3 each hold a context on GPU 0 besides their own, one finding" {
    ranks 4 --env TORCHELASTIC_RUN_ID=job42
    scen=("proc gpu=0 pid=${RANKS[0]} type=compute mem=20GiB")
    for i in 1 2 3; do
        scen+=("proc gpu=$i pid=${RANKS[i]} type=compute mem=20GiB"
            "proc gpu=0 pid=${RANKS[i]} type=compute mem=500MiB")
    done
    homogeneous_host "${scen[@]}"
    vgd --json doctor
    show
    [ "$status" -eq 1 ]
    [ "$(rules_fired)" = ddp-gpu0 ]
    [ "$(nfind ddp-gpu0)" -eq 1 ]
    finding_is ddp-gpu0 '[0]' "[${RANKS[1]},${RANKS[2]},${RANKS[3]}]"
    json_ok '.findings[0] | .severity == "warning" and .memory == 1572864000'
    json_ok '.findings[0].title | startswith("3 ranks of one job (run id job42) each hold a stray context on GPU 0 ")'
    json_ok '.findings[0].evidence | any(startswith("PID \($p) (LOCAL_RANK=2) holds 500 MiB here and 20 GiB on its own GPU 2 "))' \
        --arg p "${RANKS[2]}"
    json_ok '.findings[0].fix | any(contains("torch.cuda.set_device(local_rank)"))'
    json_ok '.findings[0].fix | any(contains("map_location"))'
}

@test "ddp-gpu0: Slurm ranks grouped by SLURM_JOB_ID, named by SLURM_LOCALID" {
    RANKS=()
    for i in 0 1 2; do
        vg_spawn --open "$(dev "$i")" --open "$(dev 0)" --env SLURM_LOCALID=$i --env SLURM_JOB_ID=777
        RANKS+=("$VG_PID")
    done
    homogeneous_host "proc gpu=0 pid=${RANKS[0]} type=compute mem=20GiB" \
        "proc gpu=1 pid=${RANKS[1]} type=compute mem=20GiB" \
        "proc gpu=0 pid=${RANKS[1]} type=compute mem=300MiB" \
        "proc gpu=2 pid=${RANKS[2]} type=compute mem=20GiB" \
        "proc gpu=0 pid=${RANKS[2]} type=compute mem=300MiB"
    vgd --json doctor
    show
    [ "$status" -eq 1 ]
    [ "$(rules_fired)" = ddp-gpu0 ]
    finding_is ddp-gpu0 '[0]' "[${RANKS[1]},${RANKS[2]}]"
    json_ok '.findings[0].title | contains("(Slurm job 777)")'
    json_ok '.findings[0].evidence | any(startswith("PID \($p) (SLURM_LOCALID=1) "))' --arg p "${RANKS[1]}"
}

@test "ddp-gpu0 near miss: one DDP rank per GPU done right" {
    ranks 4 --env TORCHELASTIC_RUN_ID=job42
    scen=()
    for i in 0 1 2 3; do
        scen+=("proc gpu=$i pid=${RANKS[i]} type=compute mem=20GiB")
    done
    # Each rank also opened GPU 0's device node (ranks() does), but only its own has a context.
    homogeneous_host "${scen[@]}"
    vgd --json doctor
    show
    [ "$status" -eq 0 ]
    json_ok '.findings == []'
}

@test "ddp-gpu0 near miss: ranks of different jobs, or processes without rank variables" {
    # Two jobs, one stray rank each: no job has several, so each is a plain stray context.
    vg_spawn --open "$(dev 1)" --open "$(dev 0)" --env LOCAL_RANK=1 --env TORCHELASTIC_RUN_ID=a
    A=$VG_PID
    vg_spawn --open "$(dev 2)" --open "$(dev 0)" --env LOCAL_RANK=1 --env TORCHELASTIC_RUN_ID=b
    B=$VG_PID
    homogeneous_host "proc gpu=1 pid=$A type=compute mem=20GiB" \
        "proc gpu=0 pid=$A type=compute mem=500MiB" \
        "proc gpu=2 pid=$B type=compute mem=20GiB" \
        "proc gpu=0 pid=$B type=compute mem=500MiB"
    vgd --json doctor
    show
    [ "$status" -eq 1 ]
    [ "$(rules_fired)" = stray-contexts ]
    finding_is stray-contexts '[0]' "[$A]"
    finding_is stray-contexts '[0]' "[$B]"
    # The same holdings without any rank variable: stray contexts, not DDP ranks.
    vg_cleanup
    vg_spawn --open "$(dev 1)" --open "$(dev 0)"
    A=$VG_PID
    vg_spawn --open "$(dev 2)" --open "$(dev 0)"
    B=$VG_PID
    homogeneous_host "proc gpu=1 pid=$A type=compute mem=20GiB" \
        "proc gpu=0 pid=$A type=compute mem=500MiB" \
        "proc gpu=2 pid=$B type=compute mem=20GiB" \
        "proc gpu=0 pid=$B type=compute mem=500MiB"
    vgd --json doctor
    show
    [ "$(rules_fired)" = stray-contexts ]
    [ "$(nfind stray-contexts)" -eq 2 ]
}

@test "ddp-gpu0 near miss: two plain torchrun jobs (run id 'none') in different sessions are two jobs" {
    # Each job: an agent in a session of its own starting its rank 1 in a session of the rank's
    # own, as torchrun does; TORCHELASTIC_RUN_ID is torchrun's default in both.
    TMP=$(vg_tmpdir)
    for j in 1 2; do
        VG_HELPER_TAG=$_VG_TAG setsid bash -c 'setsid "$0" --pidfile "$1" --open "$2" --open "$3" \
            --env LOCAL_RANK=1 --env RANK=1 --env TORCHELASTIC_RUN_ID=none -- python -u train.py & wait' \
            "$HELPER" "$TMP/job$j" "$(dev "$j")" "$(dev 0)" </dev/null >/dev/null 2>&1 &
        _vg_record agent "$!"
    done
    wait_for "[[ -s $TMP/job1 && -s $TMP/job2 ]]"
    A=$(vg_role main "$TMP/job1")
    B=$(vg_role main "$TMP/job2")
    [ "$(vg_stat "$A" ppid)" != "$(vg_stat "$B" ppid)" ]
    homogeneous_host "proc gpu=1 pid=$A type=compute mem=20GiB" \
        "proc gpu=0 pid=$A type=compute mem=500MiB" \
        "proc gpu=2 pid=$B type=compute mem=20GiB" \
        "proc gpu=0 pid=$B type=compute mem=500MiB"
    vgd --json doctor
    show
    [ "$status" -eq 1 ]
    [ "$(rules_fired)" = stray-contexts ]
    finding_is stray-contexts '[0]' "[$A]"
    finding_is stray-contexts '[0]' "[$B]"
}

# ------------------------------------------------------------------------------ nccl-all-gpus

@test "nccl-all-gpus: NCCL loaded and a context on every GPU, one finding naming them all" {
    vg_spawn --open "$(dev 0)" --open "$(dev 1)" --open "$(dev 2)" --open "$(dev 3)" \
        --map "$LIB/libcuda.so.1" --map "$LIB/libnccl.so.2"
    P=$VG_PID
    homogeneous_host "proc gpu=0 pid=$P type=compute mem=20GiB" \
        "proc gpu=1 pid=$P type=compute mem=300MiB" \
        "proc gpu=2 pid=$P type=compute mem=300MiB" \
        "proc gpu=3 pid=$P type=compute mem=300MiB"
    vgd --json doctor
    show
    [ "$status" -eq 1 ]
    # The stray contexts are NCCL's: reported once, not also as stray-contexts.
    [ "$(rules_fired)" = nccl-all-gpus ]
    finding_is nccl-all-gpus '[0,1,2,3]' "[$P]"
    json_ok '.findings[0].title | endswith("has NCCL loaded and a context on every one of its 4 visible GPUs, 3 of them context-sized")'
    json_ok '.findings[0].fix | any(contains("destroy_process_group()"))'
}

@test "nccl-all-gpus: every GPU of its CUDA_VISIBLE_DEVICES" {
    vg_spawn --open "$(dev 2)" --open "$(dev 3)" --map "$LIB/libnccl.so.2" \
        --env CUDA_VISIBLE_DEVICES=2,3
    P=$VG_PID
    homogeneous_host "proc gpu=2 pid=$P type=compute mem=20GiB" \
        "proc gpu=3 pid=$P type=compute mem=300MiB"
    vgd --json doctor
    show
    [ "$status" -eq 1 ]
    [ "$(rules_fired)" = nccl-all-gpus ]
    finding_is nccl-all-gpus '[2,3]' "[$P]"
    json_ok '.findings[0].title | contains("every one of its 2 visible GPUs, 1 of them context-sized")'
}

@test "nccl-all-gpus near miss: big memory on every GPU, one visible GPU, or some GPUs untouched" {
    # Tensor parallel: real work on both GPUs.
    vg_spawn --open "$(dev 0)" --open "$(dev 1)" --map "$LIB/libnccl.so.2" --env CUDA_VISIBLE_DEVICES=0,1
    P=$VG_PID
    # One visible GPU.
    vg_spawn --open "$(dev 2)" --map "$LIB/libnccl.so.2" --env CUDA_VISIBLE_DEVICES=2
    Q=$VG_PID
    homogeneous_host "proc gpu=0 pid=$P type=compute mem=30GiB" \
        "proc gpu=1 pid=$P type=compute mem=30GiB" \
        "proc gpu=2 pid=$Q type=compute mem=300MiB"
    vgd --json doctor
    show
    [ "$status" -eq 0 ]
    json_ok '.findings == []'
    # Two of four GPUs: not every visible GPU, so the stray context is stray-contexts'.
    vg_spawn --open "$(dev 3)" --open "$(dev 1)" --map "$LIB/libnccl.so.2"
    R=$VG_PID
    homogeneous_host "proc gpu=3 pid=$R type=compute mem=30GiB" \
        "proc gpu=1 pid=$R type=compute mem=300MiB"
    vgd --json doctor
    show
    [ "$(rules_fired)" = stray-contexts ]
    finding_is stray-contexts '[1]' "[$R]"
}

@test "nccl-all-gpus near miss: the same holdings without NCCL mapped are stray-contexts" {
    vg_spawn --open "$(dev 0)" --open "$(dev 1)" --map "$LIB/libcuda.so.1"
    P=$VG_PID
    homogeneous_host "proc gpu=0 pid=$P type=compute mem=20GiB" \
        "proc gpu=1 pid=$P type=compute mem=300MiB"
    vg_spawn --open "$(dev 2)" --open "$(dev 3)" --map "$LIB/libcuda.so.1" --env CUDA_VISIBLE_DEVICES=2,3
    Q=$VG_PID
    homogeneous_host "proc gpu=0 pid=$P type=compute mem=20GiB" \
        "proc gpu=1 pid=$P type=compute mem=300MiB" \
        "proc gpu=2 pid=$Q type=compute mem=20GiB" \
        "proc gpu=3 pid=$Q type=compute mem=300MiB"
    vgd --json doctor
    show
    [ "$(rules_fired)" = stray-contexts ]
    [ "$(nfind stray-contexts)" -eq 2 ]
}

# ------------------------------------------------------------------------------ preallocation

@test "preallocation: TensorFlow holding most of its GPU, with the TF fixes" {
    vg_spawn --open "$(dev 1)" --map "$LIB/libtensorflow_framework.so.2" --env CUDA_VISIBLE_DEVICES=1 \
        -- python tf_train.py
    P=$VG_PID
    homogeneous_host "proc gpu=1 pid=$P type=compute mem=76GiB"
    vgd --json doctor
    show
    [ "$status" -eq 1 ]
    [ "$(rules_fired)" = preallocation ]
    finding_is preallocation '[1]' "[$P]"
    json_ok '.findings[0] | .severity == "warning" and .memory == 81604378624'
    json_ok '.findings[0].title | endswith("(TensorFlow) holds at least 70% of 1 GPU")'
    json_ok '.findings[0].evidence | any(startswith("76 GiB of 80 GiB on GPU 1 "))'
    json_ok '.findings[0].fix | any(contains("TF_FORCE_GPU_ALLOW_GROWTH=true"))'
    json_ok '.findings[0].fix | any(contains("tf.config.set_visible_devices"))'
    json_ok '.findings[0].fix | all(contains("XLA_") | not)'
}

@test "preallocation: JAX on every visible GPU; the variables it already has are noted" {
    vg_spawn --open "$(dev 0)" --open "$(dev 1)" --open "$(dev 2)" --open "$(dev 3)" \
        --map "$LIB/xla_extension.so" --env XLA_PYTHON_CLIENT_PREALLOCATE=false
    P=$VG_PID
    homogeneous_host "proc gpu=0 pid=$P type=compute mem=600MiB" \
        "proc gpu=1 pid=$P type=compute mem=600MiB" \
        "proc gpu=2 pid=$P type=compute mem=600MiB" \
        "proc gpu=3 pid=$P type=compute mem=600MiB"
    vgd --json doctor
    show
    [ "$status" -eq 1 ]
    [ "$(rules_fired)" = preallocation ]
    finding_is preallocation '[0,1,2,3]' "[$P]"
    json_ok '.findings[0].title | endswith("(JAX) holds memory on every one of its 4 visible GPUs")'
    json_ok '.findings[0].fix | any(contains("XLA_PYTHON_CLIENT_PREALLOCATE=false"))'
    json_ok '.findings[0].evidence | any(startswith("it already has XLA_PYTHON_CLIENT_PREALLOCATE=false"))'
}

@test "preallocation: 70% of the GPU is the threshold" {
    vg_spawn --open "$(dev 2)" --map "$LIB/libtensorflow_framework.so.2" --env CUDA_VISIBLE_DEVICES=2
    P=$VG_PID
    homogeneous_host "proc gpu=2 pid=$P type=compute mem=56GiB" # 0.7 x 80 GiB
    vgd --json doctor
    show
    [ "$(rules_fired)" = preallocation ]
    homogeneous_host "proc gpu=2 pid=$P type=compute mem=57343MiB"
    vgd --json doctor
    show
    [ "$status" -eq 0 ]
    json_ok '.findings == []'
}

@test "preallocation: TensorFlow's big GPU and a stray context are reported once, as preallocation" {
    vg_spawn --open "$(dev 0)" --open "$(dev 1)" --map "$LIB/libtensorflow_framework.so.2"
    P=$VG_PID
    homogeneous_host "proc gpu=0 pid=$P type=compute mem=70GiB" \
        "proc gpu=1 pid=$P type=compute mem=300MiB"
    vgd --json doctor
    show
    [ "$status" -eq 1 ]
    [ "$(rules_fired)" = preallocation ]
    finding_is preallocation '[0,1]' "[$P]"
}

@test "preallocation near miss: TensorFlow mapped but small memory on one GPU; big memory without TF" {
    vg_spawn --open "$(dev 2)" --map "$LIB/libtensorflow_framework.so.2" --env CUDA_VISIBLE_DEVICES=2
    P=$VG_PID
    vg_spawn --open "$(dev 3)" --map "$LIB/libtorch_cuda.so" --env CUDA_VISIBLE_DEVICES=3
    Q=$VG_PID
    homogeneous_host "proc gpu=2 pid=$P type=compute mem=2GiB" \
        "proc gpu=3 pid=$Q type=compute mem=78GiB"
    vgd --json doctor
    show
    [ "$status" -eq 0 ]
    json_ok '.findings == []'
}
