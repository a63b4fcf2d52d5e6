/*
 * The NVIDIA device nodes a scan matches descriptors against (see proc.h, vg_proc_devset): the
 * driver's character-device majors, read once per scan from <procfs>/devices, and the inode
 * identities of the nodes named in --dev DIR, stat'ed once per scan.
 *
 * Why not match by path, as a readlink of /proc/PID/fd/N would: any user can make a path look
 * like /dev/nvidia0 (a tmpfs over /dev in a private user + mount namespace), and a real node
 * reached through another path (a container's own mknod, a bind mount) does not look like it.
 * A device number cannot be forged without CAP_MKNOD in the initial user namespace, and an
 * inode identity names one file whatever path leads to it.
 *
 * The set is built for one scan and read-only after that; matching is a few comparisons for a
 * character device and a binary search over DIR's nodes (tens; thousands with many MIG
 * capability nodes) for anything else, behind a one-compare filter on the filesystem, since
 * nearly every descriptor of a host (pipes, sockets, regular files) lives elsewhere.
 */
#include "proc/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/array.h"
#include "util/buf.h"
#include "util/file.h"
#include "util/parse.h"

#define VG_DEVSET_DENTS ((size_t)32 << 10)
#define VG_DEVSET_DEVICES_MAX ((size_t)64 << 10)
/* Distinct filesystems the quick filter holds; DIR's nodes are on one or two. */
#define VG_DEVSET_FS_MAX 4
/* Tags of vg_dev_match.node: a device number, or an index into the set's nodes. */
#define VG_DEVSET_BY_NUMBER ((uint64_t)1 << 63)

struct vg_devset_node {
    uint64_t dev; /* the filesystem, (major << 32) | minor */
    uint64_t ino;
    enum vg_dev_kind kind;
    unsigned minor;
    char *name; /* its path under DIR ("nvidia0", "nvidia-caps/nvidia-cap1"), for the kernel
                 * scan's check that the kernel names it as statx does (kscan.c) */
};

/* A node of DIR of one of the driver's majors, by inode: what a memory mapping of it shows. */
struct vg_devset_chr {
    uint64_t dev; /* the filesystem, as in vg_devset_node */
    uint64_t ino;
    uint32_t rdev_major, rdev_minor;
};

struct vg_proc_devset {
    struct vg_dev_majors majors;
    struct vg_devset_node *nodes; /* sorted by (dev, ino), distinct */
    size_t n, cap;
    uint64_t fs[VG_DEVSET_FS_MAX]; /* the distinct devs of nodes */
    size_t nfs;                    /* VG_DEVSET_FS_MAX + 1: too many, no filter */
    struct vg_devset_chr *chrs;    /* DIR's nodes of the driver's majors, sorted by (dev, ino) */
    size_t nchrs, chrs_cap;
};

static uint64_t vg_devset_fs(uint32_t major, uint32_t minor)
{
    return ((uint64_t)major << 32) | minor;
}

/* ---- /proc/devices ---------------------------------------------------------------------- */

int vg_proc_parse_devices(const char *buf, size_t len, struct vg_dev_majors *m)
{
    static const char *const others[VG_DEV_OTHER_MAJORS] = {
        "nvidia-caps", "nvidia-caps-imex-channels", "nvidia-nvlink", "nvidia-nvswitch"};
    memset(m, 0, sizeof(*m));
    unsigned plain = 0; /* "nvidia": the major when no frontend is listed */
    bool chr = false, seen = false;
    const char *at = buf, *line;
    size_t n;
    while (vg_parse_line(&at, buf + len, &line, &n)) {
        if (n > 0 && line[n - 1] == ':') {
            /* a section header: "Character devices:", "Block devices:" */
            chr = vg_parse_is(line, n, "Character devices:");
            seen |= chr;
            continue;
        }
        if (!chr)
            continue;
        size_t i = 0;
        while (i < n && line[i] == ' ')
            i++;
        unsigned long major = 0;
        size_t digits = i;
        while (i < n && line[i] >= '0' && line[i] <= '9' && major <= 4095)
            major = major * 10 + (unsigned long)(line[i++] - '0');
        /* majors are 12 bits; 0 is never a registered character device */
        if (i == digits || i >= n || line[i] != ' ' || major == 0 || major > 4095)
            continue;
        const char *name = line + i + 1;
        size_t nlen = n - i - 1;
        if (vg_parse_is(name, nlen, "nvidia-frontend"))
            m->nvidia = (unsigned)major;
        else if (vg_parse_is(name, nlen, "nvidia"))
            plain = (unsigned)major;
        else if (vg_parse_is(name, nlen, "nvidia-uvm"))
            m->uvm = (unsigned)major;
        else
            for (size_t k = 0; k < VG_DEV_OTHER_MAJORS; k++)
                if (vg_parse_is(name, nlen, others[k]))
                    m->other[k] = (unsigned)major;
    }
    if (!m->nvidia)
        m->nvidia = plain;
    if (!seen) {
        memset(m, 0, sizeof(*m));
        return -EINVAL;
    }
    return 0;
}

