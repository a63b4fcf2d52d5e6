/*
 * /proc/PID/cgroup: which container and Kubernetes pod a process belongs to, so that findings
 * can name the pod to act on rather than a bare PID.
 *
 * Lines are "ID:controllers:path": cgroup v2 has the single line "0::/path", v1 one line per
 * hierarchy, hybrid hosts both. Recognised, in any path component (innermost first, so
 * docker-in-docker names the inner container):
 *   container id (64 hex)  docker-<id>.scope, cri-containerd-<id>.scope, crio-<id>.scope,
 *                          libpod-<id>.scope (systemd driver); /docker/<id> and
 *                          /kubepods/.../<id> (cgroupfs driver)
 *   pod UID                kubepods[-qos]-pod<uid with '_'>.slice (systemd driver, '_' back to
 *                          '-'); /kubepods/[qos/]pod<uid>/ (cgroupfs driver)
 * p->cgroup is the path that named a container or pod, else the v2 path, else the first v1 path.
 * conmon scopes (crio-conmon-<id>.scope, libpod-conmon-...) are deliberately not containers.
 */
#include "proc/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/parse.h"

#define VG_CID_LEN 64

struct vg_cg_found {
    const char *cid; /* 64 hex digits, not terminated */
    const char *pod; /* pod UID as written (may contain '_') */
    size_t pod_len;
};

static bool vg_is_hex(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')))
            return false;
    }
    return true;
}

/* A pod UID: a UUID (8-4-4-4-12, '-' or '_' as separators) or 32 hex (static pods). */
static bool vg_is_pod_uid(const char *s, size_t n)
{
    if (n == 32)
        return vg_is_hex(s, n);
    if (n != 36)
        return false;
    for (size_t i = 0; i < n; i++) {
        bool sep = i == 8 || i == 13 || i == 18 || i == 23;
        if (sep ? (s[i] != '-' && s[i] != '_') : !vg_is_hex(s + i, 1))
            return false;
    }
    return true;
}

/* A container id component: "<prefix><64 hex>.scope". */
static const char *vg_cg_scope_id(const char *s, size_t n)
{
    static const char *const prefixes[] = {"docker-", "cri-containerd-", "crio-", "libpod-"};
    if (!vg_parse_ends(s, n, ".scope"))
        return NULL;
    for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
        size_t k = strlen(prefixes[i]);
        if (n == k + VG_CID_LEN + 6 && vg_parse_starts(s, n, prefixes[i]) &&
            vg_is_hex(s + k, VG_CID_LEN))
            return s + k;
    }
    return NULL;
}

/* Look through one cgroup path for a container id and a pod UID. */
static void vg_cg_path(const char *path, size_t len, struct vg_cg_found *f)
{
    /* The first component named kubepods*, for "is under kubepods" below (cgroupfs driver). */
    const char *kube = NULL;
    for (const char *q = path; q + 8 <= path + len && !kube; q++)
        if ((q == path || q[-1] == '/') && memcmp(q, "kubepods", 8) == 0)
            kube = q;
    /* Components, innermost first: walk from the end. */
    const char *end = path + len;
    while (end > path) {
        const char *b = end;
        while (b > path && b[-1] != '/')
            b--;
        size_t n = (size_t)(end - b);
        /* The parent component's name. */
        const char *pe = b > path ? b - 1 : path;
        const char *pb = pe;
        while (pb > path && pb[-1] != '/')
            pb--;
        size_t pn = (size_t)(pe - pb);
        bool under_kubepods = kube && kube < b;

        if (!f->cid && n > 0) {
            const char *id = vg_cg_scope_id(b, n);
            if (!id && n == VG_CID_LEN && vg_is_hex(b, n) &&
                ((pn == 6 && memcmp(pb, "docker", 6) == 0) || under_kubepods))
                id = b;
            if (id)
                f->cid = id;
        }
        if (!f->pod && n > 0) {
            if (vg_parse_starts(b, n, "kubepods") && vg_parse_ends(b, n, ".slice")) {
                /* kubepods-burstable-pod<uid>.slice: the uid follows the last "-pod". */
                const char *q = NULL;
                for (const char *r = b; r + 4 <= b + n; r++)
                    if (memcmp(r, "-pod", 4) == 0)
                        q = r + 4;
                size_t un = q ? (size_t)(b + n - 6 - q) : 0;
                if (q && b + n - 6 >= q && vg_is_pod_uid(q, un)) {
                    f->pod = q;
                    f->pod_len = un;
                }
            } else if (under_kubepods && n > 3 && memcmp(b, "pod", 3) == 0 &&
                       vg_is_pod_uid(b + 3, n - 3)) {
                f->pod = b + 3;
                f->pod_len = n - 3;
            }
        }
        end = b > path ? b - 1 : path;
    }
}

int vg_proc_parse_cgroup(const char *buf, size_t len, struct vg_proc *p)
{
    if (!buf && len)
        return -EINVAL;
    struct vg_cg_found f = {0};
    const char *named = NULL, *v2 = NULL, *v1 = NULL; /* path starts */
    size_t named_len = 0, v2_len = 0, v1_len = 0;

    /* Two passes: v2 first so that on hybrid hosts its path wins a tie. */
    for (int pass = 0; pass < 2; pass++) {
        const char *s = buf, *line;
        size_t n;
        while (vg_parse_line(&s, buf + len, &line, &n)) {
            if (!n)
                continue;
            const char *le = line + n;
            const char *c1 = memchr(line, ':', (size_t)(le - line));
            const char *c2 = c1 ? memchr(c1 + 1, ':', (size_t)(le - c1 - 1)) : NULL;
            if (!c2)
                return -EINVAL;
            bool is_v2 = c1 - line == 1 && line[0] == '0' && c2 == c1 + 1;
            if (is_v2 != (pass == 0))
                continue;
            const char *path = c2 + 1;
            size_t plen = (size_t)(le - path);
            if (is_v2 && !v2) {
                v2 = path;
                v2_len = plen;
            } else if (!is_v2 && !v1) {
                v1 = path;
                v1_len = plen;
            }
            bool had = f.cid || f.pod;
            vg_cg_path(path, plen, &f);
            if (!had && (f.cid || f.pod) && !named) {
                named = path;
                named_len = plen;
            }
        }
    }

    const char *cg = named ? named : v2 ? v2 : v1;
    size_t cg_len = named ? named_len : v2 ? v2_len : v1_len;
    char *cgroup = NULL, *cid = NULL, *pod = NULL;
    if (cg && !(cgroup = vg_proc_strndup(cg, cg_len)))
        goto nomem;
    if (f.cid && !(cid = vg_proc_strndup(f.cid, VG_CID_LEN)))
        goto nomem;
    if (f.pod) {
        if (!(pod = vg_proc_strndup(f.pod, f.pod_len)))
            goto nomem;
        for (char *q = pod; *q; q++)
            if (*q == '_')
                *q = '-';
    }
    free(p->cgroup);
    free(p->container_id);
    free(p->pod_uid);
    p->cgroup = cgroup;
    p->container_id = cid;
    p->pod_uid = pod;
    p->known |= VG_PROC_K_CGROUP;
    return 0;
nomem:
    free(cgroup);
    free(cid);
    free(pod);
    return -ENOMEM;
}
