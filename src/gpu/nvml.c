/*
 * The NVML client (see nvml.h): loads the driver's libnvidia-ml.so.1 with dlopen and reads every
 * GPU, MIG device and process list into a struct vg_gpu_list.
 *
 * Why it looks the way it does:
 *  - No nvml.h: the ABI we rely on is declared in nvml_abi.h and every symbol is resolved by
 *    name from one table (vg_nvml_syms) into a struct of function pointers. Versioned symbols
 *    (_v2, _v3) are separate table rows with separate slots, so a driver may export any subset;
 *    a missing symbol means the feature is absent, never that the library is broken.
 *  - Drivers disagree about the newest versions: each versioned family is tried newest first,
 *    and memory and process lists fall back to the next older version when one answers
 *    FUNCTION_NOT_FOUND, NOT_SUPPORTED or ARGUMENT_VERSION_MISMATCH. Process entries are read
 *    by byte stride (v1 16, v2 24, v3 24, or 32 in the 535.43-535.98 window), never by casting
 *    to one struct type.
 *  - Unknown is not zero: a field's known bit is set only when its getter succeeded.
 *  - One bad GPU must not hide the others: every NVML failure is recorded as a vg_gpu_error
 *    on the GPU it concerns (or on the list) and reading goes on; only a failed device count or
 *    running out of memory fails vg_nvml_read().
 *  - One hung GPU must not hide the others either: each GPU is read on a thread of its own and
 *    the caller waits for them only until its deadline. A GPU whose thread has not answered by
 *    then is marked hung (its figures unknown, the call it is stuck in named); the thread is
 *    left to finish alone and the next read does not queue another behind it. struct vg_nvml is
 *    reference counted by its owner and every such thread, so the library is shut down and
 *    closed only once no call is in it (NVML must not be unloaded under a running call).
 *  - The driver's numbers are not trusted to be sane: the device count, the MIG device count
 *    and the process lists are capped at what they can mean, and sums saturate.
 *
 * No globals: the library handle and the function table live in struct vg_nvml.
 */
#include "gpu/nvml.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpu/nvml_abi.h"
#include "util/array.h"
#include "util/clock.h"
#include "util/sat.h"

#define VG_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Process-list kinds and versions: the two indices of vg_nvml_fns.procs. */
enum { VG_PT_COMPUTE, VG_PT_GRAPHICS, VG_PT_MPS, VG_PT_N };
enum { VG_PV3, VG_PV2, VG_PV1, VG_PV_N };

/* Bounds for the process-list size/fill loop: tries after the size query, and entries. */
#define VG_NVML_PROC_TRIES 8
#define VG_NVML_PROC_MAX ((size_t)1 << 20)
/* Largest buffer offered to a string getter that keeps answering INSUFFICIENT_SIZE. */
#define VG_NVML_STRING_MAX 4096u
/* MIG devices read per GPU: GPUs have at most 7 today; a larger count from the driver is
 * recorded as an error and only this many are read. */
#define VG_NVML_MAX_MIG 64u

/* One slot per symbol; arrays hold a versioned family, newest first. */
struct vg_nvml_fns {
    nvml_void_fn init[2]; /* nvmlInit_v2, nvmlInit */
    nvml_void_fn shutdown;
    nvml_error_string_fn error_string;
    nvml_sys_string_fn driver_version;
    nvml_sys_string_fn nvml_version;
    nvml_sys_int_fn cuda_version[2];   /* _v2, v1 */
    nvml_count_fn count[2];            /* _v2, v1 */
    nvml_handle_by_index_fn handle[2]; /* _v2, v1 */
    nvml_dev_string_fn name;
    nvml_dev_string_fn uuid;
    nvml_dev_uint_fn minor;
    nvml_pci_fn pci[3]; /* _v3, _v2, v1 */
    nvml_mem_v2_fn mem_v2;
    nvml_mem_fn mem_v1;
    nvml_util_fn util;
    nvml_dev_2int_fn cc;
    nvml_dev_uint_fn persistence;
    nvml_dev_uint_fn compute_mode;
    nvml_dev_2uint_fn mig_mode;
    nvml_dev_uint_fn max_mig;
    nvml_mig_handle_fn mig_handle;
    nvml_dev_uint_fn gpu_instance;
    nvml_dev_uint_fn compute_instance;
    nvml_procs_fn procs[VG_PT_N][VG_PV_N];
    nvml_proc_util_fn proc_util;
    nvml_temp_fn temperature;
    nvml_dev_uint_fn power;
    nvml_dev_uint_fn power_limit[2]; /* enforced, management */
    nvml_dev_uint_fn fan;
    nvml_dev_2uint_fn ecc_mode;
    nvml_ecc_total_fn ecc_total;
    nvml_retired_fn retired;
    nvml_dev_uint_fn retired_pending;
    nvml_remap_fn remap;
    nvml_fields_fn fields;
    nvml_dev_u64_fn clocks[2]; /* event reasons, throttle reasons (the older name) */
    void *conf_compute_mem;    /* presence only: the 535 window */
    void *process_detail_list; /* presence only: the 535 window */
};

/* What one GPU's read learnt about the driver's API generations; merged into the list in GPU
 * order after the reads, so the first GPU that answered decides, as when they ran in turn. */
struct vg_nvml_apis {
    const char *proc_api;
    const char *mem_api;
    bool stride_535;
};

/* One GPU index's reader, across reads (guarded by vg_nvml.lock). */
struct vg_nvml_slot {
    bool busy;             /* a thread is reading this GPU (perhaps stuck in the driver) */
    uint64_t read;         /* the read its answer is for (a later read takes a busy one over) */
    struct timespec since; /* CLOCK_MONOTONIC: when it started */
    const char *at;        /* the NVML function it is in or last called (a vg_nvml_syms name) */
    bool done;             /* its answer for the waiting read is below, not yet taken */
    bool counted;          /* that read waits for it (in vg_nvml.pending) */
    int rc;                /* 0 or -ENOMEM */
    struct vg_gpu gpu;
    struct vg_nvml_apis apis;
    struct vg_gpu ident; /* the identity read so far (name, UUID, minor, PCI), published as it
                          * is read, so a GPU that hangs later still says which it is */
};

struct vg_nvml {
    pthread_mutex_t lock;       /* guards refs, reads, waiting, pending and slots */
    pthread_cond_t answered;    /* CLOCK_MONOTONIC: a GPU reader answered */
    int refs;                   /* the owner, and every GPU reader thread still running */
    uint64_t reads;             /* GPU reads started */
    uint64_t waiting;           /* the read whose caller waits for answers; 0: none */
    size_t pending;             /* answers that read still waits for */
    struct vg_nvml_slot *slots; /* VG_NVML_MAX_GPUS */
    void *dl;
    char *path;
    int initialised;
    int r535;     /* the _v3 process lists write 32-byte entries */
    bool sensors; /* read temperature, power and fan too (vg_nvml_want_sensors) */
    struct vg_nvml_fns f;
};

struct vg_nvml_sym {
    const char *name;
    size_t off;
};

#define VG_SYM(name, slot)                                                                         \
    {                                                                                              \
        name, offsetof(struct vg_nvml_fns, slot)                                                   \
    }

/* Every symbol the client uses; vg_nvml_resolve() fills the slots in one loop. */
static const struct vg_nvml_sym vg_nvml_syms[] = {
    VG_SYM("nvmlInit_v2", init[0]),
    VG_SYM("nvmlInit", init[1]),
    VG_SYM("nvmlShutdown", shutdown),
    VG_SYM("nvmlErrorString", error_string),
    VG_SYM("nvmlSystemGetDriverVersion", driver_version),
    VG_SYM("nvmlSystemGetNVMLVersion", nvml_version),
    VG_SYM("nvmlSystemGetCudaDriverVersion_v2", cuda_version[0]),
    VG_SYM("nvmlSystemGetCudaDriverVersion", cuda_version[1]),
    VG_SYM("nvmlDeviceGetCount_v2", count[0]),
    VG_SYM("nvmlDeviceGetCount", count[1]),
    VG_SYM("nvmlDeviceGetHandleByIndex_v2", handle[0]),
    VG_SYM("nvmlDeviceGetHandleByIndex", handle[1]),
    VG_SYM("nvmlDeviceGetName", name),
    VG_SYM("nvmlDeviceGetUUID", uuid),
    VG_SYM("nvmlDeviceGetMinorNumber", minor),
    VG_SYM("nvmlDeviceGetPciInfo_v3", pci[0]),
    VG_SYM("nvmlDeviceGetPciInfo_v2", pci[1]),
    VG_SYM("nvmlDeviceGetPciInfo", pci[2]),
    VG_SYM("nvmlDeviceGetMemoryInfo_v2", mem_v2),
    VG_SYM("nvmlDeviceGetMemoryInfo", mem_v1),
    VG_SYM("nvmlDeviceGetUtilizationRates", util),
    VG_SYM("nvmlDeviceGetCudaComputeCapability", cc),
    VG_SYM("nvmlDeviceGetPersistenceMode", persistence),
    VG_SYM("nvmlDeviceGetComputeMode", compute_mode),
    VG_SYM("nvmlDeviceGetMigMode", mig_mode),
    VG_SYM("nvmlDeviceGetMaxMigDeviceCount", max_mig),
    VG_SYM("nvmlDeviceGetMigDeviceHandleByIndex", mig_handle),
    VG_SYM("nvmlDeviceGetGpuInstanceId", gpu_instance),
    VG_SYM("nvmlDeviceGetComputeInstanceId", compute_instance),
    VG_SYM("nvmlDeviceGetComputeRunningProcesses_v3", procs[VG_PT_COMPUTE][VG_PV3]),
    VG_SYM("nvmlDeviceGetComputeRunningProcesses_v2", procs[VG_PT_COMPUTE][VG_PV2]),
    VG_SYM("nvmlDeviceGetComputeRunningProcesses", procs[VG_PT_COMPUTE][VG_PV1]),
    VG_SYM("nvmlDeviceGetGraphicsRunningProcesses_v3", procs[VG_PT_GRAPHICS][VG_PV3]),
    VG_SYM("nvmlDeviceGetGraphicsRunningProcesses_v2", procs[VG_PT_GRAPHICS][VG_PV2]),
    VG_SYM("nvmlDeviceGetGraphicsRunningProcesses", procs[VG_PT_GRAPHICS][VG_PV1]),
    VG_SYM("nvmlDeviceGetMPSComputeRunningProcesses_v3", procs[VG_PT_MPS][VG_PV3]),
    VG_SYM("nvmlDeviceGetMPSComputeRunningProcesses_v2", procs[VG_PT_MPS][VG_PV2]),
    VG_SYM("nvmlDeviceGetMPSComputeRunningProcesses", procs[VG_PT_MPS][VG_PV1]),
    VG_SYM("nvmlDeviceGetProcessUtilization", proc_util),
    VG_SYM("nvmlDeviceGetTemperature", temperature),
    VG_SYM("nvmlDeviceGetPowerUsage", power),
    VG_SYM("nvmlDeviceGetEnforcedPowerLimit", power_limit[0]),
    VG_SYM("nvmlDeviceGetPowerManagementLimit", power_limit[1]),
    VG_SYM("nvmlDeviceGetFanSpeed", fan),
    VG_SYM("nvmlDeviceGetEccMode", ecc_mode),
    VG_SYM("nvmlDeviceGetTotalEccErrors", ecc_total),
    VG_SYM("nvmlDeviceGetRetiredPages", retired),
    VG_SYM("nvmlDeviceGetRetiredPagesPendingStatus", retired_pending),
    VG_SYM("nvmlDeviceGetRemappedRows", remap),
    VG_SYM("nvmlDeviceGetFieldValues", fields),
    VG_SYM("nvmlDeviceGetCurrentClocksEventReasons", clocks[0]),
    VG_SYM("nvmlDeviceGetCurrentClocksThrottleReasons", clocks[1]),
    VG_SYM("nvmlDeviceGetConfComputeMemSizeInfo", conf_compute_mem),
    VG_SYM("nvmlDeviceGetRunningProcessDetailList", process_detail_list),
};

