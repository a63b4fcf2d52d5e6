/*
 * The fake NVML driver's internals, shared by its three files: scenario.c turns a scenario
 * file into a struct fake_scenario (plain data, no pointers), state.c owns the one live
 * scenario, the lock, init reference counting, reloads and the injected errors, hangs and
 * grows; api.c exports the NVML symbols on top of them. See README.md for the file format.
 *
 * Ownership: state.c owns every scenario; api.c sees the current one only between a
 * successful fake_enter() and its fake_leave(), with the lock held. Device handles are
 * addresses in a fixed static table, so they stay valid across reloads.
 */
#ifndef FAKE_NVML_FAKE_H
#define FAKE_NVML_FAKE_H

#include <stdbool.h>
#include <stdint.h>

#include "gpu/nvml_abi.h"

#define FAKE_API __attribute__((visibility("default")))

#define FAKE_MAX_GPUS 64
#define FAKE_MAX_MIG 7 /* what nvmlDeviceGetMaxMigDeviceCount reports on a MIG GPU */
#define FAKE_MAX_PROCS 4096
#define FAKE_MAX_RULES 64
#define FAKE_STR 96    /* name and UUID buffers, as NVML's *_V2_BUFFER_SIZE */

/* Every function the fake knows, with what its gpu= / mig= selectors refer to. */
enum fake_scope { FAKE_NONE, FAKE_GLOBAL, FAKE_INDEX, FAKE_DEVICE };
#define FAKE_FUNCS(X)                                                                           \
    X(nvmlInit_v2, FAKE_GLOBAL) X(nvmlInit, FAKE_GLOBAL) X(nvmlShutdown, FAKE_GLOBAL)           \
    X(nvmlErrorString, FAKE_NONE) X(nvmlSystemGetDriverVersion, FAKE_GLOBAL)                    \
    X(nvmlSystemGetNVMLVersion, FAKE_GLOBAL) X(nvmlSystemGetCudaDriverVersion, FAKE_GLOBAL)     \
    X(nvmlSystemGetCudaDriverVersion_v2, FAKE_GLOBAL) X(nvmlDeviceGetCount, FAKE_GLOBAL)        \
    X(nvmlDeviceGetCount_v2, FAKE_GLOBAL) X(nvmlDeviceGetHandleByIndex, FAKE_INDEX)             \
    X(nvmlDeviceGetHandleByIndex_v2, FAKE_INDEX) X(nvmlDeviceGetName, FAKE_DEVICE)              \
    X(nvmlDeviceGetUUID, FAKE_DEVICE) X(nvmlDeviceGetMinorNumber, FAKE_DEVICE)                  \
    X(nvmlDeviceGetPciInfo, FAKE_DEVICE) X(nvmlDeviceGetPciInfo_v2, FAKE_DEVICE)                \
    X(nvmlDeviceGetPciInfo_v3, FAKE_DEVICE) X(nvmlDeviceGetMemoryInfo, FAKE_DEVICE)             \
    X(nvmlDeviceGetMemoryInfo_v2, FAKE_DEVICE) X(nvmlDeviceGetUtilizationRates, FAKE_DEVICE)    \
    X(nvmlDeviceGetCudaComputeCapability, FAKE_DEVICE)                                          \
    X(nvmlDeviceGetPersistenceMode, FAKE_DEVICE) X(nvmlDeviceGetComputeMode, FAKE_DEVICE)       \
    X(nvmlDeviceGetMigMode, FAKE_DEVICE) X(nvmlDeviceGetMaxMigDeviceCount, FAKE_DEVICE)         \
    X(nvmlDeviceGetMigDeviceHandleByIndex, FAKE_DEVICE)                                         \
    X(nvmlDeviceIsMigDeviceHandle, FAKE_DEVICE) X(nvmlDeviceGetGpuInstanceId, FAKE_DEVICE)      \
    X(nvmlDeviceGetComputeInstanceId, FAKE_DEVICE)                                              \
    X(nvmlDeviceGetDeviceHandleFromMigDeviceHandle, FAKE_DEVICE)                                \
    X(nvmlDeviceGetComputeRunningProcesses, FAKE_DEVICE)                                        \
    X(nvmlDeviceGetComputeRunningProcesses_v2, FAKE_DEVICE)                                     \
    X(nvmlDeviceGetComputeRunningProcesses_v3, FAKE_DEVICE)                                     \
    X(nvmlDeviceGetGraphicsRunningProcesses, FAKE_DEVICE)                                       \
    X(nvmlDeviceGetGraphicsRunningProcesses_v2, FAKE_DEVICE)                                    \
    X(nvmlDeviceGetGraphicsRunningProcesses_v3, FAKE_DEVICE)                                    \
    X(nvmlDeviceGetMPSComputeRunningProcesses, FAKE_DEVICE)                                     \
    X(nvmlDeviceGetMPSComputeRunningProcesses_v2, FAKE_DEVICE)                                  \
    X(nvmlDeviceGetMPSComputeRunningProcesses_v3, FAKE_DEVICE)                                  \
    X(nvmlDeviceGetProcessUtilization, FAKE_DEVICE)                                             \
    X(nvmlDeviceGetTemperature, FAKE_DEVICE) X(nvmlDeviceGetPowerUsage, FAKE_DEVICE)            \
    X(nvmlDeviceGetEnforcedPowerLimit, FAKE_DEVICE)                                             \
    X(nvmlDeviceGetPowerManagementLimit, FAKE_DEVICE) X(nvmlDeviceGetFanSpeed, FAKE_DEVICE)     \
    X(nvmlDeviceGetEccMode, FAKE_DEVICE) X(nvmlDeviceGetTotalEccErrors, FAKE_DEVICE)            \
    X(nvmlDeviceGetRetiredPages, FAKE_DEVICE)                                                   \
    X(nvmlDeviceGetRetiredPagesPendingStatus, FAKE_DEVICE)                                      \
    X(nvmlDeviceGetRemappedRows, FAKE_DEVICE) X(nvmlDeviceGetFieldValues, FAKE_DEVICE)          \
    X(nvmlDeviceGetCurrentClocksEventReasons, FAKE_DEVICE)                                      \
    X(nvmlDeviceGetCurrentClocksThrottleReasons, FAKE_DEVICE)                                   \
    X(nvmlDeviceGetConfComputeMemSizeInfo, FAKE_DEVICE)                                         \
    X(nvmlDeviceGetRunningProcessDetailList, FAKE_DEVICE)

