/*
 * Error reporting for everything below main.c and cmd/.
 *
 * A function that can fail returns 0 or a negative errno-style code and, on failure, fills a
 * caller-supplied struct vg_err with a one-line message (no trailing newline, no program name).
 * The message is heap-allocated so it is never truncated; the caller owns the struct and calls
 * vg_err_release() when done with it. A struct vg_err initialised with VG_ERR_INIT holds no
 * message. Passing a NULL err is allowed: the code is still returned, the message is dropped.
 */
#ifndef VG_UTIL_ERR_H
#define VG_UTIL_ERR_H

struct vg_err {
    int code;  /* negative errno-style code, 0 when unset */
    char *msg; /* owned; NULL when unset */
};

#define VG_ERR_INIT                                                                                \
    {                                                                                              \
        0, NULL                                                                                    \
    }

/* Record a failure and return code (which should be negative), so callers can write
 * `return vg_err_set(err, -ENOENT, "cannot open '%s'", path);`. A previous message is
 * replaced. If formatting itself runs out of memory a fixed message is kept instead. */
int vg_err_set(struct vg_err *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prefix the existing message with "PREFIX: ", keeping the code; returns the code. */
int vg_err_prefix(struct vg_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The message, or a generic text for the code when none was set. Borrowed. */
const char *vg_err_msg(const struct vg_err *err);

void vg_err_clear(struct vg_err *err);
void vg_err_release(struct vg_err *err);

#endif
