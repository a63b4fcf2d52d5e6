/*
 * GPU choice for `pick` and `run --gpus auto:N` (policy in pick.h), and the parsers of the
 * values both commands take. Kept free of I/O so one policy serves both commands and the unit
 * tests can hold it to its word.
 */
#include "model/pick.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/visible.h"
#include "util/parse.h"

const char *vg_pick_reason_str(enum vg_pick_reason r)
{
    switch (r) {
    case VG_PICK_OK:
        return "free enough";
    case VG_PICK_LOST:
        return "lost by the driver, or its calls hang";
    case VG_PICK_NO_UUID:
        return "UUID unknown";
    case VG_PICK_BAD_UUID:
        return "its UUID is not well-formed";
    case VG_PICK_MIG:
        return "in MIG mode (name a MIG device with --gpus MIG-...)";
    case VG_PICK_EXCLUDED:
        return "excluded";
    case VG_PICK_RESERVED:
        return "reserved by another vramguard run";
    case VG_PICK_MEM_UNKNOWN:
        return "free memory unknown";
    case VG_PICK_LOW_MEM:
        return "not enough free memory";
    case VG_PICK_UTIL_UNKNOWN:
        return "utilisation unknown";
    case VG_PICK_BUSY:
        return "too busy";
    }
    return "?";
}

uint64_t vg_pick_floor(const struct vg_pick_criteria *c, const struct vg_gpu *g, bool *known)
{
    *known = true;
    if (!c->min_free_set)
        return 0;
    if (!c->min_free_is_fraction)
        return c->min_free_bytes;
    if (!(g->known & VG_GPU_K_MEM)) {
        *known = false;
        return 0;
    }
    double need = ceil((double)g->mem_total * c->min_free_fraction);
    if (need >= (double)g->mem_total)
        return g->mem_total;
    return (uint64_t)need;
}

enum vg_pick_reason vg_pick_judge(const struct vg_gpu_list *list, size_t i,
                                  const struct vg_pick_criteria *c, uint64_t *need_bytes)
{
    const struct vg_gpu *g = &list->gpus[i];
    *need_bytes = 0;
    if (g->lost || g->hung)
        return VG_PICK_LOST;
    if (!(g->known & VG_GPU_K_UUID) || !g->uuid)
        return VG_PICK_NO_UUID;
    if (!vg_visible_uuid_ok(g->uuid))
        return VG_PICK_BAD_UUID;
    if (((g->known & VG_GPU_K_MIG_MODE) && g->mig_current) || g->nmig > 0)
        return VG_PICK_MIG;
    if (c->excluded && c->excluded[i])
        return VG_PICK_EXCLUDED;
    if (c->reserved && c->reserved[i])
        return VG_PICK_RESERVED;
    if (c->min_free_set) {
        bool known;
        uint64_t need = vg_pick_floor(c, g, &known);
        if (!known || !(g->known & VG_GPU_K_MEM))
            return VG_PICK_MEM_UNKNOWN;
        *need_bytes = need;
        if (g->mem_free < need)
            return VG_PICK_LOW_MEM;
    }
    if (c->max_util < 100) {
        if (!(g->known & VG_GPU_K_UTIL)) {
            if (c->max_util_explicit)
                return VG_PICK_UTIL_UNKNOWN;
        } else if (g->util_gpu > c->max_util) {
            return VG_PICK_BUSY;
        }
    }
    return VG_PICK_OK;
}

/* Pick order: more free memory first (unknown last), then lower utilisation (unknown last),
 * then lower index. */
static bool vg_pick_before(const struct vg_gpu_list *list, size_t a, size_t b)
{
    const struct vg_gpu *ga = &list->gpus[a], *gb = &list->gpus[b];
    bool ma = ga->known & VG_GPU_K_MEM, mb = gb->known & VG_GPU_K_MEM;
    if (ma != mb)
        return ma;
    if (ma && ga->mem_free != gb->mem_free)
        return ga->mem_free > gb->mem_free;
    bool ua = ga->known & VG_GPU_K_UTIL, ub = gb->known & VG_GPU_K_UTIL;
    if (ua != ub)
        return ua;
    if (ua && ga->util_gpu != gb->util_gpu)
        return ga->util_gpu < gb->util_gpu;
    return ga->index < gb->index || (ga->index == gb->index && a < b);
}

