/* kernels/table.c -- opcode -> kernel: the handler column of bs_ops.def. */
#include "kernel.h"

/* Rows the VM executes, or nothing yet, have no kernel. */
#define BS_K(stem) bs_k_##stem
#define BS_VM(what) NULL
#define BS_TODO NULL

static bs_kernel_fn *const kernel_table[BS_OP__COUNT] = {
#define BS_OP(name, sim, fam, handler, sem) [BS_OP_##name] = handler,
#include "../bs_ops.def"
};

bs_kernel_fn *bs_kernel_for(int32_t op)
{
    return (op >= 0 && op < BS_OP__COUNT) ? kernel_table[op] : NULL;
}
