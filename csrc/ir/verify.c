/* ir/verify.c -- the verifier bs_program_new runs on the copied tables: every index,
** span and string in range, operands and parameters as bs_ops.def declares them, sync
** entries well formed. After it the VM indexes any table without further checks (house
** style G6); its messages name the table, record and field. */
#define _POSIX_C_SOURCE 200809L   /* pthread_once */
#include <pthread.h>
#include "program.h"

/* {=== Named parameter slots ===} */

/* What the checks compare with, built once per process from the .def tables (the first
** bs_program_verify; a Program() of a tiny program spent a third of its instructions
** rebuilding them). */
typedef struct vtables {
    uint16_t mask[BS_OP__COUNT];   /* per opcode, a bit per declared slot: i[] in bits 0..7,
                                   ** f[] 8..11, x[] 12..15 */
    int64_t  cmp_end, wait_end, update_end;   /* sizes of the CMP, WAIT, UPDATE groups */
} vtables;

static vtables vt;
static pthread_once_t vt_once = PTHREAD_ONCE_INIT;

static void vtables_init(void)
{
    vtables *t = &vt;
    uint16_t *mask = t->mask;
    t->cmp_end = bs_enum_end("CMP");
    t->wait_end = bs_enum_end("WAIT");
    t->update_end = bs_enum_end("UPDATE");
    memset(mask, 0, BS_OP__COUNT * sizeof mask[0]);
    for (int32_t k = 0; k < bs_param_count; k++) {
        const bs_paraminfo *q = &bs_param_table[k];
        int base = q->slot == 'i' ? 0 : q->slot == 'f' ? BS_NSLOT_i : BS_NSLOT_i + BS_NSLOT_f;
        mask[q->op] |= (uint16_t)(1u << (base + q->index));
    }
}

/* {=== Verification ===} */

#define CHECK(cond, ...) do { if (!(cond)) return bs_errorf(err, BS_E_PROGRAM, __VA_ARGS__); } while (0)

static int in_range(int64_t i, int64_t n) { return i >= 0 && i < n; }
static int span_ok(int64_t first, int64_t count, int64_t n)
{
    return first >= 0 && count >= 0 && first <= n && count <= n - first;
}

static bs_status verify_str(const bs_program *p, int32_t s, const char *what, int64_t i,
                            bs_error *err)
{
    CHECK(in_range(s, p->n_strings), "%s[%lld]: bad string offset %d", what, (long long)i, s);
    return BS_OK;
}

/* Walk expression e once: opcodes valid, arguments in range, stack never under/overflows. */
static bs_status verify_expr(const bs_program *p, int64_t e, bs_error *err)
{
    int64_t n, depth = 0;
    CHECK(in_range(e, p->n_exprs), "expression index %lld out of range", (long long)e);
    n = p->exprs[e];
    CHECK(n >= 2 && n % 2 == 0 && span_ok(e + 1, n, p->n_exprs),
          "expression %lld: bad length %lld", (long long)e, (long long)n);
    for (int64_t k = e + 1; k < e + 1 + n; k += 2) {
        int64_t op = p->exprs[k], arg = p->exprs[k + 1];
        switch (op) {
        case BS_X_CONST: depth++; break;
        case BS_X_IV:    CHECK(in_range(arg, p->module->naxes), "expression %lld: bad axis %lld",
                               (long long)e, (long long)arg); depth++; break;
        case BS_X_REG:   CHECK(in_range(arg, p->n_regs), "expression %lld: bad register %lld",
                               (long long)e, (long long)arg); depth++; break;
        case BS_X_SHARD: depth++; break;
        case BS_X_ADD:   CHECK(depth >= 2, "expression %lld: stack underflow", (long long)e); depth--; break;
        case BS_X_MUL:   CHECK(depth >= 1, "expression %lld: stack underflow", (long long)e); break;
        case BS_X_FLOORDIV:
        case BS_X_MOD:   CHECK(depth >= 1 && arg > 0, "expression %lld: bad divisor", (long long)e); break;
        default:         CHECK(0, "expression %lld: bad opcode %lld", (long long)e, (long long)op);
        }
        CHECK(depth <= BS_EXPR_STACK, "expression %lld: too deep", (long long)e);
    }
    CHECK(depth == 1, "expression %lld: leaves %lld values", (long long)e, (long long)depth);
    return BS_OK;
}

