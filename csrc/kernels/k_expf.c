/* kernels/k_expf.c -- exp in fp32, vectorised, with the C library's results.
**
** This is the algorithm of glibc's expf (table of 2^(i/32) plus a cubic, evaluated in
** double precision, then rounded once to fp32) written so the compiler vectorises it, and
** by hand for AVX-512F (row forms below; the same bits on all 2^32 inputs).
** Checked over all 2^32 fp32 inputs against glibc 2.36's expf on x86-64: identical but
** for 2 inputs (one ulp, at double-rounding ties). It gives the Activation Exp and
** Exponential kernels libm's answers at SIMD speed, the same on every machine. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
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

/* {=== Row forms ===}
** out[j] = bs_expf(t[j]), t[j] = in[j], or fp32(fp32(in[j] * scale) + bias) with affine
** (Activation's two roundings, no fma). out may equal in. Two paths with the same bits:
** the portable one (the compiler vectorises exp_core; its table lookup becomes one
** scalar load per lane) and, on CPUs with AVX-512F, one that looks the table up with two
** 16-entry permutes and a blend, and folds the affine step and the special values into
** the same pass. Both do exactly exp_core's IEEE operations in the same order. */

/* Blocks of inputs are copied (or transformed) first, so out may alias in: the
** special-value pass needs the original inputs. */
BS_AVX2_CLONES
static void exp_row_portable(float *out, const float *in, int64_t n, int affine, float scale,
                             float bias)
{
    float x[EXP_BLOCK];
    for (int64_t i0 = 0; i0 < n; i0 += EXP_BLOCK) {
        int64_t m = n - i0 < EXP_BLOCK ? n - i0 : EXP_BLOCK;
        int any = 0;
        if (affine)
            for (int64_t j = 0; j < m; j++)
                x[j] = in[i0 + j] * scale + bias;      /* two fp32 roundings (no fma) */
        else
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

#if defined(__GNUC__) && defined(__x86_64__)
#define EXP_AVX512 1
#include <immintrin.h>

/* exp_core on 8 lanes: the same operations, the table split over four registers. */
__attribute__((target("avx512f")))
static inline __m256 exp_core8(__m512d x, const __m512d tab[4])
{
    __m512d z = _mm512_mul_pd(_mm512_set1_pd(exp_invln2n), x);
    __m512d kd = _mm512_add_pd(z, _mm512_set1_pd(exp_shift));
    __m512i ki = _mm512_castpd_si512(kd);
    __m512d r, s, lo, hi, y, r2;
    kd = _mm512_sub_pd(kd, _mm512_set1_pd(exp_shift));
    r = _mm512_sub_pd(z, kd);
    lo = _mm512_permutex2var_pd(tab[0], ki, tab[1]);          /* T[ki % 16] */
    hi = _mm512_permutex2var_pd(tab[2], ki, tab[3]);          /* T[16 + ki % 16] */
    s = _mm512_mask_blend_pd(_mm512_test_epi64_mask(ki, _mm512_set1_epi64(16)), lo, hi);
    s = _mm512_castsi512_pd(_mm512_add_epi64(_mm512_castpd_si512(s),
                                             _mm512_slli_epi64(ki, 52 - 5)));
    y = _mm512_add_pd(_mm512_mul_pd(_mm512_set1_pd(exp_c0), r), _mm512_set1_pd(exp_c1));
    r2 = _mm512_mul_pd(r, r);
    y = _mm512_mul_pd(y, r2);
    y = _mm512_add_pd(y, _mm512_add_pd(_mm512_mul_pd(_mm512_set1_pd(exp_c2), r),
                                       _mm512_set1_pd(1.0)));
    return _mm512_cvtpd_ps(_mm512_mul_pd(y, s));
}

/* 16 lanes of t: exp_core on each half, then special() on lanes with |t| >= 88 or NaN. */
__attribute__((target("avx512f")))
static inline __m512 exp_core16(__m512 t, const __m512d tab[4])
{
    __m512 y = _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(
                   exp_core8(_mm512_cvtps_pd(_mm512_castps512_ps256(t)), tab))),
                   _mm256_castps_pd(exp_core8(_mm512_cvtps_pd(_mm256_castpd_ps(
                       _mm512_extractf64x4_pd(_mm512_castps_pd(t), 1))), tab)), 1));
    __mmask16 odd = (__mmask16)~_mm512_cmp_ps_mask(_mm512_abs_ps(t), _mm512_set1_ps(88.0f),
                                                   _CMP_LT_OQ);
    if (odd) {                                     /* rare: inf, NaN, |t| >= 88 */
        float tv[16], yv[16];
        _mm512_storeu_ps(tv, t);
        _mm512_storeu_ps(yv, y);
        for (int l = 0; l < 16; l++)
            if (odd >> l & 1)
                yv[l] = special(tv[l], yv[l]);
        y = _mm512_loadu_ps(yv);
    }
    return y;
}

