/* kernels/k_gather.c -- index computations with NKI doc semantics (docs/spec/nki-isa-semantics.md
** §3.35, §3.36, test vectors §4 items 1-2): GetSequenceBounds and NonzeroWithCount.
** Values decode to fp32 (ids and indices stay exact below 2^24) and encode with the cast
** rules. */
#include "kernel.h"

static int64_t elem_off(const bs_view *v, int64_t e)
{
    int64_t off = 0;
    for (int32_t d = v->ndim - 1; d >= 0; d--) {
        off += (e % v->num[d]) * v->stride[d];
        e /= v->num[d];
    }
    return off;
}

/* out (1, 2, n): row 0 the start, row 1 the end (exclusive) of each element's run of
** equal segment ids in in0 (1, n); id 0 is padding: start n, end -1. */
bs_status bs_k_GetSequenceBounds(bs_kctx *k, bs_error *err)
{
    const bs_view *in = &k->in[0], *out = &k->out[0];
    int64_t n, start = 0;
    if (k->nin < 1 || k->nout < 1 || in->ndim == 0 || out->ndim == 0)
        return bs_errorf(err, BS_E_PROGRAM, "GetSequenceBounds: needs ins[0] and outs[0]");
    n = in->count;
    if (in->num[0] != 1 || out->count != 2 * n)
        return bs_errorf(err, BS_E_SIM, "GetSequenceBounds: ins[0] must be one partition of n "
                         "ids and outs[0] hold 2n values (start row, end row); got %lld ids over "
                         "%lld partitions, %lld outputs", (long long)n, (long long)in->num[0],
                         (long long)out->count);
    if (!bs_dt_numeric(in->dtype) || !bs_dt_numeric(out->dtype))
        return bs_errorf(err, BS_E_UNSUPPORTED, "GetSequenceBounds: packed dtypes");
    for (int64_t i = 0; i <= n; i++) {
        float id = i < n ? bs_dt_load_f32(in->data + elem_off(in, i), in->dtype) : 0;
        float prev = i > 0 ? bs_dt_load_f32(in->data + elem_off(in, i - 1), in->dtype) : 0;
        if (i > 0 && (i == n || id != prev)) {     /* the run [start, i) ends */
            for (int64_t j = start; j < i; j++) {
                int pad = prev == 0.0f;
                bs_dt_store_f32_cast(out->data + elem_off(out, j), out->dtype,
                                pad ? (float)n : (float)start, out->cast);
                bs_dt_store_f32_cast(out->data + elem_off(out, n + j), out->dtype,
                                pad ? -1.0f : (float)i, out->cast);
            }
            start = i;
        }
    }
    return BS_OK;
}

/* Partitions 0, 16, ..., 112 of in0 (F values): out row := the indices of its nonzeros
** + index_offset, padding_val up to F, then the count (F + 1 values). */
_Static_assert(BS_Pi_NonzeroWithCount_index_offset == BS_Pi_Nonzero_index_offset &&
               BS_Pf_NonzeroWithCount_padding_val == BS_Pf_Nonzero_padding_val, "Nonzero slots");

bs_status bs_k_NonzeroWithCount(bs_kctx *k, bs_error *err)
{
    const bs_view *in = &k->in[0], *out = &k->out[0];
    int64_t P, F, FO, off = BS_PI(k->insn, NonzeroWithCount, index_offset);
    float pad = (float)BS_PF(k->insn, NonzeroWithCount, padding_val);
    if (k->nin < 1 || k->nout < 1 || in->ndim == 0 || out->ndim == 0)
        return bs_errorf(err, BS_E_PROGRAM, "NonzeroWithCount: needs ins[0] and outs[0]");
    P = in->num[0];
    F = in->count / P;
    FO = out->count / out->num[0];
    if (out->num[0] != P || FO < F + 1)
        return bs_errorf(err, BS_E_SIM, "NonzeroWithCount: outs[0] needs the %lld partitions of "
                         "ins[0] and at least %lld values each (F + 1), has %lld x %lld",
                         (long long)P, (long long)(F + 1), (long long)out->num[0], (long long)FO);
    if (!bs_dt_numeric(in->dtype) || !bs_dt_numeric(out->dtype))
        return bs_errorf(err, BS_E_UNSUPPORTED, "NonzeroWithCount: packed dtypes");
    for (int64_t p = 0; p < P; p += 16) {
        int64_t cnt = 0;
        for (int64_t j = 0; j < F; j++)
            if (bs_dt_load_f32(in->data + elem_off(in, p * F + j), in->dtype) != 0.0f)
                bs_dt_store_f32_cast(out->data + elem_off(out, p * FO + cnt++), out->dtype,
                                (float)(j + off), out->cast);
        for (int64_t j = cnt; j < F; j++)
            bs_dt_store_f32_cast(out->data + elem_off(out, p * FO + j), out->dtype, pad,
                                 out->cast);
        bs_dt_store_f32_cast(out->data + elem_off(out, p * FO + F), out->dtype, (float)cnt,
                             out->cast);
    }
    return BS_OK;
}