static bs_status verify_opnd(const bs_program *p, int64_t i, bs_error *err)
{
    const bs_opnd *o = &p->opnds[i];
    CHECK(in_range(o->dtype, BS_DT__COUNT), "opnds[%lld]: bad dtype %d", (long long)i, o->dtype);
    switch (o->kind) {
    case BS_OPND_physical_ap:
    case BS_OPND_symbolic_ap:
    case BS_OPND_register_ap:
        CHECK(in_range(o->loc, p->n_locs), "opnds[%lld]: bad location %d", (long long)i, o->loc);
        CHECK(o->ndim >= 1 && o->ndim <= BS_MAX_DIMS, "opnds[%lld]: ndim %d not in 1..5",
              (long long)i, o->ndim);
        CHECK(o->step[0] >= 0, "opnds[%lld]: negative partition step", (long long)i);
        for (int d = 0; d < o->ndim; d++) {
            CHECK(o->num[d] >= 1 && o->num[d] <= BS_AP_NUM_MAX, "opnds[%lld]: bad num", (long long)i);
            CHECK(o->step[d] > -BS_AP_STEP_LIMIT && o->step[d] < BS_AP_STEP_LIMIT,
                  "opnds[%lld]: step out of range", (long long)i);
            if (o->kind == BS_OPND_symbolic_ap && o->addrs[d] >= 0)
                BS_TRY(verify_expr(p, o->addrs[d], err));
        }
        if (o->offset_expr >= 0)
            BS_TRY(verify_expr(p, o->offset_expr, err));
        if (o->kind == BS_OPND_register_ap)
            CHECK(in_range(o->reg, p->n_regs), "opnds[%lld]: bad offset register", (long long)i);
        break;
    case BS_OPND_register_access:
        CHECK(in_range(o->loc, p->n_regs), "opnds[%lld]: bad register %d", (long long)i, o->loc);
        break;
    case BS_OPND_imm_value:
        break;
    case BS_OPND_imm_array:
        CHECK(span_ok(o->arr_off, o->arr_len, p->n_fpool), "opnds[%lld]: bad array", (long long)i);
        break;
    default:
        CHECK(0, "opnds[%lld]: bad operand kind %d", (long long)i, o->kind);
    }
    return BS_OK;
}

static int is_region_op(int32_t op)
{
    return op == BS_OP_Loop || op == BS_OP_DynamicForLoop || op == BS_OP_DoWhile ||
           op == BS_OP_DMABlock;
}

