/* tests/c/test_expf.c -- k_expf.c: the row form equals the scalar form (in place too,
** any length, special values), and both equal the host C library's expf on special
** values and a 2M-input sample (a glibc host; the full 2^32 sweep on glibc 2.36 finds 2
** one-ulp differences, see k_expf.c). Both row paths (portable, and AVX-512F where the
** CPU has it: it prints which), with and without the affine step, give the scalar form's
** bits: every length 1..80 (tails), NaN payloads, +-inf, +-0, denormals, the
** overflow/underflow edges, rounding ties of the affine step, and 4M random bit patterns.
** Build: make -C tests/c */
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

static int same(float a, float b)
{
    return bits(a) == bits(b) || (isnan(a) && isnan(b));
}


static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Exactly the bits, NaN payloads included (the row paths must agree bit for bit). */
static int same_bits(float a, float b)
{
    return bits(a) == bits(b);
}

/* Edge inputs: NaN payloads (quiet, signalling, signed), +-inf, +-0, denormals, the
** largest finite values, exp's overflow/underflow limits and their neighbours, |x| = 88. */
static const uint32_t edge_bits[] = {
    0x7fc00000, 0xffc00000, 0x7fc12345, 0x7f800001, 0xff812345, 0x7fbfffff,
    0x7f800000, 0xff800000, 0x00000000, 0x80000000, 0x00000001, 0x80000001,
    0x007fffff, 0x807fffff, 0x00800000, 0x80800000, 0x7f7fffff, 0xff7fffff,
    0x42b17217, 0x42b17218, 0x42b17219, 0xc2cff1b4, 0xc2cff1b5, 0xc2cff1b3,
    0x42b00000, 0xc2b00000, 0x42afffff, 0xc2afffff, 0x42b00001, 0xc2b00001,
    0x3f800000, 0xbf800000, 0x33800000, 0xb3800000, 0x3effffff, 0x40000000,
};

/* out[j] from the scalar form: bs_expf(x) or bs_expf(fp32(fp32(x * sc) + b)). */
static float want(float x, int affine, float sc, float b)
{
    volatile float t = x * sc;                     /* two roundings, never contracted */
    return bs_expf(affine ? t + b : x);
}

/* Both paths, affine or not, out-of-place and in place, lengths 1..80 over the edge
** values and random values, then 4M random bit patterns. Returns the mismatch count. */
static int check_paths(void)
{
    static float in[4096], out[4096], ip[4096];
    const float sb[][2] = { {1.0f, 0.0f}, {0.0883883476f, -3.5f}, {-2.0f, 1e-3f},
                            {1.0f, -0.0f}, {0.5f, 0.25f}, {3.0f, 1e30f} };
    int bad = 0, last = bs_expf_row_best_path();      /* AVX-512F only where the CPU has it */
    for (int path = 0; path <= last; path++)
        for (int affine = 0; affine <= 1; affine++)
            for (size_t c = 0; c < sizeof sb / sizeof *sb; c++) {
                float sc = sb[c][0], b = sb[c][1];
                for (int n = 1; n <= 80; n++) {
                    for (int i = 0; i < n; i++)
                        in[i] = ip[i] = (i + n) % 3 == 0
                            ? from_bits(edge_bits[(i * 7 + n) % (sizeof edge_bits / 4)])
                            : (float)rand() / RAND_MAX * 240.0f - 120.0f;
                    out[n] = 12345.0f;                 /* the element after the row */
                    bs_expf_row_path(out, in, n, affine, sc, b, path);
                    bs_expf_row_path(ip, ip, n, affine, sc, b, path);
                    for (int i = 0; i < n; i++)
                        bad += !same_bits(out[i], want(in[i], affine, sc, b))
                             || !same_bits(ip[i], out[i]);
                    bad += out[n] != 12345.0f;         /* the tail writes nothing past n */
                }
                for (int r = 0; r < 1024; r++) {     /* random bit patterns, incl. NaNs */
                    for (int i = 0; i < 4096; i++)
                        in[i] = from_bits((uint32_t)rand() * 2654435761u ^ (uint32_t)rand());
                    bs_expf_row_path(out, in, 4096, affine, sc, b, path);
                    for (int i = 0; i < 4096; i++)
                        bad += !same_bits(out[i], want(in[i], affine, sc, b));
                }
            }
    /* rounding ties of the affine step: 1.5 * (1 + m 2^-23) is a tie for m = 2 mod 4,
    ** (1 + m 2^-23) + 2^-24 for every m; both must round to even */
    for (int path = 0; path <= last; path++)
        for (int c = 0; c < 2; c++) {
            float sc = c ? 1.0f : 1.5f, b = c ? 0x1p-24f : 0.0f;
            for (int i = 0; i < 64; i++)
                in[i] = from_bits(0x3f800000u + (uint32_t)i);
            bs_expf_row_path(out, in, 64, 1, sc, b, path);
            for (int i = 0; i < 64; i++)
                bad += !same_bits(out[i], want(in[i], 1, sc, b));
        }
    /* bs_expf_row_affine skips the step at scale 1, bias +-0: the same bits (-0, NaNs) */
    for (int c = 0; c < 2; c++) {
        for (size_t i = 0; i < sizeof edge_bits / 4; i++)
            in[i] = from_bits(edge_bits[i]);
        bs_expf_row_affine(out, in, (int64_t)(sizeof edge_bits / 4), 1.0f, c ? -0.0f : 0.0f);
        for (size_t i = 0; i < sizeof edge_bits / 4; i++)
            bad += !same_bits(out[i], want(in[i], 1, 1.0f, c ? -0.0f : 0.0f));
    }
    return bad;
}

int main(void)
{
    static float in[1000], out[1000], inplace[1000];
    const float specials[] = { 0.0f, -0.0f, 88.0f, -88.0f, 88.7f, 88.8f, -103.9f, -104.0f,
                               INFINITY, -INFINITY, NAN, 1e-30f, -1e-30f, 4.5f, 20.0f };
    int mismatches = 0;
    srand(7);
    for (int n = 1; n <= 1000; n += (n < 70 ? 1 : 137)) {
        int bad = 0;
        for (int i = 0; i < n; i++) {
            in[i] = i < (int)(sizeof specials / sizeof *specials) && n > 20 ? specials[i]
                  : (float)rand() / RAND_MAX * 220.0f - 110.0f;
            inplace[i] = in[i];
        }
        bs_expf_row(out, in, n);
        bs_expf_row(inplace, inplace, n);
        for (int i = 0; i < n; i++)
            bad += !same(out[i], bs_expf(in[i])) || !same(inplace[i], out[i]);
        CHECK(bad == 0);
    }
    for (size_t i = 0; i < sizeof specials / sizeof *specials; i++)
        CHECK(same(bs_expf(specials[i]), expf(specials[i])));
    CHECK(check_paths() == 0);
    printf("  (%s)\n", bs_expf_row_best_path() ? "AVX-512F row path checked too"
           : "this CPU has no AVX-512F: the portable row path alone checked");
    for (int i = 0; i < 2000000; i++) {            /* a sample against libm */
        uint32_t u = (uint32_t)rand() * 2654435761u;
        float x;
        memcpy(&x, &u, 4);
        mismatches += !same(bs_expf(x), expf(x));
    }
    CHECK(mismatches <= 1);
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
