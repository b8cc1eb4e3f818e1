/* kernels/k_matmul.c -- Matmult: res[M,N] = stationary[K,M]^T . moving[K,N] in fp32, then the
** PSUM write-back rules (machine-model.md §4.4, §6.2; BIR-JSON.md "Operand conventions").
**
** Numerics: every product is rounded to fp32 and added to a running sum that starts at
** +0 and walks k = 0, 1, ... in order; no FMA (the build uses -ffp-contract=off and the
** AVX2 copy of the driver is compiled without the FMA extension) and no reassociation. Speed comes from computing
** many (m, n) sums at once, never from reordering one of them. The operands are gathered
** into scratch before anything is written, so overlapping operands are safe. */
#include "kernel.h"

enum { SLOT_A = 0, SLOT_B = 1, SLOT_R = 2, SLOT_PACK = 3 };

/* {=== The product (dense fp32) ===} */

/* The tiles use GNU vector types. Wider-than-hardware vectors compile to stack traffic, so
** the 8-lane tile runs only in a target("avx2") copy of the driver, picked at run time;
** everything else uses the 4-lane tile (SSE2 / NEON width). always_inline makes sure each
** copy really is compiled for its own target. */
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__)) && !defined(BS_MM_NO_AVX2)
#define MM_AVX2 1
#endif
#define MM_INLINE static inline __attribute__((always_inline))

typedef float mm_v4 __attribute__((vector_size(16)));
typedef float mm_v8 __attribute__((vector_size(32)));

/* R[m0+i][n0+j] for i < 4, j < 8: eight 4-lane sums kept in registers over all k.
** a is the packed A panel (K x 8), b the packed B block (K x 4). memcpy does the
** unaligned vector loads and stores without passing vectors by value. The accumulators
** are named variables, not an array: at -O2 GCC keeps an array on the stack. */
MM_INLINE void tile_4x8_v4(float *R, const float *a, const float *b, int64_t K, int64_t N,
                           int64_t m0, int64_t n0)
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
    memcpy(R + (m0 + 0) * N + n0, &c00, sizeof c00);
    memcpy(R + (m0 + 0) * N + n0 + 4, &c01, sizeof c01);
    memcpy(R + (m0 + 1) * N + n0, &c10, sizeof c10);
    memcpy(R + (m0 + 1) * N + n0 + 4, &c11, sizeof c11);
    memcpy(R + (m0 + 2) * N + n0, &c20, sizeof c20);
    memcpy(R + (m0 + 2) * N + n0 + 4, &c21, sizeof c21);
    memcpy(R + (m0 + 3) * N + n0, &c30, sizeof c30);
    memcpy(R + (m0 + 3) * N + n0 + 4, &c31, sizeof c31);
}

/* The same with 8-lane vectors: R[m0+i][n0+j] for i < 4, j < 16 (panel K x 16). */
MM_INLINE void tile_4x16_v8(float *R, const float *a, const float *b, int64_t K, int64_t N,
                            int64_t m0, int64_t n0)
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
    memcpy(R + (m0 + 0) * N + n0, &c00, sizeof c00);
    memcpy(R + (m0 + 0) * N + n0 + 8, &c01, sizeof c01);
    memcpy(R + (m0 + 1) * N + n0, &c10, sizeof c10);
    memcpy(R + (m0 + 1) * N + n0 + 8, &c11, sizeof c11);
    memcpy(R + (m0 + 2) * N + n0, &c20, sizeof c20);
    memcpy(R + (m0 + 2) * N + n0 + 8, &c21, sizeof c21);
    memcpy(R + (m0 + 3) * N + n0, &c30, sizeof c30);
    memcpy(R + (m0 + 3) * N + n0 + 8, &c31, sizeof c31);
}

/* R[m][n] for m in [m_lo, m_hi), n in [n_lo, n_hi): loop order m, k, n. */
MM_INLINE void edge(float *R, const float *A, const float *B, int64_t K, int64_t M, int64_t N,
                    int64_t m_lo, int64_t m_hi, int64_t n_lo, int64_t n_hi)
{
    for (int64_t m = m_lo; m < m_hi; m++) {
        float *r = R + m * N;
        for (int64_t n = n_lo; n < n_hi; n++)
            r[n] = 0.0f;
        for (int64_t k = 0; k < K; k++) {
            const float *a = A + k * N;
            float b = B[k * M + m];
            for (int64_t n = n_lo; n < n_hi; n++)
                r[n] = r[n] + a[n] * b;
        }
    }
}

