/* kernels/k_matmul.c -- Matmult: res[M,N] = stationary[K,M]^T . moving[K,N] in fp32, then the
** PSUM write-back rules (docs/spec/machine-model.md §4.4, §6.2; docs/spec/BIR-JSON.md "Operand conventions").
**
** Numerics: every product is rounded to fp32 and added to a running sum that starts at
** +0 and walks k = 0, 1, ... in order; no FMA (the build uses -ffp-contract=off and the
** AVX2 copy of the driver is compiled without the FMA extension) and no reassociation. Speed comes from computing
** many (m, n) sums at once, never from reordering one of them. The operands are gathered
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
** stays a rounded product and a rounded sum (checked: the object has no vfmadd). */
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__)) && !defined(BS_MM_NO_AVX2)
#define MM_AVX2 1
#if !defined(BS_MM_NO_AVX512)
#define MM_AVX512 1
#endif
#endif
#define MM_INLINE static inline __attribute__((always_inline))

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

/* One panel of a dense bf16 operand (rows rs bytes apart): widened by a shift (exact),
** zero-padded to nr; a loop of its own, so the other dtypes' loops compile as before. */
static void mm_pack_bf16(float *d, const uint8_t *src, int64_t rs, int64_t rows, int64_t w,
                         int64_t nr)
{
    for (int64_t r = 0; r < rows; r++, d += nr, src += rs) {
        for (int64_t c = 0; c < w; c++) {
            uint16_t h;
            uint32_t u;
            memcpy(&h, src + 2 * c, sizeof h);
            u = (uint32_t)h << 16;
            memcpy(d + c, &u, sizeof u);
        }
        memset(d + w, 0, (size_t)(nr - w) * sizeof(float));
    }
}

