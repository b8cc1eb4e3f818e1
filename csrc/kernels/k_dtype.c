/* kernels/k_dtype.c -- decode every dtype to fp32 / int64 and encode back (docs/spec/machine-model.md
** §4.2, docs/spec/BIR-JSON.md "Dtypes on the NumPy side"). RNE is done with integer bit manipulation
** and exact float steps (truncation, power-of-two scaling), so results do not depend on the
** rounding mode, FTZ/DAZ or contraction. Storage is little-endian. No state, no allocation.
** Packed x4 dtypes are not numeric: the fp32/int64 forms see their raw container value. */
#include "kernel.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "k_dtype.c assumes a little-endian host (BIR storage is little-endian)"
#endif

/* {=== Bit access ===} */

static inline uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static inline uint16_t rd16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return v; }
static inline uint32_t rd32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline uint64_t rd64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static inline void wr16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }
static inline void wr32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static inline void wr64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }

/* c ? a : b with masks. GCC sinks a float computation whose result a ?: discards into a
** branch, and a trapping op in a branch stops if-conversion; masks keep loops vectorisable. */
static inline uint32_t pick(int c, uint32_t a, uint32_t b)
{
    uint32_t m = 0u - (uint32_t)(c != 0);
    return (a & m) | (b & ~m);
}

/* {=== Small floats (fp16 and the fp8 family) ===
** A format is (ebits, mbits, bias, kind). kind IEEE: the top exponent is inf/NaN;
** kind FN: no inf, only the all-ones pattern is NaN (OCP e4m3fn). The helpers take the
** format as constants so each wrapper inlines to straight-line, vectorisable code. */
enum { IEEE, FN };

static inline float dec_mini(uint32_t x, int eb, int mb, int bias, int kind)
{
    uint32_t sign = ((x >> (eb + mb)) & 1u) << 31;
    uint32_t e = (x >> mb) & ((1u << eb) - 1);
    uint32_t m = x & ((1u << mb) - 1);
    uint32_t emax = (1u << eb) - 1;
    /* Rebias the exponent; a subnormal gets exponent 1-bias (implicit 1 included) and
    ** then 2^(1-bias) subtracted: exact, no denormal arithmetic (FTZ/DAZ cannot matter).
    ** Both paths share one unconditional subtraction so row loops stay branch-free. */
    uint32_t o = ((x & ((1u << (eb + mb)) - 1)) << (23 - mb)) + ((uint32_t)(127 - bias) << 23);
    float lo = u2f(pick(e == 0, (uint32_t)(128 - bias) << 23, 0));
    uint32_t bits = f2u(u2f(o + pick(e == 0, 1u << 23, 0)) - lo);
    uint32_t special = 0x7f800000u | pick(m != 0, 0x400000u, 0);   /* inf or quiet NaN */
    int top = kind == IEEE ? e == emax : (e == emax && m == (1u << mb) - 1);
    return u2f(sign | pick(top, special, bits));
}

/* RNE of x to an integer, for |x| < 2^31 and not NaN. Truncation, the int->float of
** the truncated value and the subtraction are all exact, so no rounding mode is used. */
static inline int32_t rne_i32(float x)
{
    int32_t t = (int32_t)x;
    float fr = x - (float)t;
    int32_t odd = t & 1;
    t += (fr > 0.5f) | ((fr == 0.5f) & odd);
    t -= (fr < -0.5f) | ((fr == -0.5f) & odd);
    return t;
}

