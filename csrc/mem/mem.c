/* mem/mem.c -- access patterns to views: bounds checks, linear-or-not detection, element
** offsets of irregular patterns, and view algebra (normalize, overlap, identity, shadows).
** Bounds come from the pattern's corners (addresses are linear in the indices), never a
** walk over the elements, except for the rare layouts where an element could straddle a
** partition. Nothing here allocates or keeps state. */
#include <stdio.h>
#include "mem.h"

/* Steps and extents beyond this are rejected before any product can overflow int64:
** 5 dims x 2^55 elements x 8 bytes stays below 2^62. */
#define LIMIT ((int64_t)1 << 55)

static int64_t isize(int32_t dtype)
{
    return bs_dtinfo_table[dtype].size;
}

/* "(i0, i1, ...)" into buf. */
static void fmt_index(char *buf, size_t size, int32_t ndim, const int64_t *idx)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int32_t d = 0; d < ndim && n < size; d++)
        n += (size_t)snprintf(buf + n, size - n, "%s%lld", d ? ", " : "(", (long long)idx[d]);
    if (n < size)
        snprintf(buf + n, size - n, ")");
}

static bs_status oob(bs_error *err, const bs_store *st, int32_t ndim, const int64_t *idx,
                     int64_t b, const char *what)
{
    char ix[128];
    fmt_index(ix, sizeof ix, ndim, idx);
    return bs_errorf(err, BS_E_OOB, "element %s at byte %lld %s (%lld partitions x %lld bytes)",
                     ix, (long long)b, what, (long long)st->parts, (long long)st->bpp);
}

/* Checks the shape arguments; *count gets the element count. */
static bs_status check_shape(int32_t dtype, int32_t ndim, const int64_t *step,
                             const int64_t *num, int64_t *count, bs_error *err)
{
    int64_t c = 1;
    if (ndim < 1 || ndim > BS_MAX_DIMS)
        return bs_errorf(err, BS_E_PROGRAM, "access pattern has %d dimensions (1..%d allowed)",
                         (int)ndim, BS_MAX_DIMS);
    if (dtype < 0 || dtype >= BS_DT__COUNT)
        return bs_errorf(err, BS_E_PROGRAM, "access pattern has unknown dtype %d", (int)dtype);
    for (int32_t d = 0; d < ndim; d++) {
        if (num[d] < 1)
            return bs_errorf(err, BS_E_PROGRAM, "access pattern dimension %d has %lld elements",
                             (int)d, (long long)num[d]);
        if (num[d] > LIMIT || step[d] > LIMIT || step[d] < -LIMIT
            || (num[d] > 1 && (step[d] < 0 ? -step[d] : step[d]) > LIMIT / (num[d] - 1)))
            return bs_errorf(err, BS_E_OOB, "access pattern dimension %d [step %lld, num %lld] "
                             "reaches far outside any location", (int)d, (long long)step[d],
                             (long long)num[d]);
        if (c > LIMIT / num[d])
            return bs_errorf(err, BS_E_PROGRAM, "access pattern has more than 2^55 elements");
        c *= num[d];
    }
    *count = c;
    return BS_OK;
}

/* Flat byte of element idx. */
static int64_t flat_byte(int32_t ndim, const int64_t *step, const int64_t *idx, int64_t start,
                         int64_t isz)
{
    int64_t k = 0;
    for (int32_t d = 0; d < ndim; d++)
        k += step[d] * idx[d];
    return start + isz * k;
}

