/* core/pool.c -- the worker pool (pool.h). One mutex guards the job slot; a generation
** counter tells workers a new job is posted. Parts are claimed under the mutex by whoever
** comes first -- the caller included, which keeps claiming until none is left -- so a
** worker the OS has not woken yet (a busy machine) never holds the job up: the caller
** then runs its parts. The caller returns once every part has finished; a worker that
** wakes later finds nothing to claim (or the next job, read afresh under the mutex).
** A worker that has just finished a job spins for a short while (SPIN_NS) watching the
** `posted` counter before it sleeps, so back-to-back jobs -- a kernel's matmuls, one after
** another -- find it awake: waking a sleeping thread costs tens of microseconds, as much
** as a whole part of a mid-sized product. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>
#include "alloc.h"
#include "pool.h"

struct bs_pool {
    pthread_mutex_t mu;
    pthread_cond_t  wake;       /* workers: a job was posted, or quit */
    pthread_cond_t  done;       /* caller: finished reached nparts */
    int32_t         nthreads;   /* workers + the caller */
    int32_t         nworkers;   /* started */
    pthread_t      *tid;        /* owned; nthreads - 1 */
    bs_pool_fn     *fn;         /* the posted job */
    void           *arg;
    int32_t         nparts;
    int32_t         next;       /* first part not claimed yet */
    int32_t         finished;   /* parts done */
    uint64_t        gen;        /* jobs posted so far */
    int32_t         quit;
    pid_t           pid;        /* the process that created the workers */
    atomic_int      busy;       /* a job is running */
    atomic_uint_fast64_t posted; /* gen, readable without the mutex (spinning workers) */
};

/* How long a worker that finished a job watches for the next before it sleeps. */
#define SPIN_NS 300000

typedef struct worker_arg {
    bs_pool *p;
    int32_t  index;             /* 1 .. nthreads-1 */
} worker_arg;

