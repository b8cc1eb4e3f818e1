/* vm/chunks.c -- which own DRAM buffers get a chunk summary of their shadow (mem/mem.h,
** bs_chunks), and turning a summary off. vm/sim.c allocates, points stores at and clears
** them (place, reset_buffer); vm/exec.c's operand path reads and marks through them.
**
** An own DRAM buffer of at least BS_CHUNKS_MIN bytes gets a bs_chunks summary of its shadow
** (mem.h) when only the operand path of vm/exec.c can touch that shadow during a run
** (chunks_ok: every opcode of the program is a data kernel other than the Matmult family,
** or a VM executor that writes no memory; no Call, DMA descriptor or checker). The summary
** is on from a reset that leaves the buffer ZERO until anything else would read or write
** its shadow bytes (a host write, written(), a non-linear access pattern:
** bs_sim_chunks_off); reads of whole outputs use it (bs_sim_read_loc). */

#include "vm.h"

/* Opcodes whose runs touch shadows only through bs_exec_resolve / bs_exec_finish. */
#define BS_CH_OK_nop 1
#define BS_CH_OK_stub 1
#define BS_CH_OK_abstract 1
#define BS_CH_OK_flow 1
#define BS_CH_OK_cur_rank 1
#define BS_CH_OK_global_rank 1
#define BS_CH_OK_reg_alu 1
#define BS_CH_OK_reg_move 1
#define BS_CH_OK_reset_queue 1
#define BS_CH_OK_reset_semaphores 1
#define BS_CH_OK_switch_queue 1
#define BS_CH_OK_read_var_addr 1
#define BS_CH_OK_print 0
#define BS_CH_OK_tensor_load 1
#define BS_CH_OK_tensor_save 1
#define BS_CH_OK_gather 0
#define BS_CH_OK_sb2sb 0
#define BS_CH_OK_collective 0
#define BS_CH_OK_host 0
#define BS_K(stem) 1
#define BS_VM(what) BS_CH_OK_##what
#define BS_TODO 0
static const uint8_t chunks_op_ok[BS_OP__COUNT] = {
#define BS_OP(name, sim, fam, handler, sem) [BS_OP_##name] = handler,
#include "../bs_ops.def"
};
#undef BS_K
#undef BS_VM
#undef BS_TODO

int bs_sim_chunks_allowed(const bs_sim *sim)
{
    const bs_program *p = sim->prog;
    if (sim->chk != NULL || p->module->ntriggers > 0)
        return 0;
    for (int32_t i = 0; i < p->n_insns; i++) {
        int32_t op = p->insns[i].op;
        if (op < 0 || op >= BS_OP__COUNT || !chunks_op_ok[op] || op == BS_OP_Call ||
            op == BS_OP_NKIKernel || op == BS_OP_DMATrigger || op == BS_OP_DMABlock ||
            op == BS_OP_Matmult || op == BS_OP_MatmultMx || op == BS_OP_MatmultSparse)
            return 0;
    }
    return 1;
}

/* A summary for the new own buffer buf (size data bytes, then its shadow), on: the buffer
** is ZERO. Without memory for it, none (the shadow bytes alone, as for small buffers). */
void bs_sim_chunks_init(const bs_sim *sim, bs_chunks *ch, uint8_t *buf, size_t size)
{
    memset(ch, 0, sizeof *ch);
    if (!sim->chunks_ok || size < BS_CHUNKS_MIN)
        return;
    ch->state = bs_calloc((size - 1) / (size_t)BS_SH_CHUNK + 1, 1);
    ch->shadow = buf + size;
    ch->size = (int64_t)size;
    ch->on = ch->state != NULL;
}

void bs_sim_chunks_fini(bs_chunks *ch)
{
    bs_free(ch->state);
    memset(ch, 0, sizeof *ch);
}

void bs_sim_chunks_off(bs_sim *sim, bs_chunks *ch)
{
    if (ch == NULL || !ch->on)
        return;
    bs_chunks_materialize(ch);
    for (int32_t k = 0; k < sim->ncores; k++)
        for (int32_t l = 0; l < sim->prog->n_locs; l++)
            if (sim->cores[k].stores[l].chunks == ch)
                sim->cores[k].stores[l].chunks = NULL;
}

