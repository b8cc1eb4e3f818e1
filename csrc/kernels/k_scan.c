/* kernels/k_scan.c -- per-partition recurrences and the fused TensorScalarPtr forms
** (docs/spec/machine-model.md §6.1, docs/spec/nki-isa-semantics.md §3.8-3.10, §3.13).
**
** TensorScalarCache, per partition p, over the row's elements x[i] in AP order, with
** c0 = operand0 (ins[1], else const0) and reg starting per `acc` (krows.h bs_acc_start;
** reset value: the identity of op1):
**     v = op0(x[i], c0)          (reverse0: op0(c0, x[i]))
**     reg = op1(v, reg)          (reverse1: op1(reg, v))
** Cumulative writes reg after every element, Reduce only the final reg ([P, 1]).
** TensorScan runs the tensor_tensor_scan recurrence with data1 = ins[1] (reset value 0):
**     reg = op1(op0(x[i], reg), data1[i])   (reverse0: op0(reg, x[i]); reverse1: op1(data1[i], t))
** LoadAccumulate starts from ins[2] (else const1). Unless acc is Idle the final reg is
** left in the engine accumulator (kaccum.h; DVE when the engine is Unassigned/ALL).
** Every stage rounds to fp32. */
#include "krows.h"
#include "kview.h"
#include "kaccum.h"

static bs_status fp32_op(int32_t op, const char *name, const char *what, bs_error *err)
{
    if (op < 0 || op >= BS_ALU__COUNT || !bs_alu_is_elementwise(op) || bs_alu_is_int(op))
        return bs_errorf(err, BS_E_UNSUPPORTED, "%s: %s %s is not an fp32 arithmetic op", what,
                         name, op >= 0 && op < BS_ALU__COUNT ? bs_alu_table[op].name : "?");
    return BS_OK;
}

static inline float ord(int32_t op, float l, float r, int rev)
{
    return rev ? bs_alu_f32(op, r, l) : bs_alu_f32(op, l, r);
}

/* The tensor_tensor_scan recurrence over rows a (data0) and b (data1) into o, from start[p]. */
static void tt_scan(float *o, const bs_rows *a, const float *b, int32_t op0, int32_t op1,
                    int rev0, int rev1, const float *start, float *last)
{
    for (int64_t p = 0; p < a->P; p++) {
        const float *x = a->v + p * a->F, *y = b + p * a->F;
        float *z = o + p * a->F, r = start[p];
        for (int64_t i = 0; i < a->F; i++) {
            float t = rev0 ? bs_alu_f32(op0, r, x[i]) : bs_alu_f32(op0, x[i], r);
            r = ord(op1, t, y[i], rev1);
            z[i] = r;
        }
        last[p] = r;
    }
}

