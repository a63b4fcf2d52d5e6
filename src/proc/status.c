/*
 * /proc/PID/status: the real uid ("Uid:" line, first of four), the NSpid chain ("NSpid:",
 * Linux 4.1+), which tells whether the process (or vramguard itself) lives in a nested PID
 * namespace: NVML reports PIDs as the host sees them, so a chain longer than one means the
 * numbers differ; and the ignored signals ("SigIgn:", a hex mask), because a job started with
 * nohup ignores SIGHUP. Other lines are ignored. A status without NSpid leaves the chain empty
 * (unknown), one without SigIgn leaves the mask unknown; neither is an error; one without Uid
 * is malformed.
 */
#include "proc/internal.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "util/array.h"
#include "util/parse.h"

static bool vg_status_key(const char *line, size_t n, const char *key, const char **val)
{
    size_t k = strlen(key);
    if (n < k || memcmp(line, key, k) != 0)
        return false;
    *val = line + k;
    return true;
}

/* Next whitespace-separated decimal number in [*s, end); 1 found, 0 none, -EINVAL bad. */
static int vg_status_num(const char **s, const char *end, uint64_t *v)
{
    const char *q = *s;
    while (q < end && (*q == ' ' || *q == '\t'))
        q++;
    if (q >= end)
        return 0;
    const char *b = q;
    while (q < end && *q != ' ' && *q != '\t')
        q++;
    *s = q;
    return vg_parse_u64n(b, (size_t)(q - b), v) ? -EINVAL : 1;
}

/* The hexadecimal mask after a key, blanks around it allowed: 0 or -EINVAL. */
static int vg_status_hex(const char *s, const char *end, uint64_t *v)
{
    while (s < end && (*s == ' ' || *s == '\t'))
        s++;
    while (end > s && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    if (s == end || end - s > 16)
        return -EINVAL;
    uint64_t x = 0;
    for (; s < end; s++) {
        char c = *s;
        int d = vg_parse_hex_digit(c);
        if (d < 0)
            return -EINVAL;
        x = x << 4 | d;
    }
    *v = x;
    return 0;
}

int vg_proc_parse_status(const char *buf, size_t len, struct vg_proc *p)
{
    if (!buf)
        return -EINVAL;
    bool have_uid = false;
    uid_t uid = 0;
    const char *ns = NULL, *ns_end = NULL;
    bool have_ign = false, have_thr = false;
    uint64_t ign = 0, thr = 0;

    const char *at = buf, *s;
    size_t ln;
    while (vg_parse_line(&at, buf + len, &s, &ln)) {
        const char *le = s + ln;
        const char *val;
        if (!have_uid && vg_status_key(s, ln, "Uid:", &val)) {
            uint64_t v;
            if (vg_status_num(&val, le, &v) != 1 || v >= UINT_MAX)
                return -EINVAL;
            uid = (uid_t)v;
            have_uid = true;
        } else if (!ns && vg_status_key(s, ln, "NSpid:", &val)) {
            ns = val;
            ns_end = le;
        } else if (!have_ign && vg_status_key(s, ln, "SigIgn:", &val)) {
            if (vg_status_hex(val, le, &ign))
                return -EINVAL;
            have_ign = true;
        } else if (!have_thr && vg_status_key(s, ln, "Threads:", &val)) {
            /* optional: an odd value leaves it unknown rather than failing the file */
            have_thr = vg_status_num(&val, le, &thr) == 1 && thr <= UINT_MAX;
        }
    }
    if (!have_uid)
        return -EINVAL;

    pid_t *chain = NULL;
    size_t n = 0;
    if (ns) {
        size_t cap = 0;
        for (const char *q = ns;;) {
            uint64_t v;
            int rc = vg_status_num(&q, ns_end, &v);
            if (rc == 0)
                break;
            if (rc < 0 || v == 0 || v > INT_MAX) {
                free(chain);
                return -EINVAL;
            }
            if (VG_ARRAY_GROW(chain, cap, n + 1)) {
                free(chain);
                return -ENOMEM;
            }
            chain[n++] = (pid_t)v;
        }
        if (n == 0)
            return -EINVAL;
    }
    free(p->nspid);
    p->nspid = chain;
    p->nnspid = n;
    p->uid = uid;
    p->known |= VG_PROC_K_STATUS;
    p->threads_status = have_thr ? (unsigned)thr : 0;
    if (have_ign) {
        p->sig_ignored = ign;
        p->known |= VG_PROC_K_SIGIGN;
    }
    return 0;
}