static bs_status verify_insn_slots(const bs_program *p, int64_t i, const vtables *t,
                                   bs_error *err)
{
    const bs_insn *in = &p->insns[i];
    const int64_t *list = p->ipool + in->list;
    switch (in->op) {
    case BS_OP_Loop:
        CHECK(BS_PI(in, Loop, stride) > 0 || BS_PI(in, Loop, lb) >= BS_PI(in, Loop, ub),
              "insns[%lld]: Loop stride must be > 0 when lb < ub", (long long)i);
        /* fall through */
    case BS_OP_DynamicForLoop:
        CHECK(in_range(BS_PI(in, Loop, axis), p->module->naxes), "insns[%lld]: bad axis slot", (long long)i);
        if (in->op == BS_OP_DynamicForLoop)
            CHECK(in_range(BS_PI(in, DynamicForLoop, ub_reg), p->n_regs), "insns[%lld]: bad ub register", (long long)i);
        break;
    case BS_OP_DoWhile:
        CHECK(in_range(BS_PI(in, DoWhile, cond_reg), p->n_regs), "insns[%lld]: bad cond register", (long long)i);
        break;
    case BS_OP_CompareAndBranch:
        CHECK(in_range(in->target2, p->n_blocks), "insns[%lld]: bad on_false", (long long)i);
        CHECK(in_range(BS_PI(in, CompareAndBranch, comp_op), t->cmp_end), "insns[%lld]: bad comp_op", (long long)i);
        CHECK(in->nin >= 2, "insns[%lld]: CompareAndBranch needs 2 ins", (long long)i);
        /* fall through */
    case BS_OP_UnconditionalBranch:
        CHECK(in_range(in->target, p->n_blocks), "insns[%lld]: bad branch target", (long long)i);
        CHECK(p->blocks[in->target].region == p->blocks[in->block].region &&
              (in->op != BS_OP_CompareAndBranch ||
               p->blocks[in->target2].region == p->blocks[in->block].region),
              "insns[%lld]: branch target outside its region", (long long)i);
        break;
    case BS_OP_Call:
    case BS_OP_NKIKernel:
        CHECK(in_range(in->target, p->n_funcs) ||
              (in->op == BS_OP_Call && in->target == -1 && in->nlist == 0),
              "insns[%lld]: bad call target", (long long)i);
        CHECK(in->nlist % 2 == 0, "insns[%lld]: bad argument list", (long long)i);
        for (int64_t k = 0; k < in->nlist; k++)
            CHECK(in_range(list[k], p->n_sets), "insns[%lld]: bad argument set", (long long)i);
        break;
    case BS_OP_DMATrigger:
        CHECK(in_range(BS_PI(in, DMATrigger, cursor), p->module->ntriggers), "insns[%lld]: bad cursor slot", (long long)i);
        /* fall through */
    case BS_OP_SwitchQueueInstance:
    case BS_OP_ResetQueueInstance:
        for (int64_t k = 0; k < in->nlist; k++)
            CHECK(in_range(list[k], p->n_insns) && p->insns[list[k]].op == BS_OP_DMABlock,
                  "insns[%lld]: list entry is not a DMABlock", (long long)i);
        if (in->op != BS_OP_DMATrigger || BS_PI(in, DMATrigger, queue) >= 0)
            CHECK(in->op == BS_OP_DMATrigger || in_range(BS_PI(in, SwitchQueueInstance, queue), p->n_queues),
                  "insns[%lld]: bad queue", (long long)i);
        break;
    case BS_OP_GroupResetSemaphores:
        for (int64_t k = 0; k < in->nlist; k++)
            CHECK(in_range(list[k], BS_NUM_SEMS), "insns[%lld]: semaphore id out of range", (long long)i);
        break;
    case BS_OP_CustomOp:
    case BS_OP_BIRKernel:
        BS_TRY(verify_str(p, in->str, "insns.str", i, err));
        break;
    default:
        break;
    }
    if (is_region_op(in->op))
        CHECK(in_range(in->body, p->n_regions), "insns[%lld]: bad body region", (long long)i);
    return BS_OK;
}

/* Slots the opcode does not declare must hold their "unused" value: a loader that writes
** a slot under the wrong name is caught here. */
static bs_status verify_params(const bs_program *p, int64_t i, uint16_t mask, bs_error *err)
{
    const bs_insn *in = &p->insns[i];
    const char *op = bs_opinfo_table[in->op].name;
    for (int k = 0; k < BS_NSLOT_i; k++)
        CHECK((mask >> k & 1) || in->i[k] == 0, "insns[%lld]: %s declares no parameter i[%d] "
              "but it is %lld", (long long)i, op, k, (long long)in->i[k]);
    for (int k = 0; k < BS_NSLOT_f; k++)
        CHECK((mask >> (BS_NSLOT_i + k) & 1) || in->f[k] == 0.0, "insns[%lld]: %s declares "
              "no parameter f[%d] but it is %g", (long long)i, op, k, in->f[k]);
    for (int k = 0; k < BS_NSLOT_x; k++)
        CHECK((mask >> (BS_NSLOT_i + BS_NSLOT_f + k) & 1) || in->x[k] == -1, "insns[%lld]: %s "
              "declares no parameter x[%d] but it is %d", (long long)i, op, k, in->x[k]);
    return BS_OK;
}

