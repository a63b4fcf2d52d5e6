/*
 * The plan of `vramguard clean`: which holders it would stop, why (the finding that names
 * them), the memory that would come back, and which it refuses to touch and why. Pure: built
 * from a snapshot, its findings and the options, so it can be unit-tested on hand-made hosts;
 * acting on it is act/kill.h's job.
 *
 * Who is in the plan:
 * - without --gpu/--pid/--user/--older-than, or with --orphans: the leftovers the leftover
 *   model (rules.h) is sure of, high confidence (to signal), plus those zombie-holder and
 *   d-state-holder name (listed, never signalled: no signal frees their memory), and, listed
 *   to say why they are left alone, the holders that look orphaned but are a leftover of only
 *   medium confidence (VG_KILL_UNSURE) or no leftover at all (VG_KILL_NOT_LEFTOVER); each also
 *   passing the filters given;
 * - with filters and without --orphans: every holder passing all of them. A clean without
 *   filters is never "everything".
 * Each is then checked against act/kill.h's rules (PID 1, ourselves and our ancestors,
 * kernel threads, infrastructure, another user's process unless root, zombies, D state) and
 * marked signal or refuse.
 *
 * Ownership: struct vg_plan owns its entries and everything they point to (vg_plan_release());
 * reason and protected_name are static strings.
 */
#ifndef VG_ACT_PLAN_H
#define VG_ACT_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "act/infra.h"
#include "act/kill.h"
#include "model/snapshot.h"
#include "rules/rules.h"
#include "util/err.h"

struct vg_plan_opts {
    bool by_gpu;
    size_t gpu; /* index into the snapshot's GPU list */
    bool by_pid;
    pid_t pid;
    bool by_user;
    uid_t uid;
    bool by_age;
    uint64_t older_than_ms;
    uint64_t now_ticks;    /* time since boot in clock ticks, for --older-than */
    unsigned long clk_tck; /* sysconf(_SC_CLK_TCK) */
    bool orphans;          /* --orphans: only leftovers of finished jobs */
    /* This procfs numbers processes as the driver does (the host's PID namespace), so a
     * holder only the driver lists may be acted on by PID; otherwise those are refused
     * (VG_KILL_NAMESPACE). Holders seen through their own device fds are always themselves. */
    bool pidns_trusted;
    struct vg_kill_ctx who; /* who is asking (self, ancestors, real uid) */
};

struct vg_plan_entry {
    struct vg_kill_identity id; /* pid, start time, uid, device minors, driver-listed */
    bool signal;                /* the action: signal, or refuse (refusal says why) */
    bool leave;                 /* refused because it is not a sure leftover (VG_KILL_UNSURE,
                                 * VG_KILL_NOT_LEFTOVER): listed to say why, not a refusal of
                                 * anything asked for */
    enum vg_kill_refusal refusal;
    bool hidden; /* VG_KILL_NOT_VISIBLE under hidepid: most likely another user's, not gone */
    const char *protected_name;  /* VG_KILL_PROTECTED: the program it is (or is named for) */
    struct vg_infra infra;       /* what it claims to be and the facts (act/infra.h) */
    pid_t act_on;                /* VG_KILL_ZOMBIE: its parent, the process to act on */
    const char *reason;          /* the rule of the finding that named it ("orphan-holder"), or
                                  * NULL: it matched the filters without any finding */
    const char *verdict;         /* the leftover model's word on it when it is not a sure
                                  * leftover (why not, or why only medium); NULL otherwise */
    char *finding;               /* that finding's title; NULL with reason */
    char state;                  /* '?' when unknown */
    char *user, *comm, *cmdline; /* copies for output; NULL when unknown */
    size_t *gpus;                /* snapshot GPU indices it holds, ascending */
    size_t ngpus, gpus_cap;
    unsigned seen;      /* VG_SEEN_* over its holdings */
    bool mem_known;     /* the driver gave a figure for at least one holding */
    uint64_t mem_bytes; /* sum of the known figures */
    bool age_known;
    uint64_t age_ms;
};

struct vg_plan {
    struct vg_plan_entry *v; /* by pid */
    size_t n;
    size_t nsignal, nrefused, nleft; /* nrefused excludes the nleft left alone */
    size_t *scope;                   /* GPUs the plan is about (snapshot indices, ascending) */
    size_t nscope, scope_cap;
};

void vg_plan_init(struct vg_plan *p);
void vg_plan_release(struct vg_plan *p);

/* Build the plan. Returns 0 or -ENOMEM with err set (out is then released and empty). */
int vg_plan_build(const struct vg_snapshot *snap, const struct vg_findings *fs,
                  const struct vg_plan_opts *o, struct vg_plan *out, struct vg_err *err);

/* Memory on GPU gpu that no listed process accounts for: more than min (plus the driver's
 * reservation when the v1 memory call counts it as used). */
bool vg_plan_unexplained(const struct vg_snapshot *snap, size_t gpu, uint64_t min);
/* Such memory that only a reset can free: held while no process holds the GPU at all, and
 * nothing could hide one (every descriptor read, the GPU's minor number known). */
bool vg_plan_reset_needed(const struct vg_snapshot *snap, size_t gpu, uint64_t min);

/* Is the scope GPU index list of p holding gpu? */
bool vg_plan_in_scope(const struct vg_plan *p, size_t gpu);

#endif