/* Slots are filled from dlsym's void * by memcpy, which POSIX makes valid for functions. */
_Static_assert(sizeof(void *) == sizeof(nvml_void_fn), "function and data pointers differ");

/* Our own text for each status, used when the library's nvmlErrorString gives none. */
static const struct {
    int status;
    const char *text;
} vg_nvml_texts[] = {
    {NVML_SUCCESS, "Success"},
    {NVML_ERROR_UNINITIALIZED, "Uninitialized"},
    {NVML_ERROR_INVALID_ARGUMENT, "Invalid Argument"},
    {NVML_ERROR_NOT_SUPPORTED, "Not Supported"},
    {NVML_ERROR_NO_PERMISSION, "Insufficient Permissions"},
    {NVML_ERROR_ALREADY_INITIALIZED, "Already Initialized"},
    {NVML_ERROR_NOT_FOUND, "Not Found"},
    {NVML_ERROR_INSUFFICIENT_SIZE, "Insufficient Size"},
    {NVML_ERROR_INSUFFICIENT_POWER, "Insufficient External Power"},
    {NVML_ERROR_DRIVER_NOT_LOADED, "Driver Not Loaded"},
    {NVML_ERROR_TIMEOUT, "Timeout"},
    {NVML_ERROR_IRQ_ISSUE, "Interrupt Request Issue"},
    {NVML_ERROR_LIBRARY_NOT_FOUND, "NVML Shared Library Not Found"},
    {NVML_ERROR_FUNCTION_NOT_FOUND, "Function Not Found"},
    {NVML_ERROR_CORRUPTED_INFOROM, "Corrupted infoROM"},
    {NVML_ERROR_GPU_IS_LOST, "GPU is lost"},
    {NVML_ERROR_RESET_REQUIRED, "GPU requires restart"},
    {NVML_ERROR_OPERATING_SYSTEM, "The operating system has blocked the request"},
    {NVML_ERROR_LIB_RM_VERSION_MISMATCH, "RM has detected an NVML/RM version mismatch"},
    {NVML_ERROR_IN_USE, "In use by another client"},
    {NVML_ERROR_MEMORY, "Insufficient Memory"},
    {NVML_ERROR_NO_DATA, "No data"},
    {NVML_ERROR_VGPU_ECC_NOT_SUPPORTED, "ECC is not supported on vGPU"},
    {NVML_ERROR_INSUFFICIENT_RESOURCES, "Insufficient resources"},
    {NVML_ERROR_FREQ_NOT_SUPPORTED, "Frequency not supported"},
    {NVML_ERROR_ARGUMENT_VERSION_MISMATCH, "Argument version mismatch"},
    {NVML_ERROR_DEPRECATED, "Deprecated"},
    {NVML_ERROR_NOT_READY, "Not ready"},
    {NVML_ERROR_GPU_NOT_FOUND, "GPU not found"},
    {NVML_ERROR_INVALID_STATE, "Invalid state"},
    {NVML_ERROR_UNKNOWN, "Unknown Error"},
};

/* ---- symbols ---------------------------------------------------------------------------- */

static void vg_nvml_resolve(struct vg_nvml *n)
{
    for (size_t i = 0; i < VG_ARRAY_LEN(vg_nvml_syms); i++) {
        void *sym = dlsym(n->dl, vg_nvml_syms[i].name);
        memcpy((char *)&n->f + vg_nvml_syms[i].off, &sym, sizeof sym);
    }
}

static int vg_nvml_slot_set(const struct vg_nvml *n, size_t off)
{
    void *sym;
    memcpy(&sym, (const char *)&n->f + off, sizeof sym);
    return sym != NULL;
}

/* The symbol name of a slot in n->f, for error messages: one table, no repeated strings. */
static const char *vg_nvml_name_of(const struct vg_nvml *n, const void *slot)
{
    size_t off = (size_t)((const char *)slot - (const char *)&n->f);
    for (size_t i = 0; i < VG_ARRAY_LEN(vg_nvml_syms); i++)
        if (vg_nvml_syms[i].off == off)
            return vg_nvml_syms[i].name;
    return "nvml";
}

int vg_nvml_has_symbol(const struct vg_nvml *nvml, const char *name)
{
    if (!nvml || !name)
        return 0;
    for (size_t i = 0; i < VG_ARRAY_LEN(vg_nvml_syms); i++)
        if (strcmp(vg_nvml_syms[i].name, name) == 0)
            return vg_nvml_slot_set(nvml, vg_nvml_syms[i].off);
    return 0;
}

/* ---- status texts ----------------------------------------------------------------------- */

static const char *vg_nvml_own_text(int status)
{
    for (size_t i = 0; i < VG_ARRAY_LEN(vg_nvml_texts); i++)
        if (vg_nvml_texts[i].status == status)
            return vg_nvml_texts[i].text;
    return NULL;
}

/* A driver may answer an unknown code with NULL or junk; accept only short printable text.
 * (A wild pointer cannot be detected; NULL and non-text can.) */
static int vg_nvml_plausible_text(const char *s)
{
    if (!s)
        return 0;
    for (size_t i = 0; i < 256; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\0')
            return i > 0;
        if (c < 0x20 || c > 0x7e)
            return 0;
    }
    return 0;
}

static const char *vg_nvml_lib_text(const struct vg_nvml *n, int status)
{
    if (!n || !n->f.error_string)
        return NULL;
    const char *s = n->f.error_string(status);
    return vg_nvml_plausible_text(s) ? s : NULL;
}

const char *vg_nvml_strerror(const struct vg_nvml *nvml, int status)
{
    const char *s = vg_nvml_lib_text(nvml, status);
    if (!s)
        s = vg_nvml_own_text(status);
    return s ? s : "unknown NVML error";
}

/* The text for a status in messages; a code we do not know carries its number so it can be
 * looked up. Heap; NULL on out of memory. */
static char *vg_nvml_status_text(const struct vg_nvml *n, int status)
{
    const char *lib = vg_nvml_lib_text(n, status);
    const char *own = vg_nvml_own_text(status);
    char *s = NULL;
    int r;
    if (own)
        r = asprintf(&s, "%s", lib ? lib : own);
    else if (lib)
        r = asprintf(&s, "%s (NVML error %d)", lib, status);
    else
        r = asprintf(&s, "unknown NVML error %d", status);
    return r < 0 ? NULL : s;
}

static int vg_nvml_errno(int status)
{
    switch (status) {
    case NVML_ERROR_DRIVER_NOT_LOADED:
    case NVML_ERROR_LIBRARY_NOT_FOUND:
    case NVML_ERROR_GPU_NOT_FOUND:
        return -ENODEV;
    case NVML_ERROR_NO_PERMISSION:
        return -EACCES;
    case NVML_ERROR_TIMEOUT:
        return -ETIMEDOUT;
    default:
        return -EIO;
    }
}

/* ---- open / free ------------------------------------------------------------------------ */

static const char *vg_nvml_pick_path(const char *path)
{
    if (path && *path)
        return path;
    /* secure_getenv: a setuid build must not load a library the caller chose. */
    const char *env = secure_getenv("VRAMGUARD_NVML");
    return env && *env ? env : VG_NVML_DEFAULT_LIB;
}

static int vg_nvml_init(struct vg_nvml *n, struct vg_err *err)
{
    nvml_void_fn init = n->f.init[0] ? n->f.init[0] : n->f.init[1];
    if (!init)
        return vg_err_set(err, -ENOSYS, "cannot initialise NVML from '%s': no nvmlInit symbol",
                          n->path);
    nvmlReturn_t st = init();
    if (st == NVML_SUCCESS) {
        n->initialised = 1;
        return 0;
    }
    char *text = vg_nvml_status_text(n, st);
    int code = vg_err_set(err, vg_nvml_errno(st), "cannot initialise NVML from '%s': %s", n->path,
                          text ? text : "out of memory");
    free(text);
    return code;
}

/* A struct vg_nvml with its lock and slots, nothing loaded; NULL on out of memory. */
static struct vg_nvml *vg_nvml_new(const char *path)
{
    struct vg_nvml *n = calloc(1, sizeof *n);
    if (!n)
        return NULL;
    n->slots = calloc(VG_NVML_MAX_GPUS, sizeof *n->slots);
    n->path = strdup(path);
    if (!n->slots || !n->path) {
        free(n->slots);
        free(n->path);
        free(n);
        return NULL;
    }
    pthread_condattr_t cattr;
    pthread_condattr_init(&cattr);
    pthread_condattr_setclock(&cattr, CLOCK_MONOTONIC);
    pthread_cond_init(&n->answered, &cattr);
    pthread_condattr_destroy(&cattr);
    pthread_mutex_init(&n->lock, NULL);
    n->refs = 1;
    return n;
}

int vg_nvml_open(const char *path, struct vg_nvml **out, struct vg_err *err)
{
    *out = NULL;
    path = vg_nvml_pick_path(path);
    struct vg_nvml *n = vg_nvml_new(path);
    if (!n)
        return vg_err_set(err, -ENOMEM, "out of memory loading NVML");
    dlerror();
    n->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!n->dl) {
        const char *why = dlerror();
        int code = vg_err_set(err, -ENOENT, "cannot load NVML from '%s': %s", path,
                              why ? why : "unknown dlopen error");
        vg_nvml_free(n);
        return code;
    }
    vg_nvml_resolve(n);
    n->r535 = n->f.conf_compute_mem && !n->f.process_detail_list;
    int r = vg_nvml_init(n, err);
    if (r < 0) {
        vg_nvml_free(n);
        return r;
    }
    *out = n;
    return 0;
}

