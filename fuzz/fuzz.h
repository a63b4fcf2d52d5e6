/*
 * Shared by the libFuzzer targets in fuzz/ (see docs/reliability.md): the entry point's
 * prototype (the build uses -Wmissing-prototypes) and FUZZ_CHECK, which aborts with the failed
 * invariant so libFuzzer saves the input as a crash. Targets copy their input into buffers of
 * the exact size the parser is told, so AddressSanitizer sees any read past the end.
 */
#ifndef VG_FUZZ_H
#define VG_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_CHECK(cond)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #cond);          \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* A heap copy of data[0..size) with a NUL after it (for parsers that take C strings); the NUL
 * is the only byte past size, so reading beyond it is still caught. */
static inline char *fuzz_cstr(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s)
        abort();
    for (size_t i = 0; i < size; i++)
        s[i] = (char)data[i];
    s[size] = '\0';
    return s;
}

/* A heap copy of exactly size bytes, not terminated (for size 0, a zero-byte allocation, so
 * that even one byte read is caught); never NULL. */
static inline char *fuzz_copy(const uint8_t *data, size_t size)
{
    char *s = malloc(size);
    if (!s)
        s = malloc(1);
    if (!s)
        abort();
    for (size_t i = 0; i < size; i++)
        s[i] = (char)data[i];
    return s;
}

#endif
