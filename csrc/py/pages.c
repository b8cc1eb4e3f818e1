/* py/pages.c -- _Pages: an output's buffer handed over by a zero_copy run
** (bs_sim_take_loc, vm/zerocopy.c), or one of a traced run's trace buffers
** (bs_sim_trace_take). It exports the data half as one writable buffer
** (np.frombuffer makes it the output array without a copy) and frees the whole allocation
** (data and shadow: bs_free if it came from the C heap, else bs_pages_free with its size)
** with the object -- unless its Simulator's spares take it back for the next run (which
** keeps it where bs_sim_give_loc says so), so that a warm loop of zero_copy or traced runs
** reuses them instead of new pages. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "bind.h"

typedef struct {
    PyObject_HEAD
    void      *mem;
    size_t     total;
    Py_ssize_t len;
    int        heap;         /* from bs_calloc (bs_sim_own_alloc) */
    int32_t    loc;          /* a location, or BS_PY_TRACE_SLOT(which): a trace buffer */
    PyObject  *spares;       /* owned; NULL: freed with the object */
} PagesObject;

static void free_pages(void *mem, size_t total, int heap)
{
    if (heap)
        bs_free(mem);
    else
        bs_pages_free(mem, total);
}

/* {=== Spares: one slot per location ===} */

typedef struct {
    void   *mem;             /* a handed-over buffer given back, or NULL */
    size_t  total;           /* its bytes (a mapped buffer's, for bs_pages_free) */
    int     heap;            /* from the C heap (bs_free) */
} spare;

typedef struct {
    int     closed;          /* the Simulator is gone */
    int32_t nlocs, nkept;
    spare  *slot;            /* per location */
    void   *trace[2];        /* the trace's pairs and times buffers (bs_free), or NULL */
    size_t  trace_cap[2];
} spares;

static spares *spares_of(PyObject *capsule)
{
    return (spares *)PyCapsule_GetPointer(capsule, "birsim.spares");
}

static void spares_free_kept(spares *sp)
{
    for (int w = 0; w < 2; w++) {
        bs_free(sp->trace[w]);
        sp->trace[w] = NULL;
    }
    for (int32_t l = 0; sp->nkept > 0 && l < sp->nlocs; l++)
        if (sp->slot[l].mem != NULL) {
            free_pages(sp->slot[l].mem, sp->slot[l].total, sp->slot[l].heap);
            sp->slot[l].mem = NULL;
            sp->nkept--;
        }
}

static void spares_destroy(PyObject *capsule)
{
    spares *sp = spares_of(capsule);
    if (sp == NULL)
        return;
    spares_free_kept(sp);
    bs_free(sp->slot);
    bs_free(sp);
}

PyObject *bs_py_spares_new(int32_t nlocs)
{
    spares *sp = bs_calloc(1, sizeof *sp);
    PyObject *capsule;
    if (sp == NULL || (sp->slot = bs_calloc((size_t)nlocs, sizeof *sp->slot)) == NULL) {
        bs_free(sp);
        return PyErr_NoMemory();
    }
    sp->nlocs = nlocs;
    capsule = PyCapsule_New(sp, "birsim.spares", spares_destroy);
    if (capsule == NULL) {
        bs_free(sp->slot);
        bs_free(sp);
    }
    return capsule;
}

void bs_py_spares_give(PyObject *capsule, bs_sim *sim)
{
    spares *sp = spares_of(capsule);
    if (sp == NULL)
        return;
    for (int w = 0; w < 2; w++)
        if (sp->trace[w] != NULL) {
            if (!bs_sim_trace_give(sim, w, sp->trace[w], sp->trace_cap[w]))
                bs_free(sp->trace[w]);
            sp->trace[w] = NULL;
        }
    for (int32_t l = 0; sp->nkept > 0 && l < sp->nlocs; l++) {
        spare *k = &sp->slot[l];
        if (k->mem == NULL)
            continue;
        if (!bs_sim_give_loc(sim, l, k->mem, k->heap))
            free_pages(k->mem, k->total, k->heap);
        k->mem = NULL;
        sp->nkept--;
    }
}