/* ---- DIR's names ------------------------------------------------------------------------ */

int vg_proc_parse_node_name(const char *name, size_t len, enum vg_dev_kind *kind, unsigned *minor)
{
    *kind = VG_DEV_NONE;
    *minor = 0;
    if (!name || len < 6 || memcmp(name, "nvidia", 6) != 0)
        return 0;
    const char *r = name + 6;
    size_t n = len - 6;
    *kind = VG_DEV_OTHER;
    if (n > 0 && r[0] >= '0' && r[0] <= '9' && (r[0] != '0' || n == 1)) {
        unsigned v = 0;
        size_t i = 0;
        while (i < n && r[i] >= '0' && r[i] <= '9' && v <= VG_DEV_GPU_MINOR_MAX)
            v = v * 10 + (unsigned)(r[i++] - '0');
        if (i == n && v <= VG_DEV_GPU_MINOR_MAX) {
            *kind = VG_DEV_GPU;
            *minor = v;
        }
    } else if (vg_parse_is(r, n, "ctl")) {
        *kind = VG_DEV_CTL;
    } else if (vg_parse_is(r, n, "-uvm") || vg_parse_is(r, n, "-uvm-tools")) {
        *kind = VG_DEV_UVM;
    }
    return 1;
}

/* ---- the set ---------------------------------------------------------------------------- */

/* A device number of one of the driver's majors: its kind and minor. */
static bool vg_devset_number(const struct vg_dev_majors *mj, uint32_t major, uint32_t minor,
                             struct vg_dev_match *m)
{
    if (major == mj->nvidia) {
        m->kind = minor <= VG_DEV_GPU_MINOR_MAX ? VG_DEV_GPU
                  : minor == VG_DEV_CTL_MINOR   ? VG_DEV_CTL
                                                : VG_DEV_OTHER; /* modeset, or unknown */
        m->minor = m->kind == VG_DEV_GPU ? minor : 0;
    } else if (mj->uvm && major == mj->uvm) {
        m->kind = VG_DEV_UVM;
        m->minor = 0;
    } else {
        size_t k = 0;
        while (k < VG_DEV_OTHER_MAJORS && !(mj->other[k] && major == mj->other[k]))
            k++;
        if (k == VG_DEV_OTHER_MAJORS)
            return false;
        m->kind = VG_DEV_OTHER;
        m->minor = 0;
    }
    m->node = VG_DEVSET_BY_NUMBER | ((uint64_t)major << 32) | minor;
    return true;
}

static bool vg_devset_is_driver_major(const struct vg_dev_majors *mj, uint32_t major)
{
    struct vg_dev_match m;
    return vg_devset_number(mj, major, 0, &m);
}

/* Order by (filesystem, inode): the driver's nodes, sorted and searched. */
static int vg_devset_chr_cmp(const void *a, const void *b)
{
    const struct vg_devset_chr *x = a, *y = b;
    if (x->dev != y->dev)
        return x->dev < y->dev ? -1 : 1;
    return x->ino < y->ino ? -1 : x->ino > y->ino;
}

/* A (filesystem, inode) key, as a struct vg_devset_chr, against a node of the set. */
static int vg_devset_node_find_cmp(const void *key, const void *elem)
{
    const struct vg_devset_chr *k = key;
    const struct vg_devset_node *e = elem;
    if (k->dev != e->dev)
        return k->dev < e->dev ? -1 : 1;
    return k->ino < e->ino ? -1 : k->ino > e->ino;
}

bool vg_proc_devset_match(const struct vg_proc_devset *s, const struct vg_dev_id *id,
                          struct vg_dev_match *m)
{
    if (S_ISCHR(id->mode) && vg_devset_number(&s->majors, id->rdev_major, id->rdev_minor, m))
        return true;
    if (s->n == 0)
        return false;
    uint64_t dev = vg_devset_fs(id->dev_major, id->dev_minor);
    if (s->nfs <= VG_DEVSET_FS_MAX) {
        size_t k = 0;
        while (k < s->nfs && s->fs[k] != dev)
            k++;
        if (k == s->nfs)
            return false;
    }
    const struct vg_devset_chr key = {.dev = dev, .ino = id->ino};
    size_t i =
        vg_array_lower_bound(&key, s->nodes, s->n, sizeof(*s->nodes), vg_devset_node_find_cmp);
    if (i == s->n || s->nodes[i].dev != dev || s->nodes[i].ino != id->ino)
        return false;
    m->kind = s->nodes[i].kind;
    m->minor = s->nodes[i].minor;
    m->node = i;
    return true;
}

