/*
 * Fuzz target: snapshot records (vg_snap_record_parse, model/record.h), the file a person hands
 * `--replay`. Invariants: a record either fails with -EINVAL (or -ENOMEM) and no snapshot, its
 * message one line naming a line of the input, or it gives a snapshot whose record, read
 * again, gives the same snapshot: writing both gives the same bytes.
 */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "model/record.h"

static char *record_of(const struct vg_snapshot *s, size_t *n)
{
    struct vg_buf b;
    vg_buf_init(&b, 0);
    FUZZ_CHECK(vg_snap_record_write(s, &b, NULL) == 0);
    *n = b.len;
    char *t = vg_buf_steal(&b);
    FUZZ_CHECK(t != NULL);
    return t;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = fuzz_copy(data, size);
    struct vg_snapshot *s = NULL;
    struct vg_err err = VG_ERR_INIT;
    int rc = vg_snap_record_parse(buf, size, "f", &s, &err);
    if (rc) {
        FUZZ_CHECK(rc == -EINVAL || rc == -ENOMEM);
        FUZZ_CHECK(s == NULL);
        FUZZ_CHECK(strncmp(vg_err_msg(&err), "f:", 2) == 0 || rc == -ENOMEM);
        FUZZ_CHECK(strchr(vg_err_msg(&err), '\n') == NULL);
    } else {
        size_t n1, n2;
        char *t1 = record_of(s, &n1);
        struct vg_snapshot *r = NULL;
        FUZZ_CHECK(vg_snap_record_parse(t1, n1, "again", &r, NULL) == 0);
        char *t2 = record_of(r, &n2);
        FUZZ_CHECK(n1 == n2 && memcmp(t1, t2, n1) == 0);
        free(t1);
        free(t2);
        vg_snap_free(r);
    }
    vg_snap_free(s);
    vg_err_release(&err);
    free(buf);
    return 0;
}
