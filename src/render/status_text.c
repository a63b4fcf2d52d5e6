/*
 * `status` for people: one block per GPU (identity, memory with the driver's reservation shown
 * apart, utilisation) and its holders in a table that fits 80 columns, the command line cut to
 * the terminal's width with a visible ellipsis. Unknown values read "n/a", never 0.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "render/render.h"
#include "render/text.h"
#include "util/parse.h"

/* Columns before COMMAND: "  " + PID 7, USER 10, MEMORY 9, TYPE 5, ST 2, SEEN 4, CONTAINER 12,
 * separated by single spaces. */
#define VG_COL_FIXED 58

static int vg_size_str(bool known, uint64_t v, char *out, size_t n)
{
    if (!known)
        return snprintf(out, n, "n/a") < 0 ? -1 : 0;
    return vg_fmt_size(v, out, n);
}

/* Paths shown, and columns each, on the line under a holder of more nodes than are listed. */
#define VG_TEXT_NODES_SHOWN 3
#define VG_TEXT_NODE_COLS 120

/* A process holding more distinct NVIDIA nodes than the scan lists (thousands of
 * nvidia-caps nodes, or a stand-in directory full of them) gets one line saying how many,
 * with the first few, so nothing is hidden and nothing floods the screen. */
static void vg_text_many_nodes(struct vg_buf *o, const struct vg_proc *p, const struct vg_style *st)
{
    size_t total = p->ndev_paths + p->dev_nodes_more, shown = 0;
    vg_buf_printf(o, "%s          holds %zu NVIDIA device nodes:", st->dim, total);
    for (size_t i = 0; i < p->ndev_paths && shown < VG_TEXT_NODES_SHOWN; i++, shown++) {
        vg_buf_adds(o, shown ? ", " : " ");
        const char *path = p->dev_paths[i] ? p->dev_paths[i] : "?";
        vg_text_escape(o, path, strlen(path), VG_TEXT_NODE_COLS, NULL);
    }
    vg_buf_printf(o, " and %zu more%s\n", total - shown, st->reset);
}

