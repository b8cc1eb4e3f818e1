/* kernels/table.c -- opcode -> kernel: the handler column of bs_ops.def. */
#include "kernel.h"

/* Handlers that are not kernels. The pasted name bs_k_vm / bs_k_todo is re-scanned and
** replaced by NULL, so the table never refers to a function that does not exist. */
#define bs_k_vm   NULL
#define bs_k_todo NULL

static bs_kernel_fn *const kernel_table[BS_OP__COUNT] = {
#define BS_OP(name, sim, fam, handler) [BS_OP_##name] = bs_k_##handler,
#include "../bs_ops.def"
};

bs_kernel_fn *bs_kernel_for(int32_t op)
{
    return (op >= 0 && op < BS_OP__COUNT) ? kernel_table[op] : NULL;
}
