/* vm/explore.c -- schedules for exploration: a run that records its scheduling decisions
** (opts.record), the replay of a decision list (BS_SCHED_replay) and PCT, probabilistic
** concurrency testing (BS_SCHED_pct: random priorities with depth-1 priority change points).
**
** A decision is taken wherever a step has a real choice: which core to step when more than
** one core is live (the decision is the core's index), and which ready queue head of a
** block to run when more than one is ready (the decision is the queue: an EngineType
** value, 7 for the rendezvous queue). Recording keeps the choice made at each such point,
** in order; a replay takes the next decision at each point, and -1, a decision that names
** no candidate or the end of the list means the default: the in_order choice (the core of
** lowest index that can advance; the head of lowest block offset). The simulator is
** deterministic given its decisions, so replaying a recorded list repeats the run exactly.
**
** This is a separate run loop (bs_xp_run) and a separate pick (bs_xp_pick), entered only
** when sim->xp is set, so the other schedules pay one test per slice and per pick. */
#include "vm.h"
#include "check.h"
#include "defer.h"
#include "round.h"

struct bs_xp {
    int32_t *dec;            /* owned; replay: the decisions */
    int64_t  ndec, dpos;
    int32_t *log;            /* owned; record: the decisions taken this run */
    int64_t  nlog, dropped;
    size_t   log_cap;        /* bytes */
    int64_t *prio;           /* owned; pct: per core x queue */
    int64_t *cprio;          /* owned; pct: per core */
    int64_t *cp;             /* owned; pct: change points (steps), ascending */
    int32_t  ncp, icp;
    int64_t  low;            /* pct: the next lowered priority */
};

static int xp_active(const bs_sim_opts *o)
{
    return o->record || o->schedule == BS_SCHED_replay || o->schedule == BS_SCHED_pct;
}

bs_status bs_xp_new(bs_sim *sim, bs_error *err)
{
    struct bs_xp *x;
    int32_t d = sim->opts.pct_depth;
    if (!xp_active(&sim->opts))
        return BS_OK;
    if (d < 0 || d > 64)
        return bs_errorf(err, BS_E_INPUT, "pct depth must be between 0 and 64, got %d", (int)d);
    x = bs_calloc(1, sizeof *x);
    if (x == NULL)
        return bs_errorf(err, BS_E_NOMEM, "out of memory");
    sim->xp = x;
    x->prio = bs_calloc((size_t)sim->ncores * BS_NUM_ENGINES, sizeof *x->prio);
    x->cprio = bs_calloc((size_t)sim->ncores, sizeof *x->cprio);
    x->cp = bs_calloc((size_t)(d > 1 ? d - 1 : 1), sizeof *x->cp);
    x->ncp = d > 1 ? d - 1 : 0;
    if (!x->prio || !x->cprio || !x->cp)
        return bs_errorf(err, BS_E_NOMEM, "out of memory");
    return BS_OK;
}

void bs_xp_free(bs_sim *sim)
{
    struct bs_xp *x = sim->xp;
    if (x == NULL)
        return;
    bs_free(x->dec);
    bs_free(x->log);
    bs_free(x->prio);
    bs_free(x->cprio);
    bs_free(x->cp);
    bs_free(x);
    sim->xp = NULL;
}

/* A fresh run (after the schedule's generator is reseeded): the replay starts over, the
** log is emptied, PCT draws its priorities and change points. */
enum { PCT_STEPS_FALLBACK = 1000 };     /* opts.pct_steps unset (Python always sets it) */

void bs_xp_reset(bs_sim *sim)
{
    struct bs_xp *x = sim->xp;
    int64_t span = sim->opts.pct_steps > 0 ? sim->opts.pct_steps : PCT_STEPS_FALLBACK;
    if (x == NULL)
        return;
    x->dpos = x->nlog = x->dropped = 0;
    x->icp = 0;
    x->low = (int64_t)1 << 40;
    if (sim->opts.schedule != BS_SCHED_pct)
        return;
    /* initial priorities above every lowered one; distinct with overwhelming odds */
    for (int64_t i = 0; i < (int64_t)sim->ncores * BS_NUM_ENGINES; i++)
        x->prio[i] = ((int64_t)1 << 41) + (int64_t)(bs_sim_random(sim) >> 24);
    for (int32_t k = 0; k < sim->ncores; k++)
        x->cprio[k] = ((int64_t)1 << 41) + (int64_t)(bs_sim_random(sim) >> 24);
    for (int32_t i = 0; i < x->ncp; i++) {
        int64_t v = (int64_t)(bs_sim_random(sim) % (uint64_t)span), t;
        int32_t j = i;
        for (; j > 0 && x->cp[j - 1] > v; j--) {   /* insertion: keep them ascending */
            t = x->cp[j - 1];
            x->cp[j] = t;
        }
        x->cp[j] = v;
    }
}

