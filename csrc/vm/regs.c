/* vm/regs.c -- registers and expressions: the engine slot an instruction reads its
** registers from, a register's bits and their value as an integer, register writes (the
** shared slot 0 and the engine's own), expression evaluation over a core's live loop
** axes and registers, and the register instructions RegisterMove and RegisterAlu (the
** executors vm/exec.c's table names). The per-step helpers are inline in vm.h. */
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

/* {=== Register instructions ===}
** Every register access goes through the running instruction's register slot (c->rslot:
** its engine's file, or for a rendezvous instruction the most recent value; vm.h). */

/* The register cell for a value: integers by value (wrapping to the cell), non-integer
** values through the cast rules (fp32, round to nearest even, saturate). */
static uint64_t encode_reg(const bs_sim *sim, int32_t reg, double v, int64_t iv, int is_int)
{
    int32_t dt = sim->prog->regs[reg].dtype;
    uint8_t tmp[8] = {0};
    uint64_t bits = 0;
    if (dt == BS_DT_float32) {
        float f = is_int ? (float)iv : (float)v;
        uint32_t u;
        memcpy(&u, &f, 4);
        return u;
    }
    if (is_int)
        return (uint64_t)iv;
    bs_dt_store_f32(tmp, dt, (float)v);
    memcpy(&bits, tmp, (size_t)bs_dtinfo_table[dt].size);
    if (bs_dtinfo_table[dt].kind == BS_DK_S && bs_dtinfo_table[dt].size == 4)
        bits = (uint64_t)(int64_t)(int32_t)(uint32_t)bits;
    return bits;
}

bs_status bs_exec_reg_set_int(bs_sim *sim, bs_core *c, int32_t reg, int64_t v, const char *what,
                              bs_error *err)
{
    int32_t dt = sim->prog->regs[reg].dtype;
    int64_t lo = 0, hi = INT64_MAX;
    if (dt == BS_DT_int32) {
        lo = INT32_MIN;
        hi = INT32_MAX;
    } else if (dt == BS_DT_uint32) {
        hi = UINT32_MAX;
    } else if (dt == BS_DT_float32) {           /* the integers fp32 holds exactly */
        lo = -(1 << 24);
        hi = 1 << 24;
    } else if (dt == BS_DT_int64) {
        lo = INT64_MIN;
    }
    if (v < lo || v > hi)
        return bs_errorf(err, BS_E_SIM, "%s %lld does not fit register '%s' (%s)", what,
                         (long long)v, bs_str(sim->prog, sim->prog->regs[reg].name),
                         bs_dtinfo_table[dt].name);
    bs_core_reg_set(sim, c, reg, encode_reg(sim, reg, 0, v, 1));
    return BS_OK;
}

static bs_status reg_operand(bs_sim *sim, bs_core *c, const bs_opnd *o, double *d,
                             int64_t *i, int *isf, bs_error *err)
{
    if (o->kind == BS_OPND_register_access) {     /* the cell read once (reg_value's rules) */
        int32_t dt = sim->prog->regs[o->loc].dtype;
        uint64_t bits = bs_core_reg_bits(c, o->loc);
        *isf = dt == BS_DT_float32 || o->dtype == BS_DT_float32;
        *i = bs_reg_i64(sim, o->loc, bits);
        if (dt == BS_DT_float32) {
            float f;
            uint32_t u = (uint32_t)bits;
            memcpy(&f, &u, 4);
            *d = f;
        } else {
            *d = (double)*i;
        }
        if (o->dtype == BS_DT_uint32)
            *i = (int64_t)(uint32_t)bits;
        else if (o->dtype == BS_DT_int32)
            *i = (int64_t)(int32_t)(uint32_t)bits;
        return BS_OK;
    }
    if (o->kind == BS_OPND_imm_value) {
        *isf = o->dtype == BS_DT_float32 && !o->imm_is_int;
        *d = o->imm;
        *i = o->imm_is_int ? o->imm_bits : bs_f64_to_i64(o->imm);
        return BS_OK;
    }
    return bs_errorf(err, BS_E_SIM, "register instructions take registers or immediates");
}

