/*
 * /proc/PID/environ: the environment the process was started with (later setenv() calls are
 * not visible), as NUL-terminated "NAME=value" entries. Only the allow-listed variables of
 * enum vg_env_var are kept, matched on the exact name (CUDA_VISIBLE_DEVICES_X is not
 * CUDA_VISIBLE_DEVICES); nothing else leaves this file, since environments hold secrets.
 * The first occurrence of a name wins, as with getenv(). The last entry need not end in a
 * NUL. An empty value is kept as "" (CUDA_VISIBLE_DEVICES= hides every GPU), distinct from
 * unset (NULL).
 */
#include "proc/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int vg_env_lookup(const char *name, size_t n)
{
    for (int v = 0; v < VG_ENV_COUNT; v++) {
        const char *k = vg_env_name((enum vg_env_var)v);
        if (k[0] == name[0] && strlen(k) == n && memcmp(k, name, n) == 0)
            return v;
    }
    return -1;
}

int vg_proc_parse_environ(const char *buf, size_t len, struct vg_proc *p)
{
    if (!buf && len)
        return -EINVAL;
    char *env[VG_ENV_COUNT] = {0};
    for (size_t i = 0; i < len;) {
        const char *e = buf + i;
        const char *nul = memchr(e, '\0', len - i);
        size_t n = nul ? (size_t)(nul - e) : len - i;
        i += n + 1;
        const char *eq = memchr(e, '=', n);
        if (!eq || eq == e)
            continue;
        int v = vg_env_lookup(e, (size_t)(eq - e));
        if (v < 0 || env[v])
            continue;
        env[v] = vg_proc_strndup(eq + 1, n - (size_t)(eq - e) - 1);
        if (!env[v]) {
            for (int k = 0; k < VG_ENV_COUNT; k++)
                free(env[k]);
            return -ENOMEM;
        }
    }
    for (int v = 0; v < VG_ENV_COUNT; v++) {
        free(p->env[v]);
        p->env[v] = env[v];
    }
    p->known |= VG_PROC_K_ENV;
    return 0;
}
