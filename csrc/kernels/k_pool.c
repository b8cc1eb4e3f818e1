/* kernels/k_pool.c -- Pool (docs/spec/machine-model.md §6.1; PoolFunctionType, §5).
**
** Pool always folds the two innermost dims of in[0]'s access pattern (the window; any
** `axis` key is ignored, as the machine model says): for in[0] = [P, ..., a, b] each
** output element folds one a x b window, in row-major order, rounded to fp32 at every
** step, and out[0] holds one element per window (in row-major order of the outer dims).
**     Max: acc = -FLT_MAX; acc = fmaxf(acc, x)   (NaN elements are skipped by fmaxf)
**     Avg: acc = 0; acc = acc + x; result = acc * (1 / (a * b))
** Inputs of any numeric dtype are decoded to fp32; the result is cast to out[0]'s dtype.
** The whole input is gathered before the output is written (overlap-safe). */
#include <float.h>
#include <math.h>
#include "kernel.h"

static void pool_max(const float *x, int64_t outer, int64_t win, float *o)
{
    for (int64_t r = 0; r < outer; r++) {
        const float *w = x + r * win;
        float acc = -FLT_MAX;
        for (int64_t j = 0; j < win; j++)
            acc = fmaxf(acc, w[j]);
        o[r] = acc;
    }
}

static void pool_avg(const float *x, int64_t outer, int64_t win, float *o)
{
    float inv = 1.0f / (float)win;
    for (int64_t r = 0; r < outer; r++) {
        const float *w = x + r * win;
        float acc = 0.0f;
        for (int64_t j = 0; j < win; j++)
            acc = acc + w[j];
        o[r] = acc * inv;
    }
}

/* Pool: i0 func (BS_POOL_*). E_PROGRAM without access patterns, E_UNSUPPORTED for packed
** dtypes or an unknown func, E_SIM when in[0] has no two free dims or out[0] does not
** hold one element per window. */
bs_status bs_k_Pool(bs_kctx *k, bs_error *err)
{
    int64_t func = BS_PI(k->insn, Pool, func);
    const bs_view *in = &k->in[0], *out = &k->out[0];
    if (k->nin < 1 || in->ndim == 0)
        return bs_errorf(err, BS_E_PROGRAM, "Pool needs an access pattern as ins[0]");
    if (k->nout < 1 || out->ndim == 0)
        return bs_errorf(err, BS_E_PROGRAM, "Pool needs an access pattern as outs[0]");
    if (!bs_dt_numeric(in->dtype) || !bs_dt_numeric(out->dtype))
        return bs_errorf(err, BS_E_UNSUPPORTED, "Pool cannot compute on %s -> %s (ins[0] -> "
                         "outs[0])", bs_dtinfo_table[in->dtype].name,
                         bs_dtinfo_table[out->dtype].name);
    if (func != BS_POOL_Max && func != BS_POOL_Avg)
        return bs_errorf(err, BS_E_UNSUPPORTED, "Pool: func %lld is not a PoolFunctionType",
                         (long long)func);
    if (in->ndim < 3)
        return bs_errorf(err, BS_E_SIM, "Pool: ins[0] has %d access-pattern dims; it needs the "
                         "partition dim and at least two free dims (the window is the two "
                         "innermost)", (int)in->ndim);
    int64_t win = in->num[in->ndim - 1] * in->num[in->ndim - 2];
    int64_t outer = win > 0 ? in->count / win : 0;
    if (out->count != outer)
        return bs_errorf(err, BS_E_SIM, "Pool: ins[0] has %lld windows of %lld x %lld elements, "
                         "but outs[0] has %lld elements (one per window)", (long long)outer,
                         (long long)in->num[in->ndim - 2], (long long)in->num[in->ndim - 1],
                         (long long)out->count);
    if (outer == 0)
        return BS_OK;
    float *x = bs_kstate_tmp(k->ks, BS_KSLOT_A, (size_t)in->count * sizeof(float));
    float *o = bs_kstate_tmp(k->ks, BS_KSLOT_B, (size_t)outer * sizeof(float));
    if (x == NULL || o == NULL)
        return bs_errorf(err, BS_E_NOMEM, "Pool: out of memory for %lld elements",
                         (long long)in->count);
    bs_view_to_f32(x, in);
    if (func == BS_POOL_Max)
        pool_max(x, outer, win, o);
    else
        pool_avg(x, outer, win, o);
    bs_view_from_f32(out, o);
    return BS_OK;
}