bool vg_proc_devset_match_file(const struct vg_proc_devset *s, uint32_t dev_major,
                               uint32_t dev_minor, uint64_t ino, struct vg_dev_match *m)
{
    uint64_t dev = vg_devset_fs(dev_major, dev_minor);
    const struct vg_devset_chr key = {.dev = dev, .ino = ino};
    size_t i = vg_array_lower_bound(&key, s->chrs, s->nchrs, sizeof(*s->chrs), vg_devset_chr_cmp);
    if (i < s->nchrs && s->chrs[i].dev == dev && s->chrs[i].ino == ino)
        return vg_devset_number(&s->majors, s->chrs[i].rdev_major, s->chrs[i].rdev_minor, m);
    /* not a character device: the inode set alone decides */
    struct vg_dev_id id = {.dev_major = dev_major, .dev_minor = dev_minor, .ino = ino};
    return vg_proc_devset_match(s, &id, m);
}

const struct vg_dev_majors *vg_proc_devset_majors(const struct vg_proc_devset *s)
{
    return &s->majors;
}

size_t vg_proc_devset_size(const struct vg_proc_devset *s)
{
    return s ? s->n : 0;
}

const char *vg_proc_devset_node(const struct vg_proc_devset *s, size_t i, struct vg_dev_id *id)
{
    const struct vg_devset_node *e = &s->nodes[i];
    *id = (struct vg_dev_id){
        .dev_major = (uint32_t)(e->dev >> 32),
        .dev_minor = (uint32_t)e->dev,
        .ino = e->ino,
    };
    return e->name;
}

static int vg_devset_add(struct vg_proc_devset *s, const struct statx *st, enum vg_dev_kind kind,
                         unsigned minor, const char *sub, const char *name)
{
    if (VG_ARRAY_GROW(s->nodes, s->cap, s->n + 1))
        return -ENOMEM;
    size_t ls = sub ? strlen(sub) + 1 : 0, ln = strlen(name);
    char *path = malloc(ls + ln + 1);
    if (!path)
        return -ENOMEM;
    if (sub) {
        memcpy(path, sub, ls - 1);
        path[ls - 1] = '/';
    }
    memcpy(path + ls, name, ln + 1);
    s->nodes[s->n++] = (struct vg_devset_node){
        .dev = vg_devset_fs(st->stx_dev_major, st->stx_dev_minor),
        .ino = st->stx_ino,
        .kind = kind,
        .minor = minor,
        .name = path,
    };
    return 0;
}

static int vg_devset_add_chr(struct vg_proc_devset *s, const struct statx *st)
{
    if (VG_ARRAY_GROW(s->chrs, s->chrs_cap, s->nchrs + 1))
        return -ENOMEM;
    s->chrs[s->nchrs++] = (struct vg_devset_chr){
        .dev = vg_devset_fs(st->stx_dev_major, st->stx_dev_minor),
        .ino = st->stx_ino,
        .rdev_major = st->stx_rdev_major,
        .rdev_minor = st->stx_rdev_minor,
    };
    return 0;
}

/* The nodes of one directory: DIR itself (top: only nvidia* names, classified by name, and one
 * level into its nvidia* directories) or one of those directories (every entry, OTHER). */
