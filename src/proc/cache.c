/*
 * The cross-scan cache of stable process details (see proc.h): what a (pid, start time, comm)
 * cannot change is read once and copied into later scans' entries, so a long-running command
 * reads little more than fd directories, stat and status for the holders it already knows.
 *
 * Entries are kept in an array sorted by pid (a host has few holders; lookups are binary
 * searches). Each entry carries the generation of the last scan that used it; vg_proc_cache_end
 * drops the others, so a process that exits (or stops holding a GPU) leaves no data behind.
 */
#include "proc/internal.h"
#include "util/array.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The known bits an entry can carry. */
#define VG_PROC_CACHED_BITS (VG_PROC_K_CMDLINE | VG_PROC_K_ENV | VG_PROC_K_CGROUP | VG_PROC_K_MAPS)

struct vg_proc_cache_entry {
    pid_t pid; /* first: compared with vg_array_cmp_pid */
    uint64_t start_ticks;
    char *comm;
    uint64_t gen;   /* last scan that used it */
    unsigned known; /* VG_PROC_CACHED_BITS that were read */
    bool denied;    /* one of those files was denied */
    char *cmdline;
    char *env[VG_ENV_COUNT];
    char *cgroup, *container_id, *pod_uid;
    unsigned libs;
    /* the NVIDIA descriptors when the maps were read */
    unsigned dev_fd_count;
    size_t ndev_minors;
    bool has_uvm;
    /* the user name for uid */
    bool user_known;
    uid_t uid;
    char *user;
};

struct vg_proc_cache {
    struct vg_proc_cache_entry **v; /* sorted by pid */
    size_t n, cap;
    uint64_t gen;
    uint64_t hits, misses;
};

static void vg_cache_entry_free(struct vg_proc_cache_entry *e)
{
    if (!e)
        return;
    free(e->comm);
    free(e->cmdline);
    for (int i = 0; i < VG_ENV_COUNT; i++)
        free(e->env[i]);
    free(e->cgroup);
    free(e->container_id);
    free(e->pod_uid);
    free(e->user);
    free(e);
}

int vg_proc_cache_new(struct vg_proc_cache **out)
{
    *out = calloc(1, sizeof(**out));
    return *out ? 0 : -ENOMEM;
}

void vg_proc_cache_free(struct vg_proc_cache *cache)
{
    if (!cache)
        return;
    for (size_t i = 0; i < cache->n; i++)
        vg_cache_entry_free(cache->v[i]);
    free(cache->v);
    free(cache);
}

void vg_proc_cache_stats(const struct vg_proc_cache *cache, struct vg_proc_cache_stats *out)
{
    memset(out, 0, sizeof(*out));
    if (!cache)
        return;
    out->hits = cache->hits;
    out->misses = cache->misses;
    out->entries = cache->n;
}

void vg_proc_cache_begin(struct vg_proc_cache *cache)
{
    cache->gen++;
}

void vg_proc_cache_end(struct vg_proc_cache *cache)
{
    size_t k = 0;
    for (size_t i = 0; i < cache->n; i++) {
        if (cache->v[i]->gen == cache->gen)
            cache->v[k++] = cache->v[i];
        else
            vg_cache_entry_free(cache->v[i]);
    }
    cache->n = k;
}

/* A pid against an entry of the cache's array (of pointers). */
static int vg_cache_cmp(const void *key, const void *elem)
{
    return vg_array_cmp_pid(key, *(const struct vg_proc_cache_entry *const *)elem);
}

/* Index of pid's entry, or where it would go (*found false). */
static size_t vg_cache_find(const struct vg_proc_cache *cache, pid_t pid, bool *found)
{
    size_t i = vg_array_lower_bound(&pid, cache->v, cache->n, sizeof(*cache->v), vg_cache_cmp);
    *found = i < cache->n && cache->v[i]->pid == pid;
    return i;
}

static bool vg_cache_keyable(const struct vg_proc *p)
{
    return (p->known & VG_PROC_K_STAT) && p->comm;
}

static int vg_cache_dup(const char *s, char **out)
{
    *out = NULL;
    if (!s)
        return 0;
    *out = strdup(s);
    return *out ? 0 : -ENOMEM;
}

