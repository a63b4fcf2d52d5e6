/*
 * Fuzz target: /proc/PID/stat (vg_proc_parse_stat and the state-only parser used for threads).
 * comm is whatever a process put there, so anything goes. Invariants: success sets the known
 * bit and every field from the text; failure leaves the struct untouched; parsing into a
 * struct that already holds a comm frees it (LeakSanitizer checks).
 */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "proc/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = fuzz_copy(data, size);
    struct vg_proc p;
    memset(&p, 0, sizeof p);

    int rc = vg_proc_parse_stat(buf, size, &p);
    if (rc == 0) {
        FUZZ_CHECK(p.known == VG_PROC_K_STAT);
        FUZZ_CHECK(p.comm != NULL);
        FUZZ_CHECK(strlen(p.comm) < size);
        FUZZ_CHECK(p.pid >= 0 && p.ppid >= 0 && p.pgid >= 0 && p.sid >= 0);
        FUZZ_CHECK(memchr(buf, p.state, size) != NULL);
        /* The same text again into the filled struct: comm is replaced, not leaked. */
        pid_t pid = p.pid;
        FUZZ_CHECK(vg_proc_parse_stat(buf, size, &p) == 0);
        FUZZ_CHECK(p.pid == pid);

        char state = 0;
        FUZZ_CHECK(vg_proc_parse_stat_state(buf, size, &state) == 0);
        FUZZ_CHECK(state == p.state);
    } else {
        FUZZ_CHECK(rc == -EINVAL || rc == -ENOMEM);
        FUZZ_CHECK(p.known == 0 && p.comm == NULL && p.pid == 0);
        char state = 0;
        (void)vg_proc_parse_stat_state(buf, size, &state);
    }
    vg_proc_release(&p);
    free(buf);
    return 0;
}
