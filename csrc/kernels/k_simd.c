/* kernels/k_simd.c -- AVX-512 forms of the hot elementwise row loops (kernel.h
** "Vector rows"): the ALU's two-operand rows (TensorTensor, Reciprocal, and every other
** kernel that calls bs_alu_row_f32*), TensorScalar(Ptr)'s two stages fused into one pass,
** and Activation's affine step fused with Square / Identity / Copy; and a byte copy with
** streaming stores for large DMA writes to DRAM (with an AVX2 form for CPUs without
** AVX-512).
**
** Same bits as the portable loops of alu.c and k_act.c: each element goes through the
** same IEEE fp32 operations in the same order, each rounded once (vaddps, vsubps,
** vmulps, vdivps round like their scalar forms under the same MXCSR; nothing fuses,
** -ffp-contract=off), and vmaxps / vminps are defined as `l > r ? l : r` /
** `l < r ? l : r`, the ALU's max and min (NaN or tie: r). Only those ops have a vector
** form; callers fall back to the portable loops for everything else.
** BIRSIM_ELT_ISA=0 forces the portable loops (read once; tests compare the two). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "kernel.h"

#if defined(__GNUC__) && defined(__x86_64__)
#define ELT_AVX512 1
#include <immintrin.h>
#endif

/* The ALU ops with a vector form here: every table and function family below is
** generated from this list (X(name) for BS_ALU_name). */
#define V_OPS(X) X(add) X(subtract) X(mult) X(divide) X(max) X(min) X(bypass)

/* 1 when op has a vector form here. */
static int vec_op(int32_t op)
{
    switch (op) {
#define V_CASE(name) case BS_ALU_##name:
    V_OPS(V_CASE)
#undef V_CASE
        return 1;
    default:
        return 0;
    }
}

/* The path: 1 = AVX-512 when the CPU has it, unless BIRSIM_ELT_ISA=0, else 0. */
static int elt_path(void)
{
    static _Atomic int path = -1;
    int p = atomic_load_explicit(&path, memory_order_relaxed);
    if (BS_UNLIKELY(p < 0)) {
        const char *env = getenv("BIRSIM_ELT_ISA");
        p = 0;
#ifdef ELT_AVX512
        p = __builtin_cpu_supports("avx512f") && !(env != NULL && env[0] == '0');
#endif
        (void)env;
        atomic_store_explicit(&path, p, memory_order_relaxed);
    }
    return p;
}

int bs_simd_path(void)
{
    return elt_path();
}

int bs_simd_op(int32_t op)
{
    return elt_path() && vec_op(op);
}

#ifdef ELT_AVX512
#define V_INLINE static inline __attribute__((always_inline, target("avx512f")))

/* l op r on 16 lanes; op is one of vec_op's. */
V_INLINE __m512 vop(int32_t op, __m512 l, __m512 r)
{
    switch (op) {
    case BS_ALU_add:      return _mm512_add_ps(l, r);
    case BS_ALU_subtract: return _mm512_sub_ps(l, r);
    case BS_ALU_mult:     return _mm512_mul_ps(l, r);
    case BS_ALU_divide:   return _mm512_div_ps(l, r);
    case BS_ALU_max:      return _mm512_max_ps(l, r);     /* l > r ? l : r */
    case BS_ALU_min:      return _mm512_min_ps(l, r);     /* l < r ? l : r */
    default:              return l;                       /* bypass */
    }
}

/* The loops are written once per op (the switch folds away in each copy), four vectors
** per step, the tail through masked loads and stores. */
#define ROW_LOOP(EXPR_V)                                                             \
    do {                                                                             \
        int64_t j = 0;                                                               \
        for (; j + 64 <= n; j += 64)                                                 \
            for (int u = 0; u < 64; u += 16) {                                       \
                const int64_t o = j + u;                                             \
                __mmask16 live = 0xffff;                                             \
                (void)live;                                                          \
                _mm512_storeu_ps(out + o, EXPR_V);                                   \
            }                                                                        \
        for (; j < n; j += 16) {                                                     \
            const int64_t o = j;                                                     \
            __mmask16 live = n - j >= 16 ? (__mmask16)0xffff                         \
                                         : (__mmask16)((1u << (n - j)) - 1);         \
            _mm512_mask_storeu_ps(out + o, live, EXPR_V);                            \
        }                                                                            \
    } while (0)

#define LD(p) _mm512_maskz_loadu_ps(live, (p) + o)

