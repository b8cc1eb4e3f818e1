/* kernels/k_mx.c -- the microscaling (MX) family: packed x4 lanes, QuantizeMx and MatmultMx
** (docs/spec/machine-model.md §4.1, §4.2, §6.2; docs/spec/nki-isa-semantics.md §3.2, §3.30).
**
** Packed containers. float8_e4m3fn_x4 / float8_e5m2_x4 hold four fp8 codes in a uint32,
** float4_e2m1fn_x4 four fp4 codes in a uint16; lane q is the q-th of four consecutive
** logical elements and sits in bits [8q, 8q+8) / [4q, 4q+4) (little-endian: lane q of an
** fp8 container is its byte q). Only the MX instructions look inside a container; every
** other kernel sees the raw container value.
**
** MX groups. A group is 8 partitions x 1 container (32 values along the contraction:
** 8 partitions x 4 lanes) and shares one E8M0 scale byte s, value 2^(s-127) (255 = NaN).
** The scale operand of a data tile of P partitions and F containers per partition is
** read in one of two layouts (mx_scales):
**   dense     it enumerates the (P/8) x F bytes in group order: group row g = p/8 major,
**             container c minor (e.g. a [4, F] tile for 32 data partitions, or any access
**             pattern that picks the rows out of the quadrants);
**   quadrant  it has the data's P partitions and F bytes each, and group row g lives at
**             partition 32 (g/4) + g%4, the first four partitions of each 32-partition
**             quadrant (NKI's quantize_mx layout); the other partitions are not used.
** A tile of 32 partitions uses the dense form (4 rows). */
#include "kernel.h"

#include <math.h>

/* {=== Lanes ===} */

