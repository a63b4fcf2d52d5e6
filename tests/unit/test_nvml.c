/*
 * Unit tests for the NVML client (src/gpu/nvml.c) against the fake driver in tests/fake-nvml/:
 * each test writes a scenario file into a private temporary directory, loads one of the fake's
 * three builds (full, legacy, r535) by path, reads the host and checks the list, the known bits,
 * the recorded errors and, through FAKE_NVML_LOG, which versioned symbols were called.
 *
 * Isolation: every test sets FAKE_NVML_SCENARIO and FAKE_NVML_LOG (and VRAMGUARD_NVML where it
 * is the subject) to files of its own and unsets them in vg_t_done(); the library is dlclosed
 * after each test. Nothing depends on timing.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "gpu/gpu.h"
#include "gpu/nvml.h"

#define FAKE_FULL VG_TEST_BUILD_DIR "/fake-nvml/full/libnvidia-ml.so.1"
#define FAKE_LEGACY VG_TEST_BUILD_DIR "/fake-nvml/legacy/libnvidia-ml.so.1"
#define FAKE_R535 VG_TEST_BUILD_DIR "/fake-nvml/r535/libnvidia-ml.so.1"

#define MiB (1024ull * 1024)
#define GiB (1024ull * MiB)

/* Group state: the temporary directory every scenario and log lives in. */
struct vg_t_dir {
    char path[64];
    unsigned seq;
};

/* One test's run: the scenario and log files, the client and what it read. */
struct vg_t {
    char *scenario;
    char *log;
    struct vg_nvml *nvml;
    struct vg_gpu_list list;
    struct vg_err err;
    int rc_open, rc_read;
};

static int vg_t_group_setup(void **state)
{
    struct vg_t_dir *d = calloc(1, sizeof *d);
    if (!d)
        return -1;
    const char *tmp = getenv("TMPDIR");
    int n = snprintf(d->path, sizeof d->path, "%s/vg-nvml-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (n < 0 || (size_t)n >= sizeof d->path) {
        n = snprintf(d->path, sizeof d->path, "/tmp/vg-nvml-XXXXXX");
        if (n < 0) {
            free(d);
            return -1;
        }
    }
    if (!mkdtemp(d->path)) {
        free(d);
        return -1;
    }
    *state = d;
    return 0;
}