#define ROW_FNS(name, OP)                                                            \
__attribute__((target("avx512f")))                                                   \
static void v_row_##name(float *out, const float *l, const float *r, int64_t n)      \
{ ROW_LOOP(vop(OP, LD(l), LD(r))); }                                                 \
__attribute__((target("avx512f")))                                                   \
static void v_rs_##name(float *out, const float *l, float r, int64_t n)              \
{ __m512 vr = _mm512_set1_ps(r); ROW_LOOP(vop(OP, LD(l), vr)); }                     \
__attribute__((target("avx512f")))                                                   \
static void v_ls_##name(float *out, float l, const float *r, int64_t n)              \
{ __m512 vl = _mm512_set1_ps(l); ROW_LOOP(vop(OP, vl, LD(r))); }

#define V_ROW_FNS(name) ROW_FNS(name, BS_ALU_##name)
V_OPS(V_ROW_FNS)
#undef V_ROW_FNS

typedef void v_row_fn(float *out, const float *l, const float *r, int64_t n);
typedef void v_rs_fn(float *out, const float *l, float r, int64_t n);
typedef void v_ls_fn(float *out, float l, const float *r, int64_t n);
typedef struct v_fns { v_row_fn *row; v_rs_fn *rs; v_ls_fn *ls; } v_fns;

/* op's functions; op is one of V_OPS (vec_op). */
static v_fns v_for(int32_t op)
{
    switch (op) {
#define V_CASE(name) case BS_ALU_##name: return (v_fns){ v_row_##name, v_rs_##name, v_ls_##name };
    V_OPS(V_CASE)
#undef V_CASE
    default: return (v_fns){ v_row_bypass, v_rs_bypass, v_ls_bypass };
    }
}

/* Two stages, y = op1(op0(x, c0), c1) with either side reversed; each stage rounds. */
#define TS_STAGE(op, rev, v, c) ((rev) ? vop(op, c, v) : vop(op, v, c))

