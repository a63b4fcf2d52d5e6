/*
 * Names for the enums of proc.h: the allow-listed environment variables (the only ones ever
 * kept from a process's environ) and the library bits found in maps. Tables indexed by value,
 * so adding an entry to an enum without a name here fails the static assertion below.
 */
#include "proc/proc.h"

#include <assert.h>
#include <stddef.h>

static const char *const vg_env_names[] = {
    [VG_ENV_CUDA_VISIBLE_DEVICES] = "CUDA_VISIBLE_DEVICES",
    [VG_ENV_CUDA_DEVICE_ORDER] = "CUDA_DEVICE_ORDER",
    [VG_ENV_NVIDIA_VISIBLE_DEVICES] = "NVIDIA_VISIBLE_DEVICES",
    [VG_ENV_LOCAL_RANK] = "LOCAL_RANK",
    [VG_ENV_RANK] = "RANK",
    [VG_ENV_WORLD_SIZE] = "WORLD_SIZE",
    [VG_ENV_LOCAL_WORLD_SIZE] = "LOCAL_WORLD_SIZE",
    [VG_ENV_TORCHELASTIC_RUN_ID] = "TORCHELASTIC_RUN_ID",
    [VG_ENV_OMPI_COMM_WORLD_LOCAL_RANK] = "OMPI_COMM_WORLD_LOCAL_RANK",
    [VG_ENV_SLURM_LOCALID] = "SLURM_LOCALID",
    [VG_ENV_SLURM_JOB_ID] = "SLURM_JOB_ID",
    [VG_ENV_SLURM_STEP_ID] = "SLURM_STEP_ID",
    [VG_ENV_MASTER_ADDR] = "MASTER_ADDR",
    [VG_ENV_MASTER_PORT] = "MASTER_PORT",
    [VG_ENV_PMIX_NAMESPACE] = "PMIX_NAMESPACE",
    [VG_ENV_TF_FORCE_GPU_ALLOW_GROWTH] = "TF_FORCE_GPU_ALLOW_GROWTH",
    [VG_ENV_XLA_PYTHON_CLIENT_PREALLOCATE] = "XLA_PYTHON_CLIENT_PREALLOCATE",
    [VG_ENV_XLA_PYTHON_CLIENT_MEM_FRACTION] = "XLA_PYTHON_CLIENT_MEM_FRACTION",
    [VG_ENV_PYTORCH_CUDA_ALLOC_CONF] = "PYTORCH_CUDA_ALLOC_CONF",
    [VG_ENV_CUDA_MODULE_LOADING] = "CUDA_MODULE_LOADING",
    [VG_ENV_HOSTNAME] = "HOSTNAME",
};
static_assert(sizeof(vg_env_names) / sizeof(vg_env_names[0]) == VG_ENV_COUNT,
              "every enum vg_env_var needs a name");

const char *vg_env_name(enum vg_env_var v)
{
    if ((unsigned)v >= VG_ENV_COUNT)
        return NULL;
    return vg_env_names[v];
}

static const struct {
    unsigned bit;
    const char *name;
} vg_lib_names[] = {
    {VG_LIB_CUDA, "cuda"},        {VG_LIB_CUDART, "cudart"},         {VG_LIB_NCCL, "nccl"},
    {VG_LIB_TORCH_CUDA, "torch"}, {VG_LIB_TENSORFLOW, "tensorflow"}, {VG_LIB_JAX, "jax"},
    {VG_LIB_NVML, "nvml"},
};

const char *vg_lib_name(unsigned bit)
{
    for (size_t i = 0; i < sizeof(vg_lib_names) / sizeof(vg_lib_names[0]); i++)
        if (vg_lib_names[i].bit == bit)
            return vg_lib_names[i].name;
    return NULL;
}
