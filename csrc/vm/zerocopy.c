/* vm/zerocopy.c -- Simulator(zero_copy=True): an input the program can never write is read
** in place from the caller's array for one run (lent: its store points at the caller's
** bytes, shadow NULL = all written, as a LAZY buffer's); an output in a whole own buffer
** is handed over after the run (the caller gets the buffer, the simulator forgets it and
** allocates a fresh one at the next reset). docs/DESIGN.md, "Zero-copy runs". */
#include "vm.h"

/* Handlers that write memory only through their AP output operands, inside the operand's
** own location. Not: Call and NKIKernel (a callee's writes land in the caller's bound
** sets), DMATrigger and DMABlock (descriptors), collectives and GPSIMDSB2SB (another
** core's memory), host kernels (Python code is handed views of the operands), TODO. */
#define BS_ZC_OK_nop 1
#define BS_ZC_OK_stub 1
#define BS_ZC_OK_abstract 1
#define BS_ZC_OK_flow 1              /* but Call, NKIKernel, DMATrigger, DMABlock: zc_scan */
#define BS_ZC_OK_cur_rank 1
#define BS_ZC_OK_global_rank 1
#define BS_ZC_OK_reg_alu 1
#define BS_ZC_OK_reg_move 1
#define BS_ZC_OK_reset_queue 1
#define BS_ZC_OK_reset_semaphores 1
#define BS_ZC_OK_switch_queue 1
#define BS_ZC_OK_read_var_addr 1
#define BS_ZC_OK_print 1
#define BS_ZC_OK_tensor_load 1
#define BS_ZC_OK_tensor_save 1
#define BS_ZC_OK_gather 2            /* every AP operand counts as written (zc_scan) */
#define BS_ZC_OK_sb2sb 0
#define BS_ZC_OK_collective 0
#define BS_ZC_OK_host 0
#define BS_K(stem) 1
#define BS_VM(what) BS_ZC_OK_##what
#define BS_TODO 0
static const uint8_t zc_op_ok[BS_OP__COUNT] = {
#define BS_OP(name, sim, fam, handler, sem) [BS_OP_##name] = handler,
#include "../bs_ops.def"
};
#undef BS_K
#undef BS_VM
#undef BS_TODO

/* sim->zc's LENDABLE bits: a DRAM input of one core's one program, in its own buffer
** (not arena-placed), no must-alias pair's input, and no operand that may be written names
** it -- with every instruction of the program one of the handlers above. Anything else
** (or anything unknown) leaves every location not lendable. UNREAD bits: the same
** handlers, and no operand that may be read names the location. */
static void zc_scan(bs_sim *sim)
{
    const bs_program *p = sim->prog;
    int ok = sim->ncores == 1 && p->module->nentries <= 1 && p->module->ntriggers == 0;
    for (int32_t i = 0; i < p->n_insns && ok; i++) {
        int32_t op = p->insns[i].op;
        if (op < 0 || op >= BS_OP__COUNT || !zc_op_ok[op] || op == BS_OP_Call ||
            op == BS_OP_NKIKernel || op == BS_OP_DMATrigger || op == BS_OP_DMABlock)
            ok = 0;
    }
    for (int32_t l = 0; l < p->n_locs; l++) {
        const bs_loc *loc = &p->locs[l];
        const bs_set *set = &p->sets[loc->set];
        sim->zc[l] = (uint8_t)((ok && loc->memtype == BS_MEM_DRAM && !loc->placed &&
                                set->io == 1 && set->alias < 0 && bs_loc_one_buffer(p, loc) ?
                                BS_ZC_LENDABLE : 0) | (ok ? BS_ZC_UNREAD : 0));
    }
    if (!ok)
        return;
    for (int32_t l = 0; l < p->n_locs; l++)        /* the input of a must-alias pair */
        if (bs_storage_loc(p, l) != l)
            sim->zc[bs_storage_loc(p, l)] = 0;
    for (int32_t i = 0; i < p->n_insns; i++) {     /* written: not lendable; read: not UNREAD */
        const bs_insn *in = &p->insns[i];
        int any = zc_op_ok[in->op] == 2;           /* gathers: every operand both ways */
        for (int32_t j = in->opnd; j < in->opnd + in->nin + in->nout; j++) {
            const bs_opnd *o = &p->opnds[j];
            int out = j >= in->opnd + in->nin;
            if (o->kind != BS_OPND_imm_value && o->kind != BS_OPND_imm_array &&
                o->kind != BS_OPND_register_access && o->loc >= 0 && o->loc < p->n_locs)
                sim->zc[o->loc] &= (uint8_t)~((out || any ? BS_ZC_LENDABLE : 0) |
                                              (!out || any ? BS_ZC_UNREAD : 0));
        }
    }
}