/* reg_operand's operand is an integer one (*isf = 0, no error), known from the operand
** and its register's dtype alone, without reading the register. */
static inline int reg_operand_is_int(const bs_program *p, const bs_opnd *o)
{
    if (o->kind == BS_OPND_register_access)
        return p->regs[o->loc].dtype != BS_DT_float32 && o->dtype != BS_DT_float32;
    return o->kind == BS_OPND_imm_value && !(o->dtype == BS_DT_float32 && !o->imm_is_int);
}

/* reg_operand's *i for an integer operand (reg_operand_is_int): no double made. */
static inline int64_t reg_operand_int(const bs_sim *sim, const bs_core *c, const bs_opnd *o)
{
    if (o->kind == BS_OPND_register_access) {
        uint64_t bits = bs_core_reg_bits(c, o->loc);
        if (o->dtype == BS_DT_uint32)
            return (int64_t)(uint32_t)bits;
        if (o->dtype == BS_DT_int32)
            return (int64_t)(int32_t)(uint32_t)bits;
        return bs_reg_i64(sim, o->loc, bits);
    }
    return o->imm_is_int ? o->imm_bits : bs_f64_to_i64(o->imm);
}

/* RegisterAlu's integer operation on x and y into *out (32-bit wrap unless is_64bit). */
static inline bs_status alu_int(const bs_insn *in, int op, int64_t x, int64_t y, int64_t *out,
                                bs_error *err)
{
    int64_t r;
    switch (op) {
    case BS_ALU_bypass:    r = x; break;
    case BS_ALU_add:       r = (int64_t)((uint64_t)x + (uint64_t)y); break;
    case BS_ALU_subtract:  r = (int64_t)((uint64_t)x - (uint64_t)y); break;
    case BS_ALU_mult:      r = (int64_t)((uint64_t)x * (uint64_t)y); break;
    case BS_ALU_divide:
    case BS_ALU_mod:
    case BS_ALU_mod_int:
        if (y == 0)
            return bs_errorf(err, BS_E_ARITH, "RegisterAlu %s by zero", bs_alu_table[op].name);
        if (y == -1)                  /* INT64_MIN / -1 wraps to INT64_MIN, no trap */
            r = op == BS_ALU_divide ? (int64_t)(0 - (uint64_t)x) : 0;
        else
            r = op == BS_ALU_divide ? x / y : x % y;
        break;
    case BS_ALU_max:       r = x > y ? x : y; break;
    case BS_ALU_min:       r = x < y ? x : y; break;
    case BS_ALU_is_equal:  r = x == y; break;
    case BS_ALU_not_equal: r = x != y; break;
    case BS_ALU_is_gt:     r = x > y; break;
    case BS_ALU_is_ge:     r = x >= y; break;
    case BS_ALU_is_lt:     r = x < y; break;
    case BS_ALU_is_le:     r = x <= y; break;
    case BS_ALU_bitwise_and: r = x & y; break;
    case BS_ALU_bitwise_or:  r = x | y; break;
    case BS_ALU_bitwise_xor: r = x ^ y; break;
    case BS_ALU_bitwise_not: r = ~x; break;
    case BS_ALU_logical_and: r = (x != 0) && (y != 0); break;
    case BS_ALU_logical_or:  r = (x != 0) || (y != 0); break;
    case BS_ALU_arith_shift_left:
    case BS_ALU_logical_shift_left:
        r = (y < 0 || y > 63) ? 0 : (int64_t)((uint64_t)x << y);
        break;
    case BS_ALU_arith_shift_right:
        r = (y < 0 || y > 63) ? (x < 0 ? -1 : 0) : (x >> y);
        break;
    case BS_ALU_logical_shift_right:
        r = (y < 0 || y > 63) ? 0 : (int64_t)((BS_PI(in, RegisterAlu, is_64bit) ? (uint64_t)x : (uint64_t)(uint32_t)x) >> y);
        break;
    default:
        return bs_errorf(err, BS_E_UNSUPPORTED, "RegisterAlu does not support op %s",
                         bs_alu_table[op].name);
    }
    if (!BS_PI(in, RegisterAlu, is_64bit))
        r = (int64_t)(int32_t)(uint32_t)r;            /* 32-bit wrap-around */
    *out = r;
    return BS_OK;
}

