/*
 * Fuzz target: what `handoff` reads from a scheduler before it may signal anything: a GPU list
 * (SLURM_JOB_GPUS, SLURM_STEP_GPUS, CUDA_VISIBLE_DEVICES, --gpus; vg_handoff_sels_parse) and a
 * process's cgroup path matched against the job id (vg_handoff_cgroup_names).
 * Input: a first byte choosing Slurm's form (odd) or the plain one, then "LIST\nCGROUP\nID".
 * Invariants: a parse either fails with a message and leaves nothing, or gives 1 to
 * VG_HANDOFF_SEL_MAX selectors, no two alike, each pointing into its own copy of the list at a
 * word that is a comma-free piece of it; Slurm's form gives only numbers (minors), the plain
 * one numbers (indices) or UUID words, never a number that does not fit 32 bits. The cgroup
 * match is exactly "some '/'-separated component equals job_ID".
 */
#include <stdbool.h>
#include <string.h>

#include "act/handoff.h"
#include "fuzz.h"

/* The reference: split at '/' and compare each component. */
static bool vg_fuzz_component(const char *cg, const char *id)
{
    size_t n = strlen(id);
    for (const char *s = cg; s; s = strchr(s, '/')) {
        if (*s == '/')
            s++;
        const char *end = strchr(s, '/');
        size_t len = end ? (size_t)(end - s) : strlen(s);
        if (len == n + 4 && strncmp(s, "job_", 4) == 0 && strncmp(s + 4, id, n) == 0)
            return true;
        if (!end)
            break;
    }
    return false;
}

static void vg_fuzz_sels(const char *list, bool slurm)
{
    struct vg_handoff_sels s;
    struct vg_err err = VG_ERR_INIT;
    int rc = vg_handoff_sels_parse(list, slurm, &s, &err);
    if (rc) {
        FUZZ_CHECK(s.n == 0 && !s.v && !s.copy && *vg_err_msg(&err));
        vg_err_release(&err);
        return;
    }
    size_t len = strlen(list);
    FUZZ_CHECK(s.n >= 1 && s.n <= VG_HANDOFF_SEL_MAX && s.copy);
    for (size_t i = 0; i < s.n; i++) {
        const struct vg_handoff_sel *x = &s.v[i];
        FUZZ_CHECK(x->text >= s.copy && x->text + strlen(x->text) <= s.copy + len);
        FUZZ_CHECK(*x->text && !strchr(x->text, ','));
        FUZZ_CHECK(slurm ? x->kind == VG_HANDOFF_SEL_MINOR : x->kind != VG_HANDOFF_SEL_MINOR);
        if (x->kind != VG_HANDOFF_SEL_UUID)
            FUZZ_CHECK(x->number < UINT32_MAX);
        for (size_t k = 0; k < i; k++)
            FUZZ_CHECK(s.v[k].kind != x->kind ||
                       (x->kind == VG_HANDOFF_SEL_UUID ? strcmp(s.v[k].text, x->text) != 0
                                                       : s.v[k].number != x->number));
    }
    vg_handoff_sels_release(&s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    bool slurm = data[0] & 1;
    char *s = fuzz_cstr(data + 1, size - 1);
    char *cg = strchr(s, '\n');
    char *id = NULL;
    if (cg) {
        *cg++ = '\0';
        if ((id = strchr(cg, '\n')) != NULL)
            *id++ = '\0';
    }
    vg_fuzz_sels(s, slurm);
    if (cg && id)
        FUZZ_CHECK(vg_handoff_cgroup_names(cg, id) ==
                   (!strchr(id, '/') && vg_fuzz_component(cg, id)));
    free(s);
    return 0;
}
