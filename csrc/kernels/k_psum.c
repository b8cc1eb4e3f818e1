/* kernels/k_psum.c -- the PSUM write-back of the matmul family (Matmult, MatmultMx,
** MatmultSparse, is_transpose): a start writes, an accumulate adds onto the elements
** written since the last start (the PSUM shadow decides, byte for byte), and a start with
** psum_zero_region first zeroes whole PSUM banks (docs/spec/machine-model.md §4.4, §6.2).
** The products themselves are k_matmul.c's, k_mx.c's and k_sparse.c's. */
#include "kernel.h"

/* {=== Write-back ===} */

/* 1 if none of the `size` shadow bytes at sh is zero. */
static inline int all_written(const uint8_t *sh, int32_t size)
{
    if (size == 4)
        return bs_written4(sh);
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
int64_t bs_matmul_zero_region_of(const bs_insn *in)
{
    switch (in->op) {
    case BS_OP_Matmult:       return BS_PI(in, Matmult, zero_region) - 1;
    case BS_OP_MatmultMx:     return BS_PI(in, MatmultMx, zero_region) - 1;
    case BS_OP_MatmultSparse: return BS_PI(in, MatmultSparse, zero_region) - 1;
    default:                  return -1;
    }
}

bs_status bs_matmul_zero_region(const bs_kctx *k, int64_t flags, const char *op, bs_error *err)
{
    const bs_view *v = &k->out[0];
    const bs_store *st = k->ostore[0];
    int64_t r = bs_matmul_zero_region_of(k->insn), idx[BS_MAX_DIMS] = {0};
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
    BS_TRY(bs_matmul_zero_region(k, flags, op, err));
    if (accumulate)
        write_accumulate(&k->out[0], res);
    else
        bs_view_from_f32(&k->out[0], res);
    return BS_OK;
}
