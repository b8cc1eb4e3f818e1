/* core/alloc.h -- every core allocation goes through here (house style G8), so tests can
** make the n-th allocation fail (bs_alloc_fail_after) and check for a clean E_NOMEM. */
#ifndef BS_CORE_ALLOC_H
#define BS_CORE_ALLOC_H

#include "common.h"

void *bs_malloc(size_t size);                 /* NULL on failure (or injected failure) */
void *bs_calloc(size_t count, size_t size);   /* zeroed; NULL on overflow or failure */
void  bs_free(void *p);                       /* NULL-safe */

/* Zeroed memory for large, sparsely touched buffers (SBUF, PSUM, DRAM locations and their
** shadows). From BS_PAGES_MIN bytes on it comes straight from the OS (an anonymous
** mapping), whose pages are zero-filled when first touched: no memset, and no resident
** memory for what a run never touches, whatever malloc's mmap threshold has grown to (glibc
** raises it to the largest block freed, up to 32 MiB, after which calloc clears a whole SBUF
** with memset). Smaller sizes use bs_calloc. Free with bs_pages_free and the same size. */
#define BS_PAGES_MIN ((size_t)1 << 18)
void *bs_pages_alloc(size_t size);            /* zeroed; NULL on failure (or injected) */
void  bs_pages_free(void *p, size_t size);    /* NULL-safe */

/* A bs_pages_alloc buffer of at least BS_DENSE_MIN bytes that will be filled densely and
** then given to the caller as an array (a zero_copy run's output: vm/sim.c): ask the OS for
** huge pages where it grants them on request (Linux THP "madvise" mode: MADV_HUGEPAGE), as
** NumPy does for its own arrays of 4 MiB or more, so filling it costs one page fault per
** 2 MiB instead of per 4 KiB. Untouched parts still cost nothing (a read maps the shared
** zero page); a touched byte commits its huge page. A hint: failure changes nothing. */
#define BS_DENSE_MIN ((size_t)4 << 20)
void  bs_pages_dense(void *p, size_t size);
/* Zero n bytes at p inside a bs_pages_alloc buffer: its whole pages are given back to the
** OS (they read as zero and cost nothing until touched again), the edges cleared. */
void  bs_pages_zero(void *p, size_t n);

/* Make *buf hold at least `need` bytes; *cap is its capacity in bytes. With `keep` the
** contents are kept and capacity grows geometrically (growable arrays); without, the old
** contents are dropped and the buffer is sized exactly (scratch). Returns 0 on success;
** on failure (-1) *buf and *cap are unchanged. Every grow-only buffer uses this. */
int   bs_reserve(void **buf, size_t *cap, size_t need, int keep);

/* Fault injection: after `n` more successful allocations, every allocation fails.
** n < 0 turns injection off. Process-wide, for tests only; not thread-safe. */
void  bs_alloc_fail_after(int64_t n);

#endif
