/* kernels/kmatmul.c -- the tiled fp32 product R = B^T . A of the matmul family
** (kmatmul.h): operands packed into panels, register tiles per CPU level, the sweep split
** over the simulator's threads. Matmult (k_matmul.c) and MatmultMx (k_mx.c) drive it.
**
** Numerics: every product is rounded to fp32 and added to a running sum that starts at
** +0 and walks k = 0, 1, ... in order; no reassociation, and no FMA (the build uses
** -ffp-contract=off) except where it gives the same bits: when every product is exact in
** fp32 (tile_4x16_fma). Speed comes from computing many (m, n) sums at once, never from
** reordering one of them. */
#include <stdlib.h>
#include "kmatmul.h"
#include "../core/pool.h"

/* {=== The product ===} */

/* The tiles use GNU vector types. Wider-than-hardware vectors compile to stack traffic, so
** the 16-lane tile runs only in a target("avx512f") copy of the driver and the 8-lane one
** only in a target("avx2") copy, picked at run time; everything else uses the 4-lane tile
** (SSE2 / NEON width). always_inline makes sure each copy really is compiled for its own
** target. Neither target enables contraction: the build uses -ffp-contract=off, so a*b+c
** stays a rounded product and a rounded sum; the one fused multiply-add is the explicit
** tile_4x16_fma, for exact products only. */
#define MM_INLINE static inline __attribute__((always_inline))
#ifdef BS_MM_AVX2
#include <immintrin.h>
#endif

typedef float mm_v4 __attribute__((vector_size(16)));
typedef float mm_v8 __attribute__((vector_size(32)));
typedef float mm_v16 __attribute__((vector_size(64)));

/* Layout. A (moving, K x N) is packed into panels of nr columns, panel p holding
** A[k][p*nr + j] at p*K*nr + k*nr + j; B (stationary, K x M) into blocks of mr columns,
** block b holding B[k][b*mr + i] at b*K*mr + k*mr + i. The last panel and block are padded
** with zeros, so every (m, n) goes through the same tile code; padded lanes are computed
** and dropped. A tile computes D[i][j] = sum_k a[k][j] * b[k][i] for i < mr, j < nr, each
** sum in registers over all k. memcpy does the unaligned vector loads and stores. The
** accumulators are named variables, not an array: GCC keeps an array on the stack. */

/* mr = 4, nr = 8 (4-lane vectors). */
MM_INLINE void tile_4x8_v4(float *D, int64_t ld, const float *a, const float *b, int64_t K)
{
    mm_v4 c00 = {0}, c01 = {0}, c10 = {0}, c11 = {0}, c20 = {0}, c21 = {0}, c30 = {0}, c31 = {0};
    for (int64_t k = 0; k < K; k++, a += 8, b += 4) {
        mm_v4 a0, a1;
        memcpy(&a0, a, sizeof a0);
        memcpy(&a1, a + 4, sizeof a1);
        c00 = c00 + a0 * b[0];  c01 = c01 + a1 * b[0];
        c10 = c10 + a0 * b[1];  c11 = c11 + a1 * b[1];
        c20 = c20 + a0 * b[2];  c21 = c21 + a1 * b[2];
        c30 = c30 + a0 * b[3];  c31 = c31 + a1 * b[3];
    }
    memcpy(D + 0 * ld, &c00, sizeof c00);  memcpy(D + 0 * ld + 4, &c01, sizeof c01);
    memcpy(D + 1 * ld, &c10, sizeof c10);  memcpy(D + 1 * ld + 4, &c11, sizeof c11);
    memcpy(D + 2 * ld, &c20, sizeof c20);  memcpy(D + 2 * ld + 4, &c21, sizeof c21);
    memcpy(D + 3 * ld, &c30, sizeof c30);  memcpy(D + 3 * ld + 4, &c31, sizeof c31);
}

