/* tests/c/test_dtype.c -- unit tests for kernels/k_dtype.c (casts) and the value paths of
** kernels/stream.c. Plain main(); prints "N passed, M failed" and exits non-zero on failure.
**
** Build and run from the repository root:
**   gcc -std=c11 -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all \
**       -ffp-contract=off -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
**       -Icsrc tests/c/test_dtype.c csrc/kernels/k_dtype.c csrc/kernels/stream.c \
**       csrc/mem/mem.c csrc/core/alloc.c csrc/core/error.c csrc/core/tables.c -lm \
**       -o /tmp/test_dtype && /tmp/test_dtype
*/
#include <math.h>
#include <stdio.h>
#include "kernels/kernel.h"
#define BS_TEST_GLOBAL_CHECKS
#include "testutil.h"

static float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

/* Encode v to dtype dt and return the stored bits (little-endian container). */
static uint64_t enc(int32_t dt, float v)
{
    uint8_t b[8] = {0};
    uint64_t r = 0;
    bs_dt_store_f32(b, dt, v);
    memcpy(&r, b, (size_t)bs_dtinfo_table[dt].size);
    return r;
}

static float dec(int32_t dt, uint64_t bits)
{
    uint8_t b[8];
    memcpy(b, &bits, 8);
    return bs_dt_load_f32(b, dt);
}

static int same_bits(float a, float b) { return f2u(a) == f2u(b); }

/* {=== bf16 / fp16 / float32r ===} */

static void test_bf16(void)
{
    int32_t dt = BS_DT_bfloat16;
    CHECK(enc(dt, 1.0f) == 0x3f80);
    CHECK(enc(dt, u2f(0x3f808000)) == 0x3f80);            /* tie, even stays */
    CHECK(enc(dt, u2f(0x3f818000)) == 0x3f82);            /* tie, odd rounds up */
    CHECK(enc(dt, u2f(0x3f808001)) == 0x3f81);            /* just above half */
    CHECK(enc(dt, u2f(0x3f807fff)) == 0x3f80);            /* just below half */
    CHECK(enc(dt, u2f(0x7f7fffff)) == 0x7f80);            /* overflow -> inf */
    CHECK(enc(dt, u2f(0x7f7f7fff)) == 0x7f7f);            /* largest that stays finite */
    CHECK(enc(dt, -INFINITY) == 0xff80);
    CHECK(enc(dt, NAN) == 0x7fc0);
    CHECK(enc(dt, -NAN) == 0xffc0);
    CHECK(enc(dt, u2f(0x7f800001)) == 0x7fc0);            /* signalling NaN stays NaN */
    CHECK(enc(dt, u2f(0x00018000)) == 0x0002);            /* subnormal tie, odd -> up */
    CHECK(same_bits(dec(dt, 0x0001), u2f(0x00010000)));   /* subnormal decode */
    CHECK(same_bits(dec(dt, 0x8000), -0.0f));
    CHECK(isnan(dec(dt, 0x7fc1)));
}

static void test_fp16(void)
{
    int32_t dt = BS_DT_float16;
    CHECK(enc(dt, 1.0f) == 0x3c00);
    CHECK(enc(dt, 1.0f + 0x1p-11f) == 0x3c00);            /* tie to even */
    CHECK(enc(dt, 1.0f + 3 * 0x1p-11f) == 0x3c02);
    CHECK(enc(dt, 65504.0f) == 0x7bff);
    CHECK(enc(dt, 65519.0f) == 0x7bff);                   /* below the tie */
    CHECK(enc(dt, 65520.0f) == 0x7c00);                   /* tie rounds to even = inf */
    CHECK(enc(dt, -1e9f) == 0xfc00);
    CHECK(enc(dt, INFINITY) == 0x7c00);
    CHECK(enc(dt, NAN) == 0x7e00);
    CHECK(enc(dt, 0x1p-24f) == 0x0001);                   /* min subnormal */
    CHECK(enc(dt, 0x1p-25f) == 0x0000);                   /* tie between 0 and min: even */
    CHECK(enc(dt, 0x1.8p-25f) == 0x0001);
    CHECK(enc(dt, 0x1.8p-24f) == 0x0002);                 /* 1.5 ulp: tie -> even 2 */
    CHECK(enc(dt, -0x1p-26f) == 0x8000);
    CHECK(enc(dt, 0x1.ffcp-15f) == 0x0400);               /* rounds up into min normal */
    CHECK(enc(dt, u2f(0x00000001)) == 0x0000);            /* fp32 denormal */
    CHECK(same_bits(dec(dt, 0x0001), 0x1p-24f));
    CHECK(same_bits(dec(dt, 0x03ff), 0x1.ff8p-15f));
    CHECK(same_bits(dec(dt, 0x8001), -0x1p-24f));
    CHECK(same_bits(dec(dt, 0x7c00), INFINITY));
    CHECK(isnan(dec(dt, 0x7c01)));
    for (uint32_t x = 0; x < 0x10000; x++) {              /* every pattern round trips */
        float f = dec(dt, x);
        if (!isnan(f) && enc(dt, f) != x) {
            CHECK(!"fp16 round trip");
            break;
        }
    }
}

