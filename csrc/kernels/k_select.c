/* kernels/k_select.c -- data synthesis and selection: Memset, Iota and Select
** (machine-model.md §6.3, nki-isa-semantics.md §3.19-3.20, BIR-JSON.md "Operand
** conventions"). Memset writes raw bits; Iota computes in int32; Select decodes to fp32.
** Nothing here allocates except through bs_kstate_tmp. */
#include "kernel.h"
#include "kview.h"

/* {=== Memset: every element of out0 := the raw bits of the constant field (little-endian),
** or its value cast to out0's dtype when given by value ===} */

bs_status bs_k_Memset(bs_kctx *k, bs_error *err)
{
    int64_t mode = BS_PI(k->insn, Memset, mode), bits = BS_PI(k->insn, Memset, constant);
    if (k->nout < 1 || k->out[0].ndim == 0)
        return bs_errorf(err, BS_E_PROGRAM, "Memset: out[0] must be an access pattern");
    if (mode == BS_MEMSET_Random)
        return bs_rng_memset(k, err);
    if (mode != BS_MEMSET_Const)
        return bs_errorf(err, BS_E_PROGRAM, "Memset: invalid mode %lld", (long long)mode);
    int32_t size = bs_dtinfo_table[k->out[0].dtype].size;
    uint8_t raw[8] = { 0 };
    if (BS_PI(k->insn, Memset, by_value)) {
        /* a value (BIR-JSON.md "Execution rules"): cast to out[0]'s dtype through fp32 */
        double v = BS_PF(k->insn, Memset, value);
        if (!bs_dt_numeric(k->out[0].dtype) && v != 0.0)
            return bs_errorf(err, BS_E_UNSUPPORTED, "Memset: packed dtype %s only takes the "
                             "value 0, got %g", bs_dtinfo_table[k->out[0].dtype].name, v);
        if (bs_dt_numeric(k->out[0].dtype))
            bs_dt_store_f32(raw, k->out[0].dtype, (float)v);
    } else {
        /* 8-byte items take any 64 raw bits; narrower ones a non-negative value that fits. */
        if (size < 8 && (bits < 0 || bits >= (int64_t)1 << (8 * size)))
            return bs_errorf(err, BS_E_PROGRAM, "Memset: constant %lld does not fit a %d-byte "
                             "%s", (long long)bits, (int)size,
                             bs_dtinfo_table[k->out[0].dtype].name);
        for (int b = 0; b < 8; b++)
            raw[b] = (uint8_t)((uint64_t)bits >> (8 * b));
    }
    bs_view src = k->out[0];                    /* one element broadcast to every one */
    src.data = raw;
    src.shadow = NULL;
    src.ndim = 1;
    src.num[0] = src.count;
    src.stride[0] = 0;
    bs_copy_raw(&k->out[0], &src);
    return BS_OK;
}

/* {=== Iota: out0[p, j] := base + p*channel_multiplier + Σ step_d * coord_d(j) (int32) ===} */

typedef struct iota_pat {
    int32_t  n;                        /* dims, outermost first */
    uint32_t step[BS_MAX_SHAPE + 1];   /* int32 arithmetic as uint32 (wraps) */
    int64_t  num[BS_MAX_SHAPE + 1];
} iota_pat;

static inline int64_t to_i32(uint32_t u)
{
    return u >= 0x80000000u ? (int64_t)u - 0x100000000LL : (int64_t)u;
}

/* Read the pattern from the ipool list; empty means one dim of step 1 over `free`. */
static bs_status iota_pattern(const bs_kctx *k, int64_t free, iota_pat *pt, bs_error *err)
{
    const bs_insn *in = k->insn;
    int64_t cnt = 1;
    if (in->nlist % 2 || in->nlist / 2 > BS_MAX_SHAPE || in->list < 0
        || (int64_t)in->list + in->nlist > k->prog->n_ipool)
        return bs_errorf(err, BS_E_PROGRAM, "Iota: bad pattern list (%d entries)", (int)in->nlist);
    pt->n = in->nlist / 2;
    for (int32_t d = 0; d < pt->n; d++) {
        pt->step[d] = (uint32_t)k->prog->ipool[in->list + 2 * d];
        pt->num[d] = k->prog->ipool[in->list + 2 * d + 1];
        if (pt->num[d] < 0)
            return bs_errorf(err, BS_E_PROGRAM, "Iota: pattern dim %d has num %lld",
                             (int)d, (long long)pt->num[d]);
        cnt = pt->num[d] && cnt > INT64_MAX / pt->num[d] ? -1 : cnt * pt->num[d];
    }
    if (pt->n == 0) {
        pt->n = 1;
        pt->step[0] = 1;
        pt->num[0] = cnt = free;
    }
    if (cnt != free)
        return bs_errorf(err, BS_E_SIM, "Iota: pattern has %lld elements but out[0] has %lld "
                         "per partition", (long long)cnt, (long long)free);
    return BS_OK;
}

/* vals[0..n) for free indices j0.. of one partition whose start value is v0. */
static void iota_fill(const iota_pat *pt, uint32_t v0, int64_t j0, int64_t n, int64_t *vals)
{
    int64_t c[BS_MAX_SHAPE + 1];
    uint32_t v = v0;
    for (int32_t d = pt->n - 1; d >= 0; d--) {  /* coordinates of j0 */
        c[d] = j0 % pt->num[d];
        j0 /= pt->num[d];
        v += pt->step[d] * (uint32_t)c[d];
    }
    for (int64_t j = 0; j < n; j++) {
        vals[j] = to_i32(v);
        for (int32_t d = pt->n - 1; d >= 0; d--) {     /* odometer step */
            v += pt->step[d];
            if (++c[d] < pt->num[d])
                break;
            v -= pt->step[d] * (uint32_t)pt->num[d];
            c[d] = 0;
        }
    }
}

