/* vm/round.h -- one round of a run loop over the cores, shared by the loop of vm/sched.c
** and the recording/replaying one of vm/explore.c. */
#ifndef BS_VM_ROUND_H
#define BS_VM_ROUND_H

#include "vm.h"
#include "defer.h"

/* Step core k unless it is done: counts it in *live; when it advanced, *progressed = 1
** and it is the run's last core. With plain (bs_sim_plain's non-zero value) it steps with
** bs_core_step_plain. */
static inline bs_status bs_round_step_as(bs_sim *sim, int32_t k, int *live, int *progressed,
                                         int plain, bs_error *err)
{
    bs_core *c = &sim->cores[k];
    int prog = 0;
    if (c->done)
        return BS_OK;
    ++*live;
    BS_TRY(plain ? bs_core_step_plain(sim, c, &prog, plain, err)
                 : bs_core_step(sim, c, &prog, err));
    if (prog) {
        *progressed = 1;
        sim->last_core = k;
    }
    return BS_OK;
}

static inline bs_status bs_round_step(bs_sim *sim, int32_t k, int *live, int *progressed,
                                      bs_error *err)
{
    return bs_round_step_as(sim, k, live, progressed, 0, err);
}

/* After one pass over the cores of a run loop (vm/sched.c, vm/explore.c): BS_ROUND_GO
** to go on, BS_ROUND_AGAIN when deferred transfers had to land (nothing else could run),
** BS_ROUND_DONE when the run finished; a deadlock is its error status. */
enum { BS_ROUND_GO, BS_ROUND_AGAIN, BS_ROUND_DONE };
static inline bs_status bs_round_end(bs_sim *sim, int progressed, int live, int *what,
                                     bs_error *err)
{
    *what = BS_ROUND_GO;
    if (BS_UNLIKELY(sim->defer) && !progressed && bs_defer_pending(sim)) {
        *what = BS_ROUND_AGAIN;
        return bs_defer_flush_all(sim, err);
    }
    if (live > 0 && progressed)
        return BS_OK;
    for (int32_t k = 0; live > 0 && k < sim->ncores; k++)
        if (!sim->cores[k].done)
            return bs_sim_deadlock(sim, err);
    sim->finished = 1;
    *what = BS_ROUND_DONE;
    return BS_OK;
}

#endif
