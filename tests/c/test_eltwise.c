/* tests/c/test_eltwise.c -- unit tests for the ALU and the kernels of k_eltwise.c, k_act.c
** and k_select.c, on views over local buffers with a fake instruction and program.
** Build and run (from the repo root):
**   gcc -std=c11 -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -ffp-contract=off -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Icsrc tests/c/test_eltwise.c csrc/kernels/k_eltwise.c csrc/kernels/k_act.c csrc/kernels/k_select.c csrc/kernels/k_dtype.c csrc/kernels/stream.c csrc/mem/mem.c csrc/core/alloc.c csrc/core/error.c csrc/core/tables.c -lm -o /tmp/test_eltwise && /tmp/test_eltwise
** Prints "N passed, M failed" last; exits 1 on any failure. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "kernels/kaccum.h"
#include "kernels/kernel.h"
#include "kernels/rng.h"
#include "testutil.h"

/* {=== Harness ===} */

typedef struct tctx {
    int pass, fail;
} tctx;

static void check(tctx *t, int ok, const char *what, int line)
{
    if (ok) {
        t->pass++;
    } else {
        t->fail++;
        printf("FAIL line %d: %s\n", line, what);
    }
}
#define CHECK(t, cond) check((t), (cond), #cond, __LINE__)


/* Dense [p, f] view. */
static bs_view dense2(void *data, int32_t dt, int64_t p, int64_t f)
{
    int64_t num[2] = { p, f }, st[2] = { f, 1 };
    return mkview(data, dt, 2, num, st);
}

typedef struct fixture {
    bs_program prog;
    bs_insn    insn;
    bs_kstate  ks;
    bs_kctx    k;
    bs_error   err;
} fixture;

/* Resets everything but the scratch buffers in fx->ks (zero the fixture once at its
** declaration; bs_kstate_fini at the end). */
static void fx_init(fixture *fx, int32_t op)
{
    memset(&fx->prog, 0, sizeof fx->prog);
    memset(&fx->insn, 0, sizeof fx->insn);
    memset(&fx->k, 0, sizeof fx->k);
    for (int j = 0; j < 4; j++)
        fx->insn.x[j] = -1;
    fx->insn.op = op;
    fx->k.prog = &fx->prog;
    fx->k.insn = &fx->insn;
    fx->k.ks = &fx->ks;
    bs_error_clear(&fx->err);
}

static int feq(float a, float b) { return a == b || (a != a && b != b); }
static int near(float a, float b) { return fabsf(a - b) <= 1e-6f * (1.0f + fabsf(b)); }

