/* kernels/k_reduce.c -- TensorReduce (docs/spec/machine-model.md §6.1, docs/spec/BIR-JSON.md "Execution rules").
**
** Each output element is a strictly sequential left fold over its input elements in
** row-major order, rounded to fp32 at every step (integer ops: int32 two's complement).
** Speed comes from vectorising *across* output elements, never from reassociating a fold:
** results must equal the sequential fold bit for bit. The whole input is gathered into
** scratch before the output is written, so overlapping operands are safe. */
#include "kernel.h"
#include "kaccum.h"

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

/* {=== Row path: fold each output's elements straight from memory ===}
**
** When the reduced dims collapse to one run (n elements `step` bytes apart) and the op is
** add, mult, max, min or average, each output is a row; rows are folded RED_ROWS at a time,
** each lane one row's running value, so the fold order per output is unchanged. On x86
** an AVX copy transposes 8 x 8 blocks in registers (maxps/minps are exactly
** `l > r ? l : r` / `l < r ? l : r`, NaN and ties included). fp32 rows with step 4 are
** read in place; other dtypes are decoded ROW_CHUNK columns at a time. Long max/min rows
** take row_extreme_avx2 instead, whose result is provably the fold's. */

#define ROW_CHUNK 256
#define RED_ROWS 16        /* rows folded together (a multiple of 8) */

typedef struct rrows {
    int64_t n, step;          /* elements per output and their spacing in bytes */
    int64_t *off;             /* byte offset of each output's first element */
} rrows;

static int row_op(int32_t op)
{
    return op == BS_ALU_add || op == BS_ALU_mult || op == BS_ALU_max || op == BS_ALU_min ||
           op == BS_ALU_average;
}

/* Collapse dims nkeep.. of `in` into one run; 0 when they do not form one. */
static int row_run(const bs_view *in, int32_t nkeep, int64_t *n, int64_t *step)
{
    int64_t cn = 1, cs = 0;
    for (int32_t d = in->ndim - 1; d >= nkeep; d--) {
        if (in->num[d] == 1)
            continue;
        if (cn == 1)
            cs = in->stride[d];
        else if (in->stride[d] != cs * cn)
            return 0;
        cn *= in->num[d];
    }
    *n = cn;
    *step = cn == 1 ? 0 : cs;
    return 1;
}

/* off[o] for every output o: the odometer over the kept dims. */
static void row_offsets(const bs_view *in, int32_t nkeep, int64_t outer, int64_t *off)
{
    int64_t idx[BS_MAX_DIMS] = {0}, at = 0;
    for (int64_t o = 0; o < outer; o++) {
        off[o] = at;
        for (int32_t d = nkeep - 1; d >= 0; d--) {
            at += in->stride[d];
            if (++idx[d] < in->num[d])
                break;
            at -= in->num[d] * in->stride[d];
            idx[d] = 0;
        }
    }
}

#define RED_INLINE static inline __attribute__((always_inline))

RED_INLINE float op_f32(int32_t op, float l, float r)
{
    switch (op) {
    case BS_ALU_mult: return l * r;
    case BS_ALU_max: return l > r ? l : r;
    case BS_ALU_min: return l < r ? l : r;
    default: return l + r;
    }
}

/* Element j of a row read in place: fp32, or bf16 (its bits are fp32's top half). */
RED_INLINE float row_at(const uint8_t *row, int bf16, int64_t j)
{
    uint32_t u;
    float f;
    if (bf16) {
        uint16_t h;
        memcpy(&h, row + j * 2, sizeof h);
        u = (uint32_t)h << 16;
    } else {
        memcpy(&u, row + j * 4, sizeof u);
    }
    memcpy(&f, &u, sizeof f);
    return f;
}

