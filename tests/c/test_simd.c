/* tests/c/test_simd.c -- k_simd.c: the AVX-512 element rows give, element by element,
** the bits of the ALU's scalar form (bs_alu_f32) for every length 0..80 and 1037 (every
** tail after a 16- and 64-lane step), in place too, on special values (NaN payloads in one
** operand, +-inf, +-0, denormals, the largest finite values) and random bit patterns;
** the fused TensorScalar stages equal two scalar stages (either side reversed); the fused
** Activation affine step equals fp32(fp32(x * sc) + b) (squared); the streaming copy
** moves exactly the bytes asked for, at every head offset. Where two NaNs meet, only
** NaN-ness is compared (which payload comes out is not pinned down, k_simd.c). On CPUs
** without AVX-512F every entry point must decline (return 0). Build: make -C tests/c */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "kernels/kernel.h"

static int passed, failed;
#define CHECK(c) do { if (c) passed++; else { failed++; printf("  FAIL line %d: %s\n", __LINE__, #c); } } while (0)

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t next32(void)
{
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

static const uint32_t EDGE[] = {
    0x7fc12345, 0xff812345, 0x7f800000, 0xff800000, 0x00000000, 0x80000000, 0x00000001,
    0x80000001, 0x007fffff, 0x807fffff, 0x7f7fffff, 0xff7fffff, 0x3f800000, 0x1f800000,
};
#define NEDGE (sizeof EDGE / sizeof EDGE[0])

/* Element j of an operand: edges first, then random patterns, then ordinary values. */
static float value(int which, int64_t j)
{
    int64_t k = j + which * 5;
    if (k % 3 == 0 && (k / 3) < (int64_t)NEDGE)
        return from_bits(EDGE[k / 3]);
    if (k % 4 == 1)
        return from_bits(next32());
    return (float)((int)(next32() % 2001) - 1000) / 37.0f;
}

/* a's bits equal b's, or both are NaN where two NaNs met (`two`). */
static int agree(float a, float b, int two)
{
    return bits(a) == bits(b) || (two && isnan(a) && isnan(b));
}

static const int32_t OPS[] = { BS_ALU_bypass, BS_ALU_add, BS_ALU_subtract, BS_ALU_mult,
                               BS_ALU_divide, BS_ALU_max, BS_ALU_min };
#define NOPS ((int)(sizeof OPS / sizeof OPS[0]))
#define NMAX 1100
#define GUARD 0x12345678u                 /* the element after a row must keep these bits */

static void test_rows(int64_t n)
{
    static float l[NMAX], r[NMAX], out[NMAX], io[NMAX];
    for (int64_t j = 0; j < n; j++) {
        l[j] = value(0, j);
        r[j] = value(1, j);
    }
    for (int o = 0; o < NOPS; o++) {
        int32_t op = OPS[o];
        float c = value(2, n + o);
        int ok = 1;
        out[n] = from_bits(GUARD);
        if (!bs_simd_row(op, out, l, r, n))
            continue;
        CHECK(bits(out[n]) == GUARD);                 /* nothing past the row */
        for (int64_t j = 0; j < n; j++)
            ok &= agree(out[j], bs_alu_f32(op, l[j], r[j]), isnan(l[j]) && isnan(r[j]));
        CHECK(ok);
        memcpy(io, l, sizeof io);                     /* in place: out is l */
        CHECK(bs_simd_row(op, io, io, r, n));
        CHECK(memcmp(io, out, (size_t)n * sizeof *io) == 0);
        CHECK(bs_simd_row_rs(op, out, l, c, n));
        for (int64_t j = 0; j < n; j++)
            ok &= agree(out[j], bs_alu_f32(op, l[j], c), isnan(l[j]) && isnan(c));
        CHECK(ok);
        CHECK(bs_simd_row_ls(op, out, c, r, n));
        for (int64_t j = 0; j < n; j++)
            ok &= agree(out[j], bs_alu_f32(op, c, r[j]), isnan(c) && isnan(r[j]));
        CHECK(ok);
    }
}

static void test_ts(int64_t n)
{
    static float x[NMAX], out[NMAX];
    const float cs[] = { 1.5f, -0.0f, INFINITY, 1e-40f, 3.0e38f };
    for (int64_t j = 0; j < n; j++)
        x[j] = value(3, j);
    for (int a = 0; a < NOPS; a++)
        for (int b = 0; b < NOPS; b++)
            for (int rev = 0; rev < 4; rev++) {
                int32_t op0 = OPS[a], op1 = OPS[b];
                float c0 = cs[(a + rev) % 5], c1 = cs[(b + 2 * rev) % 5];
                int ok = 1;
                out[n] = from_bits(GUARD);
                if (!bs_simd_ts(out, x, n, op0, rev & 1, c0, op1, rev >> 1, c1))
                    continue;
                CHECK(bits(out[n]) == GUARD);
                for (int64_t j = 0; j < n; j++) {
                    float s = (rev & 1) ? bs_alu_f32(op0, c0, x[j]) : bs_alu_f32(op0, x[j], c0);
                    float y = (rev >> 1) ? bs_alu_f32(op1, c1, s) : bs_alu_f32(op1, s, c1);
                    ok &= agree(out[j], y, 0);    /* the constants are never NaN */
                }
                CHECK(ok);
            }
}

static void test_affine(int64_t n)
{
    static float x[NMAX], out[NMAX];
    const float sc[] = { 1.0f, -2.5f, 1e-30f }, bs[] = { 0.0f, -0.0f, 0.75f, INFINITY };
    for (int64_t j = 0; j < n; j++)
        x[j] = value(4, j);
    for (int s = 0; s < 3; s++)
        for (int b = 0; b < 4; b++)
            for (int sq = 0; sq <= 1; sq++) {
                int ok = 1;
                out[n] = from_bits(GUARD);
                if (!bs_simd_affine(out, x, n, sc[s], bs[b], sq))
                    continue;
                CHECK(bits(out[n]) == GUARD);
                for (int64_t j = 0; j < n; j++) {
                    volatile float t = x[j] * sc[s];
                    float u = t + bs[b];
                    ok &= agree(out[j], sq ? u * u : u, 0);
                }
                CHECK(ok);
            }
}

/* Copies of about n bytes at several alignments: every byte moved, none around touched. */
static void test_copy(size_t n)
{
    uint8_t *src = malloc(n + 128), *dst = malloc(n + 256);
    if (src == NULL || dst == NULL) {
        CHECK(0);
        free(src);
        free(dst);
        return;
    }
    for (size_t i = 0; i < n + 128; i++)
        src[i] = (uint8_t)next32();
    for (int off = 0; off < 70; off += 7) {
        memset(dst, 0xAB, n + 256);
        if (!bs_simd_copy_stream(dst + off, src + (off % 5), n - (size_t)off))
            break;
        CHECK(memcmp(dst + off, src + (off % 5), n - (size_t)off) == 0);
        CHECK(off == 0 || dst[off - 1] == 0xAB);
        CHECK(dst[n] == 0xAB && dst[n + 255] == 0xAB);
    }
    CHECK(!bs_simd_copy_stream(dst, src, BS_SIMD_STREAM_MIN_AVX2 - 1));   /* below both */
    CHECK(!bs_simd_copy_stream(src + 64, src, BS_SIMD_STREAM_MIN));       /* overlapping */
    free(src);
    free(dst);
}

int main(void)
{
    printf("test_simd (vector path %s)\n", bs_simd_path() ? "on" : "off");
    CHECK(!bs_simd_op(BS_ALU_pow) && !bs_simd_op(BS_ALU_is_gt));
    CHECK(!bs_simd_row(BS_ALU_pow, NULL, NULL, NULL, 0));
    for (int64_t n = 0; n <= 80; n++) {
        test_rows(n);
        test_ts(n);
        test_affine(n);
    }
    test_rows(1037);
    test_ts(1037);
    test_affine(1037);
    test_copy(BS_SIMD_STREAM_MIN + 777);          /* AVX-512 streaming, or AVX2 */
    test_copy(BS_SIMD_STREAM_MIN_AVX2 + 777);     /* AVX2 streaming, or memmove */
    printf("test_simd: %d passed, %d failed\n", passed, failed);
    return failed != 0;
}
