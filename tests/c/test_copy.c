/* tests/c/test_copy.c -- unit tests for k_copy.c, k_reduce.c and k_matmul.c, on views over
** local buffers with a fake instruction and program. Expectations are worked out by hand
** (or, for the larger products, by a naive sequential loop in this file).
** Build and run (from the repo root):
**   gcc -std=c11 -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -ffp-contract=off -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Icsrc tests/c/test_copy.c csrc/kernels/k_copy.c csrc/kernels/k_reduce.c csrc/kernels/k_matmul.c csrc/core/pool.c csrc/kernels/k_eltwise.c csrc/kernels/k_dtype.c csrc/kernels/stream.c csrc/mem/mem.c csrc/core/alloc.c csrc/core/error.c csrc/core/tables.c -lm -o /tmp/test_copy && /tmp/test_copy
** Prints one line per failed check and "N passed, M failed" (N, M count test cases) last;
** exits 1 on any failure. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "kernels/kernel.h"
#include "testutil.h"

/* {=== Harness ===} */

typedef struct tctx {
    int checks_failed;        /* in the current test case */
} tctx;

static void check(tctx *t, int ok, const char *what, int line)
{
    if (!ok) {
        t->checks_failed++;
        printf("FAIL line %d: %s\n", line, what);
    }
}
#define CHECK(t, cond) check((t), (cond), #cond, __LINE__)


/* A dense row-major view with the given extents. */
static bs_view dense(void *data, int32_t dt, int ndim, const int64_t *num)
{
    int64_t st[BS_MAX_DIMS], s = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        st[d] = s;
        s *= num[d];
    }
    return mkview(data, dt, ndim, num, st);
}

static bs_view dense2(void *data, int32_t dt, int64_t p, int64_t f)
{
    int64_t num[2] = { p, f };
    return dense(data, dt, 2, num);
}

typedef struct fixture {
    bs_program prog;
    bs_insn    insn;
    bs_kstate  ks;
    bs_kctx    k;
    bs_error   err;
    double     fpool[8];
} fixture;

/* A context for opcode `op` with nin inputs and one output (views set by the test). */
static void fx_init(fixture *f, int32_t op, int32_t nin)
{
    memset(f, 0, sizeof *f);
    f->prog.fpool = f->fpool;
    f->prog.n_fpool = (int64_t)BS_ARRAY_LEN(f->fpool);
    f->insn.op = op;
    f->insn.nin = nin;
    f->insn.nout = 1;
    f->k.prog = &f->prog;
    f->k.insn = &f->insn;
    f->k.nin = nin;
    f->k.nout = 1;
    f->k.ks = &f->ks;
    bs_error_clear(&f->err);
}

static bs_status fx_run(fixture *f, bs_kernel_fn *fn)
{
    bs_error_clear(&f->err);
    return fn(&f->k, &f->err);
}

static void fx_fini(fixture *f)
{
    bs_kstate_fini(&f->ks);
}