/* acc[r] = op(acc[r], x / div) over columns j0..j1 of rows p[0..nr) (div 0: no divide). */
RED_INLINE void fold_scalar(int32_t op, int bf16, float div, const uint8_t *const *p, int nr,
                            int64_t j0, int64_t j1, float *acc)
{
    for (int r = 0; r < nr; r++) {
        float a = acc[r];
        for (int64_t j = j0; j < j1; j++) {
            float x = row_at(p[r], bf16, j);
            a = op_f32(op, a, div != 0.0f ? x / div : x);
        }
        acc[r] = a;
    }
}

#if defined(__GNUC__) && defined(__x86_64__) && !defined(BS_RED_NO_AVX)
#include <immintrin.h>
#define RED_AVX 1
#define AVX_INLINE RED_INLINE __attribute__((target("avx")))

AVX_INLINE __m256 op_v8(int32_t op, __m256 l, __m256 r)
{
    switch (op) {
    case BS_ALU_mult: return _mm256_mul_ps(l, r);
    case BS_ALU_max: return _mm256_max_ps(l, r);
    case BS_ALU_min: return _mm256_min_ps(l, r);
    default: return _mm256_add_ps(l, r);
    }
}

/* Elements j .. j+3 of a row as fp32 (bf16: each 16-bit value into a lane's top half). */
AVX_INLINE __m128 ld4(const uint8_t *row, int bf16, int64_t j)
{
    if (bf16)
        return _mm_castsi128_ps(_mm_unpacklo_epi16(_mm_setzero_si128(),
                                                   _mm_loadl_epi64((const void *)(row + j * 2))));
    return _mm_loadu_ps((const float *)(const void *)(row + j * 4));
}

/* Columns j .. j+3 of rows p[0..8) as four vectors c[t][row] (an in-register transpose). */
AVX_INLINE void cols4(const uint8_t *const *p, int bf16, int64_t j, __m256 *c)
{
#define RED_LD(a, b) _mm256_insertf128_ps(_mm256_castps128_ps256(ld4(p[a], bf16, j)), \
                                          ld4(p[b], bf16, j), 1)
    __m256 u0 = RED_LD(0, 4), u1 = RED_LD(1, 5), u2 = RED_LD(2, 6), u3 = RED_LD(3, 7);
#undef RED_LD
    __m256 t0 = _mm256_unpacklo_ps(u0, u1), t1 = _mm256_unpackhi_ps(u0, u1);
    __m256 t2 = _mm256_unpacklo_ps(u2, u3), t3 = _mm256_unpackhi_ps(u2, u3);
    c[0] = _mm256_shuffle_ps(t0, t2, 0x44);
    c[1] = _mm256_shuffle_ps(t0, t2, 0xEE);
    c[2] = _mm256_shuffle_ps(t1, t3, 0x44);
    c[3] = _mm256_shuffle_ps(t1, t3, 0xEE);
}

/* fold_scalar for RED_ROWS rows, 8 lanes per vector: RED_ROWS / 8 independent chains hide
** the op's latency. */
AVX_INLINE void fold_v8(int32_t op, int bf16, float div, const uint8_t *const *p, int64_t j0,
                        int64_t j1, float *acc)
{
    __m256 a[RED_ROWS / 8], dv = _mm256_set1_ps(div);
    int64_t j = j0;
    for (int g = 0; g < RED_ROWS / 8; g++)
        a[g] = _mm256_loadu_ps(acc + 8 * g);
    for (; j + 4 <= j1; j += 4) {
        __m256 c[RED_ROWS / 8][4];
        for (int g = 0; g < RED_ROWS / 8; g++)
            cols4(p + 8 * g, bf16, j, c[g]);
        for (int t = 0; t < 4; t++)
            for (int g = 0; g < RED_ROWS / 8; g++)
                a[g] = op_v8(op, a[g], div != 0.0f ? _mm256_div_ps(c[g][t], dv) : c[g][t]);
    }
    for (int g = 0; g < RED_ROWS / 8; g++)
        _mm256_storeu_ps(acc + 8 * g, a[g]);
    fold_scalar(op, bf16, div, p, RED_ROWS, j, j1, acc);
}

