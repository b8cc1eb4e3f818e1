/* vm/branch.c -- CompareAndBranch (docs/spec/control-flow-sync.md §2.1-2.2): compare the left operand with an
** immediate (...IMM) or a register (...REG) at the left operand's width -- u8, s8, u16,
** s16, u32, s32 or f32 -- and choose on_true or on_false. Registers are read from the
** instruction's engine's file (c->rslot, set by the step machine). */
#include "vm.h"

/* The value of operand o as the comparison type dt: integers in int64 (after truncation
** to the dtype's width), f32 in *fv. A register is its bits read as dt (docs/spec/control-flow-sync.md §2.2: the
** comparator takes the register's cell at the left side's width). */
static bs_status cmp_value(bs_sim *sim, bs_core *c, const bs_opnd *o, int32_t dt,
                           int64_t *iv, float *fv, bs_error *err)
{
    uint64_t bits;
    if (o->kind == BS_OPND_register_access) {
        bits = bs_core_reg_bits(c, o->loc);
    } else if (o->kind == BS_OPND_imm_value) {
        if (dt == BS_DT_float32) {
            *fv = (float)o->imm;
            return BS_OK;
        }
        /* a float immediate saturates; NaN -> 0 (README) */
        bits = (uint64_t)(o->imm_is_int ? o->imm_bits : bs_f64_to_i64(o->imm));
    } else {
        bs_view v;
        int64_t *offs = NULL;
        BS_TRY(bs_exec_view(sim, c, o, 0, &v, &offs, err));
        if (v.count != 1)
            return bs_errorf(err, BS_E_SIM, "compared operand must be one element, has %lld",
                             (long long)v.count);
        if (dt == BS_DT_float32) {
            *fv = bs_dt_load_f32(v.data, v.dtype);
            return BS_OK;
        }
        bits = (uint64_t)bs_dt_load_i64(v.data, v.dtype);
    }
    switch (dt) {
    case BS_DT_uint8:   *iv = (uint8_t)bits; break;
    case BS_DT_int8:    *iv = (int8_t)(uint8_t)bits; break;
    case BS_DT_uint16:  *iv = (uint16_t)bits; break;
    case BS_DT_int16:   *iv = (int16_t)(uint16_t)bits; break;
    case BS_DT_uint32:  *iv = (uint32_t)bits; break;
    case BS_DT_int32:   *iv = (int32_t)(uint32_t)bits; break;
    case BS_DT_float32: {
        uint32_t u = (uint32_t)bits;
        memcpy(fv, &u, 4);
        break;
    }
    default:
        return bs_errorf(err, BS_E_SIM, "CompareAndBranch compares at u8, s8, u16, s16, u32, "
                         "s32 or f32 only, not %s", bs_dtinfo_table[dt].name);
    }
    return BS_OK;
}

bs_status bs_exec_compare_branch(bs_sim *sim, bs_core *c, int32_t insn, int32_t *next,
                                 bs_error *err)
{
    const bs_program *p = sim->prog;
    const bs_insn *in = &p->insns[insn];
    const bs_opnd *l = &p->opnds[in->opnd], *r = &p->opnds[in->opnd + 1];
    int32_t dt = l->dtype;           /* a register operand's defaults to the register's */
    int64_t cmp = BS_PI(in, CompareAndBranch, comp_op);
    int reg = cmp >= BS_CMP_IS_LTREG, taken;
    int64_t op = reg ? cmp - BS_CMP_IS_LTREG : cmp;   /* the immediate form's comparison */
    int64_t li = 0, ri = 0;
    float lf = 0, rf = 0;
    bs_status st;
    if ((r->kind == BS_OPND_register_access) != reg)
        return bs_errorf(err, BS_E_SIM, "%s needs %s right operand",
                         bs_enum_name("CMP", cmp), reg ? "a register" : "an immediate");
    st = cmp_value(sim, c, l, dt, &li, &lf, err);
    if (st == BS_OK)
        st = cmp_value(sim, c, r, dt, &ri, &rf, err);
    if (st != BS_OK)
        return st;
    if (dt == BS_DT_float32) {
        switch (op) {
        case BS_CMP_IS_LTIMM: taken = lf < rf; break;
        case BS_CMP_IS_LEIMM: taken = lf <= rf; break;
        case BS_CMP_IS_EQIMM: taken = lf == rf; break;
        case BS_CMP_IS_NEIMM: taken = lf != rf; break;
        case BS_CMP_IS_GEIMM: taken = lf >= rf; break;
        default: taken = lf > rf; break;
        }
    } else {
        switch (op) {
        case BS_CMP_IS_LTIMM: taken = li < ri; break;
        case BS_CMP_IS_LEIMM: taken = li <= ri; break;
        case BS_CMP_IS_EQIMM: taken = li == ri; break;
        case BS_CMP_IS_NEIMM: taken = li != ri; break;
        case BS_CMP_IS_GEIMM: taken = li >= ri; break;
        default: taken = li > ri; break;
        }
    }
    *next = taken ? in->target : in->target2;
    return BS_OK;
}
