/*
 * `visible` output: which physical GPU a CUDA program would see as cuda:0, cuda:1, ...; each
 * entry of the value and what became of it; where CUDA stopped reading and why; the ordering
 * caveat when CUDA and nvidia-smi number GPUs differently.
 */
#include <stdio.h>
#include <string.h>

#include "render/json.h"
#include "render/render.h"
#include "render/text.h"

static const struct vg_gpu *vg_vis_dev(const struct vg_snapshot *snap, size_t gpu, int mig)
{
    if (gpu >= snap->gpus.ngpus)
        return NULL;
    const struct vg_gpu *g = &snap->gpus.gpus[gpu];
    return mig >= 0 && (size_t)mig < g->nmig ? &g->mig[mig] : g;
}

static void vg_vis_dev_text(struct vg_buf *o, const struct vg_snapshot *snap, size_t gpu, int mig)
{
    const struct vg_gpu *g = &snap->gpus.gpus[gpu];
    const struct vg_gpu *d = vg_vis_dev(snap, gpu, mig);
    char uuid[32];
    vg_text_short_uuid((d->known & VG_GPU_K_UUID) ? d->uuid : NULL, uuid, sizeof(uuid));
    if (mig >= 0)
        vg_buf_printf(o, "GPU %u MIG %d  ", g->index, mig);
    else
        vg_buf_printf(o, "GPU %u  ", g->index);
    const char *name = (d->known & VG_GPU_K_NAME) ? d->name : "(name n/a)";
    vg_text_escape(o, name, strlen(name), 40, NULL);
    vg_buf_printf(o, "  %s", uuid);
    if (g->known & VG_GPU_K_MINOR)
        vg_buf_printf(o, "  minor %u", g->minor);
}

/* Every GPU and MIG device of the host with its full UUID, for a value that named none. */
static void vg_vis_uuid_list(struct vg_buf *o, const struct vg_snapshot *snap)
{
    for (size_t g = 0; g < snap->gpus.ngpus; g++) {
        const struct vg_gpu *gp = &snap->gpus.gpus[g];
        for (int m = -1; m < (int)gp->nmig; m++) {
            const struct vg_gpu *d = vg_vis_dev(snap, g, m);
            const char *name = (d->known & VG_GPU_K_NAME) ? d->name : "(name n/a)";
            if (m >= 0)
                vg_buf_printf(o, "  GPU %u MIG %d  ", gp->index, m);
            else
                vg_buf_printf(o, "  GPU %u  ", gp->index);
            vg_text_escape(o, name, strlen(name), 40, NULL);
            vg_buf_adds(o, "  ");
            if ((d->known & VG_GPU_K_UUID) && d->uuid)
                vg_text_escape(o, d->uuid, strlen(d->uuid), 96, NULL);
            else
                vg_buf_adds(o, "UUID n/a");
            vg_buf_addc(o, '\n');
        }
    }
}

/* The two variables as set (or not). */
static void vg_vis_env_text(struct vg_buf *out, const struct vg_visible *v, const char *value,
                            const char *order, const struct vg_style *st)
{
    if (value) {
        vg_buf_adds(out, "CUDA_VISIBLE_DEVICES='");
        vg_text_escape(out, value, strlen(value), 200, NULL);
        vg_buf_adds(out, "'");
    } else {
        vg_buf_adds(out, "CUDA_VISIBLE_DEVICES unset (every GPU)");
    }
    if (order) {
        vg_buf_adds(out, ", CUDA_DEVICE_ORDER=");
        vg_text_escape(out, order, strlen(order), 40, NULL);
        if (v->order_invalid)
            vg_buf_printf(out, " %s(not a value CUDA knows: FASTEST_FIRST applies)%s", st->yellow,
                          st->reset);
    } else {
        vg_buf_adds(out, ", CUDA_DEVICE_ORDER unset (FASTEST_FIRST)");
    }
    vg_buf_adds(out, "\n\n");
}

