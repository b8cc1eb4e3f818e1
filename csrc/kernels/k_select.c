/* kernels/k_select.c -- data synthesis and selection: Memset, Iota and Select
** (docs/spec/machine-model.md §6.3, docs/spec/nki-isa-semantics.md §3.19-3.20, docs/spec/BIR-JSON.md "Operand
** conventions"). Memset writes raw bits; Iota computes in int32; Select decodes to fp32.
** CopyPredicated, TensorScalarAffineSelect and RangeSelect (docs/spec/nki-isa-semantics.md §3.16,
** §3.21, §3.22; operand order: README choices) follow at the end.
** Nothing here allocates except through bs_kstate_tmp. */
#include "kernel.h"
#include "kaccum.h"
#include "krows.h"
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
        /* a value (docs/spec/BIR-JSON.md "Execution rules"): cast to out[0]'s dtype through fp32 */
        double v = BS_PF(k->insn, Memset, value);
        if (!bs_dt_numeric(k->out[0].dtype) && v != 0.0)
            return bs_errorf(err, BS_E_UNSUPPORTED, "Memset: packed dtype %s only takes the "
                             "value 0, got %g", bs_dtinfo_table[k->out[0].dtype].name, v);
        if (bs_dt_numeric(k->out[0].dtype))
            bs_dt_store_f32_cast(raw, k->out[0].dtype, (float)v, k->out[0].cast);
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
static bs_status iota_pattern(const bs_kctx *k, int64_t free, iota_pat *pt, const char *what,
                              bs_error *err)
{
    const bs_insn *in = k->insn;
    int64_t cnt = 1;
    if (in->nlist % 2 || in->nlist / 2 > BS_MAX_SHAPE || in->list < 0
        || (int64_t)in->list + in->nlist > k->prog->n_ipool)
        return bs_errorf(err, BS_E_PROGRAM, "%s: bad pattern list (%d entries)", what,
                         (int)in->nlist);
    pt->n = in->nlist / 2;
    for (int32_t d = 0; d < pt->n; d++) {
        pt->step[d] = (uint32_t)k->prog->ipool[in->list + 2 * d];
        pt->num[d] = k->prog->ipool[in->list + 2 * d + 1];
        if (pt->num[d] < 0)
            return bs_errorf(err, BS_E_PROGRAM, "%s: pattern dim %d has num %lld", what,
                             (int)d, (long long)pt->num[d]);
        cnt = pt->num[d] && cnt > INT64_MAX / pt->num[d] ? -1 : cnt * pt->num[d];
    }
    if (pt->n == 0) {
        pt->n = 1;
        pt->step[0] = 1;
        pt->num[0] = cnt = free;
    }
    if (cnt != free)
        return bs_errorf(err, BS_E_SIM, "%s: pattern has %lld elements but out[0] has %lld "
                         "per partition", what, (long long)cnt, (long long)free);
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
    BS_TRY(iota_pattern(k, free, &pt, "Iota", err));
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
    BS_TRY(bs_kview_detach(k, in, 3, BS_KSLOT_A, err));
    for (int32_t j = 0; j < 3; j++)
        if (in[j].ndim > 0)
            bs_view_normalize(&in[j]);
    bs_view_normalize(&out);
    sel_run(in, imm, &out);
    return BS_OK;
}
/* }=== */

/* {=== Shared by the three selections below ===} */

/* A dense row-major [n] view of `dt` over `data` (scratch), encoding with `cast`. */
static bs_view dense_of(uint8_t *data, int32_t dt, int64_t n, int32_t cast)
{
    bs_view d = { 0 };
    d.data = data;
    d.dtype = dt;
    d.ndim = 1;
    d.num[0] = n;
    d.stride[0] = bs_dtinfo_table[dt].size;
    d.count = n;
    d.gathered = 1;
    d.cast = cast;
    return d;
}

/* `in` (a view with d's element count) in d's dtype into the dense view d: a bit copy
** when the dtypes match, else through fp32 (scratch slot `fslot`), as copies cast. */
static bs_status as_dtype(bs_kctx *k, const bs_view *in, const bs_view *d, int fslot,
                          const char *what, bs_error *err)
{
    if (in->dtype == d->dtype) {
        bs_copy_raw(d, in);
        return BS_OK;
    }
    if (!bs_dt_numeric(in->dtype) || !bs_dt_numeric(d->dtype))
        return bs_errorf(err, BS_E_UNSUPPORTED, "%s: cannot cast %s to %s (packed dtype)",
                         what, bs_dtinfo_table[in->dtype].name, bs_dtinfo_table[d->dtype].name);
    float *f = bs_kstate_tmp(k->ks, fslot, (size_t)in->count * sizeof(float) + 1);
    if (f == NULL)
        return bs_errorf(err, BS_E_NOMEM, "%s: out of memory for %lld elements", what,
                         (long long)in->count);
    bs_view_to_f32(f, in);
    bs_view_from_f32(d, f);
    return BS_OK;
}