bs_status bs_k_TensorScalarCache(bs_kctx *k, bs_error *err)
{
    const char *what = "TensorScalarCache";
    const bs_insn *in = k->insn;
    int64_t mode = BS_PI(in, TensorScalarCache, mode), acc = BS_PI(in, TensorScalarCache, acc);
    int64_t from;
    int32_t op0 = (int32_t)BS_PI(in, TensorScalarCache, op0);
    int32_t op1 = (int32_t)BS_PI(in, TensorScalarCache, op1);
    int rev0 = BS_PI(in, TensorScalarCache, reverse0) != 0;
    int rev1 = BS_PI(in, TensorScalarCache, reverse1) != 0;
    bs_rows a, b;
    const float *c0, *load;
    float id = 0.0f, *o, *last, *start, *eng = bs_accum_engine(k, BS_ENGINE_DVE);
    if (mode < BS_TSC_Reduce || mode > BS_TSC_TensorScan)
        return bs_errorf(err, BS_E_UNSUPPORTED, "%s: mode %lld is not a TSCMode", what,
                         (long long)mode);
    BS_TRY(fp32_op(op0, "op0", what, err));
    BS_TRY(fp32_op(op1, "op1", what, err));
    BS_TRY(bs_rows_in(k, 0, BS_KSLOT_A, &a, what, err));
    BS_TRY(bs_acc_check(acc, a.P, what, err));
    if (eng == NULL && acc != BS_ACC_Idle)
        return bs_errorf(err, BS_E_UNSUPPORTED, "%s: engine %s has no accumulator (Pool, "
                         "Activation and DVE have one)", what,
                         bs_enum_name("ENGINE", k->insn->engine));
    if (mode != BS_TSC_TensorScan)
        BS_TRY(bs_rows_identity(op1, &id, what, err));
    BS_TRY(bs_rows_out_check(k, 0, a.P, mode == BS_TSC_Reduce ? 1 : a.F, what, err));
    /* scratch: out rows, then P start values, P load values, P final values */
    o = bs_kstate_tmp(k->ks, BS_KSLOT_C, ((size_t)a.P * (size_t)a.F + 3 * (size_t)a.P) *
                      sizeof(float) + 1);
    if (o == NULL)
        return bs_errorf(err, BS_E_NOMEM, "%s: out of memory", what);
    start = o + a.P * a.F;
    last = start + a.P;
    BS_TRY(bs_rows_scalar(k, 2, BS_PF(in, TensorScalarCache, const1), a.P, BS_KSLOT_D, &load,
                          what, err));
    from = bs_accum_from(acc, bs_accum_mark(k, BS_ENGINE_DVE));    /* consumed: reset */
    for (int64_t p = 0; p < a.P; p++)
        start[p] = bs_acc_start(from, id, eng, load, p);
    if (mode == BS_TSC_TensorScan) {
        BS_TRY(bs_rows_in(k, 1, BS_KSLOT_B, &b, what, err));
        if (b.P != a.P || b.F != a.F)
            return bs_errorf(err, BS_E_SIM, "%s: TensorScan needs ins[1] shaped like ins[0] "
                             "(%lld x %lld), got %lld x %lld", what, (long long)a.P,
                             (long long)a.F, (long long)b.P, (long long)b.F);
        tt_scan(o, &a, b.v, op0, op1, rev0, rev1, start, last);
    } else {
        /* start[] is computed, so c0 may reuse the load values' slot */
        BS_TRY(bs_rows_scalar(k, 1, BS_PF(in, TensorScalarCache, const0), a.P, BS_KSLOT_D, &c0,
                              what, err));
        for (int64_t p = 0; p < a.P; p++) {
            const float *x = a.v + p * a.F;
            float *z = o + p * a.F, r = start[p], s = c0[p];
            if (op0 == BS_ALU_add && op1 == BS_ALU_add && !rev0 && !rev1) {
                for (int64_t i = 0; i < a.F; i++) {     /* the common cumsum, same math */
                    r = (x[i] + s) + r;
                    z[i] = r;
                }
            } else {
                for (int64_t i = 0; i < a.F; i++) {
                    r = ord(op1, ord(op0, x[i], s, rev0), r, rev1);
                    z[i] = r;
                }
            }
            last[p] = r;
            if (mode == BS_TSC_Reduce)
                o[p] = r;
        }
    }
    if (acc != BS_ACC_Idle) {
        memcpy(eng, last, (size_t)a.P * sizeof(float));
        *bs_accum_mark(k, BS_ENGINE_DVE) = 0;
    }
    bs_view_from_f32(&k->out[0], o);
    return BS_OK;
}

/* {=== TensorScalarPtr fused forms ===
** Operands: ins[0] the data, ins[1] a per-partition scalar (imm or [P,1]), ins[2] a full
** tile shaped like ins[0]; the accumulator's LoadAccumulate start ins[3], else
** reduce_init. */

static bs_status tsp_accum(bs_kctx *k, bs_accum *ac, int64_t P, const char *what,
                           bs_error *err)
{
    BS_TRY(bs_accum_begin(k, ac, BS_PI(k->insn, TensorScalarPtr, acc),
                          (int32_t)BS_PI(k->insn, TensorScalarPtr, reduce_op), BS_ENGINE_DVE,
                          3, BS_PF(k->insn, TensorScalarPtr, reduce_init), P, what, err));
    ac->negate = BS_PI(k->insn, TensorScalarPtr, res_negate) != 0;
    return BS_OK;
}

static bs_status tile2(bs_kctx *k, bs_rows *a, bs_rows *b, const char *what, bs_error *err)
{
    BS_TRY(bs_rows_in(k, 0, BS_KSLOT_A, a, what, err));
    BS_TRY(bs_rows_in(k, 2, BS_KSLOT_B, b, what, err));
    if (b->P != a->P || b->F != a->F)
        return bs_errorf(err, BS_E_SIM, "%s needs ins[2] shaped like ins[0] (%lld x %lld), "
                         "got %lld x %lld", what, (long long)a->P, (long long)a->F,
                         (long long)b->P, (long long)b->F);
    return bs_rows_out_check(k, 0, a->P, a->F, what, err);
}