static uint32_t f2u(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static int feq(const float *a, const float *b, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (f2u(a[i]) != f2u(b[i])) {
            printf("  element %lld: got %.9g (0x%08x), want %.9g (0x%08x)\n", (long long)i,
                   (double)a[i], (unsigned)f2u(a[i]), (double)b[i], (unsigned)f2u(b[i]));
            return 0;
        }
    return 1;
}

/* Deterministic pseudo-random floats in [-2, 2) with few mantissa bits set. */
static float lcg(uint32_t *s)
{
    *s = *s * 1664525u + 1013904223u;
    return (float)(int32_t)(*s >> 20) / 1024.0f - 2.0f;
}

/* }=== */

/* {=== Copy family ===} */

static void t_copy_same_dtype_bits(tctx *t)
{
    fixture f;
    uint32_t src[4] = { 0x7fa00001u, 0x80000000u, 0x3f800000u, 0xff800000u }, dst[4] = { 0 };
    fx_init(&f, BS_OP_TensorCopy, 1);
    f.k.in[0] = dense2(src, BS_DT_float32, 2, 2);
    f.k.out[0] = dense2(dst, BS_DT_float32, 2, 2);
    CHECK(t, fx_run(&f, bs_k_TensorCopy) == BS_OK);
    CHECK(t, memcmp(src, dst, sizeof src) == 0);       /* signalling NaN payload kept */
    fx_fini(&f);
}

static void t_copy_reshape_and_strided(tctx *t)
{
    fixture f;
    float src[16], dst[12] = { 0 }, want[12];
    int64_t num[2] = { 2, 3 }, est[2] = { 8, 2 };
    for (int i = 0; i < 16; i++)
        src[i] = (float)i;
    fx_init(&f, BS_OP_GenericCopy, 1);
    f.k.in[0] = dense2(src, BS_DT_float32, 2, 6);        /* [2,6] -> [3,4] row-major */
    f.k.out[0] = dense2(dst, BS_DT_float32, 3, 4);
    CHECK(t, fx_run(&f, bs_k_GenericCopy) == BS_OK);
    CHECK(t, feq(dst, src, 12));
    f.k.in[0] = mkview(src, BS_DT_float32, 2, num, est); /* {0,2,4},{8,10,12} */
    f.k.out[0] = dense2(dst, BS_DT_float32, 1, 6);
    for (int i = 0; i < 6; i++)
        want[i] = (float)((i / 3) * 8 + (i % 3) * 2);
    CHECK(t, fx_run(&f, bs_k_GenericCopy) == BS_OK);
    CHECK(t, feq(dst, want, 6));
    fx_fini(&f);
}

static void t_copy_broadcast_source(tctx *t)
{
    fixture f;
    float src[2] = { 1.5f, -2.0f }, dst[6] = { 0 }, want[6] = { 1.5f, -2, 1.5f, -2, 1.5f, -2 };
    int64_t num[2] = { 3, 2 }, est[2] = { 0, 1 };
    fx_init(&f, BS_OP_AbstractCopy, 1);
    f.k.in[0] = mkview(src, BS_DT_float32, 2, num, est);
    f.k.out[0] = dense2(dst, BS_DT_float32, 2, 3);
    CHECK(t, fx_run(&f, bs_k_AbstractCopy) == BS_OK);
    CHECK(t, feq(dst, want, 6));
    fx_fini(&f);
}

static void t_copy_cast_bf16(tctx *t)
{
    fixture f;
    float src[4] = { 1.0f + 1.0f / 256, 1.0f + 3.0f / 256, -2.0f, INFINITY }, back[4];
    float want_back[4] = { 1.0f, 1.015625f, -2.0f, INFINITY };
    uint16_t dst[4] = { 0 }, want[4] = { 0x3f80, 0x3f82, 0xc000, 0x7f80 };
    fx_init(&f, BS_OP_Load, 1);
    f.k.in[0] = dense2(src, BS_DT_float32, 1, 4);
    f.k.out[0] = dense2(dst, BS_DT_bfloat16, 1, 4);
    CHECK(t, fx_run(&f, bs_k_Load) == BS_OK);
    CHECK(t, memcmp(dst, want, sizeof want) == 0);      /* RNE: ties go to even */
    f.k.in[0] = dense2(dst, BS_DT_bfloat16, 1, 4);
    f.k.out[0] = dense2(back, BS_DT_float32, 1, 4);
    CHECK(t, fx_run(&f, bs_k_Save) == BS_OK);
    CHECK(t, feq(back, want_back, 4));
    fx_fini(&f);
}

static void t_copy_cast_int(tctx *t)
{
    fixture f;
    float src[5] = { 2.5f, 3.5f, -2.5f, 1e10f, -1e10f }, s8[4] = { 300, -5, 1.5f, 0.5f };
    int32_t dst[5], want[5] = { 2, 4, -2, INT32_MAX, INT32_MIN }, big = 16777217;
    uint8_t u8[4], want8[4] = { 255, 0, 2, 0 };
    float fbig;
    fx_init(&f, BS_OP_TensorCopy, 1);
    f.k.in[0] = dense2(src, BS_DT_float32, 1, 5);
    f.k.out[0] = dense2(dst, BS_DT_int32, 1, 5);
    CHECK(t, fx_run(&f, bs_k_TensorCopy) == BS_OK);
    CHECK(t, memcmp(dst, want, sizeof want) == 0);
    f.k.in[0] = dense2(s8, BS_DT_float32, 1, 4);
    f.k.out[0] = dense2(u8, BS_DT_uint8, 1, 4);
    CHECK(t, fx_run(&f, bs_k_TensorCopy) == BS_OK);
    CHECK(t, memcmp(u8, want8, sizeof want8) == 0);
    f.k.in[0] = dense2(&big, BS_DT_int32, 1, 1);        /* integers pass through fp32 */
    f.k.out[0] = dense2(&fbig, BS_DT_float32, 1, 1);
    CHECK(t, fx_run(&f, bs_k_TensorCopy) == BS_OK);
    CHECK(t, fbig == 16777216.0f);
    fx_fini(&f);
}

static void t_copy_errors(tctx *t)
{
    fixture f;
    float a[6] = { 0 }, b[4] = { 0 };
    uint32_t p[2] = { 0x01020304u, 0xa0b0c0d0u }, q[2] = { 0 };
    fx_init(&f, BS_OP_TensorCopy, 1);
    f.k.in[0] = dense2(a, BS_DT_float32, 2, 3);
    f.k.out[0] = dense2(b, BS_DT_float32, 2, 2);
    CHECK(t, fx_run(&f, bs_k_TensorCopy) == BS_E_SIM);
    CHECK(t, strstr(f.err.msg, "6") != NULL && strstr(f.err.msg, "4") != NULL);
    f.k.in[0] = dense2(p, BS_DT_float8_e4m3fn_x4, 1, 2);
    f.k.out[0] = dense2(a, BS_DT_float32, 1, 2);
    CHECK(t, fx_run(&f, bs_k_TensorCopy) == BS_E_UNSUPPORTED);
    f.k.out[0] = dense2(q, BS_DT_float8_e4m3fn_x4, 1, 2);   /* same packed dtype: bits */
    CHECK(t, fx_run(&f, bs_k_TensorCopy) == BS_OK);
    CHECK(t, memcmp(p, q, sizeof p) == 0);
    fx_fini(&f);
}

static void t_copy_overlap(tctx *t)
{
    fixture f;
    float buf[9], want[9] = { 0, 0, 1, 2, 3, 4, 5, 6, 7 }, cbuf[8];
    uint16_t hb[8];
    for (int i = 0; i < 9; i++)
        buf[i] = (float)i;
    fx_init(&f, BS_OP_TensorCopy, 1);
    f.k.in[0] = dense2(buf, BS_DT_float32, 1, 8);        /* out = in shifted by one */
    f.k.out[0] = dense2(buf + 1, BS_DT_float32, 1, 8);
    CHECK(t, fx_run(&f, bs_k_TensorCopy) == BS_OK);
    CHECK(t, feq(buf, want, 9));
    f.k.out[0] = f.k.in[0];                              /* onto itself: no-op */
    CHECK(t, fx_run(&f, bs_k_TensorCopy) == BS_OK);
    CHECK(t, feq(buf, want, 9));
    /* casting in place over a shared buffer: bf16 written over the fp32 it reads */
    for (int i = 0; i < 8; i++)
        cbuf[i] = (float)(i + 1);
    f.k.in[0] = dense2(cbuf, BS_DT_float32, 1, 8);
    f.k.out[0] = dense2(cbuf, BS_DT_bfloat16, 1, 8);
    CHECK(t, fx_run(&f, bs_k_TensorCopy) == BS_OK);
    memcpy(hb, cbuf, sizeof hb);
    CHECK(t, hb[0] == 0x3f80 && hb[1] == 0x4000 && hb[7] == 0x4100);
    fx_fini(&f);
}

/* }=== */

/* {=== DMACopy modes ===} */

static void t_dma_copy_mode(tctx *t)
{
    fixture f;
    float src[3] = { 1, 2, 3 }, dst[3] = { 0 };
    fx_init(&f, BS_OP_DMACopy, 1);
    f.insn.i[0] = BS_COPYMODE_Copy;
    f.k.in[0] = dense2(src, BS_DT_float32, 1, 3);
    f.k.out[0] = dense2(dst, BS_DT_float32, 3, 1);
    CHECK(t, fx_run(&f, bs_k_DMACopy) == BS_OK);
    CHECK(t, feq(dst, src, 3));
    f.insn.i[0] = 9;
    CHECK(t, fx_run(&f, bs_k_DMACopy) == BS_E_UNSUPPORTED);
    fx_fini(&f);
}

static void t_transpose_2d(tctx *t)
{
    fixture f;
    float src[12], dst[12] = { 0 };
    float want[12] = { 0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11 };
    for (int i = 0; i < 12; i++)
        src[i] = (float)i;                               /* src[y][x] = 4y + x, [3,4] */
    fx_init(&f, BS_OP_DMACopy, 1);
    f.insn.i[0] = BS_COPYMODE_Transpose;
    f.insn.i[1] = BS_TRANSPOSE_XYZW;
    f.k.in[0] = dense2(src, BS_DT_float32, 3, 4);
    f.k.out[0] = dense2(dst, BS_DT_float32, 4, 3);
    CHECK(t, fx_run(&f, bs_k_DMACopy) == BS_OK);
    CHECK(t, feq(dst, want, 12));
    memset(dst, 0, sizeof dst);
    f.insn.i[1] = BS_TRANSPOSE_None;                     /* None reads as XYZW */
    CHECK(t, fx_run(&f, bs_k_DMACopy) == BS_OK);
    CHECK(t, feq(dst, want, 12));
    fx_fini(&f);
}

static void t_transpose_3d(tctx *t)
{
    fixture f;
    float src[24], dst[24];
    int64_t num[3] = { 2, 3, 4 }, onum[3] = { 4, 3, 2 };
    /* XYZW: dst[x][y][z] = src[z][y][x]; src[z][y][x] = 100z + 10y + x */
    float want_xyzw[24] = { 0, 100, 10, 110, 20, 120, 1, 101, 11, 111, 21, 121,
                            2, 102, 12, 112, 22, 122, 3, 103, 13, 113, 23, 123 };
    /* WXZY: dst[w][x][z][y] = src[w][z][y][x] (W = 1) */
    float want_wxzy[24] = { 0, 10, 20, 100, 110, 120, 1, 11, 21, 101, 111, 121,
                            2, 12, 22, 102, 112, 122, 3, 13, 23, 103, 113, 123 };
    for (int z = 0; z < 2; z++)
        for (int y = 0; y < 3; y++)
            for (int x = 0; x < 4; x++)
                src[z * 12 + y * 4 + x] = (float)(100 * z + 10 * y + x);
    fx_init(&f, BS_OP_DMADescriptorTranspose, 1);        /* mode forced, i0 ignored */
    f.insn.i[1] = BS_TRANSPOSE_XYZW;
    f.k.in[0] = dense(src, BS_DT_float32, 3, num);
    f.k.out[0] = dense(dst, BS_DT_float32, 3, onum);
    CHECK(t, fx_run(&f, bs_k_DMADescriptorTranspose) == BS_OK);
    CHECK(t, feq(dst, want_xyzw, 24));
    f.insn.i[1] = BS_TRANSPOSE_WXZY;
    f.k.out[0] = dense2(dst, BS_DT_float32, 4, 6);
    CHECK(t, fx_run(&f, bs_k_DMADescriptorTranspose) == BS_OK);
    CHECK(t, feq(dst, want_wxzy, 24));
    fx_fini(&f);
}

static void t_transpose_4d_and_errors(tctx *t)
{
    fixture f;
    float src[16], dst[16], want[16], big[32] = { 0 };
    int64_t num[4] = { 2, 2, 2, 2 }, num5[5] = { 2, 2, 2, 2, 2 };
    int i = 0;
    for (int w = 0; w < 2; w++)
        for (int z = 0; z < 2; z++)
            for (int y = 0; y < 2; y++)
                for (int x = 0; x < 2; x++)
                    src[w * 8 + z * 4 + y * 2 + x] = (float)(1000 * w + 100 * z + 10 * y + x);
    for (int y = 0; y < 2; y++)                          /* YXWZ: dst[y][x][w][z] */
        for (int x = 0; x < 2; x++)
            for (int w = 0; w < 2; w++)
                for (int z = 0; z < 2; z++)
                    want[i++] = (float)(1000 * w + 100 * z + 10 * y + x);
    fx_init(&f, BS_OP_DMACopy, 1);
    f.insn.i[0] = BS_COPYMODE_Transpose;
    f.insn.i[1] = BS_TRANSPOSE_YXWZ;
    f.k.in[0] = dense(src, BS_DT_float32, 4, num);
    f.k.out[0] = dense2(dst, BS_DT_float32, 2, 8);
    CHECK(t, fx_run(&f, bs_k_DMACopy) == BS_OK);
    CHECK(t, feq(dst, want, 16));
    f.k.in[0] = dense(big, BS_DT_float32, 5, num5);      /* more than 4 dims */
    f.k.out[0] = dense2(big, BS_DT_float32, 1, 32);
    CHECK(t, fx_run(&f, bs_k_DMACopy) == BS_E_UNSUPPORTED);
    f.k.in[0] = dense(src, BS_DT_float32, 4, num);
    f.k.out[0] = dense2(dst, BS_DT_float32, 2, 8);
    f.insn.i[1] = 14;                                    /* unknown transpose_op */
    CHECK(t, fx_run(&f, bs_k_DMACopy) == BS_E_UNSUPPORTED);
    f.insn.i[1] = BS_TRANSPOSE_XYZW;
    f.k.out[0] = dense2(dst, BS_DT_float32, 3, 5);       /* count mismatch */
    CHECK(t, fx_run(&f, bs_k_DMACopy) == BS_E_SIM);
    fx_fini(&f);
}

static void t_transpose_cast_and_bits(tctx *t)
{
    fixture f;
    uint32_t src[4] = { 0x7fa00001u, 0x3f800000u, 0x40000000u, 0xffc00123u }, dst[4];
    uint32_t want[4] = { 0x7fa00001u, 0x40000000u, 0x3f800000u, 0xffc00123u };
    uint16_t h[4], wanth[4] = { 0x7fc0, 0x4000, 0x3f80, 0xffc0 };
    fx_init(&f, BS_OP_DMACopy, 1);
    f.insn.i[0] = BS_COPYMODE_Transpose;
    f.insn.i[1] = BS_TRANSPOSE_XYZW;
    f.k.in[0] = dense2(src, BS_DT_float32, 2, 2);
    f.k.out[0] = dense2(dst, BS_DT_float32, 2, 2);
    CHECK(t, fx_run(&f, bs_k_DMACopy) == BS_OK);
    CHECK(t, memcmp(dst, want, sizeof want) == 0);       /* NaN payloads bit-exact */
    f.k.out[0] = dense2(h, BS_DT_bfloat16, 2, 2);
    CHECK(t, fx_run(&f, bs_k_DMACopy) == BS_OK);
    CHECK(t, memcmp(h, wanth, sizeof wanth) == 0);       /* cast: NaN -> 0x7fc0, sign kept */
    fx_fini(&f);
}

static void t_replicate(tctx *t)
{
    fixture f;
    float src[2] = { 1, 2 }, dst[6] = { 0 }, want[6] = { 1, 2, 1, 2, 1, 2 };
    float buf[8] = { 5, 6, 0, 0, 0, 0, 0, 0 }, wantb[8] = { 5, 6, 5, 6, 5, 6, 5, 6 };
    uint16_t h[4], wanth[4] = { 0x3f80, 0x4000, 0x3f80, 0x4000 };
    fx_init(&f, BS_OP_DMACopy, 1);
    f.insn.i[0] = BS_COPYMODE_Replicate;
    f.k.in[0] = dense2(src, BS_DT_float32, 1, 2);
    f.k.out[0] = dense2(dst, BS_DT_float32, 3, 2);
    CHECK(t, fx_run(&f, bs_k_DMACopy) == BS_OK);
    CHECK(t, feq(dst, want, 6));
    f.k.out[0] = dense2(dst, BS_DT_float32, 1, 5);
    CHECK(t, fx_run(&f, bs_k_DMACopy) == BS_E_SIM);      /* 5 is not a multiple of 2 */
    f.k.in[0] = dense2(buf, BS_DT_float32, 1, 2);        /* in overlaps out */
    f.k.out[0] = dense2(buf, BS_DT_float32, 4, 2);
    CHECK(t, fx_run(&f, bs_k_DMACopy) == BS_OK);
    CHECK(t, feq(buf, wantb, 8));
    f.k.in[0] = dense2(src, BS_DT_float32, 1, 2);        /* with a cast */
    f.k.out[0] = dense2(h, BS_DT_bfloat16, 2, 2);
    CHECK(t, fx_run(&f, bs_k_DMADescriptorReplicate) == BS_OK);
    CHECK(t, memcmp(h, wanth, sizeof wanth) == 0);
    fx_fini(&f);
}

static void t_cce_add_constants(tctx *t)
{
    fixture f;
    float a[3] = { 1, 2, 3 }, b[3] = { 10, 20, 30 }, c[3] = { 100, 100, 100 }, d[3];
    float want[3] = { 107, 114, 121 };
    fx_init(&f, BS_OP_DMACopy, 3);
    f.insn.i[0] = BS_COPYMODE_CCE;
    f.insn.i[2] = BS_ALU_add;
    f.insn.flist = 2;                                    /* constants at fpool[2..4) */
    f.insn.nflist = 2;                                   /* in[2] has no constant: x1 */
    f.fpool[2] = 2.0;
    f.fpool[3] = 0.5;
    f.k.in[0] = dense2(a, BS_DT_float32, 1, 3);
    f.k.in[1] = dense2(b, BS_DT_float32, 3, 1);
    f.k.in[2] = dense2(c, BS_DT_float32, 1, 3);
    f.k.out[0] = dense2(d, BS_DT_float32, 1, 3);
    CHECK(t, fx_run(&f, bs_k_DMACopy) == BS_OK);         /* 2a + 0.5b + c */
    CHECK(t, feq(d, want, 3));
    fx_fini(&f);
}

static void t_cce_order_and_minmax(tctx *t)
{
    fixture f;
    float a[2] = { 1e8f, 1 }, b[2] = { 4, 5 }, c[2] = { -1e8f, -2 }, d[2];
    float want_add[2] = { 0, 4 }, want_max[2] = { 1e8f, 5 }, want_min[2] = { -1e8f, -2 };
    fx_init(&f, BS_OP_DMADescriptorCCE, 3);
    f.insn.i[2] = BS_ALU_add;
    f.k.in[0] = dense2(a, BS_DT_float32, 1, 2);
    f.k.in[1] = dense2(b, BS_DT_float32, 1, 2);
    f.k.in[2] = dense2(c, BS_DT_float32, 1, 2);
    f.k.out[0] = dense2(d, BS_DT_float32, 1, 2);
    CHECK(t, fx_run(&f, bs_k_DMADescriptorCCE) == BS_OK);
    CHECK(t, feq(d, want_add, 2));                       /* (1e8 + 4) rounds back to 1e8 */
    f.insn.i[2] = BS_ALU_max;
    CHECK(t, fx_run(&f, bs_k_DMADescriptorCCE) == BS_OK);
    CHECK(t, feq(d, want_max, 2));
    f.insn.i[2] = BS_ALU_min;
    CHECK(t, fx_run(&f, bs_k_DMADescriptorCCE) == BS_OK);
    CHECK(t, feq(d, want_min, 2));
    f.insn.i[2] = BS_ALU_subtract;
    CHECK(t, fx_run(&f, bs_k_DMADescriptorCCE) == BS_E_UNSUPPORTED);
    f.insn.i[2] = BS_ALU_add;
    f.k.in[1] = dense2(b, BS_DT_float32, 1, 1);          /* count mismatch */
    CHECK(t, fx_run(&f, bs_k_DMADescriptorCCE) == BS_E_SIM);
    fx_fini(&f);
}

static void t_descriptor_copy(tctx *t)
{
    fixture f;
    float src[4] = { 1, 2, 3, 4 }, dst[4] = { 0 };
    fx_init(&f, BS_OP_DMADescriptorCopy, 1);
    f.insn.i[0] = BS_COPYMODE_Transpose;                 /* ignored: mode forced to Copy */
    f.k.in[0] = dense2(src, BS_DT_float32, 2, 2);
    f.k.out[0] = dense2(dst, BS_DT_float32, 2, 2);
    CHECK(t, fx_run(&f, bs_k_DMADescriptorCopy) == BS_OK);
    CHECK(t, feq(dst, src, 4));
    fx_fini(&f);
}

/* }=== */

/* {=== StreamTranspose ===} */

static void t_stream_transpose_32(tctx *t)
{
    fixture f;
    static uint16_t src[32 * 32], dst[32 * 32];
    int ok = 1;
    for (int i = 0; i < 32 * 32; i++)
        src[i] = (uint16_t)(i * 7 + 1);
    fx_init(&f, BS_OP_StreamTranspose, 1);
    f.k.in[0] = dense2(src, BS_DT_bfloat16, 32, 32);
    f.k.out[0] = dense2(dst, BS_DT_bfloat16, 32, 32);
    CHECK(t, fx_run(&f, bs_k_StreamTranspose) == BS_OK);
    for (int p = 0; p < 32; p++)                         /* one tile: a plain transpose */
        for (int q = 0; q < 32; q++)
            ok &= dst[q * 32 + p] == src[p * 32 + q];
    CHECK(t, ok);
    CHECK(t, dst[1 * 32 + 0] == src[0 * 32 + 1] && dst[5 * 32 + 31] == src[31 * 32 + 5]);
    fx_fini(&f);
}

static void t_stream_transpose_64(tctx *t)
{
    fixture f;
    static float src[64 * 64], dst[64 * 64];
    int ok = 1;
    for (int i = 0; i < 64 * 64; i++)
        src[i] = (float)i;                               /* src[p][f] = 64p + f */
    fx_init(&f, BS_OP_StreamTranspose, 1);
    f.k.in[0] = dense2(src, BS_DT_float32, 64, 64);
    f.k.out[0] = dense2(dst, BS_DT_float32, 64, 64);
    CHECK(t, fx_run(&f, bs_k_StreamTranspose) == BS_OK);
    CHECK(t, dst[37 * 64 + 8] == 40 * 64 + 5);           /* in[40][5] -> out[37][8] */
    CHECK(t, dst[1 * 64 + 32] == 0 * 64 + 33);           /* in[0][33] -> out[1][32] */
    CHECK(t, dst[63 * 64 + 63] == 63 * 64 + 63);         /* diagonal stays */
    CHECK(t, dst[34 * 64 + 1] == 33 * 64 + 2);           /* in[33][2] -> out[34][1] */
    for (int p = 0; p < 64; p++)                         /* tiles stay, each transposed */
        for (int q = 0; q < 64; q++)
            ok &= dst[((p & ~31) | (q & 31)) * 64 + ((q & ~31) | (p & 31))] == src[p * 64 + q];
    CHECK(t, ok);
    fx_fini(&f);
}

static void t_stream_transpose_errors(tctx *t)
{
    fixture f;
    static float a[32 * 32], b[32 * 32];
    static uint16_t h[32 * 32];
    for (int i = 0; i < 16 * 16; i++)
        a[i] = (float)i;
    fx_init(&f, BS_OP_StreamTranspose, 1);
    f.k.in[0] = dense2(a, BS_DT_float32, 16, 16);        /* partial tile, all inside */
    f.k.out[0] = dense2(b, BS_DT_float32, 16, 16);
    CHECK(t, fx_run(&f, bs_k_StreamTranspose) == BS_OK);
    CHECK(t, b[3 * 16 + 5] == a[5 * 16 + 3]);
    f.k.in[0] = dense2(a, BS_DT_float32, 16, 32);        /* f = 20 -> partition 20 >= 16 */
    f.k.out[0] = dense2(b, BS_DT_float32, 16, 32);
    CHECK(t, fx_run(&f, bs_k_StreamTranspose) == BS_E_SIM);
    f.k.in[0] = dense2(a, BS_DT_float32, 32, 32);
    f.k.out[0] = dense2(h, BS_DT_bfloat16, 32, 32);      /* no cast allowed */
    CHECK(t, fx_run(&f, bs_k_StreamTranspose) == BS_E_SIM);
    f.k.out[0] = dense2(b, BS_DT_float32, 16, 64);       /* shape differs */
    CHECK(t, fx_run(&f, bs_k_StreamTranspose) == BS_E_SIM);
    f.k.in[0] = dense2(a, BS_DT_float32, 32, 2);         /* [32, 2] -> [2, 32] */
    f.k.out[0] = dense2(b, BS_DT_float32, 2, 32);
    CHECK(t, fx_run(&f, bs_k_StreamTranspose) == BS_OK);
    CHECK(t, b[1 * 32 + 7] == a[7 * 2 + 1] && b[0 * 32 + 31] == a[31 * 2 + 0]);
    f.k.out[0] = dense2(b, BS_DT_float32, 32, 2);        /* not its transpose */
    CHECK(t, fx_run(&f, bs_k_StreamTranspose) == BS_E_SIM);
    f.k.in[0] = dense2(a, BS_DT_float32, 64, 2);         /* no whole output for 64 x 2 */
    f.k.out[0] = dense2(b, BS_DT_float32, 2, 64);
    CHECK(t, fx_run(&f, bs_k_StreamTranspose) == BS_E_SIM);
    fx_fini(&f);
}

/* }=== */

/* {=== TensorReduce ===} */

static void reduce_setup(fixture *f, int32_t op, int32_t axis, int neg)
{
    fx_init(f, BS_OP_TensorReduce, 1);
    f->insn.i[0] = op;
    f->insn.i[1] = axis;
    f->insn.i[2] = neg;
}

static void t_reduce_x_add(tctx *t)
{
    fixture f;
    float in[8] = { 1, 2, 3, 4, 10, 20, 30, 40 }, out[2], want[2] = { 10, 100 };
    reduce_setup(&f, BS_ALU_add, BS_AXIS_X, 0);
    f.k.in[0] = dense2(in, BS_DT_float32, 2, 4);
    f.k.out[0] = dense2(out, BS_DT_float32, 2, 1);
    CHECK(t, fx_run(&f, bs_k_TensorReduce) == BS_OK);
    CHECK(t, feq(out, want, 2));
    f.insn.i[2] = 1;                                     /* negate */
    want[0] = -10;
    want[1] = -100;
    CHECK(t, fx_run(&f, bs_k_TensorReduce) == BS_OK);
    CHECK(t, feq(out, want, 2));
    fx_fini(&f);
}

static void t_reduce_xy_max(tctx *t)
{
    fixture f;
    float in[24] = { 3, -1, 7, 2, 9, 0, 4, 4, -8, 6, 1, 5,
                     -3, -1, -7, -2, -9, -0.5f, -4, -4, -8, -6, -1, -5 };
    float out[2], want[2] = { 9, -0.5f };
    int64_t num[3] = { 2, 3, 4 };
    reduce_setup(&f, BS_ALU_max, BS_AXIS_XY, 0);
    f.k.in[0] = dense(in, BS_DT_float32, 3, num);
    f.k.out[0] = dense2(out, BS_DT_float32, 2, 1);
    CHECK(t, fx_run(&f, bs_k_TensorReduce) == BS_OK);
    CHECK(t, feq(out, want, 2));
    f.insn.i[1] = BS_AXIS_X;                             /* X: 6 outputs, not 2 */
    CHECK(t, fx_run(&f, bs_k_TensorReduce) == BS_E_SIM);
    fx_fini(&f);
}

static void t_reduce_xyzw_all(tctx *t)
{
    fixture f;
    float in[6] = { 1, 2, 3, 4, 5, 6 }, out[1], want[1] = { 21 };
    reduce_setup(&f, BS_ALU_add, BS_AXIS_XYZW, 0);
    f.k.in[0] = dense2(in, BS_DT_float32, 2, 3);         /* crosses partitions */
    f.k.out[0] = dense2(out, BS_DT_float32, 1, 1);
    CHECK(t, fx_run(&f, bs_k_TensorReduce) == BS_OK);
    CHECK(t, feq(out, want, 1));
    f.insn.i[1] = BS_AXIS_XY;                            /* axis+1 == ndim: also all */
    CHECK(t, fx_run(&f, bs_k_TensorReduce) == BS_OK);
    CHECK(t, feq(out, want, 1));
    f.insn.i[1] = BS_AXIS_XYZWC;
    CHECK(t, fx_run(&f, bs_k_TensorReduce) == BS_E_UNSUPPORTED);
    f.insn.i[1] = BS_AXIS_C;
    CHECK(t, fx_run(&f, bs_k_TensorReduce) == BS_E_UNSUPPORTED);
    fx_fini(&f);
}

static void t_reduce_average(tctx *t)
{
    fixture f;
    float in[4] = { 1, 2, 3, 4 }, ones[3] = { 1, 1, 1 }, out[1], want[1] = { 2.5f };
    volatile float third = 1.0f / 3.0f, acc;
    reduce_setup(&f, BS_ALU_average, BS_AXIS_X, 0);
    f.k.in[0] = dense2(in, BS_DT_float32, 1, 4);
    f.k.out[0] = dense2(out, BS_DT_float32, 1, 1);
    CHECK(t, fx_run(&f, bs_k_TensorReduce) == BS_OK);
    CHECK(t, feq(out, want, 1));                         /* .25 + .5 + .75 + 1 */
    acc = third + third;                                 /* x/N first, each add rounded */
    acc = acc + third;
    want[0] = acc;
    f.k.in[0] = dense2(ones, BS_DT_float32, 1, 3);
    CHECK(t, fx_run(&f, bs_k_TensorReduce) == BS_OK);
    CHECK(t, feq(out, want, 1));
    CHECK(t, out[0] == 1.0f);                            /* 1/3 + 1/3 + 1/3 rounds to 1 here */
    fx_fini(&f);
}

/* The fold is sequential: (1e8 + 4) + 4 ... stays 1e8, where a tree would give 1e8 + 16.
** Checked on the per-row path (2 outputs) and the column path (16 outputs). */
static void t_reduce_sequential_order(tctx *t)
{
    fixture f;
    float in[16 * 5], out[16], want[16];
    for (int o = 0; o < 16; o++) {
        in[o * 5] = 1e8f;
        for (int j = 1; j < 5; j++)
            in[o * 5 + j] = 4.0f;
        want[o] = 1e8f;
    }
    reduce_setup(&f, BS_ALU_add, BS_AXIS_X, 0);
    f.k.in[0] = dense2(in, BS_DT_float32, 2, 5);
    f.k.out[0] = dense2(out, BS_DT_float32, 2, 1);
    CHECK(t, fx_run(&f, bs_k_TensorReduce) == BS_OK);
    CHECK(t, feq(out, want, 2));
    in[3 * 5 + 4] = 8.0f;                                /* 1e8 + 8 is representable */
    want[3] = 1e8f + 8.0f;
    f.k.in[0] = dense2(in, BS_DT_float32, 16, 5);
    f.k.out[0] = dense2(out, BS_DT_float32, 16, 1);
    CHECK(t, fx_run(&f, bs_k_TensorReduce) == BS_OK);
    CHECK(t, feq(out, want, 16));
    fx_fini(&f);
}

/* Column path with a strided 3-D input and a bf16 output: [10, 2, 3] reduced over XY. */
static void t_reduce_column_strided(tctx *t)
{
    fixture f;
    float in[10 * 8];
    uint16_t out[10];
    int64_t num[3] = { 10, 2, 3 }, est[3] = { 8, 4, 1 };
    int ok = 1;
    for (int i = 0; i < 80; i++)
        in[i] = (float)(i % 8 == 3 || i % 8 == 7 ? 1000 : i / 8);   /* gaps hold 1000 */
    reduce_setup(&f, BS_ALU_add, BS_AXIS_XY, 0);
    f.k.in[0] = mkview(in, BS_DT_float32, 3, num, est);
    f.k.out[0] = dense2(out, BS_DT_bfloat16, 10, 1);
    CHECK(t, fx_run(&f, bs_k_TensorReduce) == BS_OK);
    for (int p = 0; p < 10; p++) {                       /* 6p is exact in bf16 */
        float v = (float)(6 * p);
        uint32_t u = f2u(v);
        ok &= out[p] == (uint16_t)(u >> 16);
    }
    CHECK(t, ok);
    fx_fini(&f);
}

static void t_reduce_int_ops(tctx *t)
{
    fixture f;
    int32_t in[6] = { 1, 2, 4, 8, 8, 3 }, out[2], want_or[2] = { 7, 11 }, want_neg[2] = { -7, -11 };
    int32_t want_and[2] = { 0, 0 };
    reduce_setup(&f, BS_ALU_bitwise_or, BS_AXIS_X, 0);
    f.k.in[0] = dense2(in, BS_DT_int32, 2, 3);
    f.k.out[0] = dense2(out, BS_DT_int32, 2, 1);
    CHECK(t, fx_run(&f, bs_k_TensorReduce) == BS_OK);
    CHECK(t, memcmp(out, want_or, sizeof out) == 0);
    f.insn.i[2] = 1;
    CHECK(t, fx_run(&f, bs_k_TensorReduce) == BS_OK);
    CHECK(t, memcmp(out, want_neg, sizeof out) == 0);
    f.insn.i[0] = BS_ALU_bitwise_and;
    f.insn.i[2] = 0;
    CHECK(t, fx_run(&f, bs_k_TensorReduce) == BS_OK);
    CHECK(t, memcmp(out, want_and, sizeof out) == 0);
    f.insn.i[0] = BS_ALU_mod_int;                        /* 1 % 2 % 4 fine; 8 % 8 % 3 fine */
    in[5] = 0;                                           /* ... % 0 is an error */
    CHECK(t, fx_run(&f, bs_k_TensorReduce) == BS_E_ARITH);
    f.insn.i[0] = BS_ALU_elemwise_mul;
    CHECK(t, fx_run(&f, bs_k_TensorReduce) == BS_E_UNSUPPORTED);
    fx_fini(&f);
}

/* }=== */

/* {=== Matmult ===} */

static void mm_setup(fixture *f, int64_t flags)
{
    fx_init(f, BS_OP_Matmult, 2);
    f->insn.i[0] = flags;
}

static void t_matmul_small(tctx *t)
{
    fixture f;
    float mv[6] = { 1, 2, 3, 4, 5, 6 }, st[4] = { 1, 2, 3, 4 }, out[6];
    float want[6] = { 13, 17, 21, 18, 24, 30 };
    uint8_t sh[sizeof out] = { 0 };
    mm_setup(&f, 2);
    f.k.in[0] = dense2(mv, BS_DT_float32, 2, 3);         /* moving [K=2, N=3] */
    f.k.in[1] = dense2(st, BS_DT_float32, 2, 2);         /* stationary [K=2, M=2] */
    f.k.out[0] = dense2(out, BS_DT_float32, 2, 3);
    f.k.out[0].memtype = BS_MEM_PSUM;
    f.k.out[0].shadow = sh;
    CHECK(t, fx_run(&f, bs_k_Matmult) == BS_OK);
    CHECK(t, feq(out, want, 6));
    fx_fini(&f);
}

/* Two K=2 tiles (start, then accumulate) equal the K=4 product. */
static void t_matmul_k_tiling(tctx *t)
{
    fixture f;
    float mv[12] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 0, 2 }, st[8] = { 1, 2, 3, 4, 0, 1, 2, 1 };
    float full[6], tiled[6] = { 9, 9, 9, 9, 9, 9 }, want[6] = { 15, 17, 25, 26, 32, 41 };
    uint8_t sh[sizeof tiled];
    mm_setup(&f, 0);
    f.k.in[0] = dense2(mv, BS_DT_float32, 4, 3);
    f.k.in[1] = dense2(st, BS_DT_float32, 4, 2);
    f.k.out[0] = dense2(full, BS_DT_float32, 2, 3);      /* flags 0: plain write, SB ok */
    CHECK(t, fx_run(&f, bs_k_Matmult) == BS_OK);
    CHECK(t, feq(full, want, 6));
    memset(sh, 1, sizeof sh);                            /* old PSUM contents, written */
    f.insn.i[0] = 2;                                     /* start: ignores what is there */
    f.k.in[0] = dense2(mv, BS_DT_float32, 2, 3);
    f.k.in[1] = dense2(st, BS_DT_float32, 2, 2);
    f.k.out[0] = dense2(tiled, BS_DT_float32, 2, 3);
    f.k.out[0].memtype = BS_MEM_PSUM;
    f.k.out[0].shadow = sh;
    CHECK(t, fx_run(&f, bs_k_Matmult) == BS_OK);
    f.insn.i[0] = 1;                                     /* accumulate the k = 2, 3 tile */
    f.k.in[0] = dense2(mv + 6, BS_DT_float32, 2, 3);
    f.k.in[1] = dense2(st + 4, BS_DT_float32, 2, 2);
    CHECK(t, fx_run(&f, bs_k_Matmult) == BS_OK);
    CHECK(t, feq(tiled, want, 6));
    fx_fini(&f);
}