bs_status bs_k_Iota(bs_kctx *k, bs_error *err)
{
    bs_view ov = k->out[0], *o = &ov;
    int64_t base = BS_PX(k->insn, Iota, base_expr) >= 0 ? k->xval[BS_PXI(Iota, base_expr)]
                                                       : BS_PI(k->insn, Iota, base);
    uint32_t cm = (uint32_t)BS_PI(k->insn, Iota, channel_multiplier);
    int64_t vals[BS_CHUNK];
    iota_pat pt = { 0 };
    if (k->nout < 1 || o->ndim == 0)
        return bs_errorf(err, BS_E_PROGRAM, "Iota: out[0] must be an access pattern");
    if (!bs_dt_numeric(o->dtype))
        return bs_errorf(err, BS_E_UNSUPPORTED, "Iota: out[0] dtype %s is not supported",
                         bs_dtinfo_table[o->dtype].name);
    bs_kview_normalize_free(o);                 /* rows stay inside one partition */
    int64_t free = o->num[0] ? o->count / o->num[0] : 0;
    BS_TRY(iota_pattern(k, free, &pt, err));
    bs_cursor c;
    bs_cur_init(&c, o);
    while (c.left > 0) {
        int64_t n = c.left < BS_CHUNK ? c.left : BS_CHUNK, p = c.idx[0];
        iota_fill(&pt, (uint32_t)base + (uint32_t)p * cm, c.pos - p * free, n, vals);
        bs_cur_write_i64(&c, n, vals);
    }
    return BS_OK;
}

/* {=== Select: out0 := in0 ? in1 : in2; in1/in2 tensors or immediates ===} */

/* The predicate must be exactly 0 or 1 everywhere; checked before anything is written. */
static bs_status check_pred(const bs_view *pv, bs_error *err)
{
    float buf[BS_CHUNK];
    bs_cursor c;
    bs_cur_init(&c, pv);
    while (c.left > 0) {
        int64_t n = c.left < BS_CHUNK ? c.left : BS_CHUNK, pos = c.pos;
        const float *x = bs_cur_read_f32(&c, n, buf);
        for (int64_t j = 0; j < n; j++)
            if (x[j] != 0.0f && x[j] != 1.0f)
                return bs_errorf(err, BS_E_ARITH, "Select: predicate element %lld is %g "
                                 "(must be 0 or 1)", (long long)(pos + j), (double)x[j]);
    }
    return BS_OK;
}

static inline int64_t min_left(int64_t n, const bs_cursor *c, int tensor)
{
    return tensor && c->left < n ? c->left : n;
}

/* One chunk's operand: a tensor row, or the immediate repeated. */
static const float *sel_operand(bs_cursor *c, int tensor, float imm, int64_t n, float *buf)
{
    if (tensor)
        return bs_cur_read_f32(c, n, buf);
    for (int64_t j = 0; j < n; j++)
        buf[j] = imm;
    return buf;
}

static void sel_run(const bs_view *in, const float imm[3], const bs_view *out)
{
    float pb[BS_CHUNK], tb[BS_CHUNK], fb[BS_CHUNK], ob[BS_CHUNK];
    bs_cursor cp, ct, cf, co;
    int tt = in[1].ndim > 0, tf = in[2].ndim > 0;
    bs_cur_init(&cp, &in[0]);
    bs_cur_init(&co, out);
    if (tt) bs_cur_init(&ct, &in[1]);
    if (tf) bs_cur_init(&cf, &in[2]);
    while (co.left > 0) {
        int64_t n = min_left(min_left(bs_chunk2(&cp, &co), &ct, tt), &cf, tf);
        const float *p = bs_cur_read_f32(&cp, n, pb);
        const float *t = sel_operand(&ct, tt, imm[1], n, tb);
        const float *f = sel_operand(&cf, tf, imm[2], n, fb);
        float *y = bs_cur_write_begin(&co, n, ob);
        for (int64_t j = 0; j < n; j++)
            y[j] = p[j] != 0.0f ? t[j] : f[j];
        bs_cur_write_end(&co, n, y);
    }
}

bs_status bs_k_Select(bs_kctx *k, bs_error *err)
{
    bs_view in[3], out = k->out[0];
    float imm[3];
    if (k->nin < 3)
        return bs_errorf(err, BS_E_PROGRAM, "Select: needs 3 inputs, has %d", (int)k->nin);
    for (int32_t j = 0; j < 3; j++) {
        in[j] = k->in[j];
        imm[j] = (float)k->imm[j];
    }
    BS_TRY(bs_kview_check(k, in, 3, 6, "Select", err));     /* in1, in2 may be immediates */
    BS_TRY(check_pred(&in[0], err));
    BS_TRY(bs_kview_detach(k, in, 3, 0, err));
    for (int32_t j = 0; j < 3; j++)
        if (in[j].ndim > 0)
            bs_view_normalize(&in[j]);
    bs_view_normalize(&out);
    sel_run(in, imm, &out);
    return BS_OK;
}
/* }=== */
