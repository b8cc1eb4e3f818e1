/* kernels/stream.c -- walking linear views in row-major order, one innermost-row segment
** at a time (kernel.h "Streaming a view"), plus whole-view copies and fp32 gathers.
** Values cross through k_dtype.c; a dense fp32 row is handed out as a direct pointer.
** Nothing here allocates or keeps state beyond the caller's bs_cursor. */
#include "kernel.h"

/* Rows of dense fp32 (alignment included, so the pointer is a valid float*). */
static int direct_f32(const bs_cursor *c, int read)
{
    const bs_view *v = c->v;
    int ok = v->dtype == BS_DT_float32 || (read && v->dtype == BS_DT_float32r);
    return ok && v->stride[v->ndim - 1] == 4 && ((uintptr_t)c->ptr & 3u) == 0;
}

static int64_t inner_stride(const bs_cursor *c)
{
    return c->v->stride[c->v->ndim - 1];
}

/* Initialise c at the first element of v (which must outlive the cursor). */
void bs_cur_init(bs_cursor *c, const bs_view *v)
{
    memset(c, 0, sizeof *c);
    c->v = v;
    c->ptr = v->data;
    c->left = (v->ndim > 0 && v->count > 0) ? v->num[v->ndim - 1] : 0;
}

/* Consume n elements of the current row; at its end, carry into the outer indices and
** point at the next row (left = 0 once the whole view is consumed). */
void bs_cur_advance(bs_cursor *c, int64_t n)
{
    const bs_view *v = c->v;
    int32_t last = v->ndim - 1;

    c->pos += n;
    c->left -= n;
    if (c->left > 0) {
        c->idx[last] += n;
        c->ptr += n * v->stride[last];
        return;
    }
    c->idx[last] = 0;
    for (int32_t d = last - 1; d >= 0; d--) {
        if (++c->idx[d] < v->num[d]) {
            int64_t off = 0;
            for (int32_t k = 0; k <= d; k++)
                off += c->idx[k] * v->stride[k];
            c->ptr = v->data + off;
            c->left = v->num[last];
            return;
        }
        c->idx[d] = 0;
    }
    c->left = 0;                                 /* done; ptr stays at the last row */
}

/* Elements every cursor can take in one step: min(BS_CHUNK, each cursor's row left). */
int64_t bs_chunk2(const bs_cursor *a, const bs_cursor *b)
{
    int64_t n = a->left < b->left ? a->left : b->left;
    return n < BS_CHUNK ? n : BS_CHUNK;
}

int64_t bs_chunk3(const bs_cursor *a, const bs_cursor *b, const bs_cursor *c)
{
    int64_t n = bs_chunk2(a, b);
    return n < c->left ? n : c->left;
}

int64_t bs_chunk3_f32(const bs_cursor *a, const bs_cursor *b, const bs_cursor *c)
{
    if (direct_f32(a, 1) && direct_f32(b, 1) && direct_f32(c, 0)) {
        int64_t n = a->left < b->left ? a->left : b->left;
        return n < c->left ? n : c->left;
    }
    return bs_chunk3(a, b, c);
}

/* n <= c->left elements as fp32 (kernel.h); the pointer is valid until memory changes. */
const float *bs_cur_read_f32(bs_cursor *c, int64_t n, float *buf)
{
    const float *out = buf;
    if (direct_f32(c, 1))
        out = (const float *)(const void *)c->ptr;
    else
        bs_dt_load_row_f32(buf, c->ptr, inner_stride(c), n, c->v->dtype);
    bs_cur_advance(c, n);
    return out;
}

/* Where the next n results go: the row itself when dense fp32, else buf. No side effect. */
float *bs_cur_write_begin(bs_cursor *c, int64_t n, float *buf)
{
    (void)n;
    return direct_f32(c, 0) ? (float *)(void *)c->ptr : buf;
}

/* Encodes vals unless the kernel wrote the row in place (vals == the row itself). */
void bs_cur_write_end(bs_cursor *c, int64_t n, const float *vals)
{
    if ((const void *)vals != (const void *)c->ptr)
        bs_dt_store_row_f32_cast(c->ptr, inner_stride(c), vals, n, c->v->dtype, c->v->cast);
    bs_cur_advance(c, n);
}

/* n elements through bs_dt_load_i64 into buf; advances. */
void bs_cur_read_i64(bs_cursor *c, int64_t n, int64_t *buf)
{
    int64_t st = inner_stride(c);
    int32_t dt = c->v->dtype;
    for (int64_t j = 0; j < n; j++)
        buf[j] = bs_dt_load_i64(c->ptr + j * st, dt);
    bs_cur_advance(c, n);
}

