/*
 * Fuzz target: CUDA_VISIBLE_DEVICES resolution (vg_visible_resolve) against a few fixed hosts:
 * four identical GPUs, mixed models (so FASTEST_FIRST reorders), a GPU in MIG mode, UUIDs that
 * are prefixes of one another and a GPU whose UUID is unknown, and no GPU at all.
 *
 * Input: byte 0 picks the host, byte 1 the CUDA_DEVICE_ORDER (unset, PCI_BUS_ID, FASTEST_FIRST,
 * or the text after the value), the rest up to a NUL is the value (byte 1 bit 7: unset).
 *
 * Invariants: ndevices <= nentries and cut <= nentries; every entry before the cut is ok (or an
 * ignored extra MIG device), the one at the cut has a problem, the ones after are after_cut;
 * devices name existing GPUs / MIG devices, at most one MIG device, none twice; unset gives
 * the whole host in enumeration order; and a suggested value (other than "", meaning that no
 * entry names a device), resolved again, has no problem.
 */
#include <string.h>

#include "fuzz.h"
#include "model/visible.h"

static char *dup_str(const char *s)
{
    char *p = strdup(s);
    if (!p)
        abort();
    return p;
}

static struct vg_gpu *add_gpu(struct vg_gpu_list *l, const char *uuid, int ccmaj, int ccmin)
{
    struct vg_gpu *g = realloc(l->gpus, (l->ngpus + 1) * sizeof(*g));
    if (!g)
        abort();
    l->gpus = g;
    g = &l->gpus[l->ngpus];
    memset(g, 0, sizeof(*g));
    g->index = (unsigned)l->ngpus++;
    g->name = dup_str("GPU");
    g->known = VG_GPU_K_NAME | VG_GPU_K_CC;
    if (uuid) {
        g->uuid = dup_str(uuid);
        g->known |= VG_GPU_K_UUID;
    }
    g->cc_major = ccmaj;
    g->cc_minor = ccmin;
    if (ccmaj < 0)
        g->known &= ~(unsigned)VG_GPU_K_CC;
    return g;
}

static void add_mig(struct vg_gpu *parent, const char *uuid)
{
    struct vg_gpu *m = realloc(parent->mig, (parent->nmig + 1) * sizeof(*m));
    if (!m)
        abort();
    parent->mig = m;
    m = &parent->mig[parent->nmig];
    memset(m, 0, sizeof(*m));
    m->index = (unsigned)parent->nmig++;
    m->is_mig = true;
    m->uuid = dup_str(uuid);
    m->known = VG_GPU_K_UUID;
    parent->mig_current = 1;
    parent->known |= VG_GPU_K_MIG_MODE;
}

#define NHOSTS 5

static void build(int host, struct vg_gpu_list *l)
{
    vg_gpu_list_init(l);
    switch (host) {
    case 0: /* four identical GPUs */
        add_gpu(l, "GPU-aaaa1111-0000-0000-0000-000000000000", 8, 0);
        add_gpu(l, "GPU-aaaa2222-0000-0000-0000-000000000000", 8, 0);
        add_gpu(l, "GPU-bbbb3333-0000-0000-0000-000000000000", 8, 0);
        add_gpu(l, "GPU-cccc4444-0000-0000-0000-000000000000", 8, 0);
        break;
    case 1: /* mixed models: CUDA's default order differs from nvidia-smi's */
        add_gpu(l, "GPU-t4000000-0000", 7, 5);
        add_gpu(l, "GPU-h1000000-0000", 9, 0);
        add_gpu(l, "GPU-a1000000-0000", 8, 0);
        add_gpu(l, "GPU-u0000000-0000", -1, 0); /* compute capability unknown */
        break;
    case 2: { /* MIG */
        struct vg_gpu *g = add_gpu(l, "GPU-m0000000-0000", 8, 0);
        add_mig(g, "MIG-11110000-0000");
        add_mig(g, "MIG-22220000-0000");
        add_gpu(l, "GPU-n0000000-0000", 8, 0);
        g = add_gpu(l, "GPU-o0000000-0000", 8, 0);
        add_mig(g, "MIG-33330000-0000");
        break;
    }
    case 3: /* a UUID that is a prefix of another, and a GPU whose UUID is unknown */
        add_gpu(l, "GPU-abc", 8, 0);
        add_gpu(l, "GPU-abcd", 8, 6);
        add_gpu(l, NULL, 9, 0);
        break;
    default: /* no GPU */
        break;
    }
}

