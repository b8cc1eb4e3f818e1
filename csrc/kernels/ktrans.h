/* kernels/ktrans.h -- an 8 x 8 fp32 transpose in AVX2 registers, for the kernels that
** turn rows into columns (BNStats' AVX2 path, the PE transpose of Matmult). Each user
** calls it from its own target("avx2") function, where it inlines; callers check the CPU. */
#ifndef BS_KERNELS_KTRANS_H
#define BS_KERNELS_KTRANS_H

#include <stdint.h>

#if defined(__GNUC__) && defined(__x86_64__)
#define BS_KTRANS_AVX2 1
#include <immintrin.h>

/* dst[c * ldd + r] = src[r * lds + c] for r, c < 8 (strides in floats): unpack pairs,
** then pairs of pairs, then 128-bit halves. Bits are moved, never computed, unless plus0
** (a constant where it inlines): then each value is x + 0, which turns -0 into +0 and
** keeps every other finite value. */
__attribute__((target("avx2"), always_inline))
static inline void bs_transpose8_avx2(const float *src, int64_t lds, float *dst, int64_t ldd,
                                      int plus0)
{
    __m256 r[8], t[8], u[8];
    for (int i = 0; i < 8; i++) {
        r[i] = _mm256_loadu_ps(src + i * lds);
        if (plus0)
            r[i] = _mm256_add_ps(r[i], _mm256_setzero_ps());
    }
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 2; i++) {     /* u[4i + c], 128-bit half h: column 4h + c, rows 4i.. */
        u[4 * i + 0] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
        u[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xee);
        u[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        u[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xee);
    }
    for (int c = 0; c < 4; c++) {
        _mm256_storeu_ps(dst + c * ldd, _mm256_permute2f128_ps(u[c], u[4 + c], 0x20));
        _mm256_storeu_ps(dst + (c + 4) * ldd, _mm256_permute2f128_ps(u[c], u[4 + c], 0x31));
    }
}
#endif

#endif
