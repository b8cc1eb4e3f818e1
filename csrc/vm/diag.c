/* vm/diag.c -- a run's diagnostics and notes (bs_sim_diagnose, bs_sim_note), and the one
** place a failing instruction's location is attached to an error (bs_fail_at), with why
** a step limit was reached. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "vm.h"
#include "check.h"

/* {=== Diagnostics ===} */

#define BS_MAX_DIAGS 1000

/* Record one diagnostic (strict: it is the run's error instead). */
static bs_status record_diag(bs_sim *sim, bs_error *err, const char *text)
{
    if (sim->opts.strict)
        return bs_errorf(err, BS_E_STRICT, "%s", text);
    if (sim->ndiag >= BS_MAX_DIAGS) {
        sim->diag_dropped++;
        return BS_OK;
    }
    {
        void *d = sim->diags;
        if (bs_reserve(&d, &sim->diags_cap, (size_t)(sim->ndiag + 1) * sizeof *sim->diags, 1))
            return bs_errorf(err, BS_E_NOMEM, "out of memory recording a diagnostic");
        sim->diags = d;
    }
    sim->diags[sim->ndiag] = bs_malloc(strlen(text) + 1);
    if (sim->diags[sim->ndiag] == NULL)
        return bs_errorf(err, BS_E_NOMEM, "out of memory recording a diagnostic");
    strcpy(sim->diags[sim->ndiag++], text);
    return BS_OK;
}

bs_status bs_sim_diagnose(bs_sim *sim, bs_error *err, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return record_diag(sim, err, buf);
}

bs_status bs_sim_note(bs_sim *sim, const char *text, bs_error *err)
{
    size_t n = strlen(text);
    {
        void *s = sim->notes;
        if (bs_reserve(&s, &sim->notes_cap, sim->notes_len + n + 1, 1))
            return bs_errorf(err, BS_E_NOMEM, "out of memory recording a note");
        sim->notes = s;
    }
    memcpy(sim->notes + sim->notes_len, text, n + 1);
    sim->notes_len += n;
    return BS_OK;
}

void bs_sim_clear_diags(bs_sim *sim)
{
    for (int32_t i = 0; i < sim->ndiag; i++)
        bs_free(sim->diags[i]);
    sim->ndiag = 0;
    sim->diag_dropped = 0;
    sim->notes_len = 0;
    if (sim->notes)
        sim->notes[0] = '\0';
}

bs_status bs_sim_diagnose_at(bs_sim *sim, const bs_core *c, int32_t insn, bs_error *err,
                             const char *fmt, ...)
{
    char buf[1024], where[600], full[sizeof buf + sizeof where + 32];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (sim->opts.strict)               /* bs_core_step attaches the location */
        return record_diag(sim, err, buf);
    bs_insn_where(sim->prog, insn, where, sizeof where);
    if (sim->ncores > 1 && c)
        snprintf(full, sizeof full, "core %d, %s: %s", c->index, where, buf);
    else
        snprintf(full, sizeof full, "%s: %s", where, buf);
    return record_diag(sim, err, full);
}

void bs_insn_where(const bs_program *p, int32_t insn, char *buf, size_t cap)
{
    const bs_insn *in = &p->insns[insn];
    const bs_block *b = &p->blocks[in->block];
    int32_t pos = insn - b->insn0;
    if (pos >= 0 && pos < b->ninsn)
        snprintf(buf, cap, "function '%s', block '%s', position %d, instruction '%s' (%s)",
                 bs_str(p, p->funcs[in->func].name), bs_str(p, b->name), (int)pos,
                 bs_str(p, in->name), bs_opinfo_table[in->op].name);
    else                              /* a DMABlock: in no block's instruction range */
        snprintf(buf, cap, "function '%s', block '%s', instruction '%s' (%s)",
                 bs_str(p, p->funcs[in->func].name), bs_str(p, b->name),
                 bs_str(p, in->name), bs_opinfo_table[in->op].name);
}