static uint8_t *scratch(bs_kctx *k, int slot, int64_t n, int32_t dt)
{
    return bs_kstate_tmp(k->ks, slot, (size_t)n * (size_t)bs_dtinfo_table[dt].size + 8);
}

/* The comparisons an opcode's compare_op may name (AluOpType is_* / not_equal). */
static bs_status cmp_check(int64_t op, const char *what, const char *key, bs_error *err)
{
    if (op == BS_ALU_is_equal || op == BS_ALU_not_equal || op == BS_ALU_is_gt
            || op == BS_ALU_is_ge || op == BS_ALU_is_lt || op == BS_ALU_is_le)
        return BS_OK;
    return bs_errorf(err, BS_E_UNSUPPORTED, "%s: %s %s is not a comparison (is_equal, "
                     "not_equal, is_gt, is_ge, is_lt, is_le)", what, key,
                     op >= 0 && op < BS_ALU__COUNT ? bs_alu_table[op].name : "?");
}

static inline int cmp_i64(int64_t op, int64_t a, int64_t b)
{
    switch (op) {
    case BS_ALU_is_equal: return a == b;
    case BS_ALU_not_equal: return a != b;
    case BS_ALU_is_gt: return a > b;
    case BS_ALU_is_ge: return a >= b;
    case BS_ALU_is_lt: return a < b;
    default: return a <= b;
    }
}

static inline int cmp_f32(int64_t op, float a, float b)
{
    switch (op) {
    case BS_ALU_is_equal: return a == b;
    case BS_ALU_not_equal: return a != b;
    case BS_ALU_is_gt: return a > b;
    case BS_ALU_is_ge: return a >= b;
    case BS_ALU_is_lt: return a < b;
    default: return a <= b;
    }
}

static int nonzero_bits(const uint8_t *p, int32_t sz)
{
    for (int32_t b = 0; b < sz; b++)
        if (p[b])
            return 1;
    return 0;
}

/* {=== CopyPredicated: out0[i] := in0[i] where the bits of in1[i] are not all zero
** (inverted by reverse_pred); elsewhere out0[i] keeps its bytes. in0 may be an immediate.
** Same dtypes copy bits, different ones cast through fp32. With an accumulator command,
** every element of out0 as written (selected or kept, decoded to fp32) folds into lane p
** = its partition of out0 (kaccum.h; LoadAccumulate start ins[2], else reduce_init). ===} */

static void copy_pred_fold(bs_accum *ac, const uint8_t *ob, int32_t dt, int64_t P, int64_t F)
{
    int32_t sz = bs_dtinfo_table[dt].size;
    float buf[BS_CHUNK];
    if (ac->row == NULL)
        return;
    for (int64_t p = 0; p < P; p++)
        for (int64_t j = 0; j < F; j += BS_CHUNK) {
            int64_t m = F - j < BS_CHUNK ? F - j : BS_CHUNK;
            bs_dt_load_row_f32(buf, ob + (p * F + j) * sz, sz, m, dt);
            bs_accum_row(ac, p, buf, m);
        }
}