/* The last one out (the owner, or a GPU reader that was stuck in the driver) shuts NVML down
 * and closes the library. */
static void vg_nvml_destroy(struct vg_nvml *n)
{
    if (n->initialised && n->f.shutdown)
        n->f.shutdown();
    if (n->dl)
        dlclose(n->dl);
    for (size_t i = 0; i < VG_NVML_MAX_GPUS; i++) {
        vg_gpu_release(&n->slots[i].gpu);
        vg_gpu_release(&n->slots[i].ident);
    }
    pthread_cond_destroy(&n->answered);
    pthread_mutex_destroy(&n->lock);
    free(n->slots);
    free(n->path);
    free(n);
}

void vg_nvml_free(struct vg_nvml *nvml)
{
    if (!nvml)
        return;
    pthread_mutex_lock(&nvml->lock);
    int refs = --nvml->refs;
    pthread_mutex_unlock(&nvml->lock);
    if (refs == 0)
        vg_nvml_destroy(nvml);
}

/* ---- recording errors ------------------------------------------------------------------- */

/*
 * Which failures are recorded. NVML answers NOT_SUPPORTED (or FUNCTION_NOT_FOUND) when a GPU or
 * driver simply lacks a feature; for the optional fields (utilisation, compute capability,
 * persistence and compute mode, MIG mode and MIG devices, instance ids, reserved memory,
 * driver/NVML/CUDA versions, the graphics and MPS process lists) that only leaves the field
 * unknown and is not recorded. Every other failure, and any failure of the identity (handle,
 * name, UUID, minor, PCI), memory and compute-process getters, is recorded. GPU_IS_LOST marks
 * the device lost and is recorded once per device: the later getters would only repeat it.
 */
static int vg_nvml_quiet(nvmlReturn_t st, int optional)
{
    return optional && (st == NVML_ERROR_NOT_SUPPORTED || st == NVML_ERROR_FUNCTION_NOT_FOUND);
}

static int vg_nvml_add_error(struct vg_gpu_error **errs, size_t *nerrs, size_t *cap,
                             const char *func, int status, char *msg)
{
    char *f = strdup(func);
    if (!f || !msg || vg_array_grow(errs, cap, *nerrs + 1, sizeof(**errs))) {
        free(f);
        free(msg);
        return -ENOMEM;
    }
    (*errs)[(*nerrs)++] = (struct vg_gpu_error){.func = f, .status = status, .msg = msg};
    return 0;
}

/* Record a failure not tied to one GPU; returns 0 or -ENOMEM. */
static int vg_nvml_list_fail(const struct vg_nvml *n, struct vg_gpu_list *list, const void *slot,
                             nvmlReturn_t st, int optional)
{
    if (vg_nvml_quiet(st, optional))
        return 0;
    const char *func = vg_nvml_name_of(n, slot);
    char *text = vg_nvml_status_text(n, st), *msg = NULL;
    if (text && asprintf(&msg, "%s: %s", func, text) < 0)
        msg = NULL;
    free(text);
    return vg_nvml_add_error(&list->errors, &list->nerrors, &list->errors_cap, func, st, msg);
}

/* What one device read needs: the client, the device and its label, where to note the API
 * generations that answered, and the slot of the GPU reader it runs in. */
struct vg_nvml_dev {
    struct vg_nvml *nvml;
    struct vg_nvml_apis *apis;
    struct vg_gpu *g;
    nvmlDevice_t dev;
    long parent; /* the parent GPU's index for a MIG device, else -1 */
    size_t slot; /* index into nvml->slots */
};

/* Note the call d's reader is about to make, so that if it never returns the GPU can say
 * where it hangs. */
static void vg_nvml_at(const struct vg_nvml_dev *d, const void *fn_slot)
{
    const char *name = vg_nvml_name_of(d->nvml, fn_slot);
    pthread_mutex_lock(&d->nvml->lock);
    d->nvml->slots[d->slot].at = name;
    pthread_mutex_unlock(&d->nvml->lock);
}

/* Record a failed call on d's device ("GPU 2: func: text"); returns 0 or -ENOMEM. */
static int vg_nvml_fail(struct vg_nvml_dev *d, const void *slot, nvmlReturn_t st, int optional)
{
    if (vg_nvml_quiet(st, optional))
        return 0;
    if (st == NVML_ERROR_GPU_IS_LOST) {
        if (d->g->lost)
            return 0;
        d->g->lost = true;
    }
    const char *func = vg_nvml_name_of(d->nvml, slot);
    char *text = vg_nvml_status_text(d->nvml, st), *msg = NULL;
    int r = 0;
    if (text && d->parent >= 0)
        r = asprintf(&msg, "GPU %ld/MIG %u: %s: %s", d->parent, d->g->index, func, text);
    else if (text)
        r = asprintf(&msg, "GPU %u: %s: %s", d->g->index, func, text);
    if (r < 0)
        msg = NULL;
    free(text);
    return vg_nvml_add_error(&d->g->errors, &d->g->nerrors, &d->g->errors_cap, func, st, msg);
}

/* "GPU 2" or "GPU 2/MIG 0", for messages. */
static int vg_nvml_label(const struct vg_nvml_dev *d, char *out, size_t n)
{
    int r = d->parent >= 0 ? snprintf(out, n, "GPU %ld/MIG %u", d->parent, d->g->index)
                           : snprintf(out, n, "GPU %u", d->g->index);
    return r < 0 || (size_t)r >= n ? -1 : 0;
}

/* Record that a count the driver gave through slot (got) is beyond what it can mean (max):
 * the call succeeded (status 0), its number did not. 0 or -ENOMEM. */
static int vg_nvml_implausible(struct vg_nvml_dev *d, const void *slot, const char *what,
                               unsigned got, unsigned max)
{
    const char *func = vg_nvml_name_of(d->nvml, slot);
    char label[48];
    char *msg = NULL;
    if (vg_nvml_label(d, label, sizeof label) < 0 ||
        asprintf(&msg,
                 "%s: %s: the driver reports %u %s, more than a GPU can have (at most %u): "
                 "only the first %u are read",
                 label, func, got, what, max, max) < 0)
        msg = NULL;
    return vg_nvml_add_error(&d->g->errors, &d->g->nerrors, &d->g->errors_cap, func, NVML_SUCCESS,
                             msg);
}

/*
 * The common end of a per-device getter call: st is what the getter in slot answered. Returns
 * 1 when it succeeded (bit, the field's known bit, is then set), 0 when it failed (recorded by
 * vg_nvml_fail), or -ENOMEM. The call itself stays with each reader, typed: one function
 * calling every getter would need casts between function-pointer types.
 */
static int vg_nvml_got(struct vg_nvml_dev *d, const void *slot, nvmlReturn_t st, int optional,
                       unsigned bit)
{
    if (st != NVML_SUCCESS)
        return vg_nvml_fail(d, slot, st, optional);
    d->g->known |= bit;
    return 1;
}

/* ---- strings ---------------------------------------------------------------------------- */

/* Call a string getter (device or system shape) starting at NVML's documented size, growing
 * on INSUFFICIENT_SIZE. On success *out is a heap copy. Returns 0 or -ENOMEM; the NVML status
 * is in *st. */
static int vg_nvml_get_string(nvml_dev_string_fn dfn, nvml_sys_string_fn sfn, nvmlDevice_t dev,
                              unsigned size, char **out, nvmlReturn_t *st)
{
    char *buf = NULL;
    *st = NVML_ERROR_INSUFFICIENT_SIZE;
    for (; *st == NVML_ERROR_INSUFFICIENT_SIZE && size <= VG_NVML_STRING_MAX; size *= 2) {
        char *nb = realloc(buf, size);
        if (!nb) {
            free(buf);
            return -ENOMEM;
        }
        buf = nb;
        memset(buf, 0, size);
        *st = dfn ? dfn(dev, buf, size) : sfn(buf, size);
        /* No NUL inside the buffer: treat as too small rather than cut the text. */
        if (*st == NVML_SUCCESS && strnlen(buf, size) == size)
            *st = NVML_ERROR_INSUFFICIENT_SIZE;
    }
    if (*st != NVML_SUCCESS) {
        free(buf);
        return 0;
    }
    *out = buf;
    return 0;
}

static int vg_nvml_dev_string(struct vg_nvml_dev *d, nvml_dev_string_fn const *slot, unsigned size,
                              unsigned bit, char **out)
{
    nvmlReturn_t st;
    if (!*slot)
        return 0;
    vg_nvml_at(d, slot);
    int r = vg_nvml_get_string(*slot, NULL, d->dev, size, out, &st);
    if (r < 0)
        return r;
    if (st != NVML_SUCCESS)
        return vg_nvml_fail(d, slot, st, 0);
    d->g->known |= bit;
    return 0;
}

static int vg_nvml_read_name(struct vg_nvml_dev *d)
{
    return vg_nvml_dev_string(d, &d->nvml->f.name, NVML_DEVICE_NAME_V2_BUFFER_SIZE, VG_GPU_K_NAME,
                              &d->g->name);
}

static int vg_nvml_read_uuid(struct vg_nvml_dev *d)
{
    return vg_nvml_dev_string(d, &d->nvml->f.uuid, NVML_DEVICE_UUID_V2_BUFFER_SIZE, VG_GPU_K_UUID,
                              &d->g->uuid);
}

/* ---- per-device fields ------------------------------------------------------------------ */

static int vg_nvml_read_minor(struct vg_nvml_dev *d)
{
    const struct vg_nvml_fns *f = &d->nvml->f;
    unsigned v = 0;
    if (!f->minor)
        return 0;
    vg_nvml_at(d, &f->minor);
    int r = vg_nvml_got(d, &f->minor, f->minor(d->dev, &v), 0, VG_GPU_K_MINOR);
    if (r <= 0)
        return r;
    d->g->minor = v;
    return 0;
}

/* v1 fills only the 16-byte legacy id, "0000:07:00.0" with a 16-bit domain; widen it to the
 * form later versions give ("00000000:07:00.0") so ids compare equal whichever answered. */
static int vg_nvml_legacy_bus_id(const nvmlPciInfo_t *pci, char **out)
{
    size_t len = strnlen(pci->busIdLegacy, sizeof pci->busIdLegacy);
    const char *colon = memchr(pci->busIdLegacy, ':', len);
    int r;
    if (colon) {
        int rest = (int)(len - (size_t)(colon - pci->busIdLegacy));
        r = asprintf(out, "%08X%.*s", pci->domain, rest, colon);
    } else
        r = (*out = strndup(pci->busIdLegacy, len)) ? 0 : -1;
    if (r < 0) {
        *out = NULL;
        return -ENOMEM;
    }
    return 0;
}

