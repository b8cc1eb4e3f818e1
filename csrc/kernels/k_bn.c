/* kernels/k_bn.c -- batch-norm statistics: BNStats and BNStatsAggregate
** (machine-model.md §6.6, nki-isa-semantics.md §3.25).
**
** Everything is fp32 with a rounding after every operation (the build does not contract).
** BNStats keeps two Welford lanes per partition, one for the elements at even positions
** of the row and one for the odd ones:
**     n += 1;  d = x - mean;  mean = mean + d / n;  M2 = M2 + d * (x - mean)
** and writes [n_even, mean_even, M2_even, n_odd, mean_odd, M2_odd]. BNStatsAggregate folds
** (n, mean, M2) triples left to right with Chan's merge, skipping empty ones:
**     n = na + nb;  d = mb - ma;  mean = ma + d * (nb / n);
**     M2 = (M2a + M2b) + (d * d) * ((na * nb) / n)
** and writes [mean, M2 / n] (population variance, no epsilon; 0/0 = NaN when all are
** empty). */
#include <math.h>
#include "krows.h"

enum { SLOT_IN = 0, SLOT_OUT = 2, SLOT_COL = 3 };

/* Limit of nki-isa-semantics.md §4 item 25 (bn_stats accepts F <= 512). */
#define BN_STATS_MAX_F 512

static float *out_buf(bs_kctx *k, int64_t n, const char *what, bs_error *err)
{
    float *o = bs_kstate_tmp(k->ks, SLOT_OUT, (size_t)n * sizeof(float) + 1);
    if (o == NULL)
        bs_errorf(err, BS_E_NOMEM, "%s: out of memory", what);
    return o;
}

/* Partitions are processed in blocks of BN_BLOCK: the block's rows are transposed into
** a small buffer (element-major) so the Welford steps vectorise across partitions. */
#define BN_BLOCK 16

bs_status bs_k_BNStats(bs_kctx *k, bs_error *err)
{
    const char *what = "BNStats";
    bs_rows r;
    BS_TRY(bs_rows_in(k, 0, SLOT_IN, &r, what, err));
    if (r.F > BN_STATS_MAX_F)
        return bs_errorf(err, BS_E_SIM, "BNStats: %lld elements per partition, at most %d",
                         (long long)r.F, BN_STATS_MAX_F);
    BS_TRY(bs_rows_out_check(k, 0, r.P, 6, what, err));
    float *o = out_buf(k, r.P * 6, what, err);
    if (o == NULL)
        return BS_E_NOMEM;
    float *col = bs_kstate_tmp(k->ks, SLOT_COL, (size_t)r.F * BN_BLOCK * sizeof(float) + 1);
    if (col == NULL)
        return bs_errorf(err, BS_E_NOMEM, "%s: out of memory", what);
    for (int64_t p0 = 0; p0 < r.P; p0 += BN_BLOCK) {
        int64_t nb = r.P - p0 < BN_BLOCK ? r.P - p0 : BN_BLOCK;
        float mean[2][BN_BLOCK] = { { 0 } }, m2[2][BN_BLOCK] = { { 0 } }, n[2] = { 0, 0 };
        for (int64_t b = 0; b < BN_BLOCK; b++)
            for (int64_t f = 0; f < r.F; f++)
                col[f * BN_BLOCK + b] = b < nb ? r.v[(p0 + b) * r.F + f] : 0.0f;
        for (int64_t f = 0; f < r.F; f++) {
            int l = (int)(f & 1);
            const float *xc = col + f * BN_BLOCK;
            float *mu = mean[l], *q = m2[l], nn = n[l] + 1.0f;
            n[l] = nn;
            for (int b = 0; b < BN_BLOCK; b++) {      /* full width: unused lanes hold 0 */
                float d = xc[b] - mu[b];
                mu[b] = mu[b] + d / nn;
                q[b] = q[b] + d * (xc[b] - mu[b]);
            }
        }
        for (int64_t b = 0; b < nb; b++) {
            float *y = o + (p0 + b) * 6;
            y[0] = n[0]; y[1] = mean[0][b]; y[2] = m2[0][b];
            y[3] = n[1]; y[4] = mean[1][b]; y[5] = m2[1][b];
        }
    }
    bs_view_from_f32(&k->out[0], o);
    return BS_OK;
}

bs_status bs_k_BNStatsAggregate(bs_kctx *k, bs_error *err)
{
    const char *what = "BNStatsAggregate";
    bs_rows r;
    BS_TRY(bs_rows_in(k, 0, SLOT_IN, &r, what, err));
    if (r.F % 3 != 0 || r.F == 0)
        return bs_errorf(err, BS_E_SIM, "BNStatsAggregate: %lld elements per partition, "
                         "expected (count, mean, M2) triples", (long long)r.F);
    BS_TRY(bs_rows_out_check(k, 0, r.P, 2, what, err));
    float *o = out_buf(k, r.P * 2, what, err);
    if (o == NULL)
        return BS_E_NOMEM;
    for (int64_t p = 0; p < r.P; p++) {
        const float *t = r.v + p * r.F;
        float n = 0, mean = 0, m2 = 0;
        for (int64_t g = 0; g < r.F; g += 3) {
            float nb = t[g], mb = t[g + 1], m2b = t[g + 2];
            if (nb == 0.0f)
                continue;
            if (n == 0.0f) {
                n = nb; mean = mb; m2 = m2b;
                continue;
            }
            float nn = n + nb, d = mb - mean;
            mean = mean + d * (nb / nn);
            m2 = (m2 + m2b) + (d * d) * ((n * nb) / nn);
            n = nn;
        }
        o[p * 2] = n == 0.0f ? NAN : mean;
        o[p * 2 + 1] = m2 / n;
    }
    bs_view_from_f32(&k->out[0], o);
    return BS_OK;
}