static bs_status verify_insn(const bs_program *p, int64_t i, const vtables *t, bs_error *err)
{
    const bs_insn *in = &p->insns[i];
    CHECK(in_range(in->op, BS_OP__COUNT), "insns[%lld]: bad opcode %d", (long long)i, in->op);
    BS_TRY(verify_params(p, i, t->mask[in->op], err));
    CHECK(bs_opinfo_table[in->op].family != BS_FAM_abstract, "insns[%lld]: abstract opcode %s",
          (long long)i, bs_opinfo_table[in->op].name);
    CHECK(in_range(in->engine, BS_NUM_ENGINES), "insns[%lld]: bad engine", (long long)i);
    CHECK(in_range(in->func, p->n_funcs) && in_range(in->block, p->n_blocks),
          "insns[%lld]: bad function/block", (long long)i);
    BS_TRY(verify_str(p, in->name, "insns", i, err));
    CHECK(in->nin >= 0 && in->nout >= 0 && in->nin <= BS_KMAX && in->nout <= BS_KMAX &&
          span_ok(in->opnd, (int64_t)in->nin + in->nout, p->n_opnds),
          "insns[%lld]: bad operand span", (long long)i);
    CHECK(in->nwait >= 0 && in->nupd >= 0 &&
          span_ok(in->sync, (int64_t)in->nwait + in->nupd, p->n_syncs),
          "insns[%lld]: bad sync span", (long long)i);
    CHECK(span_ok(in->list, in->nlist, p->n_ipool), "insns[%lld]: bad list", (long long)i);
    CHECK(span_ok(in->flist, in->nflist, p->n_fpool), "insns[%lld]: bad float list", (long long)i);
    if (in->str >= 0)
        BS_TRY(verify_str(p, in->str, "insns.str", i, err));
    if (in->str2 >= 0)
        BS_TRY(verify_str(p, in->str2, "insns.str2", i, err));
    for (int k = 0; k < 4; k++)
        if (in->x[k] >= 0)
            BS_TRY(verify_expr(p, in->x[k], err));
    for (int64_t k = 0; k < in->nwait + in->nupd; k++) {
        const bs_sync *s = &p->syncs[in->sync + k];
        int wait = k < in->nwait;
        CHECK(s->type == BS_SYNCTYPE_event || s->type == BS_SYNCTYPE_semaphore,
              "syncs[%lld]: bad type", (long long)(in->sync + k));
        CHECK(in_range(s->id, s->type == BS_SYNCTYPE_event ? BS_NUM_EVENTS : BS_NUM_SEMS),
              "syncs[%lld]: id %d out of range", (long long)(in->sync + k), s->id);
        CHECK(in_range(s->mode, wait ? t->wait_end : t->update_end), "syncs[%lld]: bad mode",
              (long long)(in->sync + k));
        CHECK(!wait || s->mode != BS_WAIT_sem_ge_reg || in_range(s->reg, p->n_regs),
              "syncs[%lld]: bad register", (long long)(in->sync + k));
        CHECK(wait || s->target_core >= -1, "syncs[%lld]: bad target_core", (long long)(in->sync + k));
        CHECK((s->type == BS_SYNCTYPE_event) == (s->mode == 0),
              "syncs[%lld]: mode does not match type", (long long)(in->sync + k));
    }
    return verify_insn_slots(p, i, t, err);
}