/* Accumulate writes where the shadow says "never written" (or only partly written). */
static void t_matmul_accumulate_unwritten(tctx *t)
{
    fixture f;
    float mv[3] = { 1, 2, 3 }, st[1] = { 2 }, out[3] = { 100, 999, 999 };
    float want[3] = { 102, 4, 6 };
    uint8_t sh[sizeof out] = { 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 0, 1 };
    mm_setup(&f, 1);
    f.k.in[0] = dense2(mv, BS_DT_float32, 1, 3);
    f.k.in[1] = dense2(st, BS_DT_float32, 1, 1);
    f.k.out[0] = dense2(out, BS_DT_float32, 1, 3);
    f.k.out[0].memtype = BS_MEM_PSUM;
    f.k.out[0].shadow = sh;
    CHECK(t, fx_run(&f, bs_k_Matmult) == BS_OK);
    CHECK(t, feq(out, want, 3));
    out[0] = 100;                                        /* no shadow at all: writes */
    f.k.out[0].shadow = NULL;
    want[0] = 2;
    CHECK(t, fx_run(&f, bs_k_Matmult) == BS_OK);
    CHECK(t, feq(out, want, 3));
    out[0] = 100;                                        /* 3 = start: no add */
    f.k.out[0].shadow = sh;
    f.insn.i[0] = 3;
    CHECK(t, fx_run(&f, bs_k_Matmult) == BS_OK);
    CHECK(t, feq(out, want, 3));
    fx_fini(&f);
}

