/*
 * The driver's view of the host as plain data: GPUs, their MIG devices and the processes NVML
 * reports on each. Filled by the NVML client (nvml.h); read by the snapshot.
 *
 * Ownership: a struct vg_gpu_list owns every string and array reachable from it and is freed
 * with vg_gpu_list_release(). Strings are never NULL once filled, except where noted (an unknown
 * string is NULL and its known bit is clear).
 *
 * Unknown is not zero: each field that NVML may fail to give has a bit in `known`; consumers
 * must test it before using the value.
 */
#ifndef VG_GPU_GPU_H
#define VG_GPU_GPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Process types, as a bit set: a PID can appear in several of NVML's lists. */
enum {
    VG_PTYPE_COMPUTE = 1u << 0,
    VG_PTYPE_GRAPHICS = 1u << 1,
    VG_PTYPE_MPS = 1u << 2,
};

struct vg_gpu_proc {
    uint32_t pid;
    unsigned types;  /* VG_PTYPE_* */
    bool used_known; /* false when NVML said NVML_VALUE_NOT_AVAILABLE */
    uint64_t used_bytes;
    bool instance_known;   /* gpu/compute instance ids came from a v2+ entry */
    uint32_t gpu_instance; /* MIG GI id, as NVML reports it */
    uint32_t compute_instance;
    bool bogus_pid; /* PID 0 or UINT32_MAX: the driver's bookkeeping, not a process */
    /* SM utilisation from nvmlDeviceGetProcessUtilization: the highest among the samples the
     * driver still buffers for this PID; util_known false when it has none, which is unknown,
     * not idle (the GPU's VG_GPU_K_PROC_UTIL bit says whether the call returned samples). */
    bool util_known;
    unsigned sm_util; /* percent */
};

enum {
    VG_GPU_K_NAME = 1u << 0,
    VG_GPU_K_UUID = 1u << 1,
    VG_GPU_K_MINOR = 1u << 2,
    VG_GPU_K_PCI = 1u << 3,
    VG_GPU_K_MEM = 1u << 4,      /* total, used, free */
    VG_GPU_K_RESERVED = 1u << 5, /* from nvmlDeviceGetMemoryInfo_v2 only */
    VG_GPU_K_UTIL = 1u << 6,
    VG_GPU_K_CC = 1u << 7,
    VG_GPU_K_PERSIST = 1u << 8,
    VG_GPU_K_COMPUTE_MODE = 1u << 9,
    VG_GPU_K_MIG_MODE = 1u << 10,
    VG_GPU_K_PROCS = 1u << 11,     /* every process list that could hold processes was read */
    VG_GPU_K_INSTANCE = 1u << 12,  /* MIG devices: gpu/compute instance ids */
    VG_GPU_K_PROC_UTIL = 1u << 13, /* per-process samples were read (procs[].util_known) */
    /* The sensors, read only when asked for (vg_nvml_want_sensors(); `top` asks): */
    VG_GPU_K_TEMP = 1u << 14,        /* temp_c */
    VG_GPU_K_POWER = 1u << 15,       /* power_mw */
    VG_GPU_K_POWER_LIMIT = 1u << 16, /* power_limit_mw */
    VG_GPU_K_FAN = 1u << 17,         /* fan_pct */
};

/* One problem NVML reported while reading a device; kept so one bad field or one lost GPU
 * never hides the rest. */
struct vg_gpu_error {
    char *func; /* the NVML function that failed */
    int status; /* its nvmlReturn_t */
    char *msg;  /* "GPU 2: nvmlDeviceGetMemoryInfo_v2: GPU is lost" */
};

/* A GPU's compute mode, with NVML's values (nvmlComputeMode_t; gpu/nvml.c checks they agree), so
 * that nothing above gpu/ needs the driver's names. */
enum vg_compute_mode {
    VG_COMPUTE_DEFAULT = 0,
    VG_COMPUTE_EXCLUSIVE_THREAD = 1, /* deprecated by NVIDIA, still reported by old drivers */
    VG_COMPUTE_PROHIBITED = 2,
    VG_COMPUTE_EXCLUSIVE_PROCESS = 3,
};

/*
 * The GPU's own health, as the driver reports it (GPUs only; MIG devices leave it empty). Each
 * fact has a bit in vg_gpu_health.known, set only when its getter answered: a driver or board
 * that answers NOT_SUPPORTED or NO_PERMISSION leaves it unknown, which is never "healthy".
 */