/* NKI tensor_tensor_scan: r = op1(op0(data0[i], r), data1[i]) from initial = ins[1]. */
bs_status bs_tsp_tensor_tensor_scan(bs_kctx *k, bs_error *err)
{
    const char *what = "TensorScalarPtr (is_tensor_tensor_scan)";
    const bs_insn *in = k->insn;
    int32_t op0 = (int32_t)BS_PI(in, TensorScalarPtr, op0);
    int32_t op1 = (int32_t)BS_PI(in, TensorScalarPtr, op1);
    bs_rows a, b;
    bs_accum ac;
    const float *init;
    BS_TRY(fp32_op(op0, "op0", what, err));
    BS_TRY(fp32_op(op1, "op1", what, err));
    BS_TRY(tile2(k, &a, &b, what, err));
    BS_TRY(tsp_accum(k, &ac, a.P, what, err));
    BS_TRY(bs_rows_scalar(k, 1, BS_PF(in, TensorScalarPtr, const0), a.P, BS_KSLOT_D, &init, what,
                          err));
    float *o = bs_kstate_tmp(k->ks, BS_KSLOT_C, ((size_t)a.P * (size_t)a.F + (size_t)a.P) *
                             sizeof(float) + 1);
    if (o == NULL)
        return bs_errorf(err, BS_E_NOMEM, "%s: out of memory", what);
    tt_scan(o, &a, b.v, op0, op1, BS_PI(in, TensorScalarPtr, reverse0) != 0,
            BS_PI(in, TensorScalarPtr, reverse1) != 0, init, o + a.P * a.F);
    bs_accum_rows(&ac, o, a.P, a.F);
    bs_accum_end(&ac);
    bs_view_from_f32(&k->out[0], o);
    return BS_OK;
}

/* NKI scalar_tensor_tensor: out = op1(op0(data, s[p]), tile). */
bs_status bs_tsp_scalar_tensor_tensor(bs_kctx *k, bs_error *err)
{
    const char *what = "TensorScalarPtr (is_scalar_tensor_tensor)";
    const bs_insn *in = k->insn;
    int32_t op0 = (int32_t)BS_PI(in, TensorScalarPtr, op0);
    int32_t op1 = (int32_t)BS_PI(in, TensorScalarPtr, op1);
    int rev0 = BS_PI(in, TensorScalarPtr, reverse0) != 0;
    int rev1 = BS_PI(in, TensorScalarPtr, reverse1) != 0;
    bs_rows a, b;
    bs_accum ac;
    const float *s;
    BS_TRY(fp32_op(op0, "op0", what, err));
    BS_TRY(fp32_op(op1, "op1", what, err));
    BS_TRY(tile2(k, &a, &b, what, err));
    BS_TRY(tsp_accum(k, &ac, a.P, what, err));
    BS_TRY(bs_rows_scalar(k, 1, BS_PF(in, TensorScalarPtr, const0), a.P, BS_KSLOT_D, &s, what,
                          err));
    float *o = bs_kstate_tmp(k->ks, BS_KSLOT_C, (size_t)a.P * (size_t)a.F * sizeof(float) + 1);
    if (o == NULL)
        return bs_errorf(err, BS_E_NOMEM, "%s: out of memory", what);
    for (int64_t p = 0; p < a.P; p++)
        for (int64_t i = 0; i < a.F; i++) {
            int64_t e = p * a.F + i;
            o[e] = ord(op1, ord(op0, a.v[e], s[p], rev0), b.v[e], rev1);
        }
    bs_accum_rows(&ac, o, a.P, a.F);
    bs_accum_end(&ac);
    bs_view_from_f32(&k->out[0], o);
    return BS_OK;
}

/* The address ALU: int64 two's complement (wrapping), shifts outside 0..63 give 0 (or the
** sign fill for arith_shift_right). */
static bs_status addr_op(int32_t op, int64_t l, int64_t r, int64_t *out)
{
    uint64_t ul = (uint64_t)l, ur = (uint64_t)r;
    switch (op) {
    case BS_ALU_bypass: *out = l; break;
    case BS_ALU_add: *out = (int64_t)(ul + ur); break;
    case BS_ALU_subtract: *out = (int64_t)(ul - ur); break;
    case BS_ALU_mult: *out = (int64_t)(ul * ur); break;
    case BS_ALU_max: *out = l > r ? l : r; break;
    case BS_ALU_min: *out = l < r ? l : r; break;
    case BS_ALU_bitwise_and: *out = l & r; break;
    case BS_ALU_bitwise_or: *out = l | r; break;
    case BS_ALU_bitwise_xor: *out = l ^ r; break;
    case BS_ALU_arith_shift_left:
    case BS_ALU_logical_shift_left: *out = (r < 0 || r > 63) ? 0 : (int64_t)(ul << r); break;
    case BS_ALU_arith_shift_right: *out = (r < 0 || r > 63) ? (l < 0 ? -1 : 0) : l >> r; break;
    case BS_ALU_logical_shift_right: *out = (r < 0 || r > 63) ? 0 : (int64_t)(ul >> r); break;
    default: return BS_E_UNSUPPORTED;
    }
    return BS_OK;
}