static void t_matmul_accumulate_bf16(tctx *t)
{
    fixture f;
    float mv[2] = { 1.0f / 256, 3.0f / 256 }, st[1] = { 1 };
    uint16_t out[2] = { 0x3f80, 0x3f80 }, want[2] = { 0x3f80, 0x3f82 };
    uint8_t sh[sizeof out];
    memset(sh, 1, sizeof sh);
    mm_setup(&f, 1);
    f.k.in[0] = dense2(mv, BS_DT_float32, 1, 2);
    f.k.in[1] = dense2(st, BS_DT_float32, 1, 1);
    f.k.out[0] = dense2(out, BS_DT_bfloat16, 1, 2);
    f.k.out[0].memtype = BS_MEM_PSUM;
    f.k.out[0].shadow = sh;
    CHECK(t, fx_run(&f, bs_k_Matmult) == BS_OK);        /* fp32(1 + r), then RNE to bf16 */
    CHECK(t, memcmp(out, want, sizeof want) == 0);
    fx_fini(&f);
}

/* psum_zero_region (birsim's reading): a start zeroes the 2^r-bank window (2 KiB banks,
** aligned) holding out[0]'s first byte on out[0]'s partitions, through the output's store;
** bytes outside the window and other partitions keep their contents. The PSUM rows here
** are exactly 4 banks (8 KiB), so ASan sees any write past them. */
static void t_matmul_zero_region(tctx *t)
{
    enum { PITCH = 8192, PARTS = 3 };
    fixture f;
    bs_loc loc;
    bs_store st;
    uint8_t *psum = malloc(PARTS * PITCH), *sh = malloc(PARTS * PITCH);
    float mv[4] = { 1, 2, 3, 4 }, stv[2] = { 2, -1 };
    int ok = 1;
    if (psum == NULL || sh == NULL) {
        CHECK(t, 0);
        free(psum);
        free(sh);
        return;
    }
    memset(psum, 0x11, PARTS * PITCH);
    memset(sh, 0, PARTS * PITCH);
    memset(&loc, 0, sizeof loc);
    loc.memtype = BS_MEM_PSUM;
    loc.placed = 1;
    loc.parts = PARTS;
    loc.bpp = 2048;
    loc.addr = 2048;                                     /* the location is bank 1 */
    memset(&st, 0, sizeof st);
    st.data = psum + loc.addr;
    st.shadow = sh + loc.addr;
    st.parts = PARTS;
    st.bpp = loc.bpp;
    st.pitch = PITCH;
    st.memtype = BS_MEM_PSUM;
    st.loc = 0;
    mm_setup(&f, 2);
    f.prog.locs = &loc;
    f.insn.i[5] = 1 + 1;                                 /* psum_zero_region 1: banks 0..1 */
    f.k.in[0] = dense2(mv, BS_DT_float32, 1, 4);         /* moving [K=1, N=4] */
    f.k.in[1] = dense2(stv, BS_DT_float32, 1, 2);        /* stationary [K=1, M=2] */
    {
        int64_t num[2] = { 2, 4 }, str[2] = { PITCH / 4, 1 };
        f.k.out[0] = mkview(st.data + 100, BS_DT_float32, 2, num, str);
    }
    f.k.out[0].memtype = BS_MEM_PSUM;
    f.k.out[0].shadow = st.shadow + 100;
    f.k.ostore[0] = &st;
    CHECK(t, fx_run(&f, bs_k_Matmult) == BS_OK);
    for (int p = 0; p < PARTS; p++)
        for (int b = 0; b < PITCH; b++) {
            int in_win = p < 2 && b < 4096, in_out = p < 2 && b >= 2148 && b < 2164;
            uint8_t d = psum[p * PITCH + b];
            if (in_out)
                continue;
            if (in_win ? (d != 0 || sh[p * PITCH + b] != 1) : (d != 0x11 || sh[p * PITCH + b] != 0))
                ok = 0;
        }
    CHECK(t, ok);
    {
        float o[8];
        memcpy(o, psum + 2148, 16);
        memcpy(o + 4, psum + PITCH + 2148, 16);
        CHECK(t, o[0] == 2 && o[3] == 8 && o[4] == -1 && o[7] == -4);
    }
    /* out[0] past a 1-bank window: E_SIM, nothing zeroed */
    memset(psum, 0x11, PARTS * PITCH);
    f.insn.i[5] = 1 + 0;
    {
        int64_t num[2] = { 2, 4 }, str[2] = { PITCH / 4, 1 };
        f.k.out[0] = mkview(st.data + 2040, BS_DT_float32, 2, num, str);
    }
    f.k.out[0].memtype = BS_MEM_PSUM;
    CHECK(t, fx_run(&f, bs_k_Matmult) == BS_E_SIM);
    CHECK(t, strstr(f.err.msg, "psum_zero_region 0") != NULL);
    CHECK(t, psum[2048] == 0x11 && psum[4095] == 0x11);
    /* no start: the key changes nothing */
    f.insn.i[0] = 0;
    {
        int64_t num[2] = { 2, 4 }, str[2] = { PITCH / 4, 1 };
        f.k.out[0] = mkview(st.data + 100, BS_DT_float32, 2, num, str);
    }
    f.k.out[0].memtype = BS_MEM_PSUM;
    CHECK(t, fx_run(&f, bs_k_Matmult) == BS_OK);
    CHECK(t, psum[0] == 0x11 && psum[2047] == 0x11 && psum[2147] == 0x11);
    fx_fini(&f);
    free(psum);
    free(sh);
}

