/*
 * The lifecycle lab replayed (tests/lifecycles/README.md): for every case and state of
 * tests/lifecycles/cases.tsv, the snapshot doctor diagnosed when the lab ran it with the real
 * tools (tests/lifecycles/snapshots/CASE.STATE.vgsnap, recorded by `tests/lifecycles/run
 * --record`) is read back, the rules and clean's default plan run on it, and each process of
 * the case (main, worker, launcher, named in the record's "# lab role ROLE PID" lines) is
 * checked against its row exactly as lab.bash's check does: orphan-holder's confidence
 * (leftover-high, leftover-medium, not) and clean's action (signalled, left alone, not
 * listed). A rule change that flips any lab verdict fails here in milliseconds, without the
 * lab's minutes, its root, Slurm or tmux. One test per case and state.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "act/plan.h"
#include "model/record.h"
#include "rules/rules.h"
#include "util/buf.h"
#include "util/file.h"
#include "util/parse.h"

#define LAB_DIR VG_TEST_SRC_DIR "/tests/lifecycles"

/* One row of the table. */
struct row {
    char *role, *verdict, *clean;
};

/* One case in one state: its rows. */
struct group {
    char *name; /* "lab CASE STATE", the test's name */
    char *casename, *state;
    struct row *rows;
    size_t nrows;
};

static struct group *groups;
static size_t ngroups;

static char *dupn(const char *s, size_t n)
{
    char *p = strndup(s, n);
    if (!p)
        abort();
    return p;
}

/* The n tab-separated fields of a line into f (borrowed from the line); how many there were. */
static size_t split(const char *s, size_t n, const char **f, size_t *len, size_t max)
{
    size_t k = 0;
    const char *end = s + n;
    while (k < max) {
        const char *tab = memchr(s, '\t', (size_t)(end - s));
        f[k] = s;
        len[k] = tab ? (size_t)(tab - s) : (size_t)(end - s);
        k++;
        if (!tab)
            break;
        s = tab + 1;
    }
    return k;
}

static struct group *group_for(const char *c, size_t cn, const char *s, size_t sn)
{
    for (size_t i = 0; i < ngroups; i++)
        if (vg_parse_is(c, cn, groups[i].casename) && vg_parse_is(s, sn, groups[i].state))
            return &groups[i];
    groups = realloc(groups, (ngroups + 1) * sizeof(*groups));
    if (!groups)
        abort();
    struct group *g = &groups[ngroups++];
    memset(g, 0, sizeof(*g));
    g->casename = dupn(c, cn);
    g->state = dupn(s, sn);
    struct vg_buf b;
    vg_buf_init(&b, 0);
    vg_buf_printf(&b, "lab %s %s", g->casename, g->state);
    g->name = vg_buf_steal(&b);
    return g;
}

/* cases.tsv into groups; false when it cannot be read. */
static bool load_table(void)
{
    struct vg_buf b;
    vg_buf_init(&b, 0);
    if (vg_file_read_regular(AT_FDCWD, LAB_DIR "/cases.tsv", &b) != 0)
        return false;
    const char *at = b.data, *end = b.data + b.len, *line;
    size_t n;
    while (vg_parse_line(&at, end, &line, &n)) {
        if (n == 0 || line[0] == '#')
            continue;
        const char *f[7];
        size_t len[7];
        if (split(line, n, f, len, 7) < 6) {
            fprintf(stderr, "cases.tsv: a row of fewer than 6 fields: %.*s\n", (int)n, line);
            vg_buf_release(&b);
            return false;
        }
        struct group *g = group_for(f[0], len[0], f[1], len[1]);
        g->rows = realloc(g->rows, (g->nrows + 1) * sizeof(*g->rows));
        if (!g->rows)
            abort();
        g->rows[g->nrows++] =
            (struct row){dupn(f[2], len[2]), dupn(f[4], len[4]), dupn(f[5], len[5])};
    }
    vg_buf_release(&b);
    return ngroups > 0;
}

/* What lab.bash's lab_verdict says of pid: the confidence of the first orphan-holder finding
 * that names it. */
static const char *verdict_of(const struct vg_findings *fs, pid_t pid)
{
    for (size_t i = 0; i < fs->n; i++) {
        const struct vg_finding *f = &fs->v[i];
        if (strcmp(f->rule, "orphan-holder") != 0)
            continue;
        for (size_t k = 0; k < f->npids; k++)
            if (f->pids[k] == pid)
                return f->confidence == VG_CONF_HIGH     ? "leftover-high"
                       : f->confidence == VG_CONF_MEDIUM ? "leftover-medium"
                                                         : "leftover-low";
    }
    return "not";
}