enum {
    VG_GH_K_ECC_MODE = 1u << 0,       /* ecc_current, ecc_pending: nvmlDeviceGetEccMode */
    VG_GH_K_ECC_VOL_CORR = 1u << 1,   /* nvmlDeviceGetTotalEccErrors, one bit per counter */
    VG_GH_K_ECC_VOL_UNCORR = 1u << 2, /* volatile: since the driver last loaded */
    VG_GH_K_ECC_AGG_CORR = 1u << 3,   /* aggregate: the board's lifetime (infoROM) */
    VG_GH_K_ECC_AGG_UNCORR = 1u << 4,
    VG_GH_K_RETIRED_SBE = 1u << 5,     /* nvmlDeviceGetRetiredPages, multiple single-bit */
    VG_GH_K_RETIRED_DBE = 1u << 6,     /* ... double-bit */
    VG_GH_K_RETIRED_PENDING = 1u << 7, /* nvmlDeviceGetRetiredPagesPendingStatus */
    VG_GH_K_REMAP = 1u << 8,           /* remap_*: nvmlDeviceGetRemappedRows */
    VG_GH_K_RECOVERY = 1u << 9,        /* recovery: field NVML_FI_DEV_GET_GPU_RECOVERY_ACTION */
    VG_GH_K_CLOCKS = 1u << 10,         /* clocks: nvmlDeviceGetCurrentClocksEventReasons */
};

/* The driver's recovery action, with NVML's numbers (nvmlDeviceGpuRecoveryAction_t; gpu/nvml.c
 * checks they agree). A number past these is kept as it came. */
enum vg_recovery {
    VG_RECOVERY_NONE = 0,
    VG_RECOVERY_GPU_RESET = 1,
    VG_RECOVERY_NODE_REBOOT = 2,
    VG_RECOVERY_DRAIN_P2P = 3,
    VG_RECOVERY_DRAIN_AND_RESET = 4,
    VG_RECOVERY_RECOVER_IMEX = 5, /* newer drivers: recover the IMEX domain (multi-node NVLink) */
    VG_RECOVERY_BUS_RESET = 6,    /* reset the GPU's PCIe bus */
    VG_RECOVERY_SYSTEM_REBOOT = 7,
};

/* Clock event reasons, NVML's bits (nvmlClocksEventReason*). */
#define VG_CLK_GPU_IDLE 0x1ull
#define VG_CLK_APP_SETTING 0x2ull
#define VG_CLK_SW_POWER_CAP 0x4ull
#define VG_CLK_HW_SLOWDOWN 0x8ull
#define VG_CLK_SYNC_BOOST 0x10ull
#define VG_CLK_SW_THERMAL 0x20ull
#define VG_CLK_HW_THERMAL 0x40ull
#define VG_CLK_HW_POWER_BRAKE 0x80ull
#define VG_CLK_DISPLAY_SETTING 0x100ull
/* The reasons that mean the hardware or the driver is holding the GPU back against the work,
 * not idling or obeying a setting: what `throttled` reports. */
#define VG_CLK_BRAKES                                                                              \
    (VG_CLK_HW_SLOWDOWN | VG_CLK_SW_THERMAL | VG_CLK_HW_THERMAL | VG_CLK_HW_POWER_BRAKE)

/* "none", "gpu_reset", "node_reboot", "drain_p2p", "drain_and_reset"; NULL for a number NVML
 * had not defined when this was written. Static; stable (JSON). */
const char *vg_gpu_recovery_name(unsigned action);
/* The same for people: "a GPU reset", "a node reboot", ...; NULL likewise. */
const char *vg_gpu_recovery_text(unsigned action);

/* The clock event reasons, one bit and stable name each ("hw_slowdown", ...), in bit order:
 * *n entries. Static. */
struct vg_gpu_clock_reason {
    uint64_t bit;
    const char *name;
};
const struct vg_gpu_clock_reason *vg_gpu_clock_reasons(size_t *n);

struct vg_gpu_health {
    unsigned known;                /* VG_GH_K_* */
    bool ecc_current, ecc_pending; /* ECC enabled now / after the next reset */
    uint64_t ecc_vol_corr, ecc_vol_uncorr, ecc_agg_corr, ecc_agg_uncorr;
    unsigned retired_sbe, retired_dbe; /* pages retired for each cause */
    bool retired_pending;              /* a retirement waits for the next reset */
    unsigned remap_corr, remap_uncorr; /* rows remapped for correctable / uncorrectable errors */
    bool remap_pending, remap_failure; /* a remap waits for a reset / a remap failed */
    unsigned recovery;                 /* enum vg_recovery (the driver's number) */
    uint64_t clocks;                   /* VG_CLK_* bits active now */
};

