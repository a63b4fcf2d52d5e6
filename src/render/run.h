/*
 * The words of `run`'s after-run check (act/afterrun.h): per GPU of the job, the verdict in
 * render/settle.h's sentences when something of the job is still there (a process that
 * outlived SIGKILL, memory the driver has not released, the GPU lost or hung), the other
 * holders apart ("note: ... not started by this job"), and memory that grew during the job
 * with no holder left. Nothing here reads the system; nothing is owned.
 */
#ifndef VG_RENDER_RUN_H
#define VG_RENDER_RUN_H

#include <stdbool.h>

#include "act/afterrun.h"
#include "util/buf.h"

/* One line per thing to say, each ending in '\n' and without the "vramguard: run: " the
 * command puts before it; names[i] names the request's GPU i ("GPU 0 (A, GPU-...)").
 * verbose: also the holders that held a GPU before the job; quiet: only the warnings. */
void vg_render_run_after(struct vg_buf *o, const struct vg_afterrun *a, const char *const *names,
                         bool verbose, bool quiet);

#endif