/* n values through bs_dt_store_i64; advances. */
void bs_cur_write_i64(bs_cursor *c, int64_t n, const int64_t *vals)
{
    int64_t st = inner_stride(c);
    int32_t dt = c->v->dtype, cast = c->v->cast;
    if (BS_UNLIKELY(cast != BS_FP8OVF_saturate) && bs_dtinfo_table[dt].kind == BS_DK_F)
        for (int64_t j = 0; j < n; j++)    /* floats go through fp32 (bs_dt_store_i64) */
            bs_dt_store_f32_cast(c->ptr + j * st, dt, (float)vals[j], cast);
    else
        for (int64_t j = 0; j < n; j++)
            bs_dt_store_i64(c->ptr + j * st, dt, vals[j]);
    bs_cur_advance(c, n);
}

/* {=== Whole views ===
** These normalise private copies of the views first so rows are as long as possible. */

/* n elements of `size` bytes, strided; constant sizes let each move become one load and
** one store instead of a libc call per element. */
static inline void move_n(uint8_t *d, int64_t ds, const uint8_t *s, int64_t ss, int64_t n,
                          size_t size)
{
    for (int64_t j = 0; j < n; j++)
        memmove(d + j * ds, s + j * ss, size);
}

static void move_strided(uint8_t *d, int64_t ds, const uint8_t *s, int64_t ss, int64_t n,
                         int64_t size)
{
    switch (size) {
    case 1:  move_n(d, ds, s, ss, n, 1); break;
    case 2:  move_n(d, ds, s, ss, n, 2); break;
    case 4:  move_n(d, ds, s, ss, n, 4); break;
    case 8:  move_n(d, ds, s, ss, n, 8); break;
    default: move_n(d, ds, s, ss, n, (size_t)size); break;
    }
}

/* Bit copy of src's elements into dst's, both in row-major order (same dtype, equal
** counts). Row segments are paired as they come; dense pairs are one memmove. Each
** segment is moved before the next is read, so an overlapping pair must be staged by
** the caller. Large dense segments into DRAM go through bs_simd_copy_stream (kernel.h). */
void bs_copy_raw(const bs_view *dst, const bs_view *src)
{
    bs_view dv = *dst, sv = *src;
    bs_cursor d, s;
    int64_t size = bs_dtinfo_table[src->dtype].size;

    bs_view_normalize(&dv);
    bs_view_normalize(&sv);
    bs_cur_init(&d, &dv);
    bs_cur_init(&s, &sv);
    while (d.left > 0 && s.left > 0) {
        int64_t n = d.left < s.left ? d.left : s.left;
        int64_t ds = inner_stride(&d), ss = inner_stride(&s);
        if (ds == size && ss == size) {
            size_t bytes = (size_t)(n * size);     /* large writes to DRAM: streaming */
            if (dv.memtype != BS_MEM_DRAM || !bs_simd_copy_stream(d.ptr, s.ptr, bytes))
                memmove(d.ptr, s.ptr, bytes);
        } else {
            move_strided(d.ptr, ds, s.ptr, ss, n, size);
        }
        bs_cur_advance(&d, n);
        bs_cur_advance(&s, n);
    }
}

/* All v->count elements of v decoded into dense dst (row-major). */
void bs_view_to_f32(float *dst, const bs_view *v)
{
    bs_view nv = *v;
    bs_cursor c;

    bs_view_normalize(&nv);
    bs_cur_init(&c, &nv);
    while (c.left > 0) {
        int64_t n = c.left;
        bs_dt_load_row_f32(dst + c.pos, c.ptr, inner_stride(&c), n, nv.dtype);
        bs_cur_advance(&c, n);
    }
}

/* v->count dense values encoded into v's elements (row-major). */
void bs_view_from_f32(const bs_view *v, const float *src)
{
    bs_view nv = *v;
    bs_cursor c;

    bs_view_normalize(&nv);
    bs_cur_init(&c, &nv);
    while (c.left > 0) {
        int64_t n = c.left;
        bs_dt_store_row_f32_cast(c.ptr, inner_stride(&c), src + c.pos, n, nv.dtype, nv.cast);
        bs_cur_advance(&c, n);
    }
}

/* All v->count elements of v read as integers into dense dst (row-major). */
void bs_view_to_i64(int64_t *dst, const bs_view *v)
{
    bs_cursor c;
    bs_cur_init(&c, v);
    while (c.left > 0) {
        int64_t n = c.left < BS_CHUNK ? c.left : BS_CHUNK;
        bs_cur_read_i64(&c, n, dst);
        dst += n;
    }
}

/* v->count dense integers written into v's elements (row-major). */
void bs_view_from_i64(const bs_view *v, const int64_t *src)
{
    bs_cursor c;
    bs_cur_init(&c, v);
    while (c.left > 0) {
        int64_t n = c.left < BS_CHUNK ? c.left : BS_CHUNK;
        bs_cur_write_i64(&c, n, src);
        src += n;
    }
}
/* }=== */
