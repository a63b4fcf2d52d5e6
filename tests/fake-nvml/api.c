/*
 * The NVML symbols the fake driver exports, with the real names and signatures (shapes from
 * src/gpu/nvml_abi.h). Each one runs fake_enter() (state.c), answers from the current
 * scenario with the lock held, and leaves. The three builds differ only in what is exported:
 *
 *   full                    every symbol in nvml_abi.h
 *   -DFAKE_NVML_LEGACY      only the old unversioned ones (v1 memory, v1 process lists)
 *   -DFAKE_NVML_535         full without nvmlDeviceGetRunningProcessDetailList, and the _v3
 *                           process lists write 32-byte entries (drivers 535.43.02 to 535.98)
 */
#include "fake.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#define NO_ID 0xFFFFFFFFu
#define ADD_SAT(a, b) ((a) + (b) < (a) ? UINT64_MAX : (a) + (b))
/* A GPU-only field: NOT_SUPPORTED on MIG handles and when the scenario says na. */
#define GPU_FIELD(c, bit) ((c)->m < 0 && ((c)->dev->known & (bit)))

enum layout { LAYOUT_V1 = 16, LAYOUT_V2 = 24, LAYOUT_535 = 32 }; /* entry strides */

/* Defines an exported fn(nvmlDevice_t, T *out) answering impl(&call, out) under the lock. */
#define DEV_GETTER(fn, T, impl)                                                             \
    FAKE_API nvmlReturn_t fn(nvmlDevice_t dev, T *out)                                      \
    {                                                                                       \
        struct fake_call c;                                                                 \
        nvmlReturn_t r = fake_enter(FAKE_FN_##fn, dev, 0, &c);                              \
        if (r != NVML_SUCCESS)                                                              \
            return r;                                                                       \
        r = out ? impl(&c, out) : NVML_ERROR_INVALID_ARGUMENT;                              \
        fake_leave();                                                                       \
        return r;                                                                           \
    }

/* The same for a getter whose answer is expr when ok, NOT_SUPPORTED otherwise. */
#define FIELD_GETTER(fn, T, ok, expr)                                                       \
    static nvmlReturn_t fn##_impl(const struct fake_call *c, T *out)                        \
    {                                                                                       \
        if (!(ok))                                                                          \
            return NVML_ERROR_NOT_SUPPORTED;                                                \
        *out = (expr);                                                                      \
        return NVML_SUCCESS;                                                                \
    }                                                                                       \
    DEV_GETTER(fn, T, fn##_impl)

/* And for getters with no device, fn params answering expr (which may use the call c). */
#define SYS_GETTER(fn, params, expr)                                                        \
    FAKE_API nvmlReturn_t fn params                                                         \
    {                                                                                       \
        struct fake_call c;                                                                 \
        nvmlReturn_t r = fake_enter(FAKE_FN_##fn, NULL, 0, &c);                             \
        if (r != NVML_SUCCESS)                                                              \
            return r;                                                                       \
        r = (expr);                                                                         \
        fake_leave();                                                                       \
        return r;                                                                           \
    }

/* And for the string getters fn(nvmlDevice_t, char *buf, unsigned len). */
#define DEV_STRING(fn, bit, field)                                                          \
    FAKE_API nvmlReturn_t fn(nvmlDevice_t dev, char *buf, unsigned int len)                 \
    {                                                                                       \
        struct fake_call c;                                                                 \
        nvmlReturn_t r = fake_enter(FAKE_FN_##fn, dev, 0, &c);                              \
        if (r != NVML_SUCCESS)                                                              \
            return r;                                                                       \
        r = put_str(c.dev->known & (bit) ? c.dev->field : NULL, buf, len);                  \
        fake_leave();                                                                       \
        return r;                                                                           \
    }

FAKE_API const char *nvmlErrorString(nvmlReturn_t r)
{
    static const char *const text[] = {
        "Success", "Uninitialized", "Invalid Argument", "Not Supported",
        "Insufficient Permissions", "Already Initialized", "Not Found", "Insufficient Size",
        "Insufficient External Power", "Driver Not Loaded", "Timeout",
        "Interrupt request issue", "NVML Shared Library Not Found", "Function Not Found",
        "Corrupted infoROM", "GPU is lost", "GPU requires restart",
        "The operating system has blocked the request.",
        "RM has detected an NVML/RM version mismatch.", "In use by another client",
        "Insufficient Memory", "No data",
        "The requested vgpu operation is not available on target device, because ECC is enabled",
        "Insufficient resources for request", "Frequency not supported",
        "Argument version mismatch", "Deprecated", "Not Ready", "GPU not found",
        "Invalid state",
    };
    fake_log(FAKE_FN_nvmlErrorString);
    return r >= 0 && (size_t)r < sizeof text / sizeof text[0] ? text[r] : "Unknown Error";
}

FAKE_API nvmlReturn_t nvmlInit(void)
{
    return fake_refcount(FAKE_FN_nvmlInit);
}

FAKE_API nvmlReturn_t nvmlShutdown(void)
{
    return fake_refcount(FAKE_FN_nvmlShutdown);
}

/* Copies s into buf of len bytes the way NVML's string getters do; NULL s: not supported. */
static nvmlReturn_t put_str(const char *s, char *buf, unsigned len)
{
    if (!s)
        return NVML_ERROR_NOT_SUPPORTED;
    if (!buf)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (len <= strlen(s))
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(buf, s, strlen(s) + 1);
    return NVML_SUCCESS;
}

static nvmlReturn_t count(const struct fake_call *c, unsigned *n)
{
    if (!n)
        return NVML_ERROR_INVALID_ARGUMENT;
    *n = c->sc->count_set ? c->sc->count : c->sc->ngpus;
    return NVML_SUCCESS;
}

/* Defines fn(unsigned index, nvmlDevice_t *dev). */
#define HANDLE_BY_INDEX(fn)                                                                 \
    FAKE_API nvmlReturn_t fn(unsigned int index, nvmlDevice_t *dev)                         \
    {                                                                                       \
        struct fake_call c;                                                                 \
        nvmlReturn_t r = fake_enter(FAKE_FN_##fn, NULL, index, &c);                         \
        if (r != NVML_SUCCESS)                                                              \
            return r;                                                                       \
        if (!dev || index >= c.sc->ngpus)                                                   \
            r = NVML_ERROR_INVALID_ARGUMENT;                                                \
        else                                                                                \
            *dev = fake_handle(index, -1);                                                  \
        fake_leave();                                                                       \
        return r;                                                                           \
    }

/* v2/v3 layout; the unversioned call writes the old 52-byte layout over the same struct:
 * the legacy form where busIdLegacy is, the ids, then 16 reserved zero bytes where busId
 * starts; the rest is left alone. The legacy form holds a 16-bit domain, as in NVML. */
static nvmlReturn_t pci(const struct fake_call *c, nvmlPciInfo_t *out, bool v1)
{
    const struct fake_dev *d = c->dev;
    nvmlPciInfo_t p;
    if (!GPU_FIELD(c, FK_BUS))
        return NVML_ERROR_NOT_SUPPORTED;
    memset(&p, 0, sizeof p);
    if (snprintf(p.busIdLegacy, sizeof p.busIdLegacy, "%04X:%02X:%02X.%X", d->domain & 0xFFFF,
                 d->bus_no, d->dev_no, d->fn_no) != 12)
        return NVML_ERROR_UNKNOWN; /* cannot happen: the parser bounds every part */
    p.domain = d->domain;
    p.bus = d->bus_no;
    p.device = d->dev_no;
    if (!v1)
        memcpy(p.busId, d->bus, sizeof p.busId);
    memcpy(out, &p, v1 ? offsetof(nvmlPciInfo_t, busId) + 16 : sizeof p);
    return NVML_SUCCESS;
}

static nvmlReturn_t pci_v1(const struct fake_call *c, nvmlPciInfo_t *out)
{
    return pci(c, out, true);
}

/* Whether a process line is listed now: an `exits=1` line only while its PID runs (not a
 * zombie), as the driver frees a context when its process exits. */
static bool listed(const struct fake_proc *p)
{
    char path[32], buf[512];
    if (!p->exits)
        return true;
    snprintf(path, sizeof path, "/proc/%u/stat", p->pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return false;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *close = strrchr(buf, ')');
    return close && close[1] == ' ' && close[2] != 'Z' && close[2] != 'X';
}

/* What the scenario says is used on this device: explicit, or the sum of its processes. */
static uint64_t used(const struct fake_call *c)
{
    uint64_t sum = 0;
    if (c->dev->known & FK_USED)
        return c->dev->used;
    for (const struct fake_proc *p = c->sc->procs; p < c->sc->procs + c->sc->nprocs; p++)
        if (p->gpu == c->g && (c->m < 0 || p->mig == c->m) && p->mem_known && listed(p))
            sum = ADD_SAT(sum, p->mem);
    return sum;
}

/* Both memory getters; v1 counts the reservation as used. */
static nvmlReturn_t mem(const struct fake_call *c, nvmlMemory_v2_t *out, bool v1)
{
    const struct fake_dev *d = c->dev;
    if (!(d->known & FK_TOTAL) || (d->known & FK_USED_NA) || (!v1 && !(d->known & FK_RESERVED)))
        return NVML_ERROR_NOT_SUPPORTED;
    uint64_t res = d->known & FK_RESERVED ? d->reserved : 0, u = used(c);
    uint64_t taken = ADD_SAT(u, res);
    out->total = d->total;
    out->reserved = res;
    out->used = v1 ? taken : u;
    out->free = d->total > taken ? d->total - taken : 0;
    return NVML_SUCCESS;
}

static nvmlReturn_t mem_v1(const struct fake_call *c, nvmlMemory_t *out)
{
    nvmlMemory_v2_t m;
    nvmlReturn_t r = mem(c, &m, true);
    if (r == NVML_SUCCESS)
        *out = (nvmlMemory_t){.total = m.total, .free = m.free, .used = m.used};
    return r;
}

static nvmlReturn_t utilization(const struct fake_call *c, nvmlUtilization_t *out)
{
    if (!GPU_FIELD(c, FK_UTIL))
        return NVML_ERROR_NOT_SUPPORTED;
    out->gpu = c->dev->util;
    out->memory = c->dev->mem_util;
    return NVML_SUCCESS;
}

HANDLE_BY_INDEX(nvmlDeviceGetHandleByIndex)
DEV_STRING(nvmlDeviceGetName, FK_NAME, name)
DEV_STRING(nvmlDeviceGetUUID, FK_UUID, uuid)
SYS_GETTER(nvmlSystemGetDriverVersion, (char *buf, unsigned int len),
           put_str(c.sc->known & FK_DRIVER ? c.sc->driver : NULL, buf, len))
SYS_GETTER(nvmlDeviceGetCount, (unsigned int *n), count(&c, n))
DEV_GETTER(nvmlDeviceGetPciInfo, nvmlPciInfo_t, pci_v1)
DEV_GETTER(nvmlDeviceGetMemoryInfo, nvmlMemory_t, mem_v1)
DEV_GETTER(nvmlDeviceGetUtilizationRates, nvmlUtilization_t, utilization)
FIELD_GETTER(nvmlDeviceGetMinorNumber, unsigned int, GPU_FIELD(c, FK_MINOR), c->dev->minor)
FIELD_GETTER(nvmlDeviceGetPersistenceMode, unsigned int, GPU_FIELD(c, FK_PERSIST),
             c->dev->persistence)
FIELD_GETTER(nvmlDeviceGetComputeMode, unsigned int, GPU_FIELD(c, FK_CMODE),
             c->dev->compute_mode)

/* Process lists. A GPU's lists include the processes of its MIG devices, with their
 * instance ids; entries are written through a 32-byte template cut to the layout's stride
 * (v1 and v2 are prefixes of the 535 layout). */
static nvmlReturn_t procs(enum fake_fn fn, nvmlDevice_t dev, unsigned *count_io, void *infos,
                          enum fake_ptype type, enum layout stride)
{
    struct fake_call c;
    nvmlReturn_t r = fake_enter(fn, dev, 0, &c);
    unsigned n = 0, i = 0;
    if (r != NVML_SUCCESS)
        return r;
    const struct fake_proc *ps = c.sc->procs, *end = ps + c.sc->nprocs;
#define ON(p) ((p)->gpu == c.g && (c.m < 0 || (p)->mig == c.m) && (p)->type == type && listed(p))
    for (const struct fake_proc *p = ps; p < end; p++)
        n += ON(p);
    if (!count_io) {
        r = NVML_ERROR_INVALID_ARGUMENT;
    } else if (n > 0 && (!infos || *count_io < n)) {
        unsigned by = fake_grow(&c, type);
        *count_io = n > by ? n - by : 0;
        r = NVML_ERROR_INSUFFICIENT_SIZE;
    } else {
        for (const struct fake_proc *p = ps; p < end; p++) {
            if (!ON(p))
                continue;
            const struct fake_dev *m = p->mig >= 0 ? &c.gpu->mig[p->mig] : NULL;
            nvmlProcessInfo_535_t e;
            memset(&e, 0, sizeof e);
            e.pid = p->pid;
            e.usedGpuMemory = p->mem_known ? p->mem : NVML_VALUE_NOT_AVAILABLE;
            e.gpuInstanceId = m && (m->known & FK_GI) ? m->gi : NO_ID;
            e.computeInstanceId = m && (m->known & FK_CI) ? m->ci : NO_ID;
            memcpy((char *)infos + (size_t)i++ * stride, &e, stride);
        }
        *count_io = n;
    }
#undef ON
    fake_leave();
    return r;
}

/* Defines fn(nvmlDevice_t, unsigned *count, T *infos) over procs(). */
#define PROCS(fn, T, type, stride)                                                          \
    FAKE_API nvmlReturn_t fn(nvmlDevice_t dev, unsigned int *count, T *infos)               \
    {                                                                                       \
        return procs(FAKE_FN_##fn, dev, count, infos, type, stride);                        \
    }

PROCS(nvmlDeviceGetComputeRunningProcesses, nvmlProcessInfo_v1_t, FAKE_COMPUTE, LAYOUT_V1)
PROCS(nvmlDeviceGetGraphicsRunningProcesses, nvmlProcessInfo_v1_t, FAKE_GRAPHICS, LAYOUT_V1)

#ifndef FAKE_NVML_LEGACY

FAKE_API nvmlReturn_t nvmlInit_v2(void)
{
    return fake_refcount(FAKE_FN_nvmlInit_v2);
}

HANDLE_BY_INDEX(nvmlDeviceGetHandleByIndex_v2)

static nvmlReturn_t cuda(const struct fake_call *c, int *out)
{
    if (!out)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!(c->sc->known & FK_CUDA))
        return NVML_ERROR_NOT_SUPPORTED;
    *out = c->sc->cuda;
    return NVML_SUCCESS;
}

static nvmlReturn_t pci_v2(const struct fake_call *c, nvmlPciInfo_t *out)
{
    return pci(c, out, false);
}

static nvmlReturn_t mem_v2(const struct fake_call *c, nvmlMemory_v2_t *out)
{
    if (out->version != nvmlMemory_v2)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    return mem(c, out, false);
}

SYS_GETTER(nvmlSystemGetNVMLVersion, (char *buf, unsigned int len),
           put_str(c.sc->known & FK_NVML ? c.sc->nvml : NULL, buf, len))
SYS_GETTER(nvmlSystemGetCudaDriverVersion, (int *v), cuda(&c, v))
SYS_GETTER(nvmlSystemGetCudaDriverVersion_v2, (int *v), cuda(&c, v))
SYS_GETTER(nvmlDeviceGetCount_v2, (unsigned int *n), count(&c, n))
DEV_GETTER(nvmlDeviceGetPciInfo_v2, nvmlPciInfo_t, pci_v2)
DEV_GETTER(nvmlDeviceGetPciInfo_v3, nvmlPciInfo_t, pci_v2)
DEV_GETTER(nvmlDeviceGetMemoryInfo_v2, nvmlMemory_v2_t, mem_v2)
FIELD_GETTER(nvmlDeviceGetMaxMigDeviceCount, unsigned int, GPU_FIELD(c, FK_MIG),
             c->dev->mig == 1 ? FAKE_MAX_MIG : 0)
FIELD_GETTER(nvmlDeviceIsMigDeviceHandle, unsigned int, true, c->m >= 0)
FIELD_GETTER(nvmlDeviceGetGpuInstanceId, unsigned int, c->m >= 0 && (c->dev->known & FK_GI),
             c->dev->gi)
FIELD_GETTER(nvmlDeviceGetComputeInstanceId, unsigned int, c->m >= 0 && (c->dev->known & FK_CI),
             c->dev->ci)

static nvmlReturn_t parent(const struct fake_call *c, nvmlDevice_t *out)
{
    if (c->m < 0)
        return NVML_ERROR_INVALID_ARGUMENT;
    *out = fake_handle((unsigned)c->g, -1);
    return NVML_SUCCESS;
}

DEV_GETTER(nvmlDeviceGetDeviceHandleFromMigDeviceHandle, nvmlDevice_t, parent)

/* The getters with two outputs: compute capability and MIG mode (current, pending). */
#define PAIR_GETTER(fn, T, bit, a_field, b_field)                                           \
    FAKE_API nvmlReturn_t fn(nvmlDevice_t dev, T *a, T *b)                                  \
    {                                                                                       \
        struct fake_call c;                                                                 \
        nvmlReturn_t r = fake_enter(FAKE_FN_##fn, dev, 0, &c);                              \
        if (r != NVML_SUCCESS)                                                              \
            return r;                                                                       \
        if (!a || !b)                                                                       \
            r = NVML_ERROR_INVALID_ARGUMENT;                                                \
        else if (!GPU_FIELD(&c, bit))                                                       \
            r = NVML_ERROR_NOT_SUPPORTED;                                                   \
        else                                                                                \
            *a = (T)c.dev->a_field, *b = (T)c.dev->b_field;                                 \
        fake_leave();                                                                       \
        return r;                                                                           \
    }

PAIR_GETTER(nvmlDeviceGetCudaComputeCapability, int, FK_CC, cc_major, cc_minor)
PAIR_GETTER(nvmlDeviceGetMigMode, unsigned int, FK_MIG, mig, mig_pending)

FAKE_API nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t dev, unsigned int index,
                                                          nvmlDevice_t *mig)
{
    struct fake_call c;
    nvmlReturn_t r = fake_enter(FAKE_FN_nvmlDeviceGetMigDeviceHandleByIndex, dev, 0, &c);
    if (r != NVML_SUCCESS)
        return r;
    if (!mig)
        r = NVML_ERROR_INVALID_ARGUMENT;
    else if (!GPU_FIELD(&c, FK_MIG))
        r = NVML_ERROR_NOT_SUPPORTED;
    else if (index >= c.gpu->nmig)
        r = NVML_ERROR_NOT_FOUND;
    else
        *mig = fake_handle((unsigned)c.g, (int)index);
    fake_leave();
    return r;
}

#ifdef FAKE_NVML_535
#define V3_T nvmlProcessInfo_535_t
#define LAYOUT_V3 LAYOUT_535
#else
#define V3_T nvmlProcessInfo_v2_t
#define LAYOUT_V3 LAYOUT_V2
#endif
PROCS(nvmlDeviceGetComputeRunningProcesses_v2, nvmlProcessInfo_v2_t, FAKE_COMPUTE, LAYOUT_V2)
PROCS(nvmlDeviceGetGraphicsRunningProcesses_v2, nvmlProcessInfo_v2_t, FAKE_GRAPHICS, LAYOUT_V2)
PROCS(nvmlDeviceGetMPSComputeRunningProcesses, nvmlProcessInfo_v1_t, FAKE_MPS, LAYOUT_V1)
PROCS(nvmlDeviceGetMPSComputeRunningProcesses_v2, nvmlProcessInfo_v2_t, FAKE_MPS, LAYOUT_V2)
PROCS(nvmlDeviceGetComputeRunningProcesses_v3, V3_T, FAKE_COMPUTE, LAYOUT_V3)
PROCS(nvmlDeviceGetGraphicsRunningProcesses_v3, V3_T, FAKE_GRAPHICS, LAYOUT_V3)
PROCS(nvmlDeviceGetMPSComputeRunningProcesses_v3, V3_T, FAKE_MPS, LAYOUT_V3)

/* One sample per PID on the GPU, with the sm= of its first line there. Counts them, and
 * fills them too when out is not NULL. *sampled: some line on the GPU gave sm=. */
static unsigned samples(const struct fake_call *c, nvmlProcessUtilizationSample_t *out,
                        bool *sampled)
{
    const struct fake_proc *ps = c->sc->procs;
    struct timespec ts;
    unsigned n = 0, i, j;
    clock_gettime(CLOCK_REALTIME, &ts);
    *sampled = false;
    for (i = 0; i < c->sc->nprocs; i++) {
        *sampled |= ps[i].gpu == c->g && ps[i].sm_given;
        for (j = 0; j < i && !(ps[j].gpu == c->g && ps[j].pid == ps[i].pid); j++)
            ;
        if (ps[i].gpu != c->g || j < i || !listed(&ps[i]))
            continue;
        if (out) {
            memset(&out[n], 0, sizeof out[n]);
            out[n].pid = ps[i].pid;
            out[n].smUtil = ps[i].sm;
            out[n].timeStamp = (unsigned long long)ts.tv_sec * 1000000u
                             + (unsigned long long)ts.tv_nsec / 1000u;
        }
        n++;
    }
    return n;
}

/* lastSeenTimeStamp is ignored: every sample is stamped now. */
FAKE_API nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t dev,
                                                      nvmlProcessUtilizationSample_t *out,
                                                      unsigned int *count_io,
                                                      unsigned long long lastSeenTimeStamp)
{
    struct fake_call c;
    (void)lastSeenTimeStamp;
    nvmlReturn_t r = fake_enter(FAKE_FN_nvmlDeviceGetProcessUtilization, dev, 0, &c);
    if (r != NVML_SUCCESS)
        return r;
    bool sampled;
    unsigned n = samples(&c, NULL, &sampled);
    if (!count_io)
        r = NVML_ERROR_INVALID_ARGUMENT;
    else if (c.m >= 0 || (n > 0 && !sampled))
        r = NVML_ERROR_NOT_SUPPORTED;
    else if (n == 0)
        r = NVML_ERROR_NOT_FOUND;
    else if (!out || *count_io < n)
        r = NVML_ERROR_INSUFFICIENT_SIZE;
    else
        samples(&c, out, &sampled);
    if (count_io)
        *count_io = n;
    fake_leave();
    return r;
}

/* The sensors: GPU handles only (MIG devices answer NOT_SUPPORTED, as they share their
 * parent's); a field left out or `na` answers NOT_SUPPORTED, as a fanless board's fan does. */
FAKE_API nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t dev, int sensor, unsigned int *temp)
{
    struct fake_call c;
    nvmlReturn_t r = fake_enter(FAKE_FN_nvmlDeviceGetTemperature, dev, 0, &c);
    if (r != NVML_SUCCESS)
        return r;
    if (!temp || sensor != NVML_TEMPERATURE_GPU)
        r = NVML_ERROR_INVALID_ARGUMENT;
    else if (!GPU_FIELD(&c, FK_TEMP))
        r = NVML_ERROR_NOT_SUPPORTED;
    else
        *temp = c.dev->temp;
    fake_leave();
    return r;
}
FIELD_GETTER(nvmlDeviceGetPowerUsage, unsigned int, GPU_FIELD(c, FK_POWER), c->dev->power_mw)
FIELD_GETTER(nvmlDeviceGetEnforcedPowerLimit, unsigned int, GPU_FIELD(c, FK_PLIMIT),
             c->dev->power_limit_mw)
FIELD_GETTER(nvmlDeviceGetPowerManagementLimit, unsigned int, GPU_FIELD(c, FK_PLIMIT),
             c->dev->power_limit_mw)
FIELD_GETTER(nvmlDeviceGetFanSpeed, unsigned int, GPU_FIELD(c, FK_FAN), c->dev->fan)

/* The health getters (GPU handles only, like the sensors): each answers from its scenario
 * keys, NOT_SUPPORTED when they were left out or `na`. */
PAIR_GETTER(nvmlDeviceGetEccMode, unsigned int, FK_ECC, ecc, ecc_pending)

FAKE_API nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t dev, int error_type,
                                                  int counter_type, unsigned long long *count)
{
    static const uint64_t bits[4] = {FK_ECC_VC, FK_ECC_VU, FK_ECC_AC, FK_ECC_AU};
    struct fake_call c;
    nvmlReturn_t r = fake_enter(FAKE_FN_nvmlDeviceGetTotalEccErrors, dev, 0, &c);
    if (r != NVML_SUCCESS)
        return r;
    unsigned i = (unsigned)counter_type * 2u + (unsigned)error_type;
    if (!count || error_type < 0 || error_type > 1 || counter_type < 0 || counter_type > 1)
        r = NVML_ERROR_INVALID_ARGUMENT;
    else if (!GPU_FIELD(&c, bits[i]))
        r = NVML_ERROR_NOT_SUPPORTED;
    else
        *count = c.dev->ecc_count[i];
    fake_leave();
    return r;
}

/* NVML's count semantics: *count is the buffer's size in, the pages' number out; a buffer
 * too small (a size query: 0) answers INSUFFICIENT_SIZE, unless there are none. Addresses are
 * made up, one page apart. */
FAKE_API nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t dev, int cause, unsigned int *count,
                                                unsigned long long *addresses)
{
    struct fake_call c;
    nvmlReturn_t r = fake_enter(FAKE_FN_nvmlDeviceGetRetiredPages, dev, 0, &c);
    if (r != NVML_SUCCESS)
        return r;
    uint64_t bit = cause == 0 ? FK_RET_SBE : FK_RET_DBE;
    unsigned n = cause == 0 ? c.dev->retired_sbe : c.dev->retired_dbe;
    if (!count || cause < 0 || cause > 1)
        r = NVML_ERROR_INVALID_ARGUMENT;
    else if (!GPU_FIELD(&c, bit))
        r = NVML_ERROR_NOT_SUPPORTED;
    else if (n > 0 && (!addresses || *count < n))
        r = NVML_ERROR_INSUFFICIENT_SIZE;
    else
        for (unsigned i = 0; i < n; i++)
            addresses[i] = 0x100000ull + (unsigned long long)i * 4096u;
    if (count && r != NVML_ERROR_INVALID_ARGUMENT && r != NVML_ERROR_NOT_SUPPORTED)
        *count = n;
    fake_leave();
    return r;
}

FIELD_GETTER(nvmlDeviceGetRetiredPagesPendingStatus, unsigned int, GPU_FIELD(c, FK_RET_PEND),
             c->dev->retired_pending)

/* Any of the four remap keys makes the call answer; those left out count 0. */
FAKE_API nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t dev, unsigned int *corr,
                                                unsigned int *unc, unsigned int *pending,
                                                unsigned int *failure)
{
    struct fake_call c;
    nvmlReturn_t r = fake_enter(FAKE_FN_nvmlDeviceGetRemappedRows, dev, 0, &c);
    if (r != NVML_SUCCESS)
        return r;
    if (!corr || !unc || !pending || !failure)
        r = NVML_ERROR_INVALID_ARGUMENT;
    else if (c.m >= 0 || !(c.dev->known & FK_REMAP))
        r = NVML_ERROR_NOT_SUPPORTED;
    else
        *corr = c.dev->remap[0], *unc = c.dev->remap[1], *pending = c.dev->remap[2],
        *failure = c.dev->remap[3];
    fake_leave();
    return r;
}

/* Only the recovery action field is known; every other field id answers NOT_SUPPORTED in its
 * own nvmlReturn, as does the recovery action when the scenario leaves it out. */
FAKE_API nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t dev, int n, nvmlFieldValue_t *values)
{
    struct fake_call c;
    nvmlReturn_t r = fake_enter(FAKE_FN_nvmlDeviceGetFieldValues, dev, 0, &c);
    if (r != NVML_SUCCESS)
        return r;
    if (!values || n <= 0)
        r = NVML_ERROR_INVALID_ARGUMENT;
    for (int i = 0; r == NVML_SUCCESS && i < n; i++) {
        nvmlFieldValue_t *v = &values[i];
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        v->timestamp = (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
        v->latencyUsec = 0;
        memset(&v->value, 0, sizeof v->value);
        if (v->fieldId == NVML_FI_DEV_GET_GPU_RECOVERY_ACTION && GPU_FIELD(&c, FK_RECOVERY)) {
            v->valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
            v->value.uiVal = c.dev->recovery;
            v->nvmlReturn = NVML_SUCCESS;
        } else
            v->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
    }
    fake_leave();
    return r;
}

FIELD_GETTER(nvmlDeviceGetCurrentClocksEventReasons, unsigned long long, GPU_FIELD(c, FK_CLOCKS),
             c->dev->clocks)
FIELD_GETTER(nvmlDeviceGetCurrentClocksThrottleReasons, unsigned long long,
             GPU_FIELD(c, FK_CLOCKS), c->dev->clocks)

/* Present only so a client can tell the 535 window apart (see nvml_abi.h); never supported,
 * but still logged and subject to hang and error rules. */
#define STUB(fn)                                                                            \
    FAKE_API nvmlReturn_t fn(nvmlDevice_t dev, void *info)                                  \
    {                                                                                       \
        struct fake_call c;                                                                 \
        nvmlReturn_t r = fake_enter(FAKE_FN_##fn, dev, 0, &c);                              \
        (void)info;                                                                         \
        if (r != NVML_SUCCESS)                                                              \
            return r;                                                                       \
        fake_leave();                                                                       \
        return NVML_ERROR_NOT_SUPPORTED;                                                    \
    }

STUB(nvmlDeviceGetConfComputeMemSizeInfo)
#ifndef FAKE_NVML_535
STUB(nvmlDeviceGetRunningProcessDetailList)
#endif

#endif /* !FAKE_NVML_LEGACY */
