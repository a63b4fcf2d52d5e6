/*
 * Unit tests for snapshot records (model/record.h): a hand-made snapshot that uses every part of
 * the format (MIG devices, errors, unknown fields, the environment, NSpid, minors held by
 * descriptor and mapping, NULL display paths, kin, unread processes, names holding any byte)
 * written, read and written again gives the same bytes and the same join; a snapshot of this
 * real host does too; malformed records fail with their line, never a crash.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <unistd.h>

#include "fixture.h"
#include "model/record.h"

#define GiB (1ull << 30)

/* Everything the format has, on a small host. */
static struct vg_snapshot *full_snapshot(void)
{
    struct vg_gpu_list l;
    struct vg_proc_table t;
    vg_gpu_list_init(&l);
    vg_proc_table_init(&t);
    l.loaded = true;
    l.library = fx_strdup("/usr/lib/libnvidia-ml.so.1");
    l.driver_version = fx_strdup("550.54.15");
    l.cuda_version = 12040;
    l.proc_api = "v3";
    l.mem_api = "v2";
    struct vg_gpu *g0 = fx_gpu(&l, "GPU-aaaa", "NVIDIA A100", 0, 80 * GiB, 10 * GiB, GiB / 2);
    fx_gproc(g0, 100, 4 * GiB, VG_PTYPE_COMPUTE);
    fx_gproc(g0, 300, UINT64_MAX, VG_PTYPE_COMPUTE | VG_PTYPE_GRAPHICS);
    fx_util(g0, 100, 37);
    g0->errors = fx_grow(NULL, 1, sizeof(*g0->errors));
    g0->errors[0] = (struct vg_gpu_error){fx_strdup("nvmlDeviceGetFanSpeed"), 3,
                                          fx_strdup("GPU 0: not supported \"here\"")};
    g0->nerrors = 1;
    struct vg_gpu *g1 = fx_gpu(&l, "GPU-bbbb", "NVIDIA H100 \xe2\x80\x94 MIG", 1, 80 * GiB, 0, 0);
    g1->known &= ~(unsigned)(VG_GPU_K_UTIL | VG_GPU_K_RESERVED); /* unknown stays unknown */
    g1->compute_mode = 7;                                        /* a number without a name */
    g1->known |= 1u << 30;                                       /* a bit without a name */
    struct vg_gpu *m = fx_mig(g1, "MIG-cccc", 10 * GiB);
    m->gpu_instance = 1;
    fx_gproc(m, 200, GiB, VG_PTYPE_COMPUTE);
    m = fx_mig(g1, "MIG-dddd", 10 * GiB);
    l.errors = fx_grow(NULL, 1, sizeof(*l.errors));
    l.errors[0] = (struct vg_gpu_error){fx_strdup("nvmlInit"), 0, fx_strdup("slow\tstart\n")};
    l.nerrors = 1;

    struct vg_proc *p = fx_proc(&t, 100, "py\tthon)\n\\\"", "python train.py --x 'a b'", 'S');
    fx_fd(p, 0);
    fx_fd(p, 1);
    p->dev_minors_by = fx_grow(NULL, 2, 1);
    p->dev_minors_by[0] = VG_PROC_BY_FD | VG_PROC_BY_MAP;
    p->dev_minors_by[1] = VG_PROC_BY_MAP;
    p->nspid = fx_grow(NULL, 2, sizeof(pid_t));
    p->nspid[0] = 100;
    p->nspid[1] = 7;
    p->nnspid = 2;
    p->env[VG_ENV_CUDA_VISIBLE_DEVICES] = fx_strdup("0,1");
    p->env[VG_ENV_LOCAL_RANK] = fx_strdup("");
    p->known |= VG_PROC_K_ENV | VG_PROC_K_MAPS;
    p->libs = VG_LIB_CUDA | VG_LIB_TORCH_CUDA;
    p->dev_paths = fx_grow(NULL, 2, sizeof(char *));
    p->dev_paths[0] = fx_strdup("/dev/nvidia0");
    p->dev_paths[1] = NULL;
    p->ndev_paths = 2;
    p->sig_ignored = UINT64_MAX;
    p->exe = fx_strdup("/usr/lib/xorg/Xorg (x)\n");
    p->exe_deleted = true;
    p->exe_uid = 0;
    p->exe_mode = 0100755;
    p->exe_path_same = false;
    p->exe_dirs_trusted = true;
    p->known |= VG_PROC_K_EXE | VG_PROC_K_EXE_STAT | VG_PROC_K_EXE_PATH;
    p->dev_path_count = 3; /* O_PATH descriptors: GPU 5's node held only so */
    p->path_minors = fx_grow(NULL, 1, sizeof(unsigned));
    p->path_minors[0] = 5;
    p->npath_minors = 1;
    t.n_tables_unchecked = 2;
    p->tty_nr = -5;
    fx_activity(p, 500, 3);
    p = fx_proc(&t, 300, "\x7f\x01", "", 'Z');
    p->known |= VG_PROC_K_FDS;
    t.kin = fx_grow(NULL, 1, sizeof(*t.kin));
    t.kin[0] = (struct vg_proc_kin){99, 1, 99, 99, 12345, 'S', fx_strdup("bash -l")};
    t.nkin = 1;
    t.unread = fx_grow(NULL, 1, sizeof(*t.unread));
    t.unread[0] = (struct vg_proc_unread){1, false, true, 0, fx_strdup("root"), NULL};
    t.nunread = 1;
    t.n_fd_unread = 1;
    t.pidns = VG_PROC_PIDNS_INITIAL;
    t.access = VG_PROC_ACC_HIDEPID | VG_PROC_ACC_NOT_ROOT;
    t.scan_note = fx_strdup("a note");
    struct vg_snapshot *s = fx_assemble(&l, &t);
    s->taken_at = (struct timespec){1764806400, 5};
    return s;
}