/* max/min of one row of n >= 32 elements with the order of the fold changed: every lane
** keeps its own running max (min). Without NaNs the fold returns an element equal to the
** row's max, and equal non-zero floats have equal bits, so this is the fold's result
** unless it is zero (then +0/-0 ties depend on order). Returns 0 -- the caller then folds
** sequentially -- on a NaN or a zero result. */
__attribute__((target("avx2")))
static int row_extreme_avx2(int32_t op, int bf16, const uint8_t *row, int64_t n, float *out)
{
    __m256 a[4], nan = _mm256_setzero_ps();
    float lane[8], m;
    int64_t j;
    for (j = 0; j < 32; j += 8)
        a[j / 8] = bf16 ? _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(
                              _mm_loadu_si128((const void *)(row + j * 2))), 16))
                        : _mm256_loadu_ps((const float *)(const void *)(row + j * 4));
    for (j = 0; j + 32 <= n; j += 32)
        for (int g = 0; g < 4; g++) {
            int64_t at = j + 8 * g;
            __m256 v = bf16 ? _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(
                                  _mm_loadu_si128((const void *)(row + at * 2))), 16))
                            : _mm256_loadu_ps((const float *)(const void *)(row + at * 4));
            nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
            a[g] = op == BS_ALU_max ? _mm256_max_ps(a[g], v) : _mm256_min_ps(a[g], v);
        }
    if (_mm256_movemask_ps(nan) != 0)
        return 0;
    for (int g = 1; g < 4; g++)
        a[0] = op == BS_ALU_max ? _mm256_max_ps(a[0], a[g]) : _mm256_min_ps(a[0], a[g]);
    _mm256_storeu_ps(lane, a[0]);
    m = lane[0];
    for (int t = 1; t < 8; t++)
        m = op_f32(op, m, lane[t]);
    for (; j < n; j++) {
        float x = row_at(row, bf16, j);
        if (x != x)
            return 0;
        m = op_f32(op, m, x);
    }
    if (m == 0.0f)
        return 0;
    *out = m;
    return 1;
}

#define RED_CASES(F, bf) \
    switch (op) {      /* one copy per op, so op_v8's switch folds away */ \
    case BS_ALU_mult: F(BS_ALU_mult, bf, div, p, j0, j1, acc); break; \
    case BS_ALU_max: F(BS_ALU_max, bf, div, p, j0, j1, acc); break; \
    case BS_ALU_min: F(BS_ALU_min, bf, div, p, j0, j1, acc); break; \
    default: F(BS_ALU_add, bf, div, p, j0, j1, acc); break; \
    }

__attribute__((target("avx")))
static void fold_avx(int32_t op, int bf16, float div, const uint8_t *const *p, int64_t j0,
                       int64_t j1, float *acc)
{
    if (bf16)
        RED_CASES(fold_v8, 1)
    else
        RED_CASES(fold_v8, 0)
}
#endif

/* Fold columns j0..j1 of rows p[0..nr) (fp32, or bf16 when bf16) into acc[0..nr). */
static void fold_rows(int32_t op, int bf16, float div, const uint8_t *const *p, int nr,
                      int64_t j0, int64_t j1, float *acc)
{
#ifdef RED_AVX
    if (nr == RED_ROWS && __builtin_cpu_supports("avx")) {
        fold_avx(op, bf16, div, p, j0, j1, acc);
        return;
    }
#endif
    switch (op) {
    case BS_ALU_mult: fold_scalar(BS_ALU_mult, bf16, div, p, nr, j0, j1, acc); break;
    case BS_ALU_max: fold_scalar(BS_ALU_max, bf16, div, p, nr, j0, j1, acc); break;
    case BS_ALU_min: fold_scalar(BS_ALU_min, bf16, div, p, nr, j0, j1, acc); break;
    default: fold_scalar(BS_ALU_add, bf16, div, p, nr, j0, j1, acc); break;
    }
}

