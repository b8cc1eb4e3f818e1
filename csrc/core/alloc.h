/* core/alloc.h -- every core allocation goes through here (house style G8), so tests can
** make the n-th allocation fail (bs_alloc_fail_after) and check for a clean E_NOMEM. */
#ifndef BS_CORE_ALLOC_H
#define BS_CORE_ALLOC_H

#include "common.h"

void *bs_malloc(size_t size);                 /* NULL on failure (or injected failure) */
void *bs_calloc(size_t count, size_t size);   /* zeroed; NULL on overflow or failure */
void  bs_free(void *p);                       /* NULL-safe */

/* Make *buf hold at least `need` bytes; *cap is its capacity in bytes. With `keep` the
** contents are kept and capacity grows geometrically (growable arrays); without, the old
** contents are dropped and the buffer is sized exactly (scratch). Returns 0 on success;
** on failure (-1) *buf and *cap are unchanged. Every grow-only buffer uses this. */
int   bs_reserve(void **buf, size_t *cap, size_t need, int keep);

/* Fault injection: after `n` more successful allocations, every allocation fails.
** n < 0 turns injection off. Process-wide, for tests only; not thread-safe. */
void  bs_alloc_fail_after(int64_t n);

#endif
