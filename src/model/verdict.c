/*
 * Verdicts as data (verdict.h): initialising and releasing the collections. Filling them is
 * rules/finding.c's and rules/expect.c's.
 */
#include <stdlib.h>
#include <string.h>

#include "model/verdict.h"

void vg_findings_init(struct vg_findings *f)
{
    memset(f, 0, sizeof(*f));
}

static void vg_finding_release(struct vg_finding *f)
{
    free(f->title);
    free(f->gpus);
    free(f->pids);
    for (size_t i = 0; i < f->nevidence; i++)
        free(f->evidence[i]);
    free(f->evidence);
    for (size_t i = 0; i < f->nfix; i++)
        free(f->fix[i]);
    free(f->fix);
    for (size_t i = 0; i < f->nverdicts; i++) {
        for (size_t k = 0; k < f->verdicts[i].nfacts; k++)
            free(f->verdicts[i].facts[k].text);
        free(f->verdicts[i].facts);
    }
    free(f->verdicts);
    free(f->user);
    free(f->command);
    free(f->expect);
}

void vg_findings_release(struct vg_findings *f)
{
    for (size_t i = 0; i < f->n; i++)
        vg_finding_release(&f->v[i]);
    free(f->v);
    free(f->unchecked);
    memset(f, 0, sizeof(*f));
}