static int vg_nvml_read_pci(struct vg_nvml_dev *d)
{
    const struct vg_nvml_fns *f = &d->nvml->f;
    size_t v = 0;
    while (v < VG_ARRAY_LEN(f->pci) && !f->pci[v])
        v++;
    if (v == VG_ARRAY_LEN(f->pci))
        return 0;
    nvmlPciInfo_t pci;
    memset(&pci, 0, sizeof pci);
    vg_nvml_at(d, &f->pci[v]);
    nvmlReturn_t st = f->pci[v](d->dev, &pci);
    if (st != NVML_SUCCESS)
        return vg_nvml_fail(d, &f->pci[v], st, 0);
    size_t len = strnlen(pci.busId, sizeof pci.busId);
    int r;
    if (v == VG_ARRAY_LEN(f->pci) - 1 || len == 0 || len == sizeof pci.busId)
        r = vg_nvml_legacy_bus_id(&pci, &d->g->pci_bus_id);
    else
        r = (d->g->pci_bus_id = strndup(pci.busId, len)) ? 0 : -ENOMEM;
    if (r < 0)
        return r;
    d->g->pci_domain = pci.domain;
    d->g->pci_bus = pci.bus;
    d->g->pci_device = pci.device;
    d->g->known |= VG_GPU_K_PCI;
    return 0;
}

/* Process lists and memory fall back to the next older version on these answers. */
static int vg_nvml_try_older(nvmlReturn_t st)
{
    return st == NVML_ERROR_FUNCTION_NOT_FOUND || st == NVML_ERROR_NOT_SUPPORTED ||
           st == NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
}

static void vg_nvml_set_mem(struct vg_nvml_dev *d, uint64_t total, uint64_t used, uint64_t free_,
                            const char *api)
{
    d->g->mem_total = total;
    d->g->mem_used = used;
    d->g->mem_free = free_;
    d->g->known |= VG_GPU_K_MEM;
    if (!d->apis->mem_api)
        d->apis->mem_api = api;
}

static int vg_nvml_read_memory(struct vg_nvml_dev *d)
{
    const struct vg_nvml_fns *f = &d->nvml->f;
    nvmlReturn_t st = NVML_SUCCESS;
    if (f->mem_v2) {
        nvmlMemory_v2_t m;
        memset(&m, 0, sizeof m);
        m.version = nvmlMemory_v2;
        vg_nvml_at(d, &f->mem_v2);
        st = f->mem_v2(d->dev, &m);
        if (st == NVML_SUCCESS) {
            vg_nvml_set_mem(d, m.total, m.used, m.free, "v2");
            d->g->mem_reserved = m.reserved;
            d->g->known |= VG_GPU_K_RESERVED;
            return 0;
        }
        if (!vg_nvml_try_older(st) || !f->mem_v1)
            return vg_nvml_fail(d, &f->mem_v2, st, 0);
    }
    if (!f->mem_v1)
        return 0;
    nvmlMemory_t m;
    memset(&m, 0, sizeof m);
    vg_nvml_at(d, &f->mem_v1);
    st = f->mem_v1(d->dev, &m);
    if (st != NVML_SUCCESS)
        return vg_nvml_fail(d, &f->mem_v1, st, 0);
    vg_nvml_set_mem(d, m.total, m.used, m.free, "v1");
    return 0;
}

/* The optional fields below: a getter the driver lacks, or one answering NOT_SUPPORTED, leaves
 * the field unknown (see vg_nvml_quiet). */
static int vg_nvml_read_util(struct vg_nvml_dev *d)
{
    const struct vg_nvml_fns *f = &d->nvml->f;
    nvmlUtilization_t u = {0, 0};
    if (!f->util)
        return 0;
    vg_nvml_at(d, &f->util);
    int r = vg_nvml_got(d, &f->util, f->util(d->dev, &u), 1, VG_GPU_K_UTIL);
    if (r <= 0)
        return r;
    d->g->util_gpu = u.gpu;
    d->g->util_mem = u.memory;
    return 0;
}

static int vg_nvml_read_cc(struct vg_nvml_dev *d)
{
    const struct vg_nvml_fns *f = &d->nvml->f;
    int major = 0, minor = 0;
    if (!f->cc)
        return 0;
    vg_nvml_at(d, &f->cc);
    int r = vg_nvml_got(d, &f->cc, f->cc(d->dev, &major, &minor), 1, VG_GPU_K_CC);
    if (r <= 0)
        return r;
    d->g->cc_major = major;
    d->g->cc_minor = minor;
    return 0;
}

static int vg_nvml_read_persistence(struct vg_nvml_dev *d)
{
    const struct vg_nvml_fns *f = &d->nvml->f;
    unsigned v = 0;
    if (!f->persistence)
        return 0;
    vg_nvml_at(d, &f->persistence);
    int r = vg_nvml_got(d, &f->persistence, f->persistence(d->dev, &v), 1, VG_GPU_K_PERSIST);
    if (r <= 0)
        return r;
    d->g->persistence = v == NVML_FEATURE_ENABLED;
    return 0;
}

_Static_assert(VG_COMPUTE_DEFAULT == NVML_COMPUTEMODE_DEFAULT &&
                   VG_COMPUTE_EXCLUSIVE_THREAD == NVML_COMPUTEMODE_EXCLUSIVE_THREAD &&
                   VG_COMPUTE_PROHIBITED == NVML_COMPUTEMODE_PROHIBITED &&
                   VG_COMPUTE_EXCLUSIVE_PROCESS == NVML_COMPUTEMODE_EXCLUSIVE_PROCESS,
               "enum vg_compute_mode carries NVML's numbers unchanged");

static int vg_nvml_read_compute_mode(struct vg_nvml_dev *d)
{
    const struct vg_nvml_fns *f = &d->nvml->f;
    unsigned v = 0;
    if (!f->compute_mode)
        return 0;
    vg_nvml_at(d, &f->compute_mode);
    int r = vg_nvml_got(d, &f->compute_mode, f->compute_mode(d->dev, &v), 1, VG_GPU_K_COMPUTE_MODE);
    if (r <= 0)
        return r;
    d->g->compute_mode = v;
    return 0;
}

static int vg_nvml_read_mig_mode(struct vg_nvml_dev *d)
{
    const struct vg_nvml_fns *f = &d->nvml->f;
    unsigned cur = 0, pending = 0;
    if (!f->mig_mode)
        return 0;
    vg_nvml_at(d, &f->mig_mode);
    int r = vg_nvml_got(d, &f->mig_mode, f->mig_mode(d->dev, &cur, &pending), 1, VG_GPU_K_MIG_MODE);
    if (r <= 0)
        return r;
    d->g->mig_current = cur;
    d->g->mig_pending = pending;
    return 0;
}

/* A MIG device's GPU and compute instance ids; known only when both answered. */
static int vg_nvml_read_instance(struct vg_nvml_dev *d)
{
    const struct vg_nvml_fns *f = &d->nvml->f;
    unsigned gi = 0, ci = 0;
    if (!f->gpu_instance || !f->compute_instance)
        return 0;
    vg_nvml_at(d, &f->gpu_instance);
    int r = vg_nvml_got(d, &f->gpu_instance, f->gpu_instance(d->dev, &gi), 1, 0);
    if (r > 0) {
        vg_nvml_at(d, &f->compute_instance);
        r = vg_nvml_got(d, &f->compute_instance, f->compute_instance(d->dev, &ci), 1,
                        VG_GPU_K_INSTANCE);
    }
    if (r <= 0)
        return r;
    d->g->gpu_instance = gi;
    d->g->compute_instance = ci;
    return 0;
}

/* ---- process lists ---------------------------------------------------------------------- */

/*
 * The two-call pattern: ask for the size with an empty buffer, allocate with headroom, fill.
 * The list can grow between the calls (or a driver can under-report), so INSUFFICIENT_SIZE is
 * retried with at least the reported count and at least double the previous buffer, a bounded
 * number of times. On success *buf (heap, may be NULL when empty) holds *n entries of stride
 * bytes. Returns 0 or -ENOMEM; the NVML status is in *st.
 */
static int vg_nvml_call_procs(nvml_procs_fn fn, nvmlDevice_t dev, size_t stride,
                              unsigned char **buf, unsigned *n, nvmlReturn_t *st)
{
    unsigned char *b = NULL;
    size_t cap = 0;
    unsigned count = 0;
    *st = fn(dev, &count, NULL);
    for (int tries = 0; *st == NVML_ERROR_INSUFFICIENT_SIZE && tries < VG_NVML_PROC_TRIES;
         tries++) {
        size_t want = (size_t)count + count / 4 + 4;
        if (want <= cap)
            want = cap * 2;
        if (want > VG_NVML_PROC_MAX)
            break;
        unsigned char *nb = realloc(b, want * stride);
        if (!nb) {
            free(b);
            return -ENOMEM;
        }
        b = nb;
        memset(b, 0, want * stride);
        cap = want;
        count = (unsigned)cap;
        *st = fn(dev, &count, b);
    }
    if (*st != NVML_SUCCESS) {
        free(b);
        return 0;
    }
    *buf = b;
    *n = count < cap ? count : (unsigned)cap; /* never trust a count beyond the buffer */
    return 0;
}

static size_t vg_nvml_stride(const struct vg_nvml *n, int version)
{
    if (version == VG_PV1)
        return sizeof(nvmlProcessInfo_v1_t);
    if (version == VG_PV3 && n->r535)
        return sizeof(nvmlProcessInfo_535_t);
    return sizeof(nvmlProcessInfo_v2_t);
}

/* Decode one entry by offsets, so every stride shares the v1/v2 field positions. */
static void vg_nvml_decode(const unsigned char *e, int version, unsigned type,
                           struct vg_gpu_proc *p)
{
    uint32_t pid, gi, ci;
    uint64_t used;
    memcpy(&pid, e + offsetof(nvmlProcessInfo_v2_t, pid), sizeof pid);
    memcpy(&used, e + offsetof(nvmlProcessInfo_v2_t, usedGpuMemory), sizeof used);
    memset(p, 0, sizeof *p);
    p->pid = pid;
    p->types = type;
    p->used_known = used != NVML_VALUE_NOT_AVAILABLE;
    p->used_bytes = p->used_known ? used : 0;
    p->bogus_pid = pid == 0 || pid == UINT32_MAX;
    if (version == VG_PV1)
        return;
    memcpy(&gi, e + offsetof(nvmlProcessInfo_v2_t, gpuInstanceId), sizeof gi);
    memcpy(&ci, e + offsetof(nvmlProcessInfo_v2_t, computeInstanceId), sizeof ci);
    /* Outside MIG the driver writes 0xFFFFFFFF: no instance, not instance 4294967295. */
    if (gi != UINT32_MAX) {
        p->instance_known = true;
        p->gpu_instance = gi;
        p->compute_instance = ci;
    }
}

