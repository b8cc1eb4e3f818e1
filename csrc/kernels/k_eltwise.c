/* kernels/k_eltwise.c -- the elementwise kernels TensorTensor, TensorScalar,
** TensorScalarPtr, Reciprocal and Exponential (docs/spec/machine-model.md §4.5, §6.1; docs/spec/BIR-JSON.md
** "Operand conventions") over the ALU of alu.c. Nothing here allocates except through
** bs_kstate_tmp. */
#include <math.h>
#include "kernel.h"
#include "kview.h"
#include "krows.h"
#include "kaccum.h"

/* Write count int64 results (row-major) to view o. */
static void write_i64_all(const bs_view *o, const int64_t *vals)
{
    bs_cursor c;
    bs_cur_init(&c, o);
    while (c.left > 0) {
        int64_t n = c.left < BS_CHUNK ? c.left : BS_CHUNK;
        bs_cur_write_i64(&c, n, vals + c.pos);
    }
}

/* E_ARITH when an integer op that divides meets a zero divisor (r[j*rs], j < n). */

static bs_status check_divisor(int32_t op, const int64_t *r, int64_t rs, int64_t n,
                               int64_t pos, const char *what, bs_error *err)
{
    if (op != BS_ALU_mod_int && op != BS_ALU_mod && op != BS_ALU_divide)
        return BS_OK;
    for (int64_t j = 0; j < n; j++)
        if ((uint32_t)r[j * rs] == 0)       /* zero as int32 */
            return bs_errorf(err, BS_E_ARITH, "%s: integer %s by zero at element %lld",
                             what, bs_alu_table[op].name, (long long)(pos + j));
    return BS_OK;
}

static bs_status check_op(int32_t op, const char *what, bs_error *err)
{
    if (op < 0 || op >= BS_ALU__COUNT)
        return bs_errorf(err, BS_E_PROGRAM, "%s: invalid ALU op %d", what, (int)op);
    if (!bs_alu_is_elementwise(op))
        return bs_errorf(err, BS_E_UNSUPPORTED, "%s: ALU op '%s' is not elementwise",
                         what, bs_alu_table[op].name);
    return BS_OK;
}

static int64_t *int_results(bs_kctx *k, bs_error *err)
{
    int64_t *r = bs_kstate_tmp(k->ks, BS_KSLOT_D, (size_t)k->out[0].count * sizeof *r + 1);
    if (r == NULL)
        bs_errorf(err, BS_E_NOMEM, "out of memory for %lld integer results",
                  (long long)k->out[0].count);
    return r;
}
/* }=== */

/* {=== TensorTensor: out0 := op(in0, in1), elements paired in row-major order ===} */

static void tt_f32(int32_t op, const bs_view *a, const bs_view *b, const bs_view *o,
                   bs_accum *acc)
{
    float abuf[BS_CHUNK], bbuf[BS_CHUNK], obuf[BS_CHUNK];
    bs_cursor ca, cb, co;
    bs_cur_init(&ca, a);
    bs_cur_init(&cb, b);
    bs_cur_init(&co, o);
    while (co.left > 0) {
        int64_t n = acc ? bs_chunk3(&ca, &cb, &co) : bs_chunk3_f32(&ca, &cb, &co);
        const float *x = bs_cur_read_f32(&ca, n, abuf);
        const float *y = bs_cur_read_f32(&cb, n, bbuf);
        float *z = bs_cur_write_begin(&co, n, obuf);
        bs_alu_row_f32(op, z, x, y, n);
        if (acc)
            bs_accum_row(acc, co.idx[0], z, n);
        bs_cur_write_end(&co, n, z);
    }
}

/* Integer path: every result is computed (and divisors checked) before anything is
** written. */
static bs_status tt_i32(bs_kctx *k, int32_t op, const bs_view *a, const bs_view *b,
                        bs_error *err)
{
    int64_t abuf[BS_CHUNK], bbuf[BS_CHUNK];
    int64_t *res = int_results(k, err);
    bs_cursor ca, cb;
    if (res == NULL)
        return BS_E_NOMEM;
    bs_cur_init(&ca, a);
    bs_cur_init(&cb, b);
    while (ca.left > 0) {
        int64_t n = bs_chunk2(&ca, &cb), pos = ca.pos;
        bs_cur_read_i64(&ca, n, abuf);
        bs_cur_read_i64(&cb, n, bbuf);
        BS_TRY(check_divisor(op, bbuf, 1, n, pos, "TensorTensor", err));
        bs_alu_row_i32(op, res + pos, abuf, 1, bbuf, 1, n);
    }
    write_i64_all(&k->out[0], res);
    return BS_OK;
}

