/*
 * NVIDIA GPUs on the PCI bus (see pci.h): one directory per function under
 * /sys/bus/pci/devices, named by its address ("0000:17:00.0"), with its vendor ("0x10de") and
 * class ("0x030200") in files of their own. A device whose files vanish or do not parse is
 * skipped, like a process that exits mid-scan.
 */
#include "proc/pci.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/array.h"
#include "util/file.h"

#define VG_PCI_VENDOR_NVIDIA 0x10deu

/* A hex number of a sysfs attribute ("0x10de\n"): 0 or -1. */
static int vg_pci_hex_attr(int dirfd, const char *name, unsigned long *out)
{
    char buf[32], *end = NULL;
    size_t len = 0;
    if (vg_file_read_small(dirfd, name, buf, sizeof buf, &len) != 0 || len < 3 ||
        strncmp(buf, "0x", 2) != 0)
        return -1;
    errno = 0;
    *out = strtoul(buf + 2, &end, 16);
    if (errno || end == buf + 2 || (*end != '\n' && *end != '\0'))
        return -1;
    return 0;
}

/* "DDDD:BB:DD.F" into d: 0 or -1. */
static int vg_pci_parse_addr(const char *s, struct vg_pci_dev *d)
{
    char tail;
    if (sscanf(s, "%x:%x:%x.%x%c", &d->domain, &d->bus, &d->device, &d->function, &tail) != 4)
        return -1;
    return 0;
}

static int vg_pci_cmp(const void *a, const void *b)
{
    const struct vg_pci_dev *x = a, *y = b;
    unsigned long long kx =
        (unsigned long long)x->domain << 24 | x->bus << 16 | x->device << 8 | x->function;
    unsigned long long ky =
        (unsigned long long)y->domain << 24 | y->bus << 16 | y->device << 8 | y->function;
    return kx < ky ? -1 : kx > ky;
}

int vg_proc_pci_read(const char *sys_root, struct vg_proc_pci *out)
{
    char path[4096];
    size_t cap = 0;
    memset(out, 0, sizeof *out);
    int r = snprintf(path, sizeof path, "%s/bus/pci/devices", sys_root ? sys_root : "/sys");
    if (r < 0 || (size_t)r >= sizeof path)
        return 0;
    int dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return 0;
    DIR *dir = fdopendir(dfd);
    if (!dir) {
        close(dfd);
        return 0;
    }
    struct dirent *e;
    while ((e = readdir(dir))) {
        struct vg_pci_dev d;
        unsigned long vendor, cls;
        if (e->d_name[0] == '.' || vg_pci_parse_addr(e->d_name, &d) != 0)
            continue;
        int fd = openat(dfd, e->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
            continue;
        bool gpu = vg_pci_hex_attr(fd, "vendor", &vendor) == 0 &&
                   vg_pci_hex_attr(fd, "class", &cls) == 0 && vendor == VG_PCI_VENDOR_NVIDIA &&
                   ((cls >> 8) == 0x0300 || (cls >> 8) == 0x0302);
        close(fd);
        if (!gpu)
            continue;
        if (vg_array_grow(&out->devs, &cap, out->n + 1, sizeof *out->devs)) {
            closedir(dir);
            vg_proc_pci_release(out);
            return -ENOMEM;
        }
        out->devs[out->n++] = d;
    }
    closedir(dir);
    if (out->n > 1)
        qsort(out->devs, out->n, sizeof *out->devs, vg_pci_cmp);
    out->known = true;
    return 0;
}

void vg_proc_pci_release(struct vg_proc_pci *p)
{
    free(p->devs);
    memset(p, 0, sizeof *p);
}
