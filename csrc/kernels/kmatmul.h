/* kernels/kmatmul.h -- the tiled fp32 product of the matmul family (kmatmul.c): an
** operand as a strided matrix, its packing into panels, a job and its run. Matmult
** (k_matmul.c) fills a job from its views; bs_matmul_f32 (kernel.h) from dense arrays. */
#ifndef BS_KERNELS_KMATMUL_H
#define BS_KERNELS_KMATMUL_H

#include "kernel.h"

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__)) && !defined(BS_MM_NO_AVX2)
#define BS_MM_AVX2 1
#if !defined(BS_MM_NO_AVX512)
#define BS_MM_AVX512 1
#endif
#endif

/* The tile levels: 4 lanes (SSE2 / NEON), 8 (AVX2), 16 (AVX-512F). */
enum { BS_MM_ISA_V4 = 0, BS_MM_ISA_AVX2 = 1, BS_MM_ISA_AVX512 = 2 };

/* A [rows, cols] operand as one pointer and two byte strides. */
typedef struct bs_mm_mat {
    const uint8_t *data;
    int64_t rs, cs;          /* row and column strides in bytes */
    int32_t dtype;
} bs_mm_mat;

/* One product: R[m][n] = sum_k A[k][n] * B[k][m] for m < M, n < N, R rows ldr apart. */
typedef struct bs_mm_job {
    float       *R;
    int64_t      ldr;
    float       *Ap;         /* panels of A: np * K * nr floats */
    const float *Bp;         /* blocks of B: nb * K * mr floats, packed before the sweep */
    bs_mm_mat    a;          /* A as the view gives it; panels are packed by the sweep */
    int64_t      K, M, N, mr, nr, np, nb;
    int          isa;
    int          fma;        /* AVX2 on a CPU with FMA: tile_4x16_fma may run */
    int          a_exact;    /* A packed up front (by_blocks): bs_mm_pack's verdict */
    int          b_exact;    /* bs_mm_pack's verdict on B: with A's, FMA gives the bits */
    int          by_blocks;  /* parts split the blocks (A packed first), else the panels */
    const uint8_t *acc_sh;   /* accumulate in place: R's shadow (byte for byte), or NULL */
} bs_mm_job;

/* v as a [rows, cols] matrix (row-major element order), if one pointer and two strides
** describe it; 0 otherwise. */
int  bs_mm_as_mat(const bs_view *v, int64_t rows, int64_t cols, bs_mm_mat *m);
/* Panels [p0, p1) of nr columns of x (rows x cols) into dst + p0 * rows * nr, decoded to
** fp32, the last zero-padded; 1 when x is narrow and its values make exact products. */
int  bs_mm_pack(float *dst, const bs_mm_mat *x, int64_t rows, int64_t cols, int64_t nr,
                int64_t p0, int64_t p1);
/* The widest tile level this CPU runs (BIRSIM_MM_ISA=0/1/2 caps it). */
int  bs_mm_isa(void);
/* A [K, M]^T x [K, N] job on this CPU's widest tile; buffers and operands still unset. */
void bs_mm_job_init(bs_mm_job *j, int64_t K, int64_t M, int64_t N);
/* Sweep job j (B packed into j->Bp, b_exact set): split over the threads when large. */
void bs_mm_run(bs_kctx *k, bs_mm_job *j);

#endif
