/* tests/c/test_mx.c -- unit tests for the packed x4 lanes of kernels/k_mx.c: the fp4 e2m1
** codec (every code decodes to its value, RNE with ties to the even code, saturation at 6,
** NaN -> signed zero) and the fp8 lanes (the scalar fp8 casts, lane q in byte q). Plain
** main(); prints "N passed, M failed" and exits non-zero on failure (make -C tests/c). */
#include <math.h>
#include <stdio.h>
#include "kernels/kernel.h"
#define BS_TEST_GLOBAL_CHECKS
#include "testutil.h"

static const float fp4_mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

static void test_fp4_decode(void)
{
    for (uint32_t c = 0; c < 16; c++) {
        float want = (c & 8u) ? -fp4_mag[c & 7u] : fp4_mag[c & 7u];
        for (int q = 0; q < 4; q++) {
            float got = bs_x4_lane_f32(c << (4 * q), BS_DT_float4_e2m1fn_x4, q);
            CHECK(got == want && signbit(got) == signbit(want));
        }
    }
}

static void test_fp4_encode(void)
{
    static const struct { float v; uint32_t code; } cases[] = {
        {0.0f, 0}, {-0.0f, 8}, {0.2f, 0}, {0.25f, 0}, {0.26f, 1}, {0.75f, 2}, {1.25f, 2},
        {1.26f, 3}, {1.75f, 4}, {2.5f, 4}, {2.6f, 5}, {3.5f, 6}, {5.0f, 6}, {5.1f, 7},
        {6.0f, 7}, {7.0f, 7}, {1e30f, 7}, {-100.0f, 15}, {-2.75f, 13}, {1e-30f, 0},
    };
    for (size_t i = 0; i < BS_ARRAY_LEN(cases); i++)
        CHECK(bs_x4_lane_code(cases[i].v, BS_DT_float4_e2m1fn_x4) == cases[i].code);
    CHECK(bs_x4_lane_code(INFINITY, BS_DT_float4_e2m1fn_x4) == 7);
    CHECK(bs_x4_lane_code(-INFINITY, BS_DT_float4_e2m1fn_x4) == 15);
    CHECK(bs_x4_lane_code(NAN, BS_DT_float4_e2m1fn_x4) == 0);
    CHECK(bs_x4_lane_code(-NAN, BS_DT_float4_e2m1fn_x4) == 8);
    for (uint32_t c = 0; c < 16; c++)          /* every value encodes to its own code */
        CHECK(bs_x4_lane_code(bs_x4_lane_f32(c, BS_DT_float4_e2m1fn_x4, 0),
                              BS_DT_float4_e2m1fn_x4) == c);
}

static void test_fp8_lanes(void)
{
    uint32_t bits = 0x7e38c0b8u;           /* lanes: 0xb8, 0xc0, 0x38, 0x7e */
    CHECK(bs_x4_lane_f32(bits, BS_DT_float8_e4m3fn_x4, 0) == -1.0f);
    CHECK(bs_x4_lane_f32(bits, BS_DT_float8_e4m3fn_x4, 1) == -2.0f);
    CHECK(bs_x4_lane_f32(bits, BS_DT_float8_e4m3fn_x4, 2) == 1.0f);
    CHECK(bs_x4_lane_f32(bits, BS_DT_float8_e4m3fn_x4, 3) == 448.0f);
    CHECK(bs_x4_lane_f32(0x3c00u, BS_DT_float8_e5m2_x4, 1) == 1.0f);
    CHECK(bs_x4_lane_code(1e6f, BS_DT_float8_e4m3fn_x4) == 0x7e);       /* saturates */
    CHECK(bs_x4_lane_code(-1e6f, BS_DT_float8_e5m2_x4) == 0xfb);
    CHECK(bs_x4_lane_code(1.0f, BS_DT_float8_e5m2_x4) == 0x3c);
    CHECK(bs_x4_lane_code(NAN, BS_DT_float8_e4m3fn_x4) == 0x7f);
}

int main(void)
{
    static const test tests[] = {
        {"fp4_decode", test_fp4_decode}, {"fp4_encode", test_fp4_encode},
        {"fp8_lanes", test_fp8_lanes},
    };
    return run_tests(tests, BS_ARRAY_LEN(tests));
}