static void test_f32r(void)
{
    int32_t dt = BS_DT_float32r;
    CHECK(enc(dt, 1.0f) == 0x3f800000);
    CHECK(enc(dt, u2f(0x3f800fff)) == 0x3f800000);
    CHECK(enc(dt, u2f(0x3f801000)) == 0x3f800000);        /* tie, even */
    CHECK(enc(dt, u2f(0x3f803000)) == 0x3f804000);        /* tie, odd -> up */
    CHECK(enc(dt, u2f(0x3f801001)) == 0x3f802000);
    CHECK(enc(dt, u2f(0x7f7fffff)) == 0x7f800000);        /* overflow -> inf */
    CHECK(enc(dt, u2f(0x7f7fefff)) == 0x7f7fe000);
    CHECK(isnan(dec(dt, enc(dt, NAN))));
    CHECK(enc(dt, -INFINITY) == 0xff800000);
    CHECK(same_bits(dec(dt, 0x3f801234), u2f(0x3f801234)));   /* read is plain fp32 */
}
/* }=== */

/* {=== fp8 ===} */

typedef struct fp8case {
    int32_t dt;
    float   max;        /* largest finite */
    uint8_t maxc;       /* its code */
    uint8_t nanc;       /* canonical NaN */
    float   minsub;     /* smallest subnormal */
    float   one_ulp;    /* ulp at 1.0 */
    int     has_inf;
} fp8case;

static const fp8case fp8cases[] = {
    { BS_DT_float8e3,       15.5f,   0x6f, 0x78, 0x1p-6f,  0x1p-4f, 1 },
    { BS_DT_float8e4,       240.0f,  0x77, 0x7c, 0x1p-9f,  0x1p-3f, 1 },
    { BS_DT_float8_e4m3fn,  448.0f,  0x7e, 0x7f, 0x1p-9f,  0x1p-3f, 0 },
    { BS_DT_float8e5,       57344.0f,0x7b, 0x7e, 0x1p-16f, 0x1p-2f, 1 },
};

static void test_fp8_edges(void)
{
    for (size_t i = 0; i < BS_ARRAY_LEN(fp8cases); i++) {
        const fp8case *c = &fp8cases[i];
        uint64_t one = enc(c->dt, 1.0f);
        CHECK(dec(c->dt, one) == 1.0f);
        CHECK(enc(c->dt, 1.0f + c->one_ulp / 2) == one);          /* tie, even */
        CHECK(enc(c->dt, 1.0f + 3 * c->one_ulp / 2) == one + 2);  /* tie, odd -> up */
        CHECK(enc(c->dt, 1.0f + c->one_ulp / 2 + c->one_ulp / 64) == one + 1);
        CHECK(enc(c->dt, c->max) == c->maxc);
        CHECK(enc(c->dt, -c->max) == (uint64_t)(c->maxc | 0x80));
        CHECK(enc(c->dt, c->max * 1.001f) == c->maxc);           /* just above: saturate */
        CHECK(enc(c->dt, c->max * 1.5f) == c->maxc);
        CHECK(enc(c->dt, 1e30f) == c->maxc);
        CHECK(enc(c->dt, INFINITY) == c->maxc);                  /* inf saturates too */
        CHECK(enc(c->dt, -INFINITY) == (uint64_t)(c->maxc | 0x80));
        CHECK(enc(c->dt, NAN) == c->nanc);
        CHECK(enc(c->dt, -NAN) == (uint64_t)(c->nanc | 0x80));
        CHECK(dec(c->dt, c->maxc) == c->max);
        CHECK(isnan(dec(c->dt, c->nanc)));
        CHECK(enc(c->dt, c->minsub) == 1);
        CHECK(enc(c->dt, c->minsub / 2) == 0);                   /* tie with 0: even */
        CHECK(enc(c->dt, c->minsub * 0.5001f) == 1);
        CHECK(enc(c->dt, c->minsub * 1.5f) == 2);                /* tie, odd -> up */
        CHECK(enc(c->dt, c->minsub * 2.5f) == 2);                /* tie, even stays */
        CHECK(enc(c->dt, -c->minsub) == 0x81);
        CHECK(dec(c->dt, 1) == c->minsub);
        CHECK(same_bits(dec(c->dt, 0x80), -0.0f));
        if (c->has_inf)
            CHECK(isinf(dec(c->dt, c->maxc + 1u)));
        else
            CHECK(!isnan(dec(c->dt, 0x7e)) && isnan(dec(c->dt, 0xff)));
    }
}