/* An accumulating instruction must compute in fp32 (the accumulator is fp32). */
static bs_status acc_fp32(int64_t cmd, int isint, const char *what, bs_error *err)
{
    if (cmd != BS_ACC_Idle && isint)
        return bs_errorf(err, BS_E_UNSUPPORTED, "%s: a bit-vector op cannot feed the "
                         "accumulator (acc must be Idle)", what);
    return BS_OK;
}

/* The body; `ac` folds the fp32 results (NULL on the common no-accumulator path). */
static inline bs_status tt_run(bs_kctx *k, int32_t op, bs_accum *ac, bs_error *err)
{
    bs_view in[2] = { k->in[0], k->in[1] }, out = k->out[0];
    BS_TRY(check_op(op, "TensorTensor", err));
    BS_TRY(bs_kview_check(k, in, 2, 0, "TensorTensor", err));
    if (!bs_alu_is_int(op))                       /* the int path buffers all results */
        BS_TRY(bs_kview_detach(k, in, 2, BS_KSLOT_A, err));
    bs_view_normalize(&in[0]);
    bs_view_normalize(&in[1]);
    if (bs_alu_is_int(op))
        return tt_i32(k, op, &in[0], &in[1], err);
    if (ac)
        bs_kview_normalize_free(&out);            /* cursor idx[0] = the partition */
    else
        bs_view_normalize(&out);
    tt_f32(op, &in[0], &in[1], &out, ac);
    return BS_OK;
}

/* Accumulator (kaccum.h): results folded per partition of out0; LoadAccumulate from
** ins[2], else reduce_init. */
bs_status bs_k_TensorTensor(bs_kctx *k, bs_error *err)
{
    int32_t op = (int32_t)BS_PI(k->insn, TensorTensor, op);
    int64_t cmd = BS_PI(k->insn, TensorTensor, acc);
    bs_accum ac;
    if (BS_LIKELY(cmd == BS_ACC_Idle))
        return tt_run(k, op, NULL, err);
    BS_TRY(check_op(op, "TensorTensor", err));
    BS_TRY(acc_fp32(cmd, bs_alu_is_int(op), "TensorTensor", err));
    BS_TRY(bs_accum_begin(k, &ac, cmd, (int32_t)BS_PI(k->insn, TensorTensor, reduce_op),
                          BS_ENGINE_DVE, 2, BS_PF(k->insn, TensorTensor, reduce_init),
                          k->out[0].num[0], "TensorTensor", err));
    BS_TRY(tt_run(k, op, ac.row ? &ac : NULL, err));
    bs_accum_end(&ac);
    return BS_OK;
}

/* {=== TensorScalar, TensorScalarPtr: out := op1(op0(in0, s0), s1) ===
** reverse flags put the scalar on the left. s0/s1 are one value, or one per partition of
** in[0] (cursor idx[0]). Each stage rounds to fp32; with an integer op anywhere, the
** whole instruction runs on the int32 path with integer scalars. */
typedef struct ts_spec {
    int32_t op0, op1, rev0, rev1;
    int     per_part;         /* scalars indexed by partition, else index 0 */
    const float   *f0, *f1;   /* fp32 scalars */
    const int64_t *i0, *i1;   /* integer scalars */
    bs_accum      *acc;       /* folds results per partition of out0, or NULL */
} ts_spec;

static void ts_row(const ts_spec *t, float *y, const float *x, float c0, float c1, int64_t n,
                   float *mid)
{
    if (bs_simd_ts(y, x, n, t->op0, t->rev0, c0, t->op1, t->rev1, c1))
        return;                                    /* both stages in one pass */
    if (t->op1 == BS_ALU_bypass && !t->rev1)
        mid = y;                                   /* one stage only */
    if (t->rev0)
        bs_alu_row_f32_ls(t->op0, mid, c0, x, n);
    else
        bs_alu_row_f32_rs(t->op0, mid, x, c0, n);
    if (mid == y)
        return;
    if (t->rev1)
        bs_alu_row_f32_ls(t->op1, y, c1, mid, n);
    else
        bs_alu_row_f32_rs(t->op1, y, mid, c1, n);
}

