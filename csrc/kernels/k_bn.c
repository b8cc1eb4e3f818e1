/* kernels/k_bn.c -- batch norm: BNStats, BNStatsAggregate (docs/spec/machine-model.md §6.6,
** docs/spec/nki-isa-semantics.md §3.25) and the backward family BNGradients, BNBackprop,
** BNBackprop2 (docs/spec/machine-model.md §6.6; operand layout: README's choices table).
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
#include <stdlib.h>
#include "krows.h"
#include "ktrans.h"
#include "kview.h"

/* Limit of docs/spec/nki-isa-semantics.md §4 item 25 (bn_stats accepts F <= 512). */
#define BN_STATS_MAX_F 512

static float *out_buf(bs_kctx *k, int64_t n, const char *what, bs_error *err)
{
    float *o = bs_kstate_tmp(k->ks, BS_KSLOT_C, (size_t)n * sizeof(float) + 1);
    if (o == NULL)
        bs_errorf(err, BS_E_NOMEM, "%s: out of memory", what);
    return o;
}

/* Partitions are processed in blocks of BN_BLOCK: the block's rows are transposed into
** a small buffer (element-major) so the Welford steps vectorise across partitions. */
#define BN_BLOCK 16

/* The wide paths: blocks of BN_WIDE partitions transposed in registers. AVX-512: four
** 16-lane vectors per step, so eight independent mean chains (4 vectors x 2 lanes) hide
** the divide's latency; AVX2 (hosts without AVX-512): eight 8-lane vectors per step, one
** lane (the even, then the odd elements) at a time, so its sixteen accumulators fit the
** registers. The same fp32 operations in the same order per partition and lane (sub,
** div, add; sub, mul, add; no fma): the same bits as the portable loop. BIRSIM_BN_ISA=0
** forces the portable loop (tests). */
#if defined(__GNUC__) && defined(__x86_64__)
#define BN_X86 1
#include <immintrin.h>
#define BN_WIDE 64

/* The rows of the block at partition p0 (nb of its BN_WIDE are real) into col, element
** major (col[f * BN_WIDE + b]): w x w tiles through tr (a transpose in registers: w = 16
** or 8), the edges and the missing partitions (zeros) one element at a time. Inlined into
** each wide path, so tr is compiled for that path's target. */
typedef void bn_tr_fn(const float *v, int64_t F, float *col);
static inline __attribute__((always_inline)) void bn_fill(const float *v, int64_t ld,
                                                          int64_t p0, int64_t nb, int64_t F,
                                                          float *col, int64_t w, bn_tr_fn *tr)
{
    int64_t Fw = F / w * w;
    for (int64_t g = 0; g < BN_WIDE; g += w) {        /* w partitions at a time */
        int64_t f0 = 0;
        if (g + w <= nb)
            for (; f0 < Fw; f0 += w)
                tr(v + (p0 + g) * ld + f0, ld, col + f0 * BN_WIDE + g);
        for (int64_t b = g; b < g + w; b++)
            for (int64_t f = f0; f < F; f++)
                col[f * BN_WIDE + b] = b < nb ? v[(p0 + b) * ld + f] : 0.0f;
    }
}