static void vg_text_holder(struct vg_buf *o, const struct vg_snapshot *snap,
                           const struct vg_holding *h, const struct vg_render_opts *ro,
                           const struct vg_style *st)
{
    /* A stale entry shows what its PID names now, marked as such below. */
    const struct vg_proc *p = h->proc ? h->proc : h->stale_proc;
    char tmp[64];
    vg_buf_adds(o, "  ");
    snprintf(tmp, sizeof(tmp), "%" PRIu32, (uint32_t)h->pid);
    vg_text_pad(o, tmp, 7, true);
    vg_buf_addc(o, ' ');
    const char *user = p && (p->known & VG_PROC_K_USER) && p->user ? p->user : "?";
    size_t ucols;
    struct vg_buf ub;
    vg_buf_init(&ub, 4096);
    vg_text_escape(&ub, user, strlen(user), 10, &ucols);
    vg_buf_adds(o, vg_buf_str(&ub));
    for (size_t i = ucols; i < 10; i++)
        vg_buf_addc(o, ' ');
    vg_buf_release(&ub);
    vg_buf_addc(o, ' ');
    if (h->seen & VG_SEEN_NVML)
        vg_size_str(h->used_known, h->used_bytes, tmp, sizeof(tmp));
    else
        snprintf(tmp, sizeof(tmp), "-");
    vg_text_pad(o, tmp, 9, true);
    vg_buf_addc(o, ' ');
    vg_text_pad(o, vg_render_types_short(h->types), 5, false);
    vg_buf_addc(o, ' ');
    char state[2] = {p && (p->known & VG_PROC_K_STAT) ? vg_text_state(p->state) : '?', '\0'};
    bool bad_state = state[0] == 'Z' || state[0] == 'D';
    /* One letter in the two-column ST field, then the separator. */
    vg_buf_printf(o, "%s%s%s  ", bad_state ? st->red : "", state, bad_state ? st->reset : "");
    const char *seen = vg_render_seen(h->seen);
    const char *color =
        (h->seen & VG_SEEN_NVML) ? ((h->seen & VG_SEEN_NODE) ? "" : st->magenta) : st->yellow;
    vg_buf_printf(o, "%s", color);
    vg_text_pad(o, seen, 4, false);
    vg_buf_printf(o, "%s ", *color ? st->reset : "");
    char cont[16];
    if (p && p->container_id)
        snprintf(cont, sizeof(cont), "%.12s", p->container_id);
    else
        snprintf(cont, sizeof(cont), "-");
    vg_text_pad(o, cont, 12, false);
    vg_buf_addc(o, ' ');

    size_t room = ro->width > VG_COL_FIXED + 8 ? ro->width - VG_COL_FIXED : 0;
    if (h->stale) {
        static const char mark[] = "(stale: the PID now names) ";
        vg_buf_printf(o, "%s%s%s", st->dim, mark, st->reset);
        room = room > sizeof(mark) + 8 ? room - (sizeof(mark) - 1) : room ? 8 : 0;
    }
    if (!p) {
        bool hidden = snap->procs.access & VG_PROC_ACC_HIDEPID;
        vg_buf_printf(o, "%s%s%s", st->dim,
                      h->bogus_pid ? "(bogus PID from the driver)"
                      : hidden     ? "(not in this /proc: hidepid hides other users')"
                                   : "(not in this /proc)",
                      st->reset);
    } else if (p->cmdline && p->cmdline[0]) {
        vg_text_escape(o, p->cmdline, strlen(p->cmdline), room, NULL);
    } else if (p->comm) {
        vg_buf_addc(o, '[');
        vg_text_escape(o, p->comm, strlen(p->comm), room > 2 ? room - 2 : 0, NULL);
        vg_buf_addc(o, ']');
    } else {
        vg_buf_adds(o, "?");
    }
    vg_buf_addc(o, '\n');
    if (p && (p->known & VG_PROC_K_FDS) && p->dev_nodes_more)
        vg_text_many_nodes(o, p, st);
}

static void vg_text_holders(struct vg_buf *o, const struct vg_snapshot *snap, size_t gi, int mig,
                            const struct vg_render_opts *ro, const struct vg_style *st,
                            bool *header)
{
    size_t first, count;
    vg_snap_gpu_holdings(snap, gi, &first, &count);
    for (size_t i = first; i < first + count; i++) {
        const struct vg_holding *h = &snap->holdings[i];
        if (h->mig != mig)
            continue;
        if (!*header) {
            vg_buf_printf(o,
                          "%s      PID USER          MEMORY TYPE  ST SEEN CONTAINER    "
                          "COMMAND%s\n",
                          st->dim, st->reset);
            *header = true;
        }
        vg_text_holder(o, snap, h, ro, st);
    }
}

static void vg_text_errors(struct vg_buf *o, const struct vg_gpu_error *e, size_t n,
                           const struct vg_style *st)
{
    for (size_t i = 0; i < n; i++) {
        vg_buf_printf(o, "  %s! ", st->red);
        vg_text_escape(o, e[i].msg, strlen(e[i].msg), 0, NULL);
        vg_buf_printf(o, "%s\n", st->reset);
    }
}

static void vg_text_memory(struct vg_buf *o, const struct vg_gpu *g)
{
    char used[32], total[32], res[32], fr[32];
    bool mem = g->known & VG_GPU_K_MEM;
    vg_size_str(mem, g->mem_used, used, sizeof(used));
    vg_size_str(mem, g->mem_total, total, sizeof(total));
    vg_size_str(mem, g->mem_free, fr, sizeof(fr));
    vg_buf_printf(o, "  memory %s of %s used, %s free", used, total, fr);
    if (g->known & VG_GPU_K_RESERVED) {
        vg_fmt_size(g->mem_reserved, res, sizeof(res));
        vg_buf_printf(o, ", %s reserved", res);
    }
}

/* Add part to the health line in line (n bytes), ", "-separated. */
static void vg_text_health_part(char *line, size_t n, const char *part)
{
    size_t len = strlen(line);
    snprintf(line + len, n - len, "%s%s", len ? ", " : "", part);
}