static int64_t gcd(int64_t a, int64_t b)
{
    while (b != 0) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* Per-element straddle check, for layouts where bpp or start is not item-aligned. Dims
** with step 0 add nothing, and the innermost varying dim repeats its partition offsets
** every bpp / gcd(step bytes, bpp) elements, so only one period of it is walked. */
static bs_status check_straddle(const bs_store *st, int64_t isz, int32_t ndim,
                                const int64_t *step, const int64_t *num, int64_t start,
                                bs_error *err)
{
    int64_t idx[BS_MAX_DIMS] = {0}, lim[BS_MAX_DIMS] = {0};
    int32_t inner = -1;
    for (int32_t d = 0; d < ndim; d++) {
        lim[d] = step[d] == 0 ? 1 : num[d];
        if (lim[d] > 1)
            inner = d;
    }
    if (inner >= 0) {
        int64_t period = st->bpp / gcd(st->bpp, (step[inner] * isz % st->bpp + st->bpp) % st->bpp);
        lim[inner] = lim[inner] < period ? lim[inner] : period;
    }
    for (;;) {
        int64_t b = flat_byte(ndim, step, idx, start, isz);
        int32_t d = ndim - 1;
        if (b % st->bpp + isz > st->bpp)
            return oob(err, st, ndim, idx, b, "straddles a partition boundary");
        while (d >= 0 && ++idx[d] >= lim[d])
            idx[d--] = 0;
        if (d < 0)
            return BS_OK;
    }
}

/* Bounds of every element, from the two extreme corners; then straddling. */
static bs_status check_bounds(const bs_store *st, int64_t isz, int32_t ndim,
                              const int64_t *step, const int64_t *num, int64_t start,
                              int within, bs_error *err)
{
    int64_t lo[BS_MAX_DIMS], hi[BS_MAX_DIMS];
    int64_t total = st->parts * st->bpp;
    int64_t zero[BS_MAX_DIMS] = {0};

    if (start < 0 || start > total - isz)        /* element (0,..,0) first: bounds the sums */
        return oob(err, st, ndim, zero, start, "is outside the location");
    for (int32_t d = 0; d < ndim; d++) {
        lo[d] = step[d] < 0 ? num[d] - 1 : 0;
        hi[d] = step[d] > 0 ? num[d] - 1 : 0;
    }
    int64_t blo = flat_byte(ndim, step, lo, start, isz);
    int64_t bhi = flat_byte(ndim, step, hi, start, isz);
    if (blo < 0)
        return oob(err, st, ndim, lo, blo, "is outside the location");
    if (bhi + isz > total)
        return oob(err, st, ndim, hi, bhi, "is outside the location");
    if (within || (st->bpp % isz == 0 && start % isz == 0))
        return BS_OK;                            /* no element can straddle */
    return check_straddle(st, isz, ndim, step, num, start, err);
}

/* Fills strides when every dim has a constant physical stride and returns 1, else 0.
** *within is set when no element leaves the partition-offset range it starts in: dims
** stepping whole partitions keep the offset, the others move it by their extent. */
static int linear_strides(bs_view *v, const bs_store *st, int64_t isz, int32_t ndim,
                          const int64_t *step, const int64_t *num, int64_t start, int *within)
{
    int64_t r0 = start % st->bpp, rlo = r0, rhi = r0;
    for (int32_t d = 0; d < ndim; d++) {
        int64_t s = step[d] * isz;
        int whole = s % st->bpp == 0;
        if (num[d] == 1)
            v->stride[d] = 0;                    /* index is always 0 */
        else if (st->pitch == st->bpp || !whole)
            v->stride[d] = s;
        else
            v->stride[d] = (s / st->bpp) * st->pitch;
        if (num[d] > 1 && !whole) {
            rlo += s < 0 ? s * (num[d] - 1) : 0;
            rhi += s > 0 ? s * (num[d] - 1) : 0;
        }
    }
    *within = rlo >= 0 && rhi + isz <= st->bpp;
    return st->pitch == st->bpp || *within;
}

/* The contract is in mem.h. For a non-linear pattern the view gets data = shadow = NULL
** and dense row-major strides, ready for the caller to point it at a gathered copy. */
bs_status bs_view_make(bs_view *v, const bs_store *st, int32_t dtype, int32_t ndim,
                       const int64_t *step, const int64_t *num, int64_t start,
                       int *linear, bs_error *err)
{
    int64_t count = 0, isz, off;
    int within = 0, lin;

    *linear = 0;
    BS_TRY(check_shape(dtype, ndim, step, num, &count, err));
    isz = isize(dtype);
    if (st->bpp <= 0 || st->parts <= 0)
        return bs_errorf(err, BS_E_OOB, "location has no bytes (%lld partitions x %lld bytes)",
                         (long long)st->parts, (long long)st->bpp);
    memset(v, 0, sizeof *v);
    v->dtype = dtype;
    v->ndim = ndim;
    v->count = count;
    v->memtype = st->memtype;
    v->cast = st->cast;
    for (int32_t d = 0; d < ndim; d++)
        v->num[d] = num[d];
    lin = linear_strides(v, st, isz, ndim, step, num, start, &within);
    BS_TRY(check_bounds(st, isz, ndim, step, num, start, within, err));
    if (!lin) {
        int64_t s = isz;
        for (int32_t d = ndim - 1; d >= 0; d--) {
            v->stride[d] = s;
            s *= num[d];
        }
        return BS_OK;
    }
    off = st->pitch == st->bpp ? start : (start / st->bpp) * st->pitch + start % st->bpp;
    v->data = st->data + off;
    v->shadow = st->shadow ? st->shadow + off : NULL;
    *linear = 1;
    return BS_OK;
}

/* Physical byte offsets of every element, row-major, for a pattern bs_view_make accepted
** (the element bytes are not re-checked here). offs holds the element count. */
void bs_view_offsets(const bs_store *st, int32_t itemsize, int32_t ndim,
                     const int64_t *step, const int64_t *num, int64_t start, int64_t *offs)
{
    int64_t idx[BS_MAX_DIMS] = {0};
    int64_t k = 0;
    for (;;) {
        int64_t b = flat_byte(ndim, step, idx, start, itemsize);
        int32_t d = ndim - 1;
        offs[k++] = (b / st->bpp) * st->pitch + b % st->bpp;
        while (d >= 0 && ++idx[d] == num[d])
            idx[d--] = 0;
        if (d < 0)
            return;
    }
}

/* {=== View algebra ===} */

/* Drops extent-1 dims and merges dim d into the next when stride[d] equals the next's
** stride * num (broadcast runs included); keeps at least one dim. Order is unchanged. */
void bs_view_normalize(bs_view *v)
{
    int32_t n = 0;
    if (v->ndim <= 0 || v->count <= 0)
        return;
    for (int32_t d = 0; d < v->ndim; d++) {
        if (v->num[d] == 1)
            continue;
        if (n > 0 && v->stride[n - 1] == v->stride[d] * v->num[d]) {
            v->num[n - 1] *= v->num[d];          /* outer dim continues this one */
            v->stride[n - 1] = v->stride[d];
        } else {
            v->num[n] = v->num[d];
            v->stride[n] = v->stride[d];
            n++;
        }
    }
    if (n == 0) {                                /* a single element */
        v->num[0] = 1;
        v->stride[0] = v->stride[v->ndim - 1];
        n = 1;
    }
    for (int32_t d = n; d < BS_MAX_DIMS; d++) {
        v->num[d] = 0;
        v->stride[d] = 0;
    }
    v->ndim = n;
}

/* Byte range [*lo, *hi) touched by dims from..ndim-1, relative to data. */
static void span(const bs_view *v, int32_t from, int64_t *lo, int64_t *hi)
{
    int64_t l = 0, h = 0;
    for (int32_t d = from; d < v->ndim; d++) {
        int64_t ext = v->stride[d] * (v->num[d] - 1);
        l += ext < 0 ? ext : 0;
        h += ext > 0 ? ext : 0;
    }
    *lo = l;
    *hi = h + isize(v->dtype);
}

static int64_t floor_div(int64_t a, int64_t b)   /* b > 0 */
{
    int64_t q = a / b;
    return (a % b != 0 && a < 0) ? q - 1 : q;
}

/* Whole ranges first; when both views step their outer dim by the same positive stride
** (partition rows), compare the rows' inner ranges instead, so side-by-side tiles of one
** SBUF region do not count as overlapping. */
int bs_view_overlap(const bs_view *a, const bs_view *b)
{
    int64_t alo, ahi, blo, bhi, delta, s0;
    if (a->ndim == 0 || b->ndim == 0 || a->count == 0 || b->count == 0)
        return 0;
    delta = (int64_t)((uintptr_t)b->data - (uintptr_t)a->data);
    span(a, 0, &alo, &ahi);
    span(b, 0, &blo, &bhi);
    if (!(delta + blo < ahi && alo < delta + bhi))
        return 0;
    s0 = a->stride[0];
    if (a->ndim < 2 || b->ndim < 2 || s0 <= 0 || b->stride[0] != s0)
        return 1;
    span(a, 1, &alo, &ahi);
    span(b, 1, &blo, &bhi);
    /* Rows i of a and j of b meet iff k = j - i has k*s0 strictly inside (L, R). */
    int64_t L = alo - delta - bhi, R = ahi - delta - blo;
    int64_t kmin = -(a->num[0] - 1), kmax = b->num[0] - 1;
    int64_t k = floor_div(L, s0) + 1;
    if (k < kmin)
        k = kmin;
    return k <= kmax && k * s0 < R;
}

bs_view bs_view_dense(void *buf, int32_t dtype, int64_t count)
{
    bs_view v;
    memset(&v, 0, sizeof v);
    v.data = buf;
    v.dtype = dtype;
    v.ndim = 1;
    v.num[0] = v.count = count;
    v.stride[0] = bs_dtinfo_table[dtype].size;
    return v;
}

/* Same dtype, count and start, and the normalised shapes and strides agree. */
int bs_view_same(const bs_view *a, const bs_view *b)
{
    bs_view x = *a, y = *b;
    if (a->dtype != b->dtype || a->ndim == 0 || b->ndim == 0 || a->count != b->count)
        return 0;
    if (a->data != b->data)
        return 0;
    if (a->count <= 1)
        return 1;
    bs_view_normalize(&x);
    bs_view_normalize(&y);
    if (x.ndim != y.ndim)
        return 0;
    for (int32_t d = 0; d < x.ndim; d++)
        if (x.num[d] != y.num[d] || x.stride[d] != y.stride[d])
            return 0;
    return 1;
}

/* {=== Shadows ===
** Both walk the rows of a normalised copy; dense rows are one memchr / memset. */

/* Offset of the row at outer indices idx; advances idx, returns 0 past the last row. */
static int next_row(const bs_view *v, int64_t *idx, int64_t *off)
{
    int32_t d = v->ndim - 2;
    while (d >= 0 && ++idx[d] == v->num[d])
        idx[d--] = 0;
    if (d < 0)
        return 0;
    *off = 0;
    for (int32_t k = 0; k <= d; k++)
        *off += idx[k] * v->stride[k];
    return 1;
}

/* Dense when the row's elements tile one byte range (either direction) or it is one
** element; *lo gets that range's first byte. */
static int dense_row(uint8_t *row, int64_t n, int64_t s, int64_t isz, uint8_t **lo)
{
    *lo = row + (s < 0 ? (n - 1) * s : 0);
    return n == 1 || s == isz || s == -isz;
}

/* 1 when no shadow byte of any element is 0 (always 1 without a shadow). */
int bs_view_initialized(const bs_view *v)
{
    bs_view nv = *v;
    int64_t idx[BS_MAX_DIMS] = {0}, off = 0, isz, n, s;
    uint8_t *lo;
    if (!v->shadow || v->ndim == 0 || v->count == 0)
        return 1;
    bs_view_normalize(&nv);
    isz = isize(nv.dtype);
    n = nv.num[nv.ndim - 1];
    s = nv.stride[nv.ndim - 1];
    if (s == 0)
        n = 1;                                   /* a broadcast row is one element */
    do {
        uint8_t *row = nv.shadow + off;
        if (dense_row(row, n, s, isz, &lo)) {
            if (memchr(lo, 0, (size_t)(n * isz)))
                return 0;
        } else {
            for (int64_t j = 0; j < n; j++)
                if (memchr(row + j * s, 0, (size_t)isz))
                    return 0;
        }
    } while (next_row(&nv, idx, &off));
    return 1;
}

/* Sets every element's shadow bytes to 1 (no-op without a shadow). */
void bs_view_mark_written(const bs_view *v)
{
    bs_view nv = *v;
    int64_t idx[BS_MAX_DIMS] = {0}, off = 0, isz, n, s;
    uint8_t *lo;
    if (!v->shadow || v->ndim == 0 || v->count == 0)
        return;
    bs_view_normalize(&nv);
    isz = isize(nv.dtype);
    n = nv.num[nv.ndim - 1];
    s = nv.stride[nv.ndim - 1];
    if (s == 0)
        n = 1;
    do {
        uint8_t *row = nv.shadow + off;
        if (dense_row(row, n, s, isz, &lo)) {
            memset(lo, 1, (size_t)(n * isz));
        } else {
            for (int64_t j = 0; j < n; j++)
                memset(row + j * s, 1, (size_t)isz);
        }
    } while (next_row(&nv, idx, &off));
}
/* }=== */

/* {=== Chunk summaries ===} */

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

int bs_chunks_written(const bs_chunks *ch, int64_t a, int64_t b)
{
    while (a < b) {
        int64_t c = a / BS_SH_CHUNK, e = min64(b, (c + 1) * BS_SH_CHUNK);
        uint8_t s = ch->state[c];
        if (s == BS_CH_ZERO)
            return 0;
        if (s == BS_CH_MIXED && memchr(ch->shadow + a, 0, (size_t)(e - a)))
            return 0;
        a = e;
    }
    return 1;
}

/* A chunk counts as whole when [a, b) covers all of it (the last one may be short). */
void bs_chunks_mark(bs_chunks *ch, int64_t a, int64_t b)
{
    while (a < b) {
        int64_t c = a / BS_SH_CHUNK, e = min64(b, (c + 1) * BS_SH_CHUNK);
        uint8_t *s = &ch->state[c];
        if (*s == BS_CH_FULL || *s == BS_CH_FULL_DIRTY) {
            /* already all written */
        } else if (a == c * BS_SH_CHUNK && e == min64(ch->size, (c + 1) * BS_SH_CHUNK)) {
            *s = *s == BS_CH_ZERO ? BS_CH_FULL : BS_CH_FULL_DIRTY;
        } else {
            memset(ch->shadow + a, 1, (size_t)(e - a));
            *s = BS_CH_MIXED;
        }
        a = e;
    }
}

void bs_chunks_materialize(bs_chunks *ch)
{
    int64_t n = (ch->size + BS_SH_CHUNK - 1) / BS_SH_CHUNK;
    for (int64_t c = 0; c < n; c++)
        if (ch->state[c] == BS_CH_FULL || ch->state[c] == BS_CH_FULL_DIRTY) {
            memset(ch->shadow + c * BS_SH_CHUNK, 1, (size_t)(min64(ch->size, (c + 1) * BS_SH_CHUNK)
                                                          - c * BS_SH_CHUNK));
            ch->state[c] = BS_CH_MIXED;
        }
    ch->on = 0;
}

void bs_chunks_clear(bs_chunks *ch, uint8_t *data)
{
    int64_t n = (ch->size + BS_SH_CHUNK - 1) / BS_SH_CHUNK;
    for (int64_t c = 0; c < n; c++) {
        uint8_t s = ch->state[c];
        size_t len = (size_t)(min64(ch->size, (c + 1) * BS_SH_CHUNK) - c * BS_SH_CHUNK);
        if (s == BS_CH_ZERO)
            continue;
        if (s == BS_CH_MIXED || s == BS_CH_FULL_DIRTY)
            memset(ch->shadow + c * BS_SH_CHUNK, 0, len);
        if (data != NULL)
            memset(data + c * BS_SH_CHUNK, 0, len);
        ch->state[c] = BS_CH_ZERO;
    }
}

/* Walks the rows of a normalised copy of v (as the view shadow helpers do), handing each
** dense row, or each element of a strided one, to fn as a range of the store's shadow. */
static int store_rows(const bs_store *st, const bs_view *v, int mark)
{
    bs_view nv = *v;
    int64_t idx[BS_MAX_DIMS] = {0}, off = 0, isz, n, s;
    uint8_t *lo;
    bs_chunks *ch = st->chunks;
    bs_view_normalize(&nv);
    isz = isize(nv.dtype);
    n = nv.num[nv.ndim - 1];
    s = nv.stride[nv.ndim - 1];
    if (s == 0)
        n = 1;
    do {
        uint8_t *row = nv.shadow + off;
        if (dense_row(row, n, s, isz, &lo)) {
            int64_t a = (int64_t)(lo - ch->shadow);
            if (mark)
                bs_chunks_mark(ch, a, a + n * isz);
            else if (!bs_chunks_written(ch, a, a + n * isz))
                return 0;
        } else {
            for (int64_t j = 0; j < n; j++) {
                int64_t a = (int64_t)(row + j * s - ch->shadow);
                if (mark)
                    bs_chunks_mark(ch, a, a + isz);
                else if (!bs_chunks_written(ch, a, a + isz))
                    return 0;
            }
        }
    } while (next_row(&nv, idx, &off));
    return 1;
}

int bs_store_initialized(const bs_store *st, const bs_view *v)
{
    if (st->chunks == NULL || !v->shadow || v->ndim == 0 || v->count == 0)
        return bs_view_initialized(v);
    return store_rows(st, v, 0);
}

void bs_store_mark_written(const bs_store *st, const bs_view *v)
{
    if (st->chunks == NULL || !v->shadow || v->ndim == 0 || v->count == 0) {
        bs_view_mark_written(v);
        return;
    }
    (void)store_rows(st, v, 1);
}