/* Fold outputs o0 .. o0+nr (nr <= RED_ROWS) of `rr` into acc. Dense fp32 and bf16 rows are
** read in place; others are decoded ROW_CHUNK columns at a time into dec (RED_ROWS chunks). */
static void fold_group(const bs_view *in, const rrows *rr, int32_t op, float div, int64_t o0,
                       int nr, float *dec, float *acc)
{
    const uint8_t *p[RED_ROWS];
    int f32 = in->dtype == BS_DT_float32 || in->dtype == BS_DT_float32r;
    int bf16 = in->dtype == BS_DT_bfloat16;
    int64_t es = bs_dtinfo_table[in->dtype].size;
    int direct = (f32 || bf16) && (rr->step == es || rr->n == 1);
#ifdef RED_AVX
    if (direct && (op == BS_ALU_max || op == BS_ALU_min) && rr->n >= 32 &&
        __builtin_cpu_supports("avx2")) {
        for (int r = 0; r < nr; r++) {
            const uint8_t *row = in->data + rr->off[o0 + r];
            if (!row_extreme_avx2(op, bf16, row, rr->n, &acc[r])) {
                acc[r] = row_at(row, bf16, 0);
                fold_rows(op, bf16, 0.0f, &row, 1, 1, rr->n, &acc[r]);
            }
        }
        return;
    }
#endif
    for (int64_t j0 = 0; j0 < rr->n; j0 += ROW_CHUNK) {   /* direct: one pass */
        int64_t j1 = direct || rr->n - j0 < ROW_CHUNK ? rr->n : j0 + ROW_CHUNK;
        for (int r = 0; r < nr; r++) {
            const uint8_t *src = in->data + rr->off[o0 + r];
            if (direct) {
                p[r] = src;
            } else {
                bs_dt_load_row_f32(dec + r * ROW_CHUNK, src + j0 * rr->step, rr->step,
                                   j1 - j0, in->dtype);
                p[r] = (const uint8_t *)(dec + r * ROW_CHUNK);   /* columns j0 .. j1 */
            }
            if (j0 == 0) {
                float x0 = row_at(p[r], direct && bf16, 0);
                acc[r] = div != 0.0f ? x0 / div : x0;
            }
        }
        fold_rows(op, direct && bf16, div, p, nr, j0 == 0 ? 1 : 0, direct ? j1 : j1 - j0, acc);
        if (direct)
            break;
    }
}

/* The row path; 0 when it does not apply (the caller takes the general one). */
static int reduce_rows(bs_kctx *k, const rshape *rs, int32_t op, float *acc, bs_status *st,
                       bs_error *err)
{
    const bs_view *in = &k->in[0];
    rrows rr;
    float *dec;
    *st = BS_OK;
    if (!row_op(op) || !row_run(in, rs->nkeep, &rr.n, &rr.step) || rr.n != rs->inner)
        return 0;
    rr.off = bs_kstate_tmp(k->ks, BS_KSLOT_C, (size_t)rs->outer * sizeof(int64_t));
    dec = bs_kstate_tmp(k->ks, BS_KSLOT_D, RED_ROWS * ROW_CHUNK * sizeof(float));
    if (rr.off == NULL || dec == NULL) {
        *st = bs_errorf(err, BS_E_NOMEM, "TensorReduce: out of memory");
        return 1;
    }
    row_offsets(in, rs->nkeep, rs->outer, rr.off);
    for (int64_t o = 0; o < rs->outer; o += RED_ROWS) {
        int nr = rs->outer - o < RED_ROWS ? (int)(rs->outer - o) : RED_ROWS;
        fold_group(in, &rr, op == BS_ALU_average ? BS_ALU_add : op,
                   op == BS_ALU_average ? (float)rs->inner : 0.0f, o, nr, dec, acc + o);
    }
    return 1;
}