/* Claim and run parts of the posted job until none is left. Called and returns with the
** mutex held; signals `done` when the last part finishes. */
static void run_parts(bs_pool *p)
{
    while (p->next < p->nparts) {
        bs_pool_fn *fn = p->fn;
        void *arg = p->arg;
        int32_t i = p->next++, n = p->nparts;
        pthread_mutex_unlock(&p->mu);
        fn(arg, i, n);
        pthread_mutex_lock(&p->mu);
        if (++p->finished == n)
            pthread_cond_signal(&p->done);
    }
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Called with the mutex released: return once `posted` moves past seen or SPIN_NS pass. */
static void spin_for_job(bs_pool *p, uint64_t seen)
{
    int64_t until = now_ns() + SPIN_NS;
    for (uint32_t i = 1;; i++) {
        if (atomic_load_explicit(&p->posted, memory_order_acquire) != seen)
            return;
        if ((i & 255) == 0 && now_ns() > until)
            return;
    }
}

static void *worker_main(void *wa_)
{
    worker_arg wa = *(worker_arg *)wa_;
    bs_pool *p = wa.p;
    uint64_t seen = 0;                  /* workers start before the first job is posted */
    bs_free(wa_);
    pthread_mutex_lock(&p->mu);
    (void)wa.index;
    for (;;) {
        if (p->gen == seen && !p->quit && seen != 0) {
            pthread_mutex_unlock(&p->mu);
            spin_for_job(p, seen);
            pthread_mutex_lock(&p->mu);
        }
        while (p->gen == seen && !p->quit)
            pthread_cond_wait(&p->wake, &p->mu);
        if (p->quit)
            break;
        seen = p->gen;
        run_parts(p);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

/* Stop and join the started workers (same process only), then release everything. */
void bs_pool_free(bs_pool *p)
{
    if (p == NULL)
        return;
    if (p->pid == getpid()) {
        pthread_mutex_lock(&p->mu);
        p->quit = 1;
        atomic_store(&p->posted, p->gen + 1);   /* ends any spin */
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->mu);
        for (int32_t i = 0; i < p->nworkers; i++)
            pthread_join(p->tid[i], NULL);
        pthread_cond_destroy(&p->done);
        pthread_cond_destroy(&p->wake);
        pthread_mutex_destroy(&p->mu);
    }                                   /* a fork child: the workers are not in this process */
    bs_free(p->tid);
    bs_free(p);
}

/* The pool's mutex and condition variables: all three, or none (returns 0 then). */
static int pool_sync_init(bs_pool *p)
{
    if (pthread_mutex_init(&p->mu, NULL) != 0)
        return 0;
    if (pthread_cond_init(&p->wake, NULL) != 0) {
        pthread_mutex_destroy(&p->mu);
        return 0;
    }
    if (pthread_cond_init(&p->done, NULL) != 0) {
        pthread_cond_destroy(&p->wake);
        pthread_mutex_destroy(&p->mu);
        return 0;
    }
    return 1;
}

/* Starts workers 1..nthreads-1 with every signal blocked (they inherit the mask); stops at
** the first that cannot start (p->nworkers counts those running). */
static bs_status pool_start_workers(bs_pool *p, bs_error *err)
{
    sigset_t all, old;
    bs_status st = BS_OK;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    for (int32_t i = 1; i < p->nthreads; i++) {
        worker_arg *wa = bs_malloc(sizeof *wa);
        int started = 0;
        if (wa != NULL) {
            wa->p = p;
            wa->index = i;
            started = pthread_create(&p->tid[i - 1], NULL, worker_main, wa) == 0;
        }
        if (!started) {
            bs_free(wa);
            st = bs_errorf(err, BS_E_NOMEM, "cannot start worker thread %d of %d", (int)i,
                           (int)p->nthreads - 1);
            break;
        }
        p->nworkers++;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return st;
}

bs_status bs_pool_new(bs_pool **out, int32_t nthreads, bs_error *err)
{
    bs_pool *p;
    int sync_ok = 0;
    bs_status st = BS_OK;
    *out = NULL;
    if (nthreads < 2 || nthreads > BS_POOL_MAX)
        return bs_errorf(err, BS_E_INPUT, "a pool has 2 to %d threads, not %d", BS_POOL_MAX,
                         (int)nthreads);
    p = bs_calloc(1, sizeof *p);
    if (p == NULL)
        return bs_errorf(err, BS_E_NOMEM, "out of memory for a pool of %d threads",
                         (int)nthreads);
    p->nthreads = nthreads;
    p->pid = getpid();
    atomic_init(&p->busy, 0);
    atomic_init(&p->posted, 0);
    p->tid = bs_calloc((size_t)nthreads - 1, sizeof *p->tid);
    if (p->tid == NULL) {
        st = bs_errorf(err, BS_E_NOMEM, "out of memory for a pool of %d threads", (int)nthreads);
        goto fail;
    }
    sync_ok = pool_sync_init(p);
    if (!sync_ok) {
        st = bs_errorf(err, BS_E_NOMEM, "cannot create the pool's mutex or condition variables");
        goto fail;
    }
    st = pool_start_workers(p, err);
    if (st != BS_OK)
        goto fail;
    *out = p;
    return BS_OK;
fail:
    if (sync_ok)
        bs_pool_free(p);                /* joins the workers already started */
    else {
        bs_free(p->tid);
        bs_free(p);
    }
    return st;
}

int32_t bs_pool_threads(const bs_pool *p)
{
    return p == NULL ? 1 : p->nthreads;
}

static void run_inline(bs_pool_fn *fn, void *arg, int32_t n)
{
    for (int32_t i = 0; i < n; i++)
        fn(arg, i, n);
}

void bs_pool_run(bs_pool *p, bs_pool_fn *fn, void *arg, int32_t n)
{
    int idle = 0;
    if (p == NULL || n <= 1 || p->pid != getpid() ||
        !atomic_compare_exchange_strong(&p->busy, &idle, 1)) {
        run_inline(fn, arg, n);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->arg = arg;
    p->nparts = n;
    p->next = 0;
    p->finished = 0;
    p->gen++;
    atomic_store_explicit(&p->posted, p->gen, memory_order_release);
    pthread_cond_broadcast(&p->wake);
    run_parts(p);                       /* the caller works too, as long as parts are left */
    while (p->finished < n)
        pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
    atomic_store(&p->busy, 0);
}

bs_pool *bs_pool_get(bs_pool_ref *ref)
{
    bs_error err;
    if (ref == NULL || ref->threads <= 1 || ref->failed)
        return NULL;
    if (ref->pool == NULL) {
        bs_error_clear(&err);
        if (bs_pool_new(&ref->pool, ref->threads > BS_POOL_MAX ? BS_POOL_MAX : ref->threads,
                        &err) != BS_OK) {
            ref->failed = 1;
            ref->pool = NULL;
        }
    }
    return ref->pool;
}

void bs_pool_ref_fini(bs_pool_ref *ref)
{
    bs_pool_free(ref->pool);
    ref->pool = NULL;
}