/* fp4 e2m1: sign, 2 exponent bits (bias 1), 1 mantissa bit; no inf, no NaN. */
static const float fp4_values[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
/* Midpoints between consecutive magnitudes: a tie goes to the even code. */
static const float fp4_mid[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};

static uint32_t fp4_code(float v)
{
    uint32_t u, sign, code = 0;
    float a = fabsf(v);
    memcpy(&u, &v, sizeof u);
    sign = (u >> 31) << 3;
    if (isnan(v))
        return sign;                                  /* NaN -> signed zero */
    for (uint32_t i = 0; i < 7; i++)                  /* inf passes every midpoint: 6 */
        code += a > fp4_mid[i] || (a == fp4_mid[i] && ((i + 1) & 1u) == 0);
    return sign | code;
}

static int lane_bits(int32_t dt)
{
    return dt == BS_DT_float4_e2m1fn_x4 ? 4 : 8;
}

/* The scalar fp8 dtype of an fp8 x4 lane. */
static int32_t lane_fp8(int32_t dt)
{
    return dt == BS_DT_float8_e4m3fn_x4 ? BS_DT_float8_e4m3fn : BS_DT_float8e5;
}

float bs_x4_lane_f32(uint32_t bits, int32_t dt, int q)
{
    if (dt == BS_DT_float4_e2m1fn_x4) {
        uint32_t c = (bits >> (4 * q)) & 0xfu;
        float m = fp4_values[c & 7u];
        return (c & 8u) ? -m : m;
    } else {
        uint8_t b = (uint8_t)(bits >> (8 * q));
        return bs_dt_load_f32(&b, lane_fp8(dt));
    }
}

uint32_t bs_x4_lane_code(float v, int32_t dt)
{
    uint8_t b;
    if (dt == BS_DT_float4_e2m1fn_x4)
        return fp4_code(v);
    bs_dt_store_f32(&b, lane_fp8(dt), v);              /* RNE, saturating */
    return b;
}

/* Largest exponent of the lane format: floor(log2(max finite)). */
static int lane_emax(int32_t dt)
{
    return dt == BS_DT_float4_e2m1fn_x4 ? 2 : dt == BS_DT_float8_e4m3fn_x4 ? 8 : 15;
}

/* }=== */

/* {=== Raw element access ===} */

static uint32_t rd_container(const uint8_t *p, int32_t dt)
{
    if (bs_dtinfo_table[dt].size == 2) {
        uint16_t v;
        memcpy(&v, p, 2);
        return v;
    } else {
        uint32_t v;
        memcpy(&v, p, 4);
        return v;
    }
}

static void wr_container(uint8_t *p, int32_t dt, uint32_t v)
{
    if (bs_dtinfo_table[dt].size == 2) {
        uint16_t h = (uint16_t)v;
        memcpy(p, &h, 2);
    } else {
        memcpy(p, &v, 4);
    }
}

static int is_x4(int32_t dt)
{
    return bs_dtinfo_table[dt].kind == BS_DK_P;
}

static int is_scale_dtype(int32_t dt)
{
    return dt == BS_DT_uint8 || dt == BS_DT_float8_e8m0fnu;
}

/* }=== */

/* {=== Scale layouts ===} */

typedef struct mx_scales {
    int     quadrant;    /* 0 dense, 1 quadrant layout */
    int64_t F;           /* containers (scale columns) per data partition */
} mx_scales;

/* Position (in the scale view's element order) of group row g, column c. */
static int64_t scale_pos(const mx_scales *s, int64_t g, int64_t c)
{
    int64_t row = s->quadrant ? 32 * (g / 4) + g % 4 : g;
    return row * s->F + c;
}

/* Which layout the scale view sv has for a data tile of P partitions x F containers. */
static bs_status mx_scales_of(const bs_view *sv, int64_t P, int64_t F, const char *op,
                              const char *what, mx_scales *s, bs_error *err)
{
    if (sv->ndim == 0)
        return bs_errorf(err, BS_E_SIM, "%s needs an access pattern for %s", op, what);
    if (!is_scale_dtype(sv->dtype))
        return bs_errorf(err, BS_E_UNSUPPORTED, "%s: %s is %s; scales must be uint8 or "
                         "float8_e8m0fnu", op, what, bs_dtinfo_table[sv->dtype].name);
    s->F = F;
    if (sv->count == (P / 8) * F) {
        s->quadrant = 0;
        return BS_OK;
    }
    if (P > 32 && sv->num[0] == P && sv->count == P * F) {
        s->quadrant = 1;
        return BS_OK;
    }
    if (P == 32)
        return bs_errorf(err, BS_E_SIM, "%s: %s has %lld elements over %lld partitions; a "
                         "data tile of 32 partitions x %lld containers needs %lld scales in "
                         "group order (8 partitions each)", op, what, (long long)sv->count,
                         (long long)sv->num[0], (long long)F, (long long)(4 * F));
    return bs_errorf(err, BS_E_SIM, "%s: %s has %lld elements over %lld partitions; a data "
                     "tile of %lld partitions x %lld containers needs %lld scales in group "
                     "order (8 partitions each) or, in the quadrant layout, %lld partitions x "
                     "%lld", op, what, (long long)sv->count, (long long)sv->num[0],
                     (long long)P, (long long)F, (long long)((P / 8) * F), (long long)P,
                     (long long)F);
}

/* }=== */

/* {=== QuantizeMx ===} */

/* QuantizeMx: in[0] [P, 4F] bf16/fp16 -> out[0] [P, F] x4 codes, out[1] E8M0 scales.
** P is a multiple of 32 (at most 128). Per group (8 partitions x 4 consecutive elements):
** amax = max |v|; the scale byte is E = floor(log2 amax) + 127 - (Emax - 1) clamped to
** [0, 254] (Emax = 8 e4m3fn, 15 e5m2, 2 e2m1; docs/spec/nki-isa-semantics.md §3.30: twice the OCP
** scale), 0 for an all-zero group; each value is v * 2^(127-E) (exact unless it is
** subnormal in fp32) narrowed with RNE and saturation. A group holding an inf or NaN gets
** E = 255 (the E8M0 NaN) and NaN codes, sign kept (fp4: signed zeros). E_SIM on shapes,
** E_UNSUPPORTED on dtypes, E_NOMEM. */
bs_status bs_k_QuantizeMx(bs_kctx *k, bs_error *err)
{
    const bs_view *in = &k->in[0], *out = &k->out[0], *sv = &k->out[1];
    int64_t P, F4, F, G;
    int32_t dt, csz;
    mx_scales sc;
    float *X;
    uint8_t *codes, *scales;
    bs_view d;
    if (k->nin < 1 || k->nout < 2 || in->ndim == 0 || out->ndim == 0)
        return bs_errorf(err, BS_E_SIM, "QuantizeMx needs access patterns in[0] (data), "
                         "out[0] (x4 codes) and out[1] (scales)");
    if (in->dtype != BS_DT_bfloat16 && in->dtype != BS_DT_float16)
        return bs_errorf(err, BS_E_UNSUPPORTED, "QuantizeMx: in[0] is %s; it must be bfloat16 "
                         "or float16", bs_dtinfo_table[in->dtype].name);
    dt = out->dtype;
    if (!is_x4(dt))
        return bs_errorf(err, BS_E_UNSUPPORTED, "QuantizeMx: out[0] is %s; it must be "
                         "float8_e4m3fn_x4, float8_e5m2_x4 or float4_e2m1fn_x4",
                         bs_dtinfo_table[dt].name);
    P = in->num[0];
    F = in->count / P;
    if (P % 32 != 0 || F % 4 != 0)
        return bs_errorf(err, BS_E_SIM, "QuantizeMx: in[0] is %lld partitions x %lld; it must "
                         "be a multiple of 32 partitions x a multiple of 4 elements",
                         (long long)P, (long long)F);
    F4 = F / 4;
    G = P / 8;
    if (out->num[0] != P || out->count != P * F4)
        return bs_errorf(err, BS_E_SIM, "QuantizeMx: out[0] is %lld partitions x %lld; it must "
                         "be %lld x %lld (four values per container)", (long long)out->num[0],
                         (long long)(out->count / out->num[0]), (long long)P, (long long)F4);
    BS_TRY(mx_scales_of(sv, P, F4, "QuantizeMx", "out[1] (scales)", &sc, err));
    csz = bs_dtinfo_table[dt].size;
    X = bs_kstate_tmp(k->ks, BS_KSLOT_A, (size_t)(P * F) * sizeof(float));
    codes = bs_kstate_tmp(k->ks, BS_KSLOT_B, (size_t)(P * F4 * csz));
    scales = bs_kstate_tmp(k->ks, BS_KSLOT_C, (size_t)sv->count);
    if (X == NULL || codes == NULL || scales == NULL)
        return bs_errorf(err, BS_E_NOMEM, "QuantizeMx: out of memory");
    bs_view_to_f32(X, in);
    d = bs_view_dense(scales, sv->dtype, sv->count);
    bs_copy_raw(&d, sv);                   /* the quadrant layout keeps the unused bytes */
    for (int64_t g = 0; g < G; g++)
        for (int64_t c = 0; c < F4; c++) {
            float amax = 0.0f;
            int special = 0, E = 0;
            for (int64_t r = 8 * g; r < 8 * g + 8; r++)
                for (int64_t q = 0; q < 4; q++) {
                    float a = fabsf(X[r * F + 4 * c + q]);
                    special |= !isfinite(a);
                    amax = a > amax ? a : amax;
                }
            if (special) {
                E = 255;
            } else if (amax > 0.0f) {
                int ex;
                (void)frexpf(amax, &ex);          /* amax = m 2^ex, m in [0.5, 1) */
                E = ex - 1 + 127 - (lane_emax(dt) - 1);
                E = E < 0 ? 0 : E > 254 ? 254 : E;
            }
            scales[scale_pos(&sc, g, c)] = (uint8_t)E;
            for (int64_t r = 8 * g; r < 8 * g + 8; r++) {
                uint32_t bits = 0;
                for (int q = 0; q < 4; q++) {
                    float v = X[r * F + 4 * c + q];
                    float y = special ? copysignf(NAN, v) : ldexpf(v, 127 - E);
                    bits |= bs_x4_lane_code(y, dt) << (lane_bits(dt) * q);
                }
                wr_container(codes + (r * F4 + c) * csz, dt, bits);
            }
        }
    d = bs_view_dense(codes, dt, P * F4);
    bs_copy_raw(out, &d);
    d = bs_view_dense(scales, sv->dtype, sv->count);
    bs_copy_raw(sv, &d);
    return BS_OK;
}

/* }=== */

/* {=== MatmultMx ===} */

/* Dequantize data view dv ([P, F] x4) with scales sv into X: (4P) x F fp32, row 4p + q =
** lane q of partition p, times 2^(s-127) of its group (s = 255: NaN). raw is scratch. */
static bs_status dequant(float *X, const bs_view *dv, const bs_view *sv, int64_t P, int64_t F,
                         const char *what, bs_kstate *ks, bs_error *err)
{
    int32_t dt = dv->dtype, csz = bs_dtinfo_table[dt].size;
    mx_scales sc;
    uint8_t *raw;
    bs_view d;
    BS_TRY(mx_scales_of(sv, P, F, "MatmultMx", what, &sc, err));
    raw = bs_kstate_tmp(ks, BS_KSLOT_D, (size_t)(P * F * csz + sv->count));
    if (raw == NULL)
        return bs_errorf(err, BS_E_NOMEM, "MatmultMx: out of memory");
    d = bs_view_dense(raw, dt, P * F);
    bs_copy_raw(&d, dv);
    d = bs_view_dense(raw + P * F * csz, sv->dtype, sv->count);
    bs_copy_raw(&d, sv);
    /* lane codes through a table; 2^(s-127) is exact for every s < 255 (2^-127 is a
    ** subnormal), so v * 2^(s-127) is ldexpf(v, s - 127): one correctly rounded result */
    int lb = lane_bits(dt);
    uint32_t lmask = (1u << lb) - 1u;
    float lut[256], sf[256];
    for (uint32_t c = 0; c <= lmask; c++)
        lut[c] = bs_x4_lane_f32(c, dt, 0);
    for (int e = 0; e < 255; e++)
        sf[e] = ldexpf(1.0f, e - 127);
    sf[255] = NAN;
    for (int64_t p = 0; p < P; p++) {
        float *x0 = X + 4 * p * F;
        for (int64_t c = 0; c < F; c++) {
            uint32_t bits = rd_container(raw + (p * F + c) * csz, dt);
            int s = raw[P * F * csz + scale_pos(&sc, p / 8, c)];
            float f = sf[s];
            for (int q = 0; q < 4; q++)                 /* s = 255: NaN whatever v is */
                x0[q * F + c] = s == 255 ? NAN : lut[(bits >> (lb * q)) & lmask] * f;
        }
    }
    return BS_OK;
}

/* MatmultMx: out[0][m][n] (+)= sum over k = 4p + q of st[k][m] * mv[k][n], where mv =
** dequantized in[0] ([P, N] x4, scales in[2]) and st = dequantized in[1] ([P, M] x4,
** scales in[3]); P in {32, 64, 128}. The sum runs k = 0, 1, ... in fp32 from +0, one
** rounding per product and per addition (the order of nc_matmul_mx's golden einsum over
** (partition, lane)). Write-back by acc_flags (bs_matmul_write). */
bs_status bs_k_MatmultMx(bs_kctx *k, bs_error *err)
{
    const bs_view *mv = &k->in[0], *st = &k->in[1], *out = &k->out[0];
    int64_t P, M, N, K;
    float *A, *B, *R;
    if (k->nin < 4 || k->nout < 1 || mv->ndim == 0 || st->ndim == 0 || out->ndim == 0)
        return bs_errorf(err, BS_E_SIM, "MatmultMx needs access patterns in[0] (moving data), "
                         "in[1] (stationary data), in[2] (moving scales), in[3] (stationary "
                         "scales) and out[0]");
    for (int32_t i = 0; i < 2; i++)
        if (!is_x4(k->in[i].dtype))
            return bs_errorf(err, BS_E_UNSUPPORTED, "MatmultMx: in[%d] is %s; data must be "
                             "float8_e4m3fn_x4, float8_e5m2_x4 or float4_e2m1fn_x4", (int)i,
                             bs_dtinfo_table[k->in[i].dtype].name);
    if (!bs_dt_numeric(out->dtype))
        return bs_errorf(err, BS_E_UNSUPPORTED, "MatmultMx cannot write %s",
                         bs_dtinfo_table[out->dtype].name);
    P = mv->num[0];
    N = mv->count / P;
    M = st->count / st->num[0];
    if ((P != 32 && P != 64 && P != 128) || st->num[0] != P)
        return bs_errorf(err, BS_E_SIM, "MatmultMx: in[0] has %lld partitions and in[1] %lld; "
                         "both must have the same 32, 64 or 128", (long long)P,
                         (long long)st->num[0]);
    if (out->num[0] != M || out->count != M * N)
        return bs_errorf(err, BS_E_SIM, "MatmultMx shapes do not match: moving in[0] is [%lld, "
                         "%lld], stationary in[1] is [%lld, %lld], out[0] is [%lld, %lld]; "
                         "need [P, N], [P, M] and [M, N]", (long long)P, (long long)N,
                         (long long)P, (long long)M, (long long)out->num[0],
                         (long long)(out->count / out->num[0]));
    if ((BS_PI(k->insn, MatmultMx, acc_flags) & 3) != 0 && out->memtype != BS_MEM_PSUM)
        return bs_errorf(err, BS_E_SIM, "MatmultMx start/accumulate needs a PSUM destination");
    K = 4 * P;
    A = bs_kstate_tmp(k->ks, BS_KSLOT_A, (size_t)(K * N) * sizeof(float));
    B = bs_kstate_tmp(k->ks, BS_KSLOT_B, (size_t)(K * M) * sizeof(float));
    R = bs_kstate_tmp(k->ks, BS_KSLOT_C, (size_t)(M * N) * sizeof(float));
    if (A == NULL || B == NULL || R == NULL)
        return bs_errorf(err, BS_E_NOMEM, "MatmultMx: out of memory");
    BS_TRY(dequant(A, mv, &k->in[2], P, N, "in[2] (moving scales)", k->ks, err));
    BS_TRY(dequant(B, st, &k->in[3], P, M, "in[3] (stationary scales)", k->ks, err));
    /* the sums in k order from +0 (Matmult's tiles; the raw scratch is free again) */
    BS_TRY(bs_matmul_f32(k, BS_KSLOT_D, R, A, B, K, M, N, "MatmultMx", err));
    return bs_matmul_write(k, BS_PI(k->insn, MatmultMx, acc_flags), R, "MatmultMx", err);
}

/* }=== */