size_t vg_pick_rank(const struct vg_gpu_list *list, const struct vg_pick_criteria *c,
                    struct vg_pick_cand *out)
{
    size_t n = list->ngpus, ok = 0;
    /* Eligible ones first, each inserted at its place (a host has a handful of GPUs). */
    for (size_t i = 0; i < n; i++) {
        uint64_t need;
        if (vg_pick_judge(list, i, c, &need) != VG_PICK_OK)
            continue;
        size_t j = ok++;
        while (j > 0 && vg_pick_before(list, i, out[j - 1].gpu)) {
            out[j] = out[j - 1];
            j--;
        }
        out[j] = (struct vg_pick_cand){.gpu = i, .reason = VG_PICK_OK, .need_bytes = need};
    }
    size_t k = ok;
    for (size_t i = 0; i < n; i++) {
        uint64_t need;
        enum vg_pick_reason r = vg_pick_judge(list, i, c, &need);
        if (r != VG_PICK_OK)
            out[k++] = (struct vg_pick_cand){.gpu = i, .reason = r, .need_bytes = need};
    }
    return ok;
}

void vg_pick_describe(const struct vg_gpu_list *list, const struct vg_pick_cand *c,
                      const struct vg_pick_criteria *crit, struct vg_buf *out)
{
    const struct vg_gpu *g = &list->gpus[c->gpu];
    char a[32], b[32];
    switch (c->reason) {
    case VG_PICK_OK:
    case VG_PICK_LOW_MEM:
        if (vg_fmt_size(g->mem_free, a, sizeof(a)) || vg_fmt_size(g->mem_total, b, sizeof(b)))
            break;
        vg_buf_printf(out, "%s free of %s", a, b);
        if (c->reason == VG_PICK_LOW_MEM && vg_fmt_size(c->need_bytes, a, sizeof(a)) == 0)
            vg_buf_printf(out, ", needs %s", a);
        if (c->reason == VG_PICK_OK && (g->known & VG_GPU_K_UTIL))
            vg_buf_printf(out, ", utilisation %u%%", g->util_gpu);
        return;
    case VG_PICK_BUSY:
        vg_buf_printf(out, "utilisation %u%% above %u%%", g->util_gpu, crit->max_util);
        return;
    default:
        break;
    }
    vg_buf_adds(out, vg_pick_reason_str(c->reason));
}

int vg_pick_parse_count(const char *opt, const char *s, unsigned *out, struct vg_err *err)
{
    uint64_t v;
    if (vg_parse_u64(s, &v) || v < 1 || v > VG_PICK_MAX_GPUS)
        return vg_err_set(err, -EINVAL, "%s takes a number of GPUs from 1 to %u, not '%s'", opt,
                          VG_PICK_MAX_GPUS, s);
    *out = (unsigned)v;
    return 0;
}

int vg_pick_parse_util(const char *s, unsigned *out, struct vg_err *err)
{
    size_t n = strlen(s);
    uint64_t v;
    if (n > 1 && s[n - 1] == '%')
        n--;
    if (n == 0 || vg_parse_u64n(s, n, &v) || v > 100)
        return vg_err_set(err, -EINVAL,
                          "--max-util takes a utilisation percentage from 0 to 100, not '%s'", s);
    *out = (unsigned)v;
    return 0;
}

