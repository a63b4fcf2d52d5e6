/*
 * PCI addresses in the kernel log's and NVML's forms (pci.h).
 */
#include "util/pci.h"

#include <errno.h>
#include <stdio.h>

#include "util/parse.h"

/* Hex digits s[0..n) (1 to max of them) into *v. */
static bool vg_pci_field(const char *s, size_t n, size_t max, uint32_t *v)
{
    if (n == 0 || n > max)
        return false;
    uint32_t x = 0;
    for (size_t i = 0; i < n; i++) {
        int d = vg_parse_hex_digit(s[i]);
        if (d < 0)
            return false;
        x = x << 4 | (uint32_t)d;
    }
    *v = x;
    return true;
}

int vg_pci_parse(const char *s, size_t n, struct vg_pci_addr *out)
{
    size_t colon[3], ncolon = 0, dot = n;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == ':') {
            if (ncolon == 2 || dot != n)
                return -EINVAL;
            colon[ncolon++] = i;
        } else if (s[i] == '.') {
            if (dot != n)
                return -EINVAL;
            dot = i;
        }
    }
    if (ncolon == 0)
        return -EINVAL;
    struct vg_pci_addr a = {0};
    uint32_t bus, dev;
    size_t bus_at = 0;
    if (ncolon == 2) {
        if (!vg_pci_field(s, colon[0], 8, &a.domain))
            return -EINVAL;
        bus_at = colon[0] + 1;
    }
    size_t c = colon[ncolon - 1];
    if (!vg_pci_field(s + bus_at, c - bus_at, 2, &bus) ||
        !vg_pci_field(s + c + 1, dot - c - 1, 2, &dev) || dev > 0x1f)
        return -EINVAL;
    if (dot != n) {
        if (n - dot != 2 || s[dot + 1] < '0' || s[dot + 1] > '7')
            return -EINVAL;
        a.fn_known = true;
        a.fn = (uint8_t)(s[dot + 1] - '0');
    }
    a.bus = (uint8_t)bus;
    a.dev = (uint8_t)dev;
    *out = a;
    return 0;
}

bool vg_pci_same_device(const struct vg_pci_addr *a, const struct vg_pci_addr *b)
{
    return a->domain == b->domain && a->bus == b->bus && a->dev == b->dev;
}

void vg_pci_format(const struct vg_pci_addr *a, char *out, size_t n)
{
    if (!n)
        return;
    int w = snprintf(out, n, "%04x:%02x:%02x", (unsigned)a->domain, a->bus, a->dev);
    if (w < 0 || (size_t)w >= n)
        out[0] = '\0'; /* a buffer below VG_PCI_TEXT_MAX: nothing rather than a cut address */
}
