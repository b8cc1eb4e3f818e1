/* kernels/kernel.h -- the kernel interface (house style G9).
**
** A kernel computes one instruction's data effect. The VM resolves every memory operand
** to a linear bs_view (bounds already checked), reads immediates and registers into
** imm[], checks for never-written input bytes, calls the kernel, then marks the outputs
** written. Kernels therefore never touch program structure, registers, sync state or
** shadows (exceptions: Matmult reads the PSUM shadow to decide write vs. add, and a
** Matmult-family start with psum_zero_region zeroes whole PSUM banks: bs_matmul_write).
** Views arrive exactly as the access pattern: in[k].num[0] is the partition extent.
** A kernel that does not care about partitions may bs_view_normalize() a copy.
**
** Arithmetic (docs/spec/machine-model.md §4, docs/spec/BIR-JSON.md "Execution rules"): inputs decode to fp32,
** every stage rounds to fp32 (RNE; the build uses -ffp-contract=off so nothing fuses),
** results encode to the output dtype with RNE and saturation (k_dtype.c; fp8 overflow
** follows the output view's `cast`, Simulator(fp8_overflow=...)). Read-all-then-
** write: when an output overlaps an input without being the same view, compute into a
** temporary first (bs_kstate_tmp).
**
** Kernels must not allocate except through bs_kstate_tmp, must not keep pointers past the
** call, and return BS_OK or an error status with a message (the VM adds the location). */
#ifndef BS_KERNELS_KERNEL_H
#define BS_KERNELS_KERNEL_H

#include "../core/common.h"
#include "../core/error.h"
#include "../ir/program.h"
#include "../mem/mem.h"
#include "kstate.h"

typedef struct bs_kctx {
    const bs_program *prog;
    const bs_insn    *insn;      /* the instruction; its slots: BS_PI/BS_PF/BS_PX (bs_ops.def) */
    const bs_opnd    *ins;       /* insn->nin operands */
    const bs_opnd    *outs;      /* insn->nout operands */
    int32_t           nin, nout;
    bs_view           in[BS_KMAX];    /* memory operands; ndim == 0 for immediates/registers */
    bs_view           out[BS_KMAX];
    double            imm[BS_KMAX];   /* value of ins[k] when it is an imm_value or register */
    int64_t           xval[4];        /* insn->x[j] evaluated by the VM (0 when x[j] < 0) */
    bs_kstate        *ks;
    /* The store of each memory output (set by the VM; NULL when a kernel is driven
    ** without one, as in the C unit tests). Only a Matmult-family start with
    ** psum_zero_region writes through it, past its operand (bs_matmul_write). */
    const bs_store   *ostore[BS_KMAX];
} bs_kctx;

typedef bs_status bs_kernel_fn(bs_kctx *k, bs_error *err);

/* The kernel of `op` (its bs_ops.def handler BS_K(Stem)), or NULL when the handler is
** BS_VM (the VM executes it: vm/exec.c) or BS_TODO (not implemented). */
bs_kernel_fn *bs_kernel_for(int32_t op);

/* {=== Kernel functions (one family per file), named by the handler column of bs_ops.def ===}
** Each is `bs_status bs_k_<Stem>(bs_kctx *k, bs_error *err)`, for each BS_K(Stem) row. */
#define BS_K(stem) bs_kernel_fn bs_k_##stem;
#define BS_VM(what)
#define BS_TODO
#define BS_OP(name, sim, fam, handler, sem) handler
#include "../bs_ops.def"
#undef BS_K
#undef BS_VM
#undef BS_TODO