/* Every byte pattern of each 8-bit format decodes and re-encodes to itself, except
** NaNs (-> canonical NaN of the same sign) and infinities (-> ±max). */
static void test_fp8_roundtrip(void)
{
    for (size_t i = 0; i < BS_ARRAY_LEN(fp8cases); i++) {
        const fp8case *c = &fp8cases[i];
        int bad = 0;
        for (uint32_t x = 0; x < 256; x++) {
            float f = dec(c->dt, x);
            uint64_t want = isnan(f) ? (uint64_t)(c->nanc | (x & 0x80))
                          : isinf(f) ? (uint64_t)(c->maxc | (x & 0x80)) : x;
            bad += enc(c->dt, f) != want;
        }
        CHECK(bad == 0);
    }
    for (uint32_t x = 0; x < 256; x++) {                  /* e8m0fnu: the raw byte value */
        CHECK(dec(BS_DT_float8_e8m0fnu, x) == (float)x);
        CHECK(enc(BS_DT_float8_e8m0fnu, (float)x) == x);
    }
}
/* }=== */

/* {=== Integers and raw dtypes ===} */

static void test_int_encode(void)
{
    CHECK(enc(BS_DT_uint8, 254.5f) == 254);               /* RNE ties */
    CHECK(enc(BS_DT_uint8, 253.5f) == 254);
    CHECK(enc(BS_DT_uint8, 255.5f) == 255);               /* saturate */
    CHECK(enc(BS_DT_uint8, 256.0f) == 255);
    CHECK(enc(BS_DT_uint8, -0.5f) == 0);
    CHECK(enc(BS_DT_uint8, -1.0f) == 0);
    CHECK(enc(BS_DT_uint8, NAN) == 255);
    CHECK(enc(BS_DT_uint8, -NAN) == 255);                 /* unsigned: NaN -> max */
    CHECK(enc(BS_DT_uint8, -INFINITY) == 0);
    CHECK(enc(BS_DT_int8, 2.5f) == 2);
    CHECK(enc(BS_DT_int8, -2.5f) == 0xfe);
    CHECK(enc(BS_DT_int8, -3.5f) == 0xfc);
    CHECK(enc(BS_DT_int8, 127.4f) == 127);
    CHECK(enc(BS_DT_int8, 127.5f) == 127);
    CHECK(enc(BS_DT_int8, -128.6f) == 0x80);
    CHECK(enc(BS_DT_int8, NAN) == 127);                   /* signed: NaN by sign bit */
    CHECK(enc(BS_DT_int8, -NAN) == 0x80);
    CHECK(enc(BS_DT_int16, 40000.0f) == 0x7fff);
    CHECK(enc(BS_DT_int16, -40000.0f) == 0x8000);
    CHECK(enc(BS_DT_uint16, 65535.4f) == 0xffff);
    CHECK(enc(BS_DT_uint16, 0.5f) == 0);
    CHECK(enc(BS_DT_uint16, 1.5f) == 2);
    CHECK(enc(BS_DT_int32, 2147483648.0f) == 0x7fffffff);
    CHECK(enc(BS_DT_int32, -2147483648.0f) == 0x80000000);
    CHECK(enc(BS_DT_int32, 2147483520.0f) == 2147483520u);
    CHECK(enc(BS_DT_int32, -1e20f) == 0x80000000);
    CHECK(enc(BS_DT_int32, -NAN) == 0x80000000);
    CHECK(enc(BS_DT_int32, INFINITY) == 0x7fffffff);
    CHECK(enc(BS_DT_int32, 0x1.8p23f) == 12582912);
    CHECK(enc(BS_DT_int32, 8388607.5f) == 8388608);       /* largest fp32 with a .5 */
    CHECK(enc(BS_DT_int32, -8388606.5f) == (uint32_t)-8388606);
    CHECK(enc(BS_DT_uint32, 4294967040.0f) == 4294967040u);
    CHECK(enc(BS_DT_uint32, 4294967296.0f) == 0xffffffffu);
    CHECK(enc(BS_DT_uint32, NAN) == 0xffffffffu);
    CHECK(enc(BS_DT_int64, 0x1p63f) == (uint64_t)INT64_MAX);
    CHECK(enc(BS_DT_int64, -0x1p63f) == (uint64_t)INT64_MIN);
    CHECK(enc(BS_DT_int64, 0x1.fffffep62f) == (uint64_t)0x7fffff8000000000ull);
    CHECK(enc(BS_DT_int64, -NAN) == (uint64_t)INT64_MIN);
    CHECK(enc(BS_DT_int64, NAN) == (uint64_t)INT64_MAX);
    CHECK(enc(BS_DT_int64, -2.5f) == (uint64_t)-2);
    CHECK(enc(BS_DT_uint64, 0x1p64f) == UINT64_MAX);
    CHECK(enc(BS_DT_uint64, 0x1.fffffep63f) == 0xffffff0000000000ull);
    CHECK(enc(BS_DT_uint64, -7.0f) == 0);
    CHECK(enc(BS_DT_uint64, 4.5f) == 4);
    CHECK(enc(BS_DT_float8_e8m0fnu, 2.5f) == 2);
    CHECK(enc(BS_DT_float8_e8m0fnu, 300.0f) == 255);
    CHECK(enc(BS_DT_float8_e8m0fnu, -3.0f) == 0);
    CHECK(enc(BS_DT_float8_e8m0fnu, NAN) == 255);
    CHECK(dec(BS_DT_int8, 0x80) == -128.0f);
    CHECK(dec(BS_DT_int16, 0x8000) == -32768.0f);
    CHECK(dec(BS_DT_int32, 0x80000000u) == -2147483648.0f);
    CHECK(dec(BS_DT_uint32, 0xffffffffu) == 4294967296.0f);
    CHECK(dec(BS_DT_int64, (uint64_t)-5) == -5.0f);
    CHECK(dec(BS_DT_uint64, UINT64_MAX) == 0x1p64f);
}

