/* kernels/kstate.h -- the kernel scratch room: per-core state kernels keep across
** instructions (scratch buffers, engine accumulators, generators) and the scratch slots.
** The VM owns a bs_kstate per core and hands it to every kernel (bs_kctx.ks). */
#ifndef BS_KERNELS_KSTATE_H
#define BS_KERNELS_KSTATE_H

#include "../core/common.h"

/* The scratch slots of bs_kstate_tmp. A buffer stays valid until its slot is asked for
** again, so the buffers one instruction holds at once take distinct slots; a helper that
** fills scratch (bs_rows_in, bs_rows_scalar, bs_kview_detach: slot0 + j, bs_matmul_f32)
** takes its slot from the caller. The VM uses them too, between kernels: operand gathers
** (vm/gather.c: B + k for index operand k, A for staging), the collective member list
** (D). */
typedef enum bs_kslot {
    BS_KSLOT_A,
    BS_KSLOT_B,
    BS_KSLOT_C,
    BS_KSLOT_D,
    BS_KSLOT__COUNT
} bs_kslot;

/* Per-core state kernels may use across instructions. */
typedef struct bs_kstate {
    void   *tmp[BS_KSLOT__COUNT];       /* scratch buffers, owned; grown by bs_kstate_tmp */
    size_t  tmp_size[BS_KSLOT__COUNT];
    /* The engine accumulators (kaccum.h): one fp32 lane per partition per engine. */
    float   pool_acc[BS_NUM_PARTITIONS];  /* Pool (GpSimd) */
    float   act_acc[BS_NUM_PARTITIONS];   /* Activation (ScalarE) */
    float   dve_acc[BS_NUM_PARTITIONS];   /* DVE (VectorE) */
    uint8_t acc_mark[3];                  /* per engine (Pool, Activation, DVE): BS_ACCM_* */
    float   acc_row[BS_NUM_PARTITIONS];   /* scratch of one accumulating instruction */
    float   acc_load[BS_NUM_PARTITIONS];
    struct bs_rng *rng;       /* owned; the core's generators (kernels/rng.h) */
    struct bs_pool_ref *pool; /* borrowed; the simulator's worker threads (core/pool.h) */
} bs_kstate;

/* Scratch buffer `slot` of at least `bytes` bytes, valid until the next call with the
** same slot. NULL when out of memory (return BS_E_NOMEM). */
void *bs_kstate_tmp(bs_kstate *ks, bs_kslot slot, size_t bytes);
/* Free the scratch buffers (the core's fini). */
void  bs_kstate_fini(bs_kstate *ks);

#endif
