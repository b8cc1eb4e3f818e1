/* kernels/k_act.c -- the Activation kernel: out0 := F(fp32(fp32(in0 * scale) + bias)),
** F from bs_act.def computed with float libm (exact formulas, no PWP tables; exp is
** k_expf.c's vectorised form of libm's expf), plus the
** ScalarE accumulator (docs/spec/machine-model.md §6.1, docs/spec/nki-isa-semantics.md §3.4). The function is
** chosen once per instruction; element loops call one small static function each. */
#include <math.h>
#include "kernel.h"
#include "kview.h"
#include "kaccum.h"

/* {=== The functions (one line each; alpha is used by Prelu only) ===} */

static inline float sigm(float x)     { return 1.0f / (bs_expf(-x) + 1.0f); }
static inline float softplus(float x) { return log1pf(bs_expf(-fabsf(x))) + (x < 0.0f ? 0.0f : x); }

static inline float a_Identity(float x, float al)  { (void)al; return x; }
static inline float a_Square(float x, float al)    { (void)al; return x * x; }
static inline float a_Relu(float x, float al)      { (void)al; return x < 0.0f ? 0.0f : x; }
static inline float a_Lrelu(float x, float al)     { (void)al; return x > 0.0f ? x : 0.01f * x; }
static inline float a_Prelu(float x, float al)     { return x <= 0.0f ? al * x : x; }
static inline float a_Sigmoid(float x, float al)   { (void)al; return sigm(x); }
static inline float a_Tanh(float x, float al)      { (void)al; return tanhf(x); }
static inline float a_Exp(float x, float al)       { (void)al; return bs_expf(x); }
static inline float a_Softplus(float x, float al)  { (void)al; return softplus(x); }
static inline float a_Sqrt(float x, float al)      { (void)al; return sqrtf(x); }
static inline float a_Rsqrt(float x, float al)     { (void)al; return 1.0f / sqrtf(x); }
static inline float a_Ln(float x, float al)        { (void)al; return logf(x); }
static inline float a_Erf(float x, float al)       { (void)al; return erff(x); }
static inline float a_Sin(float x, float al)       { (void)al; return sinf(x); }
static inline float a_Arctan(float x, float al)    { (void)al; return atanf(x); }
static inline float a_Sign(float x, float al)      { (void)al; return x > 0.0f ? 1.0f : x < 0.0f ? -1.0f : x; }
static inline float a_Gelu(float x, float al)      { (void)al; return 0.5f * x * (erff(x / 1.41421356237f) + 1.0f); }
static inline float a_Mish(float x, float al)      { (void)al; return x * tanhf(softplus(x)); }
static inline float a_Gelu_apprx_tanh(float x, float al)
{
    (void)al;
    return 0.5f * x * (tanhf(0.79788456f * (x + 0.044715f * (x * x * x))) + 1.0f);
}
static inline float a_Gelu_apprx_sigmoid(float x, float al) { (void)al; return x * sigm(1.702f * x); }
/* d/dx x·σ(1.702x) = σ(1.702x)(1 + 1.702x(1 − σ(1.702x))) */
static inline float a_Derivative_Gelu_apprx_sigmoid(float x, float al)
{
    float z = 1.702f * x, s = sigm(z);
    (void)al;
    return s * (1.0f + z * (1.0f - s));
}
/* Φ(x) + x·φ(x) */
static inline float a_Derivative_Gelu(float x, float al)
{
    (void)al;
    return 0.5f * (erff(x / 1.41421356237f) + 1.0f) + x * (bs_expf(-0.5f * x * x) * 0.39894228040f);
}
static inline float a_Derivative_Erf(float x, float al) { (void)al; return 1.12837916710f * bs_expf(-(x * x)); }
static inline float a_Copy(float x, float al)      { (void)al; return x; }
static inline float a_Abs(float x, float al)       { (void)al; return fabsf(x); }
static inline float a_Reciprocal(float x, float al) { (void)al; return 1.0f / x; }
static inline float a_Abs_reciprocal_sqrt(float x, float al) { (void)al; return 1.0f / sqrtf(fabsf(x)); }
static inline float a_Silu(float x, float al)      { (void)al; return x / (bs_expf(-x) + 1.0f); }
static inline float a_Derivative_silu(float x, float al)
{
    float s = sigm(x);
    (void)al;
    return s * (1.0f + x * (1.0f - s));
}
static inline float a_Is_finite(float x, float al) { (void)al; return isfinite(x) ? 1.0f : 0.0f; }
static inline float a_Unknown(float x, float al)   { (void)al; return x; }   /* rejected first */