#define TS_CASE(name)                                                                \
    case BS_ALU_##name:                                                              \
        ROW_LOOP(TS_STAGE(BS_ALU_##name, rev1, TS_STAGE(op0, rev0, LD(x), v0), v1)); \
        break;
#define TS_FN(name, OP0)                                                             \
__attribute__((target("avx512f")))                                                   \
static void v_ts_##name(float *out, const float *x, int64_t n, int rev0, float c0,   \
                        int32_t op1, int rev1, float c1)                             \
{                                                                                    \
    const int32_t op0 = OP0;            /* a constant: vop's switch folds away */     \
    __m512 v0 = _mm512_set1_ps(c0), v1 = _mm512_set1_ps(c1);                         \
    switch (op1) {                                                                   \
    V_OPS(TS_CASE)                                                                   \
    default:                                                                         \
        break;                          /* not a vector op: bs_simd_ts declined it */ \
    }                                                                                \
}

/* One per V_OPS entry, spelled out: TS_FN's own switch expands V_OPS, which cannot nest
** in another expansion of it (v_ts_for, generated from V_OPS, fails to compile if one
** is missing). */
TS_FN(add, BS_ALU_add)
TS_FN(subtract, BS_ALU_subtract)
TS_FN(mult, BS_ALU_mult)
TS_FN(divide, BS_ALU_divide)
TS_FN(max, BS_ALU_max)
TS_FN(min, BS_ALU_min)
TS_FN(bypass, BS_ALU_bypass)
#undef TS_CASE

typedef void v_ts_fn(float *out, const float *x, int64_t n, int rev0, float c0, int32_t op1,
                     int rev1, float c1);

static v_ts_fn *v_ts_for(int32_t op0)
{
    switch (op0) {
#define V_CASE(name) case BS_ALU_##name: return v_ts_##name;
    V_OPS(V_CASE)
#undef V_CASE
    default: return v_ts_bypass;
    }
}

/* Activation: t = fp32(fp32(x * sc) + b), then Square (t * t) or the identity. */
__attribute__((target("avx512f")))
static void v_affine(float *out, const float *x, int64_t n, float sc, float b, int square)
{
    __m512 vs = _mm512_set1_ps(sc), vb = _mm512_set1_ps(b);
#define AFF(p) _mm512_add_ps(_mm512_mul_ps(LD(p), vs), vb)
    if (square)
        ROW_LOOP(_mm512_mul_ps(AFF(x), AFF(x)));
    else
        ROW_LOOP(AFF(x));
#undef AFF
}

/* Byte copy with streaming (non-temporal) stores: the destination's lines are not read
** first and do not displace the cache. Regular stores up to the first 64-byte boundary
** of dst, then whole 64-byte lines, then the remainder. */
__attribute__((target("avx512f")))
static void v_copy_stream(uint8_t *dst, const uint8_t *src, size_t n)
{
    size_t head = (size_t)(-(uintptr_t)dst & 63u), j;
    if (head > n)
        head = n;
    memcpy(dst, src, head);
    for (j = head; j + 256 <= n; j += 256) {
        __m512i a = _mm512_loadu_si512((const void *)(src + j));
        __m512i b = _mm512_loadu_si512((const void *)(src + j + 64));
        __m512i c = _mm512_loadu_si512((const void *)(src + j + 128));
        __m512i d = _mm512_loadu_si512((const void *)(src + j + 192));
        _mm512_stream_si512((void *)(dst + j), a);
        _mm512_stream_si512((void *)(dst + j + 64), b);
        _mm512_stream_si512((void *)(dst + j + 128), c);
        _mm512_stream_si512((void *)(dst + j + 192), d);
    }
    for (; j + 64 <= n; j += 64)
        _mm512_stream_si512((void *)(dst + j), _mm512_loadu_si512((const void *)(src + j)));
    _mm_sfence();
    memcpy(dst + j, src + j, n - j);
}
#endif

#ifdef ELT_AVX512
/* The same with 32-byte streaming stores, for CPUs without AVX-512 (or BIRSIM_ELT_ISA=0). */
__attribute__((target("avx2")))
static void v_copy_stream_avx2(uint8_t *dst, const uint8_t *src, size_t n)
{
    size_t head = (size_t)(-(uintptr_t)dst & 31u), j;
    if (head > n)
        head = n;
    memcpy(dst, src, head);
    for (j = head; j + 128 <= n; j += 128) {
        __m256i a = _mm256_loadu_si256((const void *)(src + j));
        __m256i b = _mm256_loadu_si256((const void *)(src + j + 32));
        __m256i c = _mm256_loadu_si256((const void *)(src + j + 64));
        __m256i d = _mm256_loadu_si256((const void *)(src + j + 96));
        _mm256_stream_si256((void *)(dst + j), a);
        _mm256_stream_si256((void *)(dst + j + 32), b);
        _mm256_stream_si256((void *)(dst + j + 64), c);
        _mm256_stream_si256((void *)(dst + j + 96), d);
    }
    _mm_sfence();
    memcpy(dst + j, src + j, n - j);
}
#endif

/* {=== Entry points (kernel.h); each returns 0, doing nothing, when it has no form ===} */

int bs_simd_copy_stream(void *dst, const void *src, size_t n)
{
#ifdef ELT_AVX512
    uintptr_t d = (uintptr_t)dst, s = (uintptr_t)src;
    int disjoint = d + n <= s || s + n <= d;
    if (n >= BS_SIMD_STREAM_MIN && disjoint && elt_path()) {
        v_copy_stream(dst, src, n);
        return 1;
    }
    if (n >= BS_SIMD_STREAM_MIN_AVX2 && disjoint && __builtin_cpu_supports("avx2")) {
        v_copy_stream_avx2(dst, src, n);
        return 1;
    }
#endif
    (void)dst; (void)src; (void)n;
    return 0;
}

int bs_simd_row(int32_t op, float *out, const float *l, const float *r, int64_t n)
{
#ifdef ELT_AVX512
    if (bs_simd_op(op)) {
        v_for(op).row(out, l, r, n);
        return 1;
    }
#endif
    (void)op; (void)out; (void)l; (void)r; (void)n;
    return 0;
}

int bs_simd_row_rs(int32_t op, float *out, const float *l, float r, int64_t n)
{
#ifdef ELT_AVX512
    if (bs_simd_op(op)) {
        v_for(op).rs(out, l, r, n);
        return 1;
    }
#endif
    (void)op; (void)out; (void)l; (void)r; (void)n;
    return 0;
}

int bs_simd_row_ls(int32_t op, float *out, float l, const float *r, int64_t n)
{
#ifdef ELT_AVX512
    if (bs_simd_op(op)) {
        v_for(op).ls(out, l, r, n);
        return 1;
    }
#endif
    (void)op; (void)out; (void)l; (void)r; (void)n;
    return 0;
}

int bs_simd_ts(float *out, const float *x, int64_t n, int32_t op0, int rev0, float c0,
               int32_t op1, int rev1, float c1)
{
#ifdef ELT_AVX512
    if (bs_simd_op(op0) && vec_op(op1)) {
        v_ts_for(op0)(out, x, n, rev0, c0, op1, rev1, c1);
        return 1;
    }
#endif
    (void)out; (void)x; (void)n; (void)op0; (void)rev0; (void)c0; (void)op1; (void)rev1;
    (void)c1;
    return 0;
}

int bs_simd_affine(float *out, const float *x, int64_t n, float sc, float b, int square)
{
#ifdef ELT_AVX512
    if (elt_path()) {
        v_affine(out, x, n, sc, b, square);
        return 1;
    }
#endif
    (void)out; (void)x; (void)n; (void)sc; (void)b; (void)square;
    return 0;
}
/* }=== */