bs_status bs_k_CopyPredicated(bs_kctx *k, bs_error *err)
{
    const char *what = "CopyPredicated";
    bs_view out = k->out[0], src = k->in[0], pred = k->in[1];
    if (k->nin < 2 || k->nout < 1 || out.ndim == 0 || pred.ndim == 0)
        return bs_errorf(err, BS_E_PROGRAM, "%s needs ins[0] (the source: an access pattern "
                         "or an immediate), ins[1] (the predicate: an access pattern) and "
                         "outs[0]", what);
    int64_t n = out.count;
    int32_t osz = bs_dtinfo_table[out.dtype].size, psz = bs_dtinfo_table[pred.dtype].size;
    int rev = BS_PI(k->insn, CopyPredicated, reverse_pred) != 0;
    int64_t cmd = BS_PI(k->insn, CopyPredicated, acc);
    bs_accum ac;
    if (pred.count != n || (src.ndim > 0 && src.count != n))
        return bs_errorf(err, BS_E_SIM, "%s: ins[0] has %lld elements, ins[1] (predicate) "
                         "%lld and outs[0] %lld; they must match", what,
                         (long long)(src.ndim > 0 ? src.count : n), (long long)pred.count,
                         (long long)n);
    if (src.ndim == 0 && !bs_dt_numeric(out.dtype))
        return bs_errorf(err, BS_E_UNSUPPORTED, "%s: an immediate source cannot be written "
                         "as packed %s", what, bs_dtinfo_table[out.dtype].name);
    if (cmd != BS_ACC_Idle && !bs_dt_numeric(out.dtype))
        return bs_errorf(err, BS_E_UNSUPPORTED, "%s: packed %s cannot feed the accumulator",
                         what, bs_dtinfo_table[out.dtype].name);
    BS_TRY(bs_accum_begin(k, &ac, cmd, (int32_t)BS_PI(k->insn, CopyPredicated, reduce_op),
                          BS_ENGINE_DVE, 2, BS_PF(k->insn, CopyPredicated, reduce_init),
                          out.num[0], what, err));
    uint8_t *ob = scratch(k, BS_KSLOT_A, n, out.dtype), *pb = scratch(k, BS_KSLOT_C, n, pred.dtype);
    uint8_t *sb = scratch(k, BS_KSLOT_B, src.ndim > 0 ? n : 1, out.dtype);
    if (ob == NULL || pb == NULL || sb == NULL)
        return bs_errorf(err, BS_E_NOMEM, "%s: out of memory for %lld elements", what,
                         (long long)n);
    bs_view od = dense_of(ob, out.dtype, n, out.cast), pd = dense_of(pb, pred.dtype, n, 0);
    int64_t sstep = 0;
    if (src.ndim > 0) {                         /* read every input before writing */
        bs_view sd = dense_of(sb, out.dtype, n, out.cast);
        BS_TRY(as_dtype(k, &src, &sd, BS_KSLOT_D, what, err));
        sstep = osz;
    } else {
        bs_dt_store_f32_cast(sb, out.dtype, (float)k->imm[0], out.cast);
    }
    bs_copy_raw(&pd, &pred);
    bs_copy_raw(&od, &out);                     /* unselected elements keep their bytes */
    for (int64_t i = 0; i < n; i++)
        if (nonzero_bits(pb + i * psz, psz) != rev)
            memcpy(ob + i * osz, sb + i * sstep, (size_t)osz);
    copy_pred_fold(&ac, ob, out.dtype, out.num[0], n / out.num[0]);
    bs_copy_raw(&out, &od);
    bs_accum_end(&ac);
    return BS_OK;
}

/* {=== TensorScalarAffineSelect: a := base + p*channel_multiplier + Σ step_d*coord_d(j)
** (int32, Iota's pattern); out0[p, j] := compare_op(a, 0) ? in0[p, j] : fill_value ===} */

_Static_assert(BS_Pi_Iota_base == BS_Pi_TensorScalarAffineSelect_base
               && BS_Pi_Iota_channel_multiplier == BS_Pi_TensorScalarAffineSelect_channel_multiplier
               && BS_Px_Iota_base_expr == BS_Px_TensorScalarAffineSelect_base_expr,
               "Iota and TensorScalarAffineSelect share the affine slots");