/* 16 lanes at a time, the tail through masked loads and stores (its dead lanes are 0). */
__attribute__((target("avx512f")))
static void exp_row_avx512(float *out, const float *in, int64_t n, int affine, float scale,
                           float bias)
{
    __m512d tab[4];
    __m512 vs = _mm512_set1_ps(scale), vb = _mm512_set1_ps(bias);
    int64_t j = 0;
    for (int i = 0; i < 4; i++)
        tab[i] = _mm512_castsi512_pd(_mm512_loadu_si512((const void *)(exp_tab + 8 * i)));
    if (affine)
        for (; j + 16 <= n; j += 16)
            _mm512_storeu_ps(out + j, exp_core16(_mm512_add_ps(_mm512_mul_ps(
                                 _mm512_loadu_ps(in + j), vs), vb), tab));
    else
        for (; j + 16 <= n; j += 16)
            _mm512_storeu_ps(out + j, exp_core16(_mm512_loadu_ps(in + j), tab));
    if (j < n) {
        __mmask16 live = (__mmask16)((1u << (n - j)) - 1);
        __m512 t = _mm512_maskz_loadu_ps(live, in + j);
        if (affine)
            t = _mm512_maskz_add_ps(live, _mm512_mul_ps(t, vs), vb);
        _mm512_mask_storeu_ps(out + j, live, exp_core16(t, tab));
    }
}
#endif

/* 1 when this CPU runs the AVX-512F row form (and it is compiled in), else 0. */
static int cpu_avx512(void)
{
#ifdef EXP_AVX512
    return __builtin_cpu_supports("avx512f");
#else
    return 0;
#endif
}

/* The path the row forms take: 1 = AVX-512 when the CPU has it, unless BIRSIM_EXP_ISA=0
** (read once; for tests of the portable path), else 0. */
static int exp_path(void)
{
    static _Atomic int path = -1;
    int p = atomic_load_explicit(&path, memory_order_relaxed);
    if (p < 0) {
        const char *env = getenv("BIRSIM_EXP_ISA");
        p = cpu_avx512() && !(env != NULL && strcmp(env, "0") == 0);
        atomic_store_explicit(&path, p, memory_order_relaxed);
    }
    return p;
}

/* A row form on `path`, which the caller has checked this CPU runs. */
static void row_on(float *out, const float *in, int64_t n, int affine, float scale,
                   float bias, int path)
{
#ifdef EXP_AVX512
    if (path == 1) {
        exp_row_avx512(out, in, n, affine, scale, bias);
        return;
    }
#endif
    (void)path;
    exp_row_portable(out, in, n, affine, scale, bias);
}

void bs_expf_row_path(float *out, const float *in, int64_t n, int affine, float scale,
                      float bias, int path)
{
    row_on(out, in, n, affine, scale, bias, path == 1 && cpu_avx512());
}

void bs_expf_row(float *out, const float *in, int64_t n)
{
    row_on(out, in, n, 0, 1.0f, 0.0f, exp_path());
}

/* scale 1 and bias 0 (either sign) change no result: in * 1 + 0 differs from in only
** for -0 (exp gives 1 for both) and a signalling NaN (quieted either way, same payload). */
void bs_expf_row_affine(float *out, const float *in, int64_t n, float scale, float bias)
{
    row_on(out, in, n, !(scale == 1.0f && bias == 0.0f), scale, bias, exp_path());
}

int bs_expf_row_best_path(void)
{
    return exp_path();
}
