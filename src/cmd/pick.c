/*
 * `vramguard pick`: which GPUs are free enough right now, most free first, printed as a
 * CUDA_VISIBLE_DEVICES value of UUIDs (or indices, or JSON). It only looks: nothing is
 * reserved, so two scripts that pick at the same moment may get the same GPU; `vramguard run
 * --gpus auto:N` chooses and reserves in one step.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cmd/cmd.h"
#include "cmd/gpusel.h"
#include "render/json.h"

static const char vg_pick_help[] =
    "usage: vramguard pick [-n N] [--min-free SIZE] [--max-util PCT] [--exclude GPUS]\n"
    "                      [--format cvd|index|json] [--wait TIMEOUT]\n"
    "\n"
    "Choose GPUs that are free enough now: enough free memory, utilisation low enough, not\n"
    "reserved by a 'vramguard run' (or by the job of one that was killed, which keeps its\n"
    "reservations while it lives). Most free first. Prints a CUDA_VISIBLE_DEVICES\n"
    "value made of UUIDs, e.g.  export CUDA_VISIBLE_DEVICES=$(vramguard pick -n 2)\n"
    "GPUs in MIG mode are never picked, nor a GPU whose UUID is not a well-formed UUID (it\n"
    "could not go into the value). Picking reserves nothing: to choose and reserve in\n"
    "one step, use 'vramguard run --gpus auto:N -- CMD'.\n"
    "\n"
    "Options:\n";

static const char vg_pick_help_tail[] =
    "\n"
    "Exit status: 0 picked; 1 not enough GPUs free (each one's reason on stderr); 3 the\n"
    "driver's view unavailable; 64 bad usage.\n"
    "\n";

enum vg_pick_format { VG_FMT_CVD, VG_FMT_INDEX, VG_FMT_JSON };

/* pick's own settings (the parse's target 0; the shared ones are VG_GPUSEL_DST). */
struct vg_pick_args {
    enum vg_pick_format fmt;
    bool fmt_given;
};

static void vg_pick_json_gpu(struct vg_json *j, const struct vg_gpusel *s, size_t k, bool picked)
{
    const struct vg_pick_cand *c = &s->ranked[k];
    const struct vg_gpu *g = &s->gpus.gpus[c->gpu];
    bool mem = g->known & VG_GPU_K_MEM;
    vg_json_obj_begin(j);
    vg_json_ku64(j, "index", g->index);
    vg_json_kstr(j, "uuid", g->known & VG_GPU_K_UUID ? g->uuid : NULL);
    vg_json_kstr(j, "name", g->known & VG_GPU_K_NAME ? g->name : NULL);
    vg_json_kbool(j, "picked", picked);
    vg_json_kbool(j, "eligible", c->reason == VG_PICK_OK);
    vg_json_kstr(j, "reason", c->reason == VG_PICK_OK ? NULL : vg_pick_reason_str(c->reason));
    vg_json_kbool(j, "reserved", s->reserved[c->gpu]);
    vg_json_key(j, "reserved_by");
    if (s->holder[c->gpu] > 0)
        vg_json_i64(j, s->holder[c->gpu]);
    else
        vg_json_null(j);
    /* A run killed under its job: the job keeps the reservation, and these are its holders. */
    const struct vg_lock_who *w = &s->who[c->gpu];
    vg_json_key(j, "reserved_by_alive");
    if (s->holder[c->gpu] > 0 && w->run_alive >= 0)
        vg_json_bool(j, w->run_alive == 1);
    else
        vg_json_null(j);
    vg_json_key(j, "reservation_held_by");
    if (s->holder[c->gpu] > 0 && w->run_alive == 0) {
        vg_json_arr_begin(j);
        for (size_t h = 0; h < w->nholders; h++)
            vg_json_i64(j, w->holders[h].pid);
        vg_json_arr_end(j);
    } else {
        vg_json_null(j);
    }
    vg_json_ku64_opt(j, "reservation_held_by_more", s->holder[c->gpu] > 0 && w->run_alive == 0,
                     w->more);
    vg_json_key(j, "memory");
    vg_json_obj_begin(j);
    vg_json_ku64_opt(j, "total", mem, g->mem_total);
    vg_json_ku64_opt(j, "used", mem, g->mem_used);
    vg_json_ku64_opt(j, "free", mem, g->mem_free);
    vg_json_ku64_opt(j, "needed", c->reason == VG_PICK_LOW_MEM, c->need_bytes);
    vg_json_obj_end(j);
    vg_json_ku64_opt(j, "utilization", g->known & VG_GPU_K_UTIL, g->util_gpu);
    vg_json_obj_end(j);
}

/* when: the time the GPUs were read, the document's "time" as in every other document. */
static int vg_pick_json(const struct vg_gpusel *s, const struct vg_pick_criteria *c, unsigned count,
                        bool ok, const char *cvd, const struct timespec *when, struct vg_buf *out)
{
    struct vg_json j;
    vg_json_init(&j, out, true);
    vg_json_envelope(&j, "vramguard.pick/1", when);
    vg_json_kbool(&j, "ok", ok);
    vg_json_kstr(&j, "cuda_visible_devices", ok ? cvd : NULL);
    vg_json_key(&j, "criteria");
    vg_json_obj_begin(&j);
    vg_json_ku64(&j, "count", count);
    vg_json_ku64_opt(&j, "min_free_bytes", c->min_free_set && !c->min_free_is_fraction,
                     c->min_free_bytes);
    vg_json_key(&j, "min_free_fraction");
    if (c->min_free_set && c->min_free_is_fraction)
        vg_json_double(&j, c->min_free_fraction);
    else
        vg_json_null(&j);
    vg_json_ku64(&j, "max_utilization", c->max_util);
    vg_json_obj_end(&j);
    /* picked: in pick order; gpus: every GPU, pick order first then the rest. */
    vg_json_key(&j, "picked");
    vg_json_arr_begin(&j);
    for (size_t i = 0; ok && i < s->n; i++)
        vg_json_u64(&j, s->gpus.gpus[s->v[i].gpu].index);
    vg_json_arr_end(&j);
    vg_json_key(&j, "gpus");
    vg_json_arr_begin(&j);
    for (size_t k = 0; k < s->gpus.ngpus; k++)
        vg_pick_json_gpu(&j, s, k, ok && k < s->n);
    vg_json_arr_end(&j);
    vg_json_obj_end(&j);
    return vg_json_finish(&j);
}