/* The fp32 path: every op but the bit-vector ones; `average` folds x/N with add. */
static bs_status reduce_f32(bs_kctx *k, const rshape *rs, int32_t op, int negate,
                            bs_accum *ac, bs_error *err)
{
    const bs_view *in = &k->in[0];
    int32_t fop = op == BS_ALU_average ? BS_ALU_add : op;
    float *buf, *acc = bs_kstate_tmp(k->ks, BS_KSLOT_B, (size_t)rs->outer * sizeof(float));
    bs_status st;
    if (acc == NULL)
        return bs_errorf(err, BS_E_NOMEM, "TensorReduce: out of memory");
    if (reduce_rows(k, rs, op, acc, &st, err)) {
        BS_TRY(st);
        goto done;
    }
    buf = bs_kstate_tmp(k->ks, BS_KSLOT_A, (size_t)in->count * sizeof(float));
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
        memcpy(acc, buf, (size_t)rs->outer * sizeof(float));
    } else {
        bs_view_to_f32(buf, in);                  /* buf[o * inner + j] */
        if (op == BS_ALU_average)
            div_row(buf, (float)rs->inner, in->count);
        for (int64_t o = 0; o < rs->outer; o++)
            acc[o] = fold_row(fop, buf + o * rs->inner, rs->inner);
    }
done:
    if (negate)
        for (int64_t o = 0; o < rs->outer; o++)
            acc[o] = -acc[o];
    if (ac->row)
        bs_accum_rows(ac, acc, k->out[0].num[0], rs->outer / k->out[0].num[0]);
    bs_view_from_f32(&k->out[0], acc);
    return BS_OK;
}

/* {=== Integer (bit-vector) path ===} */

/* Bit-vector ops fold on int32 via bs_alu_i32; negate is a two's-complement negate.
** mod_int by zero is E_ARITH. */
static bs_status reduce_int(bs_kctx *k, const rshape *rs, int32_t op, int negate, bs_error *err)
{
    const bs_view *in = &k->in[0];
    int64_t *buf = bs_kstate_tmp(k->ks, BS_KSLOT_A, (size_t)in->count * sizeof(int64_t));
    int64_t *acc = bs_kstate_tmp(k->ks, BS_KSLOT_B, (size_t)rs->outer * sizeof(int64_t));
    if (buf == NULL || acc == NULL)
        return bs_errorf(err, BS_E_NOMEM, "TensorReduce: out of memory for %lld elements",
                         (long long)in->count);
    bs_view_to_i64(buf, in);
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
    bs_view_from_i64(&k->out[0], acc);
    return BS_OK;
}

static bs_status reduce_transposed(bs_kctx *k, int32_t op, int negate, bs_accum *ac,
                                   bs_error *err);

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
    int64_t cmd = BS_PI(k->insn, TensorReduce, acc);
    if (bs_alu_is_int((int32_t)op) && cmd != BS_ACC_Idle)
        return bs_errorf(err, BS_E_UNSUPPORTED, "TensorReduce: a bit-vector op cannot "
                         "feed the accumulator (acc must be Idle)");
    bs_accum ac;       /* folds the results per partition of out0 (kaccum.h) */
    BS_TRY(bs_accum_begin(k, &ac, cmd, (int32_t)BS_PI(k->insn, TensorReduce, reduce_op),
                          BS_ENGINE_DVE, 1, BS_PF(k->insn, TensorReduce, reduce_init),
                          k->out[0].num[0], "TensorReduce", err));
    if (BS_PI(k->insn, TensorReduce, apply_transpose))
        BS_TRY(reduce_transposed(k, (int32_t)op, negate, &ac, err));
    else {
        BS_TRY(reduce_shape(k, BS_PI(k->insn, TensorReduce, axis), &rs, err));
        if (bs_alu_is_int((int32_t)op))
            return reduce_int(k, &rs, (int32_t)op, negate, err);
        BS_TRY(reduce_f32(k, &rs, (int32_t)op, negate, &ac, err));
    }
    bs_accum_end(&ac);
    return BS_OK;
}

