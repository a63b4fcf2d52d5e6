/*
 * The host the unit tests of `vramguard top` share (test_top.c, test_top_list.c): three holders
 * on two GPUs, a launcher's two ranks and an orphaned worker, and its frame (rules/top.h).
 */
#ifndef VG_TEST_TOP_FIXTURE_H
#define VG_TEST_TOP_FIXTURE_H

#include "fixture.h"
#include "rules/rules.h"
#include "rules/top.h"

#define GiB (1ull << 30)
#define MiB (1ull << 20)

/*
 * GPU 0 (minor 0, 80 GiB, 512 MiB reserved, 28 GiB used):
 *   100 an idle orphaned DataLoader worker of a dead job (fd only), alice: orphan-holder
 *   200 a live job's rank 0, 20 GiB, 40% SM, alice, parent 150 (torchrun, holds nothing)
 *   201 the same job's rank 1, 8 GiB on GPU 1 and a 300 MiB stray context on GPU 0, bob
 * GPU 1 (minor 1, 80 GiB, 8 GiB used): 201.
 */
static inline struct vg_snapshot *host(void)
{
    struct vg_gpu_list l;
    vg_gpu_list_init(&l);
    struct vg_proc_table t;
    vg_proc_table_init(&t);
    fx_gpu(&l, "GPU-aaaaaaaa-0000", "NVIDIA A100-SXM4-80GB", 0, 80 * GiB,
           20 * GiB + 300 * MiB + 7 * GiB, 512 * MiB);
    fx_gpu(&l, "GPU-bbbbbbbb-0000", "NVIDIA A100-SXM4-80GB", 1, 80 * GiB, 8 * GiB, 512 * MiB);
    fx_gproc(&l.gpus[0], 200, 20 * GiB, VG_PTYPE_COMPUTE);
    fx_gproc(&l.gpus[0], 201, 300 * MiB, VG_PTYPE_COMPUTE);
    fx_gproc(&l.gpus[1], 201, 8 * GiB, VG_PTYPE_COMPUTE);
    fx_util(&l.gpus[0], 200, 40);

    struct vg_proc *p = fx_proc(&t, 100, "pt_data_worker", "python train.py", 'S');
    p->pgid = p->sid = 99;
    p->start_ticks = 1000;
    fx_activity(p, 500, 0);
    fx_fd(p, 0);
    p = fx_proc(&t, 200, "python", "python train.py --rank 0", 'R');
    p->ppid = 150;
    p->parent_alive = true;
    p->pgid = p->sid = 150;
    p->start_ticks = 100;
    fx_activity(p, 1000, 950);
    p->known |= VG_PROC_K_ENV | VG_PROC_K_MAPS;
    p->libs = VG_LIB_CUDA | VG_LIB_NCCL | VG_LIB_TORCH_CUDA;
    p->env[VG_ENV_CUDA_VISIBLE_DEVICES] = fx_strdup("0,1");
    p->env[VG_ENV_LOCAL_RANK] = fx_strdup("0");
    fx_fd(p, 0);
    p = fx_proc(&t, 201, "python", "python train.py --rank 1", 'R');
    p->ppid = 150;
    p->parent_alive = true;
    p->pgid = p->sid = 150;
    p->uid = 1001;
    free(p->user);
    p->user = fx_strdup("bob");
    p->env[VG_ENV_CUDA_VISIBLE_DEVICES] = fx_strdup("0,1");
    p->env[VG_ENV_LOCAL_RANK] = fx_strdup("1");
    fx_fd(p, 0);
    fx_fd(p, 1);
    return fx_assemble(&l, &t);
}

static inline struct vg_top_frame *frame_of(struct vg_snapshot *snap, struct vg_top_history *hist)
{
    struct vg_findings fs;
    vg_findings_init(&fs);
    struct vg_rule_opts ro;
    vg_rule_opts_init(&ro);
    ro.check_shell = false;
    struct vg_err err = VG_ERR_INIT;
    assert_int_equal(vg_rules_run(snap, &ro, &fs, &err), 0);
    struct vg_top_build_opts o = {.now_ticks = 100 + 3600 * 100, .clk_tck = 100, .page_size = 4096};
    struct vg_top_frame *f = NULL;
    assert_int_equal(vg_top_frame_build(snap, &fs, false, &o, hist, &f), 0);
    assert_non_null(f);
    return f;
}

static inline struct vg_top_frame *frame(struct vg_top_history *hist)
{
    return frame_of(host(), hist);
}

#endif
