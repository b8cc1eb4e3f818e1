/* tests/c/test_expf.c -- k_expf.c: the row form equals the scalar form (in place too,
** any length, special values), and both equal the host C library's expf on special
** values and a 2M-input sample (a glibc host; the full 2^32 sweep on glibc 2.36 finds 2
** one-ulp differences, see k_expf.c). Build: make -C tests/c */
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
