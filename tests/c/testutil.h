/* tests/c/testutil.h -- helpers shared by the C unit tests: views over local buffers,
** and a test-local kernel scratch allocator for tests built by hand against the kernels
** only (the Makefile links the whole core and defines BS_TEST_LINKS_CORE). */
#ifndef BS_TESTS_TESTUTIL_H
#define BS_TESTS_TESTUTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kernels/kernel.h"

/* A view of `data` (dtype dt) with extents num[] and strides given in elements (est) or
** in bytes (stride). */
static inline bs_view mkview_bytes(void *data, int32_t dt, int ndim, const int64_t *num,
                                   const int64_t *stride)
{
    bs_view v;
    memset(&v, 0, sizeof v);
    v.data = data;
    v.dtype = dt;
    v.ndim = ndim;
    v.count = 1;
    v.memtype = BS_MEM_SB;
    for (int d = 0; d < ndim; d++) {
        v.num[d] = num[d];
        v.stride[d] = stride[d];
        v.count *= num[d];
    }
    return v;
}

static inline bs_view mkview(void *data, int32_t dt, int ndim, const int64_t *num,
                             const int64_t *est)
{
    int64_t stride[BS_MAX_DIMS];
    for (int d = 0; d < ndim; d++)
        stride[d] = est[d] * bs_dtinfo_table[dt].size;
    return mkview_bytes(data, dt, ndim, num, stride);
}

#ifdef BS_TEST_GLOBAL_CHECKS
/* For the files that count failed checks in one global counter (define
** BS_TEST_GLOBAL_CHECKS before including this header): CHECK, the case table, the runner. */
static int checks_failed;

static void check(int ok, const char *what, int line)
{
    if (!ok) {
        checks_failed++;
        printf("  FAIL line %d: %s\n", line, what);
    }
}
#define CHECK(c) check((c) != 0, #c, __LINE__)

typedef struct test { const char *name; void (*fn)(void); } test;

/* Run the n cases; a case failed when it raised checks_failed. Prints each failure and a
** summary; returns main's exit status. */
static inline int run_tests(const test *tests, size_t n)
{
    int passed = 0, failed = 0;
    for (size_t i = 0; i < n; i++) {
        int before = checks_failed;
        tests[i].fn();
        if (checks_failed == before) {
            passed++;
        } else {
            failed++;
            printf("FAILED %s\n", tests[i].name);
        }
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
#endif

#ifndef BS_TEST_LINKS_CORE
void *bs_kstate_tmp(bs_kstate *ks, int slot, size_t bytes)
{
    if (slot < 0 || slot >= 4)
        return NULL;
    if (ks->tmp_size[slot] < bytes || ks->tmp[slot] == NULL) {
        void *p = realloc(ks->tmp[slot], bytes ? bytes : 1);
        if (p == NULL)
            return NULL;
        ks->tmp[slot] = p;
        ks->tmp_size[slot] = bytes;
    }
    return ks->tmp[slot];
}

void bs_kstate_fini(bs_kstate *ks)
{
    for (int s = 0; s < 4; s++) {
        free(ks->tmp[s]);
        ks->tmp[s] = NULL;
        ks->tmp_size[s] = 0;
    }
}
#endif

#endif