static int vg_t_group_teardown(void **state)
{
    struct vg_t_dir *d = *state;
    char cmd[128];
    int n = snprintf(cmd, sizeof cmd, "rm -rf '%s'", d->path);
    if (n > 0 && (size_t)n < sizeof cmd && system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", d->path);
    free(d);
    return 0;
}

static char *vg_t_path(struct vg_t_dir *d, const char *ext)
{
    char *p = NULL;
    assert_true(asprintf(&p, "%s/%u.%s", d->path, d->seq, ext) > 0);
    return p;
}

static void vg_t_write(const char *path, const char *text)
{
    FILE *f = fopen(path, "we");
    assert_non_null(f);
    assert_int_equal(fputs(text, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
}

/* Write the scenario, point the fake at it (and at a fresh log) and open lib; no read yet. */
static void vg_t_open(void **state, struct vg_t *t, const char *lib, const char *scenario)
{
    struct vg_t_dir *d = *state;
    memset(t, 0, sizeof *t);
    vg_gpu_list_init(&t->list);
    d->seq++;
    t->scenario = vg_t_path(d, "scenario");
    t->log = vg_t_path(d, "log");
    vg_t_write(t->scenario, scenario);
    assert_int_equal(setenv("FAKE_NVML_SCENARIO", t->scenario, 1), 0);
    assert_int_equal(setenv("FAKE_NVML_LOG", t->log, 1), 0);
    t->rc_open = vg_nvml_open(lib, &t->nvml, &t->err);
}

/* Open and read; both must succeed. */
static void vg_t_read(void **state, struct vg_t *t, const char *lib, const char *scenario)
{
    vg_t_open(state, t, lib, scenario);
    if (t->rc_open != 0)
        fail_msg("vg_nvml_open: %s", vg_err_msg(&t->err));
    t->rc_read = vg_nvml_read(t->nvml, &t->list, &t->err);
    if (t->rc_read != 0)
        fail_msg("vg_nvml_read: %s", vg_err_msg(&t->err));
}

static void vg_t_done(struct vg_t *t)
{
    vg_gpu_list_release(&t->list);
    vg_nvml_free(t->nvml);
    vg_err_release(&t->err);
    unsetenv("FAKE_NVML_SCENARIO");
    unsetenv("FAKE_NVML_LOG");
    unsetenv("VRAMGUARD_NVML");
    free(t->scenario);
    free(t->log);
}

/* How many times the fake logged a call to exactly `name`. */
static int vg_t_calls(const struct vg_t *t, const char *name)
{
    FILE *f = fopen(t->log, "re");
    char *line = NULL;
    size_t cap = 0, len = strlen(name);
    int n = 0;
    if (!f)
        return 0;
    while (getline(&line, &cap, f) > 0) {
        char end = line[len];
        if (strncmp(line, name, len) == 0 &&
            (end == '\n' || end == ' ' || end == '\t' || end == '\0'))
            n++;
    }
    free(line);
    fclose(f);
    return n;
}

static const struct vg_gpu_proc *vg_t_proc(const struct vg_gpu *g, uint32_t pid)
{
    for (size_t i = 0; i < g->nprocs; i++)
        if (g->procs[i].pid == pid)
            return &g->procs[i];
    return NULL;
}

static void vg_t_assert_proc(const struct vg_gpu *g, uint32_t pid, unsigned types, uint64_t used)
{
    const struct vg_gpu_proc *p = vg_t_proc(g, pid);
    if (!p)
        fail_msg("GPU %u has no pid %u", g->index, pid);
    assert_int_equal(p->types, types);
    assert_true(p->used_known);
    assert_int_equal(p->used_bytes, used);
    assert_false(p->bogus_pid);
}

static size_t vg_t_nerrors(const struct vg_gpu_list *l)
{
    size_t n = l->nerrors;
    for (size_t i = 0; i < l->ngpus; i++) {
        n += l->gpus[i].nerrors;
        for (size_t m = 0; m < l->gpus[i].nmig; m++)
            n += l->gpus[i].mig[m].nerrors;
    }
    return n;
}

#define ALL_GPU_BITS                                                                               \
    (VG_GPU_K_NAME | VG_GPU_K_UUID | VG_GPU_K_MINOR | VG_GPU_K_PCI | VG_GPU_K_MEM |                \
     VG_GPU_K_RESERVED | VG_GPU_K_UTIL | VG_GPU_K_CC | VG_GPU_K_PERSIST | VG_GPU_K_COMPUTE_MODE |  \
     VG_GPU_K_MIG_MODE | VG_GPU_K_PROCS)

/* Four GPUs whose minor numbers are not their indices, with compute and graphics processes. */
static const char four_gpus[] =
    "driver 550.54.15\n"
    "nvml 12.550.54.15\n"
    "cuda 12040\n"
    "gpu index=0 uuid=GPU-00000000-0000-0000-0000-000000000000 name=\"NVIDIA A100-SXM4-80GB\""
    " minor=2 bus=00000000:07:00.0 total=80GiB reserved=512MiB used=auto util=37 mem_util=12"
    " cc=8.0 persistence=1 compute_mode=0 mig=0 mig_pending=0\n"
    "gpu index=1 uuid=GPU-11111111-1111-1111-1111-111111111111 name=\"NVIDIA A100-SXM4-80GB\""
    " minor=0 bus=00000000:0F:00.0 total=80GiB reserved=512MiB used=auto util=0 mem_util=0"
    " cc=8.0 persistence=0 compute_mode=3 mig=0 mig_pending=1\n"
    "gpu index=2 uuid=GPU-22222222-2222-2222-2222-222222222222 name=\"NVIDIA H100 80GB HBM3\""
    " minor=3 bus=00000000:47:00.0 total=80GiB reserved=1GiB used=auto util=99 mem_util=50"
    " cc=9.0 persistence=1 compute_mode=0 mig=0\n"
    "gpu index=3 uuid=GPU-33333333-3333-3333-3333-333333333333 name=\"NVIDIA H100 80GB HBM3\""
    " minor=1 bus=00000001:4E:00.0 total=80GiB reserved=1GiB used=auto util=5 mem_util=1"
    " cc=9.0 persistence=1 compute_mode=0 mig=0\n"
    "proc gpu=0 pid=1234 type=compute mem=512MiB\n"
    "proc gpu=0 pid=1234 type=graphics mem=256MiB\n"
    "proc gpu=0 pid=1300 type=compute mem=20GiB\n"
    "proc gpu=1 pid=1234 type=compute mem=300MiB\n"
    "proc gpu=2 pid=2000 type=graphics mem=64MiB\n"
    "proc gpu=3 pid=3000 type=compute mem=1GiB\n"
    "proc gpu=3 pid=3001 type=compute mem=2GiB\n"
    "proc gpu=3 pid=3002 type=compute mem=3GiB\n";

static void test_four_gpus(void **state)
{
    struct vg_t t;
    vg_t_read(state, &t, FAKE_FULL, four_gpus);
    const struct vg_gpu_list *l = &t.list;

    assert_true(l->loaded);
    assert_string_equal(l->library, FAKE_FULL);
    assert_string_equal(l->driver_version, "550.54.15");
    assert_string_equal(l->nvml_version, "12.550.54.15");
    assert_int_equal(l->cuda_version, 12040);
    assert_string_equal(l->mem_api, "v2");
    assert_string_equal(l->proc_api, "v3");
    assert_false(l->proc_stride_535);
    assert_int_equal(l->ngpus, 4);
    assert_int_equal(vg_t_nerrors(l), 0);

    const struct vg_gpu *g = &l->gpus[0];
    assert_int_equal(g->index, 0);
    assert_false(g->is_mig);
    assert_false(g->lost);
    assert_int_equal(g->known & ALL_GPU_BITS, ALL_GPU_BITS);
    assert_string_equal(g->name, "NVIDIA A100-SXM4-80GB");
    assert_string_equal(g->uuid, "GPU-00000000-0000-0000-0000-000000000000");
    assert_int_equal(g->minor, 2);
    assert_string_equal(g->pci_bus_id, "00000000:07:00.0");
    assert_int_equal(g->pci_domain, 0);
    assert_int_equal(g->pci_bus, 7);
    assert_int_equal(g->pci_device, 0);
    assert_int_equal(g->mem_total, 80 * GiB);
    assert_int_equal(g->mem_reserved, 512 * MiB);
    assert_int_equal(g->util_gpu, 37);
    assert_int_equal(g->util_mem, 12);
    assert_int_equal(g->cc_major, 8);
    assert_int_equal(g->cc_minor, 0);
    assert_true(g->persistence);
    assert_int_equal(g->compute_mode, 0);
    assert_int_equal(g->mig_current, 0);
    assert_int_equal(g->nmig, 0);
    /* compute and graphics entries of one pid merge: both types, the larger amount */
    assert_int_equal(g->nprocs, 2);
    vg_t_assert_proc(g, 1234, VG_PTYPE_COMPUTE | VG_PTYPE_GRAPHICS, 512 * MiB);
    vg_t_assert_proc(g, 1300, VG_PTYPE_COMPUTE, 20 * GiB);

    g = &l->gpus[1];
    assert_int_equal(g->minor, 0);
    assert_false(g->persistence);
    assert_int_equal(g->compute_mode, 3);
    assert_int_equal(g->mig_pending, 1);
    assert_string_equal(g->pci_bus_id, "00000000:0F:00.0");
    assert_int_equal(g->pci_bus, 0x0f);
    vg_t_assert_proc(g, 1234, VG_PTYPE_COMPUTE, 300 * MiB);

    vg_t_assert_proc(&l->gpus[2], 2000, VG_PTYPE_GRAPHICS, 64 * MiB);
    assert_int_equal(l->gpus[2].cc_major, 9);
    g = &l->gpus[3];
    assert_int_equal(g->pci_domain, 1);
    assert_int_equal(g->nprocs, 3);
    vg_t_assert_proc(g, 3000, VG_PTYPE_COMPUTE, 1 * GiB);
    vg_t_assert_proc(g, 3001, VG_PTYPE_COMPUTE, 2 * GiB);
    vg_t_assert_proc(g, 3002, VG_PTYPE_COMPUTE, 3 * GiB);

    /* minor numbers, not indices, name the device nodes */
    assert_ptr_equal(vg_gpu_list_by_minor(l, 0), &l->gpus[1]);
    assert_ptr_equal(vg_gpu_list_by_minor(l, 1), &l->gpus[3]);
    assert_ptr_equal(vg_gpu_list_by_minor(l, 2), &l->gpus[0]);
    assert_ptr_equal(vg_gpu_list_by_minor(l, 3), &l->gpus[2]);
    assert_null(vg_gpu_list_by_minor(l, 4));

    /* the newest version of each family was the one called */
    assert_int_equal(vg_t_calls(&t, "nvmlInit_v2"), 1);
    assert_int_equal(vg_t_calls(&t, "nvmlInit"), 0);
    assert_true(vg_t_calls(&t, "nvmlDeviceGetMemoryInfo_v2") >= 4);
    assert_int_equal(vg_t_calls(&t, "nvmlDeviceGetMemoryInfo"), 0);
    assert_true(vg_t_calls(&t, "nvmlDeviceGetComputeRunningProcesses_v3") >= 4);
    assert_int_equal(vg_t_calls(&t, "nvmlDeviceGetComputeRunningProcesses_v2"), 0);
    assert_int_equal(vg_t_calls(&t, "nvmlDeviceGetComputeRunningProcesses"), 0);
    assert_true(vg_t_calls(&t, "nvmlDeviceGetPciInfo_v3") >= 4);
    assert_true(vg_nvml_has_symbol(t.nvml, "nvmlInit_v2"));
    assert_true(vg_nvml_has_symbol(t.nvml, "nvmlDeviceGetMPSComputeRunningProcesses_v3"));
    assert_false(vg_nvml_has_symbol(t.nvml, "nvmlNoSuchFunction"));
    vg_t_done(&t);
}

/* Processes on every entry: the stride must be right for all of them, not just the first. */
static const char stride_check[] =
    "gpu index=0 uuid=GPU-s name=S minor=0 bus=00000000:01:00.0 total=80GiB reserved=1GiB"
    " used=auto util=1 cc=8.0 persistence=1 compute_mode=0 mig=0\n"
    "proc gpu=0 pid=101 type=compute mem=1MiB\n"
    "proc gpu=0 pid=102 type=compute mem=2MiB\n"
    "proc gpu=0 pid=103 type=compute mem=3MiB\n"
    "proc gpu=0 pid=104 type=compute mem=4MiB\n"
    "proc gpu=0 pid=105 type=compute mem=5MiB\n"
    "proc gpu=0 pid=201 type=graphics mem=7MiB\n"
    "proc gpu=0 pid=202 type=graphics mem=8MiB\n";

static void vg_t_assert_stride_procs(const struct vg_gpu *g)
{
    assert_int_equal(g->nprocs, 7);
    for (uint32_t i = 1; i <= 5; i++)
        vg_t_assert_proc(g, 100 + i, VG_PTYPE_COMPUTE, i * MiB);
    vg_t_assert_proc(g, 201, VG_PTYPE_GRAPHICS, 7 * MiB);
    vg_t_assert_proc(g, 202, VG_PTYPE_GRAPHICS, 8 * MiB);
}

static void test_legacy_v1_everything(void **state)
{
    struct vg_t t;
    vg_t_read(state, &t, FAKE_LEGACY, stride_check);
    const struct vg_gpu_list *l = &t.list;
    assert_int_equal(l->ngpus, 1);
    assert_string_equal(l->mem_api, "v1");
    assert_string_equal(l->proc_api, "v1");
    assert_false(l->proc_stride_535);
    assert_int_equal(vg_t_nerrors(l), 0); /* absent symbols are absent features, not errors */
    const struct vg_gpu *g = &l->gpus[0];
    assert_true(g->known & VG_GPU_K_MEM);
    assert_false(g->known & VG_GPU_K_RESERVED);
    assert_false(g->known & VG_GPU_K_MIG_MODE);
    assert_int_equal(g->mem_total, 80 * GiB);
    assert_string_equal(g->pci_bus_id, "00000000:01:00.0");
    vg_t_assert_stride_procs(g);
    for (size_t i = 0; i < g->nprocs; i++)
        assert_false(g->procs[i].instance_known); /* v1 entries carry no instance ids */
    assert_false(vg_nvml_has_symbol(t.nvml, "nvmlInit_v2"));
    assert_false(vg_nvml_has_symbol(t.nvml, "nvmlDeviceGetMemoryInfo_v2"));
    assert_true(vg_nvml_has_symbol(t.nvml, "nvmlDeviceGetComputeRunningProcesses"));
    assert_int_equal(vg_t_calls(&t, "nvmlInit"), 1);
    assert_true(vg_t_calls(&t, "nvmlDeviceGetComputeRunningProcesses") >= 1);
    assert_true(vg_t_calls(&t, "nvmlDeviceGetMemoryInfo") >= 1);
    vg_t_done(&t);
}

static void test_r535_stride(void **state)
{
    struct vg_t t;
    vg_t_read(state, &t, FAKE_R535, stride_check);
    const struct vg_gpu_list *l = &t.list;
    assert_true(vg_nvml_has_symbol(t.nvml, "nvmlDeviceGetConfComputeMemSizeInfo"));
    assert_false(vg_nvml_has_symbol(t.nvml, "nvmlDeviceGetRunningProcessDetailList"));
    assert_string_equal(l->proc_api, "v3");
    assert_true(l->proc_stride_535);
    assert_int_equal(vg_t_nerrors(l), 0);
    vg_t_assert_stride_procs(&l->gpus[0]);
    vg_t_done(&t);
}

/* The full build has both 535-window symbols or neither: 24-byte _v3 entries either way. */
static void test_full_stride_24(void **state)
{
    struct vg_t t;
    vg_t_read(state, &t, FAKE_FULL, stride_check);
    assert_false(t.list.proc_stride_535);
    assert_string_equal(t.list.proc_api, "v3");
    vg_t_assert_stride_procs(&t.list.gpus[0]);
    vg_t_done(&t);
}

static char *vg_t_with(const char *base, const char *extra)
{
    char *s = NULL;
    assert_true(asprintf(&s, "%s%s", base, extra) > 0);
    return s;
}

static void vg_t_mem_fallback(void **state, int code)
{
    char line[128];
    int n = snprintf(line, sizeof line, "error func=nvmlDeviceGetMemoryInfo_v2 code=%d\n", code);
    assert_true(n > 0 && (size_t)n < sizeof line);
    char *sc = vg_t_with(four_gpus, line);
    struct vg_t t;
    vg_t_read(state, &t, FAKE_FULL, sc);
    assert_string_equal(t.list.mem_api, "v1");
    assert_int_equal(vg_t_nerrors(&t.list), 0);
    for (size_t i = 0; i < 4; i++) {
        const struct vg_gpu *g = &t.list.gpus[i];
        assert_true(g->known & VG_GPU_K_MEM);
        assert_false(g->known & VG_GPU_K_RESERVED); /* v1 has no reserved field */
        assert_int_equal(g->mem_total, 80 * GiB);
        assert_false(g->lost);
    }
    assert_true(vg_t_calls(&t, "nvmlDeviceGetMemoryInfo") >= 4);
    vg_t_done(&t);
    free(sc);
}

static void test_mem_v2_not_supported(void **state)
{
    vg_t_mem_fallback(state, 3);
}

static void test_mem_v2_function_not_found(void **state)
{
    vg_t_mem_fallback(state, 13);
}

static void test_mem_v2_version_mismatch(void **state)
{
    vg_t_mem_fallback(state, 25);
}

static void test_proc_fallback_v2(void **state)
{
    char *sc =
        vg_t_with(stride_check, "error func=nvmlDeviceGetComputeRunningProcesses_v3 code=13\n"
                                "error func=nvmlDeviceGetGraphicsRunningProcesses_v3 code=13\n"
                                "error func=nvmlDeviceGetMPSComputeRunningProcesses_v3 code=13\n");
    struct vg_t t;
    vg_t_read(state, &t, FAKE_FULL, sc);
    assert_string_equal(t.list.proc_api, "v2");
    assert_int_equal(vg_t_nerrors(&t.list), 0);
    vg_t_assert_stride_procs(&t.list.gpus[0]);
    assert_true(vg_t_calls(&t, "nvmlDeviceGetComputeRunningProcesses_v2") >= 1);
    vg_t_done(&t);
    free(sc);
}

static void test_proc_fallback_v1(void **state)
{
    char *sc =
        vg_t_with(stride_check, "error func=nvmlDeviceGetComputeRunningProcesses_v3 code=3\n"
                                "error func=nvmlDeviceGetComputeRunningProcesses_v2 code=25\n"
                                "error func=nvmlDeviceGetGraphicsRunningProcesses_v3 code=3\n"
                                "error func=nvmlDeviceGetGraphicsRunningProcesses_v2 code=3\n");
    struct vg_t t;
    vg_t_read(state, &t, FAKE_FULL, sc);
    assert_int_equal(vg_t_nerrors(&t.list), 0);
    vg_t_assert_stride_procs(&t.list.gpus[0]);
    assert_true(vg_t_calls(&t, "nvmlDeviceGetComputeRunningProcesses") >= 1);
    assert_true(vg_t_calls(&t, "nvmlDeviceGetGraphicsRunningProcesses") >= 1);
    vg_t_done(&t);
    free(sc);
}

static void test_init_fails(void **state)
{
    char *sc = vg_t_with(four_gpus, "error func=nvmlInit_v2 code=9\n");
    struct vg_t t;
    vg_t_open(state, &t, FAKE_FULL, sc);
    assert_true(t.rc_open < 0);
    assert_null(t.nvml);
    assert_string_equal(vg_err_msg(&t.err),
                        "cannot initialise NVML from '" FAKE_FULL "': Driver Not Loaded");
    vg_t_done(&t);
    free(sc);
}

static void test_count_fails(void **state)
{
    char *sc = vg_t_with(four_gpus, "error func=nvmlDeviceGetCount_v2 code=999\n");
    struct vg_t t;
    vg_t_open(state, &t, FAKE_FULL, sc);
    assert_int_equal(t.rc_open, 0);
    t.rc_read = vg_nvml_read(t.nvml, &t.list, &t.err);
    assert_true(t.rc_read < 0);
    assert_non_null(strstr(vg_err_msg(&t.err), "nvmlDeviceGetCount_v2"));
    assert_non_null(strstr(vg_err_msg(&t.err), "Unknown Error"));
    assert_int_equal(t.list.ngpus, 0);
    vg_t_done(&t);
    free(sc);
}

static void vg_t_assert_intact(const struct vg_gpu *g)
{
    assert_false(g->lost);
    assert_int_equal(g->nerrors, 0);
    assert_int_equal(g->known & ALL_GPU_BITS, ALL_GPU_BITS);
}

static void test_handle_lost(void **state)
{
    char *sc = vg_t_with(four_gpus, "error func=nvmlDeviceGetHandleByIndex_v2 gpu=1 code=15\n");
    struct vg_t t;
    vg_t_read(state, &t, FAKE_FULL, sc);
    assert_int_equal(t.list.ngpus, 4);
    const struct vg_gpu *g = &t.list.gpus[1];
    assert_true(g->lost);
    assert_int_equal(g->index, 1);
    assert_int_equal(g->known, 0);
    assert_int_equal(g->nerrors, 1);
    assert_string_equal(g->errors[0].func, "nvmlDeviceGetHandleByIndex_v2");
    assert_int_equal(g->errors[0].status, 15);
    assert_string_equal(g->errors[0].msg, "GPU 1: nvmlDeviceGetHandleByIndex_v2: GPU is lost");
    vg_t_assert_intact(&t.list.gpus[0]);
    vg_t_assert_intact(&t.list.gpus[2]);
    vg_t_assert_intact(&t.list.gpus[3]);
    assert_null(vg_gpu_list_by_minor(&t.list, 0)); /* GPU 1's minor is unknown now */
    vg_t_done(&t);
    free(sc);
}

static void test_memory_lost_one_of_four(void **state)
{
    char *sc = vg_t_with(four_gpus, "error func=nvmlDeviceGetMemoryInfo_v2 gpu=2 code=15\n");
    struct vg_t t;
    vg_t_read(state, &t, FAKE_FULL, sc);
    const struct vg_gpu *g = &t.list.gpus[2];
    assert_true(g->lost);
    assert_false(g->known & VG_GPU_K_MEM);
    assert_false(g->known & VG_GPU_K_RESERVED);
    assert_true(g->known & VG_GPU_K_NAME); /* what could still be read */
    assert_true(g->known & VG_GPU_K_UUID);
    assert_true(g->known & VG_GPU_K_MINOR);
    assert_int_equal(g->nerrors, 1);
    assert_string_equal(g->errors[0].msg, "GPU 2: nvmlDeviceGetMemoryInfo_v2: GPU is lost");
    assert_int_equal(vg_t_calls(&t, "nvmlDeviceGetMemoryInfo"), 0); /* no v1 retry on LOST */
    vg_t_assert_intact(&t.list.gpus[0]);
    vg_t_assert_intact(&t.list.gpus[1]);
    vg_t_assert_intact(&t.list.gpus[3]);
    vg_t_done(&t);
    free(sc);
}

static void test_proc_call_fails(void **state)
{
    char *sc =
        vg_t_with(four_gpus, "error func=nvmlDeviceGetComputeRunningProcesses_v3 gpu=3 code=4\n");
    struct vg_t t;
    vg_t_read(state, &t, FAKE_FULL, sc);
    const struct vg_gpu *g = &t.list.gpus[3];
    assert_false(g->lost);
    assert_int_equal(g->nerrors, 1);
    assert_int_equal(g->errors[0].status, 4);
    assert_string_equal(g->errors[0].msg,
                        "GPU 3: nvmlDeviceGetComputeRunningProcesses_v3: Insufficient Permissions");
    /* No fallback on a real error. The graphics list still answered, but without the compute
     * list nobody can say which memory no process holds: the list is not known. */
    assert_int_equal(vg_t_calls(&t, "nvmlDeviceGetComputeRunningProcesses_v2"), 0);
    assert_false(g->known & VG_GPU_K_PROCS);
    assert_int_equal(g->nprocs, 0);
    vg_t_assert_intact(&t.list.gpus[0]);
    vg_t_done(&t);
    free(sc);

    /* A GPU without graphics processes at all (NOT_SUPPORTED): nothing is missing. */
    sc = vg_t_with(four_gpus, "error func=nvmlDeviceGetGraphicsRunningProcesses_v3 gpu=3 code=3\n"
                              "error func=nvmlDeviceGetGraphicsRunningProcesses_v2 gpu=3 code=3\n"
                              "error func=nvmlDeviceGetGraphicsRunningProcesses gpu=3 code=3\n");
    vg_t_read(state, &t, FAKE_FULL, sc);
    g = &t.list.gpus[3];
    assert_int_equal(g->nerrors, 0);
    assert_true(g->known & VG_GPU_K_PROCS);
    vg_t_done(&t);
    free(sc);

    /* A real error on the graphics list: its processes could be missing. */
    sc = vg_t_with(four_gpus, "error func=nvmlDeviceGetGraphicsRunningProcesses_v3 gpu=3 code=999\n");
    vg_t_read(state, &t, FAKE_FULL, sc);
    g = &t.list.gpus[3];
    assert_int_equal(g->nerrors, 1);
    assert_false(g->known & VG_GPU_K_PROCS);
    assert_true(t.list.gpus[2].known & VG_GPU_K_PROCS);
    vg_t_done(&t);
    free(sc);
}

/* A driver that answers INSUFFICIENT_SIZE forever: the retry loop is bounded. */
static void test_proc_insufficient_forever(void **state)
{
    char *sc =
        vg_t_with(four_gpus, "error func=nvmlDeviceGetComputeRunningProcesses_v3 gpu=0 code=7\n");
    struct vg_t t;
    vg_t_read(state, &t, FAKE_FULL, sc);
    const struct vg_gpu *g = &t.list.gpus[0];
    assert_int_equal(g->nerrors, 1);
    assert_int_equal(g->errors[0].status, 7);
    int calls = vg_t_calls(&t, "nvmlDeviceGetComputeRunningProcesses_v3");
    assert_true(calls > 4 && calls < 30);
    vg_t_done(&t);
    free(sc);
}

static void test_unknown_error_code(void **state)
{
    char *sc = vg_t_with(four_gpus, "error func=nvmlDeviceGetMemoryInfo_v2 gpu=0 code=12345\n"
                                    "error func=nvmlDeviceGetUUID gpu=1 code=-7\n");
    struct vg_t t;
    vg_t_read(state, &t, FAKE_FULL, sc);
    const struct vg_gpu *g = &t.list.gpus[0];
    assert_int_equal(g->nerrors, 1);
    assert_int_equal(g->errors[0].status, 12345);
    assert_non_null(strstr(g->errors[0].msg, "GPU 0: nvmlDeviceGetMemoryInfo_v2: "));
    assert_non_null(strstr(g->errors[0].msg, "12345"));
    assert_false(g->known & VG_GPU_K_MEM);
    g = &t.list.gpus[1];
    assert_int_equal(g->nerrors, 1);
    assert_non_null(strstr(g->errors[0].msg, "-7"));
    assert_false(g->known & VG_GPU_K_UUID);
    assert_null(g->uuid);
    assert_non_null(vg_nvml_strerror(t.nvml, 12345));
    assert_non_null(vg_nvml_strerror(t.nvml, -7));
    assert_string_equal(vg_nvml_strerror(NULL, 15), "GPU is lost");
    assert_string_equal(vg_nvml_strerror(NULL, 4242), "unknown NVML error");
    vg_t_done(&t);
    free(sc);
}

/* Per-process samples: a PID with one is known (its highest), and NOT_FOUND (no samples at all,
 * which a busy GPU's driver answers too) leaves every process unknown, never 0%. */
static void test_proc_util_silence(void **state)
{
    static const char sc[] =
        "gpu index=0 uuid=GPU-a name=A minor=0 bus=00000000:01:00.0 total=16GiB used=auto util=20\n"
        "gpu index=1 uuid=GPU-b name=B minor=1 bus=00000000:02:00.0 total=16GiB used=auto util=20\n"
        "proc gpu=0 pid=10 type=compute mem=4GiB sm=0\n"
        "proc gpu=0 pid=11 type=compute mem=4GiB sm=30\n"
        "proc gpu=1 pid=12 type=compute mem=4GiB sm=0\n"
        "error func=nvmlDeviceGetProcessUtilization gpu=1 code=6\n";
    struct vg_t t;
    vg_t_read(state, &t, FAKE_FULL, sc);
    const struct vg_gpu *g = &t.list.gpus[0];
    assert_true(g->known & VG_GPU_K_PROC_UTIL);
    assert_true(vg_t_proc(g, 10)->util_known);
    assert_int_equal(vg_t_proc(g, 10)->sm_util, 0);
    assert_true(vg_t_proc(g, 11)->util_known);
    assert_int_equal(vg_t_proc(g, 11)->sm_util, 30);
    g = &t.list.gpus[1];
    assert_false(g->known & VG_GPU_K_PROC_UTIL);
    assert_false(vg_t_proc(g, 12)->util_known);
    assert_int_equal(vg_t_nerrors(&t.list), 0); /* no samples is not a failure */
    vg_t_done(&t);
}

static void test_optional_not_supported(void **state)
{
    static const char sc[] =
        "gpu index=0 uuid=GPU-o name=O minor=0 bus=00000000:01:00.0 total=16GiB reserved=na"
        " used=auto util=na cc=na persistence=na compute_mode=na mig=na\n"
        "proc gpu=0 pid=10 type=compute mem=1GiB\n";
    struct vg_t t;
    vg_t_read(state, &t, FAKE_FULL, sc);
    const struct vg_gpu *g = &t.list.gpus[0];
    unsigned optional = VG_GPU_K_UTIL | VG_GPU_K_CC | VG_GPU_K_PERSIST | VG_GPU_K_COMPUTE_MODE |
                        VG_GPU_K_MIG_MODE | VG_GPU_K_RESERVED;
    assert_int_equal(g->known & optional, 0);
    assert_true(g->known & VG_GPU_K_MEM);
    assert_int_equal(vg_t_nerrors(&t.list), 0); /* unknown, not worth an error */
    vg_t_assert_proc(g, 10, VG_PTYPE_COMPUTE, 1 * GiB);
    vg_t_done(&t);
}

/* The sensors are read only when asked for; each left out (or missing from the library) is
 * unknown without an error; the enforced power limit answers before the management one. */
static void test_sensors(void **state)
{
    static const char sc[] =
        "gpu index=0 uuid=GPU-s0 name=S minor=0 bus=00000000:01:00.0 total=16GiB"
        " temp=63 power_mw=245500 power_limit_mw=700000 fan=41\n"
        "gpu index=1 uuid=GPU-s1 name=S minor=1 bus=00000000:02:00.0 total=16GiB"
        " temp=40 power_mw=na fan=na\n"
        "error func=nvmlDeviceGetTemperature gpu=1 code=4\n";
    struct vg_t t;
    const unsigned bits = VG_GPU_K_TEMP | VG_GPU_K_POWER | VG_GPU_K_POWER_LIMIT | VG_GPU_K_FAN;
    /* not asked: no call, nothing known */
    vg_t_read(state, &t, FAKE_FULL, sc);
    assert_int_equal(t.list.gpus[0].known & bits, 0);
    assert_int_equal(vg_t_calls(&t, "nvmlDeviceGetTemperature"), 0);
    assert_int_equal(vg_t_calls(&t, "nvmlDeviceGetFanSpeed"), 0);
    vg_t_done(&t);

    vg_t_open(state, &t, FAKE_FULL, sc);
    assert_int_equal(t.rc_open, 0);
    vg_nvml_want_sensors(t.nvml, true);
    assert_int_equal(vg_nvml_read(t.nvml, &t.list, &t.err), 0);
    const struct vg_gpu *g = &t.list.gpus[0];
    assert_int_equal(g->known & bits, bits);
    assert_int_equal(g->temp_c, 63);
    assert_int_equal(g->power_mw, 245500);
    assert_int_equal(g->power_limit_mw, 700000);
    assert_int_equal(g->fan_pct, 41);
    assert_int_equal(g->nerrors, 0);
    /* GPU 1: power and fan not supported (quiet), the limit left out, the temperature refused
     * (NO_PERMISSION: recorded, not fatal) */
    g = &t.list.gpus[1];
    assert_int_equal(g->known & bits, 0);
    assert_true(g->known & VG_GPU_K_MEM);
    assert_int_equal(g->nerrors, 1);
    assert_string_equal(g->errors[0].func, "nvmlDeviceGetTemperature");
    assert_int_equal(vg_t_calls(&t, "nvmlDeviceGetEnforcedPowerLimit"), 2);
    assert_int_equal(vg_t_calls(&t, "nvmlDeviceGetPowerManagementLimit"), 0);
    vg_t_done(&t);

    /* the legacy library has none of them: unknown, no error */
    vg_t_open(state, &t, FAKE_LEGACY, sc);
    assert_int_equal(t.rc_open, 0);
    vg_nvml_want_sensors(t.nvml, true);
    assert_int_equal(vg_nvml_read(t.nvml, &t.list, &t.err), 0);
    assert_int_equal(t.list.gpus[0].known & bits, 0);
    assert_int_equal(vg_t_nerrors(&t.list), 0);
    vg_t_done(&t);
}

static void test_mem_na_and_bogus_pids(void **state)
{
    static const char sc[] =
        "gpu index=0 uuid=GPU-b name=B minor=0 bus=00000000:01:00.0 total=16GiB reserved=0"
        " used=1GiB util=0 cc=8.0 persistence=1 compute_mode=0 mig=0\n"
        "proc gpu=0 pid=10 type=compute mem=na\n"
        "proc gpu=0 pid=11 type=compute mem=5MiB\n"
        "proc gpu=0 pid=11 type=graphics mem=na\n"
        "proc gpu=0 pid=0 type=compute mem=7MiB\n"
        "proc gpu=0 pid=4294967295 type=graphics mem=9MiB\n";
    struct vg_t t;
    vg_t_read(state, &t, FAKE_FULL, sc);
    const struct vg_gpu *g = &t.list.gpus[0];
    assert_int_equal(g->nprocs, 4);
    const struct vg_gpu_proc *p = vg_t_proc(g, 10);
    assert_non_null(p);
    assert_false(p->used_known);
    assert_int_equal(p->used_bytes, 0);
    assert_false(p->bogus_pid);
    /* a known value wins over an unknown one from another list */
    vg_t_assert_proc(g, 11, VG_PTYPE_COMPUTE | VG_PTYPE_GRAPHICS, 5 * MiB);
    p = vg_t_proc(g, 0);
    assert_non_null(p);
    assert_true(p->bogus_pid);
    assert_int_equal(p->used_bytes, 7 * MiB);
    p = vg_t_proc(g, UINT32_MAX);
    assert_non_null(p);
    assert_true(p->bogus_pid);
    assert_int_equal(p->types, VG_PTYPE_GRAPHICS);
    vg_t_done(&t);
}

/* The fake under-reports the size by `by` on each of its `times` INSUFFICIENT_SIZE answers;
 * the client must end with the full list after at least min_calls compute-list calls. */
static void vg_t_grow(void **state, const char *rule, int min_calls)
{
    char *sc = vg_t_with(stride_check, rule);
    struct vg_t t;
    vg_t_read(state, &t, FAKE_FULL, sc);
    assert_int_equal(vg_t_nerrors(&t.list), 0);
    vg_t_assert_stride_procs(&t.list.gpus[0]);
    assert_true(vg_t_calls(&t, "nvmlDeviceGetComputeRunningProcesses_v3") >= min_calls);
    vg_t_done(&t);
    free(sc);
}

static void test_grow_small(void **state)
{
    vg_t_grow(state, "grow gpu=0 type=compute by=3\n", 2);
}

/* More than the headroom, several times over: the client must go round again. */
static void test_grow_beyond_headroom(void **state)
{
    vg_t_grow(state,
              "grow gpu=0 type=compute by=5 times=3\n"
              "grow gpu=0 type=graphics by=2 times=2\n",
              3);
}

static const char mig_scenario[] =
    "gpu index=0 uuid=GPU-plain name=P minor=1 bus=00000000:01:00.0 total=80GiB reserved=1GiB"
    " used=auto util=1 cc=8.0 persistence=1 compute_mode=0 mig=0\n"
    "gpu index=1 uuid=GPU-mig name=\"NVIDIA A100-SXM4-80GB\" minor=0 bus=00000000:02:00.0"
    " total=80GiB reserved=1GiB used=auto util=na cc=8.0 persistence=1 compute_mode=0 mig=1\n"
    "mig parent=1 index=0 uuid=MIG-aaaa name=\"NVIDIA A100-SXM4-80GB MIG 1g.10gb\" gi=7 ci=0"
    " total=10GiB used=auto\n"
    "mig parent=1 index=1 uuid=MIG-bbbb name=\"NVIDIA A100-SXM4-80GB MIG 3g.40gb\" gi=2 ci=0"
    " total=40GiB used=auto\n"
    "proc gpu=0 pid=5 type=compute mem=1GiB\n"
    "proc mig=1/0 pid=77 type=compute mem=1GiB\n"
    "proc mig=1/0 pid=78 type=compute mem=2GiB\n"
    "proc mig=1/1 pid=79 type=compute mem=3GiB\n";

static void test_mig_devices(void **state)
{
    struct vg_t t;
    vg_t_read(state, &t, FAKE_FULL, mig_scenario);
    const struct vg_gpu_list *l = &t.list;
    assert_int_equal(vg_t_nerrors(l), 0);
    assert_int_equal(l->gpus[0].nmig, 0);
    const struct vg_gpu *g = &l->gpus[1];
    assert_true(g->known & VG_GPU_K_MIG_MODE);
    assert_int_equal(g->mig_current, 1);
    assert_int_equal(g->nmig, 2);

    const struct vg_gpu *m = &g->mig[0];
    assert_true(m->is_mig);
    assert_int_equal(m->index, 0);
    assert_string_equal(m->uuid, "MIG-aaaa");
    assert_string_equal(m->name, "NVIDIA A100-SXM4-80GB MIG 1g.10gb");
    assert_true(m->known & VG_GPU_K_INSTANCE);
    assert_int_equal(m->gpu_instance, 7);
    assert_int_equal(m->compute_instance, 0);
    assert_true(m->known & VG_GPU_K_MEM);
    assert_int_equal(m->mem_total, 10 * GiB);
    assert_int_equal(m->mem_used, 3 * GiB);
    assert_true(m->known & VG_GPU_K_MINOR);
    assert_int_equal(m->minor, 0); /* the parent's /dev/nvidia0 */
    assert_int_equal(m->nprocs, 2);
    vg_t_assert_proc(m, 77, VG_PTYPE_COMPUTE, 1 * GiB);
    vg_t_assert_proc(m, 78, VG_PTYPE_COMPUTE, 2 * GiB);

    m = &g->mig[1];
    assert_string_equal(m->uuid, "MIG-bbbb");
    assert_int_equal(m->gpu_instance, 2);
    assert_int_equal(m->nprocs, 1);
    vg_t_assert_proc(m, 79, VG_PTYPE_COMPUTE, 3 * GiB);

    assert_ptr_equal(vg_gpu_list_by_minor(l, 0), g); /* never a MIG device */
    vg_t_done(&t);
}

static void test_mig_error(void **state)
{
    char *sc = vg_t_with(mig_scenario, "error func=nvmlDeviceGetMemoryInfo_v2 mig=1/1 code=15\n");
    struct vg_t t;
    vg_t_read(state, &t, FAKE_FULL, sc);
    const struct vg_gpu *g = &t.list.gpus[1];
    assert_int_equal(g->nmig, 2);
    assert_false(g->lost);
    assert_int_equal(g->mig[0].nerrors, 0);
    const struct vg_gpu *m = &g->mig[1];
    assert_true(m->lost);
    assert_false(m->known & VG_GPU_K_MEM);
    assert_int_equal(m->nerrors, 1);
    assert_string_equal(m->errors[0].msg, "GPU 1/MIG 1: nvmlDeviceGetMemoryInfo_v2: GPU is lost");
    vg_t_assert_proc(m, 79, VG_PTYPE_COMPUTE, 3 * GiB);
    vg_t_done(&t);
    free(sc);
}

/* Read list's GPUs with a deadline ms from now. */
static int vg_t_read_gpus_within(struct vg_t *t, unsigned ms)
{
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    dl.tv_sec += ms / 1000;
    dl.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (dl.tv_nsec >= 1000000000L) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000L;
    }
    return vg_nvml_read_gpus(t->nvml, &t->list, &dl, &t->err);
}

/* One read of the whole host with a deadline, into a fresh list. */
static void vg_t_reread(struct vg_t *t, unsigned ms)
{
    vg_gpu_list_release(&t->list);
    vg_gpu_list_init(&t->list);
    assert_int_equal(vg_nvml_read_host(t->nvml, &t->list, &t->err), 0);
    assert_int_equal(vg_t_read_gpus_within(t, ms), 0);
}

/*
 * A call that hangs on one GPU costs that GPU alone: past the deadline it is marked hung with
 * the identity it had given and an error naming the call, the three others are whole. While
 * the call is stuck, later reads skip the GPU (no call queued behind it: the fake logs each
 * call); once it returns, the GPU is read again. The hang (3 s) is far past the deadline
 * (300 ms), and the recovery is polled with a bound: nothing here depends on timing.
 */
static void test_hang_one_gpu(void **state)
{
    char *sc =
        vg_t_with(four_gpus, "hang func=nvmlDeviceGetMemoryInfo_v2 gpu=1 seconds=3 times=1\n");
    struct vg_t t;
    vg_t_open(state, &t, FAKE_FULL, sc);
    assert_int_equal(t.rc_open, 0);
    vg_t_reread(&t, 300);
    assert_int_equal(t.list.ngpus, 4);
    const struct vg_gpu *g = &t.list.gpus[1];
    assert_true(g->hung);
    assert_false(g->lost);
    assert_int_equal(g->index, 1);
    assert_int_equal(g->known, VG_GPU_K_NAME | VG_GPU_K_UUID | VG_GPU_K_MINOR | VG_GPU_K_PCI);
    assert_string_equal(g->uuid, "GPU-11111111-1111-1111-1111-111111111111");
    assert_int_equal(g->minor, 0);
    assert_int_equal(g->nprocs, 0);
    assert_int_equal(g->nerrors, 1);
    assert_string_equal(g->errors[0].func, "nvmlDeviceGetMemoryInfo_v2");
    assert_int_equal(g->errors[0].status, 10); /* NVML_ERROR_TIMEOUT */
    assert_non_null(strstr(g->errors[0].msg, "GPU 1: nvmlDeviceGetMemoryInfo_v2 has not returned"));
    vg_t_assert_intact(&t.list.gpus[0]);
    vg_t_assert_intact(&t.list.gpus[2]);
    vg_t_assert_intact(&t.list.gpus[3]);
    assert_string_equal(t.list.mem_api, "v2");
    int calls = vg_t_calls(&t, "nvmlDeviceGetMemoryInfo_v2");
    assert_int_equal(calls, 4);

    /* Still stuck: GPU 1 is hung again at once, and its memory is not asked for again. */
    vg_t_reread(&t, 300);
    assert_true(t.list.gpus[1].hung);
    assert_string_equal(t.list.gpus[1].errors[0].func, "nvmlDeviceGetMemoryInfo_v2");
    vg_t_assert_intact(&t.list.gpus[0]);
    assert_int_equal(vg_t_calls(&t, "nvmlDeviceGetMemoryInfo_v2"), calls + 3);

    /* The call returns (the fake sleeps 3 s): GPU 1 is read whole again. */
    bool back = false;
    for (int i = 0; i < 300 && !back; i++) {
        struct timespec ts = {0, 100 * 1000000L};
        nanosleep(&ts, NULL);
        vg_t_reread(&t, 5000);
        back = !t.list.gpus[1].hung;
    }
    assert_true(back);
    vg_t_assert_intact(&t.list.gpus[1]);
    vg_t_done(&t);
    free(sc);
}

/* A read that finds a GPU's reader still busy for less than its own budget (an earlier read
 * that gave up soon) waits for it and takes its late answer: the GPU is whole, and no second
 * call was made. The hang (1 s) is longer than the first deadline (200 ms) and much shorter than
 * the second (10 s). */
static void test_hang_late_answer_taken(void **state)
{
    char *sc = vg_t_with(four_gpus,
                         "hang func=nvmlDeviceGetMemoryInfo_v2 gpu=3 seconds=1 times=1\n");
    struct vg_t t;
    vg_t_open(state, &t, FAKE_FULL, sc);
    assert_int_equal(t.rc_open, 0);
    vg_t_reread(&t, 200);
    assert_true(t.list.gpus[3].hung);
    vg_t_assert_intact(&t.list.gpus[0]);
    vg_t_reread(&t, 10000);
    vg_t_assert_intact(&t.list.gpus[3]);
    assert_false(t.list.gpus[3].hung);
    /* 4 + 3: GPU 3's memory was asked for once, its late answer taken */
    assert_int_equal(vg_t_calls(&t, "nvmlDeviceGetMemoryInfo_v2"), 7);
    vg_t_done(&t);
    free(sc);
}

/* The client is freed while a GPU's call is stuck: nothing waits, and the library stays
 * loaded until the call returns (the stuck thread lets go last). */
static void test_hang_free_while_stuck(void **state)
{
    char *sc = vg_t_with(four_gpus, "hang func=nvmlDeviceGetUUID gpu=2 seconds=2 times=1\n");
    struct vg_t t;
    vg_t_open(state, &t, FAKE_FULL, sc);
    assert_int_equal(t.rc_open, 0);
    vg_t_reread(&t, 200);
    const struct vg_gpu *g = &t.list.gpus[2];
    assert_true(g->hung);
    assert_int_equal(g->known, VG_GPU_K_NAME); /* read before the hang */
    assert_string_equal(g->errors[0].func, "nvmlDeviceGetUUID");
    vg_t_assert_intact(&t.list.gpus[3]);
    vg_t_done(&t); /* returns at once */
    free(sc);
}

/* A lying device count is capped: 4294967295 GPUs read as 256, with an error on the list;
 * the GPUs past the real ones are lost, the real one is whole. */
static void test_count_capped(void **state)
{
    char *sc = vg_t_with(four_gpus, "count 4294967295\n");
    struct vg_t t;
    vg_t_read(state, &t, FAKE_FULL, sc);
    assert_int_equal(t.list.ngpus, VG_NVML_MAX_GPUS);
    assert_int_equal(t.list.nerrors, 1);
    assert_string_equal(t.list.errors[0].func, "nvmlDeviceGetCount_v2");
    assert_string_equal(t.list.errors[0].msg,
                        "nvmlDeviceGetCount_v2: the driver reports 4294967295 GPUs, more than "
                        "NVML can address (at most 256, one per minor number of /dev/nvidia*): "
                        "only the first 256 are read");
    for (size_t i = 0; i < 4; i++)
        vg_t_assert_intact(&t.list.gpus[i]);
    for (size_t i = 4; i < t.list.ngpus; i++) {
        assert_int_equal(t.list.gpus[i].index, i);
        assert_true(t.list.gpus[i].lost);
    }
    vg_t_done(&t);
    free(sc);

    /* At the cap exactly: no error. */
    sc = vg_t_with(four_gpus, "count 256\n");
    vg_t_read(state, &t, FAKE_FULL, sc);
    assert_int_equal(t.list.ngpus, 256);
    assert_int_equal(t.list.nerrors, 0);
    vg_t_done(&t);
    free(sc);
}

/* Process lists come back sorted by pid, one entry per pid, whatever order and repeats the
 * driver gives; memory of one pid's contexts in one list adds up, saturating. */
static void test_procs_sorted_saturating(void **state)
{
    char *sc = vg_t_with(four_gpus, "proc gpu=2 pid=900 type=compute mem=9223372036854775808\n"
                                    "proc gpu=2 pid=5 type=compute mem=1MiB\n"
                                    "proc gpu=2 pid=900 type=compute mem=9223372036854775808\n"
                                    "proc gpu=2 pid=70 type=compute mem=2MiB\n"
                                    "proc gpu=2 pid=5 type=graphics mem=3MiB\n");
    struct vg_t t;
    vg_t_read(state, &t, FAKE_FULL, sc);
    const struct vg_gpu *g = &t.list.gpus[2];
    assert_int_equal(g->nprocs, 4);
    for (size_t i = 1; i < g->nprocs; i++)
        assert_true(g->procs[i - 1].pid < g->procs[i].pid);
    vg_t_assert_proc(g, 900, VG_PTYPE_COMPUTE, UINT64_MAX);
    vg_t_assert_proc(g, 5, VG_PTYPE_COMPUTE | VG_PTYPE_GRAPHICS, 3 * MiB);
    vg_t_assert_proc(g, 2000, VG_PTYPE_GRAPHICS, 64 * MiB);
    assert_ptr_equal(vg_gpu_find_proc(g, 70), vg_t_proc(g, 70));
    assert_null(vg_gpu_find_proc(g, 71));
    vg_t_done(&t);
    free(sc);
}

static void test_missing_library(void **state)
{
    struct vg_t t;
    vg_t_open(state, &t, "/nonexistent/dir/libnvidia-ml.so.1", four_gpus);
    assert_int_equal(t.rc_open, -ENOENT);
    assert_null(t.nvml);
    const char *msg = vg_err_msg(&t.err);
    assert_non_null(strstr(msg, "cannot load NVML from '/nonexistent/dir/libnvidia-ml.so.1': "));
    assert_null(strchr(msg, '\n'));
    vg_t_done(&t);
}

/* A library that is not NVML at all has no nvmlInit. */
static void test_not_nvml(void **state)
{
    struct vg_t t;
    vg_t_open(state, &t, "libc.so.6", four_gpus);
    assert_true(t.rc_open < 0);
    assert_null(t.nvml);
    assert_non_null(strstr(vg_err_msg(&t.err), "no nvmlInit"));
    vg_t_done(&t);
}

static void test_env_library(void **state)
{
    struct vg_t t;
    assert_int_equal(setenv("VRAMGUARD_NVML", FAKE_LEGACY, 1), 0);
    vg_t_read(state, &t, NULL, stride_check);
    assert_string_equal(t.list.library, FAKE_LEGACY);
    assert_string_equal(t.list.mem_api, "v1"); /* really the legacy build */
    vg_t_done(&t);

    /* an explicit path beats the variable */
    assert_int_equal(setenv("VRAMGUARD_NVML", "/nonexistent/libnvidia-ml.so.1", 1), 0);
    vg_t_read(state, &t, FAKE_FULL, stride_check);
    assert_string_equal(t.list.library, FAKE_FULL);
    vg_t_done(&t);

    assert_int_equal(setenv("VRAMGUARD_NVML", "/nonexistent/libnvidia-ml.so.1", 1), 0);
    vg_t_open(state, &t, NULL, stride_check);
    assert_true(t.rc_open < 0);
    assert_non_null(strstr(vg_err_msg(&t.err), "'/nonexistent/libnvidia-ml.so.1'"));
    vg_t_done(&t);
}

/* ---- health facts ------------------------------------------------------------------------ */

#define ALL_HEALTH_BITS                                                                            \
    (VG_GH_K_ECC_MODE | VG_GH_K_ECC_VOL_CORR | VG_GH_K_ECC_VOL_UNCORR | VG_GH_K_ECC_AGG_CORR |    \
     VG_GH_K_ECC_AGG_UNCORR | VG_GH_K_RETIRED_SBE | VG_GH_K_RETIRED_DBE |                         \
     VG_GH_K_RETIRED_PENDING | VG_GH_K_REMAP | VG_GH_K_RECOVERY | VG_GH_K_CLOCKS)

static const char health_gpus[] =
    "gpu index=0 uuid=GPU-h0 name=H minor=0 bus=00000000:01:00.0 total=80GiB"
    " ecc=1 ecc_pending=0 ecc_vol_corr=12 ecc_vol_uncorr=2 ecc_agg_corr=5000000000"
    " ecc_agg_uncorr=3 retired_sbe=4 retired_dbe=1 retired_pending=1 remap_corr=7"
    " remap_uncorr=2 remap_pending=1 remap_failure=0 recovery_action=1"
    " clocks_event_reasons=0x48\n"
    "gpu index=1 uuid=GPU-h1 name=H minor=1 bus=00000000:02:00.0 total=80GiB\n";

/* Every health fact is read on every GPU, whatever the sensors say; a GPU whose driver has
 * none of them (NOT_SUPPORTED) leaves them all unknown, without an error. */
static void test_health_facts(void **state)
{
    struct vg_t t;
    vg_t_read(state, &t, FAKE_FULL, health_gpus);
    const struct vg_gpu_health *h = &t.list.gpus[0].health;
    assert_int_equal(h->known, ALL_HEALTH_BITS);
    assert_true(h->ecc_current);
    assert_false(h->ecc_pending);
    assert_int_equal(h->ecc_vol_corr, 12);
    assert_int_equal(h->ecc_vol_uncorr, 2);
    assert_int_equal(h->ecc_agg_corr, 5000000000ull);
    assert_int_equal(h->ecc_agg_uncorr, 3);
    assert_int_equal(h->retired_sbe, 4);
    assert_int_equal(h->retired_dbe, 1);
    assert_true(h->retired_pending);
    assert_int_equal(h->remap_corr, 7);
    assert_int_equal(h->remap_uncorr, 2);
    assert_true(h->remap_pending);
    assert_false(h->remap_failure);
    assert_int_equal(h->recovery, VG_RECOVERY_GPU_RESET);
    assert_int_equal(h->clocks, VG_CLK_HW_SLOWDOWN | VG_CLK_HW_THERMAL);
    assert_int_equal(t.list.gpus[1].health.known, 0);
    assert_int_equal(vg_t_nerrors(&t.list), 0);
    /* the newer clocks name answered; the older one was not needed */
    assert_int_equal(vg_t_calls(&t, "nvmlDeviceGetCurrentClocksEventReasons"), 2);
    assert_int_equal(vg_t_calls(&t, "nvmlDeviceGetCurrentClocksThrottleReasons"), 0);
    assert_int_equal(vg_t_calls(&t, "nvmlDeviceGetTotalEccErrors"), 8);
    vg_t_done(&t);
}

/* NO_PERMISSION leaves a fact unknown and is said (an error naming the call); NOT_SUPPORTED
 * leaves it unknown quietly; a driver without the event-reasons name falls back to the
 * throttle-reasons one; the recovery field failing inside a successful call is unknown. */
static void test_health_refused(void **state)
{
    char *sc = vg_t_with(health_gpus,
                         "error func=nvmlDeviceGetRemappedRows gpu=0 code=4\n"
                         "error func=nvmlDeviceGetEccMode gpu=0 code=3\n"
                         "error func=nvmlDeviceGetTotalEccErrors gpu=0 code=4 times=1\n"
                         "error func=nvmlDeviceGetRetiredPages gpu=0 code=3\n"
                         "error func=nvmlDeviceGetCurrentClocksEventReasons code=13\n");
    struct vg_t t;
    vg_t_read(state, &t, FAKE_FULL, sc);
    const struct vg_gpu *g = &t.list.gpus[0];
    const struct vg_gpu_health *h = &g->health;
    assert_false(h->known & VG_GH_K_REMAP);
    assert_false(h->remap_pending); /* unknown, and left zero: never read */
    assert_false(h->known & VG_GH_K_ECC_MODE);
    assert_false(h->known & VG_GH_K_ECC_VOL_CORR); /* the first counter was refused */
    assert_true(h->known & VG_GH_K_ECC_VOL_UNCORR);
    assert_false(h->known & (VG_GH_K_RETIRED_SBE | VG_GH_K_RETIRED_DBE));
    assert_true(h->known & VG_GH_K_RETIRED_PENDING);
    assert_true(h->known & VG_GH_K_CLOCKS);
    assert_int_equal(h->clocks, 0x48);
    assert_int_equal(vg_t_calls(&t, "nvmlDeviceGetCurrentClocksThrottleReasons"), 2);
    assert_int_equal(g->nerrors, 2);
    assert_string_equal(g->errors[0].func, "nvmlDeviceGetTotalEccErrors");
    assert_int_equal(g->errors[0].status, 4);
    assert_string_equal(g->errors[1].func, "nvmlDeviceGetRemappedRows");
    assert_non_null(strstr(g->errors[1].msg, "GPU 0: nvmlDeviceGetRemappedRows: Insufficient"));
    /* GPU 1 has no recovery_action: the call succeeds, the field answers NOT_SUPPORTED */
    assert_false(t.list.gpus[1].health.known & VG_GH_K_RECOVERY);
    assert_int_equal(t.list.gpus[1].nerrors, 0);
    vg_t_done(&t);
    free(sc);
}

/* The legacy library exports none of the health symbols: all unknown, no error, no call. */
static void test_health_legacy(void **state)
{
    struct vg_t t;
    vg_t_read(state, &t, FAKE_LEGACY, health_gpus);
    assert_int_equal(t.list.gpus[0].health.known, 0);
    assert_int_equal(vg_t_nerrors(&t.list), 0);
    assert_false(vg_nvml_has_symbol(t.nvml, "nvmlDeviceGetRemappedRows"));
    assert_false(vg_nvml_has_symbol(t.nvml, "nvmlDeviceGetFieldValues"));
    assert_int_equal(vg_t_calls(&t, "nvmlDeviceGetEccMode"), 0);
    vg_t_done(&t);
}

/* A health call that hangs costs its GPU only, like any other: hung, its health unknown, the
 * call named; once it returns the GPU is read whole again (polled with a bound). */
static void test_health_hang(void **state)
{
    char *sc = vg_t_with(health_gpus,
                         "hang func=nvmlDeviceGetRemappedRows gpu=0 seconds=1 times=1\n");
    struct vg_t t;
    vg_t_open(state, &t, FAKE_FULL, sc);
    assert_int_equal(t.rc_open, 0);
    vg_t_reread(&t, 200);
    const struct vg_gpu *g = &t.list.gpus[0];
    assert_true(g->hung);
    assert_int_equal(g->health.known, 0);
    assert_string_equal(g->errors[0].func, "nvmlDeviceGetRemappedRows");
    assert_false(t.list.gpus[1].hung);
    bool back = false;
    for (int i = 0; i < 300 && !back; i++) {
        struct timespec ts = {0, 100 * 1000000L};
        nanosleep(&ts, NULL);
        vg_t_reread(&t, 5000);
        back = !t.list.gpus[0].hung;
    }
    assert_true(back);
    assert_int_equal(t.list.gpus[0].health.known, ALL_HEALTH_BITS);
    vg_t_done(&t);
    free(sc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_four_gpus),
        cmocka_unit_test(test_sensors),
        cmocka_unit_test(test_health_facts),
        cmocka_unit_test(test_health_refused),
        cmocka_unit_test(test_health_legacy),
        cmocka_unit_test(test_health_hang),
        cmocka_unit_test(test_proc_util_silence),
        cmocka_unit_test(test_legacy_v1_everything),
        cmocka_unit_test(test_r535_stride),
        cmocka_unit_test(test_full_stride_24),
        cmocka_unit_test(test_mem_v2_not_supported),
        cmocka_unit_test(test_mem_v2_function_not_found),
        cmocka_unit_test(test_mem_v2_version_mismatch),
        cmocka_unit_test(test_proc_fallback_v2),
        cmocka_unit_test(test_proc_fallback_v1),
        cmocka_unit_test(test_init_fails),
        cmocka_unit_test(test_count_fails),
        cmocka_unit_test(test_handle_lost),
        cmocka_unit_test(test_memory_lost_one_of_four),
        cmocka_unit_test(test_proc_call_fails),
        cmocka_unit_test(test_proc_insufficient_forever),
        cmocka_unit_test(test_unknown_error_code),
        cmocka_unit_test(test_optional_not_supported),
        cmocka_unit_test(test_mem_na_and_bogus_pids),
        cmocka_unit_test(test_grow_small),
        cmocka_unit_test(test_grow_beyond_headroom),
        cmocka_unit_test(test_mig_devices),
        cmocka_unit_test(test_mig_error),
        cmocka_unit_test(test_hang_one_gpu),
        cmocka_unit_test(test_hang_late_answer_taken),
        cmocka_unit_test(test_count_capped),
        cmocka_unit_test(test_procs_sorted_saturating),
        cmocka_unit_test(test_missing_library),
        cmocka_unit_test(test_not_nvml),
        cmocka_unit_test(test_env_library),
        /* last: its stuck call returns after the test, and would log into the next one's log */
        cmocka_unit_test(test_hang_free_while_stuck),
    };
    return cmocka_run_group_tests(tests, vg_t_group_setup, vg_t_group_teardown);
}
