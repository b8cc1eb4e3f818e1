/* kernels/k_matmul.c -- Matmult: res[M,N] = stationary[K,M]^T . moving[K,N] in fp32, then the
** PSUM write-back (k_psum.c; docs/spec/machine-model.md §4.4, §6.2; docs/spec/BIR-JSON.md
** "Operand conventions").
**
** Numerics: every product is rounded to fp32 and added to a running sum that starts at
** +0 and walks k = 0, 1, ... in order; no reassociation, and no FMA (the build uses
** -ffp-contract=off) except where it gives the same bits: when every product is exact in
** fp32 (tile_4x16_fma). Speed comes from computing many (m, n) sums at once, never from
** reordering one of them. The operands are gathered
** into scratch before anything is written, so overlapping operands are safe. */
#include <math.h>
#include <stdlib.h>
#include "kernel.h"
#include "../core/pool.h"

/* {=== The product ===} */

/* The tiles use GNU vector types. Wider-than-hardware vectors compile to stack traffic, so
** the 16-lane tile runs only in a target("avx512f") copy of the driver and the 8-lane one
** only in a target("avx2") copy, picked at run time; everything else uses the 4-lane tile
** (SSE2 / NEON width). always_inline makes sure each copy really is compiled for its own
** target. Neither target enables contraction: the build uses -ffp-contract=off, so a*b+c
** stays a rounded product and a rounded sum; the one fused multiply-add is the explicit
** tile_4x16_fma, for exact products only. */
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__)) && !defined(BS_MM_NO_AVX2)
#define MM_AVX2 1
#if !defined(BS_MM_NO_AVX512)
#define MM_AVX512 1
#endif
#endif
#define MM_INLINE static inline __attribute__((always_inline))
#ifdef MM_AVX2
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

#ifdef MM_AVX2
/* The 4 x 16 tile with fused multiply-adds, for products that are all exact in fp32 (both
** operands' values narrow and in range: mm_pack_panels): then fma(a, b, s) = round(a*b + s)
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

/* Tile geometry of each instruction-set level. */
enum { MM_ISA_V4 = 0, MM_ISA_AVX2 = 1, MM_ISA_AVX512 = 2 };
static const struct { int64_t mr, nr; } mm_geom[3] = { {4, 8}, {4, 16}, {8, 32} };

/* {=== Packing ===} */

/* A [rows, cols] operand as one pointer and two byte strides. */
typedef struct mm_mat {
    const uint8_t *data;
    int64_t rs, cs;          /* row and column strides in bytes */
    int32_t dtype;
} mm_mat;

/* v as a [rows, cols] matrix (row-major element order), if one pointer and two strides
** describe it; 0 otherwise. */
static int mm_as_mat(const bs_view *v, int64_t rows, int64_t cols, mm_mat *m)
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

/* Columns of one row decoded at a time by mm_pack_panels: a multiple of every nr. */
#define MM_PACK_CH 256

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

/* n bf16 values at s widened into d (a shift: exact); always_inline with a constant n, so
** each tile width gets its own straight-line vector code. */
MM_INLINE void mm_widen_n(float *d, const uint8_t *s, int64_t n)
{
    for (int64_t c = 0; c < n; c++) {
        uint16_t h;
        uint32_t u;
        memcpy(&h, s + 2 * c, sizeof h);
        u = (uint32_t)h << 16;
        memcpy(d + c, &u, sizeof u);
    }
}

