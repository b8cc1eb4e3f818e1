/* kernels/alu.c -- the ALU: every AluOpType (bs_alu.def) as fp32 and int32 element
** functions and row loops, generated from the .def list; the kernels that apply an ALU
** op (k_eltwise.c, k_scan.c, k_reduce.c, k_select.c, ...) and the VM's register ALU call
** it through kernel.h. Row loops keep the op dispatch outside the element loop so they
** vectorise. */
#include <math.h>
#include "kernel.h"
#include "kview.h"

/* {=== ALU element functions (semantics per bs_alu.def) ===
** fp32 forms take and return fp32 (each call is one rounded stage). Integer forms take
** operands already wrapped to int32 and return an int64 the caller wraps to int32. */

static inline int64_t wrap32(int64_t v)
{
    uint32_t u = (uint32_t)v;                  /* modulo 2^32, well defined */
    return u >= 0x80000000u ? (int64_t)u - 0x100000000LL : (int64_t)u;
}

static inline float bool_f(int b) { return b ? 1.0f : 0.0f; }
static inline float via_int(int32_t op, float l, float r)
{
    return (float)bs_alu_i32(op, f2i(l), f2i(r));
}

static inline float f_bypass(float l, float r)         { (void)r; return l; }
static inline float f_bitwise_not(float l, float r)    { return via_int(BS_ALU_bitwise_not, l, r); }
static inline float f_arith_shift_left(float l, float r)  { return via_int(BS_ALU_arith_shift_left, l, r); }
static inline float f_arith_shift_right(float l, float r) { return via_int(BS_ALU_arith_shift_right, l, r); }
static inline float f_add(float l, float r)            { return l + r; }
static inline float f_subtract(float l, float r)       { return l - r; }
static inline float f_mult(float l, float r)           { return l * r; }
static inline float f_divide(float l, float r)         { return l / r; }
static inline float f_max(float l, float r)            { return l > r ? l : r; }
static inline float f_min(float l, float r)            { return l < r ? l : r; }
static inline float f_bitwise_and(float l, float r)    { return via_int(BS_ALU_bitwise_and, l, r); }
static inline float f_bitwise_or(float l, float r)     { return via_int(BS_ALU_bitwise_or, l, r); }
static inline float f_bitwise_xor(float l, float r)    { return via_int(BS_ALU_bitwise_xor, l, r); }
static inline float f_logical_and(float l, float r)    { return bool_f((l != 0.0f) & (r != 0.0f)); }
static inline float f_logical_or(float l, float r)     { return bool_f((l != 0.0f) | (r != 0.0f)); }
static inline float f_logical_xor(float l, float r)    { return bool_f((l != 0.0f) ^ (r != 0.0f)); }
static inline float f_logical_shift_left(float l, float r)  { return via_int(BS_ALU_logical_shift_left, l, r); }
static inline float f_logical_shift_right(float l, float r) { return via_int(BS_ALU_logical_shift_right, l, r); }
static inline float f_is_equal(float l, float r)       { return bool_f(l == r); }
static inline float f_not_equal(float l, float r)      { return bool_f(l != r); }
static inline float f_is_gt(float l, float r)          { return bool_f(l > r); }
static inline float f_is_ge(float l, float r)          { return bool_f(l >= r); }
static inline float f_is_lt(float l, float r)          { return bool_f(l < r); }
static inline float f_is_le(float l, float r)          { return bool_f(l <= r); }
static inline float f_average(float l, float r)        { (void)r; return l; }  /* class X */
static inline float f_elemwise_mul(float l, float r)   { return l * r; }       /* class X */
static inline float f_pow(float l, float r)            { return powf(l, r); }
static inline float f_mod(float l, float r)            { return fmodf(l, r); }
static inline float f_rsqrt(float l, float r)          { (void)r; return 1.0f / sqrtf(l); }
static inline float f_abs(float l, float r)            { (void)r; return fabsf(l); }
static inline float f_abs_max(float l, float r)        { return fabsf(l) > fabsf(r) ? l : r; }
static inline float f_abs_min(float l, float r)        { return fabsf(l) < fabsf(r) ? l : r; }
static inline float f_mod_int(float l, float r)        { return via_int(BS_ALU_mod_int, l, r); }