/* One line when the GPU's own health is wrong (what doctor's health rules report, in short),
 * nothing otherwise: unknown facts say nothing here, doctor and the JSON say them. Kept within
 * 80 columns: a longer line is cut with "...". */
static void vg_text_health(struct vg_buf *o, const struct vg_gpu *g, const struct vg_style *st)
{
    static const struct {
        uint64_t bit;
        const char *name;
    } brakes[] = {
        {VG_CLK_HW_SLOWDOWN, "hw slowdown"},
        {VG_CLK_HW_THERMAL, "hw thermal"},
        {VG_CLK_SW_THERMAL, "sw thermal"},
        {VG_CLK_HW_POWER_BRAKE, "power brake"},
    };
    const struct vg_gpu_health *h = &g->health;
    char line[160] = "", part[48];
    if ((h->known & VG_GH_K_ECC_VOL_UNCORR) && h->ecc_vol_uncorr) {
        snprintf(part, sizeof part, "%llu uncorrected ECC", (unsigned long long)h->ecc_vol_uncorr);
        vg_text_health_part(line, sizeof line, part);
    }
    if ((h->known & VG_GH_K_RETIRED_PENDING) && h->retired_pending)
        vg_text_health_part(line, sizeof line, "page retirement pending");
    if ((h->known & VG_GH_K_REMAP) && h->remap_failure)
        vg_text_health_part(line, sizeof line, "row remap failed");
    else if ((h->known & VG_GH_K_REMAP) && h->remap_pending)
        vg_text_health_part(line, sizeof line, "row remap pending");
    if ((h->known & VG_GH_K_RECOVERY) && h->recovery != VG_RECOVERY_NONE) {
        const char *a = vg_gpu_recovery_text(h->recovery);
        snprintf(part, sizeof part, "driver asks %s", a ? a : "an unknown action");
        vg_text_health_part(line, sizeof line, part);
    }
    for (size_t i = 0; (h->known & VG_GH_K_CLOCKS) && i < sizeof brakes / sizeof brakes[0]; i++)
        if (h->clocks & brakes[i].bit)
            vg_text_health_part(line, sizeof line, brakes[i].name);
    if (!line[0])
        return;
    if (strlen(line) > 68)
        memcpy(line + 65, "...", 4);
    vg_buf_printf(o, "  %s! health: %s%s\n", st->red, line, st->reset);
}

