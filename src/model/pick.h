/*
 * Choosing GPUs for a job: which GPUs of a host are free enough right now, in which order, and
 * why the others are not; plus the strict parsers for the values `pick` and `run` take (-n,
 * --min-free, --max-util, --gpus, --exclude). Pure: reads only its arguments, so `pick` and
 * `run --gpus auto:N` share one policy and the unit tests pin it down.
 *
 * The policy: a GPU is eligible when it is a whole GPU that answered (not lost or hung, its UUID
 * known and well-formed, not in MIG mode), is not excluded, not reserved by a running
 * `vramguard run`, has at least the requested free memory (bytes, or a fraction of its total)
 * and at most the requested utilisation. Eligible GPUs come most free memory first; ties go to
 * the lower utilisation, then to the lower index. Unknown is not zero: a GPU whose memory is
 * unknown is never eligible while a memory floor applies; unknown utilisation disqualifies only
 * when the caller asked for a ceiling explicitly.
 *
 * Ownership: vg_pick_rank() writes into a caller array; vg_pick_sel arrays from
 * vg_pick_resolve_list() are the caller's to free().
 */
#ifndef VG_MODEL_PICK_H
#define VG_MODEL_PICK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpu/gpu.h"
#include "util/buf.h"
#include "util/err.h"

/* -n and auto:N accept 1..VG_PICK_MAX_GPUS (NVML hosts have at most a few dozen GPUs). */
#define VG_PICK_MAX_GPUS 64u
/* Defaults when --min-free / --max-util are not given: half the memory free, at most 50% busy. */
#define VG_PICK_DEFAULT_MIN_FREE 0.5
#define VG_PICK_DEFAULT_MAX_UTIL 50u

struct vg_pick_criteria {
    bool min_free_set; /* false: no memory floor at all */
    bool min_free_is_fraction;
    uint64_t min_free_bytes;
    double min_free_fraction; /* in [0, 1] */
    unsigned max_util;        /* percent, 0..100; 100 means no ceiling */
    bool max_util_explicit;   /* given on the command line: unknown utilisation disqualifies */
    const bool *excluded;     /* per GPU of the list, or NULL */
    const bool *reserved;     /* per GPU of the list, or NULL */
};

/* Why a GPU is not eligible, in the order the checks run. */
enum vg_pick_reason {
    VG_PICK_OK,
    VG_PICK_LOST,         /* the driver lost it, or did not answer for it */
    VG_PICK_NO_UUID,      /* UUID unknown: it cannot be named in CUDA_VISIBLE_DEVICES */
    VG_PICK_BAD_UUID,     /* the driver's UUID is not well-formed (vg_visible_uuid_ok): naming
                           * it there would be several entries, or none */
    VG_PICK_MIG,          /* in MIG mode: name a MIG device explicitly */
    VG_PICK_EXCLUDED,     /* --exclude */
    VG_PICK_RESERVED,     /* locked by a running `vramguard run` */
    VG_PICK_MEM_UNKNOWN,  /* a memory floor applies and the driver did not say */
    VG_PICK_LOW_MEM,      /* less free memory than asked */
    VG_PICK_UTIL_UNKNOWN, /* --max-util given and the driver did not say */
    VG_PICK_BUSY,         /* utilisation above the ceiling */
};

struct vg_pick_cand {
    size_t gpu; /* index into list->gpus */
    enum vg_pick_reason reason;
    uint64_t need_bytes; /* the floor that applied to this GPU (LOW_MEM) */
};

/* The free-memory floor for one GPU under c: bytes, or the fraction of its total rounded up.
 * 0 when no floor applies. *known is false when a fraction applies and the total is unknown. */
uint64_t vg_pick_floor(const struct vg_pick_criteria *c, const struct vg_gpu *g, bool *known);

/* Judge one GPU (list->gpus[i]) against c. */
enum vg_pick_reason vg_pick_judge(const struct vg_gpu_list *list, size_t i,
                                  const struct vg_pick_criteria *c, uint64_t *need_bytes);

/* Rank every GPU of list into out (list->ngpus entries): eligible ones first in pick order,
 * then the others in index order with their reason. Returns how many are eligible. */
size_t vg_pick_rank(const struct vg_gpu_list *list, const struct vg_pick_criteria *c,
                    struct vg_pick_cand *out);

/* One line on why a candidate is (not) eligible, appended to out: "reserved by another
 * vramguard run", "3.2 GiB free, needs 40 GiB", "utilisation 97% above 50%". */
void vg_pick_describe(const struct vg_gpu_list *list, const struct vg_pick_cand *c,
                      const struct vg_pick_criteria *crit, struct vg_buf *out);
const char *vg_pick_reason_str(enum vg_pick_reason r);

/* Value parsers: 0 or -EINVAL/-ERANGE with a one-line message in err naming the option. */
/* -n N, auto:N: 1..VG_PICK_MAX_GPUS. */
int vg_pick_parse_count(const char *opt, const char *s, unsigned *out, struct vg_err *err);
/* --max-util: 0..100, an optional trailing '%'. */
int vg_pick_parse_util(const char *s, unsigned *out, struct vg_err *err);
/* --min-free: a size ("20GiB", "512MiB", "1.5G") or a fraction of the total in [0, 1] written
 * with a decimal point ("0.5"). A plain number above 1 with a point ("1.5") is refused as
 * ambiguous. Fills the min_free fields of c and sets min_free_set. */
int vg_pick_parse_min_free(const char *s, struct vg_pick_criteria *c, struct vg_err *err);

/* --gpus: "auto" (one GPU), "auto:N", or a list of GPUs (see vg_pick_resolve_list). */
struct vg_pick_spec {
    bool is_auto;
    unsigned count;   /* auto: how many */
    const char *list; /* otherwise: the list, borrowed from the argument */
};
int vg_pick_parse_spec(const char *s, struct vg_pick_spec *out, struct vg_err *err);

/* One GPU or MIG device named in a list. */
struct vg_pick_sel {
    size_t gpu; /* index into list->gpus */
    int mig;    /* MIG device index under it, or -1 for the whole GPU */
};

/* Resolve a comma-separated list of NVML indices (PCI bus order, as nvidia-smi numbers them),
 * GPU or MIG UUIDs, or unique UUID prefixes, as CUDA would with CUDA_DEVICE_ORDER=PCI_BUS_ID.
 * Every entry must be valid: a bad index, an unknown or ambiguous UUID, an empty entry or a
 * duplicate is an error naming the entry. A GPU in MIG mode named by index or GPU UUID stands
 * for the whole GPU (mig -1), as CUDA_VISIBLE_DEVICES would pass it on. */
int vg_pick_resolve_list(const char *opt, const char *s, const struct vg_gpu_list *list,
                         struct vg_pick_sel **out, size_t *n, struct vg_err *err);

#endif
