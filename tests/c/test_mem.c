/* tests/c/test_mem.c -- unit tests for mem/mem.c (views of access patterns, bounds,
** linearity, normalize/overlap/same, shadows) and the cursor walk of kernels/stream.c.
** Plain main(); prints "N passed, M failed" and exits non-zero on failure.
**
** Build and run from the repository root:
**   gcc -std=c11 -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all \
**       -ffp-contract=off -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
**       -Icsrc tests/c/test_mem.c csrc/kernels/k_dtype.c csrc/kernels/stream.c \
**       csrc/mem/mem.c csrc/core/alloc.c csrc/core/error.c csrc/core/tables.c -lm \
**       -o /tmp/test_mem && /tmp/test_mem
*/
#include <stdio.h>
#include <stdlib.h>
#include "kernels/kernel.h"
#define BS_TEST_GLOBAL_CHECKS
#include "testutil.h"

/* A store over a caller buffer: parts x bpp bytes, partitions pitch bytes apart. */
static bs_store mkstore(uint8_t *data, uint8_t *shadow, int64_t parts, int64_t bpp,
                        int64_t pitch)
{
    bs_store st;
    memset(&st, 0, sizeof st);
    st.data = data;
    st.shadow = shadow;
    st.parts = parts;
    st.bpp = bpp;
    st.pitch = pitch;
    st.memtype = BS_MEM_SB;
    return st;
}

static bs_status make(bs_view *v, const bs_store *st, int32_t dt, int32_t ndim,
                      const int64_t *ap /* step,num pairs */, int64_t start, int *lin,
                      bs_error *err)
{
    int64_t step[BS_MAX_DIMS], num[BS_MAX_DIMS];
    for (int32_t d = 0; d < ndim && d < BS_MAX_DIMS; d++) {
        step[d] = ap[2 * d];
        num[d] = ap[2 * d + 1];
    }
    bs_error_clear(err);
    return bs_view_make(v, st, dt, ndim, step, num, start, lin, err);
}

static int has(const bs_error *err, const char *s) { return strstr(err->msg, s) != NULL; }

static uint8_t big[128 * 512], bigsh[128 * 512];

/* {=== bs_view_make ===} */

static void test_make_dense(void)
{
    bs_store st = mkstore(big, bigsh, 128, 512, 512);
    bs_view v;
    bs_error err;
    int lin = 0;
    int64_t ap[] = {128, 128, 1, 128};                        /* [[F,P],[1,F]] fp32 */
    CHECK(make(&v, &st, BS_DT_float32, 2, ap, 0, &lin, &err) == BS_OK && lin);
    CHECK(v.data == big && v.shadow == bigsh && v.count == 128 * 128);
    CHECK(v.stride[0] == 512 && v.stride[1] == 4 && v.num[0] == 128 && v.num[1] == 128);
    CHECK(v.memtype == BS_MEM_SB && v.dtype == BS_DT_float32 && v.ndim == 2);
    int64_t ap2[] = {256, 2, 1, 3};                           /* bf16, offset 6 bytes */
    CHECK(make(&v, &st, BS_DT_bfloat16, 2, ap2, 6, &lin, &err) == BS_OK && lin);
    CHECK(v.data == big + 6 && v.stride[0] == 512 && v.stride[1] == 2);
}

