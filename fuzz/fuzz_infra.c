/*
 * Fuzz target: what a process claims to be and what it runs (act/infra.h, vg_infra_judge):
 * its comm and argv[0] (the hints a process chooses) and its executable's path, owner, mode
 * and the facts proc/exe.c reads, all from the input. Invariants: PROVEN only with every fact
 * for it (the program's name, root's file writable by no one else, root's directories, the
 * path intact) and none against it; never PROVEN for a path under a directory users write
 * (/tmp, /home, /dev/shm ...) nor with a basename that is not the hinted program's; NONE
 * names no program and carries no facts; a process that claims nothing is NONE whatever it
 * runs.
 *
 * Input: byte 0 the known bits and booleans, byte 1 the mode's write bits, then comm, cmdline
 * and exe separated by NUL bytes.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "act/infra.h"
#include "fuzz.h"

static const char *next_field(const char **p, const char *end)
{
    const char *s = *p;
    const char *nul = memchr(s, '\0', (size_t)(end - s));
    *p = nul ? nul + 1 : end;
    return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    char *buf = malloc(size + 1); /* every field NUL-terminated, the last one too */
    if (!buf)
        abort();
    memcpy(buf, data, size);
    buf[size] = '\0';
    const char *p = buf + 2, *end = buf + size;
    const char *comm = next_field(&p, end);
    const char *cmdline = p < end ? next_field(&p, end) : "";
    const char *exe = p < end ? next_field(&p, end) : NULL;
    struct vg_proc proc;
    memset(&proc, 0, sizeof(proc));
    unsigned b = data[0];
    proc.comm = (char *)comm;
    proc.cmdline = (char *)cmdline;
    proc.known = VG_PROC_K_STAT | VG_PROC_K_CMDLINE;
    if (exe && (b & 1)) {
        proc.exe = (char *)exe;
        proc.known |= VG_PROC_K_EXE;
        proc.exe_deleted = b & 2;
    }
    if (b & 4) {
        proc.known |= VG_PROC_K_EXE_STAT;
        proc.exe_uid = (b & 8) ? 1000 : 0;
        proc.exe_mode = S_IFREG | 0755u | (data[1] & 022u);
    }
    if (b & 16) {
        proc.known |= VG_PROC_K_EXE_PATH;
        proc.exe_path_same = b & 32;
        proc.exe_dirs_trusted = b & 64;
    }
    struct vg_infra inf;
    vg_infra_judge(&proc, &inf);
    if (inf.kind == VG_INFRA_NONE) {
        FUZZ_CHECK(inf.name == NULL);
    } else {
        FUZZ_CHECK(inf.name != NULL);
    }
    if (inf.kind == VG_INFRA_PROVEN) {
        unsigned need = VG_INFRA_F_EXE_PROGRAM | VG_INFRA_F_EXE_ROOT | VG_INFRA_F_DIRS_ROOT |
                        VG_INFRA_F_EXE_INTACT;
        unsigned against = VG_INFRA_F_EXE_UNKNOWN | VG_INFRA_F_EXE_OTHER |
                           VG_INFRA_F_EXE_UNTRUSTED | VG_INFRA_F_DIRS_UNTRUSTED |
                           VG_INFRA_F_EXE_DELETED;
        FUZZ_CHECK((inf.facts & need) == need && !(inf.facts & against));
        FUZZ_CHECK(proc.exe && !proc.exe_deleted && proc.exe_uid == 0 && !(proc.exe_mode & 022u) &&
                   proc.exe_path_same && proc.exe_dirs_trusted);
        static const char *const user[] = {"/tmp/", "/var/tmp/", "/dev/shm/", "/home/"};
        for (size_t i = 0; i < sizeof(user) / sizeof(user[0]); i++)
            FUZZ_CHECK(strncmp(proc.exe, user[i], strlen(user[i])) != 0);
    }
    free(buf);
    return 0;
}
