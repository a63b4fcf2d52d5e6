/*
 * The GPU reset (see reset.h): finding nvidia-smi, the checks before each reset, running it.
 */
#include "act/reset.h"

#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "model/visible.h"
#include "proc/signal.h"
#include "util/array.h"

extern char **environ;

/* A reset takes seconds; a wedged one is reported, never killed half-way. */
#define VG_RESET_WAIT_MS 300000u

int vg_reset_needed(const struct vg_plan *plan, const struct vg_snapshot *before,
                    const struct vg_snapshot *snap, uint64_t min, struct vg_reset **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    size_t cap = 0;
    for (size_t i = 0; i < plan->nscope; i++) {
        const struct vg_gpu *bg = &before->gpus.gpus[plan->scope[i]];
        if (!(bg->known & VG_GPU_K_UUID))
            continue;
        for (size_t k = 0; k < snap->gpus.ngpus; k++) {
            const struct vg_gpu *g = &snap->gpus.gpus[k];
            if (!(g->known & VG_GPU_K_UUID) || strcmp(g->uuid, bg->uuid) != 0 ||
                !vg_plan_reset_needed(snap, k, min))
                continue;
            if (VG_ARRAY_GROW(*out, cap, *n + 1))
                return -ENOMEM;
            (*out)[*n] = (struct vg_reset){
                .uuid = bg->uuid, .index = g->index, .held = snap->per_gpu[k].unexplained_bytes};
            (*n)++;
        }
    }
    return 0;
}

/* The nvidia-smi PATH would run, or NULL. */
static char *vg_reset_find_smi(void)
{
    const char *path = getenv("PATH");
    if (!path || !*path)
        path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
    while (*path) {
        size_t n = strcspn(path, ":");
        char *cand = NULL;
        if (n && asprintf(&cand, "%.*s/nvidia-smi", (int)n, path) > 0) {
            struct stat stt;
            if (stat(cand, &stt) == 0 && S_ISREG(stt.st_mode) && access(cand, X_OK) == 0)
                return cand;
        }
        free(cand);
        path += n;
        if (*path == ':')
            path++;
    }
    return NULL;
}

/* Run nvidia-smi --gpu-reset -i UUID, its output on our stderr (stdout may carry JSON), and
 * record its exit status (-SIG when a signal ended it) or why it could not be run. */
static void vg_reset_one(struct vg_reset *r, const char *smi)
{
    char *argv[] = {(char *)"nvidia-smi", (char *)"--gpu-reset", (char *)"-i", (char *)r->uuid,
                    NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, STDERR_FILENO, STDOUT_FILENO);
    pid_t pid;
    fflush(NULL);
    int rc = posix_spawn(&pid, smi, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc) {
        r->refused = "nvidia-smi could not be started";
        return;
    }
    int fd, exited = 0;
    if (vg_proc_pidfd_open(pid, &fd) == 0) {
        exited = vg_proc_pidfd_exited(fd, VG_RESET_WAIT_MS);
        close(fd);
    } else {
        exited = 1; /* no pidfd (old kernel): wait plainly */
    }
    if (exited != 1) {
        r->refused = "nvidia-smi did not finish within 5 minutes; it is left running";
        return;
    }
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    r->attempted = true;
    r->exit_status = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? -WTERMSIG(st) : -1;
}

void vg_reset_run(struct vg_reset *rs, size_t n, vg_reset_look_fn look, void *ctx)
{
    if (!n)
        return;
    char *smi = NULL;
    for (size_t i = 0; i < n; i++) {
        struct vg_reset *r = &rs[i];
        if (getuid() != 0 || geteuid() != 0) {
            r->refused = "a GPU reset needs root";
            continue;
        }
        /* nvidia-smi -i takes a comma-separated list: a driver's UUID with a comma in it would
         * reset other GPUs than this one. */
        if (!vg_visible_uuid_ok(r->uuid)) {
            r->refused = "its UUID is not a well-formed UUID: nvidia-smi -i could read it as "
                         "other GPUs";
            continue;
        }
        if (!smi && !(smi = vg_reset_find_smi())) {
            r->refused = "nvidia-smi is not in PATH";
            continue;
        }
        struct vg_snapshot *now = NULL;
        if (look(ctx, &now)) {
            r->refused = "could not look again before the reset";
            continue;
        }
        bool ok = now->driver_ok, found = false;
        for (size_t k = 0; ok && k < now->gpus.ngpus; k++) {
            const struct vg_gpu *g = &now->gpus.gpus[k];
            if (!(g->known & VG_GPU_K_UUID) || strcmp(g->uuid, r->uuid) != 0)
                continue;
            found = true;
            size_t first, count;
            vg_snap_gpu_holdings(now, k, &first, &count);
            if (count) {
                r->refused = "a process holds the GPU again: not reset";
                ok = false;
            }
        }
        if (!now->driver_ok)
            r->refused = "the driver's view is unavailable: cannot check that the GPU is free";
        else if (!found)
            r->refused = "the GPU is gone from the driver's list";
        vg_snap_free(now);
        if (ok && found)
            vg_reset_one(r, smi);
    }
    free(smi);
}
