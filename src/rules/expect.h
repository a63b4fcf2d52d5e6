/*
 * Expectations: what each GPU may carry (`--expect GPU=WHO[,WHO...]`, the config file's
 * `expect` lines), and the alerts a snapshot raises against them: findings of kind
 * VG_FINDING_ALERT (model/verdict.h), in the same list as the rules' diagnoses. Shared by
 * `watch` and `check`.
 *
 * GPU is an NVML index or a UUID (or a unique UUID prefix). WHO is `none` (the GPU should be
 * empty), a PID (digits), `uid:N`, or a user name. Against a snapshot:
 *  - a holder neither named nor owned by a named user, whose memory is above the threshold
 *    (or unknown while the GPU's used memory is above it), is an `unexpected-holder` alert;
 *    processes seen only through the device node hold no memory of their own and raise none;
 *  - on a GPU expected empty with no such holder, used memory above the threshold (the
 *    driver's reservation apart, when the driver tells it apart) is a `gpu-not-empty` alert.
 * Alerts on GPUs expected empty are critical, the others warnings.
 *
 * Ownership: a struct vg_expect_set owns its entries (vg_expect_set_release); the alerts are
 * the findings list's (vg_findings_release).
 */
#ifndef VG_RULES_EXPECT_H
#define VG_RULES_EXPECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "model/snapshot.h"
#include "model/verdict.h"
#include "rules/rules.h"
#include "util/err.h"

/* The alerts' rule ids (static strings, part of the JSON interface: check's "alert", the
 * events' "alert", $VRAMGUARD_ALERT). */
#define VG_EXPECT_UNEXPECTED_HOLDER "unexpected-holder"
#define VG_EXPECT_GPU_NOT_EMPTY "gpu-not-empty"

enum vg_who_kind { VG_WHO_NONE, VG_WHO_PID, VG_WHO_UID, VG_WHO_USER };

struct vg_who {
    enum vg_who_kind kind;
    pid_t pid;
    uid_t uid;
    char *user;
};

struct vg_expect {
    char *gpu; /* as given: index or UUID (prefix) */
    struct vg_who *who;
    size_t nwho;
    char *text; /* "1=none", as given: for messages */
};

struct vg_expect_set {
    struct vg_expect *v;
    size_t n, cap;
};

void vg_expect_set_init(struct vg_expect_set *set);
void vg_expect_set_release(struct vg_expect_set *set);
/* Parse "GPU=WHO[,WHO...]" and append it. -EINVAL with a message saying what is wrong;
 * -ENOMEM. `none` cannot be mixed with others, and one GPU text may appear only once. */
int vg_expect_parse(struct vg_expect_set *set, const char *text, struct vg_err *err);
/* Copy src's entries into dst (emptied first). 0 or -ENOMEM. */
int vg_expect_set_copy(struct vg_expect_set *dst, const struct vg_expect_set *src);

/* Evaluate the expectations against snap, appending an alert finding to out for each one the
 * host breaks. Expectations naming no GPU of snap are listed in out->unchecked and skipped;
 * without the driver's view nothing can be checked (unchecked says so). Returns 0 or -ENOMEM. */
int vg_expect_check(const struct vg_expect_set *set, const struct vg_snapshot *snap,
                    uint64_t threshold, struct vg_findings *out, struct vg_err *err);

#endif