bs_status bs_k_TensorScalarAffineSelect(bs_kctx *k, bs_error *err)
{
    const char *what = "TensorScalarAffineSelect";
    const bs_insn *in = k->insn;
    bs_view out = k->out[0], src = k->in[0];
    if (k->nin < 1 || k->nout < 1 || out.ndim == 0 || src.ndim == 0)
        return bs_errorf(err, BS_E_PROGRAM, "%s needs ins[0] (the on-true tile) and outs[0] "
                         "as access patterns", what);
    if (!bs_dt_numeric(out.dtype))
        return bs_errorf(err, BS_E_UNSUPPORTED, "%s: outs[0] dtype %s is not supported", what,
                         bs_dtinfo_table[out.dtype].name);
    if (src.num[0] != out.num[0] || src.count != out.count)
        return bs_errorf(err, BS_E_SIM, "%s: ins[0] (%lld partitions, %lld elements) and "
                         "outs[0] (%lld, %lld) differ", what, (long long)src.num[0],
                         (long long)src.count, (long long)out.num[0], (long long)out.count);
    int64_t op = BS_PI(in, TensorScalarAffineSelect, compare_op);
    BS_TRY(cmp_check(op, what, "compare_op", err));
    int64_t P = out.num[0], free = P ? out.count / P : 0;
    int64_t base = BS_PX(in, TensorScalarAffineSelect, base_expr) >= 0
        ? k->xval[BS_PXI(TensorScalarAffineSelect, base_expr)]
        : BS_PI(in, TensorScalarAffineSelect, base);
    uint32_t cm = (uint32_t)BS_PI(in, TensorScalarAffineSelect, channel_multiplier);
    iota_pat pt = { 0 };
    BS_TRY(iota_pattern(k, free, &pt, what, err));
    int32_t osz = bs_dtinfo_table[out.dtype].size;
    uint8_t *ob = scratch(k, BS_KSLOT_A, out.count, out.dtype), fill[8] = { 0 };
    if (ob == NULL)
        return bs_errorf(err, BS_E_NOMEM, "%s: out of memory for %lld elements", what,
                         (long long)out.count);
    bs_view od = dense_of(ob, out.dtype, out.count, out.cast);
    BS_TRY(as_dtype(k, &src, &od, BS_KSLOT_B, what, err));
    bs_dt_store_f32_cast(fill, out.dtype, (float)BS_PF(in, TensorScalarAffineSelect, fill_value),
                         out.cast);
    int64_t vals[BS_CHUNK];
    for (int64_t p = 0; p < P; p++)
        for (int64_t j0 = 0; j0 < free; j0 += BS_CHUNK) {
            int64_t n = free - j0 < BS_CHUNK ? free - j0 : BS_CHUNK;
            iota_fill(&pt, (uint32_t)base + (uint32_t)p * cm, j0, n, vals);
            for (int64_t j = 0; j < n; j++)
                if (!cmp_i64(op, vals[j], 0))
                    memcpy(ob + (p * free + j0 + j) * osz, fill, (size_t)osz);
        }
    bs_copy_raw(&out, &od);
    return BS_OK;
}

/* {=== RangeSelect: j := base + the free index (fp32); out0[p, j] := compare_op0(j,
** in1[p]) && compare_op1(j, in2[p]) ? in0[p, j] : fill_value, in fp32; the row's results
** fold into the engine accumulator by acc with reduce_op (default max: NKI range_select;
** kaccum.h; LoadAccumulate start ins[3], else reduce_init) ===} */

bs_status bs_k_RangeSelect(bs_kctx *k, bs_error *err)
{
    const char *what = "RangeSelect";
    const bs_insn *in = k->insn;
    int64_t op0 = BS_PI(in, RangeSelect, compare_op0), op1 = BS_PI(in, RangeSelect, compare_op1);
    int64_t acc = BS_PI(in, RangeSelect, acc), base = BS_PI(in, RangeSelect, base);
    float fill = (float)BS_PF(in, RangeSelect, fill_value);
    const float *b0, *b1;
    bs_rows a;
    bs_accum ac;
    if (k->nin < 3)
        return bs_errorf(err, BS_E_PROGRAM, "%s needs ins[0] (the on-true tile), ins[1] "
                         "(bound0) and ins[2] (bound1), has %d ins", what, (int)k->nin);
    BS_TRY(cmp_check(op0, what, "compare_op0", err));
    BS_TRY(cmp_check(op1, what, "compare_op1", err));
    BS_TRY(bs_rows_in(k, 0, BS_KSLOT_A, &a, what, err));
    BS_TRY(bs_acc_check(acc, a.P, what, err));
    BS_TRY(bs_rows_out_check(k, 0, a.P, a.F, what, err));
    BS_TRY(bs_rows_scalar(k, 1, 0.0, a.P, BS_KSLOT_B, &b0, what, err));
    BS_TRY(bs_rows_scalar(k, 2, 0.0, a.P, BS_KSLOT_C, &b1, what, err));
    BS_TRY(bs_accum_begin(k, &ac, acc, (int32_t)BS_PI(in, RangeSelect, reduce_op),
                          BS_ENGINE_DVE, 3, BS_PF(in, RangeSelect, reduce_init), a.P, what,
                          err));
    float *o = bs_kstate_tmp(k->ks, BS_KSLOT_D, (size_t)a.P * (size_t)a.F * sizeof(float) + 1);
    if (o == NULL)
        return bs_errorf(err, BS_E_NOMEM, "%s: out of memory", what);
    for (int64_t p = 0; p < a.P; p++) {
        for (int64_t j = 0; j < a.F; j++) {
            float idx = (float)(base + j), v = a.v[p * a.F + j];
            if (!(cmp_f32(op0, idx, b0[p]) && cmp_f32(op1, idx, b1[p])))
                v = fill;
            o[p * a.F + j] = v;
        }
        if (ac.row != NULL)
            bs_accum_row(&ac, p, o + p * a.F, a.F);
    }
    bs_view_from_f32(&k->out[0], o);
    bs_accum_end(&ac);
    return BS_OK;
}
/* }=== */