/* R (M x N): R[m][n] = sum_k A[k][n] * B[k][m] (A is K x N, B is K x M, all dense row-major
** fp32) with nr-wide panels (8 or 16). `pack` is scratch of K * (16 + M) floats. Rows of A
** and B are 2 KB / 512 B apart in the benchmark shape, which maps a k-walk onto a few L1
** sets; so B is packed once into 4-column blocks and each nr-column panel of A is packed
** before the m-tiles sweep it (measured 300 -> 184 us on [128,128]x[128,512], avx2). */
MM_INLINE void mm_drive(float *R, const float *A, const float *B, float *pack, int64_t K,
                        int64_t M, int64_t N, int64_t nr)
{
    int64_t M4 = M - M % 4, Nr = N - N % nr;
    float *ap = pack, *bp = pack + K * 16;
    for (int64_t m0 = 0; m0 < M4; m0 += 4)
        for (int64_t k = 0; k < K; k++)
            for (int64_t i = 0; i < 4; i++)
                bp[m0 * K + k * 4 + i] = B[k * M + m0 + i];
    for (int64_t n0 = 0; n0 < Nr; n0 += nr) {
        for (int64_t k = 0; k < K; k++)
            memcpy(ap + k * nr, A + k * N + n0, (size_t)nr * sizeof(float));
        for (int64_t m0 = 0; m0 < M4; m0 += 4) {
            if (nr == 16)
                tile_4x16_v8(R, ap, bp + m0 * K, K, N, m0, n0);
            else
                tile_4x8_v4(R, ap, bp + m0 * K, K, N, m0, n0);
        }
    }
    edge(R, A, B, K, M, N, 0, M4, Nr, N);
    edge(R, A, B, K, M, N, M4, M, 0, N);
}

#ifdef MM_AVX2
/* AVX2 has no FMA instructions, so nothing can fuse even if contraction were on. */
__attribute__((target("avx2")))
static void mm_compute_avx2(float *R, const float *A, const float *B, float *pack, int64_t K,
                            int64_t M, int64_t N)
{
    mm_drive(R, A, B, pack, K, M, N, 16);
}
#endif