/* The module record: arch, entry, axes, per-core entries, the string table. */
static bs_status verify_module(const bs_program *p, bs_error *err)
{
    const bs_module *m = p->module;
    CHECK(p->n_module == 1, "module table must hold one record");
    CHECK(bs_arch_find(m->arch) != NULL, "unknown arch level %d", m->arch);
    CHECK(in_range(m->entry, p->n_funcs), "bad entry function");
    CHECK(m->naxes >= 0 && span_ok(m->axis_names, m->naxes, p->n_ipool), "bad axis names");
    CHECK(m->ntriggers >= 0, "bad trigger count");
    CHECK(m->nentries >= 0 && m->nentries <= BS_MAX_CORES && span_ok(m->entries, m->nentries, p->n_ipool),
          "bad per-core entries");
    for (int32_t k = 0; k < m->nentries; k++)
        CHECK(in_range(p->ipool[m->entries + k], p->n_funcs) &&
              p->funcs[p->ipool[m->entries + k]].prog == k, "bad entry of core %d", k);
    CHECK(p->n_strings > 0 && p->strings[p->n_strings - 1] == '\0', "strings must end with NUL");
    for (int32_t a = 0; a < m->naxes; a++)
        BS_TRY(verify_str(p, (int32_t)p->ipool[m->axis_names + a], "axis_names", a, err));
    return BS_OK;
}

/* Functions and tensor sets (with their must-alias pairs). */
static bs_status verify_funcs_sets(const bs_program *p, bs_error *err)
{
    const bs_module *m = p->module;
    for (int32_t i = 0; i < p->n_funcs; i++) {
        const bs_func *f = &p->funcs[i];
        BS_TRY(verify_str(p, f->name, "funcs", i, err));
        CHECK(in_range(f->region, p->n_regions) && span_ok(f->set0, f->nset, p->n_sets) &&
              span_ok(f->reg0, f->nreg, p->n_regs), "funcs[%d]: bad spans", i);
        CHECK(f->prog >= 0 && (m->nentries <= 1 || f->prog < m->nentries),
              "funcs[%d]: bad program", i);
    }
    for (int32_t i = 0; i < p->n_sets; i++) {
        const bs_set *s = &p->sets[i];
        BS_TRY(verify_str(p, s->name, "sets", i, err));
        CHECK(in_range(s->func, p->n_funcs) && in_range(s->dtype, BS_DT__COUNT) &&
              s->ndim >= 0 && s->ndim <= BS_MAX_SHAPE && s->io >= 0 && s->io <= 2 &&
              span_ok(s->loc0, s->nloc, p->n_locs), "sets[%d]: bad fields", i);
        if (s->alias != -1) {
            const bs_set *a = in_range(s->alias, p->n_sets) ? &p->sets[s->alias] : NULL;
            CHECK(a != NULL && s->io == 2 && a->io == 1 && a->func == s->func &&
                  a->dtype == s->dtype && s->nloc == 1 && a->nloc == 1 &&
                  p->locs[s->loc0].memtype == p->locs[a->loc0].memtype &&
                  p->locs[s->loc0].parts == p->locs[a->loc0].parts &&
                  p->locs[s->loc0].bpp == p->locs[a->loc0].bpp,
                  "sets[%d]: bad must-alias input %d", i, s->alias);
        }
    }
    return BS_OK;
}