static void t_matmul_errors(tctx *t)
{
    fixture f;
    float mv[6] = { 0 }, st[4] = { 0 }, out[6];
    int8_t i8[4] = { 0 };
    mm_setup(&f, 2);
    f.k.in[0] = dense2(mv, BS_DT_float32, 2, 3);
    f.k.in[1] = dense2(st, BS_DT_float32, 2, 2);
    f.k.out[0] = dense2(out, BS_DT_float32, 2, 3);       /* SB destination */
    CHECK(t, fx_run(&f, bs_k_Matmult) == BS_E_SIM);
    CHECK(t, strstr(f.err.msg, "PSUM") != NULL);
    f.insn.i[0] = 1;
    f.k.out[0].memtype = BS_MEM_DRAM;
    CHECK(t, fx_run(&f, bs_k_Matmult) == BS_E_SIM);
    f.k.out[0].memtype = BS_MEM_PSUM;
    f.k.in[1] = dense2(st, BS_DT_float32, 1, 4);         /* K differs: 1 vs 2 */
    CHECK(t, fx_run(&f, bs_k_Matmult) == BS_E_SIM);
    CHECK(t, strstr(f.err.msg, "[2, 3]") != NULL);
    f.k.in[1] = dense2(st, BS_DT_float32, 2, 2);
    f.k.out[0] = dense2(out, BS_DT_float32, 3, 2);       /* out must be [M=2, N=3] */
    f.k.out[0].memtype = BS_MEM_PSUM;
    CHECK(t, fx_run(&f, bs_k_Matmult) == BS_E_SIM);
    f.k.out[0] = dense2(out, BS_DT_float32, 2, 3);
    f.k.out[0].memtype = BS_MEM_PSUM;
    f.k.in[1] = dense2(i8, BS_DT_int8, 2, 2);
    CHECK(t, fx_run(&f, bs_k_Matmult) == BS_E_UNSUPPORTED);
    fx_fini(&f);
}

