/* kernels/kview.h -- view and operand helpers (kview.c) shared by the elementwise-style
** kernel files (k_eltwise.c, k_act.c, k_select.c). Internal to kernels/; nothing
** here allocates except through bs_kstate_tmp. */
#ifndef BS_KERNELS_KVIEW_H
#define BS_KERNELS_KVIEW_H

#include <math.h>
#include "kernel.h"

/* Read-all-then-write: each view in[0..n) (ndim 0 entries are skipped) that overlaps one
** of k's outputs, other than by being exactly it (bs_view_same, and the output never
** touches a byte twice), is replaced by a dense copy with the same dtype and shape in
** scratch slot slot0 + j. E_NOMEM when the scratch cannot grow. */
bs_status bs_kview_detach(bs_kctx *k, bs_view *in, int32_t n, int slot0, bs_error *err);

/* Collapse contiguous free dimensions (1..) and drop free extents of 1, keeping dim 0,
** so a cursor's idx[0] stays the partition index. Leaves ndim >= 2. */
void bs_kview_normalize_free(bs_view *v);

/* out[0] and in[0..nt) must be access patterns (E_PROGRAM) with numeric dtypes
** (E_UNSUPPORTED), each with out[0]'s element count (E_SIM, naming both counts); an
** in[j] with bit j of imm_ok set may instead be an immediate (ndim 0). `what` prefixes
** messages. */
bs_status bs_kview_check(const bs_kctx *k, const bs_view *in, int32_t nt, uint32_t imm_ok,
                         const char *what, bs_error *err);

/* The value of scalar operand ins[j] for each of np partitions, as fp32 into f and/or as
** integers (RNE) into i (either may be NULL; for a view only f is filled when both are
** given): k->imm[j] broadcast when ins[j] is an immediate or register, `dflt` when j >=
** k->nin, else the view's elements in row-major order, which must number np (E_SIM). */
bs_status bs_kscalar_values(const bs_kctx *k, int32_t j, double dflt, int64_t np, float *f,
                            int64_t *i, const char *what, bs_error *err);

/* fp32 -> integer for bit-vector ops met on the fp32 path: RNE, NaN -> 0, saturating. */
static inline int64_t f2i(double x)
{
    if (x != x)
        return 0;
    if (x >= 9223372036854775807.0)
        return INT64_MAX;
    if (x <= -9223372036854775808.0)
        return INT64_MIN;
    return (int64_t)nearbyint(x);
}

#endif