/* Encode fp32 f: RNE, subnormals, NaN -> nan (sign kept); a finite value rounding above
** maxc (the largest finite code) gives `over` (maxc when saturating), ±inf gives `inf`.
** Normal results round on the rebiased bits with a constant shift; subnormal results are
** |f| scaled exactly to units of the smallest subnormal, then rounded (rne_i32). */
static inline uint32_t enc_mini(float f, int eb, int mb, int bias,
                                uint32_t maxc, uint32_t nan, uint32_t over, uint32_t inf)
{
    uint32_t u = f2u(f);
    uint32_t sign = (u >> 31) << (eb + mb);
    uint32_t a = u & 0x7fffffffu;
    uint32_t rebias = (uint32_t)(127 - bias) << 23;
    int sh = 23 - mb;
    uint32_t an = a - rebias;                            /* meaningful when a >= minnorm */
    uint32_t qn = (an + (1u << (sh - 1)) - 1 + ((an >> sh) & 1u)) >> sh;
    uint32_t minnorm = (uint32_t)(128 - bias) << 23;     /* 2^(1-bias) */
    float g = u2f(a < minnorm ? a : minnorm) * u2f((uint32_t)(127 + mb + bias - 1) << 23);
    uint32_t qs = (uint32_t)rne_i32(g);
    uint32_t q = pick(a < minnorm, qs, qn);
    q = pick(a >= 0x47800000u || q > maxc, over, q);    /* 2^16: past every max, no wrap */
    q = pick(a == 0x7f800000u, inf, q);
    q = pick(a > 0x7f800000u, nan, q);
    return sign | q;
}

/* The formats. fp8 saturates (overflow and ±inf give ±max); fp16 overflows to inf. */
static inline float dec_f16(uint32_t x)   { return dec_mini(x, 5, 10, 15, IEEE); }
static inline float dec_e5m2(uint32_t x)  { return dec_mini(x, 5, 2, 15, IEEE); }
static inline float dec_e4m3(uint32_t x)  { return dec_mini(x, 4, 3, 7, IEEE); }
static inline float dec_e4m3fn(uint32_t x){ return dec_mini(x, 4, 3, 7, FN); }
static inline float dec_e3m4(uint32_t x)  { return dec_mini(x, 3, 4, 3, IEEE); }

static inline uint16_t enc_f16(float f)
{
    return (uint16_t)enc_mini(f, 5, 10, 15, 0x7bff, 0x7e00, 0x7c00, 0x7c00);
}
static inline uint8_t enc_e5m2(float f)
{
    return (uint8_t)enc_mini(f, 5, 2, 15, 0x7b, 0x7e, 0x7b, 0x7b);
}
static inline uint8_t enc_e4m3(float f)
{
    return (uint8_t)enc_mini(f, 4, 3, 7, 0x77, 0x7c, 0x77, 0x77);
}
static inline uint8_t enc_e4m3fn(float f)
{
    return (uint8_t)enc_mini(f, 4, 3, 7, 0x7e, 0x7f, 0x7e, 0x7e);
}
static inline uint8_t enc_e3m4(float f)
{
    return (uint8_t)enc_mini(f, 3, 4, 3, 0x6f, 0x78, 0x6f, 0x6f);
}

/* Simulator(fp8_overflow="inf"): an overflow or an inf gives the format's inf (IEEE-style
** formats) or its NaN (e4m3fn, which has no inf), as an unsaturated cast does
** (docs/spec/machine-model.md §4.2 "saturate off"; docs/spec/nki-isa-semantics.md §1.5). */
static inline uint8_t enc_e5m2_inf(float f)
{
    return (uint8_t)enc_mini(f, 5, 2, 15, 0x7b, 0x7e, 0x7c, 0x7c);
}
static inline uint8_t enc_e4m3_inf(float f)
{
    return (uint8_t)enc_mini(f, 4, 3, 7, 0x77, 0x7c, 0x78, 0x78);
}
static inline uint8_t enc_e4m3fn_inf(float f)
{
    return (uint8_t)enc_mini(f, 4, 3, 7, 0x7e, 0x7f, 0x7f, 0x7f);
}
static inline uint8_t enc_e3m4_inf(float f)
{
    return (uint8_t)enc_mini(f, 3, 4, 3, 0x6f, 0x78, 0x70, 0x70);
}
/* }=== */

/* {=== bf16, float32r ===} */

static inline float dec_bf16(uint32_t x) { return u2f(x << 16); }

