/* core/alloc.c -- the allocator wrapper and its fault-injection hook (tests only). */
#if !defined(_WIN32)
#define _DEFAULT_SOURCE            /* MAP_ANONYMOUS */
#endif
#include <stdlib.h>
#include <string.h>
#include "alloc.h"
#if !defined(_WIN32)
#include <sys/mman.h>
#include <unistd.h>
#endif

static int64_t fail_countdown = -1;   /* test hook; -1 = off */

static int injected_failure(void)
{
    if (fail_countdown < 0)
        return 0;
    if (fail_countdown == 0)
        return 1;
    fail_countdown--;
    return 0;
}

void *bs_malloc(size_t size)
{
    if (injected_failure())
        return NULL;
    return malloc(size ? size : 1);
}

void *bs_calloc(size_t count, size_t size)
{
    if (injected_failure())
        return NULL;
    return calloc(count ? count : 1, size ? size : 1);
}

void bs_free(void *p)
{
    free(p);
}

void *bs_pages_alloc(size_t size)
{
#if !defined(_WIN32)
    void *p;
    if (size < BS_PAGES_MIN)
        return bs_calloc(size, 1);
    if (injected_failure())
        return NULL;
    p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
#else
    return bs_calloc(size, 1);
#endif
}

void bs_pages_dense(void *p, size_t size)
{
#if !defined(_WIN32) && defined(MADV_HUGEPAGE)
    if (p != NULL && size >= BS_DENSE_MIN)
        (void)madvise(p, size, MADV_HUGEPAGE);
#else
    (void)p;
    (void)size;
#endif
}

void bs_pages_zero(void *p, size_t n)
{
    uint8_t *b = p;
#if !defined(_WIN32) && defined(MADV_DONTNEED)
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = ((uintptr_t)b + page - 1) / page * page, hi = ((uintptr_t)b + n) / page * page;
    if (n >= BS_PAGES_MIN && page > 0 && hi > lo &&
        madvise((void *)lo, (size_t)(hi - lo), MADV_DONTNEED) == 0) {
        memset(b, 0, (size_t)(lo - (uintptr_t)b));
        memset((void *)hi, 0, (size_t)((uintptr_t)b + n - hi));
        return;
    }
#endif
    memset(b, 0, n);
}

void bs_pages_free(void *p, size_t size)
{
    if (p == NULL)
        return;
#if !defined(_WIN32)
    if (size >= BS_PAGES_MIN) {
        munmap(p, size);
        return;
    }
#endif
    (void)size;
    bs_free(p);
}

int bs_reserve(void **buf, size_t *cap, size_t need, int keep)
{
    size_t size = need;
    void *p;
    if (need <= *cap && *buf != NULL)
        return 0;
    if (keep && size < *cap * 2)
        size = *cap * 2;
    p = bs_malloc(size);
    if (p == NULL)
        return -1;
    if (keep && *cap)
        memcpy(p, *buf, *cap);
    bs_free(*buf);
    *buf = p;
    *cap = size;
    return 0;
}

void bs_alloc_fail_after(int64_t n)
{
    fail_countdown = n;
}
