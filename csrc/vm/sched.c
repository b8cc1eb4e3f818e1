/* vm/sched.c -- the run loop: interleaves the cores one scheduling step at a time
** (in order, round robin or random), ends a slice after a budget of steps or
** BS_SLICE_NS, lets deferred DMAs land when nothing else can run, and reports deadlock
** (vm/deadlock.c) when no core can advance. */
#include <time.h>
#include "vm.h"
#include "check.h"
#include "defer.h"
#include "round.h"

#define BS_SLICE_NS 20000000        /* 20 ms */

uint64_t bs_sim_random(bs_sim *sim)
{
    uint64_t x = sim->rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    sim->rng = x;
    return x * 0x2545F4914F6CDD1Dull;
}

static int64_t now_ns(void)
{
    struct timespec ts;
    if (timespec_get(&ts, TIME_UTC) == 0)
        return 0;
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* bs_sim_run's loop for a plain run (bs_sim_plain) on one core: the same steps at the
** same boundaries as the general loop below, without its per-step round: the core runs
** up to 64 steps per call, then the slice's time is checked; a core that is done ends the
** run, one that cannot advance is a deadlock (bs_round_end decides both, as below). */
static bs_status run_plain_one(bs_sim *sim, int64_t stop, int64_t t0, int plain, bs_error *err)
{
    bs_core *c = &sim->cores[0];
    int blocked = 0, what;
    while (!sim->finished && sim->steps < stop) {
        if (c->done || blocked)             /* the round in which nothing can step */
            return bs_round_end(sim, 0, !c->done, &what, err);
        BS_TRY(bs_core_run_plain(sim, c, stop, 64, plain, &blocked, err));
        sim->last_core = 0;
        if (now_ns() - t0 > BS_SLICE_NS)
            break;
    }
    return BS_OK;
}

bs_status bs_sim_run(bs_sim *sim, int64_t budget, int *finished, bs_error *err)
{
    int64_t stop = sim->steps + (budget > 0 ? budget : 1);
    int64_t t0 = now_ns();
    uint32_t iter = 0;
    int plain = 0, plain_one = 0;
    *finished = sim->finished;
    sim->stop_insn = sim->stop_core = -1;
    sim->pristine = 0;
    bs_sim_flush_stale(sim);
    if (BS_UNLIKELY(sim->chk) && !sim->finished)
        BS_TRY(bs_chk_run_start(sim, err));
    if (BS_UNLIKELY(sim->xp != NULL))      /* record / replay / pct: vm/explore.c */
        BS_TRY(bs_xp_run(sim, stop, finished, err));
    else if ((plain = bs_sim_plain(sim)) != 0 && sim->ncores == 1) {
        plain_one = 1;
        BS_TRY(run_plain_one(sim, stop, t0, plain, err));
    }
    while (!plain_one && !sim->finished && sim->steps < stop && sim->stop_insn < 0) {
        /* A slice also ends after BS_SLICE_NS, so the caller can check for Ctrl-C
        ** promptly even when single instructions are expensive. */
        if ((++iter & 63) == 0 && now_ns() - t0 > BS_SLICE_NS)
            break;
        int progressed = 0, live = 0, what;
        int32_t n = sim->ncores, first, left = n;
        int32_t untried[64];               /* random: cores not tried yet this step */
        int rnd = sim->opts.schedule == BS_SCHED_random && n > 1;
        if (rnd)
            for (int32_t k = 0; k < n; k++)
                untried[k] = k;
        if (sim->opts.schedule == BS_SCHED_round_robin)
            first = sim->last_core + 1 < n ? sim->last_core + 1 : 0;
        else
            first = 0;
        for (int32_t t = 0; t < n && !progressed; t++) {
            int32_t k;
            if (rnd) {                     /* uniform among the cores that can advance */
                int32_t j = (int32_t)(bs_sim_random(sim) % (uint64_t)left);
                k = untried[j];
                untried[j] = untried[--left];
            } else {               /* (first + t) % n without a division per step */
                k = first + t < n ? first + t : first + t - n;
            }
            BS_TRY(bs_round_step_as(sim, k, &live, &progressed, plain, err));
        }
        BS_TRY(bs_round_end(sim, progressed, live, &what, err));
        if (what == BS_ROUND_AGAIN)
            continue;
        if (what == BS_ROUND_DONE)
            break;
    }
    if (BS_UNLIKELY(sim->chk) && sim->finished)
        BS_TRY(bs_chk_run_end(sim, err));
    *finished = sim->finished;
    return BS_OK;
}
