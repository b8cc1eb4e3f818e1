/* kernels/k_copy.c -- data movement: the copy family (cast on copy), DMACopy's Copy,
** Transpose, Replicate and CCE modes with their DMADescriptor forms, and StreamTranspose
** (docs/spec/machine-model.md §6.4, docs/spec/BIR-JSON.md "Operand conventions").
**
** Same-dtype moves are bit copies (bs_copy_raw); everything else decodes to fp32 and
** encodes with the output dtype's rounding. Every kernel reads all of its inputs before
** writing: an output overlapping an input without being the same view is staged through
** a bs_kstate_tmp buffer. Nothing here allocates any other way. */
#include "kernel.h"

/* Scratch slots: WORK/WORK2 for the mode kernels' own buffers, STAGE for copy_elems. */

static const char *op_name(const bs_kctx *k)
{
    int32_t op = k->insn->op;
    return (op >= 0 && op < BS_OP__COUNT) ? bs_opinfo_table[op].name : "?";
}

static inline int32_t item_size(int32_t dt) { return bs_dtinfo_table[dt].size; }
static inline int is_packed(int32_t dt) { return bs_dtinfo_table[dt].kind == BS_DK_P; }

/* in[0] and out[0] exist and are memory operands. */
static bs_status need_in_out(const bs_kctx *k, bs_error *err)
{
    if (k->nin < 1 || k->nout < 1)
        return bs_errorf(err, BS_E_SIM, "%s needs an input and an output operand", op_name(k));
    if (k->in[0].ndim == 0 || k->out[0].ndim == 0)
        return bs_errorf(err, BS_E_UNSUPPORTED, "%s needs memory operands (in[0] and out[0] "
                         "must be access patterns)", op_name(k));
    return BS_OK;
}

/* {=== Element copy: the core of every mode ===} */

/* dst := src through fp32; the views do not overlap and have equal counts. Normalised
** copies keep the row-major order and make the rows (chunks) as long as possible. */
static void cast_stream(const bs_view *dst, const bs_view *src)
{
    bs_view dv = *dst, sv = *src;
    bs_cursor a, o;
    float obuf[BS_CHUNK];
    bs_view_normalize(&dv);
    bs_view_normalize(&sv);
    bs_cur_init(&a, &sv);
    bs_cur_init(&o, &dv);
    while (a.left > 0) {
        /* One pass per row: src decodes straight into a dense fp32 dst row, and a dense
        ** fp32 src row encodes straight into dst; only fp32 -> fp32 rows are copied. */
        int64_t n = bs_chunk2(&a, &o);
        float *y = bs_cur_write_begin(&o, n, obuf);
        const float *x = bs_cur_read_f32(&a, n, y);
        if (y != obuf && x != y)
            memcpy(y, x, (size_t)n * sizeof(float));
        bs_cur_write_end(&o, n, y == obuf ? x : y);
    }
}

/* dst := src element by element in row-major order (any shapes, equal counts): a bit copy
** for equal dtypes, else a cast via fp32 (packed x4 dtypes only copy to themselves).
** Stages src through scratch slot BS_KSLOT_D when it overlaps dst. E_SIM on a count
** mismatch, E_UNSUPPORTED on a packed cast, E_NOMEM. */
static bs_status copy_elems(bs_kctx *k, const bs_view *dst, const bs_view *src, bs_error *err)
{
    int same = dst->dtype == src->dtype;
    bs_view staged;
    if (dst->count != src->count)
        return bs_errorf(err, BS_E_SIM, "%s: element counts differ: in[0] has %lld elements, "
                         "out[0] has %lld", op_name(k), (long long)src->count,
                         (long long)dst->count);
    if (!same && (is_packed(dst->dtype) || is_packed(src->dtype)))
        return bs_errorf(err, BS_E_UNSUPPORTED, "%s: cannot cast %s to %s (packed x4 dtypes "
                         "copy only to the same dtype)", op_name(k),
                         bs_dtinfo_table[src->dtype].name, bs_dtinfo_table[dst->dtype].name);
    if (same && bs_view_same(dst, src))
        return BS_OK;                       /* copy onto itself */
    if (bs_view_overlap(dst, src)) {        /* read everything before writing anything */
        void *buf = bs_kstate_tmp(k->ks, BS_KSLOT_D, (size_t)src->count * item_size(src->dtype));
        if (buf == NULL)
            return bs_errorf(err, BS_E_NOMEM, "%s: out of memory staging %lld elements",
                             op_name(k), (long long)src->count);
        staged = bs_view_dense(buf, src->dtype, src->count);
        bs_copy_raw(&staged, src);
        src = &staged;
    }
    if (same)
        bs_copy_raw(dst, src);
    else
        cast_stream(dst, src);
    return BS_OK;
}

