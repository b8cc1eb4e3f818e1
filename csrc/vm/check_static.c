/* vm/check_static.c -- the checks that need no clocks (checks "capacity" and the
** unreachable waits of "leftover_sync"): partitions and bytes per partition against the
** architecture, which engine reaches which memory, an operand's start partition and PSUM
** bank; the program-wide ones once at the start of a run. */
#include <stdio.h>
#include "check_int.h"

/* {=== One operand access (from bs_chk_access) ===} */

static int is_dma_op(int32_t op)
{
    const char *n = bs_opinfo_table[op].name;
    return strncmp(n, "DMA", 3) == 0 || op == BS_OP_Load || op == BS_OP_Save ||
           op == BS_OP_TensorLoad || op == BS_OP_TensorSave || op == BS_OP_CustomOp ||
           op == BS_OP_BIRKernel || strstr(n, "IndirectLoad") || strstr(n, "IndirectSave");
}

static int is_compute_engine(int32_t e)
{
    return e == BS_ENGINE_Pool || e == BS_ENGINE_Activation || e == BS_ENGINE_PE ||
           e == BS_ENGINE_DVE;
}

bs_status bs_chk_capacity_access(bs_sim *sim, bs_core *c, int32_t insn, int j,
                                 const bs_opnd *o, const chk_where *w, const chk_geom *g,
                                 bs_error *err)
{
    const bs_program *p = sim->prog;
    const bs_insn *in = &p->insns[insn];
    const bs_loc *L = &p->locs[o->loc];
    int out = j >= in->nin;
    char na[512], msg[1000];
    int64_t d[BS_FINDING_NDETAIL];
    bs_chk_detail_init(d);
    d[BS_FD_CORE_A] = c->index;
    d[BS_FD_INSN_A] = insn;
    d[BS_FD_LOC] = o->loc;
    d[BS_FD_OPERAND] = out ? BS_OUT_OPERAND + j - in->nin : j;
    if (is_compute_engine(in->engine) && !is_dma_op(in->op) &&
        (L->memtype == BS_MEM_SB || L->memtype == BS_MEM_PSUM)) {
        int64_t n = g->p1 - g->p0, start = w->placed ? g->p0 : g->p0 + 0;
        int ok = n > 64 ? start == 0 : n > 32 ? (start == 0 || start == 64) : start % 32 == 0;
        if (!ok && bs_chk_seen_add(sim->chk, ((uint64_t)(uint32_t)insn << 8) ^ 0x51u ^ ((uint64_t)j << 40))) {
            bs_chk_name_insn(sim, c->index, insn, -1, na, sizeof na);
            snprintf(msg, sizeof msg, "capacity: %s: %s[%d] on '%s' covers %lld partitions starting "
                     "at partition %lld; an operand of %s partitions must start at %s", na,
                     out ? "outs" : "ins", out ? j - in->nin : j, bs_str(p, L->name), (long long)n,
                     (long long)start, n > 64 ? "65-128" : n > 32 ? "33-64" : "1-32",
                     n > 64 ? "0" : n > 32 ? "0 or 64" : "0, 32, 64 or 96");
            d[BS_FD_SUB] = BS_FINDING_start_partition;
            d[BS_FD_P0] = start;
            d[BS_FD_P1] = start + n;
            BS_TRY(bs_chk_add_finding(sim, BS_CHECK_capacity, d, c->index, insn, msg, err));
        }
    }
    if (in->op == BS_OP_Matmult && out && L->memtype == BS_MEM_PSUM &&
        g->b0 / CHK_BANK != (g->b1 - 1) / CHK_BANK &&
        bs_chk_seen_add(sim->chk, ((uint64_t)(uint32_t)insn << 8) ^ 0x52u)) {
        bs_chk_name_insn(sim, c->index, insn, -1, na, sizeof na);
        snprintf(msg, sizeof msg, "capacity: %s accumulates into '%s' bytes [%lld, %lld) of each "
                 "partition, across PSUM banks of %d bytes (a matmul output must fit one bank)",
                 na, bs_str(p, L->name), (long long)(g->b0 - w->rb), (long long)(g->b1 - w->rb), CHK_BANK);
        d[BS_FD_SUB] = BS_FINDING_psum_banks;
        d[BS_FD_B0] = g->b0 - w->rb;
        d[BS_FD_B1] = g->b1 - w->rb;
        d[BS_FD_LIMIT] = CHK_BANK;
        BS_TRY(bs_chk_add_finding(sim, BS_CHECK_capacity, d, c->index, insn, msg, err));
    }
    return BS_OK;
}

/* {=== Static checks at the start of a run ===} */

