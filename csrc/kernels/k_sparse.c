/* kernels/k_sparse.c -- MatmultSparse: a structured-sparse Matmult (docs/spec/machine-model.md §6.2:
** "128 active rows only; 32 sub-tiles; an int16 tag tensor in in2 selects the active
** positions"). Nothing public pins more than that sentence, so the layout below is
** birsim's reading (README "Choices" table; the loader warns on every MatmultSparse):
**
**   in[1]  stationary weights, compressed: [128, M], one PE row per partition r.
**   in[2]  tags, int16 (or uint16): [32, M]. Sub-tile g = r % 32 groups the active rows
**          g, g + 32, g + 64, g + 96; tag word [g, m] holds one 4-bit nibble per row:
**          row r = 32 q + g reads d = (tag >> 4 q) & 0xF, its position in the sub-tile.
**   in[0]  moving ifmap, dense: [128, 4, N] (may be flat [128, 4N]); dense contraction
**          row k = 128 c + p is partition p, chunk c, so K = 512 (compression 4:1).
**   Sub-tile g owns the 16 dense rows g + 32 b + 128 c (b, c in 0..3); position d is
**          b = d / 4, c = d % 4, i.e. k(r, m) = g + 32 (d / 4) + 128 (d % 4).
**   out[0] [M, N]: res[m][n] = sum over r = 0..127 of in1[r][m] * in0[k(r, m)][n], fp32,
**          products rounded and added in ascending r, then the PSUM write-back of Matmult
**          (bs_matmul_write). Every 16-bit tag is valid; two rows selecting the same dense
**          row both contribute. */
#include "kernel.h"

enum { SP_ROWS = 128, SP_SUB = 32, SP_CHUNKS = 4 };

static int sp_input_dtype(int32_t dt)
{
    return dt == BS_DT_uint8 || bs_dtinfo_table[dt].kind == BS_DK_F;
}

bs_status bs_k_MatmultSparse(bs_kctx *k, bs_error *err)
{
    const bs_view *mv = &k->in[0], *st = &k->in[1], *tg = &k->in[2], *out = &k->out[0];
    int64_t flags = BS_PI(k->insn, MatmultSparse, acc_flags), M, N;
    float *X, *W, *R;
    int64_t *T;
    if (k->nin < 3 || k->nout < 1 || mv->ndim == 0 || st->ndim == 0 || tg->ndim == 0 ||
        out->ndim == 0)
        return bs_errorf(err, BS_E_SIM, "MatmultSparse needs access patterns in[0] (moving), "
                         "in[1] (compressed stationary), in[2] (int16 tags) and out[0]");
    for (int32_t i = 0; i < 2; i++)
        if (!sp_input_dtype(k->in[i].dtype))
            return bs_errorf(err, BS_E_UNSUPPORTED, "MatmultSparse: in[%d] is %s; inputs must be "
                             "float dtypes or uint8", (int)i,
                             bs_dtinfo_table[k->in[i].dtype].name);
    if (tg->dtype != BS_DT_int16 && tg->dtype != BS_DT_uint16)
        return bs_errorf(err, BS_E_UNSUPPORTED, "MatmultSparse: in[2] (tags) is %s; int16 or "
                         "uint16 is needed", bs_dtinfo_table[tg->dtype].name);
    if (!bs_dt_numeric(out->dtype))
        return bs_errorf(err, BS_E_UNSUPPORTED, "MatmultSparse cannot write %s",
                         bs_dtinfo_table[out->dtype].name);
    if (st->num[0] != SP_ROWS)
        return bs_errorf(err, BS_E_SIM, "MatmultSparse: in[1] (stationary) has %lld partitions; "
                         "only the 128-active-rows case exists", (long long)st->num[0]);
    M = st->count / SP_ROWS;
    if (mv->num[0] != SP_ROWS || mv->count % (SP_ROWS * SP_CHUNKS) != 0)
        return bs_errorf(err, BS_E_SIM, "MatmultSparse: in[0] (moving) is [%lld, %lld]; it must "
                         "be [128, 4 x N] (the 512 dense contraction rows as [128, 4, N])",
                         (long long)mv->num[0], (long long)(mv->count / mv->num[0]));
    N = mv->count / (SP_ROWS * SP_CHUNKS);
    if (tg->num[0] != SP_SUB || tg->count != SP_SUB * M)
        return bs_errorf(err, BS_E_SIM, "MatmultSparse: in[2] (tags) is [%lld, %lld]; it must be "
                         "[32, %lld] (one tag word per sub-tile and stationary column)",
                         (long long)tg->num[0], (long long)(tg->count / tg->num[0]),
                         (long long)M);
    if (out->num[0] != M || out->count != M * N)
        return bs_errorf(err, BS_E_SIM, "MatmultSparse: out[0] is [%lld, %lld]; it must be [%lld, "
                         "%lld] (stationary columns x moving columns)", (long long)out->num[0],
                         (long long)(out->count / out->num[0]), (long long)M, (long long)N);
    if ((flags & 3) != 0 && out->memtype != BS_MEM_PSUM)
        return bs_errorf(err, BS_E_SIM, "MatmultSparse start/accumulate needs a PSUM destination");
    X = bs_kstate_tmp(k->ks, BS_KSLOT_A, (size_t)mv->count * sizeof(float));
    W = bs_kstate_tmp(k->ks, BS_KSLOT_B, (size_t)st->count * sizeof(float));
    T = bs_kstate_tmp(k->ks, BS_KSLOT_C, (size_t)tg->count * sizeof(int64_t));
    R = bs_kstate_tmp(k->ks, BS_KSLOT_D, (size_t)(M * N) * sizeof(float));
    if (X == NULL || W == NULL || T == NULL || R == NULL)
        return bs_errorf(err, BS_E_NOMEM, "MatmultSparse: out of memory");
    bs_view_to_f32(X, mv);
    bs_view_to_f32(W, st);
    bs_view_to_i64(T, tg);
    for (int64_t i = 0; i < M * N; i++)
        R[i] = 0.0f;
    for (int64_t r = 0; r < SP_ROWS; r++) {
        int64_t g = r % SP_SUB, q = r / SP_SUB;
        for (int64_t m = 0; m < M; m++) {
            int64_t d = (int64_t)(((uint64_t)T[g * M + m] & 0xFFFFu) >> (4 * q)) & 0xF;
            int64_t kk = g + SP_SUB * (d / 4) + SP_ROWS * (d % 4);
            int64_t p = kk % SP_ROWS, ch = kk / SP_ROWS;
            const float *x = X + p * (SP_CHUNKS * N) + ch * N;
            float w = W[r * M + m], *o = R + m * N;
            for (int64_t n = 0; n < N; n++) {
                float prod = w * x[n];
                o[n] = o[n] + prod;
            }
        }
    }
    return bs_matmul_write(k, flags, R, "MatmultSparse", err);
}