static bs_status copy_kernel(bs_kctx *k, bs_error *err)
{
    BS_TRY(need_in_out(k, err));
    return copy_elems(k, &k->out[0], &k->in[0], err);
}

/* {=== DMACopy Transpose ===} */

/* Destination axis order per TransposeOps value (docs/spec/machine-model.md §5); None reads as XYZW. */
static const char *const transpose_order[] = {
    [BS_TRANSPOSE_None] = "XYZW", [BS_TRANSPOSE_WZXY] = "WZXY", [BS_TRANSPOSE_WXZY] = "WXZY",
    [BS_TRANSPOSE_WYXZ] = "WYXZ", [BS_TRANSPOSE_ZWYX] = "ZWYX", [BS_TRANSPOSE_ZYWX] = "ZYWX",
    [BS_TRANSPOSE_ZYXW] = "ZYXW", [BS_TRANSPOSE_YXWZ] = "YXWZ", [BS_TRANSPOSE_YXZW] = "YXZW",
    [BS_TRANSPOSE_YWZX] = "YWZX", [BS_TRANSPOSE_XWZY] = "XWZY", [BS_TRANSPOSE_XZYW] = "XZYW",
    [BS_TRANSPOSE_XYZW] = "XYZW", [BS_TRANSPOSE_XYWZ] = "XYWZ",
};

/* Source dimension (after left-padding to W,Z,Y,X) named by a letter. */
static inline int letter_dim(char c)
{
    return c == 'W' ? 0 : c == 'Z' ? 1 : c == 'Y' ? 2 : 3;
}

/* *pv := the view of `in` whose row-major order is the destination order of transpose
** `top`: dimension d of pv is the source dimension named by letter d. No data moves. */
static bs_status transpose_view(const bs_kctx *k, bs_view *pv, const bs_view *in, int64_t top,
                                bs_error *err)
{
    int64_t num[4], stride[4];
    int32_t pad = 4 - in->ndim;
    if (top < 0 || top >= (int64_t)BS_ARRAY_LEN(transpose_order) || !transpose_order[top])
        return bs_errorf(err, BS_E_UNSUPPORTED, "%s: unknown transpose_op %lld", op_name(k),
                         (long long)top);
    if (in->ndim > 4)
        return bs_errorf(err, BS_E_UNSUPPORTED, "%s: Transpose needs an input of at most 4 "
                         "dimensions, in[0] has %d", op_name(k), (int)in->ndim);
    for (int32_t d = 0; d < 4; d++) {
        num[d] = d < pad ? 1 : in->num[d - pad];
        stride[d] = d < pad ? 0 : in->stride[d - pad];
    }
    *pv = *in;
    pv->ndim = 4;
    for (int32_t d = 0; d < BS_MAX_DIMS; d++) {
        int s = d < 4 ? letter_dim(transpose_order[top][d]) : 0;
        pv->num[d] = d < 4 ? num[s] : 0;
        pv->stride[d] = d < 4 ? stride[s] : 0;
    }
    return BS_OK;
}

static bs_status dma_transpose(bs_kctx *k, bs_error *err)
{
    bs_view pv;
    BS_TRY(transpose_view(k, &pv, &k->in[0], BS_PI(k->insn, DMACopy, transpose_op), err));
    return copy_elems(k, &k->out[0], &pv, err);
}

/* {=== DMACopy Replicate ===} */