/* A step limit reached inside a DoWhile: why it may never end. Registers are per engine,
** so a counter set on one engine and counted down on another starts from the counting
** engine's initial 0xFFFFFFFF and never reaches 0: name the loop, its condition register
** and the value each engine's file holds. */
static void limit_why(const bs_sim *sim, const bs_core *c, char *buf, size_t cap)
{
    const bs_program *p = sim->prog;
    buf[0] = '\0';
    for (int32_t k = c->nframes - 1; k >= 0; k--) {
        const bs_frame *f = &c->frames[k];
        const bs_insn *in;
        int32_t r;
        size_t n;
        uint64_t init;
        if (f->owner < 0 || p->insns[f->owner].op != BS_OP_DoWhile)
            continue;
        in = &p->insns[f->owner];
        r = (int32_t)BS_PI(in, DoWhile, cond_reg);
        init = p->regs[r].wide ? UINT64_MAX : 0xFFFFFFFFu;
        int any = 0;
        n = (size_t)snprintf(buf, cap, "; still looping in DoWhile '%s' (function '%s', block "
                             "'%s'), whose condition register '%s' is %lld; engine files not "
                             "at their initial value:", bs_str(p, in->name), bs_str(p, p->funcs[in->func].name),
                             bs_str(p, p->blocks[in->block].name), bs_str(p, p->regs[r].name),
                             (long long)bs_reg_i64(sim, r, c->regs[(size_t)r * BS_REG_SLOTS]));
        for (int s = BS_ENGINE_Pool; s <= BS_ENGINE_SP && n < cap; s++) {
            uint64_t v = c->regs[(size_t)r * BS_REG_SLOTS + (size_t)s];
            if (v != init)
                n += (size_t)snprintf(buf + n, cap - n, "%s %s %lld", any++ ? "," : "",
                                      bs_enum_name("ENGINE", s),
                                      (long long)bs_reg_i64(sim, r, v));
        }
        if (n < cap)
            snprintf(buf + n, cap - n, " (registers are per engine: a counter set on one "
                     "engine and counted on another starts from 0x%llX there and may never "
                     "reach 0; checks=\"uninit_regs\" reports such reads)",
                     (unsigned long long)init);
        return;
    }
}

bs_status bs_fail_at(bs_sim *sim, bs_core *c, int32_t insn, bs_status st, bs_error *err)
{
    const bs_program *p = sim->prog;
    char msg[BS_ERRMSG], where[600], core[32] = "";
    if (st == BS_E_LIMIT && c != NULL) {
        char why[BS_ERRMSG];
        limit_why(sim, c, why, sizeof why);
        if (why[0])
            bs_error_append(err, "%s", why);
    }
    if (insn >= 0) {
        bs_error_at_insn(err, p, insn);
        bs_insn_where(p, insn, where, sizeof where);
    } else if (err->block >= 0 && err->block < p->n_blocks) {
        err->func = p->blocks[err->block].func;
        snprintf(where, sizeof where, "function '%s', block '%s'",
                 bs_str(p, p->funcs[err->func].name), bs_str(p, p->blocks[err->block].name));
    } else {
        where[0] = '\0';
    }
    err->core = c ? c->index : -1;
    if (sim->ncores > 1 && c)
        snprintf(core, sizeof core, "core %d%s", c->index, where[0] ? ", " : "");
    if (core[0] == '\0' && where[0] == '\0')
        return st;
    snprintf(msg, sizeof msg, "%s", err->msg);
    bs_errorf(err, st, "%s%s: %s", core, where, msg);
    return st;
}

int32_t bs_sim_ndiag(const bs_sim *sim) { return sim->ndiag; }
const char *bs_sim_diag(const bs_sim *sim, int32_t i)
{
    return (i >= 0 && i < sim->ndiag) ? sim->diags[i] : "";
}
int64_t bs_sim_diag_dropped(const bs_sim *sim) { return sim->diag_dropped; }
const char *bs_sim_notes(const bs_sim *sim) { return sim->notes ? sim->notes : ""; }
