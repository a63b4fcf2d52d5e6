/*
 * bench/floor: the least a complete device-fd scan can do, as the yardstick bench/run sets
 * vramguard, fuser and lsof against. For every numeric entry of /proc: open <pid>/fd in one
 * openat from the /proc fd, list it with getdents64, readlinkat every entry, count the links
 * that name DIR/nvidia*. Nothing else: no process details, no allocation per process, no
 * output but one line of counts.
 *
 *   floor [-p] [DIR]     DIR defaults to /dev
 *
 * -p reads fd/ the way vramguard does on Linux 6.2+: fstat() gives the descriptor count as the
 * directory's size, and the links are read as 0, 1, 2... until that many were found, listing
 * the directory only when holes get in the way (a quarter of the count missing, 4 to 16).
 * This is the floor for that method, shown apart so the floor above stays the textbook one.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char root_buf[1 << 15], fd_buf[1 << 15];
static char prefix[PATH_MAX];
static size_t plen;
static unsigned long fds, hits;

static int one(int fdd, const char *name)
{
    char link[PATH_MAX];
    ssize_t l = readlinkat(fdd, name, link, sizeof(link));
    if (l < 0)
        return -errno;
    fds++;
    if ((size_t)l >= plen && memcmp(link, prefix, plen) == 0)
        hits++;
    return 0;
}

/* List fd/ and read every link numbered `from` or more. */
static void list(int fdd, unsigned from)
{
    long m;
    while ((m = getdents64(fdd, fd_buf, sizeof(fd_buf))) > 0) {
        for (long o = 0; o < m;) {
            struct dirent64 *e = (struct dirent64 *)(void *)(fd_buf + o);
            o += e->d_reclen;
            if (e->d_name[0] == '.')
                continue;
            unsigned n = 0;
            for (const char *s = e->d_name; *s >= '0' && *s <= '9'; s++)
                n = n * 10 + (unsigned)(*s - '0');
            if (n >= from)
                one(fdd, e->d_name);
        }
    }
}

/* Read links 0, 1, 2... until count were found; list the rest after count/4 misses (4..16). */
static void probe(int fdd, unsigned long count)
{
    unsigned long found = 0, misses = 0;
    unsigned long budget = count / 4 < 4 ? 4 : count / 4 > 16 ? 16 : count / 4;
    unsigned fd = 0;
    for (; found < count; fd++) {
        if (misses == budget) {
            list(fdd, fd);
            return;
        }
        char name[16];
        snprintf(name, sizeof(name), "%u", fd);
        if (one(fdd, name) == 0)
            found++;
        else
            misses++;
    }
}

int main(int argc, char **argv)
{
    int probing = argc > 1 && strcmp(argv[1], "-p") == 0;
    const char *dir = argc > 1 + probing ? argv[1 + probing] : "/dev";
    int n = snprintf(prefix, sizeof(prefix), "%s/nvidia", dir);
    if (n < 0 || (size_t)n >= sizeof(prefix))
        return 64;
    plen = (size_t)n;
    int root = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (root < 0) {
        perror("floor: /proc");
        return 1;
    }
    unsigned long procs = 0;
    long r;
    while ((r = getdents64(root, root_buf, sizeof(root_buf))) > 0) {
        for (long off = 0; off < r;) {
            struct dirent64 *d = (struct dirent64 *)(void *)(root_buf + off);
            off += d->d_reclen;
            if (d->d_name[0] < '1' || d->d_name[0] > '9')
                continue;
            char path[300];
            snprintf(path, sizeof(path), "%s/fd", d->d_name);
            int fdd = openat(root, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            if (fdd < 0)
                continue;
            procs++;
            struct stat st;
            if (probing && fstat(fdd, &st) == 0 && st.st_size > 0)
                probe(fdd, (unsigned long)st.st_size);
            else
                list(fdd, 0);
            close(fdd);
        }
    }
    close(root);
    printf("floor: %lu processes, %lu descriptors, %lu NVIDIA links\n", procs, fds, hits);
    return 0;
}