static bs_status unreachable_waits(bs_sim *sim, bs_error *err)
{
    const bs_program *p = sim->prog;
    uint8_t ev_set[BS_NUM_EVENTS] = {0}, sem_up[BS_NUM_SEMS] = {0};
    uint32_t sem_wr[BS_NUM_SEMS] = {0};
    for (int32_t i = 0; i < p->n_insns; i++) {
        const bs_insn *in = &p->insns[i];
        for (int32_t u = in->sync + in->nwait; u < in->sync + in->nwait + in->nupd; u++) {
            const bs_sync *y = &p->syncs[u];
            if (y->type == BS_SYNCTYPE_event)
                ev_set[y->id] = 1;
            else if (y->mode == BS_UPDATE_sem_wr_imm) {
                if ((uint32_t)y->value > sem_wr[y->id])
                    sem_wr[y->id] = (uint32_t)y->value;
            } else if ((y->mode == BS_UPDATE_sem_add_imm && y->value != 0) ||
                       y->mode == BS_UPDATE_sem_inc)
                sem_up[y->id] = 1;
        }
    }
    for (int32_t i = 0; i < p->n_insns; i++) {
        const bs_insn *in = &p->insns[i];
        for (int32_t u = in->sync; u < in->sync + in->nwait; u++) {
            const bs_sync *y = &p->syncs[u];
            int never;
            char na[512], msg[1000];
            int64_t d[BS_FINDING_NDETAIL];
            if (y->type == BS_SYNCTYPE_event)
                never = !ev_set[y->id];
            else if (y->mode == BS_WAIT_sem_ge_imm)
                never = (uint32_t)y->value > 0 && !sem_up[y->id] && sem_wr[y->id] < (uint32_t)y->value;
            else
                never = 0;
            if (!never)
                continue;
            bs_chk_name_insn(sim, 0, i, -1, na, sizeof na);
            if (y->type == BS_SYNCTYPE_event)
                snprintf(msg, sizeof msg, "leftover_sync: %s waits for event %d, which no update "
                         "in the program ever sets", na, y->id);
            else
                snprintf(msg, sizeof msg, "leftover_sync: %s waits for semaphore %d >= %lld, a "
                         "value no update in the program can reach", na, y->id, (long long)y->value);
            bs_chk_detail_init(d);
            d[BS_FD_SUB] = BS_FINDING_wait_unreachable;
            d[BS_FD_CORE_A] = 0;
            d[BS_FD_INSN_A] = i;
            d[BS_FD_INDEX] = y->id;
            d[BS_FD_VALUE] = y->type == BS_SYNCTYPE_event ? -1 : y->value;
            BS_TRY(bs_chk_add_finding(sim, BS_CHECK_leftover_sync, d, 0, i, msg, err));
        }
    }
    return BS_OK;
}

/* SBUF and PSUM locations with more partitions than the architecture has. */
static bs_status partitions_over(bs_sim *sim, bs_error *err)
{
    const bs_program *p = sim->prog;
    char msg[1000];
    int64_t d[BS_FINDING_NDETAIL];
    for (int32_t l = 0; l < p->n_locs; l++) {
        const bs_loc *L = &p->locs[l];
        int32_t lim = L->memtype == BS_MEM_PSUM ? sim->arch->psum_parts : sim->arch->sbuf_parts;
        if ((L->memtype != BS_MEM_SB && L->memtype != BS_MEM_PSUM) || L->parts <= lim)
            continue;
        snprintf(msg, sizeof msg, "capacity: '%s' has %lld partitions; %s has %d", bs_str(p, L->name),
                 (long long)L->parts, L->memtype == BS_MEM_SB ? "SBUF" : "PSUM", lim);
        bs_chk_detail_init(d);
        d[BS_FD_SUB] = BS_FINDING_partitions;
        d[BS_FD_LOC] = l;
        d[BS_FD_VALUE] = L->parts;
        d[BS_FD_LIMIT] = lim;
        BS_TRY(bs_chk_add_finding(sim, BS_CHECK_capacity, d, -1, -1, msg, err));
    }
    return BS_OK;
}

