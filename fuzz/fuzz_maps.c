/*
 * Fuzz target: /proc/PID/maps (vg_proc_parse_maps: which GPU libraries are loaded). Paths are
 * file names any process can create (a library called "libcuda.so.1 (deleted)", spaces,
 * newlines in names). Invariants: only VG_LIB_* bits come out; a file with no '/' in it names
 * no library; failure leaves the struct untouched.
 */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "proc/proc.h"

#define ALL_LIBS                                                                                   \
    (VG_LIB_CUDA | VG_LIB_CUDART | VG_LIB_NCCL | VG_LIB_TORCH_CUDA | VG_LIB_TENSORFLOW |           \
     VG_LIB_JAX | VG_LIB_NVML)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = fuzz_copy(data, size);
    struct vg_proc p;
    memset(&p, 0, sizeof p);

    int rc = vg_proc_parse_maps(buf, size, &p);
    if (rc == 0) {
        FUZZ_CHECK(p.known == VG_PROC_K_MAPS);
        FUZZ_CHECK((p.libs & ~(unsigned)ALL_LIBS) == 0);
        if (!memchr(buf, '/', size))
            FUZZ_CHECK(p.libs == 0);
        for (unsigned bit = 1; bit <= VG_LIB_NVML; bit <<= 1)
            if (p.libs & bit)
                FUZZ_CHECK(vg_lib_name(bit) != NULL);
    } else {
        FUZZ_CHECK(rc == -EINVAL);
        FUZZ_CHECK(p.known == 0 && p.libs == 0);
    }
    free(buf);
    return 0;
}