/*
 * Fold p into the entry q for the same pid. Within one list a pid appears more than once only
 * for separate contexts (e.g. on two MIG instances), so memory adds up (unknown if any part is;
 * saturating, since the driver's figures are not trusted). Across lists compute, graphics and
 * MPS report the same context, so a known value is taken and the larger of two known ones kept.
 */
static void vg_nvml_fold(struct vg_gpu_proc *q, const struct vg_gpu_proc *p, int same_list)
{
    q->types |= p->types;
    if (same_list) {
        q->used_known = q->used_known && p->used_known;
        q->used_bytes = q->used_known ? vg_sat_add(q->used_bytes, p->used_bytes) : 0;
        if (q->instance_known && (!p->instance_known || p->gpu_instance != q->gpu_instance ||
                                  p->compute_instance != q->compute_instance))
            q->instance_known = false;
        return;
    }
    if (p->used_known && (!q->used_known || p->used_bytes > q->used_bytes)) {
        q->used_known = true;
        q->used_bytes = p->used_bytes;
    }
    if (!q->instance_known && p->instance_known) {
        q->instance_known = true;
        q->gpu_instance = p->gpu_instance;
        q->compute_instance = p->compute_instance;
    }
}

static int vg_nvml_cmp_proc(const void *a, const void *b)
{
    uint32_t x = ((const struct vg_gpu_proc *)a)->pid, y = ((const struct vg_gpu_proc *)b)->pid;
    return x < y ? -1 : x > y;
}

/*
 * Decode a filled buffer and merge it into the device's process list, which stays sorted by
 * pid with one entry per pid: the list is sorted and folded (same list), then merged with
 * what the other lists gave. O(n log n), whatever the driver reports: a list of a million
 * entries must not cost a million squared.
 */
static int vg_nvml_add_procs(struct vg_gpu *g, const unsigned char *buf, unsigned count,
                             int version, size_t stride, unsigned type)
{
    struct vg_gpu_proc *mine = calloc(count ? count : 1, sizeof *mine);
    struct vg_gpu_proc *all = calloc(g->nprocs + count + 1, sizeof *all);
    if (!mine || !all) {
        free(mine);
        free(all);
        return -ENOMEM;
    }
    for (unsigned i = 0; i < count; i++)
        vg_nvml_decode(buf + (size_t)i * stride, version, type, &mine[i]);
    if (count > 1)
        qsort(mine, count, sizeof *mine, vg_nvml_cmp_proc);
    size_t nmine = 0;
    for (unsigned i = 0; i < count; i++) {
        if (nmine && mine[nmine - 1].pid == mine[i].pid)
            vg_nvml_fold(&mine[nmine - 1], &mine[i], 1);
        else
            mine[nmine++] = mine[i];
    }
    size_t a = 0, b = 0, n = 0;
    while (a < g->nprocs || b < nmine) {
        if (b == nmine || (a < g->nprocs && g->procs[a].pid < mine[b].pid)) {
            all[n++] = g->procs[a++];
        } else if (a == g->nprocs || mine[b].pid < g->procs[a].pid) {
            all[n++] = mine[b++];
        } else {
            all[n] = g->procs[a++];
            vg_nvml_fold(&all[n++], &mine[b++], 0);
        }
    }
    free(mine);
    free(g->procs);
    g->procs = all;
    g->nprocs = n;
    return 0;
}

static const char *const vg_nvml_proc_api[VG_PV_N] = {"v3", "v2", "v1"};
static const unsigned vg_nvml_ptype_bit[VG_PT_N] = {VG_PTYPE_COMPUTE, VG_PTYPE_GRAPHICS,
                                                    VG_PTYPE_MPS};

static void vg_nvml_note_proc_api(struct vg_nvml_dev *d, int version)
{
    if (!d->apis->proc_api)
        d->apis->proc_api = vg_nvml_proc_api[version];
    if (version == VG_PV3 && d->nvml->r535)
        d->apis->stride_535 = true;
}

/* One list (compute, graphics or MPS), newest version first. *complete: the list was read, or
 * this GPU has none of that type to give (graphics or MPS not supported, or not in this
 * driver), so nothing is missing from the device's process list on its account. */
static int vg_nvml_read_proc_list(struct vg_nvml_dev *d, int type, bool *complete)
{
    *complete = false;
    nvml_procs_fn const *slots = d->nvml->f.procs[type];
    const void *last = NULL;
    nvmlReturn_t st = NVML_SUCCESS;
    for (int v = 0; v < VG_PV_N; v++) {
        if (!slots[v])
            continue;
        last = &slots[v];
        size_t stride = vg_nvml_stride(d->nvml, v);
        unsigned char *buf = NULL;
        unsigned count = 0;
        vg_nvml_at(d, &slots[v]);
        int r = vg_nvml_call_procs(slots[v], d->dev, stride, &buf, &count, &st);
        if (r < 0)
            return r;
        if (st == NVML_SUCCESS) {
            r = vg_nvml_add_procs(d->g, buf, count, v, stride, vg_nvml_ptype_bit[type]);
            free(buf);
            if (r == 0) {
                vg_nvml_note_proc_api(d, v);
                *complete = true;
            }
            return r;
        }
        if (!vg_nvml_try_older(st))
            break;
    }
    if (!last) {
        *complete = type != VG_PT_COMPUTE;
        return 0;
    }
    *complete = vg_nvml_quiet(st, type != VG_PT_COMPUTE);
    return vg_nvml_fail(d, last, st, type != VG_PT_COMPUTE);
}

/* The device's processes: VG_GPU_K_PROCS only when no list that could hold some failed, since
 * memory is called unexplained (and a reset possible) against exactly this list. */
static int vg_nvml_read_procs(struct vg_nvml_dev *d)
{
    bool all = true;
    for (int t = 0; t < VG_PT_N; t++) {
        bool complete;
        int r = vg_nvml_read_proc_list(d, t, &complete);
        if (r < 0)
            return r;
        all = all && complete;
    }
    if (all)
        d->g->known |= VG_GPU_K_PROCS;
    return 0;
}

/*
 * Per-process SM utilisation, for idle-holder in `watch`. Optional: a driver without the call,
 * or a GPU that does not support it, leaves VG_GPU_K_PROC_UTIL clear. lastSeenTimeStamp is 0,
 * so the driver returns every sample it still buffers (a few seconds' worth) and a process
 * counts as busy when any of them shows work. A process with no sample is unknown, not idle:
 * the driver also answers NOT_FOUND (no process has a sample) on a GPU that is busy, so
 * silence is never taken for 0% (util_known stays false; NOT_FOUND leaves VG_GPU_K_PROC_UTIL
 * clear, as nothing was read). Same size/fill pattern as the process lists.
 */
static int vg_nvml_read_proc_util(struct vg_nvml_dev *d)
{
    const struct vg_nvml_fns *f = &d->nvml->f;
    struct vg_gpu *g = d->g;
    if (!f->proc_util || !(g->known & VG_GPU_K_PROCS))
        return 0;
    nvmlProcessUtilizationSample_t *buf = NULL;
    size_t cap = 0;
    unsigned count = 0;
    vg_nvml_at(d, &f->proc_util);
    nvmlReturn_t st = f->proc_util(d->dev, NULL, &count, 0);
    for (int tries = 0; st == NVML_ERROR_INSUFFICIENT_SIZE && tries < VG_NVML_PROC_TRIES; tries++) {
        size_t want = (size_t)count + count / 4 + 4;
        if (want <= cap)
            want = cap * 2;
        if (want > VG_NVML_PROC_MAX)
            break;
        nvmlProcessUtilizationSample_t *nb = realloc(buf, want * sizeof(*buf));
        if (!nb) {
            free(buf);
            return -ENOMEM;
        }
        buf = nb;
        memset(buf, 0, want * sizeof(*buf));
        cap = want;
        count = (unsigned)cap;
        vg_nvml_at(d, &f->proc_util);
        st = f->proc_util(d->dev, buf, &count, 0);
    }
    if (st == NVML_ERROR_NOT_FOUND) {
        free(buf);
        return 0;
    }
    if (st != NVML_SUCCESS) {
        free(buf);
        return vg_nvml_fail(d, &f->proc_util, st, 1);
    }
    for (size_t i = 0; i < g->nprocs; i++) {
        g->procs[i].util_known = false;
        g->procs[i].sm_util = 0;
    }
    for (size_t i = 0; i < count && i < cap; i++) {
        struct vg_gpu_proc key = {.pid = buf[i].pid};
        struct vg_gpu_proc *p =
            g->nprocs ? bsearch(&key, g->procs, g->nprocs, sizeof *g->procs, vg_nvml_cmp_proc)
                      : NULL;
        unsigned u = buf[i].smUtil > 100 ? 100 : buf[i].smUtil;
        if (!p)
            continue;
        p->util_known = true;
        if (u > p->sm_util)
            p->sm_util = u;
    }
    free(buf);
    g->known |= VG_GPU_K_PROC_UTIL;
    return 0;
}

/* ---- sensors ---------------------------------------------------------------------------- */

/* One unsigned sensor into *out with its known bit; optional like the fields above. */
static int vg_nvml_read_uint(struct vg_nvml_dev *d, nvml_dev_uint_fn const *slot, unsigned bit,
                             unsigned *out)
{
    unsigned v = 0;
    if (!*slot)
        return 0;
    vg_nvml_at(d, slot);
    int r = vg_nvml_got(d, slot, (*slot)(d->dev, &v), 1, bit);
    if (r > 0)
        *out = v;
    return r < 0 ? r : 0;
}

/*
 * Temperature, power draw, the power limit and fan speed: only when the client was asked for
 * them (vg_nvml_want_sensors; `top` shows them, the other commands do not read them, so their
 * calls and output stay as they were). Each is optional: a getter the driver lacks or one
 * answering NOT_SUPPORTED (a fanless GPU, a MIG-capable board without power readings) leaves
 * the field unknown, shown as "-". The enforced limit comes first (what the board obeys), the
 * management limit when the driver has only that.
 */