/* Row forms generated from bs_act.def: y[j] = F(t[j]); y may equal t. */
typedef void act_row_fn(float *y, const float *t, int64_t n, float alpha);
#define BS_ACT(name) \
BS_AVX2_CLONES static void arow_##name(float *y, const float *t, int64_t n, float alpha) \
{ for (int64_t j = 0; j < n; j++) y[j] = a_##name(t[j], alpha); }
#include "../bs_act.def"
#undef BS_ACT
#define BS_ACT(name) [BS_ACT_##name] = arow_##name,
static act_row_fn *const act_rows[BS_ACT__COUNT] = {
#include "../bs_act.def"
};
#undef BS_ACT

/* Exp has a vectorised row form with the same results (k_expf.c). */
static void exp_row(float *y, const float *t, int64_t n, float alpha)
{
    (void)alpha;
    bs_expf_row(y, t, n);
}

/* {=== The kernel ===} */

typedef struct act_args {
    act_row_fn  *row;
    const float *scale, *bias, *alpha;   /* per partition, or one value */
    int          per_part;
    bs_accum    *acc;                    /* folds y per output partition, or NULL */
    int          a2;                     /* is_activate2: scale/bias are imm0/imm1 of */
    int32_t      op0, op1, rev0, rev1;   /* the stages t = (x op0 imm0) op1 imm1 */
    int          fused;                  /* bs_simd_affine's `square` for F, or -1 */
} act_args;

/* One activate2 stage (NKI activate2 stage 1): y := x op c, or c op x when reversed;
** bypass skips the stage. y may equal x. */
static void a2_stage(float *y, const float *x, int64_t n, int32_t op, float c, int rev)
{
    if (op == BS_ALU_bypass) {
        if (y != x)
            memcpy(y, x, (size_t)n * sizeof *y);
    } else if (rev) {
        bs_alu_row_f32_ls(op, y, c, x, n);
    } else {
        bs_alu_row_f32_rs(op, y, x, c, n);
    }
}

static void act_run(const act_args *a, const bs_view *in, const bs_view *out)
{
    float xbuf[BS_CHUNK], ybuf[BS_CHUNK], t[BS_CHUNK];
    bs_cursor ci, co;
    bs_cur_init(&ci, in);
    bs_cur_init(&co, out);
    while (co.left > 0) {
        int64_t n = bs_chunk2(&ci, &co), p = a->per_part ? ci.idx[0] : 0;
        float sc = a->scale[p], b = a->bias[p];
        const float *x = bs_cur_read_f32(&ci, n, xbuf);
        float *y = bs_cur_write_begin(&co, n, ybuf);
        if (a->a2) {                               /* each stage rounds to fp32 */
            a2_stage(t, x, n, a->op0, sc, a->rev0);
            a2_stage(t, t, n, a->op1, b, a->rev1);
            a->row(y, t, n, a->alpha[p]);
        } else if (a->row == exp_row) {            /* the same steps in one pass */
            bs_expf_row_affine(y, x, n, sc, b);
        } else if (a->fused >= 0 && bs_simd_affine(y, x, n, sc, b, a->fused)) {
            ;                                      /* Square / identity in one pass */
        } else {
            for (int64_t j = 0; j < n; j++)
                t[j] = x[j] * sc + b;              /* two fp32 roundings (no fma) */
            a->row(y, t, n, a->alpha[p]);
        }
        if (a->acc)
            bs_accum_row(a->acc, co.idx[0], y, n);
        bs_cur_write_end(&co, n, y);
    }
}

/* The is_activate2 fields into a, and its constants into key[1..2]. */
static bs_status act2_setup(const bs_kctx *k, act_args *a, double key[4], bs_error *err)
{
    const bs_insn *in = k->insn;
    int64_t rev = BS_PI(in, Activation, reverse);
    if (!BS_PI(in, Activation, activate2))
        return BS_OK;
    if (in->nflist != 2 || in->flist < 0 || (int64_t)in->flist + 2 > k->prog->n_fpool)
        return bs_errorf(err, BS_E_PROGRAM, "Activation (is_activate2): needs its two "
                         "constants in the float list, has %d", (int)in->nflist);
    a->a2 = 1;
    a->op0 = (int32_t)BS_PI(in, Activation, op0);
    a->op1 = (int32_t)BS_PI(in, Activation, op1);
    a->rev0 = (int32_t)(rev & 1);
    a->rev1 = (int32_t)((rev >> 1) & 1);
    if (!bs_alu_is_elementwise(a->op0) || bs_alu_is_int(a->op0)
            || !bs_alu_is_elementwise(a->op1) || bs_alu_is_int(a->op1))
        return bs_errorf(err, BS_E_UNSUPPORTED, "Activation (is_activate2): op0/op1 must be "
                         "fp32 ALU ops");
    key[1] = k->prog->fpool[in->flist];
    key[2] = k->prog->fpool[in->flist + 1];
    return BS_OK;
}

/* scale = ins[1], bias = ins[2], alpha = ins[3] (immediates or one value per partition),
** else the keys scale, bias, alpha. Accumulator per acc / reduce_op (kaccum.h; the
** LoadAccumulate start is ins[4], else reduce_init). With is_activate2
** (NKI activate2) ins[1]/ins[2] (else const0/const1 from the float list) are imm0/imm1
** of the stages (x op0 imm0) op1 imm1 that replace x*scale + bias. */
bs_status bs_k_Activation(bs_kctx *k, bs_error *err)
{
    double key[4] = { 0, BS_PF(k->insn, Activation, scale),            /* ins[j] -> key */
                      BS_PF(k->insn, Activation, bias), BS_PF(k->insn, Activation, alpha) };
    int64_t func = BS_PI(k->insn, Activation, func), acc = BS_PI(k->insn, Activation, acc);
    bs_view in = k->in[0], out = k->out[0];
    act_args a = { .per_part = acc != BS_ACC_Idle };
    bs_accum ac;
    BS_TRY(act2_setup(k, &a, key, err));
    if (func < 0 || func >= BS_ACT__COUNT)
        return bs_errorf(err, BS_E_PROGRAM, "Activation: invalid function %lld", (long long)func);
    if (func == BS_ACT_Unknown)
        return bs_errorf(err, BS_E_UNSUPPORTED, "Activation: function 'Unknown' is not supported");
    BS_TRY(bs_kview_check(k, &in, 1, 0, "Activation", err));
    for (int32_t j = 1; j <= 3; j++)
        a.per_part |= j < k->nin && k->in[j].ndim > 0;
    int64_t np = a.per_part ? in.num[0] : 1;
    ac.cmd = acc;
    if (acc != BS_ACC_Idle)
        BS_TRY(bs_accum_begin(k, &ac, acc, (int32_t)BS_PI(k->insn, Activation, reduce_op),
                              BS_ENGINE_Activation, 4, BS_PF(k->insn, Activation, reduce_init),
                              out.num[0], "Activation", err));
    float *v = bs_kstate_tmp(k->ks, BS_KSLOT_B, 3 * (size_t)np * sizeof *v + 1);
    if (v == NULL)
        return bs_errorf(err, BS_E_NOMEM, "Activation: out of memory");
    for (int32_t j = 1; j <= 3; j++)
        BS_TRY(bs_kscalar_values(k, j, key[j], np, v + (j - 1) * np, NULL,
                                 "Activation", err));
    BS_TRY(bs_kview_detach(k, &in, 1, BS_KSLOT_A, err));
    a.row = func == BS_ACT_Exp ? exp_row : act_rows[func];
    a.fused = func == BS_ACT_Square ? 1
            : (func == BS_ACT_Identity || func == BS_ACT_Copy) ? 0 : -1;
    a.scale = v;
    a.bias = v + np;
    a.alpha = v + 2 * np;
    a.acc = acc != BS_ACC_Idle && ac.row ? &ac : NULL;
    if (a.per_part) {
        bs_kview_normalize_free(&in);
        if (a.acc)
            bs_kview_normalize_free(&out);
    } else {
        bs_view_normalize(&in);
        bs_view_normalize(&out);
    }
    act_run(&a, &in, &out);
    bs_accum_end(&ac);
    return BS_OK;
}
/* }=== */