/* out element j := in element j mod count(in). The source is read as a broadcast view
** [R, in...] with a zero stride on R, staged first when it overlaps out or has no spare
** dimension. */
static bs_status dma_replicate(bs_kctx *k, bs_error *err)
{
    const bs_view *in = &k->in[0], *out = &k->out[0];
    bs_view src = *in, bv;
    if (out->count % in->count != 0)
        return bs_errorf(err, BS_E_SIM, "%s: Replicate needs out[0]'s element count (%lld) "
                         "to be a multiple of in[0]'s (%lld)", op_name(k),
                         (long long)out->count, (long long)in->count);
    bs_view_normalize(&src);
    if (src.ndim >= BS_MAX_DIMS || bs_view_overlap(out, in)) {
        void *buf = bs_kstate_tmp(k->ks, BS_KSLOT_A, (size_t)in->count * item_size(in->dtype));
        if (buf == NULL)
            return bs_errorf(err, BS_E_NOMEM, "%s: out of memory staging %lld elements",
                             op_name(k), (long long)in->count);
        src = bs_view_dense(buf, in->dtype, in->count);
        bs_copy_raw(&src, in);
    }
    bv = src;
    bv.ndim = src.ndim + 1;
    bv.num[0] = out->count / in->count;
    bv.stride[0] = 0;
    for (int32_t d = 0; d < src.ndim; d++) {
        bv.num[d + 1] = src.num[d];
        bv.stride[d + 1] = src.stride[d];
    }
    bv.count = out->count;
    return copy_elems(k, out, &bv, err);
}

/* {=== DMACopy CCE ===} */

static inline void scale_row(float *x, float c, int64_t n)
{
    for (int64_t j = 0; j < n; j++)
        x[j] = x[j] * c;
}

/* 1 if input `kin` has an add constant (the list may be shorter than the inputs). */
static inline int has_const(const bs_kctx *k, int32_t kin)
{
    return kin < k->insn->nflist;
}

/* out := in0 (+) in1 (+) ... in fp32, folded left to right with rounding at every step. */
static bs_status dma_cce(bs_kctx *k, bs_error *err)
{
    int32_t op = (int32_t)BS_PI(k->insn, DMACopy, cce_op);
    int64_t n = k->out[0].count;
    float *acc, *x;
    if (op != BS_ALU_add && op != BS_ALU_max && op != BS_ALU_min)
        return bs_errorf(err, BS_E_UNSUPPORTED, "%s: CCE op %s is not supported (add, max or "
                         "min)", op_name(k), (op >= 0 && op < BS_ALU__COUNT) ?
                         bs_alu_table[op].name : "?");
    for (int32_t i = 0; i <= k->nin; i++) {
        const bs_view *v = i < k->nin ? &k->in[i] : &k->out[0];
        const char *side = i < k->nin ? "in" : "out";
        int32_t idx = i < k->nin ? i : 0;
        if (v->ndim == 0)
            return bs_errorf(err, BS_E_UNSUPPORTED, "%s: CCE operand %s[%d] must be an access "
                             "pattern", op_name(k), side, (int)idx);
        if (!bs_dt_numeric(v->dtype))
            return bs_errorf(err, BS_E_UNSUPPORTED, "%s: CCE cannot compute on %s (%s[%d])",
                             op_name(k), bs_dtinfo_table[v->dtype].name, side, (int)idx);
        if (v->count != n)
            return bs_errorf(err, BS_E_SIM, "%s: CCE input in[%d] has %lld elements, out[0] "
                             "has %lld", op_name(k), (int)idx, (long long)v->count,
                             (long long)n);
    }
    acc = bs_kstate_tmp(k->ks, BS_KSLOT_A, (size_t)n * sizeof(float));
    x = bs_kstate_tmp(k->ks, BS_KSLOT_B, (size_t)n * sizeof(float));
    if (acc == NULL || x == NULL)
        return bs_errorf(err, BS_E_NOMEM, "%s: out of memory for %lld elements", op_name(k),
                         (long long)n);
    bs_view_to_f32(acc, &k->in[0]);
    if (op == BS_ALU_add && has_const(k, 0))
        scale_row(acc, (float)k->prog->fpool[k->insn->flist], n);
    for (int32_t i = 1; i < k->nin; i++) {
        bs_view_to_f32(x, &k->in[i]);
        if (op == BS_ALU_add && has_const(k, i))
            scale_row(x, (float)k->prog->fpool[k->insn->flist + i], n);
        bs_alu_row_f32(op, acc, acc, x, n);
    }
    bs_view_from_f32(&k->out[0], acc);
    return BS_OK;
}