/* {=== TensorReduce apply_transpose ===}
** With apply_transpose, in[0] (read as P partitions of F elements in AP order) is first
** transposed on the Vector engine's 32 x 32 grid, then reduced as usual:
**   - P and F multiples of 32: every 32 x 32 block is transposed in place (partition and
**     element index swap their low 5 bits, as StreamTranspose does); in[0]'s AP dims are
**     kept, so `axis` counts them as without the transpose;
**   - otherwise P <= 32 and F <= 32: the tile becomes [F, P] (one free dim of P), so X
**     reduces over the original partitions (a cross-partition reduce).
** Anything else is E_SIM. Folds are sequential left folds in fp32 (int32 for bit-vector
** ops), as in the untransposed path. */

typedef struct tshape {
    int32_t ndim;                  /* dims of the transposed tile T */
    int64_t num[BS_MAX_DIMS];
    int64_t P, F;                  /* in[0] as P x F */
    int     block;                 /* 1: 32 x 32 blocks in place; 0: whole [F, P] */
} tshape;

static bs_status transposed_shape(const bs_view *in, tshape *ts, bs_error *err)
{
    ts->P = in->num[0];
    ts->F = ts->P > 0 ? in->count / ts->P : 0;
    if (ts->P % 32 == 0 && ts->F % 32 == 0) {
        ts->block = 1;
        ts->ndim = in->ndim;
        for (int32_t d = 0; d < in->ndim; d++)
            ts->num[d] = in->num[d];
        return BS_OK;
    }
    if (ts->P <= 32 && ts->F <= 32) {
        ts->block = 0;
        ts->ndim = 2;
        ts->num[0] = ts->F;
        ts->num[1] = ts->P;
        return BS_OK;
    }
    return bs_errorf(err, BS_E_SIM, "TensorReduce apply_transpose: ins[0] is %lld partitions x "
                     "%lld elements; the 32x32 transpose needs both <= 32 or both multiples "
                     "of 32", (long long)ts->P, (long long)ts->F);
}

/* in[0]'s flat (row-major) index of T's flat element i. */
static inline int64_t transposed_src(const tshape *ts, int64_t i)
{
    if (!ts->block)
        return (i % ts->P) * ts->F + i / ts->P;
    int64_t p = i / ts->F, f = i % ts->F;
    return ((p & ~(int64_t)31) + (f & 31)) * ts->F + (f & ~(int64_t)31) + (p & 31);
}

static bs_status transposed_split(const bs_kctx *k, const tshape *ts, int64_t axis,
                                  rshape *rs, bs_error *err)
{
    if (axis < BS_AXIS_X || axis > BS_AXIS_XYZW)
        return bs_errorf(err, BS_E_UNSUPPORTED, "TensorReduce: axis %lld is not supported "
                         "(X, XY, XYZ or XYZW)", (long long)axis);
    rs->nkeep = axis + 1 >= ts->ndim ? 0 : ts->ndim - (int32_t)(axis + 1);
    rs->outer = 1;
    for (int32_t d = 0; d < rs->nkeep; d++)
        rs->outer *= ts->num[d];
    rs->inner = rs->outer > 0 ? (ts->P * ts->F) / rs->outer : 0;
    if (k->out[0].count != rs->outer)
        return bs_errorf(err, BS_E_SIM, "TensorReduce apply_transpose: reducing %lld of the "
                         "transposed tile's %d dims leaves %lld elements, but out[0] has %lld",
                         (long long)(axis + 1), (int)ts->ndim, (long long)rs->outer,
                         (long long)k->out[0].count);
    return BS_OK;
}

