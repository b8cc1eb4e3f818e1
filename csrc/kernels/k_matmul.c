/* kernels/k_matmul.c -- Matmult: res[M,N] = stationary[K,M]^T . moving[K,N] in fp32 on the
** tiled product (kmatmul.c), then the PSUM write-back (k_psum.c; docs/spec/machine-model.md
** §4.4, §6.2; docs/spec/BIR-JSON.md "Operand conventions"). The operands are gathered into
** scratch before anything is written, so overlapping operands are safe. */
#include "kmatmul.h"
#ifdef BS_MM_AVX2
#include "ktrans.h"
#endif

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

static int mm_is_identity(const bs_mm_mat *a, int64_t K, int64_t N)
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

/* R[m][n] = B[n][m] + 0 for m < M, n < K (R's rows ldr apart, B's ldb): 8 x 8 blocks in
** AVX2 registers, the edges one element at a time. */
#ifdef BS_MM_AVX2
__attribute__((target("avx2")))
static void mm_transpose_avx2(float *R, int64_t ldr, const float *B, int64_t ldb, int64_t K,
                              int64_t M)
{
    int64_t m8 = M / 8 * 8, k8 = K / 8 * 8;
    for (int64_t m0 = 0; m0 < m8; m0 += 8)
        for (int64_t n0 = 0; n0 < k8; n0 += 8)
            bs_transpose8_avx2(B + n0 * ldb + m0, ldb, R + m0 * ldr + n0, ldr, 1);
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = m < m8 ? k8 : 0; n < K; n++)
            R[m * ldr + n] = B[n * ldb + m] + 0.0f;
}
#endif

/* 1 if none of the n fp32 values at p is an inf or a NaN. */
BS_AVX2_CLONES
static int mm_finite_row(const uint8_t *p, int64_t n)
{
    uint32_t bad = 0, u;
    for (int64_t i = 0; i < n; i++) {
        memcpy(&u, p + 4 * i, sizeof u);
        bad |= (u & 0x7f800000u) == 0x7f800000u;
    }
    return !bad;
}

/* R[m][n] = B[n][m] + 0 for m < M, n < K (R's rows ldr apart); 0, R untouched, when a
** value of B is not finite. On AVX2 a dense fp32 B is checked, then transposed straight
** from its rows in 8 x 8 register blocks; any other B is decoded row by row into Bd
** (K * M floats) and transposed from there: on AVX2 the same way, else in 16 x 16 blocks
** (R's rows are often a power of two apart: columns thrash the cache). */
static int mm_identity_product(float *R, int64_t ldr, const bs_mm_mat *b, int64_t K, int64_t M,
                               float *Bd)
{
#ifdef BS_MM_AVX2
    if (bs_mm_isa() >= BS_MM_ISA_AVX2 && b->dtype == BS_DT_float32 && b->cs == 4 &&
            b->rs % 4 == 0 && ((uintptr_t)b->data & 3) == 0) {
        for (int64_t n = 0; n < K; n++)
            if (!mm_finite_row(b->data + n * b->rs, M))
                return 0;
        mm_transpose_avx2(R, ldr, (const float *)b->data, b->rs / 4, K, M);
        return 1;
    }
#endif
    for (int64_t n = 0; n < K; n++) {
        float *d = Bd + n * M;
        bs_dt_load_row_f32(d, b->data + n * b->rs, b->cs, M, b->dtype);
        if (!mm_finite_row((const uint8_t *)d, M))
            return 0;
    }
#ifdef BS_MM_AVX2
    if (bs_mm_isa() >= BS_MM_ISA_AVX2) {
        mm_transpose_avx2(R, ldr, Bd, M, K, M);
        return 1;
    }
#endif
    for (int64_t m0 = 0; m0 < M; m0 += 16)
        for (int64_t n0 = 0; n0 < K; n0 += 16)
            for (int64_t m = m0; m < M && m < m0 + 16; m++)
                for (int64_t n = n0; n < K && n < n0 + 16; n++)
                    R[m * ldr + n] = Bd[n * M + m] + 0.0f;
    return 1;
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
    bs_mm_job j;
    bs_mm_mat b, r;
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
    bs_mm_job_init(&j, K, M, N);
    if (k->out[0].dtype == BS_DT_float32 && bs_mm_as_mat(&k->out[0], M, N, &r) &&
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
    a_mat = !prep && bs_mm_as_mat(&k->in[0], K, N, &j.a);
    b_mat = !prep && bs_mm_as_mat(&k->in[1], K, M, &b);
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
        b = (bs_mm_mat){(const uint8_t *)dense, 4 * M, 4, BS_DT_float32};
    }
    j.b_exact = bs_mm_pack((float *)j.Bp, &b, K, M, j.mr, 0, j.nb);
    if (!a_mat) {                                 /* B is packed: dense is free again */
        bs_view_to_f32(dense, &k->in[0]);
        if (prep)
            mm_prepare(dense, K, N, pp.perf, pp.zp[0], dense + K * (M > N ? M : N));
        j.a = (bs_mm_mat){(const uint8_t *)dense, 4 * N, 4, BS_DT_float32};
    }
    bs_mm_run(k, &j);
    if (!direct)
        return bs_matmul_write(k, flags, j.R, "Matmult", err);
    return BS_OK;
}