/* A tile width (nr) of bf16 values widened from s into d. */
static inline void mm_widen_nr(float *d, const uint8_t *s, int64_t nr)
{
    switch (nr) {
    case 4:  mm_widen_n(d, s, 4); break;
    case 8:  mm_widen_n(d, s, 8); break;
    case 16: mm_widen_n(d, s, 16); break;
    default: mm_widen_n(d, s, 32); break;
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
static int mm_pack_panels(float *dst, const mm_mat *x, int64_t rows, int64_t cols, int64_t nr,
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
            if (bf16 && w == span) {                /* widened straight into the panels */
                for (int64_t c = 0; c < span; c++) {
                    uint16_t h;
                    memcpy(&h, src + 2 * c, sizeof h);
                    wild |= mm_wild((uint32_t)h << 16);
                }
                for (int64_t c = 0; c < span; c += nr, d += rows * nr)
                    mm_widen_nr(d, src + 2 * c, nr);
                continue;
            }
            if (plain && w == span && ((uintptr_t)src & 3) == 0)
                row = (const float *)src;
            else if (plain)
                memcpy(buf, src, (size_t)w * sizeof(float));
            else if (bf16)
                for (int64_t c = 0; c < w; c++) {
                    uint16_t h;
                    uint32_t u;
                    memcpy(&h, src + 2 * c, sizeof h);
                    u = (uint32_t)h << 16;
                    memcpy(buf + c, &u, sizeof u);
                }
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

/* One product: R[m][n] = sum_k A[k][n] * B[k][m] for m < M, n < N, R rows ldr apart. */
typedef struct mm_job {
    float       *R;
    int64_t      ldr;
    float       *Ap;         /* panels of A: np * K * nr floats */
    const float *Bp;         /* blocks of B: nb * K * mr floats, packed before the sweep */
    mm_mat       a;          /* A as the view gives it; panels are packed by the sweep */
    int64_t      K, M, N, mr, nr, np, nb;
    int          isa;
    int          fma;        /* AVX2 on a CPU with FMA: tile_4x16_fma may run */
    int          a_exact;    /* A packed up front (by_blocks): mm_pack_panels' verdict */
    int          b_exact;    /* mm_pack_panels' verdict on B: with A's, FMA gives the bits */
    int          by_blocks;  /* parts split the blocks (A packed first), else the panels */
    const uint8_t *acc_sh;   /* accumulate in place: R's shadow (byte for byte), or NULL */
} mm_job;

/* 1 if none of the 4 shadow bytes at sh is zero (the has-zero-byte test). */
static inline int mm_written4(const uint8_t *sh)
{
    uint32_t w;
    memcpy(&w, sh, sizeof w);
    return ((w - 0x01010101u) & ~w & 0x80808080u) == 0;
}

/* Accumulate the h x w tile t (rows nr apart) onto R at (m0, n0): fp32(old + t) where
** every byte of the element was written, else t (as write_accumulate does). A row whose
** shadow says written throughout (the common case) takes a loop without the test. */
static inline void mm_acc_tile(const mm_job *j, const float *t, int64_t nr, int64_t m0,
                               int64_t n0, int64_t h, int64_t w)
{
    for (int64_t i = 0; i < h; i++) {
        float *o = j->R + (m0 + i) * j->ldr + n0;
        const float *ti = t + i * nr;
        const uint8_t *sh = j->acc_sh + ((m0 + i) * j->ldr + n0) * 4;
        int all = 1;
        for (int64_t c = 0; c < w; c++)
            all &= mm_written4(sh + 4 * c);
        for (int64_t c = 0; c < w; c++) {        /* memcpy: R may be unaligned */
            float old, v = ti[c];
            memcpy(&old, o + c, sizeof old);
            if (all || mm_written4(sh + 4 * c))
                v = old + v;
            memcpy(o + c, &v, sizeof v);
        }
    }
}

/* Panels [p0, p1) x blocks [b0, b1): pack the panels (when pack), then every tile. Tiles
** that stick out of R go through a local buffer. */
MM_INLINE void mm_sweep(const mm_job *j, int64_t p0, int64_t p1, int64_t b0, int64_t b1,
                        int pack, int isa)
{
    const int64_t mr = mm_geom[isa].mr, nr = mm_geom[isa].nr, K = j->K;
    float edge[8 * 32];
    int exact = pack ? mm_pack_panels(j->Ap, &j->a, K, j->N, nr, p0, p1) : j->a_exact;
    int fma = isa == MM_ISA_AVX2 && j->fma && j->b_exact && exact;
    for (int64_t p = p0; p < p1; p++) {
        const float *ap = j->Ap + p * K * nr;
        int64_t n0 = p * nr, w = j->N - n0 < nr ? j->N - n0 : nr;
        for (int64_t b = b0; b < b1; b++) {
            const float *bp = j->Bp + b * K * mr;
            int64_t m0 = b * mr, h = j->M - m0 < mr ? j->M - m0 : mr;
            int whole = w == nr && h == mr && j->acc_sh == NULL;
            float *D = whole ? j->R + m0 * j->ldr + n0 : edge;
            int64_t ld = whole ? j->ldr : nr;
            if (isa == MM_ISA_AVX512)
                tile_8x32_v16(D, ld, ap, bp, K);
#ifdef MM_AVX2
            else if (fma)
                tile_4x16_fma(D, ld, ap, bp, K);
#endif
            else if (isa == MM_ISA_AVX2)
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

#ifdef MM_AVX512
__attribute__((target("avx512f")))
static void mm_sweep_avx512(const mm_job *j, int64_t p0, int64_t p1, int64_t b0, int64_t b1,
                            int pack)
{
    mm_sweep(j, p0, p1, b0, b1, pack, MM_ISA_AVX512);
}
#endif
#ifdef MM_AVX2
__attribute__((target("avx2")))
static void mm_sweep_avx2(const mm_job *j, int64_t p0, int64_t p1, int64_t b0, int64_t b1,
                          int pack)
{
    mm_sweep(j, p0, p1, b0, b1, pack, MM_ISA_AVX2);
}
#endif

static void mm_sweep_any(const mm_job *j, int64_t p0, int64_t p1, int64_t b0, int64_t b1,
                         int pack)
{
#ifdef MM_AVX512
    if (j->isa == MM_ISA_AVX512) {
        mm_sweep_avx512(j, p0, p1, b0, b1, pack);
        return;
    }
#endif
#ifdef MM_AVX2
    if (j->isa == MM_ISA_AVX2) {
        mm_sweep_avx2(j, p0, p1, b0, b1, pack);
        return;
    }
#endif
    mm_sweep(j, p0, p1, b0, b1, pack, MM_ISA_V4);
}

/* Part i of n of the product (a bs_pool_fn): a contiguous range of panels, each packed
** by the part that sweeps it, or of blocks when there are fewer panels than parts. Parts
** write disjoint elements of R with the same tile code, so the result does not depend on n. */
static void mm_part(void *arg, int32_t i, int32_t n)
{
    const mm_job *j = arg;
    if (j->by_blocks)
        mm_sweep_any(j, 0, j->np, j->nb * i / n, j->nb * (i + 1) / n, 0);
    else
        mm_sweep_any(j, j->np * i / n, j->np * (i + 1) / n, 0, j->nb, 1);
}

/* Products of at least this many multiply-adds are split across the simulator's threads
** (about 20 us on one thread: well above the cost of waking a worker). */
#define MM_SPLIT_MIN ((int64_t)1 << 21)

/* Sweep job j (its B panels packed): split over the simulator's threads when large. */
static void mm_run(bs_kctx *k, mm_job *j)
{
    int32_t nparts = j->K * j->M * j->N >= MM_SPLIT_MIN ?
                     bs_pool_threads(bs_pool_get(k->ks->pool)) : 1;
    if (nparts > 1 && j->np < nparts) {           /* few panels: split the blocks */
        j->by_blocks = 1;
        j->a_exact = mm_pack_panels(j->Ap, &j->a, j->K, j->N, j->nr, 0, j->np);
        if (nparts > j->nb)
            nparts = (int32_t)j->nb;
    }
    if (nparts > 1)
        bs_pool_run(bs_pool_get(k->ks->pool), mm_part, j, nparts);
    else
        mm_sweep_any(j, 0, j->np, 0, j->nb, 1);
}

/* The widest tile this CPU runs (BIRSIM_MM_ISA=0/1/2 caps it, for tests of every path). */
static int mm_isa(void)
{
    int best = MM_ISA_V4, cap = MM_ISA_AVX512;
    const char *env = getenv("BIRSIM_MM_ISA");
    if (env != NULL && env[0] >= '0' && env[0] <= '2' && env[1] == '\0')
        cap = env[0] - '0';
#ifdef MM_AVX2
    if (__builtin_cpu_supports("avx2"))
        best = MM_ISA_AVX2;
#endif
#ifdef MM_AVX512
    if (__builtin_cpu_supports("avx512f"))
        best = MM_ISA_AVX512;
#endif
    return best < cap ? best : cap;
}

/* A [K, M]^T x [K, N] job on this CPU's widest tile; buffers and operands still unset. */
static void mm_job_init(mm_job *j, int64_t K, int64_t M, int64_t N)
{
    memset(j, 0, sizeof *j);
    j->isa = mm_isa();
#ifdef MM_AVX2
    j->fma = j->isa == MM_ISA_AVX2 && __builtin_cpu_supports("fma");
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
    mm_job j;
    mm_mat b;
    mm_job_init(&j, K, M, N);
    j.R = R;
    j.ldr = N;
    j.Ap = bs_kstate_tmp(k->ks, slot, (size_t)(j.np * K * j.nr + j.nb * K * j.mr) * sizeof(float));
    if (j.Ap == NULL)
        return bs_errorf(err, BS_E_NOMEM, "%s: out of memory for a [%lld, %lld] x [%lld, %lld] "
                         "product", what, (long long)K, (long long)M, (long long)K, (long long)N);
    j.Bp = j.Ap + j.np * K * j.nr;
    j.a = (mm_mat){(const uint8_t *)A, 4 * N, 4, BS_DT_float32};
    b = (mm_mat){(const uint8_t *)B, 4 * M, 4, BS_DT_float32};
    mm_pack_panels((float *)j.Bp, &b, K, M, j.mr, 0, j.nb);
    mm_run(k, &j);
    return BS_OK;
}

/* {=== Kernel ===} */

static int mm_input_dtype(int32_t dt)
{
    return dt == BS_DT_uint8 || bs_dtinfo_table[dt].kind == BS_DK_F;
}

/* Operand shapes and dtypes; fills K, M, N. `rows` = 2 in the double-row perf modes: the
** contraction runs over (partition, j in {0, 1}), so each free size is 2 x M or 2 x N. */
static bs_status mm_check(const bs_kctx *k, int64_t rows, int64_t *K, int64_t *M, int64_t *N,
                          bs_error *err)
{
    const bs_view *mv = &k->in[0], *st = &k->in[1], *out = &k->out[0];
    int64_t fm, fs;
    if (k->nin < 2 || k->nout < 1 || mv->ndim == 0 || st->ndim == 0 || out->ndim == 0)
        return bs_errorf(err, BS_E_SIM, "Matmult needs access patterns in[0] (moving), in[1] "
                         "(stationary) and out[0]");
    for (int32_t i = 0; i < 2; i++)
        if (!mm_input_dtype(k->in[i].dtype))
            return bs_errorf(err, BS_E_UNSUPPORTED, "Matmult: in[%d] is %s; inputs must be "
                             "float dtypes or uint8", (int)i, bs_dtinfo_table[k->in[i].dtype].name);
    if (!bs_dt_numeric(out->dtype))
        return bs_errorf(err, BS_E_UNSUPPORTED, "Matmult cannot write %s",
                         bs_dtinfo_table[out->dtype].name);
    fm = mv->count / mv->num[0];
    fs = st->count / st->num[0];
    if (rows == 2 && (fm % 2 != 0 || fs % 2 != 0))
        return bs_errorf(err, BS_E_SIM, "Matmult perf_mode double-row: in[0] has %lld and in[1] "
                         "%lld elements per partition; both must be 2 x (free size)",
                         (long long)fm, (long long)fs);
    *K = mv->num[0] * rows;
    *N = fm / rows;
    *M = fs / rows;
    if (st->num[0] != mv->num[0] || out->num[0] != *M || out->count != *M * *N)
        return bs_errorf(err, BS_E_SIM, "Matmult shapes do not match: moving in[0] is [%lld, "
                         "%lld], stationary in[1] is [%lld, %lld], out[0] is [%lld, %lld]; "
                         "need [K, %sN], [K, %sM] and [M, N]", (long long)mv->num[0],
                         (long long)fm, (long long)st->num[0], (long long)fs,
                         (long long)out->num[0], (long long)(out->count / out->num[0]),
                         rows == 2 ? "2 x " : "", rows == 2 ? "2 x " : "");
    return BS_OK;
}

/* {=== Matmult fields: operand preparation (zero points, double-row), is_transpose ===} */

typedef struct mm_prep {
    int64_t perf;           /* BS_PERF_* */
    float   zp[2];          /* zero point of in[0] (ifmap), in[1] (weights) */
} mm_prep;

/* Prepare a decoded operand X (K x F dense fp32, K = 2P rows in the double-row modes):
** DoubleRowSwInterleave de-interleaves each partition's 2F values (pair index innermost)
** into [j = 0: F][j = 1: F], the DoubleRow order, so row 2p + j is partition p's pair j;
** then the zero point is subtracted in fp32. tmp holds 2F floats. */
static void mm_prepare(float *X, int64_t K, int64_t F, int64_t perf, float zp, float *tmp)
{
    if (perf == BS_PERF_DoubleRowSwInterleave)
        for (int64_t p = 0; p < K / 2; p++) {
            float *x = X + p * 2 * F;
            for (int64_t f = 0; f < F; f++) {
                tmp[f] = x[2 * f];
                tmp[F + f] = x[2 * f + 1];
            }
            memcpy(x, tmp, (size_t)(2 * F) * sizeof(float));
        }
    if (zp != 0.0f)
        for (int64_t i = 0; i < K * F; i++)
            X[i] = X[i] - zp;
}

/* is_transpose: a bit-exact pass-through of the stationary operand. Every column n of the
** moving operand must select one row k(n) (a single 1.0, zeros elsewhere: an identity or
** permutation); out[m][n] = in1[k(n)][m]. Without accumulate the bits are copied (an fp8
** stationary into a 2-byte destination is zero-extended, as v3 writes it); otherwise, or
** for other dtype pairs, the value goes through fp32 and the PSUM write-back. */
static bs_status mm_transpose(bs_kctx *k, int64_t flags, const mm_prep *pp, int64_t K,
                              int64_t M, int64_t N, bs_error *err)
{
    const bs_view *st = &k->in[1], *out = &k->out[0];
    int32_t ssz = bs_dtinfo_table[st->dtype].size, osz = bs_dtinfo_table[out->dtype].size;
    int raw = (flags & 3) != 1 && (out->dtype == st->dtype || (ssz == 1 && osz == 2 &&
               bs_dtinfo_table[st->dtype].kind == BS_DK_F));
    int64_t F = M > N ? M : N;
    float *A = bs_kstate_tmp(k->ks, BS_KSLOT_A, (size_t)(K * N + 2 * F) * sizeof(float));
    float *B = bs_kstate_tmp(k->ks, BS_KSLOT_B, (size_t)(K * M) * sizeof(float));
    float *R = bs_kstate_tmp(k->ks, BS_KSLOT_C, (size_t)(M * N) * sizeof(float));
    int64_t *sel = bs_kstate_tmp(k->ks, BS_KSLOT_D, (size_t)N * sizeof(int64_t));
    if (A == NULL || B == NULL || R == NULL || sel == NULL)
        return bs_errorf(err, BS_E_NOMEM, "Matmult is_transpose: out of memory");
    bs_view_to_f32(A, &k->in[0]);
    bs_view_to_f32(B, &k->in[1]);
    mm_prepare(A, K, N, pp->perf, pp->zp[0], A + K * N);
    mm_prepare(B, K, M, pp->perf, pp->zp[1], A + K * N);
    for (int64_t n = 0; n < N; n++) {
        sel[n] = -1;
        for (int64_t kk = 0; kk < K; kk++) {
            float a = A[kk * N + n];
            if (a == 0.0f)
                continue;
            if (a != 1.0f || sel[n] >= 0)
                return bs_errorf(err, BS_E_SIM, "Matmult is_transpose: column %lld of in[0] "
                                 "(moving) is not a column of an identity (one 1.0, zeros "
                                 "elsewhere); element [%lld, %lld] is %g", (long long)n,
                                 (long long)kk, (long long)n, (double)a);
            sel[n] = kk;
        }
        if (sel[n] < 0)
            return bs_errorf(err, BS_E_SIM, "Matmult is_transpose: column %lld of in[0] "
                             "(moving) has no 1.0", (long long)n);
    }
    if (!raw || pp->perf != BS_PERF_None || pp->zp[1] != 0.0f) {
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++)
                R[m * N + n] = B[sel[n] * M + m];
        return bs_matmul_write(k, flags, R, "Matmult", err);
    }
    {   /* raw: gather in1's bits densely (into A's scratch, no longer needed), copy out */
        uint8_t *sraw = bs_kstate_tmp(k->ks, BS_KSLOT_A, (size_t)(K * M * ssz));
        uint8_t *oraw = (uint8_t *)R;                 /* M*N*4 bytes >= M*N*osz */
        bs_view ds, dout;
        if (sraw == NULL || osz > 4)
            return bs_errorf(err, BS_E_NOMEM, "Matmult is_transpose: out of memory");
        memset(&ds, 0, sizeof ds);
        ds.data = sraw; ds.dtype = st->dtype; ds.ndim = 1; ds.num[0] = K * M;
        ds.stride[0] = ssz; ds.count = K * M; ds.memtype = st->memtype;
        bs_copy_raw(&ds, st);
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) {
                uint8_t *o = oraw + (m * N + n) * osz;
                memset(o, 0, (size_t)osz);
                memcpy(o, sraw + (sel[n] * M + m) * ssz, (size_t)ssz);
            }
        dout = ds;
        dout.data = oraw; dout.dtype = out->dtype; dout.num[0] = M * N;
        dout.stride[0] = osz; dout.count = M * N;
        BS_TRY(bs_matmul_zero_region(k, flags, "Matmult", err));
        bs_copy_raw(out, &dout);
        return BS_OK;
    }
}

/* }=== */

/* {=== The PE transpose: an identity moving operand ===}
** in[0] the dense K x K fp32 or bf16 identity (1.0 on the diagonal, +0 elsewhere; bf16 read
** as 32-bit pairs): each sum is +0, +-0 terms and B[n][m] * 1, i.e. B[n][m] with -0 as +0,
** unless a non-finite B[k][m] makes a 0 * inf NaN: then 0 (R untouched) and the product runs. */
static uint32_t mm_or_words(const uint8_t *p, int64_t n)     /* OR of n 32-bit words */
{
    uint32_t acc = 0, u;
    for (int64_t i = 0; i < n; i++) {
        memcpy(&u, p + 4 * i, sizeof u);
        acc |= u;
    }
    return acc;
}

static int mm_is_identity(const mm_mat *a, int64_t K, int64_t N)
{
    int64_t e = a->dtype == BS_DT_bfloat16 && a->cs == 2 && N % 2 == 0 ? 2 : 1;
    if ((e == 1 && (a->dtype != BS_DT_float32 || a->cs != 4)) || K != N)
        return 0;
    for (int64_t kk = 0; kk < K; kk++) {     /* the row's words: the diagonal's, the others 0 */
        const uint8_t *row = a->data + kk * a->rs;
        int64_t dw = kk / e;
        uint32_t u;
        memcpy(&u, row + 4 * dw, sizeof u);
        if ((u ^ (0x3f800000u >> (16 * (e - 1 - kk % e)))) | mm_or_words(row, dw)
                | mm_or_words(row + 4 * (dw + 1), N / e - dw - 1))
            return 0;
    }
    return 1;
}

/* R[m][n] = B[n][m] + 0 for m < M, n < K (R's rows ldr apart), through Bd (K * M floats)
** in 16 x 16 blocks: R's rows are often a power of two apart (columns thrash the cache). */
static int mm_identity_product(float *R, int64_t ldr, const mm_mat *b, int64_t K, int64_t M,
                               float *Bd)
{
    int fin = 1;
    for (int64_t n = 0; n < K; n++) {
        float *d = Bd + n * M;
        bs_dt_load_row_f32(d, b->data + n * b->rs, b->cs, M, b->dtype);
        for (int64_t m = 0; m < M; m++) {
            fin &= isfinite(d[m]) != 0;
            d[m] = d[m] + 0.0f;                    /* -0 -> +0, every other value kept */
        }
    }
    for (int64_t m0 = 0; fin && m0 < M; m0 += 16)
        for (int64_t n0 = 0; n0 < K; n0 += 16)
            for (int64_t m = m0; m < M && m < m0 + 16; m++)
                for (int64_t n = n0; n < K && n < n0 + 16; n++)
                    R[m * ldr + n] = Bd[n * M + m];
    return fin;
}

/* }=== */

/* Matmult: out[0][m][n] (+)= sum_k (in[0][k][n] - zpI) * (in[1][k][m] - zpW); perf_mode
** DoubleRow reads in[0] as [P, 2, N] and in[1] as [P, 2, M] with k = 2p + j
** (DoubleRowSwInterleave: [P, N, 2] / [P, M, 2]); transpose: mm_transpose.
** i0 = accumulation flags:
** 2 (or 3) start = plain write, 1 accumulate = add onto elements whose shadow says
** written, 0 = plain write. Start/accumulate need a PSUM destination (E_SIM). E_SIM on
** shape mismatches, E_UNSUPPORTED on other dtypes, E_NOMEM.
** Both operands are packed (decoded to fp32) before anything is written, so an output
** overlapping an input is safe. A dense fp32 output that overlaps neither input is
** written (or accumulated onto, tile by tile) in place; otherwise the product goes into
** scratch, then is written back. */
bs_status bs_k_Matmult(bs_kctx *k, bs_error *err)
{
    int64_t K = 1, M = 1, N = 1, flags = BS_PI(k->insn, Matmult, acc_flags);
    int start = (flags & 2) != 0, accumulate = !start && (flags & 1) != 0, direct = 0;
    int a_mat, b_mat, prep;
    mm_job j;
    mm_mat b, r;
    mm_prep pp;
    float *dense = NULL;
    pp.perf = BS_PI(k->insn, Matmult, perf_mode);
    pp.zp[0] = (float)BS_PI(k->insn, Matmult, ifmap_zp);
    pp.zp[1] = (float)BS_PI(k->insn, Matmult, weights_zp);
    if (pp.perf != BS_PERF_None && pp.perf != BS_PERF_DoubleRow &&
        pp.perf != BS_PERF_DoubleRowSwInterleave)
        return bs_errorf(err, BS_E_UNSUPPORTED, "Matmult perf_mode %lld is not modelled",
                         (long long)pp.perf);
    BS_TRY(mm_check(k, pp.perf != BS_PERF_None ? 2 : 1, &K, &M, &N, err));
    if ((start || accumulate) && k->out[0].memtype != BS_MEM_PSUM)
        return bs_errorf(err, BS_E_SIM, "Matmult start/accumulate needs a PSUM destination");
    if (BS_PI(k->insn, Matmult, transpose))
        return mm_transpose(k, flags, &pp, K, M, N, err);
    /* zero points and the double-row modes: operands decoded, then prepared (mm_prepare) */
    prep = pp.perf != BS_PERF_None || pp.zp[0] != 0.0f || pp.zp[1] != 0.0f;
    mm_job_init(&j, K, M, N);
    if (k->out[0].dtype == BS_DT_float32 && mm_as_mat(&k->out[0], M, N, &r) &&
        !(start && bs_matmul_zero_region_of(k->insn) >= 0) &&   /* zeroing waits for inputs */
        r.cs == 4 && r.rs % 4 == 0 && r.rs >= 4 * N &&
        !bs_view_overlap(&k->out[0], &k->in[0]) && !bs_view_overlap(&k->out[0], &k->in[1])) {
        direct = 1;                               /* accumulate untracked = plain write */
        if (accumulate && k->out[0].shadow != NULL)
            j.acc_sh = k->out[0].shadow;          /* normalising kept data and shadow */
    }
    j.Ap = bs_kstate_tmp(k->ks, BS_KSLOT_A, (size_t)(j.np * K * j.nr) * sizeof(float));
    j.Bp = bs_kstate_tmp(k->ks, BS_KSLOT_B, (size_t)(j.nb * K * j.mr) * sizeof(float));
    j.R = direct ? (float *)r.data : bs_kstate_tmp(k->ks, BS_KSLOT_C, (size_t)(M * N) * sizeof(float));
    j.ldr = direct ? r.rs / 4 : N;
    a_mat = !prep && mm_as_mat(&k->in[0], K, N, &j.a);
    b_mat = !prep && mm_as_mat(&k->in[1], K, M, &b);
    if (!a_mat || !b_mat)                         /* an irregular pattern: decoded first */
        dense = bs_kstate_tmp(k->ks, BS_KSLOT_D,
                              (size_t)((K + 2) * (M > N ? M : N)) * sizeof(float));
    if (j.Ap == NULL || j.Bp == NULL || j.R == NULL || ((!a_mat || !b_mat) && dense == NULL))
        return bs_errorf(err, BS_E_NOMEM, "Matmult: out of memory for a [%lld, %lld] x [%lld, "
                         "%lld] product", (long long)K, (long long)M, (long long)K, (long long)N);
    if (!accumulate && a_mat && b_mat && mm_is_identity(&j.a, K, N)
            && mm_identity_product(j.R, j.ldr, &b, K, M, (float *)j.Bp))
        return direct ? BS_OK : bs_matmul_write(k, flags, j.R, "Matmult", err);
    if (!b_mat) {
        bs_view_to_f32(dense, &k->in[1]);
        if (prep)
            mm_prepare(dense, K, M, pp.perf, pp.zp[1], dense + K * (M > N ? M : N));
        b = (mm_mat){(const uint8_t *)dense, 4 * M, 4, BS_DT_float32};
    }
    j.b_exact = mm_pack_panels((float *)j.Bp, &b, K, M, j.mr, 0, j.nb);
    if (!a_mat) {                                 /* B is packed: dense is free again */
        bs_view_to_f32(dense, &k->in[0]);
        if (prep)
            mm_prepare(dense, K, N, pp.perf, pp.zp[0], dense + K * (M > N ? M : N));
        j.a = (mm_mat){(const uint8_t *)dense, 4 * N, 4, BS_DT_float32};
    }
    mm_run(k, &j);
    if (!direct)
        return bs_matmul_write(k, flags, j.R, "Matmult", err);
    return BS_OK;
}