/* Each entry of the list and what it names, or what is wrong with it. */
static void vg_vis_entries_text(struct vg_buf *out, const struct vg_snapshot *snap,
                                const struct vg_visible *v, const struct vg_style *st)
{
    vg_buf_printf(out, "\n%sEntries:%s\n", st->bold, st->reset);
    for (size_t i = 0; i < v->nentries; i++) {
        const struct vg_vis_entry *e = &v->entries[i];
        vg_buf_printf(out, "  %zu  '", i + 1);
        vg_text_escape(out, e->text, strlen(e->text), 48, NULL);
        vg_buf_adds(out, "'  ");
        if (e->problem == VG_VIS_OK) {
            vg_buf_adds(out, "-> ");
            vg_vis_dev_text(out, snap, e->gpu, e->mig);
        } else if (e->problem == VG_VIS_AFTER_CUT) {
            vg_buf_printf(out, "%s%s", st->dim, vg_vis_problem_str(e->problem));
            if (e->gpu < snap->gpus.ngpus) {
                vg_buf_adds(out, " (would be ");
                vg_vis_dev_text(out, snap, e->gpu, e->mig);
                vg_buf_addc(out, ')');
            }
            vg_buf_adds(out, st->reset);
        } else {
            vg_buf_printf(out, "%s%s%s%s", i == v->cut ? st->red : st->yellow,
                          vg_vis_problem_str(e->problem),
                          i == v->cut ? "; CUDA stops reading the list here" : "", st->reset);
        }
        vg_buf_addc(out, '\n');
    }
}

/* The corrected value, when the given one has problems. */
static void vg_vis_suggest_text(struct vg_buf *out, const struct vg_visible *v,
                                const struct vg_style *st)
{
    vg_buf_printf(out, "\n%sSuggested:%s ", st->bold, st->reset);
    if (v->corrected[0] && v->cut < v->nentries)
        vg_buf_printf(out,
                      "export CUDA_VISIBLE_DEVICES=%s\n  (every entry that names a "
                      "GPU, by UUID, including those after the cut: check that this is "
                      "what was meant)\n",
                      v->corrected);
    else if (v->corrected[0])
        vg_buf_printf(out, "export CUDA_VISIBLE_DEVICES=%s\n", v->corrected);
    else
        vg_buf_adds(out, "no entry names a GPU on this host; use the UUIDs below\n");
}

/* CUDA's numbering against nvidia-smi's, on a host where they differ. */
static void vg_vis_ordering_text(struct vg_buf *out, const struct vg_snapshot *snap,
                                 const struct vg_visible *v, const struct vg_style *st)
{
    vg_buf_printf(out,
                  "\n%sOrdering:%s this host mixes GPU models, so CUDA (FASTEST_FIRST) "
                  "and nvidia-smi (PCI bus order) number them differently:\n",
                  st->yellow, st->reset);
    for (size_t i = 0; i < v->nenum; i++) {
        vg_buf_printf(out, "  CUDA index %zu = nvidia-smi ", i);
        vg_vis_dev_text(out, snap, v->enum_order[i], -1);
        vg_buf_addc(out, '\n');
    }
    vg_buf_adds(out, "  export CUDA_DEVICE_ORDER=PCI_BUS_ID to make them agree, or use "
                     "UUIDs.\n");
}

/* The same devices by UUID, when the value is set and has no problem. Only when the driver gave
 * every UUID, well-formed: a value with a placeholder in it, copied into a shell, would make
 * CUDA stop at that entry, and a UUID with a comma or a control character in it would be
 * several entries, or reach the terminal. */
static void vg_vis_by_uuid_text(struct vg_buf *out, const struct vg_snapshot *snap,
                                const struct vg_visible *v)
{
    bool all_uuids = v->ndevices > 0;
    for (size_t i = 0; i < v->ndevices && all_uuids; i++) {
        const struct vg_gpu *d = vg_vis_dev(snap, v->devices[i].gpu, v->devices[i].mig);
        all_uuids = (d->known & VG_GPU_K_UUID) && vg_visible_uuid_ok(d->uuid);
    }
    if (!(v->set && !v->corrected && all_uuids))
        return;
    vg_buf_adds(out, "\nBy UUID (the same whatever the order): CUDA_VISIBLE_DEVICES=");
    for (size_t i = 0; i < v->ndevices; i++) {
        const struct vg_gpu *d = vg_vis_dev(snap, v->devices[i].gpu, v->devices[i].mig);
        vg_buf_printf(out, "%s%s", i ? "," : "", d->uuid);
    }
    vg_buf_addc(out, '\n');
}