#define FAKE_FN_ENUM(name, scope) FAKE_FN_##name,
enum fake_fn { FAKE_FUNCS(FAKE_FN_ENUM) FAKE_FN_COUNT };
#undef FAKE_FN_ENUM

/* Known bits: a field whose bit is clear was omitted or `na`; its getter is NOT_SUPPORTED
 * (used: clear means auto, FK_USED_NA means na). */
enum {
    FK_UUID = 1u << 0, FK_NAME = 1u << 1, FK_MINOR = 1u << 2, FK_BUS = 1u << 3,
    FK_TOTAL = 1u << 4, FK_RESERVED = 1u << 5, FK_USED = 1u << 6, FK_USED_NA = 1u << 7,
    FK_UTIL = 1u << 8, FK_CC = 1u << 9, FK_PERSIST = 1u << 10, FK_CMODE = 1u << 11,
    FK_MIG = 1u << 12, FK_GI = 1u << 13, FK_CI = 1u << 14,
    FK_DRIVER = 1u << 15, FK_NVML = 1u << 16, FK_CUDA = 1u << 17,
    FK_TEMP = 1u << 18, FK_POWER = 1u << 19, FK_PLIMIT = 1u << 20, FK_FAN = 1u << 21,
};
/* The health keys' bits, past what an int enum holds (fake_dev.known is 64-bit). */
#define FK_H(n) ((uint64_t)1 << (22 + (n)))
#define FK_ECC FK_H(0)         /* ecc (and ecc_pending) */
#define FK_ECC_VC FK_H(1)      /* ecc_vol_corr */
#define FK_ECC_VU FK_H(2)      /* ecc_vol_uncorr */
#define FK_ECC_AC FK_H(3)      /* ecc_agg_corr */
#define FK_ECC_AU FK_H(4)      /* ecc_agg_uncorr */
#define FK_RET_SBE FK_H(5)     /* retired_sbe */
#define FK_RET_DBE FK_H(6)     /* retired_dbe */
#define FK_RET_PEND FK_H(7)    /* retired_pending */
#define FK_REMAP_C FK_H(8)     /* remap_corr */
#define FK_REMAP_U FK_H(9)     /* remap_uncorr */
#define FK_REMAP_P FK_H(10)    /* remap_pending */
#define FK_REMAP_F FK_H(11)    /* remap_failure */
#define FK_RECOVERY FK_H(12)   /* recovery_action */
#define FK_CLOCKS FK_H(13)     /* clocks_event_reasons */
#define FK_REMAP (FK_REMAP_C | FK_REMAP_U | FK_REMAP_P | FK_REMAP_F)
#define FK_PARSER FK_H(14)     /* bits from here on are the parser's own */

enum fake_ptype { FAKE_COMPUTE, FAKE_GRAPHICS, FAKE_MPS };
enum fake_rule_kind { FAKE_RULE_ERROR, FAKE_RULE_HANG, FAKE_RULE_GROW };

