/* vm/regs.c -- registers and expressions: the engine slot an instruction reads its
** registers from, a register's bits and their value as an integer, register writes (the
** shared slot 0 and the engine's own), and expression evaluation over a core's live loop
** axes and registers. The per-step helpers are inline in vm.h. */
#include "vm.h"
#include "check.h"

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