/* RegisterAlu with a float operand (or an operand reg_operand rejects). */
static __attribute__((noinline)) bs_status reg_alu_mixed(bs_sim *sim, bs_core *c,
                                                         const bs_insn *in, bs_error *err)
{
    const bs_opnd *o = sim->prog->opnds + in->opnd;
    double a = 0, b = 0;
    int64_t x = 0, y = 0, r = 0;
    int af = 0, bf = 0, op = (int)BS_PI(in, RegisterAlu, op);
    BS_TRY(reg_operand(sim, c, &o[0], &a, &x, &af, err));
    if (in->nin > 1)
        BS_TRY(reg_operand(sim, c, &o[1], &b, &y, &bf, err));
    if (af || bf) {
        float f = bs_alu_f32(op, (float)a, (float)b);
        bs_core_reg_set(sim, c, o[in->nin].loc, encode_reg(sim, o[in->nin].loc, f, 0, 0));
        return BS_OK;
    }
    BS_TRY(alu_int(in, op, x, y, &r, err));
    bs_core_reg_set(sim, c, o[in->nin].loc, encode_reg(sim, o[in->nin].loc, 0, r, 1));
    return BS_OK;
}

static bs_status reg_alu(bs_sim *sim, bs_core *c, const bs_insn *in, bs_error *err)
{
    const bs_opnd *o = sim->prog->opnds + in->opnd;
    int64_t x, y = 0, r = 0;
    if (in->nin < 1 || in->nout < 1 || o[in->nin].kind != BS_OPND_register_access)
        return bs_errorf(err, BS_E_SIM, "RegisterAlu needs register output and inputs");
    if (!reg_operand_is_int(sim->prog, &o[0])
            || (in->nin > 1 && !reg_operand_is_int(sim->prog, &o[1])))
        return reg_alu_mixed(sim, c, in, err);
    x = reg_operand_int(sim, c, &o[0]);             /* the usual case: integers only */
    if (in->nin > 1)
        y = reg_operand_int(sim, c, &o[1]);
    BS_TRY(alu_int(in, (int)BS_PI(in, RegisterAlu, op), x, y, &r, err));
    bs_core_reg_set(sim, c, o[in->nin].loc, encode_reg(sim, o[in->nin].loc, 0, r, 1));
    return BS_OK;
}

static bs_status reg_move(bs_sim *sim, bs_core *c, const bs_insn *in, bs_error *err)
{
    const bs_opnd *o = sim->prog->opnds + in->opnd;
    int32_t dst;
    if (in->nin < 1 || in->nout < 1 || o[in->nin].kind != BS_OPND_register_access)
        return bs_errorf(err, BS_E_SIM, "RegisterMove needs a register output");
    dst = o[in->nin].loc;
    if (o[0].kind == BS_OPND_register_access) {
        bs_core_reg_set(sim, c, dst, bs_core_reg_bits(c, o[0].loc));
    } else if (o[0].kind == BS_OPND_imm_value) {
        bs_core_reg_set(sim, c, dst, encode_reg(sim, dst, o[0].imm, o[0].imm_bits, o[0].imm_is_int));
    } else {
        return bs_errorf(err, BS_E_SIM, "RegisterMove takes a register or an immediate");
    }
    return BS_OK;
}

bs_status bs_exec_reg_alu(bs_sim *sim, bs_core *c, int32_t insn, bs_error *err)
{
    return reg_alu(sim, c, &sim->prog->insns[insn], err);
}

bs_status bs_exec_reg_move(bs_sim *sim, bs_core *c, int32_t insn, bs_error *err)
{
    return reg_move(sim, c, &sim->prog->insns[insn], err);
}
