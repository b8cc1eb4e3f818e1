/* vm/regs.c -- registers and expressions: the engine slot an instruction reads its
** registers from, a register's bits and their value as an integer, register writes (the
** shared slot 0 and the engine's own), and expression evaluation over a core's live loop
** axes and registers. */
#include "vm.h"
#include "check.h"


int32_t bs_insn_slot(const bs_program *p, int32_t insn)
{
    const bs_insn *in = &p->insns[insn];
    int fam = bs_opinfo_table[in->op].family;
    if (in->engine < BS_ENGINE_Pool || in->engine > BS_ENGINE_SP || fam == BS_FAM_loop ||
        fam == BS_FAM_call)
        return 0;
    return in->engine;
}

int32_t bs_core_slot(const bs_sim *sim, const bs_core *c, int32_t insn)
{
    if (c->nframes > 0 && c->frames[c->nframes - 1].rslot >= 0)
        return c->frames[c->nframes - 1].rslot;
    return bs_insn_slot(sim->prog, insn);
}

uint64_t bs_core_reg_bits(const bs_core *c, int32_t reg)
{
    if (BS_UNLIKELY(c->regchk != NULL))
        bs_chk_reg_read(c, reg);
    return c->regs[(size_t)reg * BS_REG_SLOTS + (size_t)c->rslot];
}

int64_t bs_reg_i64(const bs_sim *sim, int32_t reg, uint64_t v)
{
    switch (sim->prog->regs[reg].dtype) {
    case BS_DT_uint32:  return (int64_t)(uint32_t)v;
    case BS_DT_float32: {
        float f;
        uint32_t b = (uint32_t)v;
        memcpy(&f, &b, 4);
        return bs_f64_to_i64(f);            /* saturates; NaN -> 0 */
    }
    case BS_DT_int64:
    case BS_DT_uint64:  return (int64_t)v;
    default:            return (int64_t)(int32_t)(uint32_t)v;
    }
}

int64_t bs_core_reg_i64(const bs_sim *sim, const bs_core *c, int32_t reg)
{
    return bs_reg_i64(sim, reg, bs_core_reg_bits(c, reg));
}

void bs_core_reg_set(const bs_sim *sim, bs_core *c, int32_t reg, uint64_t bits)
{
    uint64_t *cell = c->regs + (size_t)reg * BS_REG_SLOTS;
    if (!sim->prog->regs[reg].wide)
        bits &= 0xFFFFFFFFu;
    if (BS_UNLIKELY(c->regchk != NULL))
        bs_chk_reg_write(c, reg);
    if (c->rslot == 0) {
        for (int s = 0; s < BS_REG_SLOTS; s++)
            cell[s] = bits;
    } else {
        cell[c->rslot] = bits;
        cell[0] = bits;
    }
}

typedef struct reg_ctx { const bs_sim *sim; const bs_core *c; } reg_ctx;

static int64_t read_reg_cb(void *ctx, int32_t reg)
{
    reg_ctx *rc = ctx;
    return bs_core_reg_i64(rc->sim, rc->c, reg);
}

bs_status bs_core_eval(bs_sim *sim, bs_core *c, int32_t expr, int64_t *out, bs_error *err)
{
    reg_ctx rc = { sim, c };
    bs_expr_env env = { c->env, c->live, read_reg_cb, &rc, c->index };
    return bs_expr_eval(sim->prog, expr, &env, out, err);
}

uint64_t bs_sim_reg(const bs_sim *sim, int32_t core, int32_t reg, int32_t engine)
{
    int32_t slot = engine >= BS_ENGINE_Pool && engine <= BS_ENGINE_SP ? engine : 0;
    if (core < 0 || core >= sim->ncores || reg < 0 || reg >= sim->prog->n_regs)
        return 0;
    return sim->cores[core].regs[(size_t)reg * BS_REG_SLOTS + (size_t)slot];
}