static void mm_compute(float *R, const float *A, const float *B, float *pack, int64_t K,
                       int64_t M, int64_t N)
{
#ifdef MM_AVX2
    if (__builtin_cpu_supports("avx2")) {
        mm_compute_avx2(R, A, B, pack, K, M, N);
        return;
    }
#endif
    mm_drive(R, A, B, pack, K, M, N, 8);
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

/* The PSUM write-back of a matmul-family result res (M x N fp32, out[0]'s element order)
** with accumulation flags `flags`: 2 (or 3) start = plain write, 1 accumulate = add onto
** elements whose shadow says written, 0 = plain write. Start/accumulate need a PSUM
** destination (E_SIM naming `op`). Shared with k_mx.c (MatmultMx). */
bs_status bs_matmul_write(const bs_kctx *k, int64_t flags, const float *res, const char *op,
                          bs_error *err)
{
    int start = (flags & 2) != 0, accumulate = !start && (flags & 1) != 0;
    if ((start || accumulate) && k->out[0].memtype != BS_MEM_PSUM)
        return bs_errorf(err, BS_E_SIM, "%s start/accumulate needs a PSUM destination", op);
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

/* DoubleRowSwInterleave: each row of X (rows x 2F, pairs (f, j) interleaved as 2f + j)
** becomes [j = 0: F values][j = 1: F values], the DoubleRow order; tmp holds 2F floats. */
static void deinterleave_rows(float *X, int64_t rows, int64_t F, float *tmp)
{
    for (int64_t r = 0; r < rows; r++) {
        float *x = X + r * 2 * F;
        for (int64_t f = 0; f < F; f++) {
            tmp[f] = x[2 * f];
            tmp[F + f] = x[2 * f + 1];
        }
        memcpy(x, tmp, (size_t)(2 * F) * sizeof(float));
    }
}

/* is_transpose: a bit-exact pass-through of the stationary operand. Every column n of the
** moving operand must select one row k(n) (a single 1.0, zeros elsewhere: an identity or
** permutation); out[m][n] = in1[k(n)][m]. Without accumulate the bits are copied (an fp8
** stationary into a 2-byte destination is zero-extended, as v3 writes it); otherwise, or
** for other dtype pairs, the value goes through fp32 and the PSUM write-back. */
static bs_status mm_transpose(bs_kctx *k, int64_t flags, const float *A, const float *B,
                              float *R, int64_t K, int64_t M, int64_t N, bs_error *err)
{
    const bs_view *st = &k->in[1], *out = &k->out[0];
    int32_t ssz = bs_dtinfo_table[st->dtype].size, osz = bs_dtinfo_table[out->dtype].size;
    int raw = (flags & 3) != 1 && (out->dtype == st->dtype || (ssz == 1 && osz == 2 &&
               bs_dtinfo_table[st->dtype].kind == BS_DK_F));
    int64_t *sel = bs_kstate_tmp(k->ks, SLOT_PACK, (size_t)N * sizeof(int64_t));
    if (sel == NULL)
        return bs_errorf(err, BS_E_NOMEM, "Matmult is_transpose: out of memory");
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
    if (!raw) {
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++)
                R[m * N + n] = B[sel[n] * M + m];
        return bs_matmul_write(k, flags, R, "Matmult", err);
    }
    {   /* raw: gather in1's bits densely (into A's scratch, no longer needed), copy out */
        uint8_t *sraw = bs_kstate_tmp(k->ks, SLOT_A, (size_t)(K * M * ssz));
        uint8_t *oraw = (uint8_t *)R;                 /* M*N*4 bytes >= M*N*osz */
        bs_view ds = {0}, dout = {0};
        if (sraw == NULL || osz > 4)
            return bs_errorf(err, BS_E_NOMEM, "Matmult is_transpose: out of memory");
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
        bs_copy_raw(out, &dout);
        return BS_OK;
    }
}

/* Matmult: out[0][m][n] (+)= sum_k (in[0][k][n] - zpI) * (in[1][k][m] - zpW). Parameters:
** acc_flags (bs_matmul_write), ifmap_zp / weights_zp (zero points, subtracted in fp32),
** perf_mode (DoubleRow: in[0] is [P, 2, N] and in[1] [P, 2, M], the contraction runs over
** k = 2p + j; DoubleRowSwInterleave: the pair index is innermost, [P, N, 2] / [P, M, 2]),
** transpose (mm_transpose). E_SIM on shape mismatches, E_UNSUPPORTED on other dtypes,
** E_NOMEM. */
bs_status bs_k_Matmult(bs_kctx *k, bs_error *err)
{
    int64_t K = 1, M = 1, N = 1, flags = BS_PI(k->insn, Matmult, acc_flags);
    int64_t perf = BS_PI(k->insn, Matmult, perf_mode);
    float zpi = (float)BS_PI(k->insn, Matmult, ifmap_zp);
    float zpw = (float)BS_PI(k->insn, Matmult, weights_zp);
    int64_t rows = perf == BS_PERF_DoubleRow || perf == BS_PERF_DoubleRowSwInterleave ? 2 : 1;
    float *A, *B, *R, *pack;
    if (perf != BS_PERF_None && rows == 1)
        return bs_errorf(err, BS_E_UNSUPPORTED, "Matmult perf_mode %lld is not modelled",
                         (long long)perf);
    BS_TRY(mm_check(k, rows, &K, &M, &N, err));
    if ((flags & 3) != 0 && k->out[0].memtype != BS_MEM_PSUM)
        return bs_errorf(err, BS_E_SIM, "Matmult start/accumulate needs a PSUM destination");
    A = bs_kstate_tmp(k->ks, SLOT_A, (size_t)(K * N) * sizeof(float));
    B = bs_kstate_tmp(k->ks, SLOT_B, (size_t)(K * M) * sizeof(float));
    /* R doubles as the de-interleave row buffer (2 x max(M, N) floats) */
    R = bs_kstate_tmp(k->ks, SLOT_R, (size_t)(M * N > 2 * (M > N ? M : N) ? M * N
                                               : 2 * (M > N ? M : N)) * sizeof(float));
    pack = bs_kstate_tmp(k->ks, SLOT_PACK, (size_t)(K * (16 + M)) * sizeof(float));
    if (A == NULL || B == NULL || R == NULL || pack == NULL)
        return bs_errorf(err, BS_E_NOMEM, "Matmult: out of memory for a [%lld, %lld] x [%lld, "
                         "%lld] product", (long long)K, (long long)M, (long long)K, (long long)N);
    bs_view_to_f32(A, &k->in[0]);
    bs_view_to_f32(B, &k->in[1]);
    if (perf == BS_PERF_DoubleRowSwInterleave) {
        deinterleave_rows(A, K / 2, N, R);
        deinterleave_rows(B, K / 2, M, R);
    }
    if (zpi != 0.0f)
        for (int64_t j = 0; j < K * N; j++)
            A[j] = A[j] - zpi;
    if (zpw != 0.0f)
        for (int64_t j = 0; j < K * M; j++)
            B[j] = B[j] - zpw;
    if (BS_PI(k->insn, Matmult, transpose))
        return mm_transpose(k, flags, A, B, R, K, M, N, err);
    mm_compute(R, A, B, pack, K, M, N);
    return bs_matmul_write(k, flags, R, "Matmult", err);
}