bs_status bs_sim_set_schedule(bs_sim *sim, int32_t schedule, uint64_t seed, int32_t record,
                              int32_t pct_depth, int64_t pct_steps, bs_error *err)
{
    if (schedule < 0 || schedule > BS_SCHED_pct)
        return bs_errorf(err, BS_E_INPUT, "bad schedule %d", (int)schedule);
    bs_xp_free(sim);
    sim->opts.schedule = schedule;
    sim->opts.seed = seed;
    sim->opts.record = record;
    sim->opts.pct_depth = pct_depth;
    sim->opts.pct_steps = pct_steps;
    sim->pristine = 0;              /* the next reset reseeds the generator, restarts the log */
    return bs_xp_new(sim, err);
}

bs_status bs_sim_set_decisions(bs_sim *sim, const int32_t *dec, int64_t n, bs_error *err)
{
    struct bs_xp *x = sim->xp;
    int32_t *copy = NULL;
    if (x == NULL)
        return bs_errorf(err, BS_E_INPUT, "decisions are replayed by the replay schedule only");
    if (n < 0 || (uint64_t)n > SIZE_MAX / sizeof *copy)
        return bs_errorf(err, BS_E_INPUT, "bad decision count %lld", (long long)n);
    if (n > 0) {
        copy = bs_malloc((size_t)n * sizeof *copy);
        if (copy == NULL)
            return bs_errorf(err, BS_E_NOMEM, "out of memory copying %lld decisions",
                             (long long)n);
        memcpy(copy, dec, (size_t)n * sizeof *copy);
    }
    bs_free(x->dec);
    x->dec = copy;
    x->ndec = n;
    sim->pristine = 0;              /* the next reset restarts the replay at decision 0 */
    x->dpos = 0;
    return BS_OK;
}

const int32_t *bs_sim_decisions(const bs_sim *sim, int64_t *n, int64_t *dropped)
{
    *n = sim->xp ? sim->xp->nlog : 0;
    *dropped = sim->xp ? sim->xp->dropped : 0;
    return sim->xp ? sim->xp->log : NULL;
}

/* Keep decision v (opts.record); returns its index in the log, or -1. Out of memory it
** counts the decision as dropped: the run goes on, and the binding refuses the
** incomplete list. */
static int64_t xp_record(bs_sim *sim, int32_t v)
{
    struct bs_xp *x = sim->xp;
    void *b = x->log;
    if (!sim->opts.record)
        return -1;
    if (bs_reserve(&b, &x->log_cap, (size_t)(x->nlog + 1) * sizeof *x->log, 1)) {
        x->dropped++;
        return -1;
    }
    x->log = b;
    x->log[x->nlog] = v;
    return x->nlog++;
}

/* The replay's next decision, -1 past the end of the list. */
static int32_t xp_next(struct bs_xp *x)
{
    return x->dpos < x->ndec ? x->dec[x->dpos++] : -1;
}

static const uint8_t rr_rotation[] = { BS_ENGINE_Pool, BS_ENGINE_Activation, BS_ENGINE_PE,
                                       BS_ENGINE_DMA, BS_ENGINE_DVE, BS_ENGINE_SP, BS_Q_RDV };

static int32_t rr_pos(int32_t q)
{
    for (int32_t r = 0; r < (int32_t)sizeof rr_rotation; r++)
        if (rr_rotation[r] == q)
            return r;
    return 0;
}

