/*
 * CUDA_VISIBLE_DEVICES resolution (see visible.h for the rules).
 *
 * Sources for the rules: the CUDA C Programming Guide, "CUDA Environment Variables" (indices,
 * UUIDs, the cut at the first invalid index: "0,2,-1,1" makes 0 and 2 visible), the MPS and
 * MIG user guides (UUID prefixes including "GPU-" are accepted; "MIG-" UUIDs; one MIG device per
 * CUDA process), and CUDA_DEVICE_ORDER (FASTEST_FIRST default, PCI_BUS_ID). Where the guides are
 * silent (blanks around entries, duplicates, mixing indices and UUIDs) we model what current
 * drivers do and err on the side of reporting a problem, since a flagged entry costs a user a
 * second look while a missed one costs them a GPU.
 */
#include "model/visible.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/array.h"
#include "util/buf.h"
#include "util/parse.h"

/* "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" at s: 36 bytes consumed, or 0. */
static size_t vg_vis_uuid_body(const char *s)
{
    static const unsigned char groups[] = {8, 4, 4, 4, 12};
    size_t i = 0;
    for (size_t g = 0; g < sizeof(groups); g++) {
        if (g && s[i++] != '-')
            return 0;
        for (unsigned k = 0; k < groups[g]; k++, i++) {
            char c = s[i];
            if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')))
                return 0;
        }
    }
    return i;
}

/* Decimal digits at s: how many (at most 10), 0 when none. */
static size_t vg_vis_digits(const char *s)
{
    size_t n = 0;
    while (n < 11 && s[n] >= '0' && s[n] <= '9')
        n++;
    return n <= 10 ? n : 0;
}

bool vg_visible_uuid_ok(const char *uuid)
{
    if (!uuid)
        return false;
    if (strncmp(uuid, "GPU-", 4) == 0 || strncmp(uuid, "MIG-", 4) == 0) {
        size_t n = vg_vis_uuid_body(uuid + 4);
        if (n && uuid[4 + n] == '\0')
            return true;
    }
    if (strncmp(uuid, "MIG-GPU-", 8) != 0)
        return false;
    const char *p = uuid + 8;
    size_t n = vg_vis_uuid_body(p);
    if (!n || p[n] != '/')
        return false;
    p += n + 1;
    if (!(n = vg_vis_digits(p)) || p[n] != '/')
        return false;
    p += n + 1;
    return (n = vg_vis_digits(p)) != 0 && p[n] == '\0';
}

const char *vg_vis_problem_str(enum vg_vis_problem p)
{
    switch (p) {
    case VG_VIS_OK:
        return "ok";
    case VG_VIS_EMPTY_ENTRY:
        return "empty entry";
    case VG_VIS_NEGATIVE:
        return "negative index";
    case VG_VIS_BAD_INDEX:
        return "no such GPU index";
    case VG_VIS_UNKNOWN_UUID:
        return "no GPU or MIG device has this UUID";
    case VG_VIS_AMBIGUOUS_UUID:
        return "UUID prefix matches several devices";
    case VG_VIS_DUPLICATE:
        return "duplicate";
    case VG_VIS_MIXED:
        return "mixes indices and UUIDs";
    case VG_VIS_EXTRA_MIG:
        return "a second MIG device (CUDA uses only the first)";
    case VG_VIS_AFTER_CUT:
        return "ignored: after the entry where CUDA stopped";
    }
    return "?";
}

void vg_visible_release(struct vg_visible *v)
{
    for (size_t i = 0; i < v->nentries; i++)
        free(v->entries[i].text);
    free(v->entries);
    free(v->devices);
    free(v->enum_order);
    free(v->corrected);
    memset(v, 0, sizeof(*v));
}

/* FASTEST_FIRST: higher compute capability first, unknown last, ties in bus (NVML) order.
 * A stable insertion sort over a handful of GPUs keeps ties in bus order with no comparator
 * context to pass around. */
static void vg_vis_sort(size_t *v, size_t n, const struct vg_gpu_list *gpus)
{
    for (size_t i = 1; i < n; i++) {
        size_t cur = v[i], j = i;
        while (j > 0) {
            const struct vg_gpu *gp = &gpus->gpus[v[j - 1]], *gc = &gpus->gpus[cur];
            bool kp = gp->known & VG_GPU_K_CC, kc = gc->known & VG_GPU_K_CC;
            int cp = kp ? gp->cc_major * 100 + gp->cc_minor : -1;
            int cc = kc ? gc->cc_major * 100 + gc->cc_minor : -1;
            if (cp >= cc)
                break;
            v[j] = v[j - 1];
            j--;
        }
        v[j] = cur;
    }
}

static int vg_vis_enum(struct vg_visible *v, const struct vg_gpu_list *gpus)
{
    v->nenum = gpus->ngpus;
    if (!v->nenum)
        return 0;
    v->enum_order = malloc(v->nenum * sizeof(*v->enum_order));
    if (!v->enum_order)
        return -ENOMEM;
    for (size_t i = 0; i < v->nenum; i++)
        v->enum_order[i] = i;
    if (v->order == VG_ORDER_FASTEST_FIRST)
        vg_vis_sort(v->enum_order, v->nenum, gpus);
    for (size_t i = 0; i < v->nenum; i++)
        if (v->enum_order[i] != i)
            v->order_differs = true;
    return 0;
}

