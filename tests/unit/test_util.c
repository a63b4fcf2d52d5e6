/*
 * Unit tests for src/util: bounded buffers, error messages, strict parsing, whole-file reads,
 * array growth.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "util/array.h"
#include "util/buf.h"
#include "util/clock.h"
#include "util/err.h"
#include "util/file.h"
#include "util/parse.h"
#include "util/priv.h"
#include "util/utf8.h"

static void test_buf_bounded(void **state)
{
    (void)state;
    struct vg_buf b;
    vg_buf_init(&b, 8);
    assert_int_equal(vg_buf_adds(&b, "12345678"), 0);
    assert_string_equal(vg_buf_str(&b), "12345678");
    assert_int_equal(vg_buf_addc(&b, '9'), -E2BIG);
    assert_int_equal(b.err, -E2BIG);
    assert_int_equal(b.len, 8); /* nothing half-written */
    vg_buf_reset(&b);
    assert_int_equal(vg_buf_printf(&b, "%d-%s", 42, "ab"), 0);
    assert_string_equal(vg_buf_str(&b), "42-ab");
    assert_int_equal(vg_buf_printf(&b, "%s", "toolong"), -E2BIG);
    char *s = vg_buf_steal(&b);
    assert_string_equal(s, "42-ab");
    free(s);
    assert_string_equal(vg_buf_str(&b), "");
    vg_buf_release(&b);
}

static void test_buf_grows(void **state)
{
    (void)state;
    struct vg_buf b;
    vg_buf_init(&b, 0);
    for (int i = 0; i < 10000; i++)
        assert_int_equal(vg_buf_addc(&b, (char)('a' + i % 26)), 0);
    assert_int_equal(b.len, 10000);
    assert_int_equal(strlen(vg_buf_str(&b)), 10000);
    vg_buf_release(&b);
}

static void test_err(void **state)
{
    (void)state;
    struct vg_err e = VG_ERR_INIT;
    assert_string_equal(vg_err_msg(&e), "no error");
    assert_int_equal(vg_err_set(&e, -ENOENT, "cannot open '%s'", "/x"), -ENOENT);
    assert_string_equal(vg_err_msg(&e), "cannot open '/x'");
    assert_int_equal(vg_err_prefix(&e, "status"), -ENOENT);
    assert_string_equal(vg_err_msg(&e), "status: cannot open '/x'");
    assert_int_equal(vg_err_set(NULL, -EIO, "dropped"), -EIO);
    vg_err_release(&e);
    assert_null(e.msg);
}

static void test_parse_u64(void **state)
{
    (void)state;
    uint64_t v = 7;
    assert_int_equal(vg_parse_u64("0", &v), 0);
    assert_int_equal(v, 0);
    assert_int_equal(vg_parse_u64("18446744073709551615", &v), 0);
    assert_true(v == UINT64_MAX);
    assert_int_equal(vg_parse_u64("18446744073709551616", &v), -ERANGE);
    const char *bad[] = {"", " 1", "1 ", "-1", "+1", "1a", "0x10", NULL};
    for (int i = 0; bad[i]; i++)
        assert_int_equal(vg_parse_u64(bad[i], &v), -EINVAL);
    assert_int_equal(vg_parse_u64(NULL, &v), -EINVAL);
    int64_t s;
    assert_int_equal(vg_parse_i64("-5", -10, 10, &s), 0);
    assert_int_equal(s, -5);
    assert_int_equal(vg_parse_i64("-9223372036854775808", INT64_MIN, INT64_MAX, &s), 0);
    assert_true(s == INT64_MIN);
    assert_int_equal(vg_parse_i64("11", -10, 10, &s), -ERANGE);
}

