/* tests/c/testutil.h -- helpers shared by the C unit tests: views over local buffers,
** and a test-local kernel scratch allocator for tests built by hand against the kernels
** only (the Makefile links the whole core and defines BS_TEST_LINKS_CORE). */
#ifndef BS_TESTS_TESTUTIL_H
#define BS_TESTS_TESTUTIL_H

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