static inline uint16_t enc_bf16(float f)
{
    uint32_t u = f2u(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)(((u >> 16) & 0x8000u) | 0x7fc0u);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);   /* overflow carries to inf */
}

/* fp32 with 10 explicit mantissa bits (RNE); NaN becomes the quiet NaN, sign kept. */
static inline uint32_t enc_f32r(float f)
{
    uint32_t u = f2u(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (u & 0x80000000u) | 0x7fc00000u;
    return (u + 0xfffu + ((u >> 13) & 1u)) & 0xffffe000u;
}

/* {=== Integers ===
** fp32 -> integer in [lo, hi] (within int32), RNE, saturating; a NaN gives hi, or `nanneg`
** when its sign bit is set. Branch-free so row loops vectorise. */
static inline int32_t enc_int(float f, int32_t lo, int32_t hi, int32_t nanneg)
{
    uint32_t u = f2u(f);
    uint32_t c = pick(f >= -2147483648.0f, u, 0xcf000000u);   /* -2^31; also for NaN */
    c = pick(f > 2147483520.0f, 0x4effffffu, c);              /* largest float < 2^31 */
    int32_t t = rne_i32(u2f(c));
    t = t < lo ? lo : t;
    t = t > hi ? hi : t;
    t = (int32_t)pick(f >= 2147483648.0f, (uint32_t)hi, (uint32_t)t);
    return (int32_t)pick((u & 0x7fffffffu) > 0x7f800000u,
                         (uint32_t)((u >> 31) ? nanneg : hi), (uint32_t)t);
}

/* RNE of x to an integer, for |x| < 2^63 and not NaN (exact steps, as rne_i32). */
static inline int64_t rne_i64(float x)
{
    int64_t t = (int64_t)x;
    float fr = x - (float)t;
    int64_t odd = t & 1;
    t += (fr > 0.5f) | ((fr == 0.5f) & odd);
    t -= (fr < -0.5f) | ((fr == -0.5f) & odd);
    return t;
}

/* fp32 -> int64, RNE, saturating; NaN -> INT64_MIN or INT64_MAX by its sign bit. */
static inline int64_t enc_i64(float f)
{
    uint32_t u = f2u(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (u >> 31) ? INT64_MIN : INT64_MAX;
    if (f >= 9223372036854775808.0f)
        return INT64_MAX;
    if (f < -9223372036854775808.0f)
        return INT64_MIN;
    return rne_i64(f);
}

/* fp32 -> unsigned integer in [0, hi], RNE, saturating; NaN -> hi. */
static inline uint64_t enc_u64(float f, uint64_t hi)
{
    uint32_t u = f2u(f);
    uint64_t r;
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return hi;
    if (f < 0.0f)
        return 0;                                /* -0.5 rounds to -0; below, saturates */
    if (f >= 18446744073709551616.0f)
        return hi;
    if (f >= 9223372036854775808.0f)
        r = (uint64_t)f;                         /* an integer already */
    else
        r = (uint64_t)rne_i64(f);
    return r > hi ? hi : r;
}
/* }=== */

/* {=== Scalar forms ===} */

/* The value of the element at p (any alignment) as fp32: exact for floats, by value for
** integers (RNE above 2^24), the raw byte for float8_e8m0fnu, the raw container for x4. */
float bs_dt_load_f32(const uint8_t *p, int32_t dt)
{
    switch (dt) {
    case BS_DT_uint8:            return (float)p[0];
    case BS_DT_int8:             return (float)(int8_t)p[0];
    case BS_DT_float4_e2m1fn_x4: return (float)rd16(p);
    case BS_DT_float8e3:         return dec_e3m4(p[0]);
    case BS_DT_float8e4:         return dec_e4m3(p[0]);
    case BS_DT_float8_e4m3fn:    return dec_e4m3fn(p[0]);
    case BS_DT_float8_e8m0fnu:   return (float)p[0];
    case BS_DT_float8e5:         return dec_e5m2(p[0]);
    case BS_DT_float8_e4m3fn_x4: return (float)rd32(p);
    case BS_DT_float8_e5m2_x4:   return (float)rd32(p);
    case BS_DT_uint16:           return (float)rd16(p);
    case BS_DT_int16:            return (float)(int16_t)rd16(p);
    case BS_DT_bfloat16:         return dec_bf16(rd16(p));
    case BS_DT_float16:          return dec_f16(rd16(p));
    case BS_DT_uint32:           return (float)rd32(p);
    case BS_DT_int32:            return (float)(int32_t)rd32(p);
    case BS_DT_float32:          return u2f(rd32(p));
    case BS_DT_float32r:         return u2f(rd32(p));
    case BS_DT_uint64:           return (float)rd64(p);
    case BS_DT_int64:            return (float)(int64_t)rd64(p);
    default:                     return 0.0f;
    }
}

/* Encode v into the element at p with the rules of kernel.h (RNE, saturation); float
** NaNs and overflows keep their sign (fp16 NaN is 0x7e00 | sign). x4 dtypes get v as a
** saturated unsigned container value. Unknown dtypes write nothing. */
void bs_dt_store_f32(uint8_t *p, int32_t dt, float v)
{
    switch (dt) {
    case BS_DT_uint8:            p[0] = (uint8_t)enc_int(v, 0, UINT8_MAX, UINT8_MAX); break;
    case BS_DT_int8:             p[0] = (uint8_t)enc_int(v, INT8_MIN, INT8_MAX, INT8_MIN); break;
    case BS_DT_float4_e2m1fn_x4: wr16(p, (uint16_t)enc_int(v, 0, UINT16_MAX, UINT16_MAX)); break;
    case BS_DT_float8e3:         p[0] = enc_e3m4(v); break;
    case BS_DT_float8e4:         p[0] = enc_e4m3(v); break;
    case BS_DT_float8_e4m3fn:    p[0] = enc_e4m3fn(v); break;
    case BS_DT_float8_e8m0fnu:   p[0] = (uint8_t)enc_int(v, 0, UINT8_MAX, UINT8_MAX); break;
    case BS_DT_float8e5:         p[0] = enc_e5m2(v); break;
    case BS_DT_float8_e4m3fn_x4:
    case BS_DT_float8_e5m2_x4:   wr32(p, (uint32_t)enc_u64(v, UINT32_MAX)); break;
    case BS_DT_uint16:           wr16(p, (uint16_t)enc_int(v, 0, UINT16_MAX, UINT16_MAX)); break;
    case BS_DT_int16:            wr16(p, (uint16_t)enc_int(v, INT16_MIN, INT16_MAX, INT16_MIN));
                                 break;
    case BS_DT_bfloat16:         wr16(p, enc_bf16(v)); break;
    case BS_DT_float16:          wr16(p, enc_f16(v)); break;
    case BS_DT_uint32:           wr32(p, (uint32_t)enc_u64(v, UINT32_MAX)); break;
    case BS_DT_int32:            wr32(p, (uint32_t)enc_int(v, INT32_MIN, INT32_MAX, INT32_MIN));
                                 break;
    case BS_DT_float32:          wr32(p, f2u(v)); break;
    case BS_DT_float32r:         wr32(p, enc_f32r(v)); break;
    case BS_DT_uint64:           wr64(p, enc_u64(v, UINT64_MAX)); break;
    case BS_DT_int64:            wr64(p, (uint64_t)enc_i64(v)); break;
    default:                     break;
    }
}

/* Integer dtypes by value (uint64 above INT64_MAX reinterprets as negative); the raw
** dtypes (float8_e8m0fnu, packed x4) by container value; floats via fp32 rounded to the
** nearest-even integer, saturating, NaN -> INT64_MIN/MAX by its sign bit. */
int64_t bs_dt_load_i64(const uint8_t *p, int32_t dt)
{
    switch (dt) {
    case BS_DT_uint8:
    case BS_DT_float8_e8m0fnu:   return p[0];
    case BS_DT_int8:             return (int8_t)p[0];
    case BS_DT_uint16:
    case BS_DT_float4_e2m1fn_x4: return rd16(p);
    case BS_DT_int16:            return (int16_t)rd16(p);
    case BS_DT_uint32:
    case BS_DT_float8_e4m3fn_x4:
    case BS_DT_float8_e5m2_x4:   return rd32(p);
    case BS_DT_int32:            return (int32_t)rd32(p);
    case BS_DT_uint64:
    case BS_DT_int64:            return (int64_t)rd64(p);
    default:                     return enc_i64(bs_dt_load_f32(p, dt));
    }
}

/* Integer and raw dtypes keep the low bits of v; float dtypes store (float)v. */
static int64_t clamp64(int64_t v, int64_t lo, int64_t hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* Integer destinations saturate to their range (the cast rules), except that a 32-bit
** destination takes any int32 or uint32 value bit for bit ("same-size integer dtypes
** copy bits"), so bit-vector results on uint32 data survive. 64-bit keeps the bits. */
void bs_dt_store_i64(uint8_t *p, int32_t dt, int64_t v)
{
    uint64_t u = (uint64_t)v;
    switch (dt) {
    case BS_DT_uint8:
    case BS_DT_float8_e8m0fnu:   p[0] = (uint8_t)clamp64(v, 0, UINT8_MAX); break;
    case BS_DT_int8:             p[0] = (uint8_t)(int8_t)clamp64(v, INT8_MIN, INT8_MAX); break;
    case BS_DT_uint16:           wr16(p, (uint16_t)clamp64(v, 0, UINT16_MAX)); break;
    case BS_DT_int16:            wr16(p, (uint16_t)(int16_t)clamp64(v, INT16_MIN, INT16_MAX)); break;
    case BS_DT_float4_e2m1fn_x4: wr16(p, (uint16_t)u); break;
    case BS_DT_uint32:           wr32(p, (uint32_t)clamp64(v, INT32_MIN, UINT32_MAX)); break;
    case BS_DT_int32:            wr32(p, (uint32_t)clamp64(v, INT32_MIN, UINT32_MAX)); break;
    case BS_DT_float8_e4m3fn_x4:
    case BS_DT_float8_e5m2_x4:   wr32(p, (uint32_t)u); break;
    case BS_DT_uint64:
    case BS_DT_int64:            wr64(p, u); break;
    default:                     bs_dt_store_f32(p, dt, (float)v); break;
    }
}

/* 1 for every valid dtype except the packed x4 ones. */
int bs_dt_numeric(int32_t dt)
{
    return dt >= 0 && dt < BS_DT__COUNT && bs_dtinfo_table[dt].kind != BS_DK_P;
}

/* {=== Row forms ===
** The dtype switch sits outside the loops; each loop body is one inline codec. The
** common dtypes get a dense instance (constant stride) so the compiler can vectorise. */

static inline void ld_bf16(float *d, const uint8_t *s, int64_t st, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        d[i] = dec_bf16(rd16(s + i * st));
}
static inline void ld_f16(float *d, const uint8_t *s, int64_t st, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        d[i] = dec_f16(rd16(s + i * st));
}
static inline void ld_i32(float *d, const uint8_t *s, int64_t st, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        d[i] = (float)(int32_t)rd32(s + i * st);
}
static inline void ld_f32(float *d, const uint8_t *s, int64_t st, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        d[i] = u2f(rd32(s + i * st));
}

/* One fp8 decode loop; fmt selects the codec (constant after inlining into ld_fp8). */
static inline void ld_fp8_fmt(float *d, const uint8_t *s, int64_t st, int64_t n, int32_t dt)
{
    for (int64_t i = 0; i < n; i++) {
        uint8_t x = s[i * st];
        d[i] = dt == BS_DT_float8e3 ? dec_e3m4(x) : dt == BS_DT_float8e4 ? dec_e4m3(x)
             : dt == BS_DT_float8_e4m3fn ? dec_e4m3fn(x) : dec_e5m2(x);
    }
}

static inline void ld_fp8(float *d, const uint8_t *s, int64_t st, int64_t n, int32_t dt)
{
    switch (dt) {
    case BS_DT_float8e3:      ld_fp8_fmt(d, s, st, n, BS_DT_float8e3); break;
    case BS_DT_float8e4:      ld_fp8_fmt(d, s, st, n, BS_DT_float8e4); break;
    case BS_DT_float8_e4m3fn: ld_fp8_fmt(d, s, st, n, BS_DT_float8_e4m3fn); break;
    default:                  ld_fp8_fmt(d, s, st, n, BS_DT_float8e5); break;
    }
}

/* n elements from src (stride bytes apart, may be negative or 0) into dense dst; the
** results equal bs_dt_load_f32 element by element. Compiled twice (AVX2 where the CPU has
** it): the same decodes either way. */
BS_AVX2_CLONES
void bs_dt_load_row_f32(float *dst, const uint8_t *src, int64_t stride, int64_t n, int32_t dt)
{
    switch (dt) {
    case BS_DT_float32:
    case BS_DT_float32r:
        if (stride == 4)
            memmove(dst, src, (size_t)n * 4);
        else
            ld_f32(dst, src, stride, n);
        return;
    case BS_DT_bfloat16:
        if (stride == 2) ld_bf16(dst, src, 2, n); else ld_bf16(dst, src, stride, n);
        return;
    case BS_DT_float16:
        if (stride == 2) ld_f16(dst, src, 2, n); else ld_f16(dst, src, stride, n);
        return;
    case BS_DT_int32:
        if (stride == 4) ld_i32(dst, src, 4, n); else ld_i32(dst, src, stride, n);
        return;
    case BS_DT_float8e3:
    case BS_DT_float8e4:
    case BS_DT_float8_e4m3fn:
    case BS_DT_float8e5:
        if (stride == 1) ld_fp8(dst, src, 1, n, dt); else ld_fp8(dst, src, stride, n, dt);
        return;
    default:
        for (int64_t i = 0; i < n; i++)
            dst[i] = bs_dt_load_f32(src + i * stride, dt);
        return;
    }
}

static inline void st_bf16(uint8_t *d, int64_t st, const float *s, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        wr16(d + i * st, enc_bf16(s[i]));
}
static inline void st_f16(uint8_t *d, int64_t st, const float *s, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        wr16(d + i * st, enc_f16(s[i]));
}
static inline void st_i32(uint8_t *d, int64_t st, const float *s, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        wr32(d + i * st, (uint32_t)enc_int(s[i], INT32_MIN, INT32_MAX, INT32_MIN));
}
static inline void st_f32(uint8_t *d, int64_t st, const float *s, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        wr32(d + i * st, f2u(s[i]));
}

static inline void st_fp8_fmt(uint8_t *d, int64_t st, const float *s, int64_t n, int32_t dt)
{
    for (int64_t i = 0; i < n; i++) {
        float f = s[i];
        d[i * st] = dt == BS_DT_float8e3 ? enc_e3m4(f) : dt == BS_DT_float8e4 ? enc_e4m3(f)
                  : dt == BS_DT_float8_e4m3fn ? enc_e4m3fn(f) : enc_e5m2(f);
    }
}

static inline void st_fp8(uint8_t *d, int64_t st, const float *s, int64_t n, int32_t dt)
{
    switch (dt) {
    case BS_DT_float8e3:      st_fp8_fmt(d, st, s, n, BS_DT_float8e3); break;
    case BS_DT_float8e4:      st_fp8_fmt(d, st, s, n, BS_DT_float8e4); break;
    case BS_DT_float8_e4m3fn: st_fp8_fmt(d, st, s, n, BS_DT_float8_e4m3fn); break;
    default:                  st_fp8_fmt(d, st, s, n, BS_DT_float8e5); break;
    }
}

/* n dense values from src encoded into dst (stride bytes apart), equal to bs_dt_store_f32
** element by element. src may be dst itself only for dense fp32 (in-place cursor rows).
** Compiled twice, as bs_dt_load_row_f32. */
BS_AVX2_CLONES
void bs_dt_store_row_f32(uint8_t *dst, int64_t stride, const float *src, int64_t n, int32_t dt)
{
    switch (dt) {
    case BS_DT_float32:
        if (stride == 4)
            memmove(dst, src, (size_t)n * 4);    /* src may be dst (direct cursor rows) */
        else
            st_f32(dst, stride, src, n);
        return;
    case BS_DT_bfloat16:
        if (stride == 2) st_bf16(dst, 2, src, n); else st_bf16(dst, stride, src, n);
        return;
    case BS_DT_float16:
        if (stride == 2) st_f16(dst, 2, src, n); else st_f16(dst, stride, src, n);
        return;
    case BS_DT_int32:
        if (stride == 4) st_i32(dst, 4, src, n); else st_i32(dst, stride, src, n);
        return;
    case BS_DT_float8e3:
    case BS_DT_float8e4:
    case BS_DT_float8_e4m3fn:
    case BS_DT_float8e5:
        if (stride == 1) st_fp8(dst, 1, src, n, dt); else st_fp8(dst, stride, src, n, dt);
        return;
    default:
        for (int64_t i = 0; i < n; i++)
            bs_dt_store_f32(dst + i * stride, dt, src[i]);
        return;
    }
}
/* }=== */

/* {=== Casts under the simulator's fp8 overflow rule (Simulator(fp8_overflow=...)) ===
** BS_FP8OVF_saturate is exactly bs_dt_store_f32 / bs_dt_store_row_f32; BS_FP8OVF_inf
** changes only the four fp8 formats. The default path costs one test per row. */

static inline int is_fp8(int32_t dt)
{
    return dt == BS_DT_float8e3 || dt == BS_DT_float8e4 || dt == BS_DT_float8_e4m3fn
        || dt == BS_DT_float8e5;
}

static inline uint8_t enc_fp8_inf(float f, int32_t dt)
{
    return dt == BS_DT_float8e3 ? enc_e3m4_inf(f) : dt == BS_DT_float8e4 ? enc_e4m3_inf(f)
         : dt == BS_DT_float8_e4m3fn ? enc_e4m3fn_inf(f) : enc_e5m2_inf(f);
}

static void st_fp8_inf_fmt(uint8_t *d, int64_t st, const float *s, int64_t n, int32_t dt)
{
    for (int64_t i = 0; i < n; i++)
        d[i * st] = enc_fp8_inf(s[i], dt);
}

void bs_dt_store_f32_cast(uint8_t *p, int32_t dt, float v, int32_t cast)
{
    if (BS_UNLIKELY(cast == BS_FP8OVF_inf) && is_fp8(dt))
        p[0] = enc_fp8_inf(v, dt);
    else
        bs_dt_store_f32(p, dt, v);
}

void bs_dt_store_row_f32_cast(uint8_t *dst, int64_t stride, const float *src, int64_t n,
                              int32_t dt, int32_t cast)
{
    if (BS_LIKELY(cast != BS_FP8OVF_inf) || !is_fp8(dt)) {
        bs_dt_store_row_f32(dst, stride, src, n, dt);
        return;
    }
    switch (dt) {   /* one loop per format so the codec's constants fold */
    case BS_DT_float8e3:      st_fp8_inf_fmt(dst, stride, src, n, BS_DT_float8e3); break;
    case BS_DT_float8e4:      st_fp8_inf_fmt(dst, stride, src, n, BS_DT_float8e4); break;
    case BS_DT_float8_e4m3fn: st_fp8_inf_fmt(dst, stride, src, n, BS_DT_float8_e4m3fn); break;
    default:                  st_fp8_inf_fmt(dst, stride, src, n, BS_DT_float8e5); break;
    }
}
/* }=== */
