/* vm/varaddr.c -- ReadVarAddr (docs/spec/machine-model.md §1, §3.3): register outs[0] := the
** address of ins[0]'s first element in birsim's memory model.
**
** The address is a byte address of the memory the location lives in:
**   SBUF / PSUM (a location with an `addr`): the byte offset from the start of the core's
**     SBUF (PSUM), partitions laid end to end at the arch's bytes per partition, so
**     partition = address / bytes-per-partition and the byte inside it = the remainder;
**   DRAM in a DRAM arena (an Internal location with an `addr`: the core's arena; a tensor
**     a module list shares: the arena of all cores): the byte offset in that arena.
** A location birsim gives a private buffer (SBUF/PSUM without `addr`, other DRAM
** tensors) has no address, and reading one is an error naming it. */
#include "vm.h"

/* Byte offset of location l's first byte in its memory, or -1 when it has none. */
static int64_t loc_base(const bs_sim *sim, int32_t l)
{
    const bs_loc *loc = &sim->prog->locs[l];
    if (!loc->placed)
        return -1;
    if (loc->memtype == BS_MEM_SB)
        return loc->base * sim->arch->sbuf_bpp + loc->addr;
    if (loc->memtype == BS_MEM_PSUM)
        return loc->base * sim->arch->psum_bpp + loc->addr;
    return loc->addr;
}

bs_status bs_exec_read_var_addr(bs_sim *sim, bs_core *c, int32_t insn, bs_error *err)
{
    const bs_program *p = sim->prog;
    const bs_insn *in = &p->insns[insn];
    const bs_opnd *o = &p->opnds[in->opnd];
    const bs_loc *loc;
    const bs_store *st;
    bs_view v;
    int64_t *offs, base, first, addr;
    if (in->nin < 1 || !bs_exec_is_ap(o))
        return bs_errorf(err, BS_E_PROGRAM, "needs an access pattern ins[0] (the variable)");
    if (in->nout < 1 || p->opnds[in->opnd + in->nin].kind != BS_OPND_register_access)
        return bs_errorf(err, BS_E_PROGRAM, "needs a register output outs[0]");
    loc = &p->locs[o->loc];
    base = loc_base(sim, o->loc);
    if (base < 0)
        return bs_errorf(err, BS_E_SIM, "location '%s' (%s) has no address: birsim gives "
                         "addresses only to SBUF/PSUM locations with an `addr`, Internal DRAM "
                         "locations with an `addr` and DRAM tensors a module list shares",
                         bs_str(p, loc->name), bs_enum_name("MEM", loc->memtype));
    /* Resolving the view checks the whole pattern lies inside the location. */
    BS_TRY(bs_exec_view(sim, c, o, 0, &v, &offs, err));
    st = &c->stores[o->loc];
    first = offs != NULL ? offs[0] : (int64_t)(v.data - st->data);
    if (BS_ADD_OVF(base, first, &addr))
        return bs_errorf(err, BS_E_OOB, "the address of ins[0] overflows int64");
    return bs_exec_reg_set_int(sim, c, p->opnds[in->opnd + in->nin].loc, addr, "address", err);
}