static void test_i64_forms(void)
{
    uint8_t b[8];
    memset(b, 0xff, 8);
    CHECK(bs_dt_load_i64(b, BS_DT_int8) == -1);
    CHECK(bs_dt_load_i64(b, BS_DT_uint8) == 255);
    CHECK(bs_dt_load_i64(b, BS_DT_uint16) == 65535);
    CHECK(bs_dt_load_i64(b, BS_DT_int32) == -1);
    CHECK(bs_dt_load_i64(b, BS_DT_uint32) == 0xffffffffll);
    CHECK(bs_dt_load_i64(b, BS_DT_int64) == -1);
    CHECK(bs_dt_load_i64(b, BS_DT_float8_e8m0fnu) == 255);
    CHECK(bs_dt_load_i64(b, BS_DT_float8_e4m3fn_x4) == 0xffffffffll);
    CHECK(bs_dt_load_i64(b, BS_DT_float32) == INT64_MIN);      /* -NaN */
    bs_dt_store_f32(b, BS_DT_float32, 2.5f);
    CHECK(bs_dt_load_i64(b, BS_DT_float32) == 2);
    bs_dt_store_f32(b, BS_DT_float32, -3.5f);
    CHECK(bs_dt_load_i64(b, BS_DT_float32) == -4);
    bs_dt_store_f32(b, BS_DT_float32, 1e30f);
    CHECK(bs_dt_load_i64(b, BS_DT_float32) == INT64_MAX);
    bs_dt_store_f32(b, BS_DT_bfloat16, 5.5f);
    CHECK(bs_dt_load_i64(b, BS_DT_bfloat16) == 6);
    memset(b, 0, 8);
    bs_dt_store_i64(b, BS_DT_int8, 0x1ff);                     /* saturates */
    CHECK(b[0] == 0x7f && b[1] == 0);
    bs_dt_store_i64(b, BS_DT_int8, -1000);
    CHECK(b[0] == 0x80);
    bs_dt_store_i64(b, BS_DT_int32, -2);
    CHECK(bs_dt_load_i64(b, BS_DT_int32) == -2);
    bs_dt_store_i64(b, BS_DT_uint16, 0x12345);
    CHECK(bs_dt_load_i64(b, BS_DT_uint16) == 0xffff);
    bs_dt_store_i64(b, BS_DT_uint32, -1);                      /* 32-bit: bits of int32 */
    CHECK(bs_dt_load_i64(b, BS_DT_uint32) == 0xffffffffll);
    bs_dt_store_i64(b, BS_DT_uint32, 0x1ffffffffll);           /* beyond 32 bits: saturates */
    CHECK(bs_dt_load_i64(b, BS_DT_uint32) == 0xffffffffll);
    bs_dt_store_i64(b, BS_DT_int32, INT64_MIN);
    CHECK(bs_dt_load_i64(b, BS_DT_int32) == INT32_MIN);
    bs_dt_store_i64(b, BS_DT_bfloat16, 3);
    CHECK(b[0] == 0x40 && b[1] == 0x40);
    bs_dt_store_i64(b, BS_DT_float8_e4m3fn, 1000);             /* via fp32: saturates */
    CHECK(b[0] == 0x7e);
    bs_dt_store_i64(b, BS_DT_int64, INT64_MIN);
    CHECK(bs_dt_load_i64(b, BS_DT_int64) == INT64_MIN);
    for (int32_t dt = 0; dt < BS_DT__COUNT; dt++)
        CHECK(bs_dt_numeric(dt) == (dt != BS_DT_float4_e2m1fn_x4 && dt != BS_DT_float8_e4m3fn_x4
                                    && dt != BS_DT_float8_e5m2_x4));
    CHECK(!bs_dt_numeric(-1) && !bs_dt_numeric(BS_DT__COUNT));
}
/* }=== */