/* Panels [p0, p1) of nr columns of x (rows x cols) into dst + p0 * rows * nr: panel p
** holds x[r][p*nr + j] at p*rows*nr + r*nr + j, decoded to fp32, the last one zero-padded.
** Row by row (dense fp32 rows are one memcpy, bf16 rows mm_pack_bf16): no cursor per
** 32-element row. One-byte
** dtypes (fp8, uint8) decode through a 256-entry table filled by the same decoder. */
static void mm_pack_panels(float *dst, const mm_mat *x, int64_t rows, int64_t cols, int64_t nr,
                           int64_t p0, int64_t p1)
{
    int plain = x->dtype == BS_DT_float32 && x->cs == 4;
    int bytewise = bs_dtinfo_table[x->dtype].size == 1 && bs_dtinfo_table[x->dtype].lanes == 1;
    float lut[256];
    if (bytewise) {
        uint8_t codes[256];
        for (int c = 0; c < 256; c++)
            codes[c] = (uint8_t)c;
        bs_dt_load_row_f32(lut, codes, 1, 256, x->dtype);
    }
    for (int64_t p = p0; p < p1; p++) {
        int64_t w = cols - p * nr < nr ? cols - p * nr : nr;
        float *d = dst + p * rows * nr;
        const uint8_t *src = x->data + p * nr * x->cs;
        if (x->dtype == BS_DT_bfloat16 && x->cs == 2) {      /* dense bf16 */
            mm_pack_bf16(d, src, x->rs, rows, w, nr);
            continue;
        }
        for (int64_t r = 0; r < rows; r++, d += nr, src += x->rs) {
            if (plain)
                memcpy(d, src, (size_t)w * sizeof(float));
            else if (bytewise)
                for (int64_t c = 0; c < w; c++)
                    d[c] = lut[src[c * x->cs]];
            else
                bs_dt_load_row_f32(d, src, x->cs, w, x->dtype);
            if (w < nr)
                memset(d + w, 0, (size_t)(nr - w) * sizeof(float));
        }
    }
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
** every byte of the element was written, else t (as write_accumulate does). */
static inline void mm_acc_tile(const mm_job *j, const float *t, int64_t nr, int64_t m0,
                               int64_t n0, int64_t h, int64_t w)
{
    for (int64_t i = 0; i < h; i++) {
        float *o = j->R + (m0 + i) * j->ldr + n0;
        const uint8_t *sh = j->acc_sh + ((m0 + i) * j->ldr + n0) * 4;
        for (int64_t c = 0; c < w; c++) {
            float old, v = t[i * nr + c];
            memcpy(&old, o + c, sizeof old);
            if (mm_written4(sh + 4 * c))
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
    if (pack)
        mm_pack_panels(j->Ap, &j->a, K, j->N, nr, p0, p1);
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
        mm_pack_panels(j->Ap, &j->a, j->K, j->N, j->nr, 0, j->np);
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

/* {=== Write-back ===} */

/* 1 if none of the `size` shadow bytes at sh is zero (4 bytes: the has-zero-byte test). */
static inline int all_written(const uint8_t *sh, int32_t size)
{
    if (size == 4) {
        uint32_t w;
        memcpy(&w, sh, sizeof w);
        return ((w - 0x01010101u) & ~w & 0x80808080u) == 0;
    }
    for (int32_t b = 0; b < size; b++)
        if (sh[b] == 0)
            return 0;
    return 1;
}

/* One row segment of accumulate: n <= BS_CHUNK elements `stride` bytes apart at e (shadow
** at sh, or NULL). Decodes and encodes whole rows; unwritten elements take res as is. */
static void accumulate_row(uint8_t *e, const uint8_t *sh, int64_t stride, int64_t n,
                           int32_t dt, const float *res)
{
    float v[BS_CHUNK];
    int32_t size = bs_dtinfo_table[dt].size;
    bs_dt_load_row_f32(v, e, stride, n, dt);
    if (sh == NULL)
        memcpy(v, res, (size_t)n * sizeof(float));
    else if (stride == 4 && size == 4)              /* dense fp32 PSUM: a branch-free loop */
        for (int64_t j = 0; j < n; j++)
            v[j] = all_written(sh + j * 4, 4) ? v[j] + res[j] : res[j];
    else
        for (int64_t j = 0; j < n; j++)
            v[j] = all_written(sh + j * stride, size) ? v[j] + res[j] : res[j];
    bs_dt_store_row_f32(e, stride, v, n, dt);
}

/* Accumulate: out := fp32(old + res) where every byte of the element was written, else
** out := res. Walks out's pattern with an odometer so the shadow offset is the data's. */
static void write_accumulate(const bs_view *o, const float *res)
{
    int64_t idx[BS_MAX_DIMS] = {0}, off = 0, pos = 0;
    int32_t nd = o->ndim;
    int64_t inner = o->num[nd - 1], istride = o->stride[nd - 1];
    while (pos < o->count) {
        for (int64_t j = 0; j < inner; j += BS_CHUNK) {
            int64_t n = inner - j < BS_CHUNK ? inner - j : BS_CHUNK;
            int64_t at = off + j * istride;
            accumulate_row(o->data + at, o->shadow != NULL ? o->shadow + at : NULL, istride, n,
                           o->dtype, res + pos + j);
        }
        pos += inner;
        for (int32_t d = nd - 2; d >= 0; d--) {       /* next row */
            off += o->stride[d];
            if (++idx[d] < o->num[d])
                break;
            off -= o->num[d] * o->stride[d];
            idx[d] = 0;
        }
    }
}

/* {=== psum_zero_region ===}
** birsim's reading (README "Choices"; docs/spec/machine-model.md §4.4: a start "memsets the PSUM
** region to 0 (2^psum_zero_region banks), then writes"): with the key given (r >= 0) and
** the start bit set, before the result is written the window of 2^r PSUM banks (2 KiB
** per partition each) aligned to 2^r banks that holds out[0]'s first byte is zeroed on
** every partition out[0] spans, bytes of other tensors included; they count as written.
** out[0] reaching past the window is an E_SIM. Without the key only out[0] is written.
** A location not placed in PSUM is its own bank space (its byte 0 starts a bank). */

#define MM_PSUM_BANK 2048

/* r, or -1 when the key is absent (the slot holds 1 + r, 0 when absent) */
static int64_t zero_region_of(const bs_insn *in)
{
    switch (in->op) {
    case BS_OP_Matmult:       return BS_PI(in, Matmult, zero_region) - 1;
    case BS_OP_MatmultMx:     return BS_PI(in, MatmultMx, zero_region) - 1;
    case BS_OP_MatmultSparse: return BS_PI(in, MatmultSparse, zero_region) - 1;
    default:                  return -1;
    }
}

static bs_status zero_region(const bs_kctx *k, int64_t flags, const char *op, bs_error *err)
{
    const bs_view *v = &k->out[0];
    const bs_store *st = k->ostore[0];
    int64_t r = zero_region_of(k->insn), idx[BS_MAX_DIMS] = {0};
    int64_t pmin = INT64_MAX, pmax = -1, bmin = INT64_MAX, bend = -1, addr, row, w, w0, w1;
    int32_t size = bs_dtinfo_table[v->dtype].size;
    if (r < 0 || (flags & 2) == 0 || st == NULL || v->count == 0)
        return BS_OK;
    if (v->gathered || st->data == NULL || st->pitch <= 0)
        return bs_errorf(err, BS_E_SIM, "%s psum_zero_region: out[0] must be one linear access "
                         "pattern of a PSUM tensor", op);
    addr = k->prog->locs[st->loc].placed ? k->prog->locs[st->loc].addr : 0;
    row = k->prog->locs[st->loc].placed ? st->pitch : st->bpp;
    for (int64_t e = 0; e < v->count; e++) {          /* every element's partition and byte */
        int64_t off = (int64_t)(v->data - st->data), p, b;
        for (int32_t d = 0; d < v->ndim; d++)
            off += idx[d] * v->stride[d];
        p = off / st->pitch;
        b = off - p * st->pitch;
        if (p < pmin) pmin = p;
        if (p > pmax) pmax = p;
        if (b < bmin) bmin = b;
        if (b + size > bend) bend = b + size;
        for (int32_t d = v->ndim - 1; d >= 0; d--) {
            if (++idx[d] < v->num[d])
                break;
            idx[d] = 0;
        }
    }
    w = (int64_t)MM_PSUM_BANK << r;
    w0 = (bmin + addr) / w * w;
    w1 = w0 + w;
    if (bend + addr > w1)
        return bs_errorf(err, BS_E_SIM, "%s psum_zero_region %lld: out[0] holds bytes [%lld, "
                         "%lld) of each partition, past the %lld-bank window [%lld, %lld) the "
                         "start zeroes", op, (long long)r, (long long)(bmin + addr),
                         (long long)(bend + addr), (long long)(w / MM_PSUM_BANK),
                         (long long)w0, (long long)w1);
    if (w1 > row)
        w1 = row;
    for (int64_t p = pmin; p <= pmax; p++) {
        memset(st->data + p * st->pitch + (w0 - addr), 0, (size_t)(w1 - w0));
        if (st->shadow != NULL)
            memset(st->shadow + p * st->pitch + (w0 - addr), 1, (size_t)(w1 - w0));
    }
    return BS_OK;
}
/* }=== */

/* The PSUM write-back of a matmul-family result res (M x N fp32, out[0]'s element order)
** with accumulation flags `flags`: 2 (or 3) start = plain write, 1 accumulate = add onto
** elements whose shadow says written, 0 = plain write. Start/accumulate need a PSUM
** destination (E_SIM naming `op`). Shared with k_mx.c (MatmultMx) and is_transpose. */
bs_status bs_matmul_write(const bs_kctx *k, int64_t flags, const float *res, const char *op,
                          bs_error *err)
{
    int start = (flags & 2) != 0, accumulate = !start && (flags & 1) != 0;
    if ((start || accumulate) && k->out[0].memtype != BS_MEM_PSUM)
        return bs_errorf(err, BS_E_SIM, "%s start/accumulate needs a PSUM destination", op);
    BS_TRY(zero_region(k, flags, op, err));
    if (accumulate)
        write_accumulate(&k->out[0], res);
    else
        bs_view_from_f32(&k->out[0], res);
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
        BS_TRY(zero_region(k, flags, "Matmult", err));
        bs_copy_raw(out, &dout);
        return BS_OK;
    }
}

/* }=== */

/* {=== The PE transpose: an identity moving operand ===}
** in[0] the dense K x K fp32 or bf16 identity (1.0 on the diagonal, +0 elsewhere; bf16 read
** as 32-bit pairs): each sum is +0, +-0 terms and B[n][m] * 1, i.e. B[n][m] with -0 as +0,
** unless a non-finite B[k][m] makes a 0 * inf NaN: then 0 (R untouched) and the product runs. */
static int mm_is_identity(const mm_mat *a, int64_t K, int64_t N)
{
    uint32_t off = 0, u, e = a->dtype == BS_DT_bfloat16 && a->cs == 2 && N % 2 == 0 ? 2 : 1;
    if ((e == 1 && (a->dtype != BS_DT_float32 || a->cs != 4)) || K != N)
        return 0;
    for (int64_t kk = 0; kk < K && off == 0; kk++)     /* OR of each row, the diagonal as 0 */
        for (int64_t n = 0; n < N / e; n++) {
            memcpy(&u, a->data + kk * a->rs + 4 * n, sizeof u);
            off |= u ^ (n == kk / e ? 0x3f800000u >> (16 * (e - 1 - kk % e)) : 0u);
        }
    return off == 0;
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
        !(start && zero_region_of(k->insn) >= 0) &&       /* zeroing waits for the inputs */
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
    mm_pack_panels((float *)j.Bp, &b, K, M, j.mr, 0, j.nb);
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