static bs_status reduce_transposed(bs_kctx *k, int32_t op, int negate, bs_accum *ac,
                                   bs_error *err)
{
    const bs_view *in = &k->in[0];
    tshape ts = {0};                    /* zeroed: GCC cannot see BS_TRY's early returns */
    rshape rs = {0};
    BS_TRY(transposed_shape(in, &ts, err));
    BS_TRY(transposed_split(k, &ts, BS_PI(k->insn, TensorReduce, axis), &rs, err));
    int64_t n = in->count;
    if (rs.outer == 0 || rs.inner == 0)
        return BS_OK;
    if (bs_alu_is_int(op)) {
        int64_t *buf = bs_kstate_tmp(k->ks, BS_KSLOT_A, (size_t)n * sizeof(int64_t));
        int64_t *t = bs_kstate_tmp(k->ks, BS_KSLOT_C, (size_t)n * sizeof(int64_t));
        int64_t *acc = bs_kstate_tmp(k->ks, BS_KSLOT_B, (size_t)rs.outer * sizeof(int64_t));
        if (buf == NULL || t == NULL || acc == NULL)
            return bs_errorf(err, BS_E_NOMEM, "TensorReduce: out of memory for %lld elements",
                             (long long)n);
        bs_view_to_i64(buf, in);
        for (int64_t i = 0; i < n; i++)
            t[i] = buf[transposed_src(&ts, i)];
        for (int64_t o = 0; o < rs.outer; o++) {
            const int64_t *x = t + o * rs.inner;
            int64_t a = x[0];
            for (int64_t j = 1; j < rs.inner; j++) {
                if (op == BS_ALU_mod_int && (int32_t)x[j] == 0)
                    return bs_errorf(err, BS_E_ARITH, "TensorReduce: mod_int by zero (element "
                                     "%lld of output %lld)", (long long)j, (long long)o);
                a = bs_alu_i32(op, a, x[j]);
            }
            acc[o] = negate ? (int64_t)(int32_t)(0u - (uint32_t)a) : a;
        }
        bs_view_from_i64(&k->out[0], acc);
        return BS_OK;
    }
    float *buf = bs_kstate_tmp(k->ks, BS_KSLOT_A, (size_t)n * sizeof(float));
    float *t = bs_kstate_tmp(k->ks, BS_KSLOT_C, (size_t)n * sizeof(float));
    float *acc = bs_kstate_tmp(k->ks, BS_KSLOT_B, (size_t)rs.outer * sizeof(float));
    if (buf == NULL || t == NULL || acc == NULL)
        return bs_errorf(err, BS_E_NOMEM, "TensorReduce: out of memory for %lld elements",
                         (long long)n);
    bs_view_to_f32(buf, in);
    for (int64_t i = 0; i < n; i++)
        t[i] = buf[transposed_src(&ts, i)];
    if (op == BS_ALU_average)
        div_row(t, (float)rs.inner, n);
    for (int64_t o = 0; o < rs.outer; o++) {
        float a = fold_row(op == BS_ALU_average ? BS_ALU_add : op, t + o * rs.inner, rs.inner);
        acc[o] = negate ? -a : a;
    }
    if (ac->row)                        /* lane p: the results of out0's partition p */
        bs_accum_rows(ac, acc, k->out[0].num[0], rs.outer / k->out[0].num[0]);
    bs_view_from_f32(&k->out[0], acc);
    return BS_OK;
}

