/* kernels/k_reduce.c -- TensorReduce (machine-model.md §6.1, BIR-JSON.md "Execution rules").
**
** Each output element is a strictly sequential left fold over its input elements in
** row-major order, rounded to fp32 at every step (integer ops: int32 two's complement).
** Speed comes from vectorising *across* output elements, never from reassociating a fold:
** results must equal the sequential fold bit for bit. The whole input is gathered into
** scratch before the output is written, so overlapping operands are safe. */
#include "kernel.h"

enum { SLOT_IN = 0, SLOT_ACC = 1 };

/* From this many outputs on, fold column-wise: one bs_alu_row_f32 call per reduced
** position, vectorised over the outputs. Below it, per-row scalar folds are cheaper. */
#define COLS_MIN 8

typedef struct rshape {
    int64_t outer;        /* output elements: product of the kept (outer) dims */
    int64_t inner;        /* elements folded into each output */
    int32_t nkeep;        /* kept dims: in[0].num[0 .. nkeep) */
} rshape;

/* The kept/reduced split of in[0] for `axis`; E_UNSUPPORTED for XYZWC/C or an unknown
** axis, E_SIM when out[0] does not hold one element per kept position. */
static bs_status reduce_shape(const bs_kctx *k, int64_t axis, rshape *rs, bs_error *err)
{
    const bs_view *in = &k->in[0];
    if (axis < BS_AXIS_X || axis > BS_AXIS_XYZW)
        return bs_errorf(err, BS_E_UNSUPPORTED, "TensorReduce: axis %lld is not supported "
                         "(X, XY, XYZ or XYZW)", (long long)axis);
    rs->nkeep = axis + 1 >= in->ndim ? 0 : in->ndim - (int32_t)(axis + 1);
    rs->outer = 1;
    for (int32_t d = 0; d < rs->nkeep; d++)
        rs->outer *= in->num[d];
    rs->inner = in->count / rs->outer;
    if (k->out[0].count != rs->outer)
        return bs_errorf(err, BS_E_SIM, "TensorReduce: reducing %lld of in[0]'s %d dims leaves "
                         "%lld elements, but out[0] has %lld", (long long)(axis + 1),
                         (int)in->ndim, (long long)rs->outer, (long long)k->out[0].count);
    return BS_OK;
}

/* in[0] with its reduced dims moved outermost: gathered densely it is [inner][outer]. */
static bs_view column_view(const bs_view *in, int32_t nkeep)
{
    bs_view cv = *in;
    int32_t nred = in->ndim - nkeep;
    for (int32_t d = 0; d < in->ndim; d++) {
        int32_t s = d < nred ? nkeep + d : d - nred;
        cv.num[d] = in->num[s];
        cv.stride[d] = in->stride[s];
    }
    return cv;
}

static inline void div_row(float *x, float n, int64_t count)
{
    for (int64_t j = 0; j < count; j++)
        x[j] = x[j] / n;
}

/* acc = x[0]; acc = op(acc, x[j]) for j = 1 .. n-1, rounded at every step. */
static float fold_row(int32_t op, const float *x, int64_t n)
{
    float acc = x[0];
    switch (op) {
    case BS_ALU_add:
        for (int64_t j = 1; j < n; j++)
            acc = acc + x[j];
        break;
    case BS_ALU_mult:
        for (int64_t j = 1; j < n; j++)
            acc = acc * x[j];
        break;
    default:
        for (int64_t j = 1; j < n; j++)
            acc = bs_alu_f32(op, acc, x[j]);
        break;
    }
    return acc;
}

/* The fp32 path: every op but the bit-vector ones; `average` folds x/N with add. */
static bs_status reduce_f32(bs_kctx *k, const rshape *rs, int32_t op, int negate, bs_error *err)
{
    const bs_view *in = &k->in[0];
    int32_t fop = op == BS_ALU_average ? BS_ALU_add : op;
    float *buf = bs_kstate_tmp(k->ks, SLOT_IN, (size_t)in->count * sizeof(float));
    float *acc = buf;
    if (buf == NULL)
        return bs_errorf(err, BS_E_NOMEM, "TensorReduce: out of memory for %lld elements",
                         (long long)in->count);
    if (rs->outer >= COLS_MIN && rs->inner > 1) {
        bs_view cv = column_view(in, rs->nkeep);
        bs_view_to_f32(buf, &cv);                 /* buf[j * outer + o] */
        if (op == BS_ALU_average)
            div_row(buf, (float)rs->inner, in->count);
        for (int64_t j = 1; j < rs->inner; j++)   /* row 0 is the accumulator */
            bs_alu_row_f32(fop, buf, buf, buf + j * rs->outer, rs->outer);
    } else {
        acc = bs_kstate_tmp(k->ks, SLOT_ACC, (size_t)rs->outer * sizeof(float));
        if (acc == NULL)
            return bs_errorf(err, BS_E_NOMEM, "TensorReduce: out of memory");
        bs_view_to_f32(buf, in);                  /* buf[o * inner + j] */
        if (op == BS_ALU_average)
            div_row(buf, (float)rs->inner, in->count);
        for (int64_t o = 0; o < rs->outer; o++)
            acc[o] = fold_row(fop, buf + o * rs->inner, rs->inner);
    }
    if (negate)
        for (int64_t o = 0; o < rs->outer; o++)
            acc[o] = -acc[o];
    bs_view_from_f32(&k->out[0], acc);
    return BS_OK;
}