static void check(const struct vg_visible *v, const struct vg_gpu_list *l, const char *value)
{
    FUZZ_CHECK(v->nenum == l->ngpus);
    for (size_t i = 0; i < v->nenum; i++)
        FUZZ_CHECK(v->enum_order[i] < l->ngpus);
    size_t nmig = 0;
    for (size_t i = 0; i < v->ndevices; i++) {
        const struct vg_vis_device *d = &v->devices[i];
        FUZZ_CHECK(d->gpu < l->ngpus);
        FUZZ_CHECK(d->mig >= -1 && (d->mig < 0 || (size_t)d->mig < l->gpus[d->gpu].nmig));
        /* A GPU in MIG mode is used through a MIG device, never whole. */
        FUZZ_CHECK(d->mig >= 0 || l->gpus[d->gpu].nmig == 0);
        nmig += d->mig >= 0;
        for (size_t j = 0; j < i; j++)
            FUZZ_CHECK(v->devices[j].gpu != d->gpu || v->devices[j].mig != d->mig);
    }
    if (!value) {
        FUZZ_CHECK(!v->set && v->nentries == 0 && v->ndevices == l->ngpus);
        FUZZ_CHECK(v->corrected == NULL);
        return;
    }
    FUZZ_CHECK(nmig <= 1);
    FUZZ_CHECK(v->set);
    FUZZ_CHECK(v->nentries >= 1);
    FUZZ_CHECK(v->ndevices <= v->nentries);
    FUZZ_CHECK(v->cut <= v->nentries);
    for (size_t i = 0; i < v->nentries; i++) {
        const struct vg_vis_entry *e = &v->entries[i];
        FUZZ_CHECK(e->text != NULL && strlen(e->text) <= strlen(value));
        if (i < v->cut)
            FUZZ_CHECK(e->problem == VG_VIS_OK || e->problem == VG_VIS_EXTRA_MIG);
        else if (i == v->cut)
            FUZZ_CHECK(e->problem != VG_VIS_OK && e->problem != VG_VIS_AFTER_CUT &&
                       e->problem != VG_VIS_EXTRA_MIG);
        else
            FUZZ_CHECK(e->problem == VG_VIS_AFTER_CUT);
        FUZZ_CHECK(vg_vis_problem_str(e->problem)[0] != '?');
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    int host = data[0] % NHOSTS;
    int ordersel = data[1] & 3;
    int unset = (data[1] & 0x80) != 0;
    char *text = fuzz_cstr(data + 2, size - 2);
    const char *value = unset ? NULL : text;
    const char *order = ordersel == 0 ? NULL : ordersel == 1 ? "PCI_BUS_ID"
                        : ordersel == 2 ? "FASTEST_FIRST" : NULL;
    if (ordersel == 3) {
        size_t n = strlen(text);
        order = n + 2 < size ? text + n + 1 : ""; /* the text after the value's NUL */
    }

    struct vg_gpu_list l;
    build(host, &l);
    struct vg_visible v;
    struct vg_err err = VG_ERR_INIT;
    int rc = vg_visible_resolve(value, order, &l, &v, &err);
    if (rc == 0) {
        check(&v, &l, value);
        /* The suggestion must itself be a value without problems. "" is the renderer's "no
         * entry names a GPU here" (it then lists the UUIDs instead). */
        if (v.corrected && v.corrected[0]) {
            struct vg_visible again;
            FUZZ_CHECK(vg_visible_resolve(v.corrected, order, &l, &again, &err) == 0);
            check(&again, &l, v.corrected);
            FUZZ_CHECK(again.cut == again.nentries);
            for (size_t i = 0; i < again.nentries; i++)
                FUZZ_CHECK(again.entries[i].problem == VG_VIS_OK);
            vg_visible_release(&again);
        }
        vg_visible_release(&v);
    }
    vg_err_release(&err);
    vg_gpu_list_release(&l);
    free(text);
    return 0;
}