void bs_py_spares_close(PyObject *capsule)
{
    spares *sp = spares_of(capsule);
    if (sp == NULL)
        return;
    sp->closed = 1;
    spares_free_kept(sp);
}

/* {=== _Pages ===} */

static int Pages_getbuffer(PyObject *self, Py_buffer *view, int flags)
{
    PagesObject *g = (PagesObject *)self;
    return PyBuffer_FillInfo(view, self, g->mem, g->len, 0, flags);
}

static void Pages_dealloc(PyObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PagesObject *g = (PagesObject *)self;
    spares *sp = g->spares != NULL ? spares_of(g->spares) : NULL;
    /* kept for the Simulator's next run, which decides (bs_sim_give_loc): a mapped buffer
    ** (4 MiB or more, huge pages) is reused only where its data need not be cleared --
    ** new pages, touched only where written, cost less than clearing it whole (a 128 MiB
    ** output's warm run: 22 ms against 100 ms) */
    if (sp != NULL && !sp->closed && g->loc >= 0 && g->loc < sp->nlocs &&
        sp->slot[g->loc].mem == NULL) {
        sp->slot[g->loc] = (spare){g->mem, g->total, g->heap};
        sp->nkept++;
    } else if (sp != NULL && !sp->closed && g->loc < 0 &&
               sp->trace[BS_PY_TRACE_WHICH(g->loc)] == NULL) {
        sp->trace[BS_PY_TRACE_WHICH(g->loc)] = g->mem;    /* the next traced run's */
        sp->trace_cap[BS_PY_TRACE_WHICH(g->loc)] = g->total;
    } else
        free_pages(g->mem, g->total, g->heap);
    Py_XDECREF(g->spares);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyType_Slot Pages_slots[] = {
    {Py_bf_getbuffer, Pages_getbuffer},
    {Py_tp_dealloc, Pages_dealloc},
    {Py_tp_doc, "An output's memory handed over by a zero_copy run (a writable buffer)."},
    {0, NULL}
};

PyType_Spec bs_py_pages_spec = {
    .name = "birsim._birsim._Pages",
    .basicsize = sizeof(PagesObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = Pages_slots,
};

PyObject *bs_py_pages(PyObject *type, void *mem, size_t total, int heap, Py_ssize_t len,
                      PyObject *spares_, int32_t loc)
{
    PagesObject *g = PyObject_New(PagesObject, (PyTypeObject *)type);
    if (g == NULL) {
        free_pages(mem, total, heap);
        return NULL;
    }
    g->mem = mem;
    g->total = total;
    g->heap = heap;
    g->len = len;
    g->loc = loc;
    g->spares = Py_XNewRef(spares_);
    return (PyObject *)g;
}

/* {=== The trace, handed over ===} */

PyObject *bs_py_take_trace(PyObject *type, bs_sim *sim, PyObject **spares_, int32_t nlocs)
{
    void *buf[2];
    size_t cap[2];
    int64_t n, dropped;
    PyObject *v[2] = {NULL, NULL};
    Py_ssize_t len[2];
    bs_sim_trace_take(sim, buf, cap, &n, &dropped);
    len[0] = (Py_ssize_t)(n * 2 * (int64_t)sizeof(int32_t));
    len[1] = (Py_ssize_t)(n * (int64_t)sizeof(bs_trace_time));
    if (n > 0 && *spares_ == NULL &&        /* none (no memory): freed with its array */
        (*spares_ = bs_py_spares_new(nlocs)) == NULL)
        PyErr_Clear();
    for (int w = 0; w < 2; w++) {
        if (n == 0 || (v[0] == NULL && w == 1)) {  /* nothing recorded, or failed: keep */
            if (!bs_sim_trace_give(sim, w, buf[w], cap[w]))
                bs_free(buf[w]);
            if (n == 0)
                v[w] = PyBytes_FromStringAndSize("", 0);
            continue;
        }
        v[w] = bs_py_pages(type, buf[w], cap[w], 1, len[w], *spares_, BS_PY_TRACE_SLOT(w));
    }
    if (v[0] == NULL || v[1] == NULL) {
        Py_XDECREF(v[0]);
        Py_XDECREF(v[1]);
        return NULL;
    }
    return Py_BuildValue("(NLN)", v[0], (long long)dropped, v[1]);
}