/* A lent buffer starts at a multiple of this, as every own buffer does (calloc's or a
** page's alignment), so an operand of any dtype at any element offset is as aligned as
** it is in the simulator's own memory. */
#define BS_LEND_ALIGN ((uintptr_t)16)

/* The own buffer (priv or shared) core k's store of location l points at, or NULL. */
static uint8_t *own_buffer(const bs_sim *sim, int32_t k, int32_t l)
{
    const bs_store *st = &sim->cores[k].stores[l];
    if (st->data == NULL || sim->prog->locs[l].placed)
        return NULL;
    if (sim->shared[l] != NULL && st->data == sim->shared[l])
        return sim->shared[l];
    if (sim->cores[k].priv[l] != NULL && st->data == sim->cores[k].priv[l])
        return sim->cores[k].priv[l];
    return NULL;
}

bs_status bs_sim_lend_loc(bs_sim *sim, int32_t loc, const void *data, int64_t rows,
                          int64_t rowbytes, int *lent, bs_error *err)
{
    bs_core *c = &sim->cores[0];
    bs_store *st;
    *lent = 0;
    BS_TRY(bs_sim_check_rows(sim, 0, loc, rows, rowbytes, err));
    if (sim->zc == NULL) {
        sim->zc = bs_calloc((size_t)sim->prog->n_locs, 1);
        if (sim->zc == NULL)
            return BS_OK;                  /* not lent: the caller copies */
        zc_scan(sim);
    }
    st = &c->stores[loc];
    if (!(sim->zc[loc] & BS_ZC_LENDABLE) || (sim->zc[loc] & BS_ZC_LENT) || sim->ncores != 1 ||
        data == NULL || ((uintptr_t)data & (BS_LEND_ALIGN - 1)) != 0 ||
        own_buffer(sim, 0, loc) == NULL || rows != st->parts ||
        rowbytes != st->bpp || st->pitch != st->bpp)
        return BS_OK;
    sim->pristine = 0;
    st->data = (uint8_t *)(uintptr_t)data;    /* nothing in the program writes it (zc_scan) */
    st->shadow = NULL;                        /* all written */
    st->chunks = NULL;
    c->complete[loc] = 1;
    sim->zc[loc] |= BS_ZC_LENT;
    sim->nlent++;
    *lent = 1;
    return BS_OK;
}

void bs_sim_unlend(bs_sim *sim)
{
    bs_core *c = &sim->cores[0];
    if (sim->nlent == 0)
        return;
    for (int32_t l = 0; l < sim->prog->n_locs; l++) {
        bs_store *st = &c->stores[l];
        size_t size = (size_t)st->parts * (size_t)st->bpp;
        if (!(sim->zc[l] & BS_ZC_LENT))
            continue;
        /* back on its own buffer (lending requires one buffer for all cores), whose state
        ** the run did not change: its bytes mean what they meant before the lend */
        st->data = sim->shared[l];
        st->shadow = sim->shared[l] != NULL ? sim->shared[l] + size : NULL;
        st->chunks = sim->schunks[l].on ? &sim->schunks[l] : NULL;
        c->complete[l] = 0;
        sim->zc[l] &= (uint8_t)~BS_ZC_LENT;
    }
    sim->nlent = 0;
    sim->stale = 1;
}

/* 1 when bs_sim_take_loc may hand location l's own buffer over (one core, a whole DRAM
** output location in one buffer, not a must-alias pair's). */
static int takeable(const bs_sim *sim, int32_t l)
{
    const bs_program *p = sim->prog;
    const bs_loc *loc = &p->locs[l];
    if (sim->ncores != 1 || loc->memtype != BS_MEM_DRAM || loc->placed ||
        bs_storage_loc(p, l) != l)
        return 0;
    for (int32_t j = 0; j < p->n_locs; j++)         /* the input of a must-alias pair */
        if (j != l && bs_storage_loc(p, j) == l)
            return 0;
    return 1;
}

int bs_sim_give_loc(bs_sim *sim, int32_t loc, void *buf, int heap)
{
    const bs_program *p = sim->prog;
    size_t bytes = bs_loc_buffer_bytes(p, loc), size = bytes / 2;
    uint8_t **own;
    int one, stale;
    if (sim->zc == NULL || !(sim->zc[loc] & BS_ZC_TAKEN) || !takeable(sim, loc))
        return 0;
    stale = (sim->zc[loc] & BS_ZC_UNREAD) && sim->opts.uninit == BS_UNINIT_zero;
    if (!heap && !stale)        /* new pages cost less than clearing a big buffer whole */
        return 0;
    one = bs_loc_one_buffer(p, &p->locs[loc]);
    own = one ? &sim->shared[loc] : &sim->cores[0].priv[loc];
    if (*own != NULL)
        return 0;
    if (!stale)
        memset(buf, 0, bytes);                      /* as fresh: data and shadow zero */
    else if (heap)                      /* data kept (bs_sim_zc_clean), shadow as fresh */
        memset((uint8_t *)buf + size, 0, size);
    else
        bs_pages_zero((uint8_t *)buf + size, size);
    *own = buf;
    if (one) {
        sim->sstate[loc] = BS_SH_ZERO;
        bs_sim_chunks_init(sim, &sim->schunks[loc], buf, size);
    } else {
        sim->cores[0].pstate[loc] = BS_SH_ZERO;
        bs_sim_chunks_init(sim, &sim->cores[0].pchunks[loc], buf, size);
    }
    sim->zc[loc] = (uint8_t)((sim->zc[loc] & ~(BS_ZC_HEAP | BS_ZC_STALE)) |
                             (heap ? BS_ZC_HEAP : 0) | (stale ? BS_ZC_STALE : 0));
    sim->stale = 1;
    sim->pristine = 0;
    return 1;
}