struct vg_gpu {
    unsigned index; /* NVML index (PCI bus order); MIG devices: index under the parent */
    bool is_mig;
    unsigned known; /* VG_GPU_K_* */
    char *name;
    char *uuid;       /* "GPU-..." or "MIG-..." */
    unsigned minor;   /* /dev/nvidia<minor>; MIG devices share their parent's */
    char *pci_bus_id; /* "00000000:17:00.0" */
    unsigned pci_domain, pci_bus, pci_device;
    uint64_t mem_total, mem_used, mem_free, mem_reserved;
    unsigned util_gpu, util_mem; /* percent */
    unsigned temp_c;             /* the GPU die's temperature, degrees Celsius */
    unsigned power_mw;           /* power draw, milliwatts */
    unsigned power_limit_mw;     /* the enforced power limit, milliwatts */
    unsigned fan_pct;            /* fan speed, percent of its maximum (may pass 100) */
    int cc_major, cc_minor;
    bool persistence;
    unsigned compute_mode; /* enum vg_compute_mode (the driver's number, also when unnamed) */
    unsigned mig_current, mig_pending;
    unsigned gpu_instance, compute_instance; /* MIG devices only */
    struct vg_gpu_health health;
    bool lost; /* the device answered GPU_IS_LOST (or could not be opened) */
    bool hung; /* a call for this GPU did not return in time: only the identity
                * read before it (name, UUID, minor, PCI) is known, the rest is
                * unknown, and an error names the call */

    struct vg_gpu_proc *procs; /* sorted by pid, one entry per pid */
    size_t nprocs;

    struct vg_gpu *mig; /* MIG devices of this GPU (none when MIG is off) */
    size_t nmig;

    struct vg_gpu_error *errors;
    size_t nerrors, errors_cap;
};

struct vg_gpu_list {
    bool loaded;          /* the library was found and initialised */
    char *library;        /* the path dlopen was given */
    char *driver_version; /* NULL when unknown */
    char *nvml_version;   /* NULL when unknown */
    int cuda_version;     /* e.g. 12040; 0 when unknown */
    bool proc_stride_535; /* process lists were read with the 535.43 32-byte stride */
    const char *proc_api; /* "v3", "v2" or "v1": which process-list generation answered */
    const char *mem_api;  /* "v2" or "v1" */

    struct vg_gpu *gpus;
    size_t ngpus;

    struct vg_gpu_error *errors; /* errors not tied to one GPU (init, count) */
    size_t nerrors, errors_cap;
};

void vg_gpu_list_init(struct vg_gpu_list *list);
void vg_gpu_list_release(struct vg_gpu_list *list);
/* Free what one GPU points to (its MIG devices included), not g itself; g is left zeroed. */
void vg_gpu_release(struct vg_gpu *g);

/* The entry for pid in g's process list (sorted), or NULL. */
const struct vg_gpu_proc *vg_gpu_find_proc(const struct vg_gpu *g, uint32_t pid);

/* Find the GPU (not MIG device) whose minor number is known and equals minor; NULL if none. */
const struct vg_gpu *vg_gpu_list_by_minor(const struct vg_gpu_list *list, unsigned minor);

/* The GPU whose UUID is known and is exactly uuid (NULL: none): true with its position in
 * list->gpus in *pos. */
bool vg_gpu_list_by_uuid(const struct vg_gpu_list *list, const char *uuid, size_t *pos);

/* How a GPU a person named (an option, an expectation) was found, or why not. */
enum vg_gpu_lookup {
    VG_GPU_LOOKUP_OK = 0,
    VG_GPU_LOOKUP_NO_INDEX, /* a number, and no GPU has that index */
    VG_GPU_LOOKUP_NO_UUID,  /* no GPU's UUID starts with the text */
    VG_GPU_LOOKUP_SEVERAL,  /* the text starts the UUIDs of several GPUs */
};

/* The GPU text names: NVML's index in decimal, else a UUID or a prefix of exactly one GPU's
 * UUID ("" names none). *pos: its position in list->gpus, set only on VG_GPU_LOOKUP_OK. */
enum vg_gpu_lookup vg_gpu_list_lookup(const struct vg_gpu_list *list, const char *text,
                                      size_t *pos);

#endif
