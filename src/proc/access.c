/*
 * Why vramguard may not see every process: what stands between it and other processes'
 * descriptors and environments, so that "N processes could not be read" names the cause it
 * actually saw instead of assuming "not root" (root in a container without CAP_SYS_PTRACE, a
 * procfs mounted with hidepid, a user namespace that maps few uids all hide processes from root
 * too). Read once per scan from the procfs root: self/status (effective uid and capabilities),
 * self/uid_map, and, when hidepid could apply, the mount options of the procfs itself from
 * self/mountinfo (matched by device number, so a host procfs mounted elsewhere is found too).
 */
#include "proc/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "util/file.h"
#include "util/parse.h"

#define VG_CAP_DAC_READ_SEARCH 2
#define VG_CAP_SYS_PTRACE 19
#define VG_MOUNTINFO_MAX ((size_t)64 << 20)

/* The value of "Key:" in a status-style text, as [*v, *end). */
static bool vg_acc_line(const char *buf, size_t len, const char *key, const char **v,
                        const char **end)
{
    size_t k = strlen(key);
    const char *at = buf, *s;
    size_t n;
    while (vg_parse_line(&at, buf + len, &s, &n)) {
        if (n >= k && memcmp(s, key, k) == 0) {
            *v = s + k;
            *end = s + n;
            return true;
        }
    }
    return false;
}

static bool vg_acc_hex(const char *s, const char *e, uint64_t *out)
{
    while (s < e && (*s == ' ' || *s == '\t'))
        s++;
    uint64_t x = 0;
    size_t n = 0;
    for (; s < e && *s != ' ' && *s != '\t'; s++, n++) {
        char c = *s;
        int d = vg_parse_hex_digit(c);
        if (d < 0 || n >= 16)
            return false;
        x = x << 4 | d;
    }
    *out = x;
    return n > 0;
}

/* Effective uid (second of "Uid:") and the effective capability set. */
static bool vg_acc_self(struct vg_proc_ctx *c, uint64_t *euid, uint64_t *capeff)
{
    if (vg_proc_ctx_read(c, c->root_fd, "self/status", VG_PROC_STATUS_MAX) != 0)
        return false;
    const char *buf = vg_buf_str(&c->file), *v, *e, *cv, *ce;
    size_t len = c->file.len;
    if (!vg_acc_line(buf, len, "Uid:", &v, &e) || !vg_acc_line(buf, len, "CapEff:", &cv, &ce))
        return false;
    /* real, effective, saved, fs: skip the first */
    const char *q = v, *b = NULL;
    for (int field = 0; field < 2; field++) {
        while (q < e && (*q == ' ' || *q == '\t'))
            q++;
        b = q;
        while (q < e && *q != ' ' && *q != '\t')
            q++;
    }
    return vg_parse_u64n(b, (size_t)(q - b), euid) == 0 && vg_acc_hex(cv, ce, capeff);
}

/* Whether self/uid_map maps every uid: one line "0 0 4294967295", as in the initial user
 * namespace. Unreadable counts as "all": the hint must not blame what it did not see. */
static bool vg_acc_maps_all(struct vg_proc_ctx *c)
{
    if (vg_proc_ctx_read(c, c->root_fd, "self/uid_map", VG_PROC_STATUS_MAX) != 0)
        return true;
    const char *s = vg_buf_str(&c->file);
    unsigned long long inside, outside, count;
    int used = 0;
    if (sscanf(s, " %llu %llu %llu%n", &inside, &outside, &count, &used) != 3)
        return true;
    for (const char *q = s + used; *q; q++)
        if (*q != ' ' && *q != '\n')
            return false; /* more than one range */
    return inside == 0 && outside == 0 && count == 4294967295ull;
}

/* Whether the procfs at the root fd is mounted with hidepid (other than 0/off), found in
 * self/mountinfo by the root's device number. */
static bool vg_acc_hidepid(struct vg_proc_ctx *c)
{
    struct stat st;
    if (fstat(c->root_fd, &st) != 0)
        return false;
    struct vg_buf mi;
    vg_buf_init(&mi, VG_MOUNTINFO_MAX);
    bool hide = false;
    if (vg_file_read_at(c->root_fd, "self/mountinfo", &mi) == 0) {
        char want[32];
        snprintf(want, sizeof(want), "%u:%u", major(st.st_dev), minor(st.st_dev));
        const char *buf = vg_buf_str(&mi);
        const char *at = buf, *s;
        size_t n;
        while (!hide && vg_parse_line(&at, buf + mi.len, &s, &n)) {
            const char *le = s + n;
            /* "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS ... - TYPE SOURCE SUPEROPTS" */
            const char *f = s;
            for (int skip = 0; skip < 2 && f < le; skip++) {
                const char *sp = memchr(f, ' ', (size_t)(le - f));
                f = sp ? sp + 1 : le;
            }
            size_t wl = strlen(want);
            if ((size_t)(le - f) > wl && memcmp(f, want, wl) == 0 && f[wl] == ' ') {
                const char *dash = NULL;
                for (const char *q = f; q + 3 <= le && !dash; q++)
                    if (q[0] == ' ' && q[1] == '-' && q[2] == ' ')
                        dash = q + 3;
                for (const char *q = dash; q && q < le; q++) {
                    if ((q == dash || q[-1] == ',' || q[-1] == ' ') && (size_t)(le - q) > 8 &&
                        memcmp(q, "hidepid=", 8) == 0)
                        hide = !(q[8] == '0' ||
                                 ((size_t)(le - q) >= 11 && memcmp(q + 8, "off", 3) == 0));
                }
            }
        }
    }
    vg_buf_release(&mi);
    return hide;
}

unsigned vg_proc_access_read(struct vg_proc_ctx *c)
{
    uint64_t euid = 0, cap = 0;
    unsigned acc = 0;
    if (!vg_acc_self(c, &euid, &cap))
        return VG_PROC_ACC_UNKNOWN;
    if (euid != 0)
        acc |= VG_PROC_ACC_NOT_ROOT;
    if (!(cap & (1ull << VG_CAP_SYS_PTRACE)))
        acc |= VG_PROC_ACC_NO_PTRACE;
    if (!(cap & (1ull << VG_CAP_DAC_READ_SEARCH)))
        acc |= VG_PROC_ACC_NO_DAC_READ;
    if (!vg_acc_maps_all(c))
        acc |= VG_PROC_ACC_USERNS;
    /* hidepid does not apply to a reader with CAP_SYS_PTRACE */
    if ((acc & VG_PROC_ACC_NO_PTRACE) && vg_acc_hidepid(c))
        acc |= VG_PROC_ACC_HIDEPID;
    return acc;
}