static void ts_f32(const ts_spec *t, const bs_view *a, const bs_view *o)
{
    float abuf[BS_CHUNK], obuf[BS_CHUNK], mid[BS_CHUNK];
    bs_cursor ca, co;
    bs_cur_init(&ca, a);
    bs_cur_init(&co, o);
    while (co.left > 0) {
        int64_t n = bs_chunk2(&ca, &co), p = t->per_part ? ca.idx[0] : 0;
        const float *x = bs_cur_read_f32(&ca, n, abuf);
        float *y = bs_cur_write_begin(&co, n, obuf);
        ts_row(t, y, x, t->f0[p], t->f1[p], n, mid);
        if (t->acc)
            bs_accum_row(t->acc, co.idx[0], y, n);
        bs_cur_write_end(&co, n, y);
    }
}

/* One integer stage over n elements: out = op(x, c) or op(c, x) when rev. */
static bs_status ts_istage(int32_t op, int rev, int64_t *out, const int64_t *x, int64_t c,
                           int64_t n, int64_t pos, bs_error *err)
{
    BS_TRY(check_divisor(op, rev ? x : &c, rev ? 1 : 0, n, pos, "TensorScalar", err));
    if (rev)
        bs_alu_row_i32(op, out, &c, 0, x, 1, n);
    else
        bs_alu_row_i32(op, out, x, 1, &c, 0, n);
    return BS_OK;
}

static bs_status ts_i32(bs_kctx *k, const ts_spec *t, const bs_view *a, bs_error *err)
{
    int64_t abuf[BS_CHUNK], mid[BS_CHUNK];
    int64_t *res = int_results(k, err);
    bs_cursor ca;
    if (res == NULL)
        return BS_E_NOMEM;
    bs_cur_init(&ca, a);
    while (ca.left > 0) {
        int64_t n = ca.left < BS_CHUNK ? ca.left : BS_CHUNK, pos = ca.pos;
        int64_t p = t->per_part ? ca.idx[0] : 0;
        bs_cur_read_i64(&ca, n, abuf);
        BS_TRY(ts_istage(t->op0, t->rev0, mid, abuf, t->i0[p], n, pos, err));
        BS_TRY(ts_istage(t->op1, t->rev1, res + pos, mid, t->i1[p], n, pos, err));
    }
    write_i64_all(&k->out[0], res);
    return BS_OK;
}

static bs_status ts_check(const bs_kctx *k, const ts_spec *t, const char *what, bs_error *err)
{
    BS_TRY(check_op(t->op0, what, err));
    BS_TRY(check_op(t->op1, what, err));
    return bs_kview_check(k, &k->in[0], 1, 0, what, err);
}

/* Shared body after ts_check: the fp32 or the integer path. */
static bs_status ts_run(bs_kctx *k, const ts_spec *t, bs_error *err)
{
    bs_view a = k->in[0], out = k->out[0];
    int isint = bs_alu_is_int(t->op0) || bs_alu_is_int(t->op1);
    if (!isint)                                   /* the int path buffers all results */
        BS_TRY(bs_kview_detach(k, &a, 1, BS_KSLOT_A, err));
    if (t->per_part)
        bs_kview_normalize_free(&a);
    else
        bs_view_normalize(&a);
    if (isint)
        return ts_i32(k, t, &a, err);
    if (t->acc)
        bs_kview_normalize_free(&out);            /* cursor idx[0] = the partition */
    else
        bs_view_normalize(&out);
    ts_f32(t, &a, &out);
    return BS_OK;
}

/* The accumulator of TensorScalar / TensorScalarPtr (LoadAccumulate from ins[3], else
** reduce_init), prepared after ts_check; t->acc set when results are folded. */
static bs_status ts_accum(bs_kctx *k, ts_spec *t, bs_accum *ac, const char *what,
                          bs_error *err)
{
    int64_t cmd = BS_PI(k->insn, TensorScalar, acc);
    ac->cmd = cmd;
    if (BS_LIKELY(cmd == BS_ACC_Idle))
        return BS_OK;
    BS_TRY(acc_fp32(cmd, bs_alu_is_int(t->op0) || bs_alu_is_int(t->op1), what, err));
    BS_TRY(bs_accum_begin(k, ac, cmd, (int32_t)BS_PI(k->insn, TensorScalar, reduce_op),
                          BS_ENGINE_DVE, 3, BS_PF(k->insn, TensorScalar, reduce_init),
                          k->out[0].num[0], what, err));
    ac->negate = BS_PI(k->insn, TensorScalar, res_negate) != 0;
    t->acc = ac->row ? ac : NULL;
    return BS_OK;
}