const struct vg_opt vg_pick_opts[] = {
    {"count", 'n', VG_OPT_ARG_REQUIRED, "N", "how many GPUs (default 1, at most 64)", 'n', NULL,
     VG_OPT_CODE},
    VG_GPUSEL_ROW_MIN_FREE("free memory each needs: a size (20GiB, 512MiB) or a fraction of\n"
                           "the GPU's total with a decimal point (0.5; the default)"),
    VG_GPUSEL_ROW_MAX_UTIL("highest utilisation accepted, 0-100 (default 50); with this\n"
                           "option, a GPU whose utilisation is unknown is not picked"),
    VG_GPUSEL_ROW_EXCLUDE("never pick these (indices as nvidia-smi numbers them, or UUIDs)"),
    {"format", 0, VG_OPT_ARG_REQUIRED, "FMT",
     "cvd: UUIDs, comma-separated (default); index: nvidia-smi indices;\n"
     "json: a vramguard.pick/1 document (also --json)",
     0, NULL,
     VG_OPT_VAL(VG_OPT_AT(0, struct vg_pick_args, fmt),
                VG_OPT_GIVEN(struct vg_pick_args, fmt_given), .kind = VG_OPT_K_WORD,
                .words = "cvd|index|json", .takes = "cvd, index or json")},
    VG_GPUSEL_ROW_WAIT("wait up to TIMEOUT (30s, 10m, 2h) for enough GPUs to be free"),
    VG_OPT_TABLE_END,
};

int vg_cmd_pick(struct vg_global *g, int argc, char **argv)
{
    struct vg_gpusel_opts o;
    vg_gpusel_opts_init(&o, "pick", g);
    struct vg_pick_args pa = {.fmt = VG_FMT_CVD};
    struct vg_err err = VG_ERR_INIT;
    struct vg_cmd_parse p = {VG_CMD_PARSE(pick), .g = g, .argc = argc, .argv = argv,
                             .dst = {[0] = &pa, [VG_GPUSEL_DST] = &o}};
    int c;
    while ((c = vg_cmd_next_opt(&p)) >= 0) {
        int r = c == 'n' ? vg_pick_parse_count("-n", optarg, &o.spec.count, &err)
                         : vg_gpusel_opt(&o, c, optarg, &err);
        if (r < 0)
            goto usage;
    }
    if (c != VG_CMD_OPT_END)
        return c == VG_CMD_OPT_HELP ? VG_EXIT_OK : VG_EXIT_USAGE;
    enum vg_pick_format fmt = pa.fmt;
    if (g->json) {
        if (pa.fmt_given && fmt != VG_FMT_JSON) {
            vg_cmd_error("pick", "--json and --format %s contradict each other",
                         fmt == VG_FMT_CVD ? "cvd" : "index");
            return VG_EXIT_USAGE;
        }
        fmt = VG_FMT_JSON;
    }
    o.quiet = fmt == VG_FMT_JSON && !g->verbose;

    struct vg_gpusel s;
    int status = vg_gpusel_acquire(&o, &s);
    struct timespec read_at;
    clock_gettime(CLOCK_REALTIME, &read_at);
    if (status != VG_EXIT_OK && !(status == VG_EXIT_WARN && fmt == VG_FMT_JSON && s.ranked)) {
        vg_gpusel_release(&s);
        return status;
    }
    bool ok = status == VG_EXIT_OK;
    struct vg_buf out, cvd;
    vg_buf_init(&out, 0);
    vg_buf_init(&cvd, 0);
    for (size_t i = 0; ok && i < s.n; i++) {
        if (fmt == VG_FMT_INDEX)
            vg_buf_printf(&cvd, "%s%u", i ? "," : "", s.gpus.gpus[s.v[i].gpu].index);
        else
            vg_buf_printf(&cvd, "%s%s", i ? "," : "", s.v[i].uuid);
    }
    int rc = cvd.err;
    if (rc == 0 && fmt == VG_FMT_JSON)
        rc = vg_pick_json(&s, &o.crit, o.spec.count, ok, vg_buf_str(&cvd), &read_at, &out);
    else if (rc == 0)
        rc = vg_buf_printf(&out, "%s\n", vg_buf_str(&cvd));
    if (rc == 0)
        rc = vg_cmd_write_out(&out);
    if (rc) {
        vg_cmd_error("pick", "cannot write the output: %s", strerror(-rc));
        status = VG_EXIT_SOFTWARE;
    }
    vg_buf_release(&out);
    vg_buf_release(&cvd);
    vg_gpusel_release(&s);
    return status;

usage:
    return vg_cmd_fail("pick", &err, VG_EXIT_USAGE, NULL);
}