int vg_pick_parse_min_free(const char *s, struct vg_pick_criteria *c, struct vg_err *err)
{
    uint64_t bytes = 0;
    bool frac = false;
    double f = 0;
    int rc = vg_parse_size(s, true, &bytes, &frac, &f);
    /* "1.5" would parse as 1 byte: a number with a point and no unit is a fraction or
     * nothing. */
    if (rc == 0 && !frac && strchr(s, '.') && strspn(s, "0123456789.") == strlen(s))
        rc = -EINVAL;
    if (rc)
        return vg_err_set(err, rc,
                          "--min-free takes a size (20GiB, 512MiB) or a fraction of the total "
                          "from 0 to 1 (0.5), not '%s'",
                          s);
    c->min_free_set = true;
    c->min_free_is_fraction = frac;
    c->min_free_bytes = frac ? 0 : bytes;
    c->min_free_fraction = frac ? f : 0;
    return 0;
}

int vg_pick_parse_spec(const char *s, struct vg_pick_spec *out, struct vg_err *err)
{
    memset(out, 0, sizeof(*out));
    if (strcmp(s, "auto") == 0) {
        out->is_auto = true;
        out->count = 1;
        return 0;
    }
    if (strncmp(s, "auto:", 5) == 0) {
        out->is_auto = true;
        return vg_pick_parse_count("--gpus auto:N", s + 5, &out->count, err);
    }
    if (!*s)
        return vg_err_set(err, -EINVAL,
                          "--gpus takes GPU indices or UUIDs (0,1 or GPU-...) or auto:N, not ''");
    out->list = s;
    return 0;
}

int vg_pick_resolve_list(const char *opt, const char *s, const struct vg_gpu_list *list,
                         struct vg_pick_sel **out, size_t *n, struct vg_err *err)
{
    struct vg_pick_sel *sel = calloc(vg_parse_list_count(s), sizeof(*sel));
    char *entry = NULL;
    size_t k = 0;
    int rc = 0;
    if (!sel)
        return vg_err_set(err, -ENOMEM, "out of memory");
    const char *pos = s, *a;
    size_t len;
    while (vg_parse_list_next(&pos, " \t", &a, &len)) {
        free(entry);
        entry = strndup(a, len);
        if (!entry) {
            rc = vg_err_set(err, -ENOMEM, "out of memory");
            goto fail;
        }
        if (!*entry) {
            rc = vg_err_set(err, -EINVAL, "%s '%s': empty entry", opt, s);
            goto fail;
        }
        /* One entry at a time through the CUDA_VISIBLE_DEVICES resolver, in bus order: the
         * same index and UUID-prefix rules, without its cut-off or its ban on mixing forms. */
        struct vg_visible v;
        rc = vg_visible_resolve(entry, "PCI_BUS_ID", list, &v, err);
        if (rc)
            goto fail;
        enum vg_vis_problem p = v.nentries == 1 ? v.entries[0].problem : VG_VIS_BAD_INDEX;
        size_t gpu = v.nentries == 1 ? v.entries[0].gpu : 0;
        int mig = v.nentries == 1 ? v.entries[0].mig : -1;
        vg_visible_release(&v);
        if (p != VG_VIS_OK) {
            rc = vg_err_set(err, -EINVAL,
                            "%s: '%s' is not a GPU of this host (%s; see "
                            "'vramguard status')",
                            opt, entry,
                            p == VG_VIS_BAD_INDEX && !(entry[0] >= '0' && entry[0] <= '9')
                                ? "not an index or a GPU-/MIG- UUID"
                                : vg_vis_problem_str(p));
            goto fail;
        }
        if (strncmp(entry, "MIG-", 4) != 0)
            mig = -1;
        for (size_t j = 0; j < k; j++) {
            if (sel[j].gpu == gpu && sel[j].mig == mig) {
                rc = vg_err_set(err, -EINVAL, "%s: '%s' names a GPU already in the list", opt,
                                entry);
                goto fail;
            }
        }
        sel[k++] = (struct vg_pick_sel){.gpu = gpu, .mig = mig};
    }
    free(entry);
    *out = sel;
    *n = k;
    return 0;
fail:
    free(entry);
    free(sel);
    return rc;
}