/* TensorScalar and TensorScalarPtr share these fields (read under TensorScalar's names). */
_Static_assert(BS_Pi_TensorScalar_op0 == BS_Pi_TensorScalarPtr_op0 &&
               BS_Pi_TensorScalar_op1 == BS_Pi_TensorScalarPtr_op1 &&
               BS_Pi_TensorScalar_reverse0 == BS_Pi_TensorScalarPtr_reverse0 &&
               BS_Pi_TensorScalar_reverse1 == BS_Pi_TensorScalarPtr_reverse1 &&
               BS_Pf_TensorScalar_const0 == BS_Pf_TensorScalarPtr_const0 &&
               BS_Pf_TensorScalar_const1 == BS_Pf_TensorScalarPtr_const1 &&
               BS_Pi_TensorScalar_acc == BS_Pi_TensorScalarPtr_acc &&
               BS_Pi_TensorScalar_reduce_op == BS_Pi_TensorScalarPtr_reduce_op &&
               BS_Pf_TensorScalar_reduce_init == BS_Pf_TensorScalarPtr_reduce_init &&
               BS_Pi_TensorScalar_res_negate == BS_Pi_TensorScalarPtr_res_negate,
               "TensorScalar/TensorScalarPtr slots");

static void ts_ops(ts_spec *t, const bs_insn *insn)
{
    t->op0 = (int32_t)BS_PI(insn, TensorScalar, op0);
    t->op1 = (int32_t)BS_PI(insn, TensorScalar, op1);
    t->rev0 = BS_PI(insn, TensorScalar, reverse0) != 0;
    t->rev1 = BS_PI(insn, TensorScalar, reverse1) != 0;
}

bs_status bs_k_TensorScalar(bs_kctx *k, bs_error *err)
{
    double c0 = BS_PF(k->insn, TensorScalar, const0), c1 = BS_PF(k->insn, TensorScalar, const1);
    float f[2] = { (float)c0, (float)c1 };
    int64_t i[2] = { f2i(c0), f2i(c1) };
    ts_spec t = { .per_part = 0, .f0 = &f[0], .f1 = &f[1], .i0 = &i[0], .i1 = &i[1] };
    bs_accum ac;
    ts_ops(&t, k->insn);
    BS_TRY(ts_check(k, &t, "TensorScalar", err));
    BS_TRY(ts_accum(k, &t, &ac, "TensorScalar", err));
    BS_TRY(ts_run(k, &t, err));
    bs_accum_end(&ac);
    return BS_OK;
}

/* Scalars from ins[1] and ins[2]: immediates, or one value per partition of in[0]
** (absent operands fall back to the const0/const1 keys). */
bs_status bs_k_TensorScalarPtr(bs_kctx *k, bs_error *err)
{
    const char *what = "TensorScalarPtr";
    ts_spec t = { .per_part = 0 };
    bs_accum ac;
    switch (BS_PI(k->insn, TensorScalarPtr, form)) {
    case BS_TSPF_plain: break;
    case BS_TSPF_is_tensor_tensor_scan: return bs_tsp_tensor_tensor_scan(k, err);
    case BS_TSPF_is_scalar_tensor_tensor: return bs_tsp_scalar_tensor_tensor(k, err);
    case BS_TSPF_is_tensor_scalar_addr: return bs_tsp_tensor_scalar_addr(k, err);
    default:
        return bs_errorf(err, BS_E_PROGRAM, "%s: invalid form %lld", what,
                         (long long)BS_PI(k->insn, TensorScalarPtr, form));
    }
    ts_ops(&t, k->insn);
    BS_TRY(ts_check(k, &t, what, err));
    BS_TRY(ts_accum(k, &t, &ac, what, err));
    for (int32_t j = 1; j <= 2; j++)
        t.per_part |= j < k->nin && k->in[j].ndim > 0;
    int64_t np = t.per_part ? k->in[0].num[0] : 1;
    int isint = bs_alu_is_int(t.op0) || bs_alu_is_int(t.op1);
    size_t esz = isint ? sizeof(int64_t) : sizeof(float);
    uint8_t *buf = bs_kstate_tmp(k->ks, BS_KSLOT_B, 2 * (size_t)np * esz + 1);
    if (buf == NULL)
        return bs_errorf(err, BS_E_NOMEM, "%s: out of memory", what);
    for (int32_t j = 1; j <= 2; j++) {
        uint8_t *dst = buf + (size_t)(j - 1) * (size_t)np * esz;
        double key = j == 1 ? BS_PF(k->insn, TensorScalarPtr, const0)
                            : BS_PF(k->insn, TensorScalarPtr, const1);
        BS_TRY(bs_kscalar_values(k, j, key, np, isint ? NULL : (float *)dst,
                         isint ? (int64_t *)dst : NULL, what, err));
    }
    t.f0 = (const float *)buf;
    t.f1 = t.f0 + np;
    t.i0 = (const int64_t *)buf;
    t.i1 = t.i0 + np;
    BS_TRY(ts_run(k, &t, err));
    bs_accum_end(&ac);
    return BS_OK;
}
/* }=== */