static int vg_nvml_read_sensors(struct vg_nvml_dev *d)
{
    const struct vg_nvml_fns *f = &d->nvml->f;
    struct vg_gpu *g = d->g;
    if (!d->nvml->sensors || g->lost)
        return 0;
    int r = 0;
    if (f->temperature) {
        unsigned t = 0;
        vg_nvml_at(d, &f->temperature);
        r = vg_nvml_got(d, &f->temperature, f->temperature(d->dev, NVML_TEMPERATURE_GPU, &t), 1,
                        VG_GPU_K_TEMP);
        if (r > 0)
            g->temp_c = t;
        if (r < 0)
            return r;
    }
    if ((r = vg_nvml_read_uint(d, &f->power, VG_GPU_K_POWER, &g->power_mw)) < 0)
        return r;
    const nvml_dev_uint_fn *lim = f->power_limit[0] ? &f->power_limit[0] : &f->power_limit[1];
    if ((r = vg_nvml_read_uint(d, lim, VG_GPU_K_POWER_LIMIT, &g->power_limit_mw)) < 0)
        return r;
    return vg_nvml_read_uint(d, &f->fan, VG_GPU_K_FAN, &g->fan_pct);
}

void vg_nvml_want_sensors(struct vg_nvml *nvml, bool on)
{
    nvml->sensors = on;
}

/* ---- health ----------------------------------------------------------------------------- */

/*
 * The GPU's health facts (gpu.h, struct vg_gpu_health), read on every GPU that is not lost:
 * a few cheap calls, and what doctor, check and the hand-off judge a GPU by. Each is optional
 * in vg_nvml_quiet's sense: NOT_SUPPORTED (a board without ECC or row remapping) leaves the
 * fact unknown without an error; any other failure (NO_PERMISSION included) leaves it unknown
 * and is recorded, so that it is said. Never does a failed call read as zero.
 */
_Static_assert(VG_RECOVERY_NONE == NVML_GPU_RECOVERY_ACTION_NONE &&
                   VG_RECOVERY_GPU_RESET == NVML_GPU_RECOVERY_ACTION_GPU_RESET &&
                   VG_RECOVERY_NODE_REBOOT == NVML_GPU_RECOVERY_ACTION_NODE_REBOOT &&
                   VG_RECOVERY_DRAIN_P2P == NVML_GPU_RECOVERY_ACTION_DRAIN_P2P &&
                   VG_RECOVERY_DRAIN_AND_RESET == NVML_GPU_RECOVERY_ACTION_DRAIN_AND_RESET,
               "enum vg_recovery carries NVML's numbers unchanged");
_Static_assert(VG_CLK_HW_SLOWDOWN == NVML_CLOCKS_EVENT_REASON_HW_SLOWDOWN &&
                   VG_CLK_SW_THERMAL == NVML_CLOCKS_EVENT_REASON_SW_THERMAL_SLOWDOWN &&
                   VG_CLK_HW_THERMAL == NVML_CLOCKS_EVENT_REASON_HW_THERMAL_SLOWDOWN &&
                   VG_CLK_HW_POWER_BRAKE == NVML_CLOCKS_EVENT_REASON_HW_POWER_BRAKE_SLOWDOWN &&
                   VG_CLK_GPU_IDLE == NVML_CLOCKS_EVENT_REASON_GPU_IDLE &&
                   VG_CLK_SW_POWER_CAP == NVML_CLOCKS_EVENT_REASON_SW_POWER_CAP,
               "VG_CLK_* carry NVML's bits unchanged");

static int vg_nvml_read_ecc(struct vg_nvml_dev *d)
{
    const struct vg_nvml_fns *f = &d->nvml->f;
    struct vg_gpu_health *h = &d->g->health;
    int r = 0;
    if (f->ecc_mode) {
        unsigned cur = 0, pending = 0;
        vg_nvml_at(d, &f->ecc_mode);
        nvmlReturn_t st = f->ecc_mode(d->dev, &cur, &pending);
        if (st == NVML_SUCCESS) {
            h->ecc_current = cur == NVML_FEATURE_ENABLED;
            h->ecc_pending = pending == NVML_FEATURE_ENABLED;
            h->known |= VG_GH_K_ECC_MODE;
        } else if ((r = vg_nvml_fail(d, &f->ecc_mode, st, 1)) < 0)
            return r;
    }
    static const struct {
        int type, counter;
        unsigned bit;
        size_t off;
    } counts[] = {
        {NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_VOLATILE_ECC, VG_GH_K_ECC_VOL_CORR,
         offsetof(struct vg_gpu_health, ecc_vol_corr)},
        {NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, VG_GH_K_ECC_VOL_UNCORR,
         offsetof(struct vg_gpu_health, ecc_vol_uncorr)},
        {NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_AGGREGATE_ECC, VG_GH_K_ECC_AGG_CORR,
         offsetof(struct vg_gpu_health, ecc_agg_corr)},
        {NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_AGGREGATE_ECC, VG_GH_K_ECC_AGG_UNCORR,
         offsetof(struct vg_gpu_health, ecc_agg_uncorr)},
    };
    for (size_t i = 0; f->ecc_total && i < VG_ARRAY_LEN(counts); i++) {
        unsigned long long v = 0;
        vg_nvml_at(d, &f->ecc_total);
        nvmlReturn_t st = f->ecc_total(d->dev, counts[i].type, counts[i].counter, &v);
        if (st == NVML_SUCCESS) {
            uint64_t u = v;
            memcpy((char *)h + counts[i].off, &u, sizeof u);
            h->known |= counts[i].bit;
        } else if ((r = vg_nvml_fail(d, &f->ecc_total, st, 1)) < 0)
            return r;
    }
    return 0;
}

/* The number of pages retired for one cause: a size query (no address buffer), which answers
 * SUCCESS for none and INSUFFICIENT_SIZE with the count for some. */
static int vg_nvml_read_retired_cause(struct vg_nvml_dev *d, int cause, unsigned bit, unsigned *out)
{
    const struct vg_nvml_fns *f = &d->nvml->f;
    unsigned count = 0;
    vg_nvml_at(d, &f->retired);
    nvmlReturn_t st = f->retired(d->dev, cause, &count, NULL);
    if (st != NVML_SUCCESS && st != NVML_ERROR_INSUFFICIENT_SIZE)
        return vg_nvml_fail(d, &f->retired, st, 1);
    *out = st == NVML_SUCCESS ? 0 : count;
    d->g->health.known |= bit;
    return 0;
}

static int vg_nvml_read_retired(struct vg_nvml_dev *d)
{
    const struct vg_nvml_fns *f = &d->nvml->f;
    struct vg_gpu_health *h = &d->g->health;
    int r;
    if (f->retired) {
        if ((r = vg_nvml_read_retired_cause(
                 d, NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS, VG_GH_K_RETIRED_SBE,
                 &h->retired_sbe)) < 0 ||
            (r = vg_nvml_read_retired_cause(d, NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR,
                                            VG_GH_K_RETIRED_DBE, &h->retired_dbe)) < 0)
            return r;
    }
    unsigned pending = 0;
    if (!f->retired_pending)
        return 0;
    vg_nvml_at(d, &f->retired_pending);
    r = vg_nvml_got(d, &f->retired_pending, f->retired_pending(d->dev, &pending), 1, 0);
    if (r > 0) {
        h->retired_pending = pending == NVML_FEATURE_ENABLED;
        h->known |= VG_GH_K_RETIRED_PENDING;
    }
    return r < 0 ? r : 0;
}

static int vg_nvml_read_remap(struct vg_nvml_dev *d)
{
    const struct vg_nvml_fns *f = &d->nvml->f;
    struct vg_gpu_health *h = &d->g->health;
    unsigned corr = 0, unc = 0, pending = 0, failure = 0;
    if (!f->remap)
        return 0;
    vg_nvml_at(d, &f->remap);
    int r = vg_nvml_got(d, &f->remap, f->remap(d->dev, &corr, &unc, &pending, &failure), 1, 0);
    if (r <= 0)
        return r;
    h->remap_corr = corr;
    h->remap_uncorr = unc;
    h->remap_pending = pending != 0;
    h->remap_failure = failure != 0;
    h->known |= VG_GH_K_REMAP;
    return 0;
}

/* The recovery action field: the call can succeed while the field itself failed (its own
 * nvmlReturn), which is recorded against the same function. */
static int vg_nvml_read_recovery(struct vg_nvml_dev *d)
{
    const struct vg_nvml_fns *f = &d->nvml->f;
    nvmlFieldValue_t v;
    if (!f->fields)
        return 0;
    memset(&v, 0, sizeof v);
    v.fieldId = NVML_FI_DEV_GET_GPU_RECOVERY_ACTION;
    vg_nvml_at(d, &f->fields);
    nvmlReturn_t st = f->fields(d->dev, 1, &v);
    if (st == NVML_SUCCESS)
        st = v.nvmlReturn;
    if (st != NVML_SUCCESS)
        return vg_nvml_fail(d, &f->fields, st, 1);
    switch (v.valueType) {
    case NVML_VALUE_TYPE_UNSIGNED_INT:
        d->g->health.recovery = v.value.uiVal;
        break;
    case NVML_VALUE_TYPE_UNSIGNED_LONG:
    case NVML_VALUE_TYPE_UNSIGNED_LONG_LONG:
    case NVML_VALUE_TYPE_SIGNED_LONG_LONG:
        d->g->health.recovery =
            v.value.ullVal > 0xFFFFFFFFull ? 0xFFFFFFFFu : (unsigned)v.value.ullVal;
        break;
    default: /* a value type this action never has: not trusted, said as an error */
        return vg_nvml_fail(d, &f->fields, NVML_ERROR_UNKNOWN, 1);
    }
    d->g->health.known |= VG_GH_K_RECOVERY;
    return 0;
}

/* Clock event reasons; drivers before 535 name the same call ...ThrottleReasons. */
static int vg_nvml_read_clocks(struct vg_nvml_dev *d)
{
    const struct vg_nvml_fns *f = &d->nvml->f;
    const nvml_dev_u64_fn *slot = f->clocks[0] ? &f->clocks[0] : &f->clocks[1];
    unsigned long long v = 0;
    if (!*slot)
        return 0;
    vg_nvml_at(d, slot);
    nvmlReturn_t st = (*slot)(d->dev, &v);
    if (st == NVML_ERROR_FUNCTION_NOT_FOUND && slot == &f->clocks[0] && f->clocks[1]) {
        slot = &f->clocks[1];
        vg_nvml_at(d, slot);
        st = (*slot)(d->dev, &v);
    }
    int r = vg_nvml_got(d, slot, st, 1, 0);
    if (r > 0) {
        d->g->health.clocks = v;
        d->g->health.known |= VG_GH_K_CLOCKS;
    }
    return r < 0 ? r : 0;
}

static int vg_nvml_read_health(struct vg_nvml_dev *d)
{
    int r;
    if (d->g->lost)
        return 0;
    if ((r = vg_nvml_read_ecc(d)) < 0 || (r = vg_nvml_read_retired(d)) < 0 ||
        (r = vg_nvml_read_remap(d)) < 0 || (r = vg_nvml_read_recovery(d)) < 0)
        return r;
    return vg_nvml_read_clocks(d);
}