/* is_tensor_scalar_addr: TensorScalarPtr on the int64 address ALU; int32/uint32 outputs
** keep the low 32 bits of the result, other dtypes take it by value (bs_dt_store_i64). */
bs_status bs_tsp_tensor_scalar_addr(bs_kctx *k, bs_error *err)
{
    const char *what = "TensorScalarPtr (is_tensor_scalar_addr)";
    const bs_insn *in = k->insn;
    int32_t op[2] = { (int32_t)BS_PI(in, TensorScalarPtr, op0),
                      (int32_t)BS_PI(in, TensorScalarPtr, op1) };
    int rev[2] = { BS_PI(in, TensorScalarPtr, reverse0) != 0,
                   BS_PI(in, TensorScalarPtr, reverse1) != 0 };
    const bs_view *x = &k->in[0], *y = &k->out[0];
    int64_t dummy;
    if (k->nin < 1 || x->ndim == 0 || k->nout < 1 || y->ndim == 0)
        return bs_errorf(err, BS_E_PROGRAM, "%s needs access patterns as ins[0] and outs[0]", what);
    if (BS_PI(in, TensorScalarPtr, acc) != BS_ACC_Idle)
        return bs_errorf(err, BS_E_UNSUPPORTED, "%s: the integer address ALU cannot feed the "
                         "accumulator (acc must be Idle)", what);
    if (x->count != y->count || x->num[0] != y->num[0])
        return bs_errorf(err, BS_E_SIM, "%s: outs[0] (%lld elements) must match ins[0] (%lld)",
                         what, (long long)y->count, (long long)x->count);
    for (int s = 0; s < 2; s++)
        if (op[s] < 0 || op[s] >= BS_ALU__COUNT || addr_op(op[s], 0, 0, &dummy) != BS_OK)
            return bs_errorf(err, BS_E_UNSUPPORTED, "%s: op%d %s is not an address-ALU op",
                             what, s, op[s] >= 0 && op[s] < BS_ALU__COUNT ?
                             bs_alu_table[op[s]].name : "?");
    int64_t P = x->num[0], F = x->count / (P > 0 ? P : 1);
    int64_t *buf = bs_kstate_tmp(k->ks, BS_KSLOT_A, ((size_t)x->count + 2 * (size_t)P) *
                                 sizeof(int64_t) + 1);
    if (buf == NULL)
        return bs_errorf(err, BS_E_NOMEM, "%s: out of memory", what);
    int64_t *sc = buf + x->count;
    for (int32_t j = 1; j <= 2; j++) {
        double dflt = j == 1 ? BS_PF(in, TensorScalarPtr, const0) : BS_PF(in, TensorScalarPtr, const1);
        BS_TRY(bs_kscalar_values(k, j, dflt, P, NULL, sc + (j - 1) * P, what, err));
    }
    bs_view_to_i64(buf, x);
    for (int64_t p = 0; p < P; p++)
        for (int64_t i = 0; i < F; i++) {
            int64_t v = buf[p * F + i];
            for (int s = 0; s < 2; s++) {
                int64_t c_ = sc[s * P + p];
                addr_op(op[s], rev[s] ? c_ : v, rev[s] ? v : c_, &v);
            }
            buf[p * F + i] = v;
        }
    if (y->dtype == BS_DT_int32 || y->dtype == BS_DT_uint32)
        for (int64_t e = 0; e < x->count; e++)     /* 32-bit outputs keep the low bits */
            buf[e] = y->dtype == BS_DT_int32 ? (int64_t)(int32_t)(uint32_t)(uint64_t)buf[e]
                                             : (int64_t)(uint32_t)(uint64_t)buf[e];
    bs_cursor o;
    bs_cur_init(&o, y);
    for (int64_t pos = 0; o.left > 0; ) {
        int64_t n = o.left < BS_CHUNK ? o.left : BS_CHUNK;
        bs_cur_write_i64(&o, n, buf + pos);
        pos += n;
    }
    return BS_OK;
}
/* }=== */