static void test_parse_size(void **state)
{
    (void)state;
    uint64_t b = 0;
    bool frac = true;
    double f = 0;
    assert_int_equal(vg_parse_size("512MiB", false, &b, &frac, &f), 0);
    assert_true(b == 512ull << 20);
    assert_false(frac);
    assert_int_equal(vg_parse_size("20GiB", false, &b, NULL, NULL), 0);
    assert_true(b == 20ull << 30);
    assert_int_equal(vg_parse_size("1.5G", false, &b, NULL, NULL), 0);
    assert_true(b == 3ull << 29);
    assert_int_equal(vg_parse_size("10MB", false, &b, NULL, NULL), 0);
    assert_true(b == 10000000ull);
    assert_int_equal(vg_parse_size("123", false, &b, NULL, NULL), 0);
    assert_true(b == 123);
    assert_int_equal(vg_parse_size("0.5", true, &b, &frac, &f), 0);
    assert_true(frac);
    assert_true(f == 0.5);
    const char *bad[] = {"", "-1", "1e400", "GiB", "1 GiBs", "1.2.3", "nan", "inf", ".", NULL};
    for (int i = 0; bad[i]; i++)
        assert_int_equal(vg_parse_size(bad[i], true, &b, &frac, &f), -EINVAL);
    assert_int_equal(vg_parse_size("99999999999TiB", false, &b, NULL, NULL), -ERANGE);
}

static void test_parse_duration(void **state)
{
    (void)state;
    uint64_t ms;
    assert_int_equal(vg_parse_duration_ms("2s", &ms), 0);
    assert_true(ms == 2000);
    assert_int_equal(vg_parse_duration_ms("500ms", &ms), 0);
    assert_true(ms == 500);
    assert_int_equal(vg_parse_duration_ms("1.5", &ms), 0);
    assert_true(ms == 1500);
    assert_int_equal(vg_parse_duration_ms("10m", &ms), 0);
    assert_true(ms == 600000);
    assert_int_equal(vg_parse_duration_ms("1d", &ms), 0);
    assert_true(ms == 86400000);
    assert_int_equal(vg_parse_duration_ms("-1s", &ms), -EINVAL);
    assert_int_equal(vg_parse_duration_ms("5 s", &ms), -EINVAL);
    assert_int_equal(vg_parse_duration_ms("5y", &ms), -EINVAL);
}

static void test_parse_text(void **state)
{
    (void)state;
    static const char text[] = "a\n\nbc";
    const char *s = text, *end = text + strlen(text), *line;
    size_t n;
    assert_true(vg_parse_line(&s, end, &line, &n));
    assert_true(line == text && n == 1);
    assert_true(vg_parse_line(&s, end, &line, &n));
    assert_true(line == text + 2 && n == 0);
    assert_true(vg_parse_line(&s, end, &line, &n));
    assert_true(line == text + 3 && n == 2); /* the last line, with no '\n' */
    assert_false(vg_parse_line(&s, end, &line, &n));
    const char *none = NULL;
    assert_false(vg_parse_line(&none, NULL, &line, &n));

    assert_true(vg_parse_is("abcd", 3, "abc"));
    assert_false(vg_parse_is("abcd", 4, "abc"));
    assert_true(vg_parse_starts("kubepods-pod", 12, "kubepods"));
    assert_false(vg_parse_starts("kube", 4, "kubepods"));
    assert_true(vg_parse_ends("x.scope!", 7, ".scope"));
    assert_false(vg_parse_ends("scope", 5, ".scope"));
}

static void test_fmt_size(void **state)
{
    (void)state;
    char s[32];
    assert_int_equal(vg_fmt_size(0, s, sizeof(s)), 0);
    assert_string_equal(s, "0 B");
    assert_int_equal(vg_fmt_size(1536ull << 20, s, sizeof(s)), 0);
    assert_string_equal(s, "1.5 GiB");
    assert_int_equal(vg_fmt_size(80ull << 30, s, sizeof(s)), 0);
    assert_string_equal(s, "80 GiB");
    assert_int_equal(vg_fmt_size(UINT64_MAX, s, sizeof(s)), 0);
    assert_int_equal(vg_fmt_size(1ull << 30, s, 4), -ENOSPC);
}

