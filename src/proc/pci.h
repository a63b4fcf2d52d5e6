/*
 * The NVIDIA GPUs on the PCI bus, as the kernel lists them under /sys/bus/pci/devices: what the
 * host has, whatever the driver shows, so that a GPU that fell off or failed to initialise can be
 * told missing (rules: gpu-missing).
 *
 * Ownership: struct vg_proc_pci owns its array; vg_proc_pci_release() frees it. known is false
 * when the directory could not be read (no sysfs, a container without it): then nothing is
 * known, which is not "no GPUs".
 */
#ifndef VG_PROC_PCI_H
#define VG_PROC_PCI_H

#include <stdbool.h>
#include <stddef.h>

struct vg_pci_dev {
    unsigned domain, bus, device, function;
};

struct vg_proc_pci {
    bool known;
    struct vg_pci_dev *devs; /* sorted by address */
    size_t n;
};

/* Read sys_root/bus/pci/devices (sys_root NULL: /sys): every device with vendor 0x10de and class
 * 0x0300xx (VGA) or 0x0302xx (3D controller). 0, or -ENOMEM (out left empty); a directory that
 * cannot be read leaves out->known false and returns 0. */
int vg_proc_pci_read(const char *sys_root, struct vg_proc_pci *out);
void vg_proc_pci_release(struct vg_proc_pci *p);

#endif