/* {=== Reciprocal, Exponential ===} */

bs_status bs_k_Reciprocal(bs_kctx *k, bs_error *err)
{
    float abuf[BS_CHUNK], obuf[BS_CHUNK];
    bs_view a = k->in[0], out = k->out[0];
    bs_cursor ca, co;
    BS_TRY(bs_kview_check(k, &a, 1, 0, "Reciprocal", err));
    BS_TRY(bs_kview_detach(k, &a, 1, BS_KSLOT_A, err));
    bs_view_normalize(&a);
    bs_view_normalize(&out);
    bs_cur_init(&ca, &a);
    bs_cur_init(&co, &out);
    while (co.left > 0) {
        int64_t n = bs_chunk2(&ca, &co);
        const float *x = bs_cur_read_f32(&ca, n, abuf);
        float *y = bs_cur_write_begin(&co, n, obuf);
        bs_alu_row_f32_ls(BS_ALU_divide, y, 1.0f, x, n);
        bs_cur_write_end(&co, n, y);
    }
    return BS_OK;
}

/* out0 := expf(in0 - m), m from ins[1] (an immediate or one value per partition; 0 when
** absent), the subtraction rounded to fp32 first; `ac` folds the results (NULL on the
** common no-accumulator path). */
static inline bs_status exp_run(bs_kctx *k, bs_accum *ac, bs_error *err)
{
    float abuf[BS_CHUNK], obuf[BS_CHUNK];
    bs_view a = k->in[0], out = k->out[0];
    bs_cursor ca, co;
    int pp = k->nin > 1 && k->in[1].ndim > 0;
    BS_TRY(bs_kview_check(k, &a, 1, 0, "Exponential", err));
    int64_t np = pp ? a.num[0] : 1;
    float *m = bs_kstate_tmp(k->ks, BS_KSLOT_B, (size_t)np * sizeof *m + 1);
    if (m == NULL)
        return bs_errorf(err, BS_E_NOMEM, "Exponential: out of memory");
    BS_TRY(bs_kscalar_values(k, 1, 0.0, np, m, NULL, "Exponential", err));
    BS_TRY(bs_kview_detach(k, &a, 1, BS_KSLOT_A, err));
    if (pp)
        bs_kview_normalize_free(&a);
    else
        bs_view_normalize(&a);
    if (ac)
        bs_kview_normalize_free(&out);            /* cursor idx[0] = the partition */
    else
        bs_view_normalize(&out);
    bs_cur_init(&ca, &a);
    bs_cur_init(&co, &out);
    while (co.left > 0) {
        int64_t n = bs_chunk2(&ca, &co);
        float mp = m[pp ? ca.idx[0] : 0];
        const float *x = bs_cur_read_f32(&ca, n, abuf);
        float *y = bs_cur_write_begin(&co, n, obuf);
        for (int64_t j = 0; j < n; j++)
            y[j] = x[j] - mp;                   /* rounded to fp32 before the exp */
        bs_expf_row(y, y, n);
        if (ac)
            bs_accum_row(ac, co.idx[0], y, n);
        bs_cur_write_end(&co, n, y);
    }
    return BS_OK;
}

/* Accumulator (kaccum.h): LoadAccumulate from ins[2], else reduce_init. */
bs_status bs_k_Exponential(bs_kctx *k, bs_error *err)
{
    int64_t cmd = BS_PI(k->insn, Exponential, acc);
    bs_accum ac;
    if (BS_LIKELY(cmd == BS_ACC_Idle))
        return exp_run(k, NULL, err);
    BS_TRY(bs_accum_begin(k, &ac, cmd, (int32_t)BS_PI(k->insn, Exponential, reduce_op),
                          BS_ENGINE_DVE, 2, BS_PF(k->insn, Exponential, reduce_init),
                          k->out[0].num[0], "Exponential", err));
    BS_TRY(exp_run(k, ac.row ? &ac : NULL, err));
    bs_accum_end(&ac);
    return BS_OK;
}
/* }=== */
