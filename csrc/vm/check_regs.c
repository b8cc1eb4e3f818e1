/* vm/check_regs.c -- checks="uninit_regs": an instruction reads a register from its
** engine's register file (docs/spec/BIR-JSON.md "Registers are per engine") that no instruction of
** that engine wrote this run; it reads the file's initial 0xFFFFFFFF. The classic case:
** a DoWhile counter set on one engine and counted down on another never reaches 0.
**
** Each core has a written flag per register cell (n_regs x BS_REG_SLOTS; slot 0, which
** rendezvous instructions and DoWhile conditions read, is written by any engine). Reads
** go through bs_core_reg_bits, which has no status to return: it notes the read
** (bs_chk_reg_read) and bs_chk_reg_flush turns the notes into findings when an
** instruction completes or a DoWhile tests its condition. sem-ge-reg waits read the
** register raw (they are polled for readiness) and are not checked: one on a never-written
** file waits for 0xFFFFFFFF, which the deadlock report shows. The state lives in bs_core.regchk, NULL when the
** check is off, so the hooks cost one branch. */
#include <stdio.h>
#include "check_int.h"

#define REGCHK_PEND 8        /* notes kept between flushes (more are rare; they are lost) */

struct bs_regchk {
    uint8_t *written;        /* n_regs x BS_REG_SLOTS */
    int32_t  npend;
    int32_t  pend[REGCHK_PEND][3];   /* register, slot, instruction */
};

bs_status bs_regchk_new(bs_sim *sim, bs_core *c, bs_error *err)
{
    struct bs_regchk *r;
    if (!(sim->opts.checks & (int32_t)MASK(uninit_regs)))
        return BS_OK;
    r = bs_calloc(1, sizeof *r);
    if (r == NULL)
        return bs_errorf(err, BS_E_NOMEM, "out of memory creating the register checker");
    c->regchk = r;
    r->written = bs_calloc((size_t)sim->prog->n_regs * BS_REG_SLOTS + 1, 1);
    if (r->written == NULL)
        return bs_errorf(err, BS_E_NOMEM, "out of memory creating the register checker");
    return BS_OK;
}

void bs_regchk_free(bs_core *c)
{
    if (c->regchk == NULL)
        return;
    bs_free(c->regchk->written);
    bs_free(c->regchk);
    c->regchk = NULL;
}

void bs_regchk_reset(const bs_sim *sim, bs_core *c)
{
    if (c->regchk == NULL)
        return;
    memset(c->regchk->written, 0, (size_t)sim->prog->n_regs * BS_REG_SLOTS);
    c->regchk->npend = 0;
}

void bs_chk_reg_read(const bs_core *c, int32_t reg)
{
    struct bs_regchk *r = c->regchk;
    int32_t slot = c->rslot < 0 ? 0 : c->rslot;
    if (r->written[(size_t)reg * BS_REG_SLOTS + (size_t)slot] || r->npend >= REGCHK_PEND)
        return;
    r->pend[r->npend][0] = reg;
    r->pend[r->npend][1] = slot;
    r->pend[r->npend][2] = c->where;
    r->npend++;
}

void bs_chk_reg_write(const bs_core *c, int32_t reg)
{
    uint8_t *w = c->regchk->written + (size_t)reg * BS_REG_SLOTS;
    if (c->rslot <= 0)
        memset(w, 1, BS_REG_SLOTS);
    else
        w[c->rslot] = w[0] = 1;
}

static bs_status report(bs_sim *sim, bs_core *c, int32_t reg, int32_t slot, int32_t insn,
                        bs_error *err)
{
    const bs_program *p = sim->prog;
    char where[700], msg[1200], file[64];
    int64_t d[BS_FINDING_NDETAIL];
    uint64_t key = ((uint64_t)0xA5u << 56) ^ ((uint64_t)(uint32_t)c->index << 40)
                   ^ ((uint64_t)(uint32_t)insn << 12) ^ ((uint64_t)(uint32_t)reg << 3)
                   ^ (uint64_t)slot;
    if (insn < 0 || !bs_chk_seen_add(sim->chk, key))
        return BS_OK;
    bs_chk_name_insn(sim, c->index, insn, -1, where, sizeof where);
    if (slot == 0)
        snprintf(file, sizeof file, "no engine");
    else
        snprintf(file, sizeof file, "no %s instruction", bs_enum_name("ENGINE", slot));
    snprintf(msg, sizeof msg, "uninitialized register read: %s reads register '%s' from the "
             "%s register file, which %s wrote this run (registers are per engine: it reads "
             "the initial 0x%llX)", where, bs_str(p, p->regs[reg].name),
             slot == 0 ? "shared (most recent)" : bs_enum_name("ENGINE", slot), file,
             (unsigned long long)(p->regs[reg].wide ? UINT64_MAX : 0xFFFFFFFFu));
    bs_chk_detail_init(d);
    d[BS_FD_SUB] = BS_FINDING_uninit_reg;
    d[BS_FD_CORE_A] = c->index;
    d[BS_FD_INSN_A] = insn;
    d[BS_FD_INDEX] = reg;
    d[BS_FD_VALUE] = slot;
    return bs_chk_add_finding(sim, BS_CHECK_uninit_regs, d, c->index, insn, msg, err);
}

bs_status bs_chk_reg_flush(bs_sim *sim, bs_core *c, int32_t insn, bs_error *err)
{
    struct bs_regchk *r = c->regchk;
    int32_t n;
    (void)insn;
    if (r == NULL)
        return BS_OK;
    n = r->npend;
    r->npend = 0;
    for (int32_t i = 0; i < n; i++)
        BS_TRY(report(sim, c, r->pend[i][0], r->pend[i][1], r->pend[i][2], err));
    return BS_OK;
}