static void test_make_bounds(void)
{
    bs_store st = mkstore(big, NULL, 128, 512, 512);
    bs_view v;
    bs_error err;
    int lin;
    int64_t one[] = {1, 1};
    CHECK(make(&v, &st, BS_DT_float32, 1, one, 0, &lin, &err) == BS_OK);
    CHECK(make(&v, &st, BS_DT_float32, 1, one, 65532, &lin, &err) == BS_OK);   /* last */
    CHECK(make(&v, &st, BS_DT_float32, 1, one, 65536, &lin, &err) == BS_E_OOB);
    CHECK(has(&err, "element (0) at byte 65536 is outside the location") &&
          has(&err, "128 partitions x 512 bytes"));
    CHECK(make(&v, &st, BS_DT_float32, 1, one, -4, &lin, &err) == BS_E_OOB);
    int64_t last[] = {128, 128, 1, 128};
    CHECK(make(&v, &st, BS_DT_float32, 2, last, 0, &lin, &err) == BS_OK);
    CHECK(make(&v, &st, BS_DT_float32, 2, last, 4, &lin, &err) == BS_E_OOB);
    CHECK(has(&err, "element (127, 127) at byte 65536"));
    int64_t past[] = {128, 2, 1, 129};
    CHECK(make(&v, &st, BS_DT_float32, 2, past, 65536 - 1024, &lin, &err) == BS_E_OOB);
    CHECK(has(&err, "(1, 128) at byte 65536"));
    int64_t neg[] = {128, 2, -1, 4};                          /* free step negative */
    CHECK(make(&v, &st, BS_DT_float32, 2, neg, 12, &lin, &err) == BS_OK && lin);
    CHECK(v.stride[1] == -4 && v.data == big + 12);
    CHECK(make(&v, &st, BS_DT_float32, 2, neg, 8, &lin, &err) == BS_E_OOB);
    CHECK(has(&err, "element (0, 3) at byte -4"));
    int64_t zero[] = {0, 128, 0, 1000};                       /* broadcast everything */
    CHECK(make(&v, &st, BS_DT_float32, 2, zero, 100, &lin, &err) == BS_OK && lin);
    CHECK(v.stride[0] == 0 && v.stride[1] == 0 && v.count == 128000);
    int64_t huge[] = {1, 1, INT64_MAX / 2, 3};
    CHECK(make(&v, &st, BS_DT_float32, 2, huge, 0, &lin, &err) == BS_E_OOB);
    CHECK(make(&v, &st, BS_DT_float32, 1, one, INT64_MAX, &lin, &err) == BS_E_OOB);
    /* straddling: 6-byte partitions holding int32 */
    bs_store odd = mkstore(big, NULL, 4, 6, 6);
    int64_t s1[] = {1, 3};                                    /* bytes 0, 4, 8 */
    CHECK(make(&v, &odd, BS_DT_int32, 1, s1, 0, &lin, &err) == BS_E_OOB);
    CHECK(has(&err, "element (1) at byte 4 straddles a partition boundary"));
    int64_t s2[] = {2, 2};                                    /* bytes 0, 8: fine */
    CHECK(make(&v, &odd, BS_DT_int32, 1, s2, 0, &lin, &err) == BS_OK);
    int64_t s3[] = {3, 2, 0, 2};                              /* bytes 2, 14: fine */
    CHECK(make(&v, &odd, BS_DT_int16, 2, s3, 2, &lin, &err) == BS_OK);
    int64_t s4[] = {0, (int64_t)1 << 30, 3, 1 << 20};         /* huge broadcast dim */
    bs_store odd2 = mkstore(big, NULL, 1, 30, 30);
    CHECK(make(&v, &odd2, BS_DT_int16, 2, s4, 0, &lin, &err) == BS_E_OOB);
    CHECK(has(&err, "element (0, 1048575) at byte 6291450 is outside"));
    s4[3] = 5;                                                /* bytes 0, 6, .. 24 */
    CHECK(make(&v, &odd2, BS_DT_int16, 2, s4, 0, &lin, &err) == BS_OK && lin);
    bs_store odd3 = mkstore(big, NULL, 3, 10, 10);            /* crosses partitions */
    int64_t s5[] = {0, (int64_t)1 << 40, 3, 5};               /* bytes 0, 6, 12, 18, 24 */
    CHECK(make(&v, &odd3, BS_DT_int16, 2, s5, 0, &lin, &err) == BS_OK);
    CHECK(make(&v, &odd3, BS_DT_int16, 2, s5, 1, &lin, &err) == BS_E_OOB);
    CHECK(has(&err, "element (0, 3) at byte 19 straddles"));
    s5[2] = 2;                                                /* int32 at bytes 0, 8, 16 */
    s5[3] = 3;
    CHECK(make(&v, &odd3, BS_DT_int32, 2, s5, 0, &lin, &err) == BS_E_OOB);
    CHECK(has(&err, "element (0, 1) at byte 8 straddles"));
    /* shape errors */
    CHECK(make(&v, &st, BS_DT_float32, 0, one, 0, &lin, &err) == BS_E_PROGRAM);
    int64_t six[12] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    CHECK(make(&v, &st, BS_DT_float32, 6, six, 0, &lin, &err) == BS_E_PROGRAM);
    int64_t z[] = {1, 0};
    CHECK(make(&v, &st, BS_DT_float32, 1, z, 0, &lin, &err) == BS_E_PROGRAM);
}