static void test_file_read(void **state)
{
    (void)state;
    char dir[] = "/tmp/vg-test-util-XXXXXX";
    assert_non_null(mkdtemp(dir));
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(dfd >= 0);
    int fd = openat(dfd, "f", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    assert_true(fd >= 0);
    char big[10000];
    memset(big, 'x', sizeof(big));
    assert_int_equal(write(fd, big, sizeof(big)), (ssize_t)sizeof(big));
    close(fd);

    struct vg_buf b;
    vg_buf_init(&b, 20000);
    assert_int_equal(vg_file_read_at(dfd, "f", &b), 0);
    assert_int_equal(b.len, sizeof(big));
    vg_buf_release(&b);
    vg_buf_init(&b, 9999);
    assert_int_equal(vg_file_read_at(dfd, "f", &b), -E2BIG);
    vg_buf_release(&b);
    vg_buf_init(&b, 10000); /* exactly the size: fits */
    assert_int_equal(vg_file_read_at(dfd, "f", &b), 0);
    vg_buf_release(&b);
    assert_int_equal(vg_file_read_at(dfd, "missing", &b), -ENOENT);

    char small[16];
    size_t len;
    assert_int_equal(vg_file_read_small(dfd, "f", small, sizeof(small), &len), -E2BIG);
    assert_int_equal(len, 15);
    unlinkat(dfd, "f", 0);
    close(dfd);
    rmdir(dir);
}

/* Configuration reads: regular files only, and a FIFO is refused at once, not waited on. */
static void test_file_read_regular(void **state)
{
    (void)state;
    char dir[] = "/tmp/vg-test-util-XXXXXX";
    assert_non_null(mkdtemp(dir));
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(dfd >= 0);
    int fd = openat(dfd, "f", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "a = 1\n", 6), 6);
    close(fd);
    assert_int_equal(mkfifoat(dfd, "fifo", 0600), 0);
    assert_int_equal(mkdirat(dfd, "sub", 0700), 0);

    struct vg_buf b;
    vg_buf_init(&b, 1024);
    assert_int_equal(vg_file_read_regular(dfd, "f", &b), 0);
    assert_string_equal(vg_buf_str(&b), "a = 1\n");
    assert_int_equal(vg_file_read_regular(dfd, "fifo", &b), -EINVAL); /* no writer: no hang */
    assert_int_equal(vg_file_read_regular(dfd, "sub", &b), -EINVAL);
    assert_int_equal(vg_file_read_regular(AT_FDCWD, "/dev/null", &b), -EINVAL);
    assert_int_equal(vg_file_read_regular(dfd, "missing", &b), -ENOENT);
    vg_buf_release(&b);
    unlinkat(dfd, "f", 0);
    unlinkat(dfd, "fifo", 0);
    unlinkat(dfd, "sub", AT_REMOVEDIR);
    close(dfd);
    rmdir(dir);
}

/* A path is trusted when nobody but root or the given owner can change it or a directory above
 * it; the canonical path is what was checked. */