static void t_matmul_uint8(tctx *t)
{
    fixture f;
    uint8_t mv[4] = { 200, 1, 2, 255 }, st[2] = { 3, 1 };
    float out[2], want[2] = { 602, 258 };                /* 200*3 + 2*1, 1*3 + 255*1 */
    mm_setup(&f, 0);
    f.k.in[0] = dense2(mv, BS_DT_uint8, 2, 2);
    f.k.in[1] = dense2(st, BS_DT_uint8, 2, 1);
    f.k.out[0] = dense2(out, BS_DT_float32, 1, 2);
    CHECK(t, fx_run(&f, bs_k_Matmult) == BS_OK);
    CHECK(t, feq(out, want, 2));
    fx_fini(&f);
}

/* Shapes that use full tiles and every edge, with a strided moving operand, against a
** naive loop: products rounded, summed from +0 in k order. Bit-identical. */
static void t_matmul_vs_naive(tctx *t)
{
    static const int64_t shapes[4][3] = { { 37, 13, 45 }, { 8, 8, 32 }, { 1, 3, 17 },
                                          { 128, 128, 512 } };
    for (int s = 0; s < 4; s++) {
        int64_t K = shapes[s][0], M = shapes[s][1], N = shapes[s][2];
        float *mv = malloc((size_t)(K * (N + 3)) * sizeof(float));
        float *st = malloc((size_t)(K * M) * sizeof(float));
        float *out = malloc((size_t)(M * N) * sizeof(float));
        float *want = malloc((size_t)(M * N) * sizeof(float));
        int64_t num[2] = { K, N }, est[2] = { N + 3, 1 };
        uint32_t seed = (uint32_t)s + 7;
        fixture f;
        for (int64_t i = 0; i < K * (N + 3); i++)
            mv[i] = lcg(&seed);
        for (int64_t i = 0; i < K * M; i++)
            st[i] = lcg(&seed) * 3.0f;
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) {
                float acc = 0.0f;
                for (int64_t k = 0; k < K; k++) {
                    float p = mv[k * (N + 3) + n] * st[k * M + m];
                    acc = acc + p;
                }
                want[m * N + n] = acc;
            }
        mm_setup(&f, 0);
        f.k.in[0] = mkview(mv, BS_DT_float32, 2, num, est);
        f.k.in[1] = dense2(st, BS_DT_float32, K, M);
        f.k.out[0] = dense2(out, BS_DT_float32, M, N);
        CHECK(t, fx_run(&f, bs_k_Matmult) == BS_OK);
        CHECK(t, feq(out, want, M * N));
        fx_fini(&f);
        free(mv);
        free(st);
        free(out);
        free(want);
    }
}

