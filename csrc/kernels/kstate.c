/* kernels/kstate.c -- the kernel scratch room: scratch buffers by slot (kstate.h). */
#include "kstate.h"
#include "../core/alloc.h"

void *bs_kstate_tmp(bs_kstate *ks, bs_kslot slot, size_t bytes)
{
    if ((int)slot < 0 || slot >= BS_KSLOT__COUNT ||
        bs_reserve(&ks->tmp[slot], &ks->tmp_size[slot], bytes, 0))
        return NULL;
    return ks->tmp[slot];
}

void bs_kstate_fini(bs_kstate *ks)
{
    for (int i = 0; i < BS_KSLOT__COUNT; i++) {
        bs_free(ks->tmp[i]);
        ks->tmp[i] = NULL;
        ks->tmp_size[i] = 0;
    }
}
