/*
 * A cgroup v2 of the job's own, so that every process it ever starts can be listed
 * (cgroup.procs) and killed at once (cgroup.kill) whatever it did to its parentage. Created
 * under the cgroup we run in, in the cgroup2 mount found through /proc/self/mountinfo (pure v2
 * at /sys/fs/cgroup, or the hybrid layout's /sys/fs/cgroup/unified). Creating it fails without
 * delegation (not root, a read-only mount in a container): the caller then falls back to
 * tracking the tree as a child subreaper.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "act/job.h"
#include "util/array.h"
#include "util/buf.h"
#include "util/file.h"
#include "util/parse.h"

#define VG_CG_PREFIX "vramguard-run-"
#define VG_CGROUP2_MAGIC 0x63677270ul /* CGROUP2_SUPER_MAGIC */

/* mountinfo escapes blanks and backslashes as \ooo. */
static char *vg_cg_unescape(const char *s, size_t n)
{
    char *out = malloc(n + 1);
    if (!out)
        return NULL;
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\\' && i + 3 < n && s[i + 1] >= '0' && s[i + 1] <= '3' && s[i + 2] >= '0' &&
            s[i + 2] <= '7' && s[i + 3] >= '0' && s[i + 3] <= '7') {
            out[j++] = (char)((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
            i += 3;
        } else {
            out[j++] = s[i];
        }
    }
    out[j] = '\0';
    return out;
}

int vg_job_cgroup_mount(const char *mountinfo, char **mountpoint, char **root)
{
    *mountpoint = *root = NULL;
    int best = -1; /* 2: /sys/fs/cgroup, 1: /sys/fs/cgroup/unified, 0: any other */
    for (const char *line = mountinfo; line && *line;) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        /* "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...] - FSTYPE SOURCE SUPER" */
        const char *f[5];
        size_t fl[5];
        size_t k = 0, i = 0;
        while (k < 5 && i < len) {
            while (i < len && line[i] == ' ')
                i++;
            size_t st = i;
            while (i < len && line[i] != ' ')
                i++;
            if (i > st) {
                f[k] = line + st;
                fl[k++] = i - st;
            }
        }
        const char *sep = NULL;
        for (size_t j = 0; j + 3 <= len; j++) {
            if (line[j] == ' ' && line[j + 1] == '-' && line[j + 2] == ' ') {
                sep = line + j + 3;
                break;
            }
        }
        if (k == 5 && sep && strncmp(sep, "cgroup2 ", 8) == 0) {
            char *mp = vg_cg_unescape(f[4], fl[4]);
            char *rt = vg_cg_unescape(f[3], fl[3]);
            if (!mp || !rt) {
                free(mp);
                free(rt);
                free(*mountpoint);
                free(*root);
                *mountpoint = *root = NULL;
                return -ENOMEM;
            }
            int rank = strcmp(mp, "/sys/fs/cgroup") == 0           ? 2
                       : strcmp(mp, "/sys/fs/cgroup/unified") == 0 ? 1
                                                                   : 0;
            if (rank > best) {
                free(*mountpoint);
                free(*root);
                *mountpoint = mp;
                *root = rt;
                best = rank;
            } else {
                free(mp);
                free(rt);
            }
        }
        line = nl ? nl + 1 : NULL;
    }
    return best < 0 ? -ENOENT : 0;
}

int vg_job_cgroup_self(const char *self_cgroup, char **path)
{
    *path = NULL;
    for (const char *line = self_cgroup; line && *line;) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        if (len >= 4 && strncmp(line, "0::/", 4) == 0) {
            *path = strndup(line + 3, len - 3);
            return *path ? 0 : -ENOMEM;
        }
        line = nl ? nl + 1 : NULL;
    }
    return -ENOENT;
}

int vg_job_cgroup_base(char **base, struct vg_err *err)
{
    struct vg_buf mi, sc, out;
    vg_buf_init(&mi, 16 << 20);
    vg_buf_init(&sc, 1 << 20);
    vg_buf_init(&out, 8192);
    char *mp = NULL, *root = NULL, *self = NULL;
    int rc = vg_file_read_at(AT_FDCWD, "/proc/self/mountinfo", &mi);
    if (rc) {
        vg_err_set(err, rc, "cannot read /proc/self/mountinfo: %s", strerror(-rc));
        goto out;
    }
    rc = vg_job_cgroup_mount(vg_buf_str(&mi), &mp, &root);
    if (rc) {
        vg_err_set(err, rc, rc == -ENOENT ? "no cgroup2 file system is mounted" : "out of memory");
        goto out;
    }
    rc = vg_file_read_at(AT_FDCWD, "/proc/self/cgroup", &sc);
    if (rc == 0)
        rc = vg_job_cgroup_self(vg_buf_str(&sc), &self);
    if (rc) {
        vg_err_set(err, rc, "cannot tell our cgroup v2 from /proc/self/cgroup");
        goto out;
    }
    /* The mount may show a subtree (root != "/"): our path must lie inside it. */
    const char *rel = self;
    if (strcmp(root, "/") != 0) {
        size_t rl = strlen(root);
        if (strncmp(self, root, rl) != 0 || (self[rl] != '/' && self[rl] != '\0')) {
            rc = vg_err_set(err, -ENOENT,
                            "our cgroup '%s' is outside the cgroup2 mount at "
                            "'%s'",
                            self, mp);
            goto out;
        }
        rel = self + rl;
    }
    if (strcmp(rel, "/") == 0)
        rel = "";
    vg_buf_printf(&out, "%s%s", mp, rel);
    if (out.err) {
        rc = vg_err_set(err, out.err, "cgroup path too long");
        goto out;
    }
    *base = vg_buf_steal(&out);
    rc = *base ? 0 : vg_err_set(err, -ENOMEM, "out of memory");
out:
    free(mp);
    free(root);
    free(self);
    vg_buf_release(&mi);
    vg_buf_release(&sc);
    vg_buf_release(&out);
    return rc;
}

