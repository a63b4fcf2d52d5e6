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
}

void vg_findings_release(struct vg_findings *f)
{
    for (size_t i = 0; i < f->n; i++)
        vg_finding_release(&f->v[i]);
    free(f->v);
    memset(f, 0, sizeof(*f));
}

void vg_alerts_init(struct vg_alerts *a)
{
    memset(a, 0, sizeof(*a));
}

void vg_alerts_release(struct vg_alerts *a)
{
    for (size_t i = 0; i < a->n; i++) {
        free(a->v[i].user);
        free(a->v[i].command);
        free(a->v[i].expect);
        free(a->v[i].message);
    }
    free(a->v);
    free(a->problem);
    memset(a, 0, sizeof(*a));
}
