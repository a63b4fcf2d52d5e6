/*
 * `watch` settings: the command-line flags and the config file (docs/config.md) fill the same
 * struct through the same per-key parser, so a key means exactly what its flag means.
 *
 * The file holds `key = value` lines; blank lines and lines starting with `#` are ignored.
 * Keys: interval, threshold, expect (repeatable), exec, shell, exec_timeout, format,
 * idle_after, nvml_timeout, full_scan. Parsing is strict: an unknown key, a bad value, a scalar
 * key given twice or a line without '=' is an error "FILE:LINE: what is wrong", and nothing of
 * the file is used.
 *
 * Precedence: flags over the file; `expect` flags replace the file's expect lines as a whole.
 *
 * Ownership: vg_watch_config_init()/vg_watch_config_release(); the struct owns its strings and
 * expectations. *
 * Why in cmd/: every key is an option of `watch` (and `check`), and the file is read only by
 * those commands. The keys are those the option rows name (vg_watch_opts and the global
 * --nvml-timeout, cmd/opt.h): a key no row names is unknown.
 */
#ifndef VG_CMD_WATCH_CONFIG_H
#define VG_CMD_WATCH_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "cmd/cmd.h"
#include "rules/expect.h"
#include "util/err.h"
#include "util/parse.h"

enum vg_watch_format { VG_WATCH_TEXT, VG_WATCH_JSON };

/* Which keys were given (defaults apply to the others). */
enum {
    VG_WCFG_INTERVAL = 1u << 0,
    VG_WCFG_THRESHOLD = 1u << 1,
    VG_WCFG_EXPECT = 1u << 2,
    VG_WCFG_EXEC = 1u << 3,
    VG_WCFG_SHELL = 1u << 4,
    VG_WCFG_EXEC_TIMEOUT = 1u << 5,
    VG_WCFG_FORMAT = 1u << 6,
    VG_WCFG_IDLE_AFTER = 1u << 7,
    VG_WCFG_NVML_TIMEOUT = 1u << 8,
    VG_WCFG_FULL_SCAN = 1u << 9,
};

#define VG_WATCH_INTERVAL_DEFAULT_MS 2000u
#define VG_WATCH_THRESHOLD_DEFAULT (10ull << 20)
#define VG_WATCH_EXEC_TIMEOUT_DEFAULT_MS 10000u
#define VG_WATCH_IDLE_AFTER_DEFAULT_MS VG_HOUR_MS
#define VG_WATCH_FULL_SCAN_DEFAULT_MS 60000u /* the sampler's VG_SAMPLER_FULL_SCAN_MS */
#define VG_WATCH_FULL_SCAN_MAX_MS VG_DAY_MS

struct vg_watch_config {
    unsigned set; /* VG_WCFG_* */
    uint64_t interval_ms;
    uint64_t threshold; /* bytes */
    struct vg_expect_set expect;
    char *exec; /* NULL: no command */
    bool shell;
    uint64_t exec_timeout_ms;
    enum vg_watch_format format;
    uint64_t idle_after_ms;
    unsigned nvml_timeout_ms; /* 0: the global option or its default */
    unsigned full_scan_ms;    /* longest time between full /proc scans; 0: every sample is
                               * one (no incremental scans) */
};

/* watch's options (check takes some of them too). Every setting is an option whose row names
 * its config_key; the file knows exactly the keys of these rows and the global options'. The
 * settings come back from the parse with the one code VG_WATCH_OPT_SETTING (the row says
 * which); --config and --once are stored into the parse's targets 0 (a const char *) and 1 (a
 * bool). */
enum { VG_WATCH_OPT_SETTING = VG_OPT_FIRST_LOCAL };
extern const struct vg_opt vg_watch_opts[];

/* Defaults, nothing set. */
void vg_watch_config_init(struct vg_watch_config *c);
void vg_watch_config_release(struct vg_watch_config *c);

/* Set one key from its text value (a flag or a file line). -EINVAL with a message that names
 * the key and the value (no file or line: the caller adds them); -ENOMEM. A scalar key may be
 * set again (the last wins); `expect` appends. */
int vg_watch_config_set(struct vg_watch_config *c, const char *key, const char *value,
                        struct vg_err *err);

/* How far vg_watch_config_load trusts the file's place. */
enum {
    /* watch (its exec lines run): refuse a file that anyone but root or the caller could
     * change, it or a directory above it (util/priv.h; sshd's StrictModes) */
    VG_WCFG_LOAD_STRICT = 1u << 0,
};

/* Read a config file into c (initialised; keys it sets are replaced). Only a regular file is
 * read, and opening never blocks (a FIFO put in its place is an error, not a hang). flags:
 * VG_WCFG_LOAD_*; in a setuid or file-capability copy only a file root alone can change is
 * read, whatever the flags. A bad line is quoted in the message only when the real user may
 * read the file (else only its number is said). On any error c is left as it was and err says
 * "PATH:LINE: ..." (or "PATH: ..." when it cannot be read or is refused). */
int vg_watch_config_load(struct vg_watch_config *c, const char *path, unsigned flags,
                         struct vg_err *err);

/* dst = base with every key over set: the result of a file plus flags. 0 or -ENOMEM. */
int vg_watch_config_merge(struct vg_watch_config *dst, const struct vg_watch_config *base,
                          const struct vg_watch_config *over);

#endif