/* {=== DMACopy dispatch ===} */

static bs_status dma_kernel(bs_kctx *k, int64_t mode, bs_error *err)
{
    BS_TRY(need_in_out(k, err));
    switch (mode) {
    case BS_COPYMODE_Copy:      return copy_elems(k, &k->out[0], &k->in[0], err);
    case BS_COPYMODE_Transpose: return dma_transpose(k, err);
    case BS_COPYMODE_Replicate: return dma_replicate(k, err);
    case BS_COPYMODE_CCE:       return dma_cce(k, err);
    default:
        return bs_errorf(err, BS_E_UNSUPPORTED, "%s: copy mode %lld is not supported",
                         op_name(k), (long long)mode);
    }
}

/* {=== StreamTranspose ===} */

/* dst[(p & ~31) | (f & 31)][(f & ~31) | (p & 31)] := src[p][f] from a dense [P, F] buffer
** into a dense [PO, FO] one of `sz`-byte elements (the caller checked that every target
** lies inside). Inlined per element size so the move is a plain load/store. */
static inline void st_move(uint8_t *dst, const uint8_t *src, int64_t P, int64_t F, int64_t FO,
                           int32_t sz)
{
    for (int64_t p = 0; p < P; p++) {
        for (int64_t f = 0; f < F; f++) {
            int64_t tp = (p & ~(int64_t)31) | (f & 31), tf = (f & ~(int64_t)31) | (p & 31);
            memcpy(dst + (tp * FO + tf) * sz, src + (p * F + f) * sz, (size_t)sz);
        }
    }
}

static void st_move_sized(uint8_t *dst, const uint8_t *src, int64_t P, int64_t F, int64_t FO,
                          int32_t sz)
{
    switch (sz) {
    case 1:  st_move(dst, src, P, F, FO, 1); break;
    case 2:  st_move(dst, src, P, F, FO, 2); break;
    case 4:  st_move(dst, src, P, F, FO, 4); break;
    case 8:  st_move(dst, src, P, F, FO, 8); break;
    default: st_move(dst, src, P, F, FO, sz); break;
    }
}

/* {=== Kernel entry points (bs_ops.def handlers) ===} */

#define SAME_DMA_SLOTS(Op) (BS_Pi_DMACopy_mode == BS_Pi_##Op##_mode && \
    BS_Pi_DMACopy_transpose_op == BS_Pi_##Op##_transpose_op && BS_Pi_DMACopy_cce_op == BS_Pi_##Op##_cce_op)
_Static_assert(SAME_DMA_SLOTS(DMADescriptorCopy) && SAME_DMA_SLOTS(DMADescriptorCCE) &&
               SAME_DMA_SLOTS(DMADescriptorTranspose) && SAME_DMA_SLOTS(DMADescriptorReplicate),
               "DMACopy and DMADescriptor* slots");
#undef SAME_DMA_SLOTS

/* The copy family: out[0] := in[0] in row-major pairing (shapes may differ). E_SIM when
** the element counts differ, E_UNSUPPORTED for a cast to or from a packed x4 dtype or a
** non-memory operand, E_NOMEM when staging an overlapping input fails. */
bs_status bs_k_TensorCopy(bs_kctx *k, bs_error *err)   { return copy_kernel(k, err); }
bs_status bs_k_GenericCopy(bs_kctx *k, bs_error *err)  { return copy_kernel(k, err); }
bs_status bs_k_AbstractCopy(bs_kctx *k, bs_error *err) { return copy_kernel(k, err); }
bs_status bs_k_Load(bs_kctx *k, bs_error *err)         { return copy_kernel(k, err); }
bs_status bs_k_Save(bs_kctx *k, bs_error *err)         { return copy_kernel(k, err); }

