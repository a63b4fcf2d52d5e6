/*
 * User names for uids, for output ("alice holds 20 GiB on GPU 3"). getpwuid_r may go to NSS
 * (LDAP, sssd) and be slow, and a host has few distinct users among its GPU holders, so names
 * are cached per scan in the context: no global cache that would go stale in `watch`. A uid
 * with no passwd entry (common for container uids seen from the host) is shown as its number.
 */
#include "proc/internal.h"
#include "util/array.h"

#include <errno.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define VG_PW_BUF_MAX ((size_t)1 << 20)

/* The passwd name for uid, NULL with 0 when there is none; -ENOMEM. */
static int vg_user_lookup(uid_t uid, char **out)
{
    long hint = sysconf(_SC_GETPW_R_SIZE_MAX);
    size_t cap = hint > 0 && hint < (long)VG_PW_BUF_MAX ? (size_t)hint : 1024;
    *out = NULL;
    for (;;) {
        char *buf = malloc(cap);
        if (!buf)
            return -ENOMEM;
        struct passwd pw, *res = NULL;
        int rc = getpwuid_r(uid, &pw, buf, cap, &res);
        if (rc == ERANGE && cap < VG_PW_BUF_MAX) {
            free(buf);
            cap *= 2;
            continue;
        }
        if (rc == 0 && res && res->pw_name && res->pw_name[0]) {
            *out = strdup(res->pw_name);
            free(buf);
            return *out ? 0 : -ENOMEM;
        }
        free(buf);
        return rc == ENOMEM ? -ENOMEM : 0;
    }
}

static char *vg_uid_text(uid_t uid)
{
    char tmp[16];
    size_t n = 0;
    unsigned long v = uid;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    char *s = malloc(n + 1);
    if (!s)
        return NULL;
    for (size_t i = 0; i < n; i++)
        s[i] = tmp[n - 1 - i];
    s[n] = '\0';
    return s;
}

int vg_proc_user_name(struct vg_proc_ctx *c, uid_t uid, char **out)
{
    for (size_t i = 0; i < c->nunames; i++) {
        if (c->unames[i].uid == uid) {
            *out = strdup(c->unames[i].name);
            return *out ? 0 : -ENOMEM;
        }
    }
    char *name;
    int rc = vg_user_lookup(uid, &name);
    if (rc)
        return rc;
    if (!name && !(name = vg_uid_text(uid)))
        return -ENOMEM;
    if (VG_ARRAY_GROW(c->unames, c->unames_cap, c->nunames + 1)) {
        free(name);
        return -ENOMEM;
    }
    c->unames[c->nunames].uid = uid;
    c->unames[c->nunames].name = name;
    c->nunames++;
    *out = strdup(name);
    return *out ? 0 : -ENOMEM;
}
