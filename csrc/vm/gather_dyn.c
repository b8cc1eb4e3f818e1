/* vm/gather_dyn.c -- TensorCopyDynamicSrc / TensorCopyDynamicDst: a window of one
** operand placed by a register or an offset tensor (the gather family's shared operand,
** index and row helpers are in gather.c, declared in gather.h). */
#include <stdio.h>
#include "vm.h"
#include "check.h"
#include "gather.h"

/* {=== TensorCopyDynamicSrc / Dst ===
** ins[1] holds K offsets (immediate, register or tensor); offset k shifts the window
** side (ins[0] for Src, out[0] for Dst) by offset*scale elements; the other side is cut
** into K equal parts along its last dimension, part k pairing with window k. A shifted
** window outside its location is a MemoryAccessError. */

bs_status gx_run_dynamic(bs_sim *sim, bs_core *c, int32_t insn, int dst_side, int64_t scale,
                         bs_error *err)
{
    const bs_program *p = sim->prog;
    const bs_insn *in = &p->insns[insn];
    const bs_opnd *ops = p->opnds + in->opnd;
    int32_t wpos = dst_side ? in->nin : 0;          /* window operand index in opnds */
    gx_op other;
    int64_t offs_buf[64], nk = 1, *offv = offs_buf;
    if (in->nin < 2 || in->nout < 1) {
        bs_errorf(err, BS_E_PROGRAM, "needs out[0], ins[0] and ins[1] (the offsets)");
        return BS_E_PROGRAM;
    }
    if (bs_exec_is_ap(&ops[1])) {
        gx_op iv;
        gx_index ix;
        BS_TRY(gx_resolve(sim, c, insn, 1, &iv, err));
        BS_TRY(gx_read_indices(sim, c, insn, 1, &iv.v, INT64_MAX, 1, BS_KSLOT_B, &ix, err));
        if (BS_UNLIKELY(sim->chk))
            BS_TRY(gx_touch(sim, c, insn, &iv, &iv.v, 1, 0, err));
        nk = ix.n;
        offv = ix.val;
        for (int64_t k = 0; k < nk; k++)
            if (offv[k] < 0) {
                bs_errorf(err, BS_E_OOB, "offset element %lld is -1", (long long)k);
                return gx_fail_opnd(sim, c, insn, 1, BS_E_OOB, err);
            }
    } else if (ops[1].kind == BS_OPND_register_access) {
        offs_buf[0] = bs_core_reg_i64(sim, c, ops[1].loc);
    } else {
        offs_buf[0] = ops[1].imm_is_int ? ops[1].imm_bits : bs_f64_to_i64(ops[1].imm);
    }
    BS_TRY(gx_resolve(sim, c, insn, dst_side ? 0 : BS_OUT_OPERAND, &other, err));
    {
        bs_view part = other.v;
        int32_t last = other.v.ndim - 1;
        if (other.v.num[last] % nk != 0) {
            bs_errorf(err, BS_E_SIM, "%lld offsets do not divide its last dimension (%lld)",
                      (long long)nk, (long long)other.v.num[last]);
            return gx_fail_opnd(sim, c, insn, dst_side ? 0 : BS_OUT_OPERAND, BS_E_SIM, err);
        }
        part.num[last] = other.v.num[last] / nk;
        part.count = other.v.count / nk;
        if (dst_side)                       /* Src: each window, below */
            BS_TRY(gx_check_init(sim, c, insn, 0, &other.v, err));
        if (BS_UNLIKELY(sim->chk) && other.offs)
            BS_TRY(gx_touch(sim, c, insn, &other, &other.v, dst_side, !dst_side, err));
        for (int pass = 0; pass < 2; pass++)          /* pass 0 checks every window */
            for (int64_t k = 0; k < nk; k++) {
                bs_opnd w = ops[wpos];
                bs_view wv, pk = part;
                int64_t *woffs;
                bs_status st;
                int64_t shift, base = w.offset;
                if (w.offset_expr >= 0) {
                    BS_TRY(bs_core_eval(sim, c, w.offset_expr, &base, err));
                    w.offset_expr = -1;
                }
                if (BS_MUL_OVF(offv[k], scale, &shift) || BS_ADD_OVF(base, shift, &w.offset)) {
                    bs_errorf(err, BS_E_OOB, "offset %lld (element %lld of ins[1]) x scale "
                              "%lld overflows int64", (long long)offv[k], (long long)k,
                              (long long)scale);
                    return gx_fail_opnd(sim, c, insn, dst_side ? BS_OUT_OPERAND : 0, BS_E_OOB, err);
                }
                st = bs_exec_view(sim, c, &w, wpos, &wv, &woffs, err);
                if (st == BS_OK && woffs != NULL && dst_side)
                    st = bs_errorf(err, BS_E_UNSUPPORTED, "a window that wraps partitions "
                                   "irregularly cannot be written");
                if (st != BS_OK) {
                    char msg[BS_ERRMSG];
                    snprintf(msg, sizeof msg, "%s", err->msg);
                    bs_errorf(err, st, "offset %lld (element %lld of ins[1]) x scale %lld: %s",
                              (long long)offv[k], (long long)k, (long long)scale, msg);
                    return gx_fail_opnd(sim, c, insn, dst_side ? BS_OUT_OPERAND : 0, st, err);
                }
                if (wv.count != pk.count) {
                    bs_errorf(err, BS_E_SIM, "the window has %lld elements, each of the %lld "
                              "parts of the other side %lld", (long long)wv.count,
                              (long long)nk, (long long)pk.count);
                    return BS_E_SIM;
                }
                if (!gx_numeric_pair(&wv, &pk)) {
                    bs_errorf(err, BS_E_UNSUPPORTED, "cannot cast between %s and %s",
                              bs_dtinfo_table[wv.dtype].name, bs_dtinfo_table[pk.dtype].name);
                    return BS_E_UNSUPPORTED;
                }
                if (pass == 0)
                    continue;
                if (k == 0 && BS_UNLIKELY(sim->chk))   /* each window spans the same partitions */
                    BS_TRY(bs_chk_capacity(sim, c, insn, wpos, &wv, woffs, err));
                pk.data += k * pk.num[last] * pk.stride[last];
                if (pk.shadow)
                    pk.shadow += k * pk.num[last] * pk.stride[last];
                if (!dst_side)
                    BS_TRY(gx_check_init(sim, c, insn, 0, &wv, err));
                st = dst_side ? gx_move_row(c, &wv, &pk, 0, err) : gx_move_row(c, &pk, &wv, 0, err);
                if (st != BS_OK)
                    return st;
                if (BS_UNLIKELY(sim->chk)) {
                    gx_op wg;
                    wg.v = wv;
                    wg.offs = woffs;
                    wg.j = dst_side ? BS_OUT_OPERAND : 0;
                    BS_TRY(gx_touch(sim, c, insn, &wg, &wv, !dst_side, dst_side, err));
                    if (!other.offs)
                        BS_TRY(gx_touch(sim, c, insn, &other, &pk, dst_side, !dst_side, err));
                }
                if (other.offs && !dst_side) {
                    bs_errorf(err, BS_E_UNSUPPORTED, "out[0] wraps partitions irregularly");
                    return BS_E_UNSUPPORTED;
                }
            }
    }
    return BS_OK;
}