/* Shift amounts outside 0..31 give 0 (the sign fill for arith_shift_right). */
static inline int64_t shl32(int64_t l, int64_t r)
{
    return (r < 0 || r > 31) ? 0 : (int64_t)((uint32_t)l << r);
}
static inline int64_t lshr32(int64_t l, int64_t r)
{
    return (r < 0 || r > 31) ? 0 : (int64_t)((uint32_t)l >> r);
}
static inline int64_t ashr32(int64_t l, int64_t r)
{
    if (r < 0 || r > 31)
        return l < 0 ? -1 : 0;
    return l >= 0 ? (l >> r) : -(int64_t)((uint64_t)(-l - 1) >> r) - 1;
}
/* Ops without an integer meaning of their own go through fp32 and back. */
static inline int64_t i_via_f32(float v) { return f2i(v); }

static inline int64_t i_bypass(int64_t l, int64_t r)        { (void)r; return l; }
static inline int64_t i_bitwise_not(int64_t l, int64_t r)   { (void)r; return ~l; }
static inline int64_t i_arith_shift_left(int64_t l, int64_t r)  { return shl32(l, r); }
static inline int64_t i_arith_shift_right(int64_t l, int64_t r) { return ashr32(l, r); }
static inline int64_t i_add(int64_t l, int64_t r)           { return l + r; }
static inline int64_t i_subtract(int64_t l, int64_t r)      { return l - r; }
static inline int64_t i_mult(int64_t l, int64_t r)          { return l * r; }   /* |.| <= 2^62 */
static inline int64_t i_divide(int64_t l, int64_t r)        { return r ? l / r : 0; }
static inline int64_t i_max(int64_t l, int64_t r)           { return l > r ? l : r; }
static inline int64_t i_min(int64_t l, int64_t r)           { return l < r ? l : r; }
static inline int64_t i_bitwise_and(int64_t l, int64_t r)   { return l & r; }
static inline int64_t i_bitwise_or(int64_t l, int64_t r)    { return l | r; }
static inline int64_t i_bitwise_xor(int64_t l, int64_t r)   { return l ^ r; }
static inline int64_t i_logical_and(int64_t l, int64_t r)   { return (l != 0) & (r != 0); }
static inline int64_t i_logical_or(int64_t l, int64_t r)    { return (l != 0) | (r != 0); }
static inline int64_t i_logical_xor(int64_t l, int64_t r)   { return (l != 0) ^ (r != 0); }
static inline int64_t i_logical_shift_left(int64_t l, int64_t r)  { return shl32(l, r); }
static inline int64_t i_logical_shift_right(int64_t l, int64_t r) { return lshr32(l, r); }
static inline int64_t i_is_equal(int64_t l, int64_t r)      { return l == r; }
static inline int64_t i_not_equal(int64_t l, int64_t r)     { return l != r; }
static inline int64_t i_is_gt(int64_t l, int64_t r)         { return l > r; }
static inline int64_t i_is_ge(int64_t l, int64_t r)         { return l >= r; }
static inline int64_t i_is_lt(int64_t l, int64_t r)         { return l < r; }
static inline int64_t i_is_le(int64_t l, int64_t r)         { return l <= r; }
static inline int64_t i_average(int64_t l, int64_t r)       { (void)r; return l; }
static inline int64_t i_elemwise_mul(int64_t l, int64_t r)  { return l * r; }
static inline int64_t i_pow(int64_t l, int64_t r)           { return f2i(pow((double)l, (double)r)); }
static inline int64_t i_mod(int64_t l, int64_t r)           { return r ? l % r : 0; }
static inline int64_t i_rsqrt(int64_t l, int64_t r)         { (void)r; return i_via_f32(1.0f / sqrtf((float)l)); }
static inline int64_t i_abs(int64_t l, int64_t r)           { (void)r; return l < 0 ? -l : l; }
static inline int64_t i_abs_max(int64_t l, int64_t r)       { return i_abs(l, 0) > i_abs(r, 0) ? l : r; }
static inline int64_t i_abs_min(int64_t l, int64_t r)       { return i_abs(l, 0) < i_abs(r, 0) ? l : r; }
static inline int64_t i_mod_int(int64_t l, int64_t r)       { return r ? l % r : 0; }
/* }=== */

