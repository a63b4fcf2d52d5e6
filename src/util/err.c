/*
 * Heap-allocated one-line error messages (see err.h). Formatting failures degrade to a static
 * text rather than losing the error itself.
 */
#include "util/err.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char vg_err_nomem[] = "out of memory while formatting an error message";

static void vg_err_store(struct vg_err *err, char *msg)
{
    if (err->msg != vg_err_nomem)
        free(err->msg);
    err->msg = msg ? msg : (char *)vg_err_nomem;
}

int vg_err_set(struct vg_err *err, int code, const char *fmt, ...)
{
    if (!err)
        return code;
    char *msg = NULL;
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(&msg, fmt, ap) < 0)
        msg = NULL;
    va_end(ap);
    err->code = code;
    vg_err_store(err, msg);
    return code;
}

int vg_err_prefix(struct vg_err *err, const char *fmt, ...)
{
    if (!err)
        return 0;
    char *prefix = NULL, *msg = NULL;
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(&prefix, fmt, ap) < 0)
        prefix = NULL;
    va_end(ap);
    if (prefix && asprintf(&msg, "%s: %s", prefix, vg_err_msg(err)) < 0)
        msg = NULL;
    free(prefix);
    vg_err_store(err, msg);
    return err->code;
}

const char *vg_err_msg(const struct vg_err *err)
{
    if (!err)
        return "unknown error";
    if (err->msg)
        return err->msg;
    return err->code ? strerror(-err->code) : "no error";
}

void vg_err_clear(struct vg_err *err)
{
    if (!err)
        return;
    vg_err_store(err, NULL);
    err->msg = NULL;
    err->code = 0;
}

void vg_err_release(struct vg_err *err)
{
    vg_err_clear(err);
}