/* {=== Row forms and whole views ===} */

static const float row_vals[] = {
    0.0f, -0.0f, 1.0f, -1.5f, 2.5f, 3.5f, 0.1f, 255.5f, -128.5f, 1e-7f, -3e-5f, 65519.0f,
    1e6f, -1e9f, 448.0f, 464.0f, 57344.0f, 0x1p-24f, 1.0f + 0x1p-8f, INFINITY, -INFINITY, NAN,
    -NAN, 7.0f, 1e30f, 0.33333f, 2147483520.0f, 0x1p-140f,
};

/* Row forms equal the scalar forms for every dtype, dense and strided (incl. negative). */
static void test_rows(void)
{
    enum { N = BS_ARRAY_LEN(row_vals) };
    for (int32_t dt = 0; dt < BS_DT__COUNT; dt++) {
        int64_t sz = bs_dtinfo_table[dt].size;
        int64_t strides[3] = { sz, 3 * sz, -2 * sz };
        for (int k = 0; k < 3; k++) {
            uint8_t row[N * 24], one[N * 24];
            float back[N];
            int64_t st = strides[k];
            uint8_t *base = row + (st < 0 ? (N - 1) * -st : 0);
            uint8_t *base1 = one + (st < 0 ? (N - 1) * -st : 0);
            memset(row, 0xa5, sizeof row);
            memset(one, 0xa5, sizeof one);
            bs_dt_store_row_f32(base, st, row_vals, N, dt);
            for (int i = 0; i < N; i++)
                bs_dt_store_f32(base1 + i * st, dt, row_vals[i]);
            CHECK(memcmp(row, one, sizeof row) == 0);
            bs_dt_load_row_f32(back, base, st, N, dt);
            int bad = 0;
            for (int i = 0; i < N; i++)
                bad += !same_bits(back[i], bs_dt_load_f32(base + i * st, dt));
            CHECK(bad == 0);
        }
    }
}