/* }=== */

typedef void test_fn(tctx *t);
static const struct { const char *name; test_fn *fn; } tests[] = {
    { "copy_same_dtype_bits", t_copy_same_dtype_bits },
    { "copy_reshape_and_strided", t_copy_reshape_and_strided },
    { "copy_broadcast_source", t_copy_broadcast_source },
    { "copy_cast_bf16", t_copy_cast_bf16 },
    { "copy_cast_int", t_copy_cast_int },
    { "copy_errors", t_copy_errors },
    { "copy_overlap", t_copy_overlap },
    { "dma_copy_mode", t_dma_copy_mode },
    { "transpose_2d", t_transpose_2d },
    { "transpose_3d", t_transpose_3d },
    { "transpose_4d_and_errors", t_transpose_4d_and_errors },
    { "transpose_cast_and_bits", t_transpose_cast_and_bits },
    { "replicate", t_replicate },
    { "cce_add_constants", t_cce_add_constants },
    { "cce_order_and_minmax", t_cce_order_and_minmax },
    { "descriptor_copy", t_descriptor_copy },
    { "stream_transpose_32", t_stream_transpose_32 },
    { "stream_transpose_64", t_stream_transpose_64 },
    { "stream_transpose_errors", t_stream_transpose_errors },
    { "reduce_x_add", t_reduce_x_add },
    { "reduce_xy_max", t_reduce_xy_max },
    { "reduce_xyzw_all", t_reduce_xyzw_all },
    { "reduce_average", t_reduce_average },
    { "reduce_sequential_order", t_reduce_sequential_order },
    { "reduce_column_strided", t_reduce_column_strided },
    { "reduce_int_ops", t_reduce_int_ops },
    { "matmul_small", t_matmul_small },
    { "matmul_k_tiling", t_matmul_k_tiling },
    { "matmul_accumulate_unwritten", t_matmul_accumulate_unwritten },
    { "matmul_accumulate_bf16", t_matmul_accumulate_bf16 },
    { "matmul_errors", t_matmul_errors },
    { "matmul_zero_region", t_matmul_zero_region },
    { "matmul_uint8", t_matmul_uint8 },
    { "matmul_vs_naive", t_matmul_vs_naive },
};

int main(void)
{
    int passed = 0, failed = 0;
    for (size_t i = 0; i < BS_ARRAY_LEN(tests); i++) {
        tctx t = { 0 };
        tests[i].fn(&t);
        if (t.checks_failed == 0) {
            passed++;
        } else {
            failed++;
            printf("FAILED: %s\n", tests[i].name);
        }
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