/* pick() of interp.c with sim->xp set: the n >= 1 ready candidates (block offsets cand[],
** queues qs[], in rotation order); the same choices as pick's for in_order, round_robin
** and random, recorded when asked. */
int32_t bs_xp_pick(bs_sim *sim, bs_core *c, const int32_t *cand, const int32_t *qs, int32_t n)
{
    struct bs_xp *x = sim->xp;
    int32_t i = 0;
    int32_t sched = sim->opts.schedule;
    if (sched == BS_SCHED_random) {
        i = (int32_t)(bs_sim_random(sim) % (uint64_t)n);
        c->last_engine = qs[i];
    } else if (sched == BS_SCHED_round_robin) {
        int32_t bestd = 99, lastpos = rr_pos(c->last_engine);
        int32_t nr = (int32_t)sizeof rr_rotation;
        for (int32_t j = 0; j < n; j++) {
            int32_t d = (rr_pos(qs[j]) - lastpos - 1 + nr) % nr;
            if (d < bestd) {
                bestd = d;
                i = j;
            }
        }
        c->last_engine = qs[i];
    } else if (sched == BS_SCHED_pct) {
        const int64_t *pr = x->prio + (size_t)c->index * BS_NUM_ENGINES;
        for (int32_t j = 1; j < n; j++)
            if (pr[qs[j]] > pr[qs[i]])
                i = j;
    } else {
        int32_t v = (sched == BS_SCHED_replay && n > 1) ? xp_next(x) : -1;
        for (int32_t j = 1; j < n; j++)
            if (cand[j] < cand[i])
                i = j;
        for (int32_t j = 0; j < n && v >= 0; j++)
            if (qs[j] == v)
                i = j;
    }
    if (n > 1)
        (void)xp_record(sim, qs[i]);
    if (sched == BS_SCHED_pct && x->icp < x->ncp && sim->steps >= x->cp[x->icp]) {
        /* a change point: the running queue and its core drop below every other */
        x->prio[(size_t)c->index * BS_NUM_ENGINES + (size_t)qs[i]] = x->low--;
        x->cprio[c->index] = x->low--;
        x->icp++;
    }
    return cand[i];
}

/* The order in which this step tries the cores (order[0..n-1]). */
static void xp_core_order(bs_sim *sim, int32_t nlive, int32_t *order)
{
    struct bs_xp *x = sim->xp;
    int32_t n = sim->ncores, first = 0, m = 0;
    if (sim->opts.schedule == BS_SCHED_pct) {
        for (int32_t k = 0; k < n; k++) {       /* by priority, highest first */
            int32_t j = m++;
            for (; j > 0 && x->cprio[order[j - 1]] < x->cprio[k]; j--)
                order[j] = order[j - 1];
            order[j] = k;
        }
        return;
    }
    if (sim->opts.schedule == BS_SCHED_round_robin)
        first = (sim->last_core + 1) % n;
    else if (sim->opts.schedule == BS_SCHED_replay && nlive > 1) {
        int32_t v = xp_next(x);
        if (v >= 0 && v < n && !sim->cores[v].done) {
            order[m++] = v;
            for (int32_t k = 0; k < n; k++)
                if (k != v)
                    order[m++] = k;
            return;
        }
    }
    for (int32_t t = 0; t < n; t++)
        order[t] = (first + t) % n;
}

/* bs_sim_run's loop for sim->xp (see there); the random schedule draws its numbers in
** the same order, so a recorded random run is the run it would have been unrecorded. */
bs_status bs_xp_run(bs_sim *sim, int64_t stop, int *finished, bs_error *err)
{
    while (!sim->finished && sim->steps < stop && sim->stop_insn < 0) {
        int progressed = 0, live = 0, what;
        int32_t n = sim->ncores, left = n, nlive = 0;
        int64_t slot = -1;
        int32_t untried[BS_MAX_CORES], order[BS_MAX_CORES];
        int rnd = sim->opts.schedule == BS_SCHED_random && n > 1;
        for (int32_t k = 0; k < n; k++) {
            nlive += !sim->cores[k].done;
            untried[k] = k;
        }
        if (!rnd)
            xp_core_order(sim, nlive, order);
        if (nlive > 1)                  /* the core decision comes before the step's picks */
            slot = xp_record(sim, -1);
        for (int32_t t = 0; t < n && !progressed; t++) {
            int32_t k;
            if (rnd) {
                int32_t j = (int32_t)(bs_sim_random(sim) % (uint64_t)left);
                k = untried[j];
                untried[j] = untried[--left];
            } else {
                k = order[t];
            }
            BS_TRY(bs_round_step(sim, k, &live, &progressed, err));
            if (progressed && slot >= 0)    /* the loop ends at the first core that advances */
                sim->xp->log[slot] = k;
        }
        BS_TRY(bs_round_end(sim, progressed, live, &what, err));
        if (what == BS_ROUND_AGAIN)
            continue;
        if (what == BS_ROUND_DONE)
            break;
    }
    *finished = sim->finished;
    return BS_OK;
}