static char *write_str(const struct vg_snapshot *s, size_t *len)
{
    struct vg_buf b;
    vg_buf_init(&b, 0);
    struct vg_err err = VG_ERR_INIT;
    assert_int_equal(vg_snap_record_write(s, &b, &err), 0);
    *len = b.len;
    return vg_buf_steal(&b);
}

static struct vg_snapshot *parse_ok(const char *text, size_t len)
{
    struct vg_snapshot *s = NULL;
    struct vg_err err = VG_ERR_INIT;
    int rc = vg_snap_record_parse(text, len, "t.vgsnap", &s, &err);
    if (rc)
        print_error("%s\n", vg_err_msg(&err));
    assert_int_equal(rc, 0);
    vg_err_release(&err);
    return s;
}

/* write -> read -> write: the same bytes; the join recomputed the same holdings. */
static void assert_round_trip(const struct vg_snapshot *s)
{
    size_t n1, n2;
    char *t1 = write_str(s, &n1);
    struct vg_snapshot *r = parse_ok(t1, n1);
    char *t2 = write_str(r, &n2);
    assert_int_equal(n1, n2);
    assert_memory_equal(t1, t2, n1);
    assert_int_equal(r->nholdings, s->nholdings);
    for (size_t i = 0; i < s->nholdings; i++) {
        assert_int_equal(r->holdings[i].pid, s->holdings[i].pid);
        assert_int_equal(r->holdings[i].gpu, s->holdings[i].gpu);
        assert_int_equal(r->holdings[i].mig, s->holdings[i].mig);
        assert_int_equal(r->holdings[i].seen, s->holdings[i].seen);
        assert_int_equal(r->holdings[i].stale, s->holdings[i].stale);
    }
    free(t1);
    free(t2);
    vg_snap_free(r);
}

static void test_round_trip_by_hand(void **state)
{
    (void)state;
    struct vg_snapshot *s = full_snapshot();
    assert_round_trip(s);
    /* what came back is what went in, byte for byte where a process chose the bytes */
    size_t n;
    char *t = write_str(s, &n);
    struct vg_snapshot *r = parse_ok(t, n);
    const struct vg_proc *p = vg_proc_table_find(&r->procs, 100);
    assert_non_null(p);
    assert_string_equal(p->comm, "py\tthon)\n\\\"");
    assert_string_equal(p->env[VG_ENV_LOCAL_RANK], "");
    assert_null(p->env[VG_ENV_RANK]);
    assert_null(p->dev_paths[1]);
    assert_int_equal(p->dev_minors_by[1], VG_PROC_BY_MAP);
    assert_int_equal(p->nspid[1], 7);
    assert_int_equal(p->dev_path_count, 3);
    assert_int_equal(p->npath_minors, 1);
    assert_int_equal(p->path_minors[0], 5);
    assert_int_equal(r->procs.n_tables_unchecked, 2);
    assert_int_equal(p->sig_ignored, UINT64_MAX);
    assert_string_equal(p->exe, "/usr/lib/xorg/Xorg (x)\n");
    assert_true(p->exe_deleted && p->exe_dirs_trusted && !p->exe_path_same);
    assert_int_equal(p->exe_mode, 0100755);
    assert_int_equal(p->known & (VG_PROC_K_EXE | VG_PROC_K_EXE_STAT | VG_PROC_K_EXE_PATH),
                     VG_PROC_K_EXE | VG_PROC_K_EXE_STAT | VG_PROC_K_EXE_PATH);
    assert_int_equal(p->tty_nr, -5);
    assert_true(p->activity_known);
    assert_string_equal(vg_proc_table_find(&r->procs, 300)->comm, "\x7f\x01");
    assert_false(r->gpus.gpus[1].known & VG_GPU_K_UTIL);
    assert_true(r->gpus.gpus[1].known & (1u << 30));
    assert_int_equal(r->gpus.gpus[1].nmig, 2);
    assert_int_equal(r->gpus.gpus[1].mig[0].procs[0].pid, 200);
    assert_string_equal(r->gpus.proc_api, "v3");
    assert_int_equal(r->taken_at.tv_nsec, 5);
    assert_int_equal(r->procs.access, VG_PROC_ACC_HIDEPID | VG_PROC_ACC_NOT_ROOT);
    assert_null(r->replay); /* parsed, not read from a file */
    /* the file is plain ASCII, one field a line */
    for (size_t i = 0; i < n; i++)
        assert_true(t[i] == '\n' || (t[i] >= 0x20 && t[i] < 0x7f));
    free(t);
    vg_snap_free(r);
    vg_snap_free(s);
}

