/*
 * A small streaming JSON writer over a struct vg_buf. Commas, nesting and string escaping are
 * handled here so renderers only say what to write. Errors are sticky: after the first failure
 * (out of memory, buffer maximum, nesting too deep) every call is a no-op and vg_json_finish()
 * returns the error, so callers check once at the end.
 *
 * Strings are escaped per RFC 8259; bytes that are not valid UTF-8 become U+FFFD so the output
 * is always valid JSON whatever a process put in its name or command line.
 *
 * The writer borrows the buffer; it owns nothing.
 */
#ifndef VG_RENDER_JSON_H
#define VG_RENDER_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "util/buf.h"

#define VG_JSON_MAX_DEPTH 32

struct vg_json {
    struct vg_buf *out;
    bool pretty;
    int rc;
    int depth;
    bool first[VG_JSON_MAX_DEPTH]; /* no element written yet at this level */
    bool after_key;
};

void vg_json_init(struct vg_json *j, struct vg_buf *out, bool pretty);

/* The opening every JSON document of a command shares: '{', "schema", "vramguard_version" and,
 * when `when` is not NULL, "time" (ISO 8601 UTC). The caller adds its members and closes it. */
void vg_json_envelope(struct vg_json *j, const char *schema, const struct timespec *when);
/* 0, or the first error; adds the final newline. */
int vg_json_finish(struct vg_json *j);

void vg_json_obj_begin(struct vg_json *j);
void vg_json_obj_end(struct vg_json *j);
void vg_json_arr_begin(struct vg_json *j);
void vg_json_arr_end(struct vg_json *j);
void vg_json_key(struct vg_json *j, const char *key);

void vg_json_str(struct vg_json *j, const char *s); /* NULL writes null */
void vg_json_strn(struct vg_json *j, const char *s, size_t n);
void vg_json_u64(struct vg_json *j, uint64_t v);
void vg_json_i64(struct vg_json *j, int64_t v);
void vg_json_double(struct vg_json *j, double v);
void vg_json_bool(struct vg_json *j, bool v);
void vg_json_null(struct vg_json *j);

/* key + value in one call; the _opt forms write null when known is false. */
void vg_json_kstr(struct vg_json *j, const char *key, const char *s);
void vg_json_ku64(struct vg_json *j, const char *key, uint64_t v);
void vg_json_ku64_opt(struct vg_json *j, const char *key, bool known, uint64_t v);
void vg_json_ki64(struct vg_json *j, const char *key, int64_t v);
void vg_json_ki64_opt(struct vg_json *j, const char *key, bool known, int64_t v);
void vg_json_kbool(struct vg_json *j, const char *key, bool v);
void vg_json_kbool_opt(struct vg_json *j, const char *key, bool known, bool v);

/* key + an array of n strings (NULL entries write null). */
void vg_json_kstrs(struct vg_json *j, const char *key, const char *const *strs, size_t n);

/* "gpus": [NVML index, ...] and "gpu_uuids": [UUID or null, ...] of the GPUs at positions
 * which[0..n) of list: how every document names the GPUs something concerns. */
struct vg_gpu_list;
void vg_json_gpu_refs(struct vg_json *j, const struct vg_gpu_list *list, const size_t *which,
                      size_t n);

/* Escape s (n bytes) into out as the inside of a JSON string, without quotes. */
int vg_json_escape(struct vg_buf *out, const char *s, size_t n);

#endif