/* pitch != bpp: an SBUF-like store of 4 partitions x 16 bytes, 64 bytes apart. */
static void test_make_pitch(void)
{
    static uint8_t buf[4 * 64];
    bs_store st = mkstore(buf, NULL, 4, 16, 64);
    bs_view v;
    bs_error err;
    int lin;
    int64_t tile[] = {4, 3, 1, 4};                            /* rows of 4 floats */
    CHECK(make(&v, &st, BS_DT_float32, 2, tile, 16, &lin, &err) == BS_OK && lin);
    CHECK(v.data == buf + 64 && v.stride[0] == 64 && v.stride[1] == 4);
    int64_t two[] = {8, 2, 1, 2};                             /* every other partition */
    CHECK(make(&v, &st, BS_DT_float32, 2, two, 8, &lin, &err) == BS_OK && lin);
    CHECK(v.data == buf + 8 && v.stride[0] == 128);
    int64_t flat[] = {1, 8};                                  /* wraps: non-linear */
    CHECK(make(&v, &st, BS_DT_float32, 1, flat, 0, &lin, &err) == BS_OK && !lin);
    CHECK(v.data == NULL && v.count == 8 && v.stride[0] == 4);
    int64_t offs[8], step[1] = {1}, num[1] = {8};
    bs_view_offsets(&st, 4, 1, step, num, 0, offs);
    CHECK(offs[0] == 0 && offs[3] == 12 && offs[4] == 64 && offs[7] == 76);
    bs_store lin_st = mkstore(buf, NULL, 4, 16, 16);          /* pitch == bpp: linear */
    CHECK(make(&v, &lin_st, BS_DT_float32, 1, flat, 0, &lin, &err) == BS_OK && lin);
    int64_t col[] = {4, 4, 2, 1};                             /* num 1 dim: any step */
    CHECK(make(&v, &st, BS_DT_float32, 2, col, 4, &lin, &err) == BS_OK && lin);
    CHECK(v.stride[0] == 64 && v.data == buf + 4);
}

/* Random patterns on random stores against a per-element model. */
static void test_make_random(void)
{
    static uint8_t buf[8 * 40];
    uint64_t s = 0x9e3779b97f4a7c15ull;
    int bad = 0, nlin = 0, nnon = 0, noob = 0;
    for (int it = 0; it < 20000; it++) {
        int64_t step[5], num[5], offs[4096];
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        uint64_t r = s;
        int32_t dt = (int32_t)(r % BS_DT__COUNT); r /= BS_DT__COUNT;
        int64_t isz = bs_dtinfo_table[dt].size;
        int64_t parts = 1 + (int64_t)(r % 8); r /= 8;
        int64_t bpp = 8 + (int64_t)(r % 25); r /= 25;
        int64_t pitch = (r & 1) ? bpp : 40; r >>= 1;
        int32_t nd = 1 + (int32_t)(r % 3); r /= 3;
        int64_t cnt = 1;
        for (int32_t d = 0; d < nd; d++) {
            num[d] = 1 + (int64_t)(r % 4); r /= 4;
            step[d] = (int64_t)(r % 9) - (d ? 4 : 0); r /= 9;
            if (d == 0 && (r & 1))
                step[0] = bpp / isz;
            cnt *= num[d];
        }
        int64_t start = (int64_t)(r % (uint64_t)(parts * bpp + 4)) - 2;
        bs_store st = mkstore(buf, NULL, parts, bpp, pitch);
        bs_view v;
        bs_error err;
        int lin;
        bs_status rc = bs_view_make(&v, &st, dt, nd, step, num, start, &lin, &err);
        /* model: every element inside and not straddling */
        int64_t idx[5] = {0}, ok = 1;
        for (int64_t e = 0; e < cnt; e++) {
            int64_t b = start;
            for (int32_t d = 0; d < nd; d++)
                b += isz * step[d] * idx[d];
            if (b < 0 || b + isz > parts * bpp || b % bpp + isz > bpp)
                ok = 0;
            for (int32_t d = nd - 1; d >= 0 && ++idx[d] == num[d]; d--)
                idx[d] = 0;
        }
        if (ok != (rc == BS_OK)) {
            bad++;
            continue;
        }
        if (!ok) {
            noob++;
            continue;
        }
        bs_view_offsets(&st, (int32_t)isz, nd, step, num, start, offs);
        memset(idx, 0, sizeof idx);
        lin ? nlin++ : nnon++;
        for (int64_t e = 0; e < cnt && lin; e++) {
            int64_t a = 0;
            for (int32_t d = 0; d < nd; d++)
                a += idx[d] * v.stride[d];
            bad += v.data + a != buf + offs[e];
            for (int32_t d = nd - 1; d >= 0 && ++idx[d] == num[d]; d--)
                idx[d] = 0;
        }
    }
    CHECK(bad == 0);
    CHECK(nlin > 1000 && nnon > 100 && noob > 1000);
}
/* }=== */