/* Split value on commas into trimmed entries. */
static int vg_vis_split(struct vg_visible *v, const char *value)
{
    v->entries = calloc(vg_parse_list_count(value), sizeof(*v->entries));
    if (!v->entries)
        return -ENOMEM;
    const char *pos = value, *a;
    size_t len;
    while (vg_parse_list_next(&pos, " \t\n\r", &a, &len)) {
        struct vg_vis_entry *e = &v->entries[v->nentries++];
        e->text = strndup(a, len);
        e->mig = -1;
        if (!e->text)
            return -ENOMEM;
    }
    return 0;
}

enum vg_vis_form { VG_FORM_NONE, VG_FORM_INDEX, VG_FORM_UUID };

/* Resolve a UUID or UUID prefix against every GPU and MIG device. */
static enum vg_vis_problem vg_vis_uuid(const char *text, const struct vg_gpu_list *gpus,
                                       size_t *gpu, int *mig)
{
    size_t len = strlen(text);
    size_t hits = 0;
    /* "GPU-" or "MIG-" alone names nothing in particular. */
    if (len <= 4)
        return VG_VIS_UNKNOWN_UUID;
    for (size_t g = 0; g < gpus->ngpus; g++) {
        const struct vg_gpu *d = &gpus->gpus[g];
        if ((d->known & VG_GPU_K_UUID) && d->uuid && strncmp(d->uuid, text, len) == 0) {
            hits++;
            *gpu = g;
            *mig = -1;
            if (strlen(d->uuid) == len)
                return VG_VIS_OK; /* an exact match wins over longer look-alikes */
        }
        for (size_t m = 0; m < d->nmig; m++) {
            const struct vg_gpu *md = &d->mig[m];
            if ((md->known & VG_GPU_K_UUID) && md->uuid && strncmp(md->uuid, text, len) == 0) {
                hits++;
                *gpu = g;
                *mig = (int)m;
                if (strlen(md->uuid) == len)
                    return VG_VIS_OK;
            }
        }
    }
    if (hits == 0)
        return VG_VIS_UNKNOWN_UUID;
    return hits == 1 ? VG_VIS_OK : VG_VIS_AMBIGUOUS_UUID;
}

static enum vg_vis_problem vg_vis_classify(struct vg_visible *v, struct vg_vis_entry *e,
                                           const struct vg_gpu_list *gpus, enum vg_vis_form *form)
{
    const char *t = e->text;
    if (!*t)
        return VG_VIS_EMPTY_ENTRY;
    enum vg_vis_form this_form;
    enum vg_vis_problem p;
    if (t[0] == '-' && t[1] >= '0' && t[1] <= '9') {
        return VG_VIS_NEGATIVE;
    } else if (t[0] >= '0' && t[0] <= '9') {
        uint64_t idx;
        this_form = VG_FORM_INDEX;
        if (vg_parse_u64(t, &idx) || idx >= v->nenum)
            return VG_VIS_BAD_INDEX;
        e->gpu = v->enum_order[idx];
        e->mig = -1;
        p = VG_VIS_OK;
    } else if (strncmp(t, "GPU-", 4) == 0 || strncmp(t, "MIG-", 4) == 0) {
        this_form = VG_FORM_UUID;
        p = vg_vis_uuid(t, gpus, &e->gpu, &e->mig);
        if (p != VG_VIS_OK)
            return p;
    } else {
        return VG_VIS_BAD_INDEX;
    }
    /* A GPU in MIG mode stands for its first MIG device (also for a mixed-form entry, which the
     * suggested value still names: it must not name the MIG device twice). */
    if (e->mig < 0 && gpus->gpus[e->gpu].nmig > 0)
        e->mig = 0;
    if (*form == VG_FORM_NONE)
        *form = this_form;
    else if (*form != this_form)
        return VG_VIS_MIXED;
    return VG_VIS_OK;
}

static int vg_vis_add_device(struct vg_visible *v, size_t gpu, int mig)
{
    struct vg_vis_device *d = VG_ARRAY_PUSH(v->devices, v->ndevices, v->devices_cap);
    if (!d)
        return -ENOMEM;
    *d = (struct vg_vis_device){gpu, mig};
    return 0;
}

static bool vg_vis_has(const struct vg_vis_device *d, size_t n, size_t gpu, int mig)
{
    for (size_t i = 0; i < n; i++)
        if (d[i].gpu == gpu && d[i].mig == mig)
            return true;
    return false;
}

static bool vg_vis_has_mig(const struct vg_vis_device *d, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (d[i].mig >= 0)
            return true;
    return false;
}

/* The value the user most likely meant: every entry that names a device, once, as full
 * UUIDs (which mean the same thing whatever CUDA_DEVICE_ORDER says). */
