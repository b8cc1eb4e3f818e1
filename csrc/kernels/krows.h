/* kernels/krows.h -- operands as dense fp32 rows, one per partition (krows.c).
** For the per-partition kernels (batch norm, scans, top-8): an operand's access pattern
** is read as P = num[0] rows of F = count / P elements in row-major AP order. Inputs are
** gathered into scratch before any output is written, so overlaps are safe. */
#ifndef BS_KERNELS_KROWS_H
#define BS_KERNELS_KROWS_H

#include "kernel.h"

typedef struct bs_rows {
    float  *v;        /* P * F values, row-major */
    int64_t P, F;
} bs_rows;

/* ins[j] gathered into scratch slot `slot` as fp32 rows. E_PROGRAM when ins[j] is missing
** or not an access pattern, E_UNSUPPORTED for a packed dtype, E_NOMEM. */
bs_status bs_rows_in(bs_kctx *k, int32_t j, int slot, bs_rows *r, const char *what,
                     bs_error *err);
/* Check out[j] exists, is numeric and holds P rows of F elements (E_SIM naming both). */
bs_status bs_rows_out_check(const bs_kctx *k, int32_t j, int64_t P, int64_t F,
                            const char *what, bs_error *err);
/* Scalar operand ins[j] per partition (imm/register broadcast, a [P,1] view, or `dflt`
** when absent) into scratch slot `slot`; *out points at P floats. */
bs_status bs_rows_scalar(bs_kctx *k, int32_t j, double dflt, int64_t P, int slot,
                         const float **out, const char *what, bs_error *err);
/* The identity of a running op1 (add/subtract 0, mult 1, max -inf, min +inf); 0 and
** E_UNSUPPORTED for any other op. */
bs_status bs_rows_identity(int32_t op, float *id, const char *what, bs_error *err);

/* The accumulator start value of partition p for command `acc` (BS_ACC_*): the reset
** value `id` for Idle/Zero/ZeroAccumulate, the engine accumulator `eng[p]` for
** Accumulate/AddAccumulate, `load[p]` for LoadAccumulate. */
static inline float bs_acc_start(int64_t acc, float id, const float *eng, const float *load,
                                 int64_t p)
{
    if (acc == BS_ACC_Accumulate || acc == BS_ACC_AddAccumulate)
        return eng[p];
    if (acc == BS_ACC_LoadAccumulate)
        return load[p];
    return id;
}
/* E_UNSUPPORTED unless acc is an EngineAccumulationType; E_SIM when accumulating over
** more partitions than the engine has. */
bs_status bs_acc_check(int64_t acc, int64_t P, const char *what, bs_error *err);

/* The fused TensorScalarPtr forms (k_scan.c), chosen by its is_* flags. */
bs_status bs_tsp_tensor_tensor_scan(bs_kctx *k, bs_error *err);
bs_status bs_tsp_scalar_tensor_tensor(bs_kctx *k, bs_error *err);
bs_status bs_tsp_tensor_scalar_addr(bs_kctx *k, bs_error *err);

#endif