/* {=== View algebra ===} */


static void test_normalize(void)
{
    int64_t n1[3] = {4, 1, 8}, s1[3] = {32, 999, 4};
    bs_view v = mkview_bytes(big, BS_DT_float32, 3, n1, s1);
    bs_view_normalize(&v);
    CHECK(v.ndim == 1 && v.num[0] == 32 && v.stride[0] == 4 && v.count == 32);
    int64_t n2[3] = {2, 3, 4}, s2[3] = {0, 0, 4};                 /* broadcast outer */
    v = mkview_bytes(big, BS_DT_float32, 3, n2, s2);
    bs_view_normalize(&v);
    CHECK(v.ndim == 2 && v.num[0] == 6 && v.stride[0] == 0 && v.num[1] == 4);
    int64_t n3[2] = {4, 8}, s3[2] = {512, 4};                     /* gap: stays */
    v = mkview_bytes(big, BS_DT_float32, 2, n3, s3);
    bs_view_normalize(&v);
    CHECK(v.ndim == 2 && v.num[0] == 4 && v.stride[0] == 512);
    int64_t n4[3] = {1, 1, 1}, s4[3] = {7, 8, 4};
    v = mkview_bytes(big, BS_DT_float32, 3, n4, s4);
    bs_view_normalize(&v);
    CHECK(v.ndim == 1 && v.num[0] == 1 && v.count == 1);
    int64_t n5[3] = {3, 2, 2}, s5[3] = {-16, -8, -4};             /* reversed dense */
    v = mkview_bytes(big + 100, BS_DT_float32, 3, n5, s5);
    bs_view_normalize(&v);
    CHECK(v.ndim == 1 && v.num[0] == 12 && v.stride[0] == -4);
}