/* A GPU or a MIG device: MIG devices use name, uuid, total, used, gi and ci only. */
struct fake_dev {
    uint64_t known;
    char uuid[FAKE_STR], name[FAKE_STR];
    char bus[32];                     /* "00000000:07:00.0", as written */
    unsigned domain, bus_no, dev_no, fn_no;
    uint64_t total, reserved, used;   /* used: when FK_USED, else the sum of its procs */
    unsigned minor, util, mem_util, persistence, compute_mode, mig, mig_pending, gi, ci;
    int cc_major, cc_minor;
    unsigned temp, power_mw, power_limit_mw, fan; /* C, mW, mW, % */
    unsigned ecc, ecc_pending;        /* nvmlEnableState_t */
    uint64_t ecc_count[4];            /* volatile corr, volatile uncorr, aggregate corr, unc. */
    unsigned retired_sbe, retired_dbe, retired_pending;
    unsigned remap[4];                /* corrected, uncorrected, pending, failure */
    unsigned recovery;                /* nvmlDeviceGpuRecoveryAction_t */
    uint64_t clocks;                  /* clock event reason bits */
};

struct fake_gpu {
    struct fake_dev dev;
    unsigned nmig;
    struct fake_dev mig[FAKE_MAX_MIG];
};

struct fake_proc {
    int gpu, mig;                     /* mig: MIG device index on that GPU, or -1 */
    enum fake_ptype type;
    bool mem_known;
    bool sm_given;                    /* sm= was on the line: the driver samples this GPU */
    bool exits;                       /* exits=1: listed only while process pid lives */
    unsigned pid, sm;
    uint64_t mem;
};

/* error, hang and grow directives. gpu == -1: any call; mig == -1: the GPU itself. */
struct fake_rule {
    enum fake_rule_kind kind;
    enum fake_fn fn;                  /* error, hang */
    int gpu, mig;
    int code;                         /* error */
    uint64_t ns;                      /* hang */
    enum fake_ptype type;             /* grow */
    unsigned by;                      /* grow */
    long long left;                   /* matching calls still affected; -1: all */
};

struct fake_scenario {
    unsigned known;                   /* FK_DRIVER, FK_NVML, FK_CUDA */
    char driver[80], nvml[80];
    int cuda;
    bool count_set;                   /* `count N`: nvmlDeviceGetCount* answers count */
    unsigned count;
    unsigned ngpus, nprocs, nrules;
    struct fake_gpu gpus[FAKE_MAX_GPUS];
    struct fake_proc procs[FAKE_MAX_PROCS];
    struct fake_rule rules[FAKE_MAX_RULES];
};

/* What an exported call works on, valid between fake_enter() and fake_leave(). */
struct fake_call {
    struct fake_scenario *sc;
    struct fake_gpu *gpu;             /* the handle's GPU, or NULL */
    struct fake_dev *dev;             /* the handle's GPU or MIG device, or NULL */
    int g, m;                         /* its indices: m == -1 for a GPU; g == -1 for none */
};

#pragma GCC visibility push(hidden)

extern const struct fake_fn_info {
    const char *name;
    enum fake_scope scope;
} fake_fns[FAKE_FN_COUNT];

/* scenario.c: parses text (len bytes, need not be NUL-terminated) into *sc. Returns 0, or
 * -1 with the 1-based line number (0 when not tied to a line) and a message in msg. */
int fake_scenario_parse(const char *text, unsigned long len, struct fake_scenario *sc,
                        char *msg, unsigned long msglen, unsigned *line);

/* state.c. Every exported call but nvmlErrorString starts with fake_enter(), which logs
 * the call (FAKE_NVML_LOG), reloads the scenario when it changed and applies hang and error
 * rules. fake_enter() returns NVML_SUCCESS with the lock held and *c filled (call
 * fake_leave() after), or an error with the lock released. handle is checked for FAKE_DEVICE
 * functions; index is the argument of FAKE_INDEX ones. */
nvmlReturn_t fake_enter(enum fake_fn fn, nvmlDevice_t handle, unsigned index,
                        struct fake_call *c);
void fake_leave(void);
/* nvmlInit, nvmlInit_v2 and nvmlShutdown: count references like the real library. */
nvmlReturn_t fake_refcount(enum fake_fn fn);
void fake_log(enum fake_fn fn);
nvmlDevice_t fake_handle(unsigned g, int m);
/* With the lock held: how much a grow rule shortens this process-list answer (consumes it). */
unsigned fake_grow(const struct fake_call *c, enum fake_ptype type);

#pragma GCC visibility pop

#endif