static int vg_vis_correct(struct vg_visible *v, const struct vg_gpu_list *gpus)
{
    bool problem = false;
    for (size_t i = 0; i < v->nentries; i++)
        if (v->entries[i].problem != VG_VIS_OK)
            problem = true;
    /* "-1" alone (or "") is the conventional way to hide every GPU, not a mistake. */
    if (!problem || (v->nentries == 1 && v->entries[0].problem == VG_VIS_NEGATIVE) ||
        (v->nentries == 1 && v->entries[0].problem == VG_VIS_EMPTY_ENTRY))
        return 0;
    struct vg_buf b;
    vg_buf_init(&b, 0);
    struct vg_vis_device *seen = calloc(v->nentries, sizeof(*seen));
    size_t nseen = 0;
    if (!seen)
        return -ENOMEM;
    bool mig_used = false;
    for (size_t i = 0; i < v->nentries; i++) {
        struct vg_vis_entry *e = &v->entries[i];
        bool names =
            e->problem == VG_VIS_OK || e->problem == VG_VIS_MIXED || e->problem == VG_VIS_AFTER_CUT;
        if (!names || e->gpu >= gpus->ngpus)
            continue;
        if (e->problem == VG_VIS_AFTER_CUT && e->text[0] == '\0')
            continue;
        if (vg_vis_has(seen, nseen, e->gpu, e->mig) || (e->mig >= 0 && mig_used))
            continue;
        const struct vg_gpu *g = &gpus->gpus[e->gpu];
        const struct vg_gpu *d = e->mig >= 0 ? &g->mig[e->mig] : g;
        /* a value to paste: a device named only by a UUID that is unknown or not well-formed
         * (a comma would make several entries of it) is left out */
        if (!(d->known & VG_GPU_K_UUID) || !vg_visible_uuid_ok(d->uuid))
            continue;
        seen[nseen++] = (struct vg_vis_device){e->gpu, e->mig};
        mig_used |= e->mig >= 0;
        if (b.len)
            vg_buf_addc(&b, ',');
        vg_buf_adds(&b, d->uuid);
    }
    free(seen);
    if (b.err) {
        vg_buf_release(&b);
        return -ENOMEM;
    }
    v->corrected = vg_buf_steal(&b);
    return v->corrected ? 0 : -ENOMEM;
}

/* Entries after the cut are still resolved (so the report can say what they would have named),
 * without changing the result. */
static void vg_vis_resolve_after_cut(struct vg_visible *v, const struct vg_gpu_list *gpus)
{
    for (size_t i = v->cut + 1; i < v->nentries; i++) {
        struct vg_vis_entry *e = &v->entries[i];
        enum vg_vis_form any = VG_FORM_NONE;
        e->gpu = (size_t)-1;
        if (vg_vis_classify(v, e, gpus, &any) != VG_VIS_OK)
            e->gpu = (size_t)-1;
        e->problem = VG_VIS_AFTER_CUT;
    }
}

int vg_visible_resolve(const char *value, const char *order, const struct vg_gpu_list *gpus,
                       struct vg_visible *out, struct vg_err *err)
{
    memset(out, 0, sizeof(*out));
    out->order = VG_ORDER_FASTEST_FIRST;
    if (order && strcmp(order, "PCI_BUS_ID") == 0)
        out->order = VG_ORDER_PCI_BUS_ID;
    else if (order && strcmp(order, "FASTEST_FIRST") != 0)
        out->order_invalid = true;
    int rc = vg_vis_enum(out, gpus);
    if (rc)
        goto oom;

    if (!value) {
        for (size_t i = 0; i < out->nenum && rc == 0; i++) {
            size_t g = out->enum_order[i];
            rc = vg_vis_add_device(out, g, gpus->gpus[g].nmig ? 0 : -1);
        }
        if (rc)
            goto oom;
        return 0;
    }
    out->set = true;
    if ((rc = vg_vis_split(out, value)) != 0)
        goto oom;
    /* An empty value hides every GPU: one empty entry that is not a mistake. */
    out->cut = out->nentries;
    enum vg_vis_form form = VG_FORM_NONE;
    for (size_t i = 0; i < out->nentries; i++) {
        struct vg_vis_entry *e = &out->entries[i];
        e->problem = vg_vis_classify(out, e, gpus, &form);
        if (e->problem == VG_VIS_OK && vg_vis_has(out->devices, out->ndevices, e->gpu, e->mig))
            e->problem = VG_VIS_DUPLICATE;
        if (e->problem == VG_VIS_OK && e->mig >= 0 && vg_vis_has_mig(out->devices, out->ndevices)) {
            e->problem = VG_VIS_EXTRA_MIG;
            continue;
        }
        if (e->problem != VG_VIS_OK) {
            out->cut = i;
            break;
        }
        if ((rc = vg_vis_add_device(out, e->gpu, e->mig)) != 0)
            goto oom;
    }
    if (out->cut < out->nentries)
        vg_vis_resolve_after_cut(out, gpus);
    if ((rc = vg_vis_correct(out, gpus)) != 0)
        goto oom;
    return 0;

oom:
    vg_visible_release(out);
    return vg_err_set(err, rc, "out of memory");
}