/* {=== Row loops, one set per op, generated from bs_alu.def ===
** row: out[j] = op(l[j], r[j]);  rs: op(l[j], r);  ls: op(l, r[j]);
** irow: integer form with element strides (0 broadcasts), results wrapped to int32.
** `out` may equal `l` or `r` exactly (in-place), never overlap them partially. */
typedef void row_fn(float *out, const float *l, const float *r, int64_t n);
typedef void rs_fn(float *out, const float *l, float r, int64_t n);
typedef void ls_fn(float *out, float l, const float *r, int64_t n);
typedef void irow_fn(int64_t *out, const int64_t *l, int64_t ls, const int64_t *r,
                     int64_t rs, int64_t n);

#define ALU_ROWS(name) \
BS_AVX2_CLONES static void row_##name(float *out, const float *l, const float *r, int64_t n) \
{ for (int64_t j = 0; j < n; j++) out[j] = f_##name(l[j], r[j]); } \
BS_AVX2_CLONES static void rs_##name(float *out, const float *l, float r, int64_t n) \
{ for (int64_t j = 0; j < n; j++) out[j] = f_##name(l[j], r); } \
BS_AVX2_CLONES static void ls_##name(float *out, float l, const float *r, int64_t n) \
{ for (int64_t j = 0; j < n; j++) out[j] = f_##name(l, r[j]); } \
static void irow_##name(int64_t *out, const int64_t *l, int64_t ls, const int64_t *r, \
                        int64_t rs, int64_t n) \
{ for (int64_t j = 0; j < n; j++) \
      out[j] = wrap32(i_##name(wrap32(l[j * ls]), wrap32(r[j * rs]))); }
#define BS_ALU(name, cls) ALU_ROWS(name)
#include "../bs_alu.def"
#undef BS_ALU
#undef ALU_ROWS

typedef float   f_fn(float l, float r);
typedef int64_t i_fn(int64_t l, int64_t r);
typedef struct alu_fns {
    f_fn *f;  i_fn *i;  row_fn *row;  rs_fn *rs;  ls_fn *ls;  irow_fn *irow;
} alu_fns;
#define BS_ALU(name, cls) \
    [BS_ALU_##name] = { f_##name, i_##name, row_##name, rs_##name, ls_##name, irow_##name },
static const alu_fns alu[BS_ALU__COUNT] = {
#include "../bs_alu.def"
};
#undef BS_ALU

static inline int alu_valid(int32_t op) { return op >= 0 && op < BS_ALU__COUNT; }

int bs_alu_is_int(int32_t op)
{
    return alu_valid(op) && (bs_alu_table[op].cls == BS_ALUC_B || op == BS_ALU_bitwise_not);
}

int bs_alu_is_elementwise(int32_t op)
{
    return alu_valid(op) && bs_alu_table[op].cls != BS_ALUC_X;
}

/* Invalid ops return the left operand (callers validate first). */
float bs_alu_f32(int32_t op, float l, float r)
{
    return alu_valid(op) ? alu[op].f(l, r) : l;
}

int64_t bs_alu_i32(int32_t op, int64_t l, int64_t r)
{
    return alu_valid(op) ? wrap32(alu[op].i(wrap32(l), wrap32(r))) : wrap32(l);
}

void bs_alu_row_f32(int32_t op, float *out, const float *l, const float *r, int64_t n)
{
    if (bs_simd_row(op, out, l, r, n))
        return;
    alu[alu_valid(op) ? op : BS_ALU_bypass].row(out, l, r, n);
}

void bs_alu_row_f32_rs(int32_t op, float *out, const float *l, float r, int64_t n)
{
    if (bs_simd_row_rs(op, out, l, r, n))
        return;
    alu[alu_valid(op) ? op : BS_ALU_bypass].rs(out, l, r, n);
}

void bs_alu_row_f32_ls(int32_t op, float *out, float l, const float *r, int64_t n)
{
    if (bs_simd_row_ls(op, out, l, r, n))
        return;
    alu[alu_valid(op) ? op : BS_ALU_bypass].ls(out, l, r, n);
}

void bs_alu_row_i32(int32_t op, int64_t *out, const int64_t *l, int64_t ls, const int64_t *r,
                    int64_t rs, int64_t n)
{
    alu[alu_valid(op) ? op : BS_ALU_bypass].irow(out, l, ls, r, rs, n);
}
/* }=== */
