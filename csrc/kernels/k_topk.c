/* kernels/k_topk.c -- the Vector engine's top-8 family: Max, MaxIndex, MatchReplace,
** MaxIndexAndMatchReplace (NKI max8, nc_find_index8, nc_match_replace8;
** docs/spec/nki-isa-semantics.md §3.24 and §4 item 3; docs/spec/BIR-JSON.md "Max8/Max and friends").
**
** Per partition, over the row of ins[0] (8..16384 elements, decoded to fp32):
** - Max: outs[0][p, 0..8) = the 8 largest values, descending; equal values each take a
**   slot; NaN ranks above +inf (birsim's choice).
** - MaxIndex: for each of the 8 values of ins[1][p], the index of its first occurrence in
**   the row; equal values take successive occurrences in ascending slot order; a value
**   not found gives all ones at the output width (uint16, uint32 or int32 -> -1).
** - MatchReplace: outs[0] := ins[0] with the first occurrence of each value replaced by
**   imm_value, values taken from slot 7 down to 0 (so equal values match successive
**   occurrences in descending slot order); outs[1], when present, gets the indices as
**   MaxIndex writes them.
** - MaxIndexAndMatchReplace: MatchReplace with outs[1] required.
** Values match when equal as fp32 (NaN never matches). */
#include <stdlib.h>
#include "krows.h"

#define TOPK 8
#define TOPK_MAX_F 16384

/* a ranks above b */
static inline int above(float a, float b)
{
    return a > b || (a != a && b == b);
}

static bs_status data_rows(bs_kctx *k, bs_rows *r, const char *what, bs_error *err)
{
    BS_TRY(bs_rows_in(k, 0, BS_KSLOT_A, r, what, err));
    if (r->F < TOPK || r->F > TOPK_MAX_F)
        return bs_errorf(err, BS_E_SIM, "%s: %lld elements per partition (8 to %d)", what,
                         (long long)r->F, TOPK_MAX_F);
    return BS_OK;
}

bs_status bs_k_Max(bs_kctx *k, bs_error *err)
{
    const char *what = "Max";
    bs_rows r;
    BS_TRY(data_rows(k, &r, what, err));
    BS_TRY(bs_rows_out_check(k, 0, r.P, TOPK, what, err));
    float *o = bs_kstate_tmp(k->ks, BS_KSLOT_C, (size_t)r.P * TOPK * sizeof(float));
    if (o == NULL)
        return bs_errorf(err, BS_E_NOMEM, "%s: out of memory", what);
    for (int64_t p = 0; p < r.P; p++) {
        const float *x = r.v + p * r.F;
        float *t = o + p * TOPK;                 /* descending insertion list */
        for (int j = 0; j < TOPK; j++)
            t[j] = x[j];
        for (int j = 1; j < TOPK; j++)           /* sort the first 8 */
            for (int q = j; q > 0 && above(t[q], t[q - 1]); q--) {
                float s = t[q]; t[q] = t[q - 1]; t[q - 1] = s;
            }
        for (int64_t f = TOPK; f < r.F; f++) {
            float v = x[f];
            if (!above(v, t[TOPK - 1]))
                continue;
            int q = TOPK - 1;
            while (q > 0 && above(v, t[q - 1])) {
                t[q] = t[q - 1];
                q--;
            }
            t[q] = v;
        }
    }
    bs_view_from_f32(&k->out[0], o);
    return BS_OK;
}

/* all ones at the index output's width */
static bs_status not_found(int32_t dt, int64_t *v, const char *what, bs_error *err)
{
    switch (dt) {
    case BS_DT_uint16: *v = 0xFFFF; return BS_OK;
    case BS_DT_uint32: *v = 0xFFFFFFFF; return BS_OK;
    case BS_DT_int32: *v = -1; return BS_OK;
    default:
        return bs_errorf(err, BS_E_UNSUPPORTED, "%s: index output dtype %s (uint16, uint32 or "
                         "int32)", what, bs_dtinfo_table[dt].name);
    }
}

/* The 8 values per partition from ins[1] ([P, 8]). */
static bs_status vals_rows(bs_kctx *k, const bs_rows *r, bs_rows *vals, const char *what,
                           bs_error *err)
{
    BS_TRY(bs_rows_in(k, 1, BS_KSLOT_B, vals, what, err));
    if (vals->P != r->P || vals->F != TOPK)
        return bs_errorf(err, BS_E_SIM, "%s: ins[1] must hold %lld partitions x 8 values, it "
                         "has %lld x %lld", what, (long long)r->P, (long long)vals->P,
                         (long long)vals->F);
    return BS_OK;
}