/* Memory locations: type, dims, placement inside the arch's memories. */
static bs_status verify_locs(const bs_program *p, bs_error *err)
{
    const bs_module *m = p->module;
    for (int32_t i = 0; i < p->n_locs; i++) {
        const bs_loc *l = &p->locs[i];
        const bs_archinfo *a = bs_arch_find(m->arch);
        BS_TRY(verify_str(p, l->name, "locs", i, err));
        CHECK(in_range(l->set, p->n_sets), "locs[%d]: bad set", i);
        CHECK(l->memtype == BS_MEM_DRAM || l->memtype == BS_MEM_SB || l->memtype == BS_MEM_PSUM,
              "locs[%d]: memory type %d holds no data", i, l->memtype);
        CHECK(l->parts >= 1 && l->bpp >= 1 && l->parts <= (INT64_C(1) << 31) &&
              l->bpp <= (INT64_C(1) << 40) / l->parts, "locs[%d]: bad dims", i);
        CHECK(l->placed >= 0 && l->placed <= (l->memtype == BS_MEM_DRAM ? 2 : 1),
              "locs[%d]: bad placement %d", i, l->placed);
        if (l->placed && l->memtype == BS_MEM_DRAM) {
            CHECK(l->addr >= 0 && l->addr <= (INT64_C(1) << 40) - l->parts * l->bpp,
                  "locs[%d] '%s': bad DRAM arena address", i, bs_str(p, l->name));
        } else if (l->placed) {
            int64_t parts = l->memtype == BS_MEM_SB ? a->sbuf_parts : a->psum_parts;
            int64_t bpp = l->memtype == BS_MEM_SB ? a->sbuf_bpp : a->psum_bpp;
            CHECK(l->base >= 0 && l->addr >= 0 && l->base + l->parts <= parts &&
                  l->addr + l->bpp <= bpp, "locs[%d] '%s': does not fit the %s", i,
                  bs_str(p, l->name), l->memtype == BS_MEM_SB ? "SBUF" : "PSUM");
        }
    }
    return BS_OK;
}

/* Registers, regions and blocks. */
static bs_status verify_blocks(const bs_program *p, bs_error *err)
{
    for (int32_t i = 0; i < p->n_regs; i++) {
        BS_TRY(verify_str(p, p->regs[i].name, "regs", i, err));
        CHECK(in_range(p->regs[i].dtype, BS_DT__COUNT), "regs[%d]: bad dtype", i);
    }
    for (int32_t i = 0; i < p->n_regions; i++) {
        const bs_region *r = &p->regions[i];
        CHECK(span_ok(r->block0, r->nblock, p->n_blocks) && in_range(r->func, p->n_funcs) &&
              (r->owner == -1 || in_range(r->owner, p->n_insns)), "regions[%d]: bad fields", i);
    }
    for (int32_t i = 0; i < p->n_blocks; i++) {
        const bs_block *b = &p->blocks[i];
        BS_TRY(verify_str(p, b->name, "blocks", i, err));
        CHECK(in_range(b->func, p->n_funcs) && in_range(b->region, p->n_regions) &&
              span_ok(b->insn0, b->ninsn, p->n_insns), "blocks[%d]: bad fields", i);
        CHECK(i >= p->regions[b->region].block0 &&
              i < p->regions[b->region].block0 + p->regions[b->region].nblock,
              "blocks[%d]: not inside its region", i);
    }
    return BS_OK;
}

/* DMA queues: their semaphore lists. */
static bs_status verify_queues(const bs_program *p, bs_error *err)
{
    for (int32_t i = 0; i < p->n_queues; i++) {
        const bs_queue *q = &p->queues[i];
        CHECK(span_ok(q->sems, q->nsems, p->n_ipool) && span_ok(q->special, q->nspecial, p->n_ipool),
              "queues[%d]: bad lists", i);
        for (int32_t k = 0; k < q->nsems; k++)
            CHECK(in_range(p->ipool[q->sems + k], BS_NUM_SEMS), "queues[%d]: bad semaphore", i);
        for (int32_t k = 0; k < q->nspecial; k++)
            CHECK(in_range(p->ipool[q->special + k], BS_NUM_SEMS), "queues[%d]: bad semaphore", i);
    }
    return BS_OK;
}

bs_status bs_program_verify(const bs_program *p, bs_error *err)
{
    BS_TRY(verify_module(p, err));
    BS_TRY(verify_funcs_sets(p, err));
    BS_TRY(verify_locs(p, err));
    BS_TRY(verify_blocks(p, err));
    for (int32_t i = 0; i < p->n_opnds; i++)
        BS_TRY(verify_opnd(p, i, err));
    if (pthread_once(&vt_once, vtables_init) != 0)
        return bs_errorf(err, BS_E_NOMEM, "cannot build the verifier's tables");
    for (int32_t i = 0; i < p->n_insns; i++)
        BS_TRY(verify_insn(p, i, &vt, err));
    return verify_queues(p, err);
}
