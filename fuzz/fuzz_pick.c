/*
 * Fuzz target: the GPU arguments of `run` and `pick` (model/pick.h): --gpus (auto, auto:N or a
 * list resolved against the host), -n, --max-util and --min-free. Byte 0 picks the parser, the
 * rest is the argument. Invariants: a resolved list names existing GPUs / MIG devices, none
 * twice, at most one entry per comma-separated item; counts are within 1..VG_PICK_MAX_GPUS,
 * utilisation within 0..100; a failure always says why.
 */
#include <string.h>

#include "fuzz.h"
#include "model/pick.h"

static char *dup_str(const char *s)
{
    char *p = strdup(s);
    if (!p)
        abort();
    return p;
}

static struct vg_gpu *add_gpu(struct vg_gpu_list *l, const char *uuid)
{
    struct vg_gpu *g = realloc(l->gpus, (l->ngpus + 1) * sizeof(*g));
    if (!g)
        abort();
    l->gpus = g;
    g = &l->gpus[l->ngpus];
    memset(g, 0, sizeof(*g));
    g->index = (unsigned)l->ngpus++;
    g->uuid = dup_str(uuid);
    g->name = dup_str("GPU");
    g->known = VG_GPU_K_UUID | VG_GPU_K_NAME;
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    char *s = fuzz_cstr(data + 1, size - 1);
    struct vg_err err = VG_ERR_INIT;
    int rc;
    switch (data[0] % 5) {
    case 0: {
        struct vg_pick_spec spec;
        rc = vg_pick_parse_spec(s, &spec, &err);
        if (rc == 0 && spec.is_auto)
            FUZZ_CHECK(spec.count >= 1 && spec.count <= VG_PICK_MAX_GPUS);
        if (rc == 0 && !spec.is_auto)
            FUZZ_CHECK(spec.list != NULL);
        break;
    }
    case 1: {
        unsigned n = 0;
        rc = vg_pick_parse_count("-n", s, &n, &err);
        if (rc == 0)
            FUZZ_CHECK(n >= 1 && n <= VG_PICK_MAX_GPUS);
        break;
    }
    case 2: {
        unsigned u = 1000;
        rc = vg_pick_parse_util(s, &u, &err);
        if (rc == 0)
            FUZZ_CHECK(u <= 100);
        break;
    }
    case 3: {
        struct vg_pick_criteria c;
        memset(&c, 0, sizeof c);
        rc = vg_pick_parse_min_free(s, &c, &err);
        break;
    }
    default: {
        struct vg_gpu_list l;
        vg_gpu_list_init(&l);
        add_gpu(&l, "GPU-aaaa1111-0000-0000-0000-000000000000");
        struct vg_gpu *g = add_gpu(&l, "GPU-aaaa2222-0000-0000-0000-000000000000");
        add_mig(g, "MIG-bbbb0000-0000");
        add_mig(g, "MIG-bbbb1111-0000");
        add_gpu(&l, "GPU-abc");
        add_gpu(&l, "GPU-abcd");
        struct vg_pick_sel *sel = NULL;
        size_t n = 0;
        rc = vg_pick_resolve_list("--gpus", s, &l, &sel, &n, &err);
        if (rc == 0) {
            size_t items = 1;
            for (const char *p = s; *p; p++)
                items += *p == ',';
            FUZZ_CHECK(n >= 1 && n <= items);
            for (size_t i = 0; i < n; i++) {
                FUZZ_CHECK(sel[i].gpu < l.ngpus);
                FUZZ_CHECK(sel[i].mig >= -1 &&
                           (sel[i].mig < 0 || (size_t)sel[i].mig < l.gpus[sel[i].gpu].nmig));
                for (size_t j = 0; j < i; j++)
                    FUZZ_CHECK(sel[j].gpu != sel[i].gpu || sel[j].mig != sel[i].mig);
            }
        } else {
            FUZZ_CHECK(sel == NULL || n == 0);
        }
        free(sel);
        vg_gpu_list_release(&l);
        break;
    }
    }
    if (rc != 0)
        FUZZ_CHECK(vg_err_msg(&err)[0]);
    vg_err_release(&err);
    free(s);
    return 0;
}