/* col[(f0 + i) * BN_WIDE + c] = v[c * F + f0 + i] for i, c < 16: a 16 x 16 transpose in
** registers (unpack pairs, then pairs of pairs, then 128-bit lanes). */
__attribute__((target("avx512f")))
static void bn_transpose16(const float *v, int64_t F, float *col)
{
    __m512 r[16], a[16], b[16];
    for (int i = 0; i < 16; i++)
        r[i] = _mm512_loadu_ps(v + i * F);
    for (int i = 0; i < 8; i++) {
        a[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        a[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; i++)       /* b[4i + c], lane k: column 4k + c of rows 4i..4i+3 */
        for (int h = 0; h < 2; h++) {
            __m512d x = _mm512_castps_pd(a[4 * i + h]), y = _mm512_castps_pd(a[4 * i + h + 2]);
            b[4 * i + 2 * h] = _mm512_castpd_ps(_mm512_unpacklo_pd(x, y));
            b[4 * i + 2 * h + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(x, y));
        }
    for (int c = 0; c < 4; c++) {
        __m512 c1 = _mm512_shuffle_f32x4(b[c], b[4 + c], 0x88);
        __m512 c2 = _mm512_shuffle_f32x4(b[c], b[4 + c], 0xdd);
        __m512 c3 = _mm512_shuffle_f32x4(b[8 + c], b[12 + c], 0x88);
        __m512 c4 = _mm512_shuffle_f32x4(b[8 + c], b[12 + c], 0xdd);
        _mm512_storeu_ps(col + (c + 0) * BN_WIDE, _mm512_shuffle_f32x4(c1, c3, 0x88));
        _mm512_storeu_ps(col + (c + 4) * BN_WIDE, _mm512_shuffle_f32x4(c2, c4, 0x88));
        _mm512_storeu_ps(col + (c + 8) * BN_WIDE, _mm512_shuffle_f32x4(c1, c3, 0xdd));
        _mm512_storeu_ps(col + (c + 12) * BN_WIDE, _mm512_shuffle_f32x4(c2, c4, 0xdd));
    }
}

__attribute__((target("avx512f")))
static void bn_stats_avx512(const float *v, int64_t ld, int64_t P, int64_t F, float *col,
                            float *o)
{
    for (int64_t p0 = 0; p0 < P; p0 += BN_WIDE) {
        int64_t nb = P - p0 < BN_WIDE ? P - p0 : BN_WIDE;
        __m512 mu[2][4], q[2][4];
        float n[2] = { 0, 0 };
        for (int l = 0; l < 2; l++)
            for (int j = 0; j < 4; j++)
                mu[l][j] = q[l][j] = _mm512_setzero_ps();
        bn_fill(v, ld, p0, nb, F, col, 16, bn_transpose16);
        for (int64_t f = 0; f < F; f++) {
            int l = (int)(f & 1);
            float nn = n[l] + 1.0f;
            __m512 nv = _mm512_set1_ps(nn);
            n[l] = nn;
            for (int j = 0; j < 4; j++) {
                __m512 x = _mm512_loadu_ps(col + f * BN_WIDE + 16 * j);
                __m512 d = _mm512_sub_ps(x, mu[l][j]);
                mu[l][j] = _mm512_add_ps(mu[l][j], _mm512_div_ps(d, nv));
                q[l][j] = _mm512_add_ps(q[l][j], _mm512_mul_ps(d, _mm512_sub_ps(x, mu[l][j])));
            }
        }
        float m[2][BN_WIDE], s[2][BN_WIDE];
        for (int l = 0; l < 2; l++)
            for (int j = 0; j < 4; j++) {
                _mm512_storeu_ps(m[l] + 16 * j, mu[l][j]);
                _mm512_storeu_ps(s[l] + 16 * j, q[l][j]);
            }
        for (int64_t b = 0; b < nb; b++) {
            float *y = o + (p0 + b) * 6;
            y[0] = n[0]; y[1] = m[0][b]; y[2] = s[0][b];
            y[3] = n[1]; y[4] = m[1][b]; y[5] = s[1][b];
        }
    }
}

/* col[(f0 + i) * BN_WIDE + c] = v[c * F + f0 + i] for i, c < 8 (ktrans.h). */
__attribute__((target("avx2")))
static void bn_transpose8(const float *v, int64_t F, float *col)
{
    bs_transpose8_avx2(v, F, col, BN_WIDE, 0);
}

__attribute__((target("avx2")))
static void bn_stats_avx2(const float *v, int64_t ld, int64_t P, int64_t F, float *col,
                          float *o)
{
    for (int64_t p0 = 0; p0 < P; p0 += BN_WIDE) {
        int64_t nb = P - p0 < BN_WIDE ? P - p0 : BN_WIDE;
        float n[2] = { 0, 0 }, m[2][BN_WIDE], s[2][BN_WIDE];
        bn_fill(v, ld, p0, nb, F, col, 8, bn_transpose8);
        for (int l = 0; l < 2; l++) {                 /* each lane's chain in its order */
            __m256 mu[8], q[8];
            float nn = 0.0f;
            for (int j = 0; j < 8; j++)
                mu[j] = q[j] = _mm256_setzero_ps();
            for (int64_t f = l; f < F; f += 2) {
                __m256 nv;
                nn = nn + 1.0f;
                nv = _mm256_set1_ps(nn);
                for (int j = 0; j < 8; j++) {
                    __m256 x = _mm256_loadu_ps(col + f * BN_WIDE + 8 * j);
                    __m256 d = _mm256_sub_ps(x, mu[j]);
                    mu[j] = _mm256_add_ps(mu[j], _mm256_div_ps(d, nv));
                    q[j] = _mm256_add_ps(q[j], _mm256_mul_ps(d, _mm256_sub_ps(x, mu[j])));
                }
            }
            n[l] = nn;
            for (int j = 0; j < 8; j++) {
                _mm256_storeu_ps(m[l] + 8 * j, mu[j]);
                _mm256_storeu_ps(s[l] + 8 * j, q[j]);
            }
        }
        for (int64_t b = 0; b < nb; b++) {
            float *y = o + (p0 + b) * 6;
            y[0] = n[0]; y[1] = m[0][b]; y[2] = s[0][b];
            y[3] = n[1]; y[4] = m[1][b]; y[5] = s[1][b];
        }
    }
}
#endif

/* An fp32 [P, F] view with unit element stride and a positive row stride: the AVX-512
** path reads it in place (*ld: the row stride in elements) instead of gathering a copy. */
static int bn_direct(const bs_view *v, int64_t *ld)
{
    if (v->ndim != 2 || v->dtype != BS_DT_float32 || v->count == 0 || v->stride[1] != 4 ||
        v->stride[0] <= 0 || v->stride[0] % 4 != 0 || (uintptr_t)v->data % 4 != 0)
        return 0;
    *ld = v->stride[0] / 4;
    return 1;
}

/* The wide path: 1 AVX-512, 2 AVX2, 0 none (the portable loop); read at every call, so
** tests can switch it. */
static int bn_wide(void)
{
#ifdef BN_X86
    const char *env = getenv("BIRSIM_BN_ISA");
    if (env != NULL && env[0] == '0')
        return 0;
    return __builtin_cpu_supports("avx512f") ? 1 : __builtin_cpu_supports("avx2") ? 2 : 0;
#else
    return 0;
#endif
}

/* apply_transpose: the rows transposed on the 32 x 32 grid first (as TensorReduce's
** apply_transpose, k_reduce.c): P and F multiples of 32 -> every 32 x 32 block in place;
** else both <= 32 -> [F, P]; else E_SIM. The result replaces r (scratch slot 1). */
static bs_status bn_transpose(bs_kctx *k, bs_rows *r, const char *what, bs_error *err)
{
    int64_t P = r->P, F = r->F, n = P * F;
    int block = P % 32 == 0 && F % 32 == 0;
    if (!block && (P > 32 || F > 32))
        return bs_errorf(err, BS_E_SIM, "%s apply_transpose: ins[0] is %lld partitions x %lld "
                         "elements; the 32x32 transpose needs both <= 32 or both multiples of "
                         "32", what, (long long)P, (long long)F);
    float *t = bs_kstate_tmp(k->ks, BS_KSLOT_B, (size_t)n * sizeof(float) + 1);
    if (t == NULL)
        return bs_errorf(err, BS_E_NOMEM, "%s: out of memory", what);
    for (int64_t i = 0; i < n; i++) {
        int64_t src;
        if (block) {
            int64_t p = i / F, f = i % F;
            src = ((p & ~(int64_t)31) + (f & 31)) * F + (f & ~(int64_t)31) + (p & 31);
        } else {
            src = (i % P) * F + i / P;
        }
        t[i] = r->v[src];
    }
    r->v = t;
    if (!block) {
        r->P = F;
        r->F = P;
    }
    return BS_OK;
}

bs_status bs_k_BNStats(bs_kctx *k, bs_error *err)
{
    const char *what = "BNStats";
    bs_rows r;
    int wide = bn_wide(), tr = BS_PI(k->insn, BNStats, apply_transpose) != 0;
    int64_t ld = 0;
    if (wide && !tr && k->nin > 0 && bn_direct(&k->in[0], &ld)) {
        r.v = (float *)(void *)k->in[0].data;      /* read in place (no output overlap: o) */
        r.P = k->in[0].num[0];
        r.F = k->in[0].num[1];
    } else {
        BS_TRY(bs_rows_in(k, 0, BS_KSLOT_A, &r, what, err));
        if (tr)
            BS_TRY(bn_transpose(k, &r, what, err));
        ld = r.F;
    }
    if (r.F > BN_STATS_MAX_F)
        return bs_errorf(err, BS_E_SIM, "BNStats: %lld elements per partition, at most %d",
                         (long long)r.F, BN_STATS_MAX_F);
    BS_TRY(bs_rows_out_check(k, 0, r.P, 6, what, err));
    float *o = out_buf(k, r.P * 6, what, err);
    if (o == NULL)
        return BS_E_NOMEM;
    float *col = bs_kstate_tmp(k->ks, BS_KSLOT_D,
                               (size_t)r.F * (wide ? BN_WIDE : BN_BLOCK) * sizeof(float) + 1);
    if (col == NULL)
        return bs_errorf(err, BS_E_NOMEM, "%s: out of memory", what);
#ifdef BN_X86
    if (wide) {
        if (wide == 1)
            bn_stats_avx512(r.v, ld, r.P, r.F, col, o);
        else
            bn_stats_avx2(r.v, ld, r.P, r.F, col, o);
        bs_view_from_f32(&k->out[0], o);
        return BS_OK;
    }
#endif
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
    BS_TRY(bs_rows_in(k, 0, BS_KSLOT_A, &r, what, err));
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

/* {=== Backward: BNGradients, BNBackprop, BNBackprop2 ===}
** x = ins[0], dy = ins[1]: [P, F] each (free dims flattened in AP order). Per-partition
** values (mean m, inverse deviation vf, A, Bc, scale) are scalar operands: an immediate
** or register broadcast, or a view of P elements. */

/* dy = ins[1] gathered into slot 1, with x's P partitions of F elements (E_SIM naming
** both operands otherwise). */
static bs_status bn_dy(bs_kctx *k, const bs_rows *x, bs_rows *dy, const char *what,
                       bs_error *err)
{
    BS_TRY(bs_rows_in(k, 1, BS_KSLOT_B, dy, what, err));
    if (dy->P != x->P || dy->F != x->F)
        return bs_errorf(err, BS_E_SIM, "%s: ins[1] (dy) has %lld partitions x %lld elements, "
                         "ins[0] (x) %lld x %lld; they must match", what, (long long)dy->P,
                         (long long)dy->F, (long long)x->P, (long long)x->F);
    return BS_OK;
}

/* The per-partition value ins[j] (named `name`) into f[0 .. P). Required. */
static bs_status bn_scalar(bs_kctx *k, int32_t j, const char *name, int64_t P, float *f,
                           const char *what, bs_error *err)
{
    if (j >= k->nin)
        return bs_errorf(err, BS_E_PROGRAM, "%s needs ins[%d] (%s, one value per partition)",
                         what, j, name);
    if (k->in[j].ndim != 0 && !bs_dt_numeric(k->in[j].dtype))
        return bs_errorf(err, BS_E_UNSUPPORTED, "%s: ins[%d] (%s) has packed dtype %s", what,
                         j, name, bs_dtinfo_table[k->in[j].dtype].name);
    bs_status st = bs_kscalar_values(k, j, 0.0, P, f, NULL, what, err);
    if (st != BS_OK)
        return bs_errorf(err, st, "%s: ins[%d] (%s) must be an immediate, a register or %lld "
                         "elements (one per partition), it has %lld", what, j, name,
                         (long long)P, (long long)k->in[j].count);
    return BS_OK;
}

/* BNGradients: out[0] [P, 3] := per partition, a left-to-right fp32 sum over f of
**     A += dy;  t = ((x - m) * dy) * vf;  Bc += t * vf;  C += t
** -> [A, Bc, C] = [sum dy, sum (x-m) dy vf^2, sum (x-m) dy vf]; m = ins[2], vf = ins[3]. */
bs_status bs_k_BNGradients(bs_kctx *k, bs_error *err)
{
    const char *what = "BNGradients";
    bs_rows x, dy;
    BS_TRY(bs_rows_in(k, 0, BS_KSLOT_A, &x, what, err));
    BS_TRY(bn_dy(k, &x, &dy, what, err));
    BS_TRY(bs_rows_out_check(k, 0, x.P, 3, what, err));
    float *o = out_buf(k, x.P * 5, what, err);
    if (o == NULL)
        return BS_E_NOMEM;
    float *m = o + x.P * 3, *vf = o + x.P * 4;
    BS_TRY(bn_scalar(k, 2, "mean", x.P, m, what, err));
    BS_TRY(bn_scalar(k, 3, "vf", x.P, vf, what, err));
    for (int64_t p = 0; p < x.P; p++) {
        const float *xr = x.v + p * x.F, *gr = dy.v + p * x.F;
        float a = 0.0f, b = 0.0f, c = 0.0f, mp = m[p], vp = vf[p];
        for (int64_t f = 0; f < x.F; f++) {
            float t = ((xr[f] - mp) * gr[f]) * vp;
            a = a + gr[f];
            b = b + t * vp;
            c = c + t;
        }
        o[p * 3] = a; o[p * 3 + 1] = b; o[p * 3 + 2] = c;
    }
    bs_view_from_f32(&k->out[0], o);
    return BS_OK;
}

/* dx := ((dy * N) - (((x - m) * Bc) + A)) * scale, rounded to fp32 at every step, into
** x's buffer; par holds m, A, Bc, scale at par[0..P), par[P..2P), ... */
static void bn_backprop_rows(bs_rows *x, const bs_rows *dy, const float *par, float n)
{
    int64_t P = x->P, F = x->F;
    for (int64_t p = 0; p < P; p++) {
        float *xr = x->v + p * F;
        const float *gr = dy->v + p * F;
        float m = par[p], a = par[P + p], bc = par[2 * P + p], sc = par[3 * P + p];
        for (int64_t f = 0; f < F; f++)
            xr[f] = ((gr[f] * n) - (((xr[f] - m) * bc) + a)) * sc;
    }
}

static bs_status bn_backprop_start(bs_kctx *k, bs_rows *x, bs_rows *dy, float *n,
                                   const char *what, bs_error *err)
{
    double total = BS_PF(k->insn, BNBackprop, total_elements);
    BS_TRY(bs_rows_in(k, 0, BS_KSLOT_A, x, what, err));
    BS_TRY(bn_dy(k, x, dy, what, err));
    BS_TRY(bs_rows_out_check(k, 0, x->P, x->F, what, err));
    *n = (float)total;
    return BS_OK;
}

_Static_assert(BS_Pf_BNBackprop_total_elements == BS_Pf_BNBackprop2_total_elements,
               "BNBackprop and BNBackprop2 share bn_backprop_start");

/* BNBackprop: m, A, Bc, scale are the scalar operands ins[2], ins[3], ins[4], ins[5];
** N = total_elements. */
bs_status bs_k_BNBackprop(bs_kctx *k, bs_error *err)
{
    static const char *const names[4] = { "mean", "A", "Bc", "scale" };
    const char *what = "BNBackprop";
    bs_rows x, dy;
    float n;
    BS_TRY(bn_backprop_start(k, &x, &dy, &n, what, err));
    float *par = out_buf(k, x.P * 4, what, err);
    if (par == NULL)
        return BS_E_NOMEM;
    for (int j = 0; j < 4; j++)
        BS_TRY(bn_scalar(k, 2 + j, names[j], x.P, par + j * x.P, what, err));
    bn_backprop_rows(&x, &dy, par, n);
    bs_view_from_f32(&k->out[0], x.v);
    return BS_OK;
}

/* BNBackprop2: the same, m, A, Bc, scale packed as the 4 elements per partition of one
** [P, 4] tile ins[2]. */
bs_status bs_k_BNBackprop2(bs_kctx *k, bs_error *err)
{
    const char *what = "BNBackprop2";
    bs_rows x, dy, t;
    float n;
    BS_TRY(bn_backprop_start(k, &x, &dy, &n, what, err));
    if (k->nin < 3)
        return bs_errorf(err, BS_E_PROGRAM, "BNBackprop2 needs ins[2] ([P, 4]: mean, A, Bc, "
                         "scale per partition)");
    BS_TRY(bs_rows_in(k, 2, BS_KSLOT_C, &t, what, err));
    if (t.P != x.P || t.F != 4)
        return bs_errorf(err, BS_E_SIM, "BNBackprop2: ins[2] must hold %lld partitions x 4 "
                         "elements (mean, A, Bc, scale), it has %lld x %lld", (long long)x.P,
                         (long long)t.P, (long long)t.F);
    float *par = bs_kstate_tmp(k->ks, BS_KSLOT_D, (size_t)x.P * 4 * sizeof(float) + 1);
    if (par == NULL)
        return bs_errorf(err, BS_E_NOMEM, "%s: out of memory", what);
    for (int64_t p = 0; p < x.P; p++)
        for (int j = 0; j < 4; j++)
            par[j * x.P + p] = t.v[p * 4 + j];
    bn_backprop_rows(&x, &dy, par, n);
    bs_view_from_f32(&k->out[0], x.v);
    return BS_OK;
}