static float bf16_val(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* {=== ALU ===} */

static void test_alu(tctx *t)
{
    float nan = NAN;
    CHECK(t, bs_alu_f32(BS_ALU_subtract, 5.0f, 3.0f) == 2.0f);
    CHECK(t, bs_alu_f32(BS_ALU_divide, 1.0f, 4.0f) == 0.25f);
    CHECK(t, feq(bs_alu_f32(BS_ALU_max, nan, 2.0f), 2.0f));       /* NaN -> r */
    CHECK(t, feq(bs_alu_f32(BS_ALU_min, 2.0f, nan), nan));
    CHECK(t, signbit(bs_alu_f32(BS_ALU_max, 0.0f, -0.0f)));        /* tie -> r */
    CHECK(t, bs_alu_f32(BS_ALU_abs_max, -5.0f, 3.0f) == -5.0f);
    CHECK(t, bs_alu_f32(BS_ALU_abs_max, 1.0f, -1.0f) == -1.0f);
    CHECK(t, bs_alu_f32(BS_ALU_abs_min, 5.0f, -3.0f) == -3.0f);
    CHECK(t, bs_alu_f32(BS_ALU_abs_min, 1.0f, -1.0f) == -1.0f);
    CHECK(t, bs_alu_f32(BS_ALU_logical_xor, 2.0f, 0.0f) == 1.0f);
    CHECK(t, bs_alu_f32(BS_ALU_is_ge, 3.0f, 3.0f) == 1.0f && bs_alu_f32(BS_ALU_is_lt, 3.0f, 3.0f) == 0.0f);
    CHECK(t, bs_alu_f32(BS_ALU_pow, 3.0f, 2.0f) == 9.0f && bs_alu_f32(BS_ALU_mod, -7.0f, 3.0f) == -1.0f);
    CHECK(t, bs_alu_f32(BS_ALU_rsqrt, 4.0f, 9.0f) == 0.5f && bs_alu_f32(BS_ALU_abs, -2.0f, 0.0f) == 2.0f);
    CHECK(t, bs_alu_f32(BS_ALU_bitwise_and, 6.0f, 3.0f) == 2.0f);
    CHECK(t, bs_alu_i32(BS_ALU_arith_shift_right, -8, 1) == -4);
    CHECK(t, bs_alu_i32(BS_ALU_arith_shift_right, -1, 40) == -1 && bs_alu_i32(BS_ALU_arith_shift_right, 5, -1) == 0);
    CHECK(t, bs_alu_i32(BS_ALU_logical_shift_right, -1, 28) == 15);
    CHECK(t, bs_alu_i32(BS_ALU_arith_shift_left, 1, 31) == INT32_MIN && bs_alu_i32(BS_ALU_logical_shift_left, 1, 32) == 0);
    CHECK(t, bs_alu_i32(BS_ALU_add, INT32_MAX, 1) == INT32_MIN);
    CHECK(t, bs_alu_i32(BS_ALU_bitwise_not, 0, 0) == -1 && bs_alu_i32(BS_ALU_bitwise_xor, 0xffffffffLL, 1) == -2);
    CHECK(t, bs_alu_i32(BS_ALU_mod_int, -7, 3) == -1 && bs_alu_i32(BS_ALU_mod_int, 7, 0) == 0);
    CHECK(t, bs_alu_is_int(BS_ALU_bitwise_not) && bs_alu_is_int(BS_ALU_mod_int) && !bs_alu_is_int(BS_ALU_add));
    CHECK(t, !bs_alu_is_elementwise(BS_ALU_average) && bs_alu_is_elementwise(BS_ALU_abs_min)
          && !bs_alu_is_elementwise(-1) && !bs_alu_is_elementwise(BS_ALU__COUNT));

    float l[11], r[11], o[11];
    int ok = 1;
    for (int j = 0; j < 11; j++) {
        l[j] = (float)j - 5.0f;
        r[j] = 2.0f;
    }
    bs_alu_row_f32(BS_ALU_mult, o, l, r, 11);
    for (int j = 0; j < 11; j++) ok &= o[j] == l[j] * 2.0f;
    bs_alu_row_f32_ls(BS_ALU_subtract, o, 1.0f, l, 11);
    for (int j = 0; j < 11; j++) ok &= o[j] == 1.0f - l[j];
    bs_alu_row_f32_rs(BS_ALU_max, l, l, 0.0f, 11);                 /* in place */
    for (int j = 0; j < 11; j++) ok &= l[j] == (j > 5 ? (float)j - 5.0f : 0.0f);
    CHECK(t, ok);
}

/* {=== TensorTensor ===} */

static void test_tensor_tensor(tctx *t)
{
    fixture fx = { 0 };
    float a[32], b[32], o[32];
    uint16_t ob[32];
    for (int j = 0; j < 32; j++) {
        a[j] = (float)j;
        b[j] = (float)(j % 8) * 0.5f;
    }
    fx_init(&fx, BS_OP_TensorTensor);
    fx.insn.i[0] = BS_ALU_subtract;
    fx.k.nin = 2;
    fx.k.nout = 1;
    fx.k.in[0] = dense2(a, BS_DT_float32, 4, 8);
    fx.k.in[1] = dense2(b, BS_DT_float32, 4, 8);
    fx.k.out[0] = dense2(o, BS_DT_float32, 4, 8);
    int ok = bs_k_TensorTensor(&fx.k, &fx.err) == BS_OK;
    for (int j = 0; j < 32; j++) ok &= o[j] == a[j] - b[j];
    CHECK(t, ok);

    /* in1 read transposed ([8,4] viewed column-major), result to bf16 */
    int64_t num[2] = { 4, 8 }, st[2] = { 1, 4 };
    fx.k.in[1] = mkview(b, BS_DT_float32, 2, num, st);
    fx.k.out[0] = dense2(ob, BS_DT_bfloat16, 4, 8);
    fx.insn.i[0] = BS_ALU_add;
    ok = bs_k_TensorTensor(&fx.k, &fx.err) == BS_OK;
    for (int p = 0; p < 4; p++)
        for (int f = 0; f < 8; f++)
            ok &= bf16_val(ob[p * 8 + f]) == a[p * 8 + f] + b[f * 4 + p];
    CHECK(t, ok);

    /* in place: out is in0 */
    float c[32];
    memcpy(c, a, sizeof c);
    fx.k.in[0] = fx.k.out[0] = dense2(c, BS_DT_float32, 4, 8);
    fx.k.in[1] = dense2(b, BS_DT_float32, 4, 8);
    fx.insn.i[0] = BS_ALU_mult;
    ok = bs_k_TensorTensor(&fx.k, &fx.err) == BS_OK;
    for (int j = 0; j < 32; j++) ok &= c[j] == a[j] * b[j];
    CHECK(t, ok);

    /* out overlaps in0 shifted by one element: read-all-then-write */
    memcpy(c, a, sizeof c);
    fx.k.in[0] = dense2(c, BS_DT_float32, 1, 31);
    fx.k.in[1] = dense2(b, BS_DT_float32, 1, 31);
    fx.k.out[0] = dense2(c + 1, BS_DT_float32, 1, 31);
    fx.insn.i[0] = BS_ALU_add;
    ok = bs_k_TensorTensor(&fx.k, &fx.err) == BS_OK;
    for (int j = 0; j < 31; j++) ok &= c[j + 1] == a[j] + b[j];
    CHECK(t, ok && c[0] == a[0]);

    /* errors: class X op, count mismatch */
    fx.k.in[0] = dense2(a, BS_DT_float32, 4, 8);
    fx.k.in[1] = dense2(b, BS_DT_float32, 4, 8);
    fx.k.out[0] = dense2(o, BS_DT_float32, 4, 8);
    fx.insn.i[0] = BS_ALU_average;
    CHECK(t, bs_k_TensorTensor(&fx.k, &fx.err) == BS_E_UNSUPPORTED && strstr(fx.err.msg, "average"));
    fx.insn.i[0] = BS_ALU_add;
    fx.k.in[1] = dense2(b, BS_DT_float32, 4, 7);
    CHECK(t, bs_k_TensorTensor(&fx.k, &fx.err) == BS_E_SIM && strstr(fx.err.msg, "28")
          && strstr(fx.err.msg, "32"));

    /* integer path */
    int32_t ia[6] = { 12, -1, 7, -8, 255, 0x7fffffff }, ib[6] = { 10, 4, 3, 1, 15, 2 }, io[6];
    fx.k.in[0] = dense2(ia, BS_DT_int32, 1, 6);
    fx.k.in[1] = dense2(ib, BS_DT_int32, 1, 6);
    fx.k.out[0] = dense2(io, BS_DT_int32, 1, 6);
    fx.insn.i[0] = BS_ALU_arith_shift_right;
    ok = bs_k_TensorTensor(&fx.k, &fx.err) == BS_OK;
    CHECK(t, ok && io[0] == 0 && io[1] == -1 && io[2] == 0 && io[3] == -4 && io[4] == 0
          && io[5] == 0x1fffffff);
    fx.insn.i[0] = BS_ALU_mod_int;
    ib[4] = 0;
    io[0] = 99;
    CHECK(t, bs_k_TensorTensor(&fx.k, &fx.err) == BS_E_ARITH && strstr(fx.err.msg, "element 4")
          && io[0] == 99);
    bs_kstate_fini(&fx.ks);
}

/* {=== TensorScalar, TensorScalarPtr ===} */

static void test_tensor_scalar(tctx *t)
{
    fixture fx = { 0 };
    float a[12], o[12];
    for (int j = 0; j < 12; j++) a[j] = (float)j * 0.25f;
    fx_init(&fx, BS_OP_TensorScalar);
    fx.k.nin = 1;
    fx.k.nout = 1;
    fx.k.in[0] = dense2(a, BS_DT_float32, 3, 4);
    fx.k.out[0] = dense2(o, BS_DT_float32, 3, 4);
    fx.insn.i[0] = BS_ALU_subtract;
    fx.insn.f[0] = 1.0;
    int ok = bs_k_TensorScalar(&fx.k, &fx.err) == BS_OK;           /* a - 1 */
    for (int j = 0; j < 12; j++) ok &= o[j] == a[j] - 1.0f;
    CHECK(t, ok);
    fx.insn.i[2] = 1;                                              /* reverse0: 1 - a */
    ok = bs_k_TensorScalar(&fx.k, &fx.err) == BS_OK;
    for (int j = 0; j < 12; j++) ok &= o[j] == 1.0f - a[j];
    CHECK(t, ok);
    fx.insn.i[1] = BS_ALU_divide;                                  /* 3 / (1 - a), reversed */
    fx.insn.i[3] = 1;
    fx.insn.f[1] = 3.0;
    ok = bs_k_TensorScalar(&fx.k, &fx.err) == BS_OK;
    for (int j = 0; j < 12; j++) ok &= feq(o[j], 3.0f / (1.0f - a[j]));
    CHECK(t, ok);

    /* each stage rounds to fp32: (x + 2^-30) - 1 with x = 1 gives 0 */
    float one = 1.0f, res;
    fx.k.in[0] = dense2(&one, BS_DT_float32, 1, 1);
    fx.k.out[0] = dense2(&res, BS_DT_float32, 1, 1);
    fx.insn.i[0] = BS_ALU_add;
    fx.insn.i[1] = BS_ALU_subtract;
    fx.insn.i[2] = fx.insn.i[3] = 0;
    fx.insn.f[0] = 0x1p-30;
    fx.insn.f[1] = 1.0;
    CHECK(t, bs_k_TensorScalar(&fx.k, &fx.err) == BS_OK && res == 0.0f);

    /* integer path: (x << 4) | 0xffff0000 on uint32 */
    uint32_t ua[3] = { 1, 0x0fff, 0x80000001u }, uo[3];
    fx.k.in[0] = dense2(ua, BS_DT_uint32, 1, 3);
    fx.k.out[0] = dense2(uo, BS_DT_uint32, 1, 3);
    fx.insn.i[0] = BS_ALU_logical_shift_left;
    fx.insn.i[1] = BS_ALU_bitwise_or;
    fx.insn.f[0] = 4.0;
    fx.insn.f[1] = 4294901760.0;
    ok = bs_k_TensorScalar(&fx.k, &fx.err) == BS_OK;
    CHECK(t, ok && uo[0] == 0xffff0010u && uo[1] == 0xfffffff0u && uo[2] == 0xffff0010u);

    /* TensorScalarPtr: e * f[P,1] + 2.5 */
    float e[12], f[3] = { 1.0f, -2.0f, 0.5f }, m = 2.5f;
    for (int j = 0; j < 12; j++) e[j] = (float)(j + 1);
    fx_init(&fx, BS_OP_TensorScalarPtr);
    fx.k.nin = 3;
    fx.k.nout = 1;
    fx.k.in[0] = dense2(e, BS_DT_float32, 3, 4);
    fx.k.in[1] = dense2(f, BS_DT_float32, 3, 1);
    fx.k.imm[2] = m;
    fx.k.out[0] = dense2(o, BS_DT_float32, 3, 4);
    fx.insn.i[0] = BS_ALU_mult;
    fx.insn.i[1] = BS_ALU_add;
    ok = bs_k_TensorScalarPtr(&fx.k, &fx.err) == BS_OK;
    for (int j = 0; j < 12; j++) ok &= o[j] == e[j] * f[j / 4] + 2.5f;
    CHECK(t, ok);
    /* in[0] a 3-D pattern [3, 2, 2] transposed inside each partition: two rows per
    ** partition, the partition is the dim-0 index */
    int64_t num3[3] = { 3, 2, 2 }, st3[3] = { 4, 1, 2 };
    fx.k.in[0] = mkview(e, BS_DT_float32, 3, num3, st3);
    fx.insn.i[1] = BS_ALU_bypass;
    ok = bs_k_TensorScalarPtr(&fx.k, &fx.err) == BS_OK;
    for (int j = 0; j < 12; j++) ok &= o[j] == e[j / 4 * 4 + (j % 4) / 2 + (j % 2) * 2] * f[j / 4];
    CHECK(t, ok);
    fx.k.in[1] = dense2(f, BS_DT_float32, 1, 2);                   /* wrong count */
    CHECK(t, bs_k_TensorScalarPtr(&fx.k, &fx.err) == BS_E_SIM);
    bs_kstate_fini(&fx.ks);
}

/* {=== Reciprocal, Exponential ===} */

static void test_recip_exp(tctx *t)
{
    fixture fx = { 0 };
    float a[6] = { 4.0f, -0.5f, 0.0f, 2.0f, 1.0f, 8.0f }, o[6], mx[2] = { 2.0f, 8.0f };
    fx_init(&fx, BS_OP_Reciprocal);
    fx.k.nin = 1;
    fx.k.nout = 1;
    fx.k.in[0] = dense2(a, BS_DT_float32, 2, 3);
    fx.k.out[0] = dense2(o, BS_DT_float32, 2, 3);
    CHECK(t, bs_k_Reciprocal(&fx.k, &fx.err) == BS_OK && o[0] == 0.25f && o[1] == -2.0f
          && isinf(o[2]) && o[5] == 0.125f);
    fx_init(&fx, BS_OP_Exponential);
    fx.k.nin = 2;
    fx.k.nout = 1;
    fx.k.in[0] = dense2(a, BS_DT_float32, 2, 3);
    fx.k.in[1] = dense2(mx, BS_DT_float32, 2, 1);
    fx.k.out[0] = dense2(o, BS_DT_float32, 2, 3);
    int ok = bs_k_Exponential(&fx.k, &fx.err) == BS_OK;
    for (int j = 0; j < 6; j++) ok &= o[j] == expf(a[j] - mx[j / 3]);
    CHECK(t, ok && o[5] == 1.0f);
    bs_kstate_fini(&fx.ks);
}

/* {=== Activation ===} */

static void test_activation(tctx *t)
{
    fixture fx = { 0 };
    float b[8], c[2] = { 1.0f, -3.0f }, o[8];
    for (int j = 0; j < 8; j++) b[j] = (float)j - 2.0f;
    fx_init(&fx, BS_OP_Activation);
    fx.k.nin = 3;
    fx.k.nout = 1;
    fx.k.in[0] = dense2(b, BS_DT_float32, 2, 4);
    fx.k.imm[1] = 2.0;                                            /* scale */
    fx.k.in[2] = dense2(c, BS_DT_float32, 2, 1);                  /* bias [P,1] */
    fx.k.out[0] = dense2(o, BS_DT_float32, 2, 4);
    fx.insn.i[0] = BS_ACT_Square;
    fx.insn.i[1] = BS_ACC_ZeroAccumulate;
    fx.insn.i[BS_Pi_Activation_reduce_op] = BS_ALU_add;
    fx.ks.act_acc[0] = fx.ks.act_acc[1] = 100.0f;
    int ok = bs_k_Activation(&fx.k, &fx.err) == BS_OK;
    float s0 = 0.0f, s1 = 0.0f;
    for (int j = 0; j < 8; j++) {
        float v = (b[j] * 2.0f + c[j / 4]) * (b[j] * 2.0f + c[j / 4]);
        ok &= o[j] == v;
        if (j < 4) s0 += v; else s1 += v;
    }
    CHECK(t, ok && fx.ks.act_acc[0] == s0 && fx.ks.act_acc[1] == s1);
    fx.insn.i[1] = BS_ACC_Accumulate;
    ok = bs_k_Activation(&fx.k, &fx.err) == BS_OK;
    CHECK(t, ok && fx.ks.act_acc[0] == s0 + s0 && fx.ks.act_acc[1] == s1 + s1);
    fx.insn.i[1] = BS_ACC_LoadAccumulate;                          /* from reduce_init */
    fx.insn.f[BS_Pf_Activation_reduce_init] = 5.0;
    ok = bs_k_Activation(&fx.k, &fx.err) == BS_OK;
    CHECK(t, ok && fx.ks.act_acc[0] == 5.0f + s0 && fx.ks.act_acc[1] == 5.0f + s1);
    fx.insn.i[BS_Pi_Activation_reduce_op] = BS_ALU_max;            /* max(2, max of row) */
    fx.insn.f[BS_Pf_Activation_reduce_init] = 2.0;
    ok = bs_k_Activation(&fx.k, &fx.err) == BS_OK;
    CHECK(t, ok && fx.ks.act_acc[0] == 9.0f && fx.ks.act_acc[1] == 49.0f);
    fx.insn.i[BS_Pi_Activation_reduce_op] = BS_ALU_bitwise_or;     /* not a reduce op */
    CHECK(t, bs_k_Activation(&fx.k, &fx.err) == BS_E_UNSUPPORTED);
    fx.insn.engine = BS_ENGINE_PE;                                 /* no accumulator */
    fx.insn.i[BS_Pi_Activation_reduce_op] = BS_ALU_add;
    CHECK(t, bs_k_Activation(&fx.k, &fx.err) == BS_E_UNSUPPORTED);
    fx.insn.engine = BS_ENGINE_Unassigned;
    fx.insn.f[BS_Pf_Activation_reduce_init] = 0.0;

    /* keys instead of operands: Prelu with alpha = f1, scale f0, bias f2 */
    fx.k.nin = 1;
    fx.insn.i[0] = BS_ACT_Prelu;
    fx.insn.i[1] = BS_ACC_Zero;
    fx.insn.f[0] = 1.0;
    fx.insn.f[1] = 0.25;
    fx.insn.f[2] = 0.5;
    ok = bs_k_Activation(&fx.k, &fx.err) == BS_OK;
    for (int j = 0; j < 8; j++) {
        float x = b[j] + 0.5f;
        ok &= o[j] == (x <= 0.0f ? 0.25f * x : x);
    }
    CHECK(t, ok && fx.ks.act_acc[0] == 0.0f && fx.ks.act_acc[1] == 0.0f);

    /* single values of several functions */
    static const struct { int32_t f; float x, want; } cases[] = {
        { BS_ACT_Sigmoid, 0.0f, 0.5f },   { BS_ACT_Gelu, 0.0f, 0.0f },
        { BS_ACT_Sign, -5.0f, -1.0f },    { BS_ACT_Is_finite, INFINITY, 0.0f },
        { BS_ACT_Relu, -1.0f, 0.0f },     { BS_ACT_Lrelu, -2.0f, -0.02f },
        { BS_ACT_Exp, 0.0f, 1.0f },       { BS_ACT_Ln, 1.0f, 0.0f },
        { BS_ACT_Sqrt, 4.0f, 2.0f },      { BS_ACT_Rsqrt, 4.0f, 0.5f },
        { BS_ACT_Reciprocal, 4.0f, 0.25f }, { BS_ACT_Abs_reciprocal_sqrt, -4.0f, 0.5f },
        { BS_ACT_Silu, 0.0f, 0.0f },      { BS_ACT_Derivative_silu, 0.0f, 0.5f },
        { BS_ACT_Derivative_Gelu, 0.0f, 0.5f }, { BS_ACT_Derivative_Erf, 0.0f, 1.12837917f },
        { BS_ACT_Gelu_apprx_tanh, 0.0f, 0.0f }, { BS_ACT_Derivative_Gelu_apprx_sigmoid, 0.0f, 0.5f },
        { BS_ACT_Softplus, 0.0f, 0.69314718f }, { BS_ACT_Arctan, 0.0f, 0.0f },
        { BS_ACT_Mish, 0.0f, 0.0f },      { BS_ACT_Abs, -3.0f, 3.0f },
    };
    float x1, y1;
    fx.k.in[0] = dense2(&x1, BS_DT_float32, 1, 1);
    fx.k.out[0] = dense2(&y1, BS_DT_float32, 1, 1);
    fx.insn.i[1] = BS_ACC_Idle;
    fx.insn.f[2] = 0.0;
    ok = 1;
    for (size_t i = 0; i < BS_ARRAY_LEN(cases); i++) {
        x1 = cases[i].x;
        fx.insn.i[0] = cases[i].f;
        int good = bs_k_Activation(&fx.k, &fx.err) == BS_OK && near(y1, cases[i].want);
        if (!good)
            printf("  activation %s(%g) = %g, want %g\n", bs_act_names[cases[i].f],
                   (double)cases[i].x, (double)y1, (double)cases[i].want);
        ok &= good;
    }
    CHECK(t, ok);
    fx.insn.i[0] = BS_ACT_Unknown;
    CHECK(t, bs_k_Activation(&fx.k, &fx.err) == BS_E_UNSUPPORTED && strstr(fx.err.msg, "Unknown"));
    bs_kstate_fini(&fx.ks);
}

/* {=== Memset, Iota, Select ===} */

static void test_memset(tctx *t)
{
    fixture fx = { 0 };
    float o[6];
    uint16_t h[4];
    fx_init(&fx, BS_OP_Memset);
    fx.k.nout = 1;
    fx.k.out[0] = dense2(o, BS_DT_float32, 2, 3);
    fx.insn.i[1] = 0x3f800000;
    int ok = bs_k_Memset(&fx.k, &fx.err) == BS_OK;
    for (int j = 0; j < 6; j++) ok &= o[j] == 1.0f;
    CHECK(t, ok);
    fx.k.out[0] = dense2(h, BS_DT_bfloat16, 1, 4);
    fx.insn.i[1] = 0xbf80;
    CHECK(t, bs_k_Memset(&fx.k, &fx.err) == BS_OK && bf16_val(h[3]) == -1.0f);
    fx.insn.i[1] = 0x10000;
    CHECK(t, bs_k_Memset(&fx.k, &fx.err) == BS_E_PROGRAM);
    fx.insn.i[0] = BS_MEMSET_Random;
    CHECK(t, bs_k_Memset(&fx.k, &fx.err) == BS_E_SIM);      /* no generator state */
    {
        /* With one: the host MT19937-64 draw after the 1920 that seed the device states. */
        static bs_rng rng;
        bs_mt64 ref;
        uint64_t want = 0, got = 0;
        rng.seed = 42;
        fx.ks.rng = &rng;
        fx.k.out[0] = dense2(o, BS_DT_float32, 1, 2);
        bs_mt64_seed(&ref, 42);
        for (int d = 0; d < 1921; d++)
            want = bs_mt64_next(&ref);
        CHECK(t, bs_k_Memset(&fx.k, &fx.err) == BS_OK);
        memcpy(&got, o, 4);
        CHECK(t, (uint32_t)got == (uint32_t)want);
        fx.ks.rng = NULL;
    }
    bs_kstate_fini(&fx.ks);
}

static void test_iota(tctx *t)
{
    fixture fx = { 0 };
    int32_t o[128];
    float fo[8];
    int64_t pat[4] = { 10, 2, 1, 4 };
    fx_init(&fx, BS_OP_Iota);
    fx.k.nout = 1;
    fx.k.out[0] = dense2(o, BS_DT_int32, 128, 1);                 /* 5 + 2p */
    fx.insn.i[0] = 5;
    fx.insn.i[1] = 2;
    int ok = bs_k_Iota(&fx.k, &fx.err) == BS_OK;
    for (int p = 0; p < 128; p++) ok &= o[p] == 5 + 2 * p;
    CHECK(t, ok);
    fx.k.out[0] = dense2(o, BS_DT_int32, 4, 8);                    /* p + f */
    fx.insn.i[0] = 0;
    fx.insn.i[1] = 1;
    ok = bs_k_Iota(&fx.k, &fx.err) == BS_OK;
    for (int j = 0; j < 32; j++) ok &= o[j] == j / 8 + j % 8;
    CHECK(t, ok);
    /* pattern [[10,2],[1,4]] from the ipool, base from x0, float output */
    fx.prog.ipool = pat;
    fx.prog.n_ipool = 4;
    fx.insn.nlist = 4;
    fx.insn.x[0] = 0;
    fx.k.xval[0] = -3;
    fx.insn.i[1] = 100;
    fx.k.out[0] = dense2(fo, BS_DT_float32, 1, 8);
    ok = bs_k_Iota(&fx.k, &fx.err) == BS_OK;
    for (int j = 0; j < 8; j++) ok &= fo[j] == (float)(-3 + 10 * (j / 4) + j % 4);
    CHECK(t, ok);
    fx.k.out[0] = dense2(fo, BS_DT_float32, 2, 4);
    CHECK(t, bs_k_Iota(&fx.k, &fx.err) == BS_E_SIM);
    bs_kstate_fini(&fx.ks);
}

static void test_select(tctx *t)
{
    fixture fx = { 0 };
    float pred[6] = { 1, 0, 1, 0, 0, 1 }, tv[6] = { 10, 11, 12, 13, 14, 15 }, o[6];
    fx_init(&fx, BS_OP_Select);
    fx.k.nin = 3;
    fx.k.nout = 1;
    fx.k.in[0] = dense2(pred, BS_DT_float32, 2, 3);
    fx.k.in[1] = dense2(tv, BS_DT_float32, 2, 3);
    fx.k.imm[2] = -1.5;
    fx.k.out[0] = dense2(o, BS_DT_float32, 2, 3);
    int ok = bs_k_Select(&fx.k, &fx.err) == BS_OK;
    for (int j = 0; j < 6; j++) ok &= o[j] == (pred[j] != 0.0f ? tv[j] : -1.5f);
    CHECK(t, ok);
    pred[4] = 2.0f;
    o[0] = 7.0f;
    CHECK(t, bs_k_Select(&fx.k, &fx.err) == BS_E_ARITH && strstr(fx.err.msg, "element 4")
          && o[0] == 7.0f);
    bs_kstate_fini(&fx.ks);
}

/* {=== Overlap handling, integer scalars, more operand forms ===} */

static void test_more(tctx *t)
{
    fixture fx = { 0 };
    float sb[4 * 16], b[32], ref[4 * 16];
    for (int j = 0; j < 64; j++) sb[j] = (float)j;
    for (int j = 0; j < 32; j++) b[j] = 100.0f + (float)j;
    int64_t num[2] = { 4, 8 }, st[2] = { 16, 1 };

    /* tiles side by side in the same partitions (pitch 16): no staging copy */
    fx_init(&fx, BS_OP_TensorTensor);
    fx.insn.i[0] = BS_ALU_add;
    fx.k.nin = 2;
    fx.k.nout = 1;
    fx.k.in[0] = mkview(sb, BS_DT_float32, 2, num, st);
    fx.k.in[1] = dense2(b, BS_DT_float32, 4, 8);
    fx.k.out[0] = mkview(sb + 8, BS_DT_float32, 2, num, st);
    memcpy(ref, sb, sizeof ref);
    int ok = bs_k_TensorTensor(&fx.k, &fx.err) == BS_OK && fx.ks.tmp[0] == NULL;
    for (int j = 0; j < 32; j++) ok &= sb[j / 8 * 16 + 8 + j % 8] == ref[j / 8 * 16 + j % 8] + b[j];
    CHECK(t, ok);
    /* the same shifted by one element inside each partition: staged, read-all-then-write */
    for (int j = 0; j < 64; j++) sb[j] = (float)j;
    fx.k.out[0] = mkview(sb + 1, BS_DT_float32, 2, num, st);
    ok = bs_k_TensorTensor(&fx.k, &fx.err) == BS_OK && fx.ks.tmp[0] != NULL;
    for (int j = 0; j < 32; j++) ok &= sb[j / 8 * 16 + 1 + j % 8] == (float)(j / 8 * 16 + j % 8) + b[j];
    CHECK(t, ok);
    /* out "same" as in0 but broadcast (stride 0): every element reads the old value */
    float one[1] = { 1.0f };
    int64_t nb[2] = { 1, 4 }, sbz[2] = { 0, 0 };
    fx.k.in[0] = fx.k.out[0] = mkview(one, BS_DT_float32, 2, nb, sbz);
    fx.k.in[1] = dense2(b, BS_DT_float32, 1, 4);
    CHECK(t, bs_k_TensorTensor(&fx.k, &fx.err) == BS_OK && one[0] == 1.0f + b[3]);

    /* TensorScalar: reverse1 with bypass passes the scalar through; int divide by zero */
    float a[4] = { 1, 2, 3, 4 }, o[4];
    fx_init(&fx, BS_OP_TensorScalar);
    fx.k.nin = 1;
    fx.k.nout = 1;
    fx.k.in[0] = dense2(a, BS_DT_float32, 1, 4);
    fx.k.out[0] = dense2(o, BS_DT_float32, 1, 4);
    fx.insn.i[0] = BS_ALU_add;
    fx.insn.i[1] = BS_ALU_bypass;
    fx.insn.i[3] = 1;
    fx.insn.f[1] = 7.0;
    CHECK(t, bs_k_TensorScalar(&fx.k, &fx.err) == BS_OK && o[0] == 7.0f && o[3] == 7.0f);
    fx.insn.i[0] = BS_ALU_mod_int;
    fx.insn.i[3] = 0;
    fx.insn.f[0] = 0.0;
    CHECK(t, bs_k_TensorScalar(&fx.k, &fx.err) == BS_E_ARITH && strstr(fx.err.msg, "mod_int"));
    fx.insn.i[0] = BS_ALU_elemwise_mul;
    CHECK(t, bs_k_TensorScalar(&fx.k, &fx.err) == BS_E_UNSUPPORTED);

    /* TensorScalarPtr on the integer path: x & mask[p], int16 per-partition masks */
    int32_t x[6] = { 0xff, 0x0f, -1, 0x70, 0x3c, 5 }, y[6];
    int16_t mask[2] = { 0x3c, 0x7 };
    fx_init(&fx, BS_OP_TensorScalarPtr);
    fx.k.nin = 3;
    fx.k.nout = 1;
    fx.k.in[0] = dense2(x, BS_DT_int32, 2, 3);
    fx.k.in[1] = dense2(mask, BS_DT_int16, 2, 1);
    fx.k.imm[2] = 1.0;
    fx.k.out[0] = dense2(y, BS_DT_int32, 2, 3);
    fx.insn.i[0] = BS_ALU_bitwise_and;
    fx.insn.i[1] = BS_ALU_add;
    ok = bs_k_TensorScalarPtr(&fx.k, &fx.err) == BS_OK;
    for (int j = 0; j < 6; j++) ok &= y[j] == (x[j] & mask[j / 3]) + 1;
    CHECK(t, ok);

    /* Activation in place with a per-partition scale and Relu */
    float v[6] = { -1, 2, -3, 4, -5, 6 }, sc[2] = { 2.0f, -1.0f };
    fx_init(&fx, BS_OP_Activation);
    fx.k.nin = 2;
    fx.k.nout = 1;
    fx.k.in[0] = fx.k.out[0] = dense2(v, BS_DT_float32, 2, 3);
    fx.k.in[1] = dense2(sc, BS_DT_float32, 2, 1);
    fx.insn.i[0] = BS_ACT_Relu;
    ok = bs_k_Activation(&fx.k, &fx.err) == BS_OK;
    CHECK(t, ok && v[0] == 0.0f && v[1] == 4.0f && v[2] == 0.0f && v[3] == 0.0f && v[4] == 5.0f
          && v[5] == 0.0f);

    /* Exponential with an immediate max; Select with two immediates into bf16 */
    float e[3] = { 1.0f, 2.0f, 3.0f }, eo[3];
    fx_init(&fx, BS_OP_Exponential);
    fx.k.nin = 2;
    fx.k.nout = 1;
    fx.k.in[0] = dense2(e, BS_DT_float32, 1, 3);
    fx.k.imm[1] = 2.0;
    fx.k.out[0] = dense2(eo, BS_DT_float32, 1, 3);
    CHECK(t, bs_k_Exponential(&fx.k, &fx.err) == BS_OK && eo[0] == expf(-1.0f) && eo[1] == 1.0f);
    uint8_t pr[4] = { 1, 0, 0, 1 };
    uint16_t so[4];
    fx_init(&fx, BS_OP_Select);
    fx.k.nin = 3;
    fx.k.nout = 1;
    fx.k.in[0] = dense2(pr, BS_DT_uint8, 2, 2);
    fx.k.imm[1] = 3.0;
    fx.k.imm[2] = -0.5;
    fx.k.out[0] = dense2(so, BS_DT_bfloat16, 2, 2);
    CHECK(t, bs_k_Select(&fx.k, &fx.err) == BS_OK && bf16_val(so[0]) == 3.0f
          && bf16_val(so[1]) == -0.5f && bf16_val(so[3]) == 3.0f);

    /* Iota over a 1-D (partition only) pattern; Memset of an int64 and a uint8 */
    int64_t io[5], pn[1] = { 5 }, ps[1] = { 1 };
    fx_init(&fx, BS_OP_Iota);
    fx.k.nout = 1;
    fx.k.out[0] = mkview(io, BS_DT_int64, 1, pn, ps);
    fx.insn.i[0] = INT32_MAX;                                      /* int32 wrap */
    fx.insn.i[1] = 1;
    ok = bs_k_Iota(&fx.k, &fx.err) == BS_OK;
    CHECK(t, ok && io[0] == INT32_MAX && io[1] == INT32_MIN && io[4] == INT32_MIN + 3);
    uint8_t u8[3];
    fx_init(&fx, BS_OP_Memset);
    fx.k.nout = 1;
    fx.k.out[0] = mkview(io, BS_DT_int64, 1, pn, ps);
    fx.insn.i[1] = -2;                                             /* 8-byte raw bits */
    ok = bs_k_Memset(&fx.k, &fx.err) == BS_OK && io[4] == -2;
    fx.k.out[0] = dense2(u8, BS_DT_uint8, 1, 3);
    fx.insn.i[1] = 255;
    CHECK(t, ok && bs_k_Memset(&fx.k, &fx.err) == BS_OK && u8[2] == 255);
    bs_kstate_fini(&fx.ks);
}

/* {=== Engine accumulators (kaccum.h) ===} */

/* fx as a DVE TensorTensor mult of [2, 3] fp32 tiles a, b into o. */
static void tt_mult_dve(fixture *fx, float *a, float *b, float *o)
{
    fx_init(fx, BS_OP_TensorTensor);
    fx->insn.engine = BS_ENGINE_DVE;
    fx->k.nin = 2;
    fx->k.nout = 1;
    fx->k.in[0] = dense2(a, BS_DT_float32, 2, 3);
    fx->k.in[1] = dense2(b, BS_DT_float32, 2, 3);
    fx->k.out[0] = dense2(o, BS_DT_float32, 2, 3);
    fx->insn.i[BS_Pi_TensorTensor_op] = BS_ALU_mult;
}

static void test_accumulators(tctx *t)
{
    fixture fx = { 0 };
    float a[6] = { 1, 2, 3, -4, 5, -6 }, b[6] = { 1, 1, 1, 1, 1, 1 }, o[6], r[4];
    tt_mult_dve(&fx, a, b, o);
    fx.insn.i[BS_Pi_TensorTensor_acc] = BS_ACC_ZeroAccumulate;
    fx.insn.i[BS_Pi_TensorTensor_reduce_op] = BS_ALU_add;
    fx.ks.dve_acc[0] = fx.ks.dve_acc[1] = fx.ks.act_acc[0] = 50.0f;
    int ok = bs_k_TensorTensor(&fx.k, &fx.err) == BS_OK;
    CHECK(t, ok && fx.ks.dve_acc[0] == 6.0f && fx.ks.dve_acc[1] == -5.0f &&
          fx.ks.act_acc[0] == 50.0f && fx.ks.dve_acc[2] == 0.0f);
    fx.insn.i[BS_Pi_TensorTensor_acc] = BS_ACC_AddAccumulate;      /* = Accumulate */
    ok = bs_k_TensorTensor(&fx.k, &fx.err) == BS_OK;
    CHECK(t, ok && fx.ks.dve_acc[0] == 12.0f && fx.ks.dve_acc[1] == -10.0f);
    fx.insn.i[BS_Pi_TensorTensor_acc] = BS_ACC_LoadAccumulate;     /* from ins[2] = 0.5 */
    fx.insn.i[BS_Pi_TensorTensor_reduce_op] = BS_ALU_abs_max;
    fx.k.nin = 3;
    fx.k.imm[2] = 0.5;
    ok = bs_k_TensorTensor(&fx.k, &fx.err) == BS_OK;
    CHECK(t, ok && fx.ks.dve_acc[0] == 3.0f && fx.ks.dve_acc[1] == -6.0f);
    fx.insn.i[BS_Pi_TensorTensor_acc] = BS_ACC_Zero;               /* identity of min */
    fx.insn.i[BS_Pi_TensorTensor_reduce_op] = BS_ALU_min;
    ok = bs_k_TensorTensor(&fx.k, &fx.err) == BS_OK;
    CHECK(t, ok && isinf(fx.ks.dve_acc[0]) && fx.ks.dve_acc[0] > 0);
    fx.insn.engine = BS_ENGINE_Pool;                               /* Pool's own lanes */
    fx.insn.i[BS_Pi_TensorTensor_acc] = BS_ACC_ZeroAccumulate;
    fx.insn.i[BS_Pi_TensorTensor_reduce_op] = BS_ALU_max;
    ok = bs_k_TensorTensor(&fx.k, &fx.err) == BS_OK;
    CHECK(t, ok && fx.ks.pool_acc[0] == 3.0f && fx.ks.pool_acc[1] == 5.0f &&
          isinf(fx.ks.dve_acc[0]));
    fx.insn.i[BS_Pi_TensorTensor_op] = BS_ALU_bitwise_and;         /* int path: refused */
    CHECK(t, bs_k_TensorTensor(&fx.k, &fx.err) == BS_E_UNSUPPORTED);

    /* DveReadAccumulator: lane p broadcast over partition p's elements */
    fx_init(&fx, BS_OP_DveReadAccumulator);
    fx.ks.dve_acc[0] = 7.0f;
    fx.ks.dve_acc[1] = -2.5f;
    fx.k.nout = 1;
    fx.k.out[0] = dense2(r, BS_DT_float32, 2, 2);
    ok = bs_k_DveReadAccumulator(&fx.k, &fx.err) == BS_OK;
    CHECK(t, ok && r[0] == 7.0f && r[1] == 7.0f && r[2] == -2.5f && r[3] == -2.5f);
    fx.insn.engine = BS_ENGINE_SP;
    CHECK(t, bs_k_DveReadAccumulator(&fx.k, &fx.err) == BS_E_UNSUPPORTED);

    /* the marks: the read above consumed DVE's accumulator; NEGATE flips what is read */
    CHECK(t, fx.ks.acc_mark[2] == BS_ACCM_CONSUMED && fx.ks.acc_mark[1] == 0);
    fx.insn.engine = BS_ENGINE_DVE;
    fx.ks.acc_mark[2] = BS_ACCM_NEGATE;
    ok = bs_k_DveReadAccumulator(&fx.k, &fx.err) == BS_OK;
    CHECK(t, ok && r[0] == -7.0f && r[3] == 2.5f && fx.ks.dve_acc[0] == 7.0f &&
          fx.ks.acc_mark[2] == (BS_ACCM_NEGATE | BS_ACCM_CONSUMED));
    tt_mult_dve(&fx, a, b, o);                        /* consumed: Accumulate starts at 0 */
    fx.insn.i[BS_Pi_TensorTensor_acc] = BS_ACC_Accumulate;
    fx.insn.i[BS_Pi_TensorTensor_reduce_op] = BS_ALU_subtract;    /* lane - sum */
    ok = bs_k_TensorTensor(&fx.k, &fx.err) == BS_OK;
    CHECK(t, ok && fx.ks.dve_acc[0] == -6.0f && fx.ks.dve_acc[1] == 5.0f &&
          fx.ks.acc_mark[2] == 0);
    ok = bs_k_TensorTensor(&fx.k, &fx.err) == BS_OK;               /* not consumed: continues */
    CHECK(t, ok && fx.ks.dve_acc[0] == -12.0f && fx.ks.dve_acc[1] == 10.0f);
    fx.insn.i[BS_Pi_TensorTensor_reduce_op] = BS_ALU_bitwise_or;   /* not a reduce op */
    CHECK(t, bs_k_TensorTensor(&fx.k, &fx.err) == BS_E_UNSUPPORTED);
    bs_kstate_fini(&fx.ks);
}

int main(void)
{
    tctx t = { 0, 0 };
    test_alu(&t);
    test_tensor_tensor(&t);
    test_tensor_scalar(&t);
    test_recip_exp(&t);
    test_activation(&t);
    test_accumulators(&t);
    test_memset(&t);
    test_iota(&t);
    test_select(&t);
    test_more(&t);
    printf("%d passed, %d failed\n", t.pass, t.fail);
    return t.fail ? 1 : 0;
}