/* This host, read for real (the fake driver, without a scenario file, may or may not answer:
 * either way what was seen round-trips), through a file. */
static void test_round_trip_this_host(void **state)
{
    (void)state;
    struct vg_snap_opts o = {.nvml_path = VG_TEST_BUILD_DIR "/fake-nvml/full/libnvidia-ml.so.1",
                             .all_procs = true};
    struct vg_snapshot *s = NULL;
    struct vg_err err = VG_ERR_INIT;
    assert_int_equal(vg_snap_build(&o, &s, &err), 0);
    assert_true(s->procs.n > 0);
    assert_round_trip(s);
    char path[] = "/tmp/vg-test-record.XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(vg_snap_record_save(s, path, &err), 0);
    struct vg_snapshot *r = NULL;
    assert_int_equal(vg_snap_record_read(path, &r, &err), 0);
    assert_string_equal(r->replay, path);
    assert_int_equal(r->procs.n, s->procs.n);
    unlink(path);
    vg_snap_free(r);
    vg_snap_free(s);
}

struct bad {
    const char *text;
    const char *msg; /* what the error says */
};

static void test_malformed(void **state)
{
    (void)state;
#define HEAD "vramguard-snapshot 1\nproc_root \"/proc\"\ndev_dir \"/dev\"\n"
    static const struct bad bad[] = {
        {"", "t.vgsnap:1: not a vramguard snapshot record (it is empty)"},
        {"hello\n", "t.vgsnap:1: not a vramguard snapshot record"},
        {"vramguard-snapshot 2\nend\n", "t.vgsnap:1: a record of another version"},
        {HEAD "driver\nprocs\n", "t.vgsnap:6: the record ends before its 'end' line"},
        {HEAD "frobnicate 1\ndriver\nprocs\nend\n", "t.vgsnap:4: unknown key 'frobnicate'"},
        {HEAD "driver\ngpu\nminor x\nprocs\nend\n", "t.vgsnap:6: minor takes an unsigned"},
        {HEAD "driver\ngpu\nminor 99999999999\nprocs\nend\n", "t.vgsnap:6: minor takes"},
        {HEAD "driver\ngpu\nname NVIDIA\nprocs\nend\n", "t.vgsnap:6: a string value must be"},
        {HEAD "driver\ngpu\nname \"a\\q\"\nprocs\nend\n", "t.vgsnap:6: a bad escape"},
        {HEAD "driver\ngpu\nname \"a\\x4\"\nprocs\nend\n", "t.vgsnap:6: a bad escape"},
        {HEAD "driver\ngpu\nname \"a\"b\"\nprocs\nend\n", "unescaped"},
        {HEAD "driver\ngpu\nknown name,bogus\nprocs\nend\n", "t.vgsnap:6: unknown bit 'bogus'"},
        {HEAD "driver\ngpu\nknown name,\nprocs\nend\n", "ends in ','"},
        {HEAD "driver\ngpu\nminor 1\nminor 2\nprocs\nend\n", "t.vgsnap:7: minor given twice"},
        {HEAD "process\ndriver\nprocs\nend\n", "t.vgsnap:4: 'process' out of place"},
        {HEAD "driver\nprocs\ngpu\nend\n", "t.vgsnap:6: 'gpu' out of place"},
        {HEAD "driver\ndriver\nprocs\nend\n", "'driver' out of place"},
        {HEAD "driver\nend\n", "the record has no 'procs'"},
        {"vramguard-snapshot 1\ndriver\nprocs\nend\n", "the record has no proc_root"},
        {HEAD "driver\nprocs\nproc\npid 5\nproc\npid 4\nend\n", "t.vgsnap:10: processes must"},
        {HEAD "driver\ngpu\nprocess\npid 5\nprocess\npid 5\nprocs\nend\n", "ascending pid"},
        {HEAD "driver\nprocs\nproc\ndev 1 fd\ndev 0 fd\nend\n", "t.vgsnap:8: dev minors must"},
        {HEAD "driver\nprocs\nproc\ndev 254 fd\nend\n", "dev takes a GPU minor"},
        {HEAD "driver\nprocs\nproc\ndev 0 pipe\nend\n", "unknown bit 'pipe'"},
        {HEAD "driver\nprocs\nproc\nenv HOME \"/root\"\nend\n", "env takes a variable"},
        {HEAD "driver\nprocs\nproc\nnspid 1 x\nend\n", "nspid takes process ids"},
        {HEAD "driver\nprocs\nproc\nstate \"SS\"\nend\n", "state takes a string of one byte"},
        {HEAD "driver\nprocs\nproc\ncomm \"a\\x00b\"\nend\n", "comm holds a NUL byte"},
        {HEAD "driver\nprocs\nproc\nhas_ctl 2\nend\n", "has_ctl takes 0 or 1"},
        {HEAD "driver\nprocs\nproc\npid\nend\n", "unknown word 'pid'"},
        {HEAD "driver\nprocs\nproc\npid \nend\n", "'pid' without a value"},
        {HEAD "driver\nproc_api v4\nprocs\nend\n", "proc_api takes v3, v2 or v1"},
        {HEAD "driver\nprocs\npidns elsewhere\nend\n", "pidns takes initial or nested"},
        {HEAD "taken_at 12\ndriver\nprocs\nend\n", "taken_at takes SECONDS.NANOSECONDS"},
        {HEAD "driver\nprocs\nend\nmore\n", "t.vgsnap:7: text after 'end'"},
        {HEAD "driver\r\nprocs\nend\n", "carriage return"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct vg_snapshot *s = (struct vg_snapshot *)1;
        struct vg_err err = VG_ERR_INIT;
        int rc = vg_snap_record_parse(bad[i].text, strlen(bad[i].text), "t.vgsnap", &s, &err);
        if (rc != -EINVAL || !strstr(vg_err_msg(&err), bad[i].msg))
            print_error("case %zu: rc %d, '%s' (want '%s')\n", i, rc, vg_err_msg(&err), bad[i].msg);
        assert_int_equal(rc, -EINVAL);
        assert_null(s);
        assert_non_null(strstr(vg_err_msg(&err), bad[i].msg));
        assert_null(strchr(vg_err_msg(&err), '\n')); /* one line */
        vg_err_release(&err);
    }
    /* comments anywhere, and the smallest record */
    const char *ok = "# a note\n" HEAD "# more\ndriver\nprocs\nend\n";
    vg_snap_free(parse_ok(ok, strlen(ok)));
    /* every prefix of a good record fails cleanly (or is the whole of it) */
    struct vg_snapshot *full = full_snapshot();
    size_t n;
    char *t = write_str(full, &n);
    for (size_t k = 0; k < n; k++) {
        struct vg_snapshot *s = NULL;
        struct vg_err err = VG_ERR_INIT;
        int rc = vg_snap_record_parse(t, k, "t.vgsnap", &s, &err);
        assert_true(rc == -EINVAL || (rc == 0 && k >= n - 1));
        vg_snap_free(s);
        vg_err_release(&err);
    }
    free(t);
    vg_snap_free(full);
#undef HEAD
}

static void test_read_errors(void **state)
{
    (void)state;
    struct vg_snapshot *s = NULL;
    struct vg_err err = VG_ERR_INIT;
    assert_int_equal(vg_snap_record_read("/nonexistent/x.vgsnap", &s, &err), -ENOENT);
    assert_non_null(strstr(vg_err_msg(&err), "cannot read '/nonexistent/x.vgsnap'"));
    assert_true(vg_snap_record_read("/tmp", &s, &err) < 0); /* not a regular file */
    assert_null(s);
    vg_err_release(&err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_by_hand),
        cmocka_unit_test(test_round_trip_this_host),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_read_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