/* Functions whose SBUF or PSUM tiles need more bytes per partition than there are. */
static bs_status bytes_over(bs_sim *sim, bs_error *err)
{
    const bs_program *p = sim->prog;
    char msg[1000];
    int64_t d[BS_FINDING_NDETAIL];
    for (int32_t fi = 0; fi < p->n_funcs; fi++) {
        const bs_func *fn = &p->funcs[fi];
        for (int m = 0; m < 2; m++) {
            int32_t mt = m ? BS_MEM_PSUM : BS_MEM_SB;
            int64_t lim = m ? sim->arch->psum_bpp : sim->arch->sbuf_bpp, sum = 0, placed = 0;
            for (int32_t s = fn->set0; s < fn->set0 + fn->nset; s++)
                for (int32_t l = p->sets[s].loc0; l < p->sets[s].loc0 + p->sets[s].nloc; l++) {
                    const bs_loc *L = &p->locs[l];
                    if (L->memtype != mt)
                        continue;
                    if (L->placed) {
                        if (L->addr + L->bpp > placed)
                            placed = L->addr + L->bpp;
                    } else {
                        sum += L->bpp;
                    }
                }
            if (sum + placed <= lim)
                continue;
            snprintf(msg, sizeof msg, "capacity: function '%s' holds %lld bytes per partition of %s "
                     "tiles (%lld unplaced + %lld placed), more than the %lld of %s on %s",
                     bs_str(p, fn->name), (long long)(sum + placed), m ? "PSUM" : "SBUF",
                     (long long)sum, (long long)placed, (long long)lim, m ? "PSUM" : "SBUF",
                     sim->arch->name);
            bs_chk_detail_init(d);
            d[BS_FD_SUB] = m ? BS_FINDING_psum_full : BS_FINDING_sbuf_full;
            d[BS_FD_VALUE] = sum + placed;
            d[BS_FD_LIMIT] = lim;
            d[BS_FD_INDEX] = fi;
            BS_TRY(bs_chk_add_finding(sim, BS_CHECK_capacity, d, -1, -1, msg, err));
        }
    }
    return BS_OK;
}

/* Operands in a memory their engine cannot reach; a matmul result outside PSUM. */
static bs_status engine_memory(bs_sim *sim, bs_error *err)
{
    const bs_program *p = sim->prog;
    char msg[1000], na[512];
    int64_t d[BS_FINDING_NDETAIL];
    for (int32_t i = 0; i < p->n_insns; i++) {
        const bs_insn *in = &p->insns[i];
        for (int32_t j = 0; j < in->nin + in->nout; j++) {
            const bs_opnd *o = &p->opnds[in->opnd + j];
            int out = j >= in->nin, bad_mm, bad_dram, bad_psum, pool;
            if (o->kind != BS_OPND_physical_ap && o->kind != BS_OPND_symbolic_ap &&
                o->kind != BS_OPND_register_ap)
                continue;
            bad_mm = in->op == BS_OP_Matmult && out && p->locs[o->loc].memtype != BS_MEM_PSUM;
            bad_dram = is_compute_engine(in->engine) && !is_dma_op(in->op) &&
                       p->locs[o->loc].memtype == BS_MEM_DRAM;
            /* GpSimd reaches SBUF only, no PSUM (docs/spec/nki-isa-semantics.md §1) */
            pool = in->engine == BS_ENGINE_Pool;
            bad_psum = pool && !is_dma_op(in->op) && p->locs[o->loc].memtype == BS_MEM_PSUM;
            if (!bad_mm && !bad_dram && !bad_psum)
                continue;
            bs_chk_name_insn(sim, 0, i, -1, na, sizeof na);
            if (bad_mm)
                snprintf(msg, sizeof msg, "capacity: %s writes its result into '%s' (%s); a matmul "
                         "writes PSUM", na, bs_str(p, p->locs[o->loc].name),
                         bs_enum_name("MEM", p->locs[o->loc].memtype));
            else
                snprintf(msg, sizeof msg, "capacity: %s: %s[%d] is '%s' in %s; the %s engine "
                         "reads and writes only %s", na, out ? "outs" : "ins",
                         out ? j - in->nin : j, bs_str(p, p->locs[o->loc].name),
                         bad_dram ? "DRAM" : "PSUM", bs_enum_name("ENGINE", in->engine),
                         pool ? "SBUF (GpSimd has no PSUM access; DRAM goes through DMA)"
                              : "SBUF and PSUM (DRAM goes through DMA)");
            bs_chk_detail_init(d);
            d[BS_FD_SUB] = bad_mm ? BS_FINDING_matmul_not_psum
                         : bad_dram ? BS_FINDING_engine_dram : BS_FINDING_engine_psum;
            d[BS_FD_CORE_A] = 0;
            d[BS_FD_INSN_A] = i;
            d[BS_FD_LOC] = o->loc;
            d[BS_FD_OPERAND] = out ? BS_OUT_OPERAND + j - in->nin : j;
            BS_TRY(bs_chk_add_finding(sim, BS_CHECK_capacity, d, 0, i, msg, err));
        }
    }
    return BS_OK;
}

static bs_status static_capacity(bs_sim *sim, bs_error *err)
{
    BS_TRY(partitions_over(sim, err));
    BS_TRY(bytes_over(sim, err));
    return engine_memory(sim, err);
}

bs_status bs_chk_run_start(bs_sim *sim, bs_error *err)
{
    bs_chk *k = sim->chk;
    if (k->started)
        return BS_OK;
    k->started = 1;
    if (k->mask & MASK(leftover_sync))
        BS_TRY(unreachable_waits(sim, err));
    if (k->mask & MASK(capacity))
        BS_TRY(static_capacity(sim, err));
    return BS_OK;
}
