/* vm/trace.c -- the trace of a traced run (opts.trace): per executed instruction its
** (core, insn) pair and its modelled times, appended by the timing model (vm/timing.c,
** through bs_sim_trace_add's inline fast path in vm.h), and handed over to the caller
** without a copy once the run is over (bs_sim_trace_take, given back for reuse with
** bs_sim_trace_give). */
#include "vm.h"

/* The most trace records a run keeps. */
static int64_t trace_most(const bs_sim *sim)
{
    return sim->opts.trace_max > 0 && sim->opts.trace_max < BS_TRACE_MAX
           ? sim->opts.trace_max : BS_TRACE_MAX;
}

/* The records both trace buffers hold, at most the run's cap. */
static void trace_room(bs_sim *sim)
{
    int64_t most = trace_most(sim);
    int64_t a = (int64_t)(sim->trace_cap / (2 * sizeof *sim->trace));
    int64_t b = (int64_t)(sim->trace_t_cap / sizeof *sim->trace_t);
    int64_t room = a < b ? a : b;
    sim->trace_room = sim->trace == NULL || sim->trace_t == NULL ? 0 : room < most ? room : most;
}

int32_t bs_sim_trace_grow(bs_sim *sim, int32_t core, int32_t insn, double start, double dur,
                          const int32_t src[2])
{
    void *t = sim->trace, *tt = sim->trace_t;
    int fail = sim->ntrace >= trace_most(sim) ||
               bs_reserve(&t, &sim->trace_cap,
                          (size_t)(sim->ntrace + 1) * 2 * sizeof *sim->trace, 1);
    sim->trace = t;
    if (!fail) {
        fail = bs_reserve(&tt, &sim->trace_t_cap,
                          (size_t)(sim->ntrace + 1) * sizeof *sim->trace_t, 1);
        sim->trace_t = tt;
    }
    trace_room(sim);
    if (fail || sim->ntrace >= sim->trace_room) {      /* the cap, or out of memory */
        sim->trace_dropped++;
        return -1;
    }
    return bs_sim_trace_add(sim, core, insn, start, dur, src);
}

void bs_sim_trace_take(bs_sim *sim, void *buf[2], size_t cap[2], int64_t *n,
                       int64_t *dropped)
{
    buf[0] = sim->trace;
    buf[1] = sim->trace_t;
    cap[0] = sim->trace_cap;
    cap[1] = sim->trace_t_cap;
    *n = sim->trace != NULL && sim->trace_t != NULL ? sim->ntrace : 0;
    *dropped = sim->trace_dropped;
    sim->trace = NULL;
    sim->trace_t = NULL;
    sim->trace_cap = sim->trace_t_cap = 0;
    sim->ntrace = sim->trace_room = 0;
}

int bs_sim_trace_give(bs_sim *sim, int which, void *buf, size_t cap)
{
    if (buf == NULL || sim->ntrace != 0 || (which == 0 ? sim->trace != NULL
                                                       : sim->trace_t != NULL))
        return 0;
    if (which == 0) {
        sim->trace = buf;
        sim->trace_cap = cap;
    } else {
        sim->trace_t = buf;
        sim->trace_t_cap = cap;
    }
    trace_room(sim);
    return 1;
}