bs_status bs_k_MaxIndex(bs_kctx *k, bs_error *err)
{
    const char *what = "MaxIndex";
    bs_rows r, vals;
    int64_t none = -1;       /* set by not_found; initialised for -Wmaybe-uninitialized */
    BS_TRY(data_rows(k, &r, what, err));
    BS_TRY(vals_rows(k, &r, &vals, what, err));
    BS_TRY(bs_rows_out_check(k, 0, r.P, TOPK, what, err));
    BS_TRY(not_found(k->out[0].dtype, &none, what, err));
    int64_t *idx = bs_kstate_tmp(k->ks, BS_KSLOT_D, (size_t)r.P * TOPK * sizeof(int64_t));
    if (idx == NULL)
        return bs_errorf(err, BS_E_NOMEM, "%s: out of memory", what);
    for (int64_t p = 0; p < r.P; p++) {
        const float *x = r.v + p * r.F, *w = vals.v + p * TOPK;
        for (int j = 0; j < TOPK; j++) {
            int64_t from = 0, found = none;
            for (int q = 0; q < j; q++)          /* an equal earlier value took a match */
                if (w[q] == w[j] && idx[p * TOPK + q] != none)
                    from = idx[p * TOPK + q] + 1;
            for (int64_t f = from; f < r.F; f++)
                if (x[f] == w[j]) {
                    found = f;
                    break;
                }
            idx[p * TOPK + j] = found;
        }
    }
    bs_view_from_i64(&k->out[0], idx);
    return BS_OK;
}

static bs_status match_replace(bs_kctx *k, int need_idx, const char *what, bs_error *err)
{
    bs_rows r, vals;
    int64_t none = -1;
    int with_idx = k->nout >= 2;
    float imm = (float)(k->insn->op == BS_OP_MatchReplace
                        ? BS_PF(k->insn, MatchReplace, imm_value)
                        : BS_PF(k->insn, MaxIndexAndMatchReplace, imm_value));
    if (need_idx && !with_idx)
        return bs_errorf(err, BS_E_PROGRAM, "%s needs outs[1] for the indices", what);
    BS_TRY(data_rows(k, &r, what, err));
    BS_TRY(vals_rows(k, &r, &vals, what, err));
    BS_TRY(bs_rows_out_check(k, 0, r.P, r.F, what, err));
    if (with_idx) {
        BS_TRY(bs_rows_out_check(k, 1, r.P, TOPK, what, err));
        BS_TRY(not_found(k->out[1].dtype, &none, what, err));
    }
    int64_t *idx = bs_kstate_tmp(k->ks, BS_KSLOT_D, (size_t)r.P * TOPK * sizeof(int64_t));
    if (idx == NULL)
        return bs_errorf(err, BS_E_NOMEM, "%s: out of memory", what);
    for (int64_t p = 0; p < r.P; p++) {
        float *x = r.v + p * r.F;                /* replaced in place (a private copy) */
        const float *w = vals.v + p * TOPK;
        for (int j = TOPK - 1; j >= 0; j--) {
            idx[p * TOPK + j] = none;
            for (int64_t f = 0; f < r.F; f++)
                if (x[f] == w[j]) {
                    x[f] = imm;
                    idx[p * TOPK + j] = f;
                    break;
                }
        }
    }
    bs_view_from_f32(&k->out[0], r.v);
    if (with_idx)
        bs_view_from_i64(&k->out[1], idx);
    return BS_OK;
}

bs_status bs_k_MatchReplace(bs_kctx *k, bs_error *err)
{
    return match_replace(k, 0, "MatchReplace", err);
}

bs_status bs_k_MaxIndexAndMatchReplace(bs_kctx *k, bs_error *err)
{
    return match_replace(k, 1, "MaxIndexAndMatchReplace", err);
}

/* {=== TopK (GpSimd; NKI topk, docs/spec/nki-isa-semantics.md §3.37) ===}
**
** birsim's reading (README "Choices" table; the loader warns on every TopK): partitions
** form groups of 16; group G reads its `n` active elements in the snake layout, element e
** at partition 16G + e % 16, column e / 16 of ins[0]. Elements are ranked by value (NaN
** above +inf, as Max), equal values by ascending snake index. The K = (free size of
** outs[0]) best are written in ascending order of rank, result j in the same snake layout:
** value to outs[0][16G + j % 16, j / 16], its snake index (0..n-1) to outs[1] at the same
** place. Only those K slots change; the rest of both outputs is left as it was. */

enum { TK_MAX_N = 65535, TK_MAX_K = 32767, TK_GROUP = 16 };

typedef struct tk_item { float v; int64_t i; } tk_item;

/* qsort order: best first (a ranks above b: larger value, NaN highest, then lower index) */
static int tk_cmp(const void *pa, const void *pb)
{
    const tk_item *a = pa, *b = pb;
    if (above(a->v, b->v))
        return -1;
    if (above(b->v, a->v))
        return 1;
    return (a->i > b->i) - (a->i < b->i);
}

