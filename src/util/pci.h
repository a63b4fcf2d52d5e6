/*
 * PCI addresses as the driver's two views write them: the kernel log's "0000:3b:00" (domain,
 * bus, device; Xid lines) and NVML's "00000000:3B:00.0" (an eight-digit domain and the
 * function). Parsed into numbers so that the two compare equal, whatever the case, the width
 * of the domain or the presence of a function. Nothing here allocates.
 */
#ifndef VG_UTIL_PCI_H
#define VG_UTIL_PCI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct vg_pci_addr {
    uint32_t domain;
    uint8_t bus, dev;
    bool fn_known; /* the text named a function ("....0") */
    uint8_t fn;
};

/* "[DOMAIN:]BUS:DEV[.FN]" over exactly n bytes: DOMAIN 1 to 8 hex digits (0 when left out),
 * BUS and DEV 1 or 2, FN one octal digit (0-7). 0, or -EINVAL with *out untouched. */
int vg_pci_parse(const char *s, size_t n, struct vg_pci_addr *out);

/* Whether a and b name the same device (domain, bus and device; functions are not compared:
 * the kernel log names the device, NVML its function 0). */
bool vg_pci_same_device(const struct vg_pci_addr *a, const struct vg_pci_addr *b);

/* "0000:3b:00" (the kernel log's form, a domain of more than four digits in full) into out
 * (at least VG_PCI_TEXT_MAX bytes). */
#define VG_PCI_TEXT_MAX 20
void vg_pci_format(const struct vg_pci_addr *a, char *out, size_t n);

#endif
