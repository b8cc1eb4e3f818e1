/* kernels/table.c -- opcode -> kernel, generated from kernels.def. */
#include "kernel.h"

static bs_kernel_fn *const kernel_table[BS_OP__COUNT] = {
#define BS_KERNEL(name) [BS_OP_##name] = bs_k_##name,
#include "kernels.def"
#undef BS_KERNEL
};

bs_kernel_fn *bs_kernel_for(int32_t op)
{
    return (op >= 0 && op < BS_OP__COUNT) ? kernel_table[op] : NULL;
}