/* Cursor reads and writes convert; dense fp32 rows go through direct pointers. */
static void test_cursor_values(void)
{
    uint16_t bf[12];
    float f32[12], buf[BS_CHUNK], got[12];
    int64_t num[2] = {3, 4}, sbf[2] = {8, 2}, sf[2] = {16, 4};
    for (int i = 0; i < 12; i++) {
        f32[i] = (float)i + 0.5f + 0x1p-9f;
        bf[i] = 0;
    }
    bs_view vf = mkview_bytes(f32, BS_DT_float32, 2, num, sf);
    bs_view vb = mkview_bytes(bf, BS_DT_bfloat16, 2, num, sbf);
    bs_cursor a, o;
    bs_cur_init(&a, &vf);
    bs_cur_init(&o, &vb);
    while (a.left > 0) {
        int64_t n = bs_chunk2(&a, &o);
        const uint8_t *expect = a.ptr;
        const float *x = bs_cur_read_f32(&a, n, buf);
        CHECK((const void *)x == (const void *)expect);       /* direct */
        float *y = bs_cur_write_begin(&o, n, got);
        CHECK(y == got);                                      /* bf16: buffered */
        for (int64_t j = 0; j < n; j++)
            y[j] = x[j] * 2.0f;
        bs_cur_write_end(&o, n, y);
    }
    CHECK(o.left == 0 && o.pos == 12);
    int bad = 0;
    for (int i = 0; i < 12; i++) {
        uint8_t want[2];
        bs_dt_store_f32(want, BS_DT_bfloat16, f32[i] * 2.0f);
        bad += memcmp(want, &bf[i], 2) != 0;
    }
    CHECK(bad == 0);
    /* In-place fp32 writes through the direct pointer; float32r must round via buf. */
    bs_cur_init(&o, &vf);
    float *y = bs_cur_write_begin(&o, 4, buf);
    CHECK((void *)y == (void *)f32);
    y[0] = -1.0f;
    bs_cur_write_end(&o, 4, y);
    CHECK(f32[0] == -1.0f && f32[1] == 1.5f + 0x1p-9f && o.idx[0] == 1);
    bs_view vr = vf;
    vr.dtype = BS_DT_float32r;
    bs_cur_init(&o, &vr);
    y = bs_cur_write_begin(&o, 4, buf);
    CHECK(y == buf);
    for (int j = 0; j < 4; j++)
        y[j] = 1.0f + 0x1p-11f + 0x1p-20f;
    bs_cur_write_end(&o, 4, y);
    CHECK(f32[0] == 1.0f + 0x1p-10f && f32[3] == 1.0f + 0x1p-10f && f32[4] == 4.5f + 0x1p-9f);
    /* i64 forms */
    int32_t iv[4] = {1, -2, 3, -4};
    int64_t in1[1] = {4}, is1[1] = {4}, tmp[4];
    bs_view vi = mkview_bytes(iv, BS_DT_int32, 1, in1, is1);
    bs_cur_init(&a, &vi);
    bs_cur_read_i64(&a, 4, tmp);
    CHECK(tmp[1] == -2 && tmp[3] == -4 && a.left == 0);
    tmp[0] = 7;
    bs_cur_init(&o, &vi);
    bs_cur_write_i64(&o, 4, tmp);
    CHECK(iv[0] == 7 && iv[1] == -2);
}

static void test_view_f32(void)
{
    int16_t s[2][5];
    float src[6] = {1.4f, -2.6f, 40000.0f, NAN, -0.5f, 7.5f}, back[6];
    int64_t num[2] = {2, 3}, st[2] = {10, 4};                 /* every other int16 */
    memset(s, 0x55, sizeof s);
    bs_view v = mkview_bytes(s, BS_DT_int16, 2, num, st);
    bs_view_from_f32(&v, src);
    CHECK(s[0][0] == 1 && s[0][2] == -3 && s[0][4] == 32767);
    CHECK(s[1][0] == 32767 && s[1][2] == 0 && s[1][4] == 8);
    CHECK(s[0][1] == 0x5555 && s[1][3] == 0x5555);            /* gaps untouched */
    bs_view_to_f32(back, &v);
    CHECK(back[0] == 1.0f && back[1] == -3.0f && back[3] == 32767.0f && back[5] == 8.0f);
}
/* }=== */

int main(void)
{
    static const test tests[] = {
        {"bf16", test_bf16}, {"fp16", test_fp16}, {"float32r", test_f32r},
        {"fp8_edges", test_fp8_edges}, {"fp8_roundtrip", test_fp8_roundtrip},
        {"int_encode", test_int_encode}, {"i64_forms", test_i64_forms}, {"rows", test_rows},
        {"cursor_values", test_cursor_values}, {"view_f32", test_view_f32},
    };
    return run_tests(tests, BS_ARRAY_LEN(tests));
}
