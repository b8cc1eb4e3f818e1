/* vm/print.c -- DevicePrint: every access-pattern operand's values, as its dtype and
** shape, appended to the run's print log (read by the binding: sim.prints, and stdout
** unless Simulator(print=False)). An operand with never-written bytes gets the usual
** never-written warning naming the instruction, and its values are still recorded.
** Record: bs_print_rec, then nbytes of dense row-major data; records are 8-byte aligned.
** Past BS_PRINT_MAX bytes, records are counted as dropped (a warning), never silently. */
#include <stdio.h>
#include "vm.h"


bs_status bs_exec_print(bs_sim *sim, bs_core *c, int32_t insn, bs_error *err)
{
    const bs_program *p = sim->prog;
    const bs_insn *in = &p->insns[insn];
    for (int32_t k = 0; k < in->nin; k++) {
        const bs_opnd *o = &p->opnds[in->opnd + k];
        bs_view v, d;
        int64_t *offs;
        bs_print_rec rec;
        size_t bytes, need;
        void *buf;
        bs_status st;
        if (!bs_exec_is_ap(o)) {
            bs_errorf(err, BS_E_PROGRAM, "ins[%d]: DevicePrint prints access patterns", (int)k);
            err->operand = k;
            return BS_E_PROGRAM;
        }
        st = bs_exec_view(sim, c, o, k, &v, &offs, err);
        if (st != BS_OK) {
            err->operand = k;
            return st;
        }
        if (!bs_view_initialized(&v))
            BS_TRY(bs_exec_warn_uninit(sim, c, insn, k, &v, err));
        memset(&rec, 0, sizeof rec);
        rec.core = c->index;
        rec.insn = insn;
        rec.operand = k;
        rec.dtype = v.dtype;
        rec.ndim = o->ndim;
        for (int32_t d2 = 0; d2 < o->ndim; d2++)
            rec.num[d2] = o->num[d2];
        bytes = (size_t)v.count * (size_t)bs_dtinfo_table[v.dtype].size;
        rec.nbytes = (int64_t)bytes;
        need = sizeof rec + ((bytes + 7) & ~(size_t)7);
        if (sim->plog_len + need > (sim->opts.print_max > 0 && (size_t)sim->opts.print_max
                                    < BS_PRINT_MAX ? (size_t)sim->opts.print_max : BS_PRINT_MAX)) {
            sim->plog_dropped++;
            continue;
        }
        buf = sim->plog;
        if (bs_reserve(&buf, &sim->plog_cap, sim->plog_len + need, 1))
            return (bs_errorf(err, BS_E_NOMEM, "out of memory "
                              "recording a DevicePrint"));
        sim->plog = buf;
        memset(sim->plog + sim->plog_len, 0, need);
        memcpy(sim->plog + sim->plog_len, &rec, sizeof rec);
        memset(&d, 0, sizeof d);
        d.data = sim->plog + sim->plog_len + sizeof rec;
        d.dtype = v.dtype;
        d.ndim = 1;
        d.num[0] = d.count = v.count;
        d.stride[0] = bs_dtinfo_table[v.dtype].size;
        bs_copy_raw(&d, &v);
        sim->plog_len += need;
    }
    return BS_OK;
}

const uint8_t *bs_sim_prints(const bs_sim *sim, int64_t *len, int64_t *dropped)
{
    *len = (int64_t)sim->plog_len;
    *dropped = sim->plog_dropped;
    return sim->plog;
}