/* The cached string fields into p (which holds none of them yet). */
static int vg_cache_copy_out(const struct vg_proc_cache_entry *e, struct vg_proc *p)
{
    int rc = vg_cache_dup(e->cmdline, &p->cmdline);
    for (int i = 0; i < VG_ENV_COUNT && rc == 0; i++)
        rc = vg_cache_dup(e->env[i], &p->env[i]);
    if (rc == 0)
        rc = vg_cache_dup(e->cgroup, &p->cgroup);
    if (rc == 0)
        rc = vg_cache_dup(e->container_id, &p->container_id);
    if (rc == 0)
        rc = vg_cache_dup(e->pod_uid, &p->pod_uid);
    if (rc == 0 && e->user_known && (p->known & VG_PROC_K_STATUS) && p->uid == e->uid) {
        rc = vg_cache_dup(e->user, &p->user);
        if (rc == 0)
            p->known |= VG_PROC_K_USER;
    }
    return rc;
}

int vg_proc_cache_fill(struct vg_proc_cache *cache, struct vg_proc *p, bool *denied,
                       bool *maps_stale)
{
    *maps_stale = false;
    if (!vg_cache_keyable(p))
        return 0;
    bool found;
    size_t i = vg_cache_find(cache, p->pid, &found);
    /* A reused pid has another start time, an exec another comm: a miss, and the entry is
     * replaced by the store that follows. */
    if (!found || cache->v[i]->start_ticks != p->start_ticks ||
        strcmp(cache->v[i]->comm, p->comm) != 0) {
        cache->misses++;
        return 0;
    }
    struct vg_proc_cache_entry *e = cache->v[i];
    if (vg_cache_copy_out(e, p) < 0) {
        free(p->cmdline);
        p->cmdline = NULL;
        for (int k = 0; k < VG_ENV_COUNT; k++) {
            free(p->env[k]);
            p->env[k] = NULL;
        }
        free(p->cgroup);
        free(p->container_id);
        free(p->pod_uid);
        free(p->user);
        p->cgroup = p->container_id = p->pod_uid = p->user = NULL;
        p->known &= ~(unsigned)VG_PROC_K_USER;
        return -ENOMEM;
    }
    if (!(p->known & VG_PROC_K_MAPS))
        p->libs = e->libs; /* else read just now, in phase one */
    p->known |= e->known;
    *denied = *denied || e->denied;
    *maps_stale = e->dev_fd_count != p->dev_fd_count || e->ndev_minors != p->ndev_minors ||
                  e->has_uvm != p->has_uvm;
    e->gen = cache->gen;
    cache->hits++;
    return 1;
}

static struct vg_proc_cache_entry *vg_cache_entry_from(const struct vg_proc *p, bool denied)
{
    struct vg_proc_cache_entry *e = calloc(1, sizeof(*e));
    if (!e)
        return NULL;
    e->pid = p->pid;
    e->start_ticks = p->start_ticks;
    e->known = p->known & VG_PROC_CACHED_BITS;
    e->denied = denied;
    e->libs = p->libs;
    e->dev_fd_count = p->dev_fd_count;
    e->ndev_minors = p->ndev_minors;
    e->has_uvm = p->has_uvm;
    int rc = vg_cache_dup(p->comm, &e->comm);
    if (rc == 0)
        rc = vg_cache_dup(p->cmdline, &e->cmdline);
    for (int i = 0; i < VG_ENV_COUNT && rc == 0; i++)
        rc = vg_cache_dup(p->env[i], &e->env[i]);
    if (rc == 0)
        rc = vg_cache_dup(p->cgroup, &e->cgroup);
    if (rc == 0)
        rc = vg_cache_dup(p->container_id, &e->container_id);
    if (rc == 0)
        rc = vg_cache_dup(p->pod_uid, &e->pod_uid);
    if (rc == 0 && (p->known & VG_PROC_K_USER) && (p->known & VG_PROC_K_STATUS)) {
        rc = vg_cache_dup(p->user, &e->user);
        e->user_known = true;
        e->uid = p->uid;
    }
    if (rc) {
        vg_cache_entry_free(e);
        return NULL;
    }
    return e;
}

int vg_proc_cache_store(struct vg_proc_cache *cache, const struct vg_proc *p, bool denied)
{
    if (!vg_cache_keyable(p))
        return 0;
    struct vg_proc_cache_entry *e = vg_cache_entry_from(p, denied);
    if (!e)
        return -ENOMEM;
    e->gen = cache->gen;
    bool found;
    size_t i = vg_cache_find(cache, p->pid, &found);
    if (found) {
        vg_cache_entry_free(cache->v[i]);
        cache->v[i] = e;
        return 0;
    }
    if (VG_ARRAY_GROW(cache->v, cache->cap, cache->n + 1)) {
        vg_cache_entry_free(e);
        return -ENOMEM;
    }
    memmove(&cache->v[i + 1], &cache->v[i], (cache->n - i) * sizeof(*cache->v));
    cache->v[i] = e;
    cache->n++;
    return 0;
}