static void test_overlap_same(void)
{
    int64_t n[2] = {4, 4}, s[2] = {64, 4};
    bs_view a = mkview_bytes(big, BS_DT_float32, 2, n, s);
    bs_view b = mkview_bytes(big + 16, BS_DT_float32, 2, n, s);     /* next 4 columns */
    bs_view c = mkview_bytes(big + 12, BS_DT_float32, 2, n, s);     /* shares column 3 */
    bs_view d = mkview_bytes(big + 128 + 16, BS_DT_float32, 2, n, s);
    bs_view e = mkview_bytes(big + 256, BS_DT_float32, 2, n, s);    /* rows 4..7 */
    CHECK(bs_view_overlap(&a, &a));
    CHECK(!bs_view_overlap(&a, &b) && !bs_view_overlap(&b, &a));
    CHECK(bs_view_overlap(&a, &c) && bs_view_overlap(&c, &a));
    CHECK(!bs_view_overlap(&a, &d));
    CHECK(!bs_view_overlap(&a, &e));
    bs_view f = mkview_bytes(big + 128 + 8, BS_DT_float32, 2, n, s);
    CHECK(bs_view_overlap(&a, &f));                           /* rows 2..3, cols 2..3 */
    bs_view g = mkview_bytes(big + 60, BS_DT_float32, 2, n, s);     /* ends of rows meet */
    CHECK(bs_view_overlap(&a, &g) && bs_view_overlap(&g, &a));
    bs_view none = a;
    none.ndim = 0;
    CHECK(!bs_view_overlap(&a, &none));
    /* Random views in a 256-byte window: never a false "disjoint". */
    uint64_t x = 12345;
    int missed = 0;
    for (int it = 0; it < 20000; it++) {
        bs_view v[2];
        uint8_t hit[2][256];
        memset(hit, 0, sizeof hit);
        for (int k = 0; k < 2; k++) {
            int64_t nn[2], ss[2];
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            uint64_t r = x;
            nn[0] = 1 + (int64_t)(r % 4); r /= 4;
            nn[1] = 1 + (int64_t)(r % 4); r /= 4;
            ss[0] = (int64_t)(r % 3) * 16 + ((r / 3) % 2) * 4; r /= 6;
            ss[1] = (int64_t)(r % 5) - 2; r /= 5;
            int64_t base = 100 + (int64_t)(r % 40);
            v[k] = mkview_bytes(big + base, BS_DT_uint8, 2, nn, ss);
            for (int64_t i = 0; i < nn[0]; i++)
                for (int64_t j = 0; j < nn[1]; j++)
                    hit[k][base + i * ss[0] + j * ss[1]] = 1;
        }
        int real = 0;
        for (int i = 0; i < 256; i++)
            real |= hit[0][i] & hit[1][i];
        missed += real && !bs_view_overlap(&v[0], &v[1]);
    }
    CHECK(missed == 0);
    /* same */
    int64_t n1[1] = {16}, s1[1] = {4}, s2[2] = {16, 4};
    bs_view flat = mkview_bytes(big, BS_DT_float32, 1, n1, s1);
    bs_view sq = mkview_bytes(big, BS_DT_float32, 2, n, s2);
    CHECK(bs_view_same(&flat, &sq));
    CHECK(!bs_view_same(&flat, &a));
    bs_view other = flat;
    other.dtype = BS_DT_int32;
    CHECK(!bs_view_same(&flat, &other));
    other = flat;
    other.data += 4;
    CHECK(!bs_view_same(&flat, &other));
}
/* }=== */

static void test_shadow(void)
{
    static uint8_t d[64], sh[64];
    int64_t n[2] = {2, 3}, s[2] = {32, 8};
    memset(sh, 0, sizeof sh);
    bs_view v = mkview_bytes(d, BS_DT_int32, 2, n, s);
    v.shadow = sh;
    CHECK(!bs_view_initialized(&v));
    bs_view_mark_written(&v);
    CHECK(bs_view_initialized(&v));
    CHECK(sh[0] == 1 && sh[3] == 1 && sh[4] == 0 && sh[8] == 1 && sh[16 + 3] == 1
          && sh[20] == 0 && sh[32] == 1 && sh[48 + 3] == 1 && sh[52] == 0);
    int64_t n2[1] = {4}, s2[1] = {4};
    bs_view w = mkview_bytes(d, BS_DT_int32, 1, n2, s2);            /* covers an unwritten gap */
    w.shadow = sh;
    CHECK(!bs_view_initialized(&w));
    sh[5] = 1;
    CHECK(!bs_view_initialized(&w));                          /* every byte counts */
    int64_t n3[2] = {3, 2}, s3[2] = {0, -4};                  /* broadcast, reversed */
    bs_view r = mkview_bytes(d + 60, BS_DT_int32, 2, n3, s3);
    r.shadow = sh + 60;
    CHECK(!bs_view_initialized(&r));
    bs_view_mark_written(&r);
    CHECK(bs_view_initialized(&r) && sh[56] == 1 && sh[63] == 1 && sh[55] == 0);
    bs_view none = v;
    none.shadow = NULL;
    CHECK(bs_view_initialized(&none));
    bs_view_mark_written(&none);                              /* no-op, no crash */
}