int vg_render_visible_text(const struct vg_snapshot *snap, const struct vg_visible *v,
                           const char *value, const char *order, const struct vg_render_opts *ro,
                           struct vg_buf *out)
{
    struct vg_style st;
    vg_style_init(&st, ro->color);
    vg_render_replay_text(out, snap, &st);
    vg_vis_env_text(out, v, value, order, &st);
    if (v->ndevices == 0) {
        vg_buf_printf(out, "%sA CUDA program here sees no GPU.%s\n", st.bold, st.reset);
    } else {
        vg_buf_printf(out, "%sA CUDA program here sees:%s\n", st.bold, st.reset);
        for (size_t i = 0; i < v->ndevices; i++) {
            vg_buf_printf(out, "  cuda:%zu  ", i);
            vg_vis_dev_text(out, snap, v->devices[i].gpu, v->devices[i].mig);
            vg_buf_addc(out, '\n');
        }
    }
    if (v->set && v->nentries)
        vg_vis_entries_text(out, snap, v, &st);
    if (v->corrected)
        vg_vis_suggest_text(out, v, &st);
    if (v->corrected && !v->corrected[0])
        vg_vis_uuid_list(out, snap);
    if (v->order_differs && !(order && strcmp(order, "PCI_BUS_ID") == 0))
        vg_vis_ordering_text(out, snap, v, &st);
    vg_vis_by_uuid_text(out, snap, v);
    return out->err;
}

static void vg_vis_dev_json(struct vg_json *j, const struct vg_snapshot *snap, size_t gpu, int mig)
{
    const struct vg_gpu *g = &snap->gpus.gpus[gpu];
    const struct vg_gpu *d = vg_vis_dev(snap, gpu, mig);
    vg_json_ku64(j, "gpu", g->index);
    vg_json_key(j, "mig_device");
    if (mig >= 0)
        vg_json_i64(j, mig);
    else
        vg_json_null(j);
    vg_json_kstr(j, "uuid", (d->known & VG_GPU_K_UUID) ? d->uuid : NULL);
    vg_json_kstr(j, "name", (d->known & VG_GPU_K_NAME) ? d->name : NULL);
    vg_json_ku64_opt(j, "minor", g->known & VG_GPU_K_MINOR, g->minor);
}

static const char *vg_vis_problem_id(enum vg_vis_problem p)
{
    static const char *const ids[] = {"ok",           "empty",          "negative",  "bad_index",
                                      "unknown_uuid", "ambiguous_uuid", "duplicate", "mixed",
                                      "extra_mig",    "after_cut"};
    return (size_t)p < sizeof(ids) / sizeof(ids[0]) ? ids[p] : "unknown";
}

int vg_render_visible_json(const struct vg_snapshot *snap, const struct vg_visible *v,
                           const char *value, const char *order, struct vg_buf *out)
{
    struct vg_json j;
    vg_json_init(&j, out, true);
    vg_json_obj_begin(&j);
    vg_json_kstr(&j, "schema", VG_JSON_SCHEMA_VISIBLE);
    vg_json_kstr(&j, "value", value);
    vg_json_kstr(&j, "order", order);
    vg_json_kstr(&j, "effective_order",
                 v->order == VG_ORDER_PCI_BUS_ID ? "PCI_BUS_ID" : "FASTEST_FIRST");
    vg_json_kbool(&j, "order_invalid", v->order_invalid);
    vg_json_kbool(&j, "order_differs_from_nvidia_smi", v->order_differs);
    vg_json_key(&j, "devices");
    vg_json_arr_begin(&j);
    for (size_t i = 0; i < v->ndevices; i++) {
        vg_json_obj_begin(&j);
        vg_json_ku64(&j, "cuda_index", i);
        vg_vis_dev_json(&j, snap, v->devices[i].gpu, v->devices[i].mig);
        vg_json_obj_end(&j);
    }
    vg_json_arr_end(&j);
    vg_json_key(&j, "entries");
    vg_json_arr_begin(&j);
    for (size_t i = 0; i < v->nentries; i++) {
        const struct vg_vis_entry *e = &v->entries[i];
        vg_json_obj_begin(&j);
        vg_json_kstr(&j, "text", e->text);
        vg_json_kstr(&j, "status", vg_vis_problem_id(e->problem));
        vg_json_key(&j, "device");
        if (e->problem == VG_VIS_OK) {
            vg_json_obj_begin(&j);
            vg_vis_dev_json(&j, snap, e->gpu, e->mig);
            vg_json_obj_end(&j);
        } else {
            vg_json_null(&j);
        }
        vg_json_obj_end(&j);
    }
    vg_json_arr_end(&j);
    vg_json_key(&j, "cut_at");
    if (v->cut < v->nentries)
        vg_json_u64(&j, v->cut);
    else
        vg_json_null(&j);
    /* "" would hide every GPU if pasted: no suggestion is null. */
    vg_json_kstr(&j, "suggested", v->corrected && v->corrected[0] ? v->corrected : NULL);
    vg_render_replay_json(&j, snap);
    vg_json_obj_end(&j);
    return vg_json_finish(&j);
}