/* mr = 4, nr = 16 (8-lane vectors; 8 accumulators fit AVX2's 16 registers). */
MM_INLINE void tile_4x16_v8(float *D, int64_t ld, const float *a, const float *b, int64_t K)
{
    mm_v8 c00 = {0}, c01 = {0}, c10 = {0}, c11 = {0}, c20 = {0}, c21 = {0}, c30 = {0}, c31 = {0};
    for (int64_t k = 0; k < K; k++, a += 16, b += 4) {
        mm_v8 a0, a1;
        memcpy(&a0, a, sizeof a0);
        memcpy(&a1, a + 8, sizeof a1);
        c00 = c00 + a0 * b[0];  c01 = c01 + a1 * b[0];
        c10 = c10 + a0 * b[1];  c11 = c11 + a1 * b[1];
        c20 = c20 + a0 * b[2];  c21 = c21 + a1 * b[2];
        c30 = c30 + a0 * b[3];  c31 = c31 + a1 * b[3];
    }
    memcpy(D + 0 * ld, &c00, sizeof c00);  memcpy(D + 0 * ld + 8, &c01, sizeof c01);
    memcpy(D + 1 * ld, &c10, sizeof c10);  memcpy(D + 1 * ld + 8, &c11, sizeof c11);
    memcpy(D + 2 * ld, &c20, sizeof c20);  memcpy(D + 2 * ld + 8, &c21, sizeof c21);
    memcpy(D + 3 * ld, &c30, sizeof c30);  memcpy(D + 3 * ld + 8, &c31, sizeof c31);
}

#ifdef BS_MM_AVX2
/* The 4 x 16 tile with fused multiply-adds, for products that are all exact in fp32 (both
** operands' values narrow and in range: bs_mm_pack): then fma(a, b, s) = round(a*b + s)
** is round(round(a*b) + s), the same bits as tile_4x16_v8, one instruction instead of two.
** Its own target("avx2,fma") function, called per tile: nothing else is compiled with
** FMA, so nothing else can contract. */
__attribute__((target("avx2,fma")))
static void tile_4x16_fma(float *D, int64_t ld, const float *a, const float *b, int64_t K)
{
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
           c30 = c00, c31 = c00;
    for (int64_t k = 0; k < K; k++, a += 16, b += 4) {
        __m256 a0 = _mm256_loadu_ps(a), a1 = _mm256_loadu_ps(a + 8), bk;
        bk = _mm256_broadcast_ss(b + 0);
        c00 = _mm256_fmadd_ps(a0, bk, c00);  c01 = _mm256_fmadd_ps(a1, bk, c01);
        bk = _mm256_broadcast_ss(b + 1);
        c10 = _mm256_fmadd_ps(a0, bk, c10);  c11 = _mm256_fmadd_ps(a1, bk, c11);
        bk = _mm256_broadcast_ss(b + 2);
        c20 = _mm256_fmadd_ps(a0, bk, c20);  c21 = _mm256_fmadd_ps(a1, bk, c21);
        bk = _mm256_broadcast_ss(b + 3);
        c30 = _mm256_fmadd_ps(a0, bk, c30);  c31 = _mm256_fmadd_ps(a1, bk, c31);
    }
    _mm256_storeu_ps(D + 0 * ld, c00);  _mm256_storeu_ps(D + 0 * ld + 8, c01);
    _mm256_storeu_ps(D + 1 * ld, c10);  _mm256_storeu_ps(D + 1 * ld + 8, c11);
    _mm256_storeu_ps(D + 2 * ld, c20);  _mm256_storeu_ps(D + 2 * ld + 8, c21);
    _mm256_storeu_ps(D + 3 * ld, c30);  _mm256_storeu_ps(D + 3 * ld + 8, c31);
}
#endif

/* mr = 8, nr = 32 (16-lane vectors; 16 accumulators of AVX-512's 32 registers). Per k:
** 2 loads, 8 broadcasts, 16 multiplies, 16 adds -- the multiply and add pipes stay busy
** and no accumulator waits on its own previous add. */
#define MM_ROW16(i) \
    c##i##0 = c##i##0 + a0 * b[i];  c##i##1 = c##i##1 + a1 * b[i];