/* ---- devices ---------------------------------------------------------------------------- */

typedef int (*vg_nvml_reader)(struct vg_nvml_dev *d);

static const vg_nvml_reader vg_nvml_mig_readers[] = {
    vg_nvml_read_name,     vg_nvml_read_uuid,  vg_nvml_read_memory,
    vg_nvml_read_instance, vg_nvml_read_procs,
};

static int vg_nvml_run_readers(struct vg_nvml_dev *d, const vg_nvml_reader *readers, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int r = readers[i](d);
        if (r < 0)
            return r;
    }
    return 0;
}

/* A MIG device shares its parent's minor number (its /dev/nvidia node) and PCI address. */
static int vg_nvml_inherit(struct vg_gpu *mg, const struct vg_gpu *parent)
{
    mg->minor = parent->minor;
    mg->known |= parent->known & VG_GPU_K_MINOR;
    if (!(parent->known & VG_GPU_K_PCI))
        return 0;
    if (!(mg->pci_bus_id = strdup(parent->pci_bus_id)))
        return -ENOMEM;
    mg->pci_domain = parent->pci_domain;
    mg->pci_bus = parent->pci_bus;
    mg->pci_device = parent->pci_device;
    mg->known |= VG_GPU_K_PCI;
    return 0;
}

static int vg_nvml_read_mig_device(struct vg_nvml_dev *pd, unsigned index, nvmlDevice_t h)
{
    struct vg_gpu *mg = &pd->g->mig[pd->g->nmig++];
    mg->index = index;
    mg->is_mig = true;
    int r = vg_nvml_inherit(mg, pd->g);
    if (r < 0)
        return r;
    struct vg_nvml_dev d = {
        .nvml = pd->nvml,
        .apis = pd->apis,
        .g = mg,
        .dev = h,
        .parent = (long)pd->g->index,
        .slot = pd->slot,
    };
    return vg_nvml_run_readers(&d, vg_nvml_mig_readers, VG_ARRAY_LEN(vg_nvml_mig_readers));
}

/* MIG devices are enumerated only when MIG is on; indices the driver has not populated
 * answer NOT_FOUND and are skipped. */
static int vg_nvml_read_migs(struct vg_nvml_dev *d)
{
    const struct vg_nvml_fns *f = &d->nvml->f;
    struct vg_gpu *g = d->g;
    unsigned max = 0;
    if (!(g->known & VG_GPU_K_MIG_MODE) || g->mig_current != NVML_DEVICE_MIG_ENABLE ||
        !f->max_mig || !f->mig_handle)
        return 0;
    vg_nvml_at(d, &f->max_mig);
    nvmlReturn_t st = f->max_mig(d->dev, &max);
    if (st != NVML_SUCCESS)
        return vg_nvml_fail(d, &f->max_mig, st, 1);
    if (max == 0)
        return 0;
    if (max > VG_NVML_MAX_MIG) {
        int r = vg_nvml_implausible(d, &f->max_mig, "MIG devices", max, VG_NVML_MAX_MIG);
        if (r < 0)
            return r;
        max = VG_NVML_MAX_MIG;
    }
    if (!(g->mig = calloc(max, sizeof *g->mig)))
        return -ENOMEM;
    for (unsigned i = 0; i < max; i++) {
        nvmlDevice_t h = NULL;
        vg_nvml_at(d, &f->mig_handle);
        st = f->mig_handle(d->dev, i, &h);
        int r = 0;
        if (st == NVML_SUCCESS)
            r = vg_nvml_read_mig_device(d, i, h);
        else if (st != NVML_ERROR_NOT_FOUND)
            r = vg_nvml_fail(d, &f->mig_handle, st, 1);
        if (r < 0)
            return r;
    }
    return 0;
}

/* A GPU's identity comes first and is published as it is read (vg_nvml_publish), so that a GPU
 * whose later calls hang still says which it is and which device node is its. */
static const vg_nvml_reader vg_nvml_ident_readers[] = {
    vg_nvml_read_name,
    vg_nvml_read_uuid,
    vg_nvml_read_minor,
    vg_nvml_read_pci,
};

static const vg_nvml_reader vg_nvml_gpu_readers[] = {
    vg_nvml_read_memory,       vg_nvml_read_util,     vg_nvml_read_cc,     vg_nvml_read_persistence,
    vg_nvml_read_compute_mode, vg_nvml_read_mig_mode, vg_nvml_read_procs,  vg_nvml_read_proc_util,
    vg_nvml_read_migs,         vg_nvml_read_sensors,  vg_nvml_read_health,
};

/* Copy the identity fields of src (name, UUID, minor, PCI) into dst, which holds none. On
 * out of memory a field is left out (its known bit clear). */
static void vg_nvml_copy_ident(struct vg_gpu *dst, const struct vg_gpu *src)
{
    if ((src->known & VG_GPU_K_NAME) && (dst->name = strdup(src->name)))
        dst->known |= VG_GPU_K_NAME;
    if ((src->known & VG_GPU_K_UUID) && (dst->uuid = strdup(src->uuid)))
        dst->known |= VG_GPU_K_UUID;
    if (src->known & VG_GPU_K_MINOR) {
        dst->minor = src->minor;
        dst->known |= VG_GPU_K_MINOR;
    }
    if ((src->known & VG_GPU_K_PCI) && (dst->pci_bus_id = strdup(src->pci_bus_id))) {
        dst->pci_domain = src->pci_domain;
        dst->pci_bus = src->pci_bus;
        dst->pci_device = src->pci_device;
        dst->known |= VG_GPU_K_PCI;
    }
}

static void vg_nvml_publish(const struct vg_nvml_dev *d)
{
    struct vg_nvml_slot *s = &d->nvml->slots[d->slot];
    pthread_mutex_lock(&d->nvml->lock);
    vg_gpu_release(&s->ident);
    memset(&s->ident, 0, sizeof s->ident);
    vg_nvml_copy_ident(&s->ident, d->g);
    pthread_mutex_unlock(&d->nvml->lock);
}

/* Read GPU index into g (zeroed). A handle that cannot be had leaves the GPU lost with only its
 * index. Returns 0 or -ENOMEM. */
static int vg_nvml_read_gpu(struct vg_nvml *n, unsigned index, struct vg_gpu *g,
                            struct vg_nvml_apis *apis)
{
    const struct vg_nvml_fns *f = &n->f;
    struct vg_nvml_dev d = {
        .nvml = n, .apis = apis, .g = g, .dev = NULL, .parent = -1, .slot = index};
    const nvml_handle_by_index_fn *slot = f->handle[0] ? &f->handle[0] : &f->handle[1];
    g->index = index;
    if (!*slot) {
        g->lost = true;
        return 0;
    }
    vg_nvml_at(&d, slot);
    nvmlReturn_t st = (*slot)(index, &d.dev);
    if (st != NVML_SUCCESS) {
        int r = vg_nvml_fail(&d, slot, st, 0);
        g->lost = true;
        return r;
    }
    for (size_t i = 0; i < VG_ARRAY_LEN(vg_nvml_ident_readers); i++) {
        int r = vg_nvml_ident_readers[i](&d);
        if (r < 0)
            return r;
        vg_nvml_publish(&d);
    }
    return vg_nvml_run_readers(&d, vg_nvml_gpu_readers, VG_ARRAY_LEN(vg_nvml_gpu_readers));
}

/* ---- one thread per GPU ----------------------------------------------------------------- */

struct vg_nvml_job {
    struct vg_nvml *n;
    unsigned index;
};

/* A GPU reader: reads one GPU and hands the answer over to the read its slot now belongs to, if
 * that read is still waiting: its own, or a later one that found it still busy and took it
 * over (a late answer is a fresh one). An answer no read waits for is dropped (the read it was
 * for already called the GPU hung) and only frees the slot. */
static void *vg_nvml_reader_main(void *arg)
{
    struct vg_nvml_job job = *(struct vg_nvml_job *)arg;
    free(arg);
    struct vg_nvml *n = job.n;
    struct vg_gpu g;
    memset(&g, 0, sizeof g);
    struct vg_nvml_apis apis = {0};
    int rc = vg_nvml_read_gpu(n, job.index, &g, &apis);

    pthread_mutex_lock(&n->lock);
    struct vg_nvml_slot *s = &n->slots[job.index];
    bool taken = n->waiting != 0 && s->read == n->waiting;
    if (taken) {
        s->gpu = g;
        s->apis = apis;
        s->rc = rc;
        s->done = true;
        if (s->counted)
            n->pending--;
        pthread_cond_broadcast(&n->answered);
    }
    s->busy = false;
    /* Let go in the same breath as the answer: a reader that answered in time is never the one
     * that shuts NVML down (its owner is), so that stays where the owner can bound it. */
    int refs = --n->refs;
    pthread_mutex_unlock(&n->lock);
    if (!taken)
        vg_gpu_release(&g);
    if (refs == 0)
        vg_nvml_destroy(n);
    return NULL;
}

/* Start the reader of GPU index (its slot says for which read); called with n->lock held. 0 or
 * a pthread error. */
static int vg_nvml_spawn(struct vg_nvml *n, unsigned index)
{
    struct vg_nvml_job *job = malloc(sizeof *job);
    if (!job)
        return ENOMEM;
    *job = (struct vg_nvml_job){.n = n, .index = index};
    pthread_attr_t attr;
    int rc = pthread_attr_init(&attr);
    if (rc == 0) {
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_t tid;
        n->refs++;
        rc = pthread_create(&tid, &attr, vg_nvml_reader_main, job);
        if (rc)
            n->refs--;
        pthread_attr_destroy(&attr);
    }
    if (rc)
        free(job);
    return rc;
}

/* g (zeroed, index set) is a GPU whose reader has not answered: mark it hung, with the
 * identity it published and an error naming the call it is in. Called with the lock held.
 * 0 or -ENOMEM. */
static int vg_nvml_mark_hung(const struct vg_nvml_slot *s, struct vg_gpu *g,
                             const struct timespec *now)
{
    vg_nvml_copy_ident(g, &s->ident);
    g->hung = true;
    double secs = vg_clock_ts_diff(&s->since, now);
    char *msg = NULL;
    if (asprintf(&msg,
                 "GPU %u: %s has not returned after %.1f s (a driver call is hung): the "
                 "GPU's figures are unknown",
                 g->index, s->at, secs) < 0)
        msg = NULL;
    return vg_nvml_add_error(&g->errors, &g->nerrors, &g->errors_cap, s->at, NVML_ERROR_TIMEOUT,
                             msg);
}