static void vg_text_gpu(struct vg_buf *o, const struct vg_snapshot *snap, size_t gi,
                        const struct vg_render_opts *ro, const struct vg_style *st)
{
    const struct vg_gpu *g = &snap->gpus.gpus[gi];
    const struct vg_snap_gpu *s = &snap->per_gpu[gi];
    char uuid[32], minor[16];
    vg_text_short_uuid((g->known & VG_GPU_K_UUID) ? g->uuid : NULL, uuid, sizeof(uuid));
    if (g->known & VG_GPU_K_MINOR)
        snprintf(minor, sizeof(minor), "%u", g->minor);
    else
        snprintf(minor, sizeof(minor), "n/a");
    vg_buf_printf(o, "%sGPU %u%s  ", st->bold, g->index, st->reset);
    const char *name = (g->known & VG_GPU_K_NAME) ? g->name : "(name n/a)";
    vg_text_escape(o, name, strlen(name), 40, NULL);
    vg_buf_adds(o, "  ");
    vg_text_escape(o, uuid, strlen(uuid), 0, NULL);
    vg_buf_printf(o, "  minor %s", minor);
    if (g->lost)
        vg_buf_printf(o, "  %sLOST%s", st->red, st->reset);
    if (g->hung)
        vg_buf_printf(o, "  %sHUNG%s", st->red, st->reset);
    vg_buf_addc(o, '\n');

    vg_text_memory(o, g);
    if (g->known & VG_GPU_K_UTIL)
        vg_buf_printf(o, ", util %u%%\n", g->util_gpu);
    else
        vg_buf_adds(o, ", util n/a\n");
    if (s->unexplained_known && s->unexplained_bytes) {
        char un[32];
        vg_fmt_size(s->unexplained_bytes, un, sizeof(un));
        vg_buf_printf(o, "  %s%s%s held by no listed process%s%s\n", st->yellow,
                      s->unexplained_upper_bound ? "up to " : "", un,
                      s->unexplained_has_reserved ? " (includes the driver's reservation)" : "",
                      st->reset);
    }
    vg_text_health(o, g, st);
    vg_text_errors(o, g->errors, g->nerrors, st);

    bool header = false;
    vg_text_holders(o, snap, gi, -1, ro, st, &header);
    for (size_t m = 0; m < g->nmig; m++) {
        const struct vg_gpu *mg = &g->mig[m];
        vg_text_short_uuid((mg->known & VG_GPU_K_UUID) ? mg->uuid : NULL, uuid, sizeof(uuid));
        vg_buf_printf(o, "  %sMIG %zu%s  ", st->bold, m, st->reset);
        const char *mname = (mg->known & VG_GPU_K_NAME) ? mg->name : "(name n/a)";
        vg_text_escape(o, mname, strlen(mname), 40, NULL);
        vg_buf_adds(o, "  ");
        vg_text_escape(o, uuid, strlen(uuid), 0, NULL);
        vg_buf_adds(o, "\n  ");
        vg_text_memory(o, mg);
        vg_buf_addc(o, '\n');
        vg_text_errors(o, mg->errors, mg->nerrors, st);
        header = false;
        vg_text_holders(o, snap, gi, (int)m, ro, st, &header);
    }
    /* Without the driver's process list, an empty holder list only covers device nodes. */
    bool procs_known = !snap->driver_ok || (g->known & VG_GPU_K_PROCS);
    const char *why = g->hung ? "the driver did not answer for this GPU in time"
                              : "the driver's process list failed";
    if (s->nholders == 0 && procs_known)
        vg_buf_printf(o, "  %sno process holds this GPU%s\n", st->dim, st->reset);
    else if (s->nholders == 0)
        vg_buf_printf(o, "  %sno process holds its device node; %s%s\n", st->yellow, why,
                      st->reset);
    else if (!procs_known)
        vg_buf_printf(o, "  %s%s: holders with a context may be missing%s\n", st->yellow, why,
                      st->reset);
    vg_buf_addc(o, '\n');
}

static void vg_text_unmatched(struct vg_buf *o, const struct vg_snapshot *snap,
                              const struct vg_render_opts *ro, const struct vg_style *st)
{
    size_t first, count;
    vg_snap_gpu_holdings(snap, VG_SNAP_NO_GPU, &first, &count);
    if (!count)
        return;
    if (snap->driver_ok)
        vg_buf_printf(o, "%sDevice nodes no GPU answers for%s\n", st->bold, st->reset);
    else
        vg_buf_printf(o, "%sProcesses holding NVIDIA device nodes%s\n", st->bold, st->reset);
    unsigned last = (unsigned)-1;
    bool header = false;
    for (size_t i = first; i < first + count; i++) {
        const struct vg_holding *h = &snap->holdings[i];
        if (h->minor != last) {
            vg_buf_printf(o, "  %s/nvidia%u\n", snap->dev_dir, h->minor);
            last = h->minor;
            header = false;
        }
        if (!header) {
            vg_buf_printf(o,
                          "%s      PID USER          MEMORY TYPE  ST SEEN CONTAINER    "
                          "COMMAND%s\n",
                          st->dim, st->reset);
            header = true;
        }
        vg_text_holder(o, snap, h, ro, st);
    }
    vg_buf_addc(o, '\n');
}

/* Processes that hold nodes only through O_PATH descriptors: shown, since fuser and lsof list
 * them, and said to hold nothing, since no open of the device took place (issue 27). */