/* out[j]'s bytes gathered densely into buf (count elements), so single elements can be
** patched in logical order; tk_put copies them back. */
static void tk_dense(bs_view *d, const bs_view *o, uint8_t *buf)
{
    memset(d, 0, sizeof *d);
    d->data = buf;
    d->dtype = o->dtype;
    d->ndim = 1;
    d->num[0] = o->count;
    d->stride[0] = bs_dtinfo_table[o->dtype].size;
    d->count = o->count;
    d->memtype = o->memtype;
    d->cast = o->cast;
}

bs_status bs_k_TopK(bs_kctx *k, bs_error *err)
{
    const char *what = "TopK";
    bs_rows r;
    bs_view dv, di;
    int64_t n = BS_PI(k->insn, TopK, n), K, none = -1;
    if (k->nout < 2)
        return bs_errorf(err, BS_E_PROGRAM, "TopK needs outs[0] (values) and outs[1] (indices)");
    BS_TRY(bs_rows_in(k, 0, BS_KSLOT_A, &r, what, err));
    if (r.P % TK_GROUP != 0)
        return bs_errorf(err, BS_E_SIM, "TopK: ins[0] has %lld partitions; it must be a multiple "
                         "of 16 (one snake per 16 partitions)", (long long)r.P);
    if (n == 0)
        n = TK_GROUP * r.F;
    if (n < 8 || n > TK_MAX_N || n > TK_GROUP * r.F)
        return bs_errorf(err, BS_E_SIM, "TopK: n = %lld active elements per snake; need 8 <= n < "
                         "65536 and n <= 16 x %lld (ins[0]'s free size)", (long long)n,
                         (long long)r.F);
    if (k->out[0].ndim == 0 || k->out[0].num[0] != r.P)
        return bs_errorf(err, BS_E_SIM, "TopK: outs[0] must have the %lld partitions of ins[0]",
                         (long long)r.P);
    K = k->out[0].count / r.P;
    if (K < 1 || K > TK_MAX_K || K > n)
        return bs_errorf(err, BS_E_SIM, "TopK: K = %lld (outs[0]'s free size); need 1 <= K < 32768 "
                         "and K <= n = %lld", (long long)K, (long long)n);
    BS_TRY(bs_rows_out_check(k, 1, r.P, K, what, err));
    if (bs_dtinfo_table[k->out[0].dtype].kind != BS_DK_F)
        return bs_errorf(err, BS_E_UNSUPPORTED, "TopK: outs[0] (values) is %s; a float dtype is "
                         "needed (NKI: bfloat16)", bs_dtinfo_table[k->out[0].dtype].name);
    BS_TRY(not_found(k->out[1].dtype, &none, what, err));
    {
        size_t vsz = (size_t)k->out[0].count * (size_t)bs_dtinfo_table[k->out[0].dtype].size;
        size_t isz = (size_t)k->out[1].count * (size_t)bs_dtinfo_table[k->out[1].dtype].size;
        uint8_t *buf = bs_kstate_tmp(k->ks, BS_KSLOT_C, vsz + isz);
        tk_item *it = bs_kstate_tmp(k->ks, BS_KSLOT_D, (size_t)n * sizeof(tk_item));
        int32_t vs = bs_dtinfo_table[k->out[0].dtype].size;
        int32_t is = bs_dtinfo_table[k->out[1].dtype].size;
        if (buf == NULL || it == NULL)
            return bs_errorf(err, BS_E_NOMEM, "TopK: out of memory");
        tk_dense(&dv, &k->out[0], buf);
        tk_dense(&di, &k->out[1], buf + vsz);
        bs_copy_raw(&dv, &k->out[0]);
        bs_copy_raw(&di, &k->out[1]);
        for (int64_t g = 0; g < r.P / TK_GROUP; g++) {
            for (int64_t e = 0; e < n; e++) {
                it[e].v = r.v[(g * TK_GROUP + e % TK_GROUP) * r.F + e / TK_GROUP];
                it[e].i = e;
            }
            qsort(it, (size_t)n, sizeof *it, tk_cmp);
            for (int64_t j = 0; j < K; j++) {
                const tk_item *t = &it[K - 1 - j];            /* ascending: worst kept first */
                int64_t at = (g * TK_GROUP + j % TK_GROUP) * K + j / TK_GROUP;
                bs_dt_store_f32_cast(dv.data + at * vs, dv.dtype, t->v, dv.cast);
                bs_dt_store_i64(di.data + at * is, di.dtype, t->i);
            }
        }
        bs_copy_raw(&k->out[0], &dv);
        bs_copy_raw(&k->out[1], &di);
    }
    return BS_OK;
}
/* }=== */