void bs_sim_zc_clean(bs_sim *sim, int32_t loc)
{
    bs_core *c = &sim->cores[0];
    const bs_store *st = &c->stores[loc];
    size_t size = (size_t)st->parts * (size_t)st->bpp;
    if (sim->zc == NULL || !(sim->zc[loc] & BS_ZC_STALE))
        return;
    sim->zc[loc] &= (uint8_t)~BS_ZC_STALE;
    if (c->complete[loc] || st->data == NULL || st->shadow == NULL || st->pitch != st->bpp)
        return;                                     /* written whole (or LAZY: all written) */
    bs_sim_chunks_off(sim, st->chunks);             /* the shadow's bytes say it */
    for (size_t i = 0; i < size; i++)
        st->data[i] = st->shadow[i] ? st->data[i] : 0;
}

void bs_sim_zero_copy(bs_sim *sim)
{
    const bs_program *p = sim->prog;
    if (sim->zc == NULL && (sim->zc = bs_calloc((size_t)p->n_locs, 1)) != NULL)
        zc_scan(sim);
    if (sim->zc == NULL)
        return;
    for (int32_t l = 0; l < p->n_locs; l++)
        if (p->sets[p->locs[l].set].io == 2 && takeable(sim, l)) {
            sim->zc[l] |= BS_ZC_TAKEN;
            bs_pages_dense(own_buffer(sim, 0, l), (size_t)p->locs[l].parts *
                                                  (size_t)p->locs[l].bpp);
        }
}

bs_status bs_sim_take_loc(bs_sim *sim, int32_t loc, int64_t rows, int64_t rowbytes,
                          void **buf, size_t *bytes, int *heap, bs_error *err)
{
    const bs_program *p = sim->prog;
    bs_core *c = &sim->cores[0];
    bs_store *st = &c->stores[loc];
    uint8_t *own;
    size_t size;
    *buf = NULL;
    *bytes = 0;
    *heap = 0;
    BS_TRY(bs_sim_check_rows(sim, 0, loc, rows, rowbytes, err));
    if (!takeable(sim, loc) || (sim->zc != NULL && (sim->zc[loc] & BS_ZC_LENT)))
        return BS_OK;
    bs_sim_flush_stale(sim);                        /* its bytes as a read sees them */
    bs_sim_zc_clean(sim, loc);
    own = own_buffer(sim, 0, loc);
    size = (size_t)st->parts * (size_t)st->bpp;
    if (own == NULL || size == 0 || rows != st->parts || rowbytes != st->bpp ||
        st->pitch != st->bpp)
        return BS_OK;
    if (!c->complete[loc] && st->shadow != NULL &&  /* as bs_sim_read_loc decides it */
        !(st->chunks != NULL ? bs_chunks_written(st->chunks, 0, (int64_t)size)
                             : memchr(st->shadow, 0, size) == NULL))
        return BS_OK;               /* kept: written() still tells which bytes were not */
    if (sim->zc == NULL && (sim->zc = bs_calloc((size_t)p->n_locs, 1)) != NULL)
        zc_scan(sim);
    if (sim->zc != NULL) {
        *heap = (sim->zc[loc] & BS_ZC_HEAP) != 0;   /* its allocator, for the caller's free */
        sim->zc[loc] = (uint8_t)((sim->zc[loc] | BS_ZC_TAKEN) & ~BS_ZC_HEAP);
    }
    *buf = own;
    *bytes = bs_loc_buffer_bytes(p, loc);
    if (own == sim->shared[loc]) {                  /* forget it: the next reset allocates */
        sim->shared[loc] = NULL;
        bs_sim_chunks_fini(&sim->schunks[loc]);
        sim->sstate[loc] = BS_SH_ZERO;
    } else {
        c->priv[loc] = NULL;
        bs_sim_chunks_fini(&c->pchunks[loc]);
        c->pstate[loc] = BS_SH_ZERO;
    }
    st->data = st->shadow = NULL;
    st->chunks = NULL;
    sim->pristine = 0;
    return BS_OK;
}