/* {=== TongaReduceMacroSymbolic ===}
** out[0] [P, G] and in[0] [P, F] (F a multiple of G, k = F / G): r[p, g] folds the k
** consecutive elements in[p, g*k .. g*k+k) with `op` (sequential left fold, fp32; int32
** for bit-vector ops); out := r on the first trip (is_first_reduce, and every loop axis
** of reduce_axes at its first value: x0 = sum of (axis - lb) is 0), else
** out := op(out, r). */
bs_status bs_k_TongaReduceMacroSymbolic(bs_kctx *k, bs_error *err)
{
    const char *what = "TongaReduceMacroSymbolic";
    int64_t op = BS_PI(k->insn, TongaReduceMacroSymbolic, op);
    int first = BS_PI(k->insn, TongaReduceMacroSymbolic, is_first_reduce) != 0
                && k->xval[0] == 0;
    const bs_view *in = &k->in[0], *out = &k->out[0];
    if (k->nin < 1 || in->ndim == 0 || k->nout < 1 || out->ndim == 0)
        return bs_errorf(err, BS_E_PROGRAM, "%s needs access patterns for ins[0] and outs[0]",
                         what);
    if (op < 0 || op >= BS_ALU__COUNT || op == BS_ALU_elemwise_mul || op == BS_ALU_average)
        return bs_errorf(err, BS_E_UNSUPPORTED, "%s: op %s is not supported", what,
                         (op >= 0 && op < BS_ALU__COUNT) ? bs_alu_table[op].name : "?");
    if (!bs_dt_numeric(in->dtype) || !bs_dt_numeric(out->dtype))
        return bs_errorf(err, BS_E_UNSUPPORTED, "%s cannot compute on %s -> %s (ins[0] -> "
                         "outs[0])", what, bs_dtinfo_table[in->dtype].name,
                         bs_dtinfo_table[out->dtype].name);
    int64_t P = in->num[0], F = P > 0 ? in->count / P : 0;
    int64_t G = out->num[0] > 0 ? out->count / out->num[0] : 0;
    if (out->num[0] != P || G == 0 || F % G != 0)
        return bs_errorf(err, BS_E_SIM, "%s: ins[0] is %lld partitions x %lld elements, outs[0] "
                         "%lld x %lld; outs[0] needs ins[0]'s partitions and a divisor of its "
                         "elements", what, (long long)P, (long long)F, (long long)out->num[0],
                         (long long)G);
    int64_t kk = F / G, n = P * G;
    if (bs_alu_is_int((int32_t)op)) {
        int64_t *buf = bs_kstate_tmp(k->ks, BS_KSLOT_A, (size_t)in->count * sizeof(int64_t));
        int64_t *old = bs_kstate_tmp(k->ks, BS_KSLOT_C, (size_t)n * sizeof(int64_t));
        int64_t *acc = bs_kstate_tmp(k->ks, BS_KSLOT_B, (size_t)n * sizeof(int64_t));
        if (buf == NULL || old == NULL || acc == NULL)
            return bs_errorf(err, BS_E_NOMEM, "%s: out of memory", what);
        bs_view_to_i64(buf, in);
        if (!first)
            bs_view_to_i64(old, out);
        for (int64_t o = 0; o < n; o++) {
            const int64_t *x = buf + o * kk;
            int64_t a = x[0];
            for (int64_t j = 1; j <= kk; j++) {
                int64_t b = j < kk ? x[j] : a;
                if (j == kk) {                    /* the combine step: op(out, r) */
                    if (first)
                        break;
                    a = old[o];
                }
                if (op == BS_ALU_mod_int && (int32_t)b == 0)
                    return bs_errorf(err, BS_E_ARITH, "%s: mod_int by zero (element %lld of "
                                     "output %lld)", what, (long long)j, (long long)o);
                a = bs_alu_i32((int32_t)op, a, b);
            }
            acc[o] = a;
        }
        bs_view_from_i64(out, acc);
        return BS_OK;
    }
    float *buf = bs_kstate_tmp(k->ks, BS_KSLOT_A, (size_t)in->count * sizeof(float));
    float *old = bs_kstate_tmp(k->ks, BS_KSLOT_C, (size_t)n * sizeof(float));
    float *acc = bs_kstate_tmp(k->ks, BS_KSLOT_B, (size_t)n * sizeof(float));
    if (buf == NULL || old == NULL || acc == NULL)
        return bs_errorf(err, BS_E_NOMEM, "%s: out of memory", what);
    bs_view_to_f32(buf, in);
    if (!first)
        bs_view_to_f32(old, out);
    for (int64_t o = 0; o < n; o++) {
        float r = fold_row((int32_t)op, buf + o * kk, kk);
        acc[o] = first ? r : bs_alu_f32((int32_t)op, old[o], r);
    }
    bs_view_from_f32(out, acc);
    return BS_OK;
}
