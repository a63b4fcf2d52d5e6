/*
 * The words of run's after-run check (see run.h).
 */
#include "render/run.h"

#include "render/settle.h"
#include "util/parse.h"
#include "util/text.h"

/* "device node held open by PID 42 (python notebook.py)" */
static void vg_run_holder(struct vg_buf *o, const struct vg_afterrun_note *n)
{
    const struct vg_settle_holder *h = n->h;
    char mem[32];
    if (h->mem_known && vg_fmt_size(h->mem_bytes, mem, sizeof(mem)) == 0)
        vg_buf_printf(o, "%s held", mem);
    else
        vg_buf_adds(o, h->seen & VG_SEEN_FD    ? "device node held open"
                       : h->seen & VG_SEEN_MAP ? "device node mapped"
                                               : "memory held (amount unknown)");
    vg_buf_printf(o, " by PID %ld", (long)h->pid);
    const char *what = n->proc && n->proc->cmdline && n->proc->cmdline[0] ? n->proc->cmdline
                       : n->proc && n->proc->comm                         ? n->proc->comm
                                                                          : NULL;
    if (what) {
        vg_buf_adds(o, " (");
        vg_text_escape_str(o, what, 0);
        vg_buf_addc(o, ')');
    }
}

/* Whether GPU g's verdict says something of the job is still there (or the GPU is gone). */
static bool vg_run_warns(const struct vg_settle_gpu *g)
{
    return g->state == VG_SETTLE_WEDGED || g->state == VG_SETTLE_NOT_RELEASED;
}

void vg_render_run_after(struct vg_buf *o, const struct vg_afterrun *a, const char *const *names,
                         bool verbose, bool quiet)
{
    size_t k = 0;
    for (size_t i = 0; i < a->s.ngpus; i++) {
        const struct vg_settle_gpu *g = &a->s.gpus[i];
        const char *name = names[g->ref];
        if (vg_run_warns(g)) {
            vg_buf_printf(o, "warning: %s", name);
            vg_render_settle_gpu(o, g);
            vg_buf_addc(o, '\n');
        }
        for (; k < a->n && a->v[k].gpu == g->ref; k++) {
            const struct vg_afterrun_note *n = &a->v[k];
            if (n->before) {
                if (verbose)
                    vg_buf_printf(o, "%s: PID %ld held it before the job too\n", name,
                                  (long)n->h->pid);
                continue;
            }
            if (quiet)
                continue;
            vg_buf_printf(o, "note: %s also has ", name);
            vg_run_holder(o, n);
            vg_buf_printf(o, "%s, not started by this job\n",
                          n->proc ? "" : " (not visible in this /proc)");
        }
        char grew[32];
        if (a->grew[g->ref] && vg_fmt_size(a->grew[g->ref], grew, sizeof(grew)) == 0)
            vg_buf_printf(o,
                          "warning: %s has %s more memory in use than before the job, and no "
                          "process holds it\n",
                          name, grew);
    }
}