/* What lab_action says: signal, leave or refuse (listed, not signalled), or not listed. */
static const char *action_of(const struct vg_plan *plan, pid_t pid)
{
    for (size_t i = 0; i < plan->n; i++)
        if (plan->v[i].id.pid == pid)
            return plan->v[i].signal ? "signalled" : "left alone";
    return "not listed";
}

/* The record's "# lab role ROLE PID" lines, for role: the PIDs into pids (at most max). */
static size_t pids_of(const struct vg_buf *text, const char *role, pid_t *pids, size_t max)
{
    const char *at = text->data, *end = text->data + text->len, *line;
    size_t n, k = 0;
    struct vg_buf want;
    vg_buf_init(&want, 0);
    vg_buf_printf(&want, "# lab role %s ", role);
    while (vg_parse_line(&at, end, &line, &n) && k < max) {
        int64_t v;
        if (vg_parse_starts(line, n, vg_buf_str(&want)) &&
            vg_parse_i64n(line + want.len, n - want.len, 1, VG_PID_MAX, &v) == 0)
            pids[k++] = (pid_t)v;
    }
    vg_buf_release(&want);
    return k;
}

static void test_lab_case(void **state)
{
    const struct group *g = *state;
    struct vg_buf path;
    vg_buf_init(&path, 0);
    vg_buf_printf(&path, "%s/snapshots/%s.%s.vgsnap", LAB_DIR, g->casename, g->state);
    struct vg_buf text;
    vg_buf_init(&text, VG_SNAP_RECORD_MAX);
    if (vg_file_read_regular(AT_FDCWD, vg_buf_str(&path), &text) != 0)
        fail_msg("no recorded snapshot for %s %s (%s): record it, as root after make, with "
                 "`tests/lifecycles/run --record %s %s` and commit the file",
                 g->casename, g->state, vg_buf_str(&path), g->casename, g->state);

    struct vg_snapshot *snap = NULL;
    struct vg_err err = VG_ERR_INIT;
    if (vg_snap_record_parse(text.data, text.len, vg_buf_str(&path), &snap, &err) != 0)
        fail_msg("%s", vg_err_msg(&err));
    struct vg_rule_opts ro;
    vg_rule_opts_init(&ro);
    struct vg_findings fs;
    vg_findings_init(&fs);
    assert_int_equal(vg_rules_run(snap, &ro, &fs, &err), 0);
    /* clean's default plan, as root (the lab runs as root), from nobody in the record */
    struct vg_plan_opts po = {
        .pidns_trusted =
            snap->procs.self_nspid_depth <= 1 && snap->procs.pidns == VG_PROC_PIDNS_INITIAL,
        .who = {.self = 0, .ruid = 0},
    };
    struct vg_plan plan;
    vg_plan_init(&plan);
    assert_int_equal(vg_plan_build(snap, &fs, &po, &plan, &err), 0);

    int bad = 0;
    for (size_t r = 0; r < g->nrows; r++) {
        const struct row *row = &g->rows[r];
        pid_t pids[16];
        size_t n = pids_of(&text, row->role, pids, 16);
        if (n == 0) {
            print_error("%s: the record names no %s (# lab role %s PID)\n", g->name, row->role,
                        row->role);
            bad = 1;
        }
        for (size_t k = 0; k < n; k++) {
            const char *v = verdict_of(&fs, pids[k]), *a = action_of(&plan, pids[k]);
            if (strcmp(v, row->verdict) == 0 && strcmp(a, row->clean) == 0)
                continue;
            print_error("%s %s %d: want %s, %s; got %s, %s (replay %s)\n", g->name, row->role,
                        (int)pids[k], row->verdict, row->clean, v, a, vg_buf_str(&path));
            bad = 1;
        }
    }
    vg_plan_release(&plan);
    vg_findings_release(&fs);
    vg_snap_free(snap);
    vg_buf_release(&text);
    vg_buf_release(&path);
    if (bad)
        fail_msg("%s: the replayed verdicts differ from tests/lifecycles/cases.tsv", g->name);
}

int main(void)
{
    if (!load_table()) {
        fprintf(stderr, "test_lab_replay: cannot read %s/cases.tsv\n", LAB_DIR);
        return 1;
    }
    struct CMUnitTest *tests = calloc(ngroups, sizeof(*tests));
    if (!tests)
        return 1;
    for (size_t i = 0; i < ngroups; i++)
        tests[i] = (struct CMUnitTest){
            .name = groups[i].name, .test_func = test_lab_case, .initial_state = &groups[i]};
    /* the table's order: cmocka names each test, so a failure names its case and state */
    return _cmocka_run_group_tests("lab replay", tests, ngroups, NULL, NULL);
}