/* Remove empty cgroups left by runs that were killed before they could clean up. Only those
 * whose run is gone: a live run may not have moved its job in yet. */
static void vg_cg_sweep(const char *base)
{
    DIR *d = opendir(base);
    if (!d)
        return;
    int dfd = dirfd(d);
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strncmp(de->d_name, VG_CG_PREFIX, strlen(VG_CG_PREFIX)) != 0)
            continue;
        uint64_t pid;
        if (vg_parse_u64(de->d_name + strlen(VG_CG_PREFIX), &pid) || pid == 0 || pid > INT32_MAX)
            continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        unlinkat(dfd, de->d_name, AT_REMOVEDIR); /* fails harmlessly while populated */
    }
    closedir(d);
}

int vg_job_cgroup_create(const char *base, char **path, int *fd, bool *has_kill, struct vg_err *err)
{
    *path = NULL;
    *fd = -1;
    *has_kill = false;
    struct statfs sf;
    if (statfs(base, &sf) != 0)
        return vg_err_set(err, -errno, "cannot use '%s' as parent cgroup: %s", base,
                          strerror(errno));
    if ((unsigned long)sf.f_type != VG_CGROUP2_MAGIC)
        return vg_err_set(err, -ENOTSUP, "'%s' is not a cgroup2 directory", base);
    vg_cg_sweep(base);
    struct vg_buf b;
    vg_buf_init(&b, 8192);
    vg_buf_printf(&b, "%s/" VG_CG_PREFIX "%ld", base, (long)getpid());
    if (b.err) {
        int rc = b.err;
        vg_buf_release(&b);
        return vg_err_set(err, rc, "cgroup path too long");
    }
    char *p = vg_buf_steal(&b);
    if (!p)
        return vg_err_set(err, -ENOMEM, "out of memory");
    int rc = mkdir(p, 0755);
    if (rc != 0 && errno == EEXIST && rmdir(p) == 0)
        rc = mkdir(p, 0755);
    if (rc != 0) {
        rc = vg_err_set(err, -errno, "cannot create cgroup '%s': %s", p, strerror(errno));
        free(p);
        return rc;
    }
    int dfd = open(p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0) {
        rc = vg_err_set(err, -errno, "cannot open cgroup '%s': %s", p, strerror(errno));
        rmdir(p);
        free(p);
        return rc;
    }
    *has_kill = faccessat(dfd, "cgroup.kill", W_OK, 0) == 0;
    *path = p;
    *fd = dfd;
    return 0;
}

static int vg_cg_write(int fd, const char *file, const char *text)
{
    int f = openat(fd, file, O_WRONLY | O_CLOEXEC);
    if (f < 0)
        return -errno;
    size_t n = strlen(text);
    ssize_t w = write(f, text, n);
    int rc = w == (ssize_t)n ? 0 : (w < 0 ? -errno : -EIO);
    close(f);
    return rc;
}

int vg_job_cgroup_add(int fd, pid_t pid, struct vg_err *err)
{
    char line[32];
    snprintf(line, sizeof(line), "%ld\n", (long)pid);
    int rc = vg_cg_write(fd, "cgroup.procs", line);
    if (rc)
        return vg_err_set(err, rc, "cannot move the job into its cgroup: %s", strerror(-rc));
    return 0;
}

int vg_job_cgroup_pids(int fd, pid_t **pids, size_t *n)
{
    *pids = NULL;
    *n = 0;
    struct vg_buf b;
    vg_buf_init(&b, 16 << 20);
    int rc = vg_file_read_at(fd, "cgroup.procs", &b);
    if (rc) {
        vg_buf_release(&b);
        return rc;
    }
    size_t cap = 0;
    const char *s = vg_buf_str(&b);
    for (const char *line = s; *line;) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        uint64_t v;
        if (len && vg_parse_u64n(line, len, &v) == 0 && v > 0 && v <= INT32_MAX) {
            if (VG_ARRAY_GROW(*pids, cap, *n + 1)) {
                free(*pids);
                *pids = NULL;
                *n = 0;
                vg_buf_release(&b);
                return -ENOMEM;
            }
            (*pids)[(*n)++] = (pid_t)v;
        }
        if (!nl)
            break;
        line = nl + 1;
    }
    vg_buf_release(&b);
    return 0;
}

int vg_job_cgroup_kill(int fd)
{
    return vg_cg_write(fd, "cgroup.kill", "1");
}

int vg_job_cgroup_remove(const char *path)
{
    /* A process that has been reaped may still be counted for a moment. 100 x 10 ms. */
    for (int i = 0; i < 100; i++) {
        if (rmdir(path) == 0 || errno == ENOENT)
            return 0;
        if (errno != EBUSY)
            return -errno;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return -EBUSY;
}