/* {=== Dtype conversion (k_dtype.c) ===
** Decode: integers by value, floats exactly, float8_e8m0fnu as its raw byte value,
** packed x4 dtypes are not decodable (callers reject them; same-dtype copies are bit
** copies and never decode). Encode: round-to-nearest-even; integers saturate (NaN -> max
** for unsigned, sign-selected min/max for signed); fp8 saturates to its largest finite
** value (inf too), NaN stays NaN; bf16 NaN -> 0x7fc0 (sign kept), fp16 NaN -> 0x7e00;
** float32r keeps 10 explicit mantissa bits (RNE). */
float   bs_dt_load_f32(const uint8_t *p, int32_t dt);
void    bs_dt_store_f32(uint8_t *p, int32_t dt, float v);
/* Integer view for bit-vector ALU ops: integer dtypes by value, others via fp32 rounded
** to nearest-even integer (saturating to int64). Store: integer dtypes saturate to their
** range, except that 32-bit ones take any int32/uint32 value bit for bit and 64-bit ones
** keep the bits; float dtypes go through fp32. */
int64_t bs_dt_load_i64(const uint8_t *p, int32_t dt);
void    bs_dt_store_i64(uint8_t *p, int32_t dt, int64_t v);
/* Row forms: n elements, `stride` bytes apart in memory; fp32 values dense. */
void    bs_dt_load_row_f32(float *dst, const uint8_t *src, int64_t stride, int64_t n, int32_t dt);
void    bs_dt_store_row_f32(uint8_t *dst, int64_t stride, const float *src, int64_t n, int32_t dt);
/* 1 if the dtype can be decoded/encoded through fp32 (everything but the packed x4). */
int     bs_dt_numeric(int32_t dt);
/* The same encodes under a view's fp8 overflow rule `cast` (bs_view.cast, BS_FP8OVF_*):
** saturate is exactly the functions above; inf makes an fp8 overflow (or inf) the
** format's inf, or NaN for float8_e4m3fn. */
void    bs_dt_store_f32_cast(uint8_t *p, int32_t dt, float v, int32_t cast);
void    bs_dt_store_row_f32_cast(uint8_t *dst, int64_t stride, const float *src, int64_t n,
                                 int32_t dt, int32_t cast);
/* }=== */

/* {=== The ALU (alu.c), shared by every kernel that applies an AluOpType ===
** Semantics per bs_alu.def. fp32 forms cover classes A, C and U except bitwise_not;
** integer forms cover class B and bitwise_not with int32 two's-complement semantics
** (shift amounts outside 0..31 give 0, or the sign fill for arith_shift_right).
** The row forms keep the op switch outside the element loop so loops vectorise;
** `rs` variants take a scalar right operand, `ls` variants a scalar left operand. */
int     bs_alu_is_int(int32_t op);            /* class B or bitwise_not */
int     bs_alu_is_elementwise(int32_t op);    /* not class X */
float   bs_alu_f32(int32_t op, float l, float r);
int64_t bs_alu_i32(int32_t op, int64_t l, int64_t r);
void    bs_alu_row_f32(int32_t op, float *out, const float *l, const float *r, int64_t n);
void    bs_alu_row_f32_rs(int32_t op, float *out, const float *l, float r, int64_t n);
void    bs_alu_row_f32_ls(int32_t op, float *out, float l, const float *r, int64_t n);
/* Integer rows: out[j] = op(l[j*ls], r[j*rs]) on int32-wrapped operands, wrapped to
** int32; a stride of 0 broadcasts. */
void    bs_alu_row_i32(int32_t op, int64_t *out, const int64_t *l, int64_t ls, const int64_t *r,
                       int64_t rs, int64_t n);
/* }=== */

/* {=== Vector rows (k_simd.c): AVX-512 forms with the portable loops' bits ===
** For the ops bypass, add, subtract, mult, divide, max, min (bs_simd_op), on CPUs with
** AVX-512F unless BIRSIM_ELT_ISA=0 (read once). Each returns 1 when it did the work, 0
** (nothing written) when the caller must run its portable loop. out may equal an input
** exactly (never overlap one partially). bs_alu_row_f32* take these first. */
int     bs_simd_path(void);                   /* 1 when the vector forms are in use */
int     bs_simd_op(int32_t op);               /* op has a vector form in use */
int     bs_simd_row(int32_t op, float *out, const float *l, const float *r, int64_t n);
int     bs_simd_row_rs(int32_t op, float *out, const float *l, float r, int64_t n);
int     bs_simd_row_ls(int32_t op, float *out, float l, const float *r, int64_t n);
/* TensorScalar's stages in one pass: s = op0(x, c0) (op0(c0, x) when rev0), out =
** op1(s, c1) (op1(c1, s) when rev1), each rounded to fp32. */
int     bs_simd_ts(float *out, const float *x, int64_t n, int32_t op0, int rev0, float c0,
                   int32_t op1, int rev1, float c1);