/* Merge one GPU's API notes into the list: the first GPU that answered decides. */
static void vg_nvml_merge_apis(struct vg_gpu_list *list, const struct vg_nvml_apis *a)
{
    if (!list->proc_api)
        list->proc_api = a->proc_api;
    if (!list->mem_api)
        list->mem_api = a->mem_api;
    list->proc_stride_535 |= a->stride_535;
}

/* Per GPU in vg_nvml_read_gpus: whether its reader thread works for this read, or it is read
 * on the calling thread. */
enum vg_nvml_started {
    VG_NVML_NOT_STARTED = 0,
    VG_NVML_THREAD = 1, /* started now, or still busy since an earlier read and taken over */
    VG_NVML_READ_HERE = 2,
    VG_NVML_NO_THREAD = 3, /* no thread could be started: to be read here */
};

/* Hand each GPU to its reader thread (or take over the one still busy); returns how many GPUs
 * got no thread. Called with n->lock held. */
static size_t vg_nvml_dispatch(struct vg_nvml *n, size_t count, unsigned char *started,
                               const struct timespec *deadline, const struct timespec *now)
{
    const nvml_handle_by_index_fn *hslot = n->f.handle[0] ? &n->f.handle[0] : &n->f.handle[1];
    double budget = deadline ? vg_clock_ts_diff(now, deadline) : 0;
    size_t inline_reads = 0;
    uint64_t read = ++n->reads;
    n->waiting = read;
    n->pending = 0;
    for (size_t i = 0; i < count; i++) {
        struct vg_nvml_slot *s = &n->slots[i];
        if (s->busy) {
            /* Still in the driver since an earlier read: no second call is queued behind it,
             * but its answer, if it comes before this read ends, is this read's. It is waited
             * for only while it has been busy for less than this read's whole budget (an
             * earlier read that gave up at once, its deadline spent on host-wide calls): one
             * stuck longer is reported hung at once, so that it costs later samples nothing. */
            s->read = read;
            s->done = false;
            started[i] = VG_NVML_THREAD;
            s->counted = !deadline || vg_clock_ts_diff(&s->since, now) < budget;
            n->pending += s->counted;
            continue;
        }
        vg_gpu_release(&s->ident);
        memset(&s->ident, 0, sizeof s->ident);
        s->busy = true;
        s->read = read;
        s->since = *now;
        s->at = vg_nvml_name_of(n, hslot);
        s->done = false;
        s->counted = true;
        if (vg_nvml_spawn(n, (unsigned)i) == 0) {
            started[i] = VG_NVML_THREAD;
            n->pending++;
        } else {
            s->busy = false;
            started[i] = VG_NVML_NO_THREAD;
            inline_reads++;
        }
    }
    return inline_reads;
}

/* No thread to be had (a process at its thread limit): read those GPUs here, in turn. The
 * caller's own deadline still bounds the whole read; only the isolation is lost. */
static int vg_nvml_read_here(struct vg_nvml *n, struct vg_gpu_list *list, size_t count,
                             unsigned char *started)
{
    int rc = 0;
    for (size_t i = 0; i < count && rc == 0; i++) {
        if (started[i] != VG_NVML_NO_THREAD)
            continue;
        struct vg_nvml_apis apis = {0};
        rc = vg_nvml_read_gpu(n, (unsigned)i, &list->gpus[i], &apis);
        vg_nvml_merge_apis(list, &apis);
        started[i] = VG_NVML_READ_HERE;
    }
    return rc;
}

/* Wait for the reader threads until the deadline, then take each answer, or mark its GPU hung.
 * Returns rc, or the first error of a reader when rc is 0. Called with n->lock held. */
static int vg_nvml_collect_answers(struct vg_nvml *n, struct vg_gpu_list *list, size_t count,
                                   const unsigned char *started, const struct timespec *deadline,
                                   int rc)
{
    /* Any error but a wake-up ends the wait (ETIMEDOUT, or EINVAL for a bad deadline): what
     * has not answered then is hung, never waited for forever. */
    int wrc = 0;
    while (n->pending && wrc == 0)
        wrc = deadline ? pthread_cond_timedwait(&n->answered, &n->lock, deadline)
                       : pthread_cond_wait(&n->answered, &n->lock);
    n->waiting = 0;
    n->pending = 0;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    for (size_t i = 0; i < count; i++) {
        struct vg_nvml_slot *s = &n->slots[i];
        struct vg_gpu *g = &list->gpus[i];
        if (started[i] == VG_NVML_READ_HERE)
            continue;
        if (started[i] && s->done) {
            vg_gpu_release(g);
            *g = s->gpu;
            memset(&s->gpu, 0, sizeof s->gpu);
            s->done = false;
            vg_nvml_merge_apis(list, &s->apis);
            if (s->rc < 0 && rc == 0)
                rc = s->rc;
            continue;
        }
        g->index = (unsigned)i;
        int r = vg_nvml_mark_hung(s, g, &now);
        if (r < 0 && rc == 0)
            rc = r;
    }
    return rc;
}

int vg_nvml_read_gpus(struct vg_nvml *n, struct vg_gpu_list *list, const struct timespec *deadline,
                      struct vg_err *err)
{
    size_t count = list->ngpus;
    if (count == 0)
        return 0;
    if (count > VG_NVML_MAX_GPUS)
        return vg_err_set(err, -EINVAL, "cannot read %zu GPUs: at most %u", count,
                          VG_NVML_MAX_GPUS);
    unsigned char *started = calloc(count, 1); /* enum vg_nvml_started per GPU */
    if (!started)
        return vg_err_set(err, -ENOMEM, "out of memory reading GPUs");
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    int rc = 0;

    pthread_mutex_lock(&n->lock);
    size_t inline_reads = vg_nvml_dispatch(n, count, started, deadline, &now);
    pthread_mutex_unlock(&n->lock);

    if (inline_reads)
        rc = vg_nvml_read_here(n, list, count, started);

    pthread_mutex_lock(&n->lock);
    rc = vg_nvml_collect_answers(n, list, count, started, deadline, rc);
    pthread_mutex_unlock(&n->lock);
    free(started);
    if (rc < 0)
        return vg_err_set(err, rc, "out of memory reading GPUs");
    return 0;
}

/* ---- the whole host --------------------------------------------------------------------- */

static int vg_nvml_read_sys_string(struct vg_nvml *n, struct vg_gpu_list *list,
                                   nvml_sys_string_fn const *slot, unsigned size, char **out)
{
    nvmlReturn_t st;
    if (!*slot)
        return 0;
    int r = vg_nvml_get_string(NULL, *slot, NULL, size, out, &st);
    if (r < 0)
        return r;
    return st == NVML_SUCCESS ? 0 : vg_nvml_list_fail(n, list, slot, st, 1);
}

static int vg_nvml_read_versions(struct vg_nvml *n, struct vg_gpu_list *list)
{
    const struct vg_nvml_fns *f = &n->f;
    int r = vg_nvml_read_sys_string(n, list, &f->driver_version,
                                    NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE, &list->driver_version);
    if (r == 0)
        r = vg_nvml_read_sys_string(n, list, &f->nvml_version, NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE,
                                    &list->nvml_version);
    if (r < 0)
        return r;
    const nvml_sys_int_fn *slot = f->cuda_version[0] ? &f->cuda_version[0] : &f->cuda_version[1];
    int cuda = 0;
    if (!*slot)
        return 0;
    nvmlReturn_t st = (*slot)(&cuda);
    if (st != NVML_SUCCESS)
        return vg_nvml_list_fail(n, list, slot, st, 1);
    list->cuda_version = cuda;
    return 0;
}

/* The device count, capped at VG_NVML_MAX_GPUS: a larger one is recorded as an error on the
 * list and only the first GPUs are read, so a driver that reports 4294967295 GPUs costs 256
 * handle lookups, not an allocation that fails (or a quadratic read of a hundred thousand). */
static int vg_nvml_count(struct vg_nvml *n, struct vg_gpu_list *list, unsigned *count,
                         struct vg_err *err)
{
    const struct vg_nvml_fns *f = &n->f;
    const nvml_count_fn *slot = f->count[0] ? &f->count[0] : &f->count[1];
    if (!*slot)
        return vg_err_set(err, -ENOSYS, "cannot count GPUs: '%s' has no nvmlDeviceGetCount",
                          n->path);
    nvmlReturn_t st = (*slot)(count);
    if (st == NVML_SUCCESS && *count <= VG_NVML_MAX_GPUS)
        return 0;
    if (st == NVML_SUCCESS) {
        const char *func = vg_nvml_name_of(n, slot);
        char *msg = NULL;
        if (asprintf(&msg,
                     "%s: the driver reports %u GPUs, more than NVML can address (at most "
                     "%u, one per minor number of /dev/nvidia*): only the first %u are read",
                     func, *count, VG_NVML_MAX_GPUS, VG_NVML_MAX_GPUS) < 0)
            msg = NULL;
        *count = VG_NVML_MAX_GPUS;
        if (vg_nvml_add_error(&list->errors, &list->nerrors, &list->errors_cap, func, NVML_SUCCESS,
                              msg) < 0)
            return vg_err_set(err, -ENOMEM, "out of memory reading GPUs");
        return 0;
    }
    if (vg_nvml_list_fail(n, list, slot, st, 0) < 0)
        return vg_err_set(err, -ENOMEM, "out of memory reading GPUs");
    char *text = vg_nvml_status_text(n, st);
    int code = vg_err_set(err, vg_nvml_errno(st), "cannot count GPUs: %s: %s",
                          vg_nvml_name_of(n, slot), text ? text : "out of memory");
    free(text);
    return code;
}

int vg_nvml_read_host(struct vg_nvml *nvml, struct vg_gpu_list *list, struct vg_err *err)
{
    list->loaded = true;
    if (!(list->library = strdup(nvml->path)))
        return vg_err_set(err, -ENOMEM, "out of memory reading GPUs");
    unsigned count = 0;
    int r = vg_nvml_read_versions(nvml, list);
    if (r == 0)
        r = vg_nvml_count(nvml, list, &count, err);
    else
        vg_err_set(err, r, "out of memory reading GPUs");
    if (r < 0 || count == 0)
        return r;
    if (!(list->gpus = calloc(count, sizeof *list->gpus)))
        return vg_err_set(err, -ENOMEM, "out of memory reading GPUs");
    list->ngpus = count;
    for (unsigned i = 0; i < count; i++)
        list->gpus[i].index = i;
    return 0;
}

int vg_nvml_read(struct vg_nvml *nvml, struct vg_gpu_list *list, struct vg_err *err)
{
    int r = vg_nvml_read_host(nvml, list, err);
    return r ? r : vg_nvml_read_gpus(nvml, list, NULL, err);
}