#define MM_STORE16(i) \
    memcpy(D + (i) * ld, &c##i##0, sizeof c##i##0);  memcpy(D + (i) * ld + 16, &c##i##1, sizeof c##i##1);
MM_INLINE void tile_8x32_v16(float *D, int64_t ld, const float *a, const float *b, int64_t K)
{
    mm_v16 c00 = {0}, c01 = {0}, c10 = {0}, c11 = {0}, c20 = {0}, c21 = {0}, c30 = {0}, c31 = {0},
           c40 = {0}, c41 = {0}, c50 = {0}, c51 = {0}, c60 = {0}, c61 = {0}, c70 = {0}, c71 = {0};
    for (int64_t k = 0; k < K; k++, a += 32, b += 8) {
        mm_v16 a0, a1;
        memcpy(&a0, a, sizeof a0);
        memcpy(&a1, a + 16, sizeof a1);
        MM_ROW16(0) MM_ROW16(1) MM_ROW16(2) MM_ROW16(3)
        MM_ROW16(4) MM_ROW16(5) MM_ROW16(6) MM_ROW16(7)
    }
    MM_STORE16(0) MM_STORE16(1) MM_STORE16(2) MM_STORE16(3)
    MM_STORE16(4) MM_STORE16(5) MM_STORE16(6) MM_STORE16(7)
}
#undef MM_ROW16
#undef MM_STORE16

/* Tile geometry of each instruction-set level (kmatmul.h's BS_MM_ISA_*). */
static const struct { int64_t mr, nr; } mm_geom[3] = { {4, 8}, {4, 16}, {8, 32} };

/* {=== Packing ===} */

/* v as a [rows, cols] matrix (row-major element order), if one pointer and two strides
** describe it; 0 otherwise. */
int bs_mm_as_mat(const bs_view *v, int64_t rows, int64_t cols, bs_mm_mat *m)
{
    bs_view nv = *v;
    bs_view_normalize(&nv);
    m->data = nv.data;
    m->dtype = nv.dtype;
    if (nv.ndim == 1 && nv.num[0] == rows * cols) {
        m->cs = nv.stride[0];
        m->rs = cols * nv.stride[0];
        return 1;
    }
    if (nv.ndim == 2 && nv.num[0] == rows && nv.num[1] == cols) {
        m->rs = nv.stride[0];
        m->cs = nv.stride[1];
        return 1;
    }
    return 0;
}

/* Columns of one row decoded at a time by bs_mm_pack: a multiple of every nr. */
#define MM_PACK_CH 256
/* Rows ahead whose chunk bs_mm_pack prefetches. */
#define MM_PACK_AHEAD 8

/* nr floats from s to d; nr is one of the tiles' widths, so each copy is a fixed size. */
static inline void mm_copy_nr(float *d, const float *s, int64_t nr)
{
    switch (nr) {
    case 4:  memcpy(d, s, 4 * sizeof(float)); break;
    case 8:  memcpy(d, s, 8 * sizeof(float)); break;
    case 16: memcpy(d, s, 16 * sizeof(float)); break;
    default: memcpy(d, s, 32 * sizeof(float)); break;
    }
}

/* n bf16 values at s widened into d (a shift: exact): the chunks that are not whole
** groups of 8 (mm_bf16x8 takes the rest). */
static inline void mm_widen_n(float *d, const uint8_t *s, int64_t n)
{
    for (int64_t c = 0; c < n; c++) {
        uint16_t h;
        uint32_t u;
        memcpy(&h, s + 2 * c, sizeof h);
        u = (uint32_t)h << 16;
        memcpy(d + c, &u, sizeof u);
    }
}

/* 1 unless u (fp32 bits) is +-0 or of a magnitude in [2^-63, 2^64). The product of two
** such values with at most 12 significant bits each (bf16, fp16, fp8, uint8: mm_narrow) is
** exact in fp32: at most 24 significant bits, a normal exponent, finite. */
static inline uint32_t mm_wild(uint32_t u)
{
    uint32_t m = u & 0x7fffffffu;
    return (uint32_t)(m != 0) & (uint32_t)(m - 0x20000000u >= 0x3f800000u);
}

typedef uint16_t mm_h8 __attribute__((vector_size(16)));
typedef uint32_t mm_u8 __attribute__((vector_size(32)));

/* acc |= mm_wild of each of u's 8 lanes, as all ones (pointers: a 32-byte vector passed
** by value changes the ABI between the clones). */
MM_INLINE void mm_wild8(mm_u8 *acc, const mm_u8 *u)
{
    mm_u8 m = *u & 0x7fffffffu;
    *acc |= (mm_u8)((m != 0) & (m - 0x20000000u >= 0x3f800000u));
}

/* 8 bf16 values at s widened to fp32 bits in u (a shift: exact). */
MM_INLINE void mm_bf16x8(mm_u8 *u, const uint8_t *s)
{
    mm_h8 h;
    memcpy(&h, s, sizeof h);
    *u = __builtin_convertvector(h, mm_u8) << 16;
}

/* 1 for a dtype of at most 12 significant bits (bf16, fp16, fp8, uint8; Matmult takes no
** other one- or two-byte dtype): the operands whose values mm_wild vets. */
static int mm_narrow(int32_t dt)
{
    return bs_dtinfo_table[dt].size <= 2 && bs_dtinfo_table[dt].lanes == 1;
}

/* Panels [p0, p1) of nr columns of x (rows x cols) into dst + p0 * rows * nr: panel p
** holds x[r][p*nr + j] at p*rows*nr + r*nr + j, decoded to fp32, the last one zero-padded.
** Row by row, MM_PACK_CH columns at a time: the source is read in order (its rows are
** often kilobytes apart), decoded into a buffer (one-byte dtypes through a 256-entry table
** filled by the same decoder) and copied out nr floats at a time; aligned dense fp32 is
** copied from the row itself, and dense bf16 widened (a shift) straight into the panels,
** but in a chunk of the zero-padded last panel. Compiled twice (AVX2 where the CPU has
** it): the same decodes either way. Returns 1 when x's dtype is narrow and every value
** packed passes mm_wild (products with another such operand are exact), else 0. */
BS_AVX2_CLONES
int bs_mm_pack(float *dst, const bs_mm_mat *x, int64_t rows, int64_t cols, int64_t nr,
               int64_t p0, int64_t p1)
{
    int plain = x->dtype == BS_DT_float32 && x->cs == 4;
    int bf16 = x->dtype == BS_DT_bfloat16 && x->cs == 2;
    int bytewise = bs_dtinfo_table[x->dtype].size == 1 && bs_dtinfo_table[x->dtype].lanes == 1;
    int narrow = mm_narrow(x->dtype);
    uint32_t wild = 0;
    float lut[256], buf[MM_PACK_CH];
    if (bytewise) {
        uint8_t codes[256];
        for (int c = 0; c < 256; c++)
            codes[c] = (uint8_t)c;
        bs_dt_load_row_f32(lut, codes, 1, 256, x->dtype);
    }
    for (int64_t c0 = p0 * nr; c0 < p1 * nr; c0 += MM_PACK_CH) {
        int64_t span = p1 * nr - c0 < MM_PACK_CH ? p1 * nr - c0 : MM_PACK_CH;
        int64_t w = cols - c0 < span ? cols - c0 : span;      /* columns that exist */
        float *d0 = dst + c0 / nr * rows * nr;
        memset(buf + w, 0, (size_t)(span - w) * sizeof(float));
        for (int64_t r = 0; r < rows; r++) {
            const uint8_t *src = x->data + r * x->rs + c0 * x->cs;
            const float *row = buf;
            float *d = d0 + r * nr;
            if (x->cs <= 4 && r + MM_PACK_AHEAD < rows)   /* rows are often pages apart */
                for (int64_t b = 0; b < w * x->cs; b += 64)
                    __builtin_prefetch(src + MM_PACK_AHEAD * x->rs + b);
            if (bf16 && w == span) {                /* widened straight into the panels */
                mm_u8 u, wv = {0};
                int64_t c = 0;
                if (nr >= 8) {                      /* nr a multiple of 8, as span is */
                    for (; c < span; c += nr, d += rows * nr)
                        for (int64_t o = 0; o < nr; o += 8) {
                            mm_bf16x8(&u, src + 2 * (c + o));
                            mm_wild8(&wv, &u);
                            memcpy(d + o, &u, sizeof u);
                        }
                } else {                            /* nr 4: 8 columns fill two panels */
                    for (; c + 8 <= span; c += 8, d += 2 * rows * nr) {
                        mm_bf16x8(&u, src + 2 * c);
                        mm_wild8(&wv, &u);
                        memcpy(d, &u, 4 * sizeof(float));
                        memcpy(d + rows * nr, (const uint8_t *)&u + 4 * sizeof(float),
                               4 * sizeof(float));
                    }
                    if (c < span) {                 /* a last panel of 4 */
                        mm_widen_n(d, src + 2 * c, 4);
                        for (int l = 0; l < 4; l++) {
                            uint32_t bits;
                            memcpy(&bits, d + l, sizeof bits);
                            wild |= mm_wild(bits);
                        }
                    }
                }
                for (int l = 0; l < 8; l++)
                    wild |= wv[l];
                continue;
            }
            if (plain && w == span && ((uintptr_t)src & 3) == 0)
                row = (const float *)src;
            else if (plain)
                memcpy(buf, src, (size_t)w * sizeof(float));
            else if (bf16)
                mm_widen_n(buf, src, w);
            else if (bytewise)
                for (int64_t c = 0; c < w; c++)
                    buf[c] = lut[src[c * x->cs]];
            else
                bs_dt_load_row_f32(buf, src, x->cs, w, x->dtype);
            for (int64_t c = 0; narrow && c < w; c++) {
                uint32_t u;
                memcpy(&u, buf + c, sizeof u);
                wild |= mm_wild(u);
            }
            for (int64_t c = 0; c < span; c += nr, d += rows * nr)
                mm_copy_nr(d, row + c, nr);
        }
    }
    return narrow && !wild;
}

/* {=== The driver ===} */

/* Accumulate the h x w tile t (rows nr apart) onto R at (m0, n0): fp32(old + t) where
** every byte of the element was written, else t (as write_accumulate does). A row whose
** shadow says written throughout (the common case) takes a loop without the test. */
static inline void mm_acc_tile(const bs_mm_job *j, const float *t, int64_t nr, int64_t m0,
                               int64_t n0, int64_t h, int64_t w)
{
    for (int64_t i = 0; i < h; i++) {
        float *o = j->R + (m0 + i) * j->ldr + n0;
        const float *ti = t + i * nr;
        const uint8_t *sh = j->acc_sh + ((m0 + i) * j->ldr + n0) * 4;
        int all = 1;
        for (int64_t c = 0; c < w; c++)
            all &= bs_written4(sh + 4 * c);
        for (int64_t c = 0; c < w; c++) {        /* memcpy: R may be unaligned */
            float old, v = ti[c];
            memcpy(&old, o + c, sizeof old);
            if (all || bs_written4(sh + 4 * c))
                v = old + v;
            memcpy(o + c, &v, sizeof v);
        }
    }
}

/* Panels [p0, p1) x blocks [b0, b1): pack the panels (when pack), then every tile. Tiles
** that stick out of R go through a local buffer. */
MM_INLINE void mm_sweep(const bs_mm_job *j, int64_t p0, int64_t p1, int64_t b0, int64_t b1,
                        int pack, int isa)
{
    const int64_t mr = mm_geom[isa].mr, nr = mm_geom[isa].nr, K = j->K;
    float edge[8 * 32];
    int exact = pack ? bs_mm_pack(j->Ap, &j->a, K, j->N, nr, p0, p1) : j->a_exact;
    int fma = isa == BS_MM_ISA_AVX2 && j->fma && j->b_exact && exact;
    for (int64_t p = p0; p < p1; p++) {
        const float *ap = j->Ap + p * K * nr;
        int64_t n0 = p * nr, w = j->N - n0 < nr ? j->N - n0 : nr;
        for (int64_t b = b0; b < b1; b++) {
            const float *bp = j->Bp + b * K * mr;
            int64_t m0 = b * mr, h = j->M - m0 < mr ? j->M - m0 : mr;
            int whole = w == nr && h == mr && j->acc_sh == NULL;
            float *D = whole ? j->R + m0 * j->ldr + n0 : edge;
            int64_t ld = whole ? j->ldr : nr;
            if (isa == BS_MM_ISA_AVX512)
                tile_8x32_v16(D, ld, ap, bp, K);
#ifdef BS_MM_AVX2
            else if (fma)
                tile_4x16_fma(D, ld, ap, bp, K);
#endif
            else if (isa == BS_MM_ISA_AVX2)
                tile_4x16_v8(D, ld, ap, bp, K);
            else
                tile_4x8_v4(D, ld, ap, bp, K);
            if (j->acc_sh != NULL)
                mm_acc_tile(j, edge, nr, m0, n0, h, w);
            else if (!whole)
                for (int64_t i = 0; i < h; i++)
                    memcpy(j->R + (m0 + i) * j->ldr + n0, edge + i * nr,
                           (size_t)w * sizeof(float));
        }
    }
}

#ifdef BS_MM_AVX512
__attribute__((target("avx512f")))
static void mm_sweep_avx512(const bs_mm_job *j, int64_t p0, int64_t p1, int64_t b0, int64_t b1,
                            int pack)
{
    mm_sweep(j, p0, p1, b0, b1, pack, BS_MM_ISA_AVX512);
}
#endif
#ifdef BS_MM_AVX2
__attribute__((target("avx2")))
static void mm_sweep_avx2(const bs_mm_job *j, int64_t p0, int64_t p1, int64_t b0, int64_t b1,
                          int pack)
{
    mm_sweep(j, p0, p1, b0, b1, pack, BS_MM_ISA_AVX2);
}
#endif

static void mm_sweep_any(const bs_mm_job *j, int64_t p0, int64_t p1, int64_t b0, int64_t b1,
                         int pack)
{
#ifdef BS_MM_AVX512
    if (j->isa == BS_MM_ISA_AVX512) {
        mm_sweep_avx512(j, p0, p1, b0, b1, pack);
        return;
    }
#endif
#ifdef BS_MM_AVX2
    if (j->isa == BS_MM_ISA_AVX2) {
        mm_sweep_avx2(j, p0, p1, b0, b1, pack);
        return;
    }
#endif
    mm_sweep(j, p0, p1, b0, b1, pack, BS_MM_ISA_V4);
}

/* Part i of n of the product (a bs_pool_fn): a contiguous range of panels, each packed
** by the part that sweeps it, or of blocks when there are fewer panels than parts. Parts
** write disjoint elements of R with the same tile code, so the result does not depend on n. */
static void mm_part(void *arg, int32_t i, int32_t n)
{
    const bs_mm_job *j = arg;
    if (j->by_blocks)
        mm_sweep_any(j, 0, j->np, j->nb * i / n, j->nb * (i + 1) / n, 0);
    else
        mm_sweep_any(j, j->np * i / n, j->np * (i + 1) / n, 0, j->nb, 1);
}

/* Products of at least this many multiply-adds are split across the simulator's threads
** (about 20 us on one thread: well above the cost of waking a worker). */
#define MM_SPLIT_MIN ((int64_t)1 << 21)

/* Sweep job j (its B panels packed): split over the simulator's threads when large. */
void bs_mm_run(bs_kctx *k, bs_mm_job *j)
{
    int32_t nparts = j->K * j->M * j->N >= MM_SPLIT_MIN ?
                     bs_pool_threads(bs_pool_get(k->ks->pool)) : 1;
    if (nparts > 1 && j->np < nparts) {           /* few panels: split the blocks */
        j->by_blocks = 1;
        j->a_exact = bs_mm_pack(j->Ap, &j->a, j->K, j->N, j->nr, 0, j->np);
        if (nparts > j->nb)
            nparts = (int32_t)j->nb;
    }
    if (nparts > 1)
        bs_pool_run(bs_pool_get(k->ks->pool), mm_part, j, nparts);
    else
        mm_sweep_any(j, 0, j->np, 0, j->nb, 1);
}

/* The widest tile this CPU runs (BIRSIM_MM_ISA=0/1/2 caps it, for tests of every path). */
int bs_mm_isa(void)
{
    int best = BS_MM_ISA_V4, cap = BS_MM_ISA_AVX512;
    const char *env = getenv("BIRSIM_MM_ISA");
    if (env != NULL && env[0] >= '0' && env[0] <= '2' && env[1] == '\0')
        cap = env[0] - '0';
#ifdef BS_MM_AVX2
    if (__builtin_cpu_supports("avx2"))
        best = BS_MM_ISA_AVX2;
#endif
#ifdef BS_MM_AVX512
    if (__builtin_cpu_supports("avx512f"))
        best = BS_MM_ISA_AVX512;
#endif
    return best < cap ? best : cap;
}

/* A [K, M]^T x [K, N] job on this CPU's widest tile; buffers and operands still unset. */
void bs_mm_job_init(bs_mm_job *j, int64_t K, int64_t M, int64_t N)
{
    memset(j, 0, sizeof *j);
    j->isa = bs_mm_isa();
#ifdef BS_MM_AVX2
    j->fma = j->isa == BS_MM_ISA_AVX2 && __builtin_cpu_supports("fma");
#endif
    j->mr = mm_geom[j->isa].mr;
    j->nr = mm_geom[j->isa].nr;
    j->K = K;
    j->M = M;
    j->N = N;
    j->np = (N + j->nr - 1) / j->nr;
    j->nb = (M + j->mr - 1) / j->mr;
}

/* The product of two dense fp32 operands (kernel.h), for MatmultMx: the driver above with
** both operands packed from plain row-major matrices. */
bs_status bs_matmul_f32(bs_kctx *k, int slot, float *R, const float *A, const float *B,
                        int64_t K, int64_t M, int64_t N, const char *what, bs_error *err)
{
    bs_mm_job j;
    bs_mm_mat b;
    bs_mm_job_init(&j, K, M, N);
    j.R = R;
    j.ldr = N;
    j.Ap = bs_kstate_tmp(k->ks, slot, (size_t)(j.np * K * j.nr + j.nb * K * j.mr) * sizeof(float));
    if (j.Ap == NULL)
        return bs_errorf(err, BS_E_NOMEM, "%s: out of memory for a [%lld, %lld] x [%lld, %lld] "
                         "product", what, (long long)K, (long long)M, (long long)K, (long long)N);
    j.Bp = j.Ap + j.np * K * j.nr;
    j.a = (bs_mm_mat){(const uint8_t *)A, 4 * N, 4, BS_DT_float32};
    b = (bs_mm_mat){(const uint8_t *)B, 4 * M, 4, BS_DT_float32};
    bs_mm_pack((float *)j.Bp, &b, K, M, j.mr, 0, j.nb);
    bs_mm_run(k, &j);
    return BS_OK;
}