/* Cursor walking: broadcast dims, mixed row lengths, empty views. */
static void test_cursor_walk(void)
{
    static float a[64];
    for (int i = 0; i < 64; i++)
        a[i] = (float)i;
    int64_t n[3] = {2, 3, 4}, s[3] = {64, 0, 4};               /* middle dim broadcast */
    bs_view v = mkview_bytes(a, BS_DT_float32, 3, n, s);
    bs_cursor c;
    float buf[BS_CHUNK], seq[24];
    int k = 0;
    bs_cur_init(&c, &v);
    CHECK(c.left == 4 && c.pos == 0);
    while (c.left > 0) {
        int64_t m = c.left > 3 ? 3 : c.left;                  /* split rows unevenly */
        const float *x = bs_cur_read_f32(&c, m, buf);
        for (int64_t j = 0; j < m; j++)
            seq[k++] = x[j];
    }
    CHECK(k == 24 && c.pos == 24);
    int bad = 0;
    for (int i = 0; i < 24; i++)
        bad += seq[i] != (float)((i / 12) * 16 + i % 4);
    CHECK(bad == 0);
    /* Pair a [4 x 6] view with a [6 x 4] one through bs_chunk2. */
    int64_t na[2] = {4, 6}, sa[2] = {32, 4}, nb[2] = {6, 4}, sb[2] = {-16, 4};
    bs_view va = mkview_bytes(a, BS_DT_float32, 2, na, sa);
    bs_view vb = mkview_bytes(a + 60, BS_DT_float32, 2, nb, sb);    /* rows bottom-up */
    bs_cursor ca, cb;
    int pairs = 0, chunks = 0;
    bs_cur_init(&ca, &va);
    bs_cur_init(&cb, &vb);
    bad = 0;
    while (ca.left > 0) {
        int64_t m = bs_chunk2(&ca, &cb), p = ca.pos;
        float xb[BS_CHUNK], yb[BS_CHUNK];
        const float *x = bs_cur_read_f32(&ca, m, xb);
        const float *y = bs_cur_read_f32(&cb, m, yb);
        for (int64_t j = 0; j < m; j++, pairs++) {
            int64_t e = p + j;
            bad += x[j] != (float)((e / 6) * 8 + e % 6);
            bad += y[j] != (float)(60 - (e / 4) * 4 + e % 4);
        }
        chunks++;
    }
    CHECK(bad == 0 && pairs == 24 && cb.left == 0 && chunks == 8);
    bs_view empty = v;
    empty.ndim = 0;
    bs_cur_init(&c, &empty);
    CHECK(c.left == 0);
    empty = v;
    empty.count = 0;
    bs_cur_init(&c, &empty);
    CHECK(c.left == 0);
    /* Copies between shapes, bit exact (NaN payloads kept). */
    uint32_t src[12], dst[2][8];
    for (int i = 0; i < 12; i++)
        src[i] = 0x7f800001u + (uint32_t)i;
    memset(dst, 0, sizeof dst);
    int64_t ns[2] = {3, 4}, ss[2] = {16, 4}, nd[2] = {2, 6}, sd[2] = {32, 4};
    bs_view vs = mkview_bytes(src, BS_DT_float32, 2, ns, ss);
    bs_view vd = mkview_bytes(dst, BS_DT_float32, 2, nd, sd);
    bs_copy_raw(&vd, &vs);
    CHECK(dst[0][0] == src[0] && dst[0][5] == src[5] && dst[1][0] == src[6]
          && dst[1][5] == src[11] && dst[0][6] == 0 && dst[1][7] == 0);
    int64_t nr[1] = {12}, sr[1] = {-4};                       /* reversed, strided */
    uint32_t rev[12];
    bs_view vr = mkview_bytes(rev + 11, BS_DT_float32, 1, nr, sr);
    bs_copy_raw(&vr, &vs);
    CHECK(rev[11] == src[0] && rev[0] == src[11]);
}

int main(void)
{
    static const test tests[] = {
        {"make_dense", test_make_dense}, {"make_bounds", test_make_bounds},
        {"make_pitch", test_make_pitch}, {"make_random", test_make_random},
        {"normalize", test_normalize}, {"overlap_same", test_overlap_same},
        {"shadow", test_shadow}, {"cursor_walk", test_cursor_walk},
    };
    return run_tests(tests, BS_ARRAY_LEN(tests));
}