static void vg_text_path_only(struct vg_buf *o, const struct vg_snapshot *snap,
                              const struct vg_style *st)
{
    bool header = false;
    for (size_t i = 0; i < snap->procs.n; i++) {
        const struct vg_proc *p = &snap->procs.procs[i];
        if (!vg_snap_path_only(p))
            continue;
        if (!header) {
            vg_buf_printf(o,
                          "%sPath only%s %s(O_PATH descriptors of a node: no open of the device, "
                          "no context, no memory)%s\n",
                          st->bold, st->reset, st->dim, st->reset);
            header = true;
        }
        vg_buf_printf(o, "  %7d ", (int)p->pid);
        vg_text_escape_str(o, (p->known & VG_PROC_K_USER) ? p->user : "n/a", 10);
        vg_buf_addc(o, ' ');
        vg_text_escape_str(o, (p->known & VG_PROC_K_STAT) ? p->comm : "n/a", 16);
        vg_buf_adds(o, ":");
        for (size_t k = 0; k < p->npath_minors; k++) {
            const struct vg_gpu *g = vg_gpu_list_by_minor(&snap->gpus, p->path_minors[k]);
            if (g)
                vg_buf_printf(o, "%s GPU %u", k ? "," : "", g->index);
            else
                vg_buf_printf(o, "%s %s/nvidia%u", k ? "," : "", snap->dev_dir, p->path_minors[k]);
        }
        if (!p->npath_minors)
            vg_buf_adds(o, " NVIDIA nodes that are no GPU's");
        vg_buf_addc(o, '\n');
    }
    if (header)
        vg_buf_addc(o, '\n');
}

int vg_render_status_text(const struct vg_snapshot *snap, const struct vg_render_opts *ro,
                          struct vg_buf *out)
{
    struct vg_style st;
    vg_style_init(&st, ro->color);
    const struct vg_gpu_list *l = &snap->gpus;
    vg_render_replay_text(out, snap, &st);
    if (snap->driver_ok) {
        /* The driver's strings reach the terminal escaped, like every other outside string. */
        const char *dv = l->driver_version ? l->driver_version : "n/a";
        vg_buf_adds(out, "driver ");
        vg_text_escape(out, dv, strlen(dv), 0, NULL);
        if (l->cuda_version > 0)
            vg_buf_printf(out, ", CUDA %d.%d", l->cuda_version / 1000,
                          (l->cuda_version % 1000) / 10);
        vg_buf_printf(out, ", %zu GPU%s\n\n", l->ngpus, l->ngpus == 1 ? "" : "s");
    } else {
        vg_buf_printf(out, "%sno NVIDIA driver view:%s ", st.yellow, st.reset);
        const char *e = snap->driver_error ? snap->driver_error : "unknown reason";
        vg_text_escape(out, e, strlen(e), 0, NULL);
        vg_buf_adds(out, "; showing device-node holders from /proc only\n\n");
    }
    vg_text_errors(out, l->errors, l->nerrors, &st);
    for (size_t gi = 0; gi < l->ngpus; gi++)
        vg_text_gpu(out, snap, gi, ro, &st);
    vg_text_unmatched(out, snap, ro, &st);
    vg_text_path_only(out, snap, &st);
    if (!snap->driver_ok && snap->nholdings == 0)
        vg_buf_adds(out, "no process holds an NVIDIA device node\n\n");

    const struct vg_proc_table *t = &snap->procs;
    vg_buf_printf(out, "%sscanned %zu process%s", st.dim, t->n_scanned,
                  t->n_scanned == 1 ? "" : "es");
    if (t->n_vanished)
        vg_buf_printf(out, ", %zu exited during the scan", t->n_vanished);
    if (t->n_denied) {
        vg_buf_printf(out, ", %zu not fully readable (", t->n_denied);
        vg_render_access_hint(out, t->access);
        vg_buf_addc(out, ')');
    }
    if (t->n_fd_by_kernel)
        vg_buf_printf(out, ", %zu whose open files /proc refused read by the kernel scan instead",
                      t->n_fd_by_kernel);
    vg_buf_printf(out, "%s\n", st.reset);
    if (ro->verbose)
        vg_render_unread_names(out, snap, &st);
    return out->err;
}