/* Activation's affine step t = fp32(fp32(x * sc) + b), then out = t * t (square) or t. */
int     bs_simd_affine(float *out, const float *x, int64_t n, float sc, float b, int square);
/* memcpy of n >= BS_SIMD_STREAM_MIN bytes (AVX-512) or BS_SIMD_STREAM_MIN_AVX2 (AVX2 on a
** CPU without AVX-512) between disjoint ranges with streaming stores (the destination is
** not brought into the cache): for large DMA writes to DRAM; 0 when it has no form. The
** AVX2 threshold takes in rmsnorm's 256 KiB tile Saves (bench_public_kernels.py, session
** 18: 0.96x / 1.01x -> 0.88x / 0.82x); the AVX-512 one was measured on its own host. */
#define BS_SIMD_STREAM_MIN ((size_t)1 << 20)
#define BS_SIMD_STREAM_MIN_AVX2 ((size_t)1 << 18)
int     bs_simd_copy_stream(void *dst, const void *src, size_t n);
/* }=== */

/* {=== The matmul family (k_matmul.c, k_mx.c, k_psum.c) ===} */
/* 1 if none of the 4 shadow bytes at sh is zero (the has-zero-byte test): an fp32 PSUM
** element an accumulate adds onto. */
static inline int bs_written4(const uint8_t *sh)
{
    uint32_t w;
    memcpy(&w, sh, sizeof w);
    return ((w - 0x01010101u) & ~w & 0x80808080u) == 0;
}
/* PSUM write-back of res (out[0]'s M x N elements, fp32) by accumulation flags: 2 or 3
** start = write, 1 accumulate = add where written since the last start, 0 = write. */
bs_status bs_matmul_write(const bs_kctx *k, int64_t flags, const float *res, const char *op,
                          bs_error *err);
/* The instruction's psum_zero_region r, -1 when absent; and the zeroing a start with it
** does before its result is written (a no-op otherwise): both k_psum.c. */
int64_t   bs_matmul_zero_region_of(const bs_insn *in);
bs_status bs_matmul_zero_region(const bs_kctx *k, int64_t flags, const char *op, bs_error *err);
/* R[m][n] := sum over k of A[k][n] * B[k][m] (A dense K x N, B dense K x M, R dense M x N,
** all fp32) with Matmult's tiles, order (k = 0, 1, ... from +0, no FMA) and threads; the
** packed panels live in scratch slot `slot`. E_NOMEM. */
bs_status bs_matmul_f32(bs_kctx *k, int slot, float *R, const float *A, const float *B,
                        int64_t K, int64_t M, int64_t N, const char *what, bs_error *err);
/* One lane (0..3) of a packed x4 container `bits` of dtype dt decoded to fp32, and the
** lane code of v (RNE; fp8 saturates, fp4 e2m1 saturates at 6 and maps NaN to a signed
** zero). Lane q occupies bits [8q, 8q+8) (fp8 x4) or [4q, 4q+4) (fp4 x4). */
float    bs_x4_lane_f32(uint32_t bits, int32_t dt, int q);
uint32_t bs_x4_lane_code(float v, int32_t dt);

/* Memset in Random mode (k_rng.c). */
bs_status bs_rng_memset(bs_kctx *k, bs_error *err);