/* {=== Integer (bit-vector) path ===} */

static void view_to_i64(int64_t *dst, const bs_view *v)
{
    bs_cursor c;
    bs_cur_init(&c, v);
    while (c.left > 0) {
        int64_t n = c.left < BS_CHUNK ? c.left : BS_CHUNK;
        bs_cur_read_i64(&c, n, dst);
        dst += n;
    }
}

static void view_from_i64(const bs_view *v, const int64_t *src)
{
    bs_cursor c;
    bs_cur_init(&c, v);
    while (c.left > 0) {
        int64_t n = c.left < BS_CHUNK ? c.left : BS_CHUNK;
        bs_cur_write_i64(&c, n, src);
        src += n;
    }
}

/* Bit-vector ops fold on int32 via bs_alu_i32; negate is a two's-complement negate.
** mod_int by zero is E_ARITH. */
static bs_status reduce_int(bs_kctx *k, const rshape *rs, int32_t op, int negate, bs_error *err)
{
    const bs_view *in = &k->in[0];
    int64_t *buf = bs_kstate_tmp(k->ks, SLOT_IN, (size_t)in->count * sizeof(int64_t));
    int64_t *acc = bs_kstate_tmp(k->ks, SLOT_ACC, (size_t)rs->outer * sizeof(int64_t));
    if (buf == NULL || acc == NULL)
        return bs_errorf(err, BS_E_NOMEM, "TensorReduce: out of memory for %lld elements",
                         (long long)in->count);
    view_to_i64(buf, in);
    for (int64_t o = 0; o < rs->outer; o++) {
        const int64_t *x = buf + o * rs->inner;
        int64_t a = x[0];
        for (int64_t j = 1; j < rs->inner; j++) {
            if (op == BS_ALU_mod_int && (int32_t)x[j] == 0)
                return bs_errorf(err, BS_E_ARITH, "TensorReduce: mod_int by zero (element %lld "
                                 "of output %lld)", (long long)j, (long long)o);
            a = bs_alu_i32(op, a, x[j]);
        }
        acc[o] = negate ? (int64_t)(int32_t)(0u - (uint32_t)a) : a;
    }
    view_from_i64(&k->out[0], acc);
    return BS_OK;
}

/* TensorReduce: i0 op (bs_alu), i1 axis (BS_AXIS_*), i2 negate. Reduces the innermost
** axis+1 dims of in[0] (all of them, across partitions, when axis+1 >= ndim) into out[0],
** which holds one element per remaining position in row-major order. E_UNSUPPORTED for
** elemwise_mul, XYZWC/C or packed dtypes; E_SIM on a shape mismatch. */
bs_status bs_k_TensorReduce(bs_kctx *k, bs_error *err)
{
    int64_t op = BS_PI(k->insn, TensorReduce, op);
    int negate = BS_PI(k->insn, TensorReduce, negate) != 0;
    rshape rs = { 1, 1, 0 };
    if (k->nin < 1 || k->nout < 1 || k->in[0].ndim == 0 || k->out[0].ndim == 0)
        return bs_errorf(err, BS_E_UNSUPPORTED, "TensorReduce needs access patterns for in[0] "
                         "and out[0]");
    if (op < 0 || op >= BS_ALU__COUNT || op == BS_ALU_elemwise_mul)
        return bs_errorf(err, BS_E_UNSUPPORTED, "TensorReduce: op %s is not supported",
                         (op >= 0 && op < BS_ALU__COUNT) ? bs_alu_table[op].name : "?");
    if (!bs_dt_numeric(k->in[0].dtype) || !bs_dt_numeric(k->out[0].dtype))
        return bs_errorf(err, BS_E_UNSUPPORTED, "TensorReduce cannot compute on %s -> %s",
                         bs_dtinfo_table[k->in[0].dtype].name,
                         bs_dtinfo_table[k->out[0].dtype].name);
    BS_TRY(reduce_shape(k, BS_PI(k->insn, TensorReduce, axis), &rs, err));
    if (bs_alu_is_int((int32_t)op))
        return reduce_int(k, &rs, (int32_t)op, negate, err);
    return reduce_f32(k, &rs, (int32_t)op, negate, err);
}