/* DMACopy: mode from its mode field (Copy, Transpose with transpose_op, Replicate, CCE with
** cce_op and constants in flist); the DMADescriptor* forms force the mode (they share
** DMACopy's slots). Errors as
** for the copy family, plus E_UNSUPPORTED for an unknown mode/transpose_op/CCE op or a
** transpose input of more than 4 dims, E_SIM for Replicate/CCE count mismatches. */
bs_status bs_k_DMACopy(bs_kctx *k, bs_error *err)
{
    return dma_kernel(k, BS_PI(k->insn, DMACopy, mode), err);
}
bs_status bs_k_DMADescriptorCopy(bs_kctx *k, bs_error *err)
{
    return dma_kernel(k, BS_COPYMODE_Copy, err);
}
bs_status bs_k_DMADescriptorTranspose(bs_kctx *k, bs_error *err)
{
    return dma_kernel(k, BS_COPYMODE_Transpose, err);
}
bs_status bs_k_DMADescriptorReplicate(bs_kctx *k, bs_error *err)
{
    return dma_kernel(k, BS_COPYMODE_Replicate, err);
}
bs_status bs_k_DMADescriptorCCE(bs_kctx *k, bs_error *err)
{
    return dma_kernel(k, BS_COPYMODE_CCE, err);
}

/* StreamTranspose: in0 and out0 (same dtype) viewed as [P, F] and [PO, FO] (P = num[0]);
** each 32x32 tile has its partition and free index low bits swapped (docs/spec/machine-model.md
** §6.4). The shapes that map onto a whole output: P, F <= 32 -> [F, P] (a plain
** transpose, e.g. [32, 2] -> [2, 32]), or P and F multiples of 32 -> [P, F] (each 32x32
** block transposed in place). Bit exact; E_SIM for any other shape pair or a cast
** (nothing is written then). */
bs_status bs_k_StreamTranspose(bs_kctx *k, bs_error *err)
{
    const bs_view *in = &k->in[0], *out = &k->out[0];
    int64_t P, F, PO, FO;
    int32_t sz;
    uint8_t *src, *dst;
    bs_view sv, dv;
    BS_TRY(need_in_out(k, err));
    if (in->dtype != out->dtype)
        return bs_errorf(err, BS_E_SIM, "StreamTranspose cannot cast: in[0] is %s, out[0] is %s",
                         bs_dtinfo_table[in->dtype].name, bs_dtinfo_table[out->dtype].name);
    P = in->num[0];
    F = P ? in->count / P : 0;
    PO = out->num[0];
    FO = PO ? out->count / PO : 0;
    {
        int small = P <= 32 && F <= 32, blocks = P % 32 == 0 && F % 32 == 0;
        int ok = out->count == in->count && P > 0 && F > 0
            && ((small && PO == F && FO == P) || (!small && blocks && PO == P && FO == F));
        if (!ok)
            return bs_errorf(err, BS_E_SIM, "StreamTranspose: in[0] is [%lld, %lld] and out[0] "
                             "[%lld, %lld]; it maps a [P, F] tile with P, F <= 32 to [F, P], "
                             "or one whose P and F are multiples of 32 to [P, F] (each 32x32 "
                             "block transposed)", (long long)P, (long long)F, (long long)PO,
                             (long long)FO);
    }
    sz = item_size(in->dtype);
    src = bs_kstate_tmp(k->ks, BS_KSLOT_A, (size_t)in->count * (size_t)sz);
    dst = bs_kstate_tmp(k->ks, BS_KSLOT_B, (size_t)in->count * (size_t)sz);
    if (src == NULL || dst == NULL)
        return bs_errorf(err, BS_E_NOMEM, "StreamTranspose: out of memory for %lld elements",
                         (long long)in->count);
    sv = bs_view_dense(src, in->dtype, in->count);
    dv = bs_view_dense(dst, in->dtype, in->count);
    bs_copy_raw(&sv, in);
    st_move_sized(dst, src, P, F, FO, sz);
    bs_copy_raw(out, &dv);
    return BS_OK;
}