/* {=== exp (k_expf.c): glibc's expf algorithm, vectorisable; same results as libm ===} */
float   bs_expf(float x);
void    bs_expf_row(float *out, const float *in, int64_t n);   /* out may equal in */
/* out[j] = bs_expf(fp32(fp32(in[j] * scale) + bias)) (Activation's affine step, no fma) */
void    bs_expf_row_affine(float *out, const float *in, int64_t n, float scale, float bias);
/* Test hooks: a row form on a given path (0 portable, 1 AVX-512F: same bits; 1 falls back
** to 0 where not compiled or the CPU lacks AVX-512F), and the path the row forms take on
** this CPU (0 under BIRSIM_EXP_ISA=0). */
void    bs_expf_row_path(float *out, const float *in, int64_t n, int affine, float scale,
                         float bias, int path);
int     bs_expf_row_best_path(void);

/* {=== Streaming a view in row-major order (stream.c) ===
** A cursor walks a linear view one innermost-row segment at a time; kernels pair
** elements of several views by taking chunks no longer than any cursor's current row:
**
**     bs_cursor a, o;  float abuf[BS_CHUNK], obuf[BS_CHUNK];
**     bs_cur_init(&a, &k->in[0]);  bs_cur_init(&o, &k->out[0]);
**     while (a.left > 0) {
**         int64_t n = bs_chunk2(&a, &o);
**         const float *x = bs_cur_read_f32(&a, n, abuf);
**         float *y = bs_cur_write_begin(&o, n, obuf);
**         for (int64_t j = 0; j < n; j++) y[j] = f(x[j]);
**         bs_cur_write_end(&o, n, y);
**     }
*/
#define BS_CHUNK 1024

typedef struct bs_cursor {
    const bs_view *v;
    int64_t  idx[BS_MAX_DIMS];  /* index of the current element; idx[0] = partition dim */
    uint8_t *ptr;               /* address of the current element */
    int64_t  left;              /* elements left in the current innermost row (0 = done) */
    int64_t  pos;               /* elements consumed so far */
} bs_cursor;

void    bs_cur_init(bs_cursor *c, const bs_view *v);
void    bs_cur_advance(bs_cursor *c, int64_t n);        /* 0 < n <= c->left */
int64_t bs_chunk2(const bs_cursor *a, const bs_cursor *b);   /* min(BS_CHUNK, lefts) */
int64_t bs_chunk3(const bs_cursor *a, const bs_cursor *b, const bs_cursor *c);
/* bs_chunk3 without the BS_CHUNK cap when all three rows are dense fp32 (no buffer is
** used then: reads and writes are direct pointers). */
int64_t bs_chunk3_f32(const bs_cursor *a, const bs_cursor *b, const bs_cursor *c);
/* n <= c->left elements as fp32: a direct pointer when the row is dense fp32, else
** decoded into buf (BS_CHUNK floats). Advances the cursor. */
const float *bs_cur_read_f32(bs_cursor *c, int64_t n, float *buf);
/* Where a kernel puts n fp32 results: directly into memory when the row is dense fp32,
** else buf. bs_cur_write_end encodes from `vals` if needed and advances. */
float  *bs_cur_write_begin(bs_cursor *c, int64_t n, float *buf);
void    bs_cur_write_end(bs_cursor *c, int64_t n, const float *vals);
/* Integer forms (bit-vector ops), through bs_dt_load_i64/bs_dt_store_i64. */
void    bs_cur_read_i64(bs_cursor *c, int64_t n, int64_t *buf);
void    bs_cur_write_i64(bs_cursor *c, int64_t n, const int64_t *vals);
/* Raw element copy between two views of the same dtype (bit exact), any shapes with
** equal counts. */
void    bs_copy_raw(const bs_view *dst, const bs_view *src);
/* Gather a whole view into a dense fp32 array (count floats) / scatter one back. */
void    bs_view_to_f32(float *dst, const bs_view *v);
void    bs_view_from_f32(const bs_view *v, const float *src);
/* The same as integers (bs_cur_read_i64 / bs_cur_write_i64: count int64 values). */
void    bs_view_to_i64(int64_t *dst, const bs_view *v);
void    bs_view_from_i64(const bs_view *v, const int64_t *src);
/* }=== */

#endif