static int vg_devset_scan_dir(struct vg_proc_devset *s, int dirfd, const char *sub, char *dents,
                              size_t cap)
{
    struct vg_proc_dirit it;
    vg_proc_dirit_init(&it, dirfd, dents, cap);
    const char *name;
    int rc;
    bool top = sub == NULL;
    while ((rc = vg_proc_dirit_next(&it, &name)) > 0) {
        enum vg_dev_kind kind = VG_DEV_OTHER;
        unsigned minor = 0;
        if (top && !vg_proc_parse_node_name(name, strlen(name), &kind, &minor))
            continue;
        struct statx st;
        /* DONT_SYNC: a DIR on a network filesystem answers from its cache, never blocks */
        if (statx(dirfd, name, AT_SYMLINK_NOFOLLOW | AT_STATX_DONT_SYNC, STATX_TYPE | STATX_INO,
                  &st) < 0)
            continue; /* removed since the listing */
        if (S_ISLNK(st.stx_mode))
            continue; /* a name, not a node: what it points to counts on its own, if at all */
        if (S_ISDIR(st.stx_mode)) {
            if (!top)
                continue;
            int subfd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (subfd < 0)
                continue;
            /* the subdirectory's listing needs its own buffer: this one is mid-iteration */
            char *subdents = malloc(VG_DEVSET_DENTS);
            rc = subdents ? vg_devset_scan_dir(s, subfd, name, subdents, VG_DEVSET_DENTS) : -ENOMEM;
            free(subdents);
            close(subfd);
            if (rc == -ENOMEM)
                return rc;
            continue;
        }
        /* Nodes of the driver's majors match by number anywhere; the set is for the rest.
         * Their inodes are kept apart, for what a memory mapping shows of them. */
        if (S_ISCHR(st.stx_mode) && vg_devset_is_driver_major(&s->majors, st.stx_rdev_major)) {
            if ((rc = vg_devset_add_chr(s, &st)) != 0)
                return rc;
            continue;
        }
        if ((rc = vg_devset_add(s, &st, kind, minor, sub, name)) != 0)
            return rc;
    }
    return rc == -ENOMEM ? rc : 0;
}

static int vg_devset_cmp(const void *a, const void *b)
{
    const struct vg_devset_node *x = a, *y = b;
    if (x->dev != y->dev)
        return x->dev < y->dev ? -1 : 1;
    if (x->ino != y->ino)
        return x->ino < y->ino ? -1 : 1;
    /* hard links under several names: the most specific kind first, so it wins */
    if (x->kind != y->kind)
        return x->kind < y->kind ? -1 : 1;
    return x->minor < y->minor ? -1 : x->minor > y->minor;
}

static void vg_devset_finish(struct vg_proc_devset *s)
{
    if (s->nchrs > 1)
        qsort(s->chrs, s->nchrs, sizeof(*s->chrs), vg_devset_chr_cmp);
    if (s->n > 1)
        qsort(s->nodes, s->n, sizeof(*s->nodes), vg_devset_cmp);
    size_t k = 0;
    for (size_t i = 0; i < s->n; i++)
        if (k == 0 || s->nodes[k - 1].dev != s->nodes[i].dev ||
            s->nodes[k - 1].ino != s->nodes[i].ino)
            s->nodes[k++] = s->nodes[i];
        else
            free(s->nodes[i].name);
    s->n = k;
    s->nfs = 0;
    for (size_t i = 0; i < s->n && s->nfs <= VG_DEVSET_FS_MAX; i++)
        if (s->nfs == 0 || s->fs[s->nfs - 1] != s->nodes[i].dev) {
            if (s->nfs < VG_DEVSET_FS_MAX)
                s->fs[s->nfs] = s->nodes[i].dev;
            s->nfs++;
        }
}

/* A procfs without "devices" (a test tree) or without the driver listed in it (no driver
 * loaded, as on this project's test machines) leaves the registered NVIDIA major alone. */
static int vg_devset_read_majors(struct vg_proc_devset *s, int proc_root_fd)
{
    struct vg_buf b;
    vg_buf_init(&b, VG_DEVSET_DEVICES_MAX);
    int rc = proc_root_fd >= 0 ? vg_file_read_at(proc_root_fd, "devices", &b) : -ENOENT;
    if (rc != 0 || vg_proc_parse_devices(vg_buf_str(&b), b.len, &s->majors) != 0)
        memset(&s->majors, 0, sizeof(s->majors));
    vg_buf_release(&b);
    if (!s->majors.nvidia)
        s->majors.nvidia = VG_DEV_NVIDIA_MAJOR;
    return rc == -ENOMEM ? rc : 0;
}

int vg_proc_devset_new(int proc_root_fd, const char *dev_dir, struct vg_proc_devset **out)
{
    *out = NULL;
    struct vg_proc_devset *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    int rc = vg_devset_read_majors(s, proc_root_fd);
    const char *dir = dev_dir && *dev_dir ? dev_dir : "/dev";
    int dfd = rc ? -1 : open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        char *dents = malloc(VG_DEVSET_DENTS);
        rc = dents ? vg_devset_scan_dir(s, dfd, NULL, dents, VG_DEVSET_DENTS) : -ENOMEM;
        free(dents);
        close(dfd);
    }
    if (rc) {
        vg_proc_devset_free(s);
        return rc;
    }
    vg_devset_finish(s);
    *out = s;
    return 0;
}

void vg_proc_devset_free(struct vg_proc_devset *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n; i++)
        free(s->nodes[i].name);
    free(s->nodes);
    free(s->chrs);
    free(s);
}