static void test_priv_path_trusted(void **state)
{
    (void)state;
    char dir[] = "/tmp/vg-test-priv-XXXXXX", f[64], l[64], canon[4096];
    assert_non_null(mkdtemp(dir));
    snprintf(f, sizeof(f), "%s/f", dir);
    snprintf(l, sizeof(l), "%s/l", dir);
    int fd = open(f, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(symlink("f", l), 0);
    struct vg_err err = VG_ERR_INIT;
    uid_t me = getuid();
    assert_int_equal(vg_priv_path_trusted(l, me, canon, sizeof(canon), &err), 0);
    assert_string_equal(canon, f);
    assert_int_equal(chmod(f, 0666), 0);
    assert_int_equal(vg_priv_path_trusted(l, me, canon, sizeof(canon), &err), -EPERM);
    assert_non_null(strstr(vg_err_msg(&err), "is writable by others"));
    assert_int_equal(chmod(f, 0664), 0);
    assert_int_equal(vg_priv_path_trusted(f, me, canon, sizeof(canon), &err), -EPERM);
    assert_non_null(strstr(vg_err_msg(&err), "writable by its group"));
    assert_int_equal(chmod(f, 0644), 0);
    /* a directory writable by others, sticky or not, is its owner's (not root's) here */
    assert_int_equal(chmod(dir, 01777), 0);
    if (me != 0)
        assert_int_equal(vg_priv_path_trusted(f, me, canon, sizeof(canon), &err), -EPERM);
    assert_int_equal(chmod(dir, 0777), 0);
    assert_int_equal(vg_priv_path_trusted(f, me, canon, sizeof(canon), &err), -EPERM);
    assert_non_null(strstr(vg_err_msg(&err), dir));
    assert_int_equal(chmod(dir, 0700), 0);
    if (me != 0) {
        assert_int_equal(vg_priv_path_trusted(f, 0, canon, sizeof(canon), &err), -EPERM);
        assert_non_null(strstr(vg_err_msg(&err), "not to root"));
    }
    assert_int_equal(vg_priv_path_trusted("/nonexistent/x", me, canon, sizeof(canon), &err),
                     -ENOENT);
    /* "/" itself, root's and 0755 */
    assert_int_equal(vg_priv_path_trusted("/", 0, canon, sizeof(canon), &err), 0);
    assert_string_equal(canon, "/");
    vg_err_release(&err);
    unlink(l);
    unlink(f);
    rmdir(dir);
}

/* $XDG_RUNTIME_DIR counts only when it is the user's own and 0700. */
static void test_priv_user_rundir(void **state)
{
    (void)state;
    char dir[] = "/tmp/vg-test-rundir-XXXXXX", out[4096], link[64];
    assert_non_null(mkdtemp(dir));
    const char *why = NULL;
    uid_t me = geteuid();
    assert_int_equal(vg_priv_user_rundir(dir, me, out, sizeof(out), &why), 1);
    assert_string_equal(out, dir);
    assert_string_equal(why, "XDG_RUNTIME_DIR");
    snprintf(link, sizeof(link), "%s.l", dir);
    assert_int_equal(symlink(dir, link), 0);
    int rc = vg_priv_user_rundir(link, me, out, sizeof(out), &why); /* a symlink: not it */
    assert_true(rc == 0 || (rc == 1 && strcmp(out, link) != 0));
    assert_int_equal(chmod(dir, 0755), 0);
    rc = vg_priv_user_rundir(dir, me, out, sizeof(out), &why);
    assert_true(rc == 0 || (rc == 1 && strcmp(out, dir) != 0));
    assert_int_equal(chmod(dir, 0700), 0);
    rc = vg_priv_user_rundir(dir, me + 1, out, sizeof(out), &why); /* someone else's */
    assert_true(rc == 0 || (rc == 1 && strcmp(out, dir) != 0));
    rc = vg_priv_user_rundir("relative", me, out, sizeof(out), &why);
    assert_true(rc == 0 || (rc == 1 && strcmp(out, "relative") != 0));
    unlink(link);
    rmdir(dir);
}

/* The one validator text, JSON and metrics output share. */
static void test_utf8(void **state)
{
    (void)state;
    static const struct {
        const char *s;
        size_t n, want;
    } cases[] = {
        {"a", 1, 1},
        {"\xc3\xa9", 2, 2},             /* e acute */
        {"\xe2\x82\xac", 3, 3},         /* euro sign */
        {"\xf0\x9f\x98\x80", 4, 4},     /* U+1F600 */
        {"\xc3\xa9", 1, 0},             /* truncated by n */
        {"\xc3(", 2, 0},                /* bad continuation */
        {"\x80", 1, 0},                 /* stray continuation */
        {"\xc0\xaf", 2, 0},             /* overlong '/' */
        {"\xe0\x80\xaf", 3, 0},         /* overlong, 3 bytes */
        {"\xed\xa0\x80", 3, 0},         /* surrogate U+D800 */
        {"\xf4\x90\x80\x80", 4, 0},     /* above U+10FFFF */
        {"\xf8\x88\x80\x80\x80", 5, 0}, /* 5-byte form */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        if (vg_utf8_len((const unsigned char *)cases[i].s, cases[i].n) != cases[i].want)
            fail_msg("case %zu: want %zu", i, cases[i].want);
}

static void test_clock_ts(void **state)
{
    (void)state;
    struct timespec t = {.tv_sec = 10, .tv_nsec = 900000000L}, u = t;
    vg_clock_ts_add_ms(&u, 250); /* carries into the seconds */
    assert_int_equal(u.tv_sec, 11);
    assert_int_equal(u.tv_nsec, 150000000L);
    vg_clock_ts_add_ms(&u, 3600000);
    assert_int_equal(u.tv_sec, 3611);
    assert_true(vg_clock_ts_diff(&t, &u) > 3600.249 && vg_clock_ts_diff(&t, &u) < 3600.251);
    assert_true(vg_clock_ts_diff(&u, &t) < 0);
}

static void test_clock_iso8601(void **state)
{
    (void)state;
    char ts[VG_CLOCK_ISO_SIZE];
    vg_clock_iso8601(0, ts, sizeof(ts));
    assert_string_equal(ts, "1970-01-01T00:00:00Z");
    vg_clock_iso8601(1764606561, ts, sizeof(ts));
    assert_string_equal(ts, "2025-12-01T16:29:21Z");
    assert_int_equal(strlen(ts) + 1, VG_CLOCK_ISO_SIZE);
    char small[8];
    vg_clock_iso8601(0, small, sizeof(small)); /* too small: marked, not cut */
    assert_string_equal(small, "?");
}

static void test_array_grow(void **state)
{
    (void)state;
    int *v = NULL;
    size_t n = 0, cap = 0;
    assert_int_equal(VG_ARRAY_GROW(v, cap, 0), 0); /* nothing asked, nothing allocated */
    assert_null(v);
    assert_int_equal(cap, 0);
    for (int i = 0; i < 1000; i++) {
        size_t before = cap;
        assert_int_equal(VG_ARRAY_GROW(v, cap, n + 1), 0);
        assert_true(cap >= n + 1);
        assert_true(cap == before || cap >= 2 * before); /* doubling: few reallocs */
        v[n++] = i;
    }
    assert_int_equal(cap, 1024);
    for (int i = 0; i < 1000; i++)
        assert_int_equal(v[i], i);
    /* a size in bytes that would not fit a size_t fails, leaving the array as it was */
    int *old = v;
    assert_int_equal(VG_ARRAY_GROW(v, cap, SIZE_MAX / sizeof(*v) + 1), -ENOMEM);
    assert_int_equal(VG_ARRAY_GROW(v, cap, SIZE_MAX), -ENOMEM);
    assert_ptr_equal(v, old);
    assert_int_equal(cap, 1024);
    assert_int_equal(v[999], 999);
    free(v);
}

static void test_array_push(void **state)
{
    (void)state;
    struct pt {
        int x, y;
    } *v = NULL;
    size_t n = 0, cap = 0;
    for (int i = 0; i < 20; i++) {
        struct pt *p = VG_ARRAY_PUSH(v, n, cap);
        assert_non_null(p);
        assert_int_equal(p->x, 0); /* zeroed */
        assert_int_equal(p->y, 0);
        p->x = i;
        p->y = -i;
    }
    assert_int_equal(n, 20);
    assert_int_equal(cap, 32);
    assert_int_equal(v[19].x, 19);
    assert_int_equal(v[7].y, -7);
    /* a full count cannot grow: NULL, nothing counted */
    size_t full = SIZE_MAX;
    assert_null(VG_ARRAY_PUSH(v, full, cap));
    assert_int_equal(full, SIZE_MAX);
    free(v);
}

/* The entries vg_parse_list_next gives for s, joined with '|' (each in brackets). */
static void list_entries(const char *s, const char *trim, char *out, size_t n)
{
    const char *pos = s, *tok;
    size_t len, k = 0, count = 0;
    out[0] = '\0';
    while (vg_parse_list_next(&pos, trim, &tok, &len)) {
        int w = snprintf(out + k, n - k, "%s[%.*s]", count ? "|" : "", (int)len, tok);
        assert_true(w > 0 && (size_t)w < n - k);
        k += (size_t)w;
        count++;
    }
    assert_int_equal(count, vg_parse_list_count(s));
    assert_null(pos);
    assert_false(vg_parse_list_next(&pos, trim, &tok, &len)); /* stays finished */
}

static void test_parse_list(void **state)
{
    (void)state;
    char got[256];
    list_entries("0,1,2", NULL, got, sizeof(got));
    assert_string_equal(got, "[0]|[1]|[2]");
    list_entries("", NULL, got, sizeof(got)); /* one empty entry, as CUDA reads it */
    assert_string_equal(got, "[]");
    list_entries(",", NULL, got, sizeof(got));
    assert_string_equal(got, "[]|[]");
    list_entries("a,,b,", NULL, got, sizeof(got));
    assert_string_equal(got, "[a]|[]|[b]|[]");
    list_entries(" GPU-1 ,\t2\n", " \t\n\r", got, sizeof(got));
    assert_string_equal(got, "[GPU-1]|[2]");
    list_entries(" GPU-1 ,\t2\n", " \t", got, sizeof(got)); /* only what trim names */
    assert_string_equal(got, "[GPU-1]|[2\n]");
    list_entries(" , ", " ", got, sizeof(got)); /* blanks only: empty entries */
    assert_string_equal(got, "[]|[]");
    list_entries(" x ", NULL, got, sizeof(got)); /* no trim: kept as written */
    assert_string_equal(got, "[ x ]");
    assert_int_equal(vg_parse_list_count("alice,bob,uid:7"), 3);
}

static int cmp_int(const void *key, const void *elem)
{
    int k = *(const int *)key, e = *(const int *)elem;
    return k < e ? -1 : k > e;
}

static void test_array_lower_bound(void **state)
{
    (void)state;
    const int v[] = {1, 3, 3, 3, 8, 13};
    const size_t n = sizeof(v) / sizeof(v[0]);
    int key = 3;
    assert_int_equal(vg_array_lower_bound(&key, v, n, sizeof(*v), cmp_int),
                     1); /* first of equals */
    key = 4;             /* not found: where it would go */
    assert_int_equal(vg_array_lower_bound(&key, v, n, sizeof(*v), cmp_int), 4);
    key = 0; /* before all */
    assert_int_equal(vg_array_lower_bound(&key, v, n, sizeof(*v), cmp_int), 0);
    key = 13; /* the last */
    assert_int_equal(vg_array_lower_bound(&key, v, n, sizeof(*v), cmp_int), 5);
    key = 99; /* after all: n */
    assert_int_equal(vg_array_lower_bound(&key, v, n, sizeof(*v), cmp_int), n);
    /* empty and one-element arrays */
    assert_int_equal(vg_array_lower_bound(&key, NULL, 0, sizeof(*v), cmp_int), 0);
    key = 1;
    assert_int_equal(vg_array_lower_bound(&key, v, 1, sizeof(*v), cmp_int), 0);
    key = 2;
    assert_int_equal(vg_array_lower_bound(&key, v, 1, sizeof(*v), cmp_int), 1);
    /* every position of a longer array, against a linear search */
    int big[257];
    for (int i = 0; i < 257; i++)
        big[i] = 2 * i;
    for (int k = -1; k < 516; k++) {
        size_t want = 0;
        while (want < 257 && big[want] < k)
            want++;
        assert_int_equal(vg_array_lower_bound(&k, big, 257, sizeof(*big), cmp_int), want);
    }
    /* PIDs, with the one comparator */
    const pid_t pids[] = {2, 40, 41, 900};
    pid_t p = 41;
    assert_int_equal(vg_array_lower_bound(&p, pids, 4, sizeof(*pids), vg_array_cmp_pid), 2);
}

static void test_array_cmp_pid(void **state)
{
    (void)state;
    pid_t v[] = {42, 7, 0x7fffffff, 1, 7, -1};
    qsort(v, sizeof(v) / sizeof(v[0]), sizeof(v[0]), vg_array_cmp_pid);
    pid_t want[] = {-1, 1, 7, 7, 42, 0x7fffffff};
    assert_memory_equal(v, want, sizeof(v));
    pid_t a = 0x7fffffff, b = -0x7fffffff; /* no subtraction to overflow */
    assert_true(vg_array_cmp_pid(&a, &b) > 0);
    assert_true(vg_array_cmp_pid(&b, &a) < 0);
    assert_int_equal(vg_array_cmp_pid(&a, &a), 0);
    /* a struct that begins with its pid sorts by it */
    struct rec {
        pid_t pid;
        int tag;
    } r[] = {{9, 0}, {3, 1}, {5, 2}};
    qsort(r, 3, sizeof(r[0]), vg_array_cmp_pid);
    assert_int_equal(r[0].pid, 3);
    assert_int_equal(r[2].tag, 0);
    pid_t key = 5;
    struct rec *hit = bsearch(&key, r, 3, sizeof(r[0]), vg_array_cmp_pid);
    assert_non_null(hit);
    assert_int_equal(hit->tag, 2);
}

/* One hex digit, written once for every parser of hex fields (status masks, maps, sockets,
 * records, PCI addresses). */
static void test_hex_digit(void **state)
{
    (void)state;
    assert_int_equal(vg_parse_hex_digit('0'), 0);
    assert_int_equal(vg_parse_hex_digit('9'), 9);
    assert_int_equal(vg_parse_hex_digit('a'), 10);
    assert_int_equal(vg_parse_hex_digit('F'), 15);
    static const char bad[] = {'g', 'G', '/', ':', '@', '`', ' ', '\0', 'x', (char)0xff};
    for (size_t i = 0; i < sizeof(bad); i++)
        assert_int_equal(vg_parse_hex_digit(bad[i]), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hex_digit),
        cmocka_unit_test(test_buf_bounded),
        cmocka_unit_test(test_buf_grows),
        cmocka_unit_test(test_parse_list),
        cmocka_unit_test(test_array_grow),
        cmocka_unit_test(test_array_push),
        cmocka_unit_test(test_array_lower_bound),
        cmocka_unit_test(test_array_cmp_pid),
        cmocka_unit_test(test_utf8),
        cmocka_unit_test(test_err),
        cmocka_unit_test(test_parse_u64),
        cmocka_unit_test(test_parse_size),
        cmocka_unit_test(test_parse_duration),
        cmocka_unit_test(test_parse_text),
        cmocka_unit_test(test_fmt_size),
        cmocka_unit_test(test_file_read),
        cmocka_unit_test(test_file_read_regular),
        cmocka_unit_test(test_priv_path_trusted),
        cmocka_unit_test(test_priv_user_rundir),
        cmocka_unit_test(test_clock_iso8601),
        cmocka_unit_test(test_clock_ts),
    };
    return cmocka_run_group_tests_name("util", tests, NULL, NULL);
}
