/* kernels/k_topk.c -- the Vector engine's top-8 family: Max, MaxIndex, MatchReplace,
** MaxIndexAndMatchReplace (NKI max8, nc_find_index8, nc_match_replace8;
** nki-isa-semantics.md §3.24 and §4 item 3; BIR-JSON.md "Max8/Max and friends").
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
#include "krows.h"

enum { SLOT_IN = 0, SLOT_VALS = 1, SLOT_OUT = 2, SLOT_IDX = 3 };

#define TOPK 8
#define TOPK_MAX_F 16384

/* a ranks above b */
static inline int above(float a, float b)
{
    return a > b || (a != a && b == b);
}

static bs_status data_rows(bs_kctx *k, bs_rows *r, const char *what, bs_error *err)
{
    BS_TRY(bs_rows_in(k, 0, SLOT_IN, r, what, err));
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
    float *o = bs_kstate_tmp(k->ks, SLOT_OUT, (size_t)r.P * TOPK * sizeof(float));
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

static void write_idx(const bs_view *v, const int64_t *idx)
{
    bs_cursor c;
    bs_cur_init(&c, v);
    for (int64_t pos = 0; c.left > 0; ) {
        int64_t n = c.left < BS_CHUNK ? c.left : BS_CHUNK;
        bs_cur_write_i64(&c, n, idx + pos);
        pos += n;
    }
}

/* The 8 values per partition from ins[1] ([P, 8]). */
static bs_status vals_rows(bs_kctx *k, const bs_rows *r, bs_rows *vals, const char *what,
                           bs_error *err)
{
    BS_TRY(bs_rows_in(k, 1, SLOT_VALS, vals, what, err));
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
    int64_t *idx = bs_kstate_tmp(k->ks, SLOT_IDX, (size_t)r.P * TOPK * sizeof(int64_t));
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
    write_idx(&k->out[0], idx);
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
    int64_t *idx = bs_kstate_tmp(k->ks, SLOT_IDX, (size_t)r.P * TOPK * sizeof(int64_t));
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
        write_idx(&k->out[1], idx);
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
