/*
 * Findings: the containers rules fill (see rules.h). Allocation failures are recorded once in
 * the collection instead of being returned from every call, so a rule reads as the diagnosis it
 * makes rather than as error handling.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rules/rules.h"
#include "util/array.h"

static void vg_findings_oom(struct vg_findings *out)
{
    if (!out->err)
        out->err = -ENOMEM;
}

struct vg_finding *vg_finding_add(struct vg_findings *out, const char *rule, enum vg_severity sev)
{
    struct vg_finding *f = VG_ARRAY_PUSH(out->v, out->n, out->cap);
    if (!f) {
        vg_findings_oom(out);
        return NULL;
    }
    f->rule = rule;
    f->severity = sev;
    f->confidence = VG_CONF_HIGH;
    f->mig = -1;
    return f;
}

static char *vg_vfmt(const char *fmt, va_list ap)
{
    char *s = NULL;
    return vasprintf(&s, fmt, ap) < 0 ? NULL : s;
}

static void vg_push_str(struct vg_findings *out, char ***arr, size_t *n, size_t *cap, char *s)
{
    if (!s || vg_array_grow(arr, cap, *n + 1, sizeof(**arr))) {
        free(s);
        vg_findings_oom(out);
        return;
    }
    (*arr)[(*n)++] = s;
}

/* Which text of a finding a formatted line goes to. */
enum vg_finding_text { VG_TEXT_TITLE, VG_TEXT_EVIDENCE, VG_TEXT_FIX };

/* Format a line and store it: the title replaces the previous one, evidence and fix lines are
 * appended. Nothing happens for a NULL finding (a failed vg_finding_add). */
static void vg_finding_vtext(struct vg_findings *out, struct vg_finding *f,
                             enum vg_finding_text which, const char *fmt, va_list ap)
{
    if (!f)
        return;
    char *s = vg_vfmt(fmt, ap);
    switch (which) {
    case VG_TEXT_TITLE:
        if (!s) {
            vg_findings_oom(out);
            return;
        }
        free(f->title);
        f->title = s;
        return;
    case VG_TEXT_EVIDENCE:
        vg_push_str(out, &f->evidence, &f->nevidence, &f->evidence_cap, s);
        return;
    case VG_TEXT_FIX:
        vg_push_str(out, &f->fix, &f->nfix, &f->fix_cap, s);
        return;
    }
    free(s);
}

void vg_finding_title(struct vg_findings *out, struct vg_finding *f, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vg_finding_vtext(out, f, VG_TEXT_TITLE, fmt, ap);
    va_end(ap);
}

void vg_finding_evidence(struct vg_findings *out, struct vg_finding *f, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vg_finding_vtext(out, f, VG_TEXT_EVIDENCE, fmt, ap);
    va_end(ap);
}

void vg_finding_fix(struct vg_findings *out, struct vg_finding *f, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vg_finding_vtext(out, f, VG_TEXT_FIX, fmt, ap);
    va_end(ap);
}

bool vg_finding_names_pid(const struct vg_finding *f, pid_t pid)
{
    for (size_t i = 0; i < f->npids; i++)
        if (f->pids[i] == pid)
            return true;
    return false;
}

bool vg_finding_names_gpu(const struct vg_finding *f, size_t gpu)
{
    for (size_t i = 0; i < f->ngpus; i++)
        if (f->gpus[i] == gpu)
            return true;
    return false;
}

/* A finding names each GPU and PID once. */
void vg_finding_gpu(struct vg_findings *out, struct vg_finding *f, size_t gpu)
{
    if (!f || vg_finding_names_gpu(f, gpu))
        return;
    size_t *slot = VG_ARRAY_PUSH(f->gpus, f->ngpus, f->gpus_cap);
    if (slot)
        *slot = gpu;
    else
        vg_findings_oom(out);
}

void vg_finding_pid(struct vg_findings *out, struct vg_finding *f, pid_t pid)
{
    if (!f || vg_finding_names_pid(f, pid))
        return;
    pid_t *slot = VG_ARRAY_PUSH(f->pids, f->npids, f->pids_cap);
    if (slot)
        *slot = pid;
    else
        vg_findings_oom(out);
}

struct vg_verdict *vg_finding_verdict(struct vg_findings *out, struct vg_finding *f, pid_t pid,
                                      const char *verdict, enum vg_confidence conf, int score)
{
    if (!f)
        return NULL;
    struct vg_verdict *v = VG_ARRAY_PUSH(f->verdicts, f->nverdicts, f->verdicts_cap);
    if (!v) {
        vg_findings_oom(out);
        return NULL;
    }
    v->pid = pid;
    v->verdict = verdict;
    v->confidence = conf;
    v->score = score;
    return v;
}

void vg_finding_verdict_fact(struct vg_findings *out, struct vg_verdict *v, const char *fact,
                             int weight, const char *text)
{
    if (!v)
        return;
    char *t = strdup(text);
    struct vg_verdict_fact *nf = t ? VG_ARRAY_PUSH(v->facts, v->nfacts, v->facts_cap) : NULL;
    if (!nf) {
        free(t);
        vg_findings_oom(out);
        return;
    }
    *nf = (struct vg_verdict_fact){.fact = fact, .weight = weight, .text = t};
}

int vg_findings_max_severity(const struct vg_findings *f)
{
    int max = -1;
    for (size_t i = 0; i < f->n; i++)
        if ((int)f->v[i].severity > max)
            max = (int)f->v[i].severity;
    return max;
}

const char *vg_severity_str(enum vg_severity s)
{
    switch (s) {
    case VG_SEV_INFO:
        return "info";
    case VG_SEV_WARNING:
        return "warning";
    case VG_SEV_CRITICAL:
        return "critical";
    }
    return "?";
}

const char *vg_confidence_str(enum vg_confidence c)
{
    switch (c) {
    case VG_CONF_LOW:
        return "low";
    case VG_CONF_MEDIUM:
        return "medium";
    case VG_CONF_HIGH:
        return "high";
    }
    return "?";
}

bool vg_findings_has_pid(const struct vg_findings *f, const char *rule, pid_t pid, size_t gpu)
{
    for (size_t i = 0; i < f->n; i++) {
        const struct vg_finding *x = &f->v[i];
        if (strcmp(x->rule, rule) == 0 && vg_finding_names_pid(x, pid) &&
            (gpu == VG_SNAP_NO_GPU || vg_finding_names_gpu(x, gpu)))
            return true;
    }
    return false;
}
