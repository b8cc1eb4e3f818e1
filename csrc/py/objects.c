/* py/objects.c -- the Sim heap type (the Program type is py/program.c). Normalisation
** happens in Python (birsim/_load/passes.py, birsim/simulator.py); these take bytes, ints
** and buffers only.
** Sim.run releases the GIL per slice of steps and checks for signals between slices;
** delegated kernels call back into Python under the GIL (py/hostcall.c). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdarg.h>
#include <stddef.h>
#include <structmember.h>
#include "bind.h"

typedef struct {
    PyObject_HEAD
    bs_sim     *sim;
    PyObject   *program;     /* keeps prog alive */
    PyObject   *module;
    PyObject   *host;        /* Python callable for delegated kernels during run */
    PyObject   *spares;      /* the handed-over buffers given back (py/pages.c), or NULL */
    Py_buffer  *lent;        /* the callers' buffers lent this run (Sim.lend): their */
    int         nlent;       /* exports, and so the arrays, held until Sim.unlend */
    int         lent_cap;
    char        needs_host;  /* the program delegates a kernel (Sim.needs_host) */
} SimObject;

static void release_lent(SimObject *self)
{
    while (self->nlent > 0)
        PyBuffer_Release(&self->lent[--self->nlent]);
}

/* {=== Sim ===} */

static PyObject *Sim_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"program", "cores", "schedule", "seed", "max_steps", "strict",
                             "trace", "checks", "uninit", "dma_mode", "fp8_overflow", "threads",
                             "rng_seed", "trace_max", "print_max", "record", "pct_depth",
                             "pct_steps", "timing", "pe_throttle", NULL};
    PyObject *program;
    int cores = 1, schedule = 0, strict = 0, trace = 0, checks = 0, uninit = 0, dma_mode = 0;
    int fp8_overflow = 0, threads = 1, record = 0, pct_depth = 0, timing = 0, pe_throttle = 0;
    unsigned long long seed = 0, rng_seed = 42;
    long long max_steps = 0, trace_max = 0, print_max = 0, pct_steps = 0;
    SimObject *self;
    bs_sim_opts opts;
    bs_error err;
    bs_modstate *ms = PyModule_GetState(PyType_GetModule(type));
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!|iiKLppiiiiiKLLpiLip", kwlist,
                                     (PyTypeObject *)ms->program_type, &program, &cores,
                                     &schedule, &seed, &max_steps, &strict, &trace, &checks,
                                     &uninit, &dma_mode, &fp8_overflow, &threads, &rng_seed,
                                     &trace_max, &print_max, &record, &pct_depth, &pct_steps,
                                     &timing, &pe_throttle))
        return NULL;
    self = (SimObject *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->program = Py_NewRef(program);
    self->module = Py_NewRef(PyType_GetModule(type));
    opts.ncores = cores;
    opts.schedule = schedule;
    opts.seed = seed;
    opts.rng_seed = rng_seed;
    opts.max_steps = max_steps;
    opts.strict = strict;
    opts.trace = trace;
    opts.trace_max = trace_max;
    opts.print_max = print_max;
    opts.checks = checks;
    opts.uninit = uninit;
    opts.dma_mode = dma_mode;
    opts.fp8_overflow = fp8_overflow;
    opts.threads = threads;
    opts.record = record;
    opts.pct_depth = pct_depth;
    opts.pct_steps = pct_steps;
    opts.timing = timing;
    opts.pe_throttle = pe_throttle;
    bs_error_clear(&err);
    if (bs_sim_new(&self->sim, bs_py_program(program), &opts, &err) != BS_OK) {
        bs_py_raise(self->module, &err);
        Py_DECREF(self);
        return NULL;
    }
    self->needs_host = (char)bs_sim_has_host_ops(self->sim);
    return (PyObject *)self;
}

static int Sim_traverse(SimObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->program);
    Py_VISIT(self->host);
    return 0;
}

static int Sim_clear(SimObject *self)
{
    Py_CLEAR(self->host);
    return 0;
}

static void Sim_dealloc(SimObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    bs_sim_free(self->sim);
    self->sim = NULL;
    release_lent(self);
    PyMem_Free(self->lent);
    if (self->spares != NULL) {
        bs_py_spares_close(self->spares);   /* arrays still out free their own buffers */
        Py_CLEAR(self->spares);
    }
    Py_CLEAR(self->host);
    Py_CLEAR(self->program);
    Py_CLEAR(self->module);
    tp->tp_free((PyObject *)self);
    Py_DECREF(tp);
}

static PyObject *raise_err(SimObject *self, const bs_error *err)
{
    return bs_py_raise(self->module, err);
}

static PyObject *Sim_reset(SimObject *self, PyObject *unused)
{
    bs_error err;
    (void)unused;
    bs_error_clear(&err);
    if (self->spares != NULL)
        bs_py_spares_give(self->spares, self->sim);
    if (bs_sim_reset(self->sim, &err) != BS_OK)
        return raise_err(self, &err);
    Py_RETURN_NONE;
}

/* write(loc, core, data, rows, rowbytes) */
/* Whether buf holds rows x rowbytes bytes (neither negative); if not, buf is released and
** ValueError set. Sim.write, read and lend. */
static int buffer_holds(Py_buffer *buf, long long rows, long long rowbytes)
{
    if (rows >= 0 && rowbytes >= 0 && buf->len >= rows * rowbytes)
        return 1;
    PyBuffer_Release(buf);
    PyErr_SetString(PyExc_ValueError, "buffer too small");
    return 0;
}

static PyObject *Sim_write(SimObject *self, PyObject *args)
{
    int loc, core;
    Py_buffer buf;
    long long rows, rowbytes;
    bs_error err;
    bs_status st;
    if (!PyArg_ParseTuple(args, "iiy*LL", &loc, &core, &buf, &rows, &rowbytes))
        return NULL;
    if (!buffer_holds(&buf, rows, rowbytes))
        return NULL;
    bs_error_clear(&err);
    st = bs_sim_write_loc(self->sim, core, loc, buf.buf, rows, rowbytes, &err);
    PyBuffer_Release(&buf);
    if (st != BS_OK)
        return raise_err(self, &err);
    Py_RETURN_NONE;
}

/* read(loc, core, rows, rowbytes[, out[, check]]) -> (out or a new bytearray, all_written):
** out is any writable C-contiguous buffer of at least rows * rowbytes bytes (None: a new
** one), filled in place; check=False skips the shadow scan (all_written is then None). */
static PyObject *Sim_read(SimObject *self, PyObject *args)
{
    int loc, core, written = 0, check = 1;
    long long rows, rowbytes;
    PyObject *out = NULL;
    Py_buffer buf;
    bs_error err;
    bs_status st;
    if (!PyArg_ParseTuple(args, "iiLL|Op", &loc, &core, &rows, &rowbytes, &out, &check))
        return NULL;
    if (out == Py_None)
        out = NULL;
    if (rows < 0 || rowbytes < 0)
        return PyErr_Format(PyExc_ValueError, "negative size");
    if (out == NULL) {
        out = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(rows * rowbytes));
        if (out == NULL)
            return NULL;
    } else {
        Py_INCREF(out);
    }
    if (PyObject_GetBuffer(out, &buf, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) != 0) {
        Py_DECREF(out);
        return NULL;
    }
    if (!buffer_holds(&buf, rows, rowbytes)) {
        Py_DECREF(out);
        return NULL;
    }
    bs_error_clear(&err);
    st = bs_sim_read_loc(self->sim, core, loc, buf.buf, rows, rowbytes,
                         check ? &written : NULL, &err);
    PyBuffer_Release(&buf);
    if (st != BS_OK) {
        Py_DECREF(out);
        return raise_err(self, &err);
    }
    return Py_BuildValue("(NO)", out, !check ? Py_None : written ? Py_True : Py_False);
}


/* written(loc, core, rows, rowbytes) -> bytearray of rows * rowbytes bytes, 1 where the run
** wrote the byte, 0 where nothing did. */
static PyObject *Sim_written(SimObject *self, PyObject *args)
{
    int loc, core;
    long long rows, rowbytes;
    PyObject *out;
    bs_error err;
    bs_status st;
    if (!PyArg_ParseTuple(args, "iiLL", &loc, &core, &rows, &rowbytes))
        return NULL;
    if (rows < 0 || rowbytes < 0 || (rowbytes && rows > PY_SSIZE_T_MAX / rowbytes))
        return PyErr_Format(PyExc_ValueError, "bad size");
    out = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(rows * rowbytes));
    if (out == NULL)
        return NULL;
    bs_error_clear(&err);
    st = bs_sim_read_written(self->sim, core, loc, (uint8_t *)PyByteArray_AS_STRING(out),
                             rows, rowbytes, &err);
    if (st != BS_OK) {
        Py_DECREF(out);
        return raise_err(self, &err);
    }
    return out;
}



/* run(host, slice) -> None: run to completion, releasing the GIL per slice. */
static PyObject *Sim_run(SimObject *self, PyObject *args)
{
    PyObject *host;
    long long slice = 200000;
    int finished = 0;
    bs_error err;
    bs_status st = BS_OK;
    if (!PyArg_ParseTuple(args, "O|L", &host, &slice))
        return NULL;
    Py_XSETREF(self->host, Py_NewRef(host));
    bs_sim_set_host(self->sim, host == Py_None ? NULL : bs_py_host_call, self->host);
    bs_error_clear(&err);
    while (!finished) {
        Py_BEGIN_ALLOW_THREADS
        st = bs_sim_run(self->sim, slice, &finished, &err);
        Py_END_ALLOW_THREADS
        if (st != BS_OK)
            break;
        if (PyErr_CheckSignals() < 0) {
            Py_CLEAR(self->host);
            return NULL;
        }
    }
    Py_CLEAR(self->host);
    bs_sim_set_host(self->sim, NULL, NULL);
    if (st != BS_OK)
        return raise_err(self, &err);
    Py_RETURN_NONE;
}

/* advance(host, budget) -> (finished, stop_core, stop_insn): one slice of bs_sim_run (up
** to `budget` steps or ~20 ms, or until a breakpoint), then a check for Ctrl-C. */
static PyObject *Sim_advance(SimObject *self, PyObject *args)
{
    PyObject *host;
    long long budget = 200000;
    int finished = 0;
    int32_t core = -1, insn;
    bs_error err;
    bs_status st;
    if (!PyArg_ParseTuple(args, "O|L", &host, &budget))
        return NULL;
    Py_XSETREF(self->host, Py_NewRef(host));
    bs_sim_set_host(self->sim, host == Py_None ? NULL : bs_py_host_call, self->host);
    bs_error_clear(&err);
    Py_BEGIN_ALLOW_THREADS
    st = bs_sim_run(self->sim, budget, &finished, &err);
    Py_END_ALLOW_THREADS
    Py_CLEAR(self->host);
    bs_sim_set_host(self->sim, NULL, NULL);
    if (st != BS_OK)
        return raise_err(self, &err);
    if (PyErr_CheckSignals() < 0)
        return NULL;
    insn = bs_sim_stopped(self->sim, &core);
    return Py_BuildValue("(Oii)", finished ? Py_True : Py_False, (int)core, (int)insn);
}

/* set_breaks(bits: bytes | None, every: bool) */
static PyObject *Sim_set_breaks(SimObject *self, PyObject *args)
{
    Py_buffer bits = {0};
    PyObject *obj;
    int every = 0;
    bs_error err;
    bs_status st;
    if (!PyArg_ParseTuple(args, "O|p", &obj, &every))
        return NULL;
    bs_error_clear(&err);
    if (obj != Py_None) {
        if (PyObject_GetBuffer(obj, &bits, PyBUF_SIMPLE) < 0)
            return NULL;
    }
    st = bs_sim_set_breaks(self->sim, obj == Py_None ? NULL : bits.buf, (int64_t)bits.len,
                           every, &err);
    if (obj != Py_None)
        PyBuffer_Release(&bits);
    if (st != BS_OK)
        return raise_err(self, &err);
    Py_RETURN_NONE;
}

/* queue_heads(core) -> (block, (insn per engine, -1 empty)) */
static PyObject *Sim_queue_heads(SimObject *self, PyObject *args)
{
    int core;
    int32_t heads[BS_NUM_ENGINES], block;
    PyObject *t;
    if (!PyArg_ParseTuple(args, "i", &core))
        return NULL;
    block = bs_sim_queue_heads(self->sim, core, heads);
    t = PyTuple_New(BS_NUM_ENGINES);
    if (t == NULL)
        return NULL;
    for (int e = 0; e < BS_NUM_ENGINES; e++)
        PyTuple_SET_ITEM(t, e, PyLong_FromLong(heads[e]));
    return Py_BuildValue("(iN)", (int)block, t);
}

/* sync_state(core) -> (semaphores as uint32 bytes, event flags as bytes) */
static PyObject *Sim_sync_state(SimObject *self, PyObject *args)
{
    int core;
    const uint32_t *sems;
    const uint8_t *evts;
    if (!PyArg_ParseTuple(args, "i", &core))
        return NULL;
    sems = bs_sim_sems(self->sim, core);
    evts = bs_sim_events(self->sim, core);
    if (sems == NULL || evts == NULL)
        return PyErr_Format(PyExc_ValueError, "no core %d", core);
    return Py_BuildValue("(y#y#)", (const char *)sems, (Py_ssize_t)(BS_NUM_SEMS * sizeof *sems),
                         (const char *)evts, (Py_ssize_t)BS_NUM_EVENTS);
}

static PyObject *Sim_stats(SimObject *self, PyObject *unused)
{
    const int64_t *ops = bs_sim_op_counts(self->sim), *eng = bs_sim_engine_counts(self->sim);
    PyObject *o = PyList_New(BS_OP__COUNT), *e = PyList_New(BS_NUM_ENGINES);
    (void)unused;
    if (o == NULL || e == NULL) {
        Py_XDECREF(o);
        Py_XDECREF(e);
        return NULL;
    }
    for (int i = 0; i < BS_OP__COUNT; i++)
        PyList_SET_ITEM(o, i, PyLong_FromLongLong(ops[i]));
    for (int i = 0; i < BS_NUM_ENGINES; i++)
        PyList_SET_ITEM(e, i, PyLong_FromLongLong(eng[i]));
    return Py_BuildValue("(NNL)", o, e, (long long)bs_sim_steps(self->sim));
}

static PyObject *Sim_diagnostics(SimObject *self, PyObject *unused)
{
    int32_t n = bs_sim_ndiag(self->sim);
    PyObject *l = PyList_New(n);
    (void)unused;
    if (l == NULL)
        return NULL;
    for (int32_t i = 0; i < n; i++)
        PyList_SET_ITEM(l, i, PyUnicode_FromString(bs_sim_diag(self->sim, i)));
    return Py_BuildValue("(NLsO)", l, (long long)bs_sim_diag_dropped(self->sim),
                         bs_sim_notes(self->sim), bs_sim_exited(self->sim) ? Py_True : Py_False);
}

/* {name: count} of the non-zero counts[0, n), names[i] naming counts[i], in index order. */
static PyObject *nonzero_counts(const int64_t *counts, int n, PyObject *names, int64_t *total)
{
    PyObject *d = PyDict_New();
    if (d == NULL)
        return NULL;
    for (int i = 0; i < n; i++) {
        PyObject *v;
        *total += counts[i];
        if (counts[i] == 0)
            continue;
        v = PyLong_FromLongLong(counts[i]);
        if (v == NULL || PyDict_SetItem(d, PyTuple_GET_ITEM(names, i), v) < 0) {
            Py_XDECREF(v);
            Py_DECREF(d);
            return NULL;
        }
        Py_DECREF(v);
    }
    return d;
}

/* summary(op_names, engine_names) -> (diagnostics, dropped, notes, exited, stats, printed):
** what Simulator._collect reads after a run, in one call. The first four as diagnostics()
** gives them; stats is the dict {"steps": n, "opcodes": {name: count}, "engines": {name:
** count}, "instructions": total} of stats() (the opcodes and engines that ran, in index
** order, named by the tuples given: BS_OP__COUNT and BS_NUM_ENGINES names); printed is
** whether prints() has anything (a record or a dropped count). */
static PyObject *Sim_summary(SimObject *self, PyObject *args)
{
    PyObject *op_names, *eng_names, *diag = NULL, *ops = NULL, *engines = NULL, *stats = NULL;
    PyObject *out = NULL;
    int64_t ninsn = 0, nengine = 0, plen = 0, pdropped = 0;
    if (!PyArg_ParseTuple(args, "O!O!", &PyTuple_Type, &op_names, &PyTuple_Type, &eng_names))
        return NULL;
    if (PyTuple_GET_SIZE(op_names) != BS_OP__COUNT || PyTuple_GET_SIZE(eng_names) != BS_NUM_ENGINES)
        return PyErr_Format(PyExc_ValueError, "summary: %d opcode and %d engine names expected",
                            (int)BS_OP__COUNT, (int)BS_NUM_ENGINES);
    diag = Sim_diagnostics(self, NULL);
    ops = nonzero_counts(bs_sim_op_counts(self->sim), BS_OP__COUNT, op_names, &ninsn);
    engines = nonzero_counts(bs_sim_engine_counts(self->sim), BS_NUM_ENGINES, eng_names, &nengine);
    if (diag == NULL || ops == NULL || engines == NULL)
        goto done;
    stats = Py_BuildValue("{s:L,s:O,s:O,s:L}", "steps", (long long)bs_sim_steps(self->sim),
                          "opcodes", ops, "engines", engines, "instructions", (long long)ninsn);
    if (stats == NULL)
        goto done;
    (void)bs_sim_prints(self->sim, &plen, &pdropped);
    out = Py_BuildValue("(OOOOOO)", PyTuple_GET_ITEM(diag, 0), PyTuple_GET_ITEM(diag, 1),
                        PyTuple_GET_ITEM(diag, 2), PyTuple_GET_ITEM(diag, 3), stats,
                        plen > 0 || pdropped > 0 ? Py_True : Py_False);
done:
    Py_XDECREF(diag);
    Py_XDECREF(ops);
    Py_XDECREF(engines);
    Py_XDECREF(stats);
    return out;
}

/* steps() -> the step count of the run so far (stats()[2] without the count lists) */
static PyObject *Sim_steps(SimObject *self, PyObject *unused)
{
    (void)unused;
    return PyLong_FromLongLong((long long)bs_sim_steps(self->sim));
}

/* findings() -> ([(check, message, (detail, ...)), ...], dropped count) */
static PyObject *Sim_findings(SimObject *self, PyObject *unused)
{
    int32_t n = bs_sim_nfinding(self->sim);
    PyObject *l = PyList_New(n);
    (void)unused;
    if (l == NULL)
        return NULL;
    for (int32_t i = 0; i < n; i++) {
        int32_t check = 0;
        const char *msg = "";
        const int64_t *d = NULL;
        PyObject *det, *item;
        bs_sim_finding(self->sim, i, &check, &msg, &d);
        det = PyTuple_New(BS_FINDING_NDETAIL);
        if (det == NULL) {
            Py_DECREF(l);
            return NULL;
        }
        for (int j = 0; j < BS_FINDING_NDETAIL; j++)
            PyTuple_SET_ITEM(det, j, PyLong_FromLongLong(d[j]));
        item = Py_BuildValue("(isN)", check, msg, det);
        if (item == NULL) {
            Py_DECREF(l);
            return NULL;
        }
        PyList_SET_ITEM(l, i, item);
    }
    return Py_BuildValue("(NL)", l, (long long)bs_sim_findings_dropped(self->sim));
}

/* take_trace() -> (pairs, dropped count, times): the last run's trace, handed over
** without a copy (bs_py_take_trace). */
static PyObject *Sim_take_trace(SimObject *self, PyObject *unused)
{
    bs_modstate *ms = PyModule_GetState(self->module);
    (void)unused;
    if (ms == NULL)
        return NULL;
    return bs_py_take_trace(ms->pages_type, self->sim, &self->spares,
                            bs_py_program(self->program)->n_locs);
}

/* timing() -> None (timing off) or a dict of the modelled run (bs_timing_summary) */
static PyObject *Sim_timing(SimObject *self, PyObject *unused)
{
    bs_timing_summary s;
    PyObject *active;
    (void)unused;
    if (!bs_sim_timing(self->sim, &s))
        Py_RETURN_NONE;
    active = PyList_New(BS_NUM_ENGINES);
    if (active == NULL)
        return NULL;
    for (int e = 0; e < BS_NUM_ENGINES; e++) {
        PyObject *v = PyFloat_FromDouble(s.active_ns[e]);
        if (v == NULL) {
            Py_DECREF(active);
            return NULL;
        }
        PyList_SET_ITEM(active, e, v);
    }
    return Py_BuildValue("{s:d,s:N,s:L,s:L,s:L,s:(LLLL),s:d,s:d,s:d,s:i}",
                         "total_ns", s.total_ns, "active_ns", active,
                         "macs", (long long)s.macs, "dma_bytes", (long long)s.dma_bytes,
                         "hbm_bytes", (long long)s.hbm_bytes,
                         "dma_hist", (long long)s.dma_hist[0], (long long)s.dma_hist[1],
                         (long long)s.dma_hist[2], (long long)s.dma_hist[3],
                         "pe_tflops_bf16", s.pe_tflops_bf16, "hbm_gbps", s.hbm_gbps,
                         "dma_engines_ns", s.dma_engines_ns, "dma_engines", (int)s.dma_engines);
}

/* prints() -> (bytes of DevicePrint records (birsim.h bs_print_rec + data), dropped) */
static PyObject *Sim_prints(SimObject *self, PyObject *unused)
{
    int64_t n, dropped;
    const uint8_t *p = bs_sim_prints(self->sim, &n, &dropped);
    (void)unused;
    return Py_BuildValue("(y#L)", (const char *)p, (Py_ssize_t)n, (long long)dropped);
}

/* set_decisions(bytes of int32) -- the replay schedule's decisions */
static PyObject *Sim_set_decisions(SimObject *self, PyObject *args)
{
    Py_buffer buf;
    bs_error err;
    bs_status st;
    if (!PyArg_ParseTuple(args, "y*", &buf))
        return NULL;
    bs_error_clear(&err);
    st = bs_sim_set_decisions(self->sim, buf.buf, (int64_t)(buf.len / (Py_ssize_t)sizeof(int32_t)),
                              &err);
    PyBuffer_Release(&buf);
    if (st != BS_OK)
        return raise_err(self, &err);
    Py_RETURN_NONE;
}

/* last_done(core) -> ((last insn completed per queue, -1), last insn completed on any) */
static PyObject *Sim_last_done(SimObject *self, PyObject *args)
{
    int core;
    int32_t any;
    const int32_t *q;
    PyObject *t;
    if (!PyArg_ParseTuple(args, "i", &core))
        return NULL;
    q = bs_sim_last_done(self->sim, core, &any);
    if (q == NULL) {
        PyErr_Format(PyExc_ValueError, "no core %d", core);
        return NULL;
    }
    t = PyTuple_New(BS_NUM_ENGINES);
    if (t == NULL)
        return NULL;
    for (int e = 0; e < BS_NUM_ENGINES; e++) {
        PyObject *v = PyLong_FromLong(q[e]);
        if (v == NULL) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, e, v);
    }
    return Py_BuildValue("(Ni)", t, (int)any);
}

/* set_schedule(schedule, seed, record, pct_depth, pct_steps) -- for later runs */
static PyObject *Sim_set_schedule(SimObject *self, PyObject *args)
{
    int schedule, record, pct_depth;
    unsigned long long seed;
    long long pct_steps;
    bs_error err;
    if (!PyArg_ParseTuple(args, "iKpiL", &schedule, &seed, &record, &pct_depth, &pct_steps))
        return NULL;
    bs_error_clear(&err);
    if (bs_sim_set_schedule(self->sim, schedule, seed, record, pct_depth, pct_steps, &err)
        != BS_OK)
        return raise_err(self, &err);
    Py_RETURN_NONE;
}

/* decisions() -> (bytes of int32 decisions of the last run, dropped count) */
static PyObject *Sim_decisions(SimObject *self, PyObject *unused)
{
    int64_t n, dropped;
    const int32_t *d = bs_sim_decisions(self->sim, &n, &dropped);
    (void)unused;
    if (d == NULL)
        n = 0;
    return Py_BuildValue("(y#L)", d ? (const char *)d : "", (Py_ssize_t)(n * (int64_t)sizeof *d),
                         (long long)dropped);
}

static PyObject *Sim_reg(SimObject *self, PyObject *args)
{
    int core, reg, engine = -1;
    if (!PyArg_ParseTuple(args, "ii|i", &core, &reg, &engine))
        return NULL;
    return PyLong_FromUnsignedLongLong(bs_sim_reg(self->sim, core, reg, engine));
}

/* {=== Zero-copy ===} */

/* lend(loc, data, rows, rowbytes) -> True when the location reads `data` in place this
** run (its buffer export held here until unlend()), False when it must be written. */
static PyObject *Sim_lend(SimObject *self, PyObject *args)
{
    int loc, lent = 0;
    Py_buffer buf;
    long long rows, rowbytes;
    bs_error err;
    bs_status st;
    if (!PyArg_ParseTuple(args, "iy*LL", &loc, &buf, &rows, &rowbytes))
        return NULL;
    if (!buffer_holds(&buf, rows, rowbytes))
        return NULL;
    if (self->nlent == self->lent_cap) {            /* room first: a lent buffer is kept */
        int cap = self->lent_cap ? 2 * self->lent_cap : 4;
        Py_buffer *grown = PyMem_Realloc(self->lent, (size_t)cap * sizeof *grown);
        if (grown == NULL) {
            PyBuffer_Release(&buf);
            return PyErr_NoMemory();
        }
        self->lent = grown;
        self->lent_cap = cap;
    }
    bs_error_clear(&err);
    st = bs_sim_lend_loc(self->sim, loc, buf.buf, rows, rowbytes, &lent, &err);
    if (st != BS_OK || !lent) {
        PyBuffer_Release(&buf);
        if (st != BS_OK)
            return raise_err(self, &err);
        Py_RETURN_FALSE;
    }
    self->lent[self->nlent++] = buf;
    Py_RETURN_TRUE;
}

static PyObject *Sim_unlend(SimObject *self, PyObject *unused)
{
    (void)unused;
    bs_sim_unlend(self->sim);
    release_lent(self);
    Py_RETURN_NONE;
}

static PyObject *Sim_zero_copy(SimObject *self, PyObject *unused)
{
    (void)unused;
    bs_sim_zero_copy(self->sim);
    Py_RETURN_NONE;
}

/* take(loc, rows, rowbytes) -> a _Pages buffer of rows * rowbytes bytes, every one
** written, or None (not taken: read it) */
static PyObject *Sim_take(SimObject *self, PyObject *args)
{
    bs_modstate *ms = PyModule_GetState(self->module);
    int loc, heap = 0;
    long long rows, rowbytes;
    void *mem = NULL;
    size_t total = 0;
    bs_error err;
    if (ms == NULL || !PyArg_ParseTuple(args, "iLL", &loc, &rows, &rowbytes))
        return NULL;
    bs_error_clear(&err);
    if (bs_sim_take_loc(self->sim, loc, rows, rowbytes, &mem, &total, &heap, &err) != BS_OK)
        return raise_err(self, &err);
    if (mem == NULL)
        Py_RETURN_NONE;
    if (self->spares == NULL &&             /* none (no memory): freed with its array */
        (self->spares = bs_py_spares_new(bs_py_program(self->program)->n_locs)) == NULL)
        PyErr_Clear();
    return bs_py_pages(ms->pages_type, mem, total, heap, (Py_ssize_t)(rows * rowbytes),
                       self->spares, loc);
}

static PyMethodDef Sim_methods[] = {
    {"lend", (PyCFunction)Sim_lend, METH_VARARGS,
     "lend($self, loc, data, rows, rowbytes, /)\n--\n\nRead data in place this run if the "
     "program never writes the location (True: its buffer held until unlend), else False "
     "(write it)."},
    {"unlend", (PyCFunction)Sim_unlend, METH_NOARGS,
     "unlend($self, /)\n--\n\nForget and release every lent buffer (back to the "
     "simulator's own)."},
    {"zero_copy", (PyCFunction)Sim_zero_copy, METH_NOARGS,
     "zero_copy($self, /)\n--\n\nOutputs will be handed over: ask for huge pages for them."},
    {"take", (PyCFunction)Sim_take, METH_VARARGS,
     "take($self, loc, rows, rowbytes, /)\n--\n\nThe location's buffer handed over (every "
     "byte written), or None."},
    {"reset", (PyCFunction)Sim_reset, METH_NOARGS, "reset($self, /)\n--\n\nStart a fresh run."},
    {"write", (PyCFunction)Sim_write, METH_VARARGS,
     "write($self, loc, core, data, rows, rowbytes, /)\n--\n\nCopy rows into a location (core -1: all)."},
    {"written", (PyCFunction)Sim_written, METH_VARARGS,
     "written($self, loc, core, rows, rowbytes, /)\n--\n\nA bytearray: 1 per byte the run wrote, 0 per byte it did not."},
    {"read", (PyCFunction)Sim_read, METH_VARARGS,
     "read($self, loc, core, rows, rowbytes, out=None, check=True, /)\n--\n\nReturn (out or a bytearray, all_written)."},
    {"run", (PyCFunction)Sim_run, METH_VARARGS,
     "run($self, host, slice=200000, /)\n--\n\nRun to completion; host handles delegated kernels."},
    {"stats", (PyCFunction)Sim_stats, METH_NOARGS,
     "stats($self, /)\n--\n\n(op counts, engine counts, steps) of the last run."},
    {"diagnostics", (PyCFunction)Sim_diagnostics, METH_NOARGS,
     "diagnostics($self, /)\n--\n\n(messages, dropped count, notes, exited)."},
    {"summary", (PyCFunction)Sim_summary, METH_VARARGS,
     "summary($self, op_names, engine_names, /)\n--\n\n(messages, dropped count, notes, exited, "
     "stats dict, anything printed) of the last run."},
    {"steps", (PyCFunction)Sim_steps, METH_NOARGS,
     "steps($self, /)\n--\n\nThe step count of the run so far."},
    {"reg", (PyCFunction)Sim_reg, METH_VARARGS, "reg($self, core, reg, engine=-1, /)\n--\n\nRaw register cell of an engine's file (-1: most recent)."},
    {"findings", (PyCFunction)Sim_findings, METH_NOARGS,
     "findings($self, /)\n--\n\n([(check, message, details), ...], dropped count)."},
    {"advance", (PyCFunction)Sim_advance, METH_VARARGS,
     "advance($self, host, budget=200000, /)\n--\n\nOne slice of the run: (finished, stop_core, stop_insn)."},
    {"set_breaks", (PyCFunction)Sim_set_breaks, METH_VARARGS,
     "set_breaks($self, bits, every=False, /)\n--\n\nStop after instructions whose flag is set (None clears)."},
    {"queue_heads", (PyCFunction)Sim_queue_heads, METH_VARARGS,
     "queue_heads($self, core, /)\n--\n\n(block, head instruction per engine or -1) of core's innermost frame."},
    {"sync_state", (PyCFunction)Sim_sync_state, METH_VARARGS,
     "sync_state($self, core, /)\n--\n\n(semaphores as uint32 bytes, events as bytes) of core."},
    {"prints", (PyCFunction)Sim_prints, METH_NOARGS,
     "prints($self, /)\n--\n\n(DevicePrint records as bytes, dropped count) of the last run."},
    {"take_trace", (PyCFunction)Sim_take_trace, METH_NOARGS,
     "take_trace($self, /)\n--\n\n(int32 (core, insn) pairs, dropped count, modelled times) of the last run, as buffers handed over without a copy; the core's trace is left empty."},
    {"timing", (PyCFunction)Sim_timing, METH_NOARGS,
     "timing($self, /)\n--\n\nThe modelled run (a dict), or None when timing is off."},
    {"set_decisions", (PyCFunction)Sim_set_decisions, METH_VARARGS,
     "set_decisions($self, decisions, /)\n--\n\nThe replay schedule's decisions (int32 bytes)."},
    {"set_schedule", (PyCFunction)Sim_set_schedule, METH_VARARGS,
     "set_schedule($self, schedule, seed, record, pct_depth, pct_steps, /)\n--\n\nSchedule options of later runs."},
    {"last_done", (PyCFunction)Sim_last_done, METH_VARARGS,
     "last_done($self, core, /)\n--\n\n((last instruction completed per queue, -1 none), last on any queue)."},
    {"decisions", (PyCFunction)Sim_decisions, METH_NOARGS,
     "decisions($self, /)\n--\n\n(int32 decisions as bytes, dropped count) of the last run (record=True)."},
    {NULL, NULL, 0, NULL}
};

static PyMemberDef Sim_members[] = {
    {"needs_host", T_BOOL, offsetof(SimObject, needs_host), READONLY,
     "Whether the program has a CustomOp/BIRKernel: a run without one needs no host."},
    {NULL, 0, 0, 0, NULL}
};

static PyType_Slot Sim_slots[] = {
    {Py_tp_members, Sim_members},
    {Py_tp_new, Sim_new},
    {Py_tp_dealloc, Sim_dealloc},
    {Py_tp_traverse, Sim_traverse},
    {Py_tp_clear, Sim_clear},
    {Py_tp_methods, Sim_methods},
    {Py_tp_doc, "Sim(program, cores=1, schedule=0, seed=0, max_steps=0, strict=False, "
                "trace=False, checks=0, uninit=0, dma_mode=0, fp8_overflow=0, threads=1, "
                "rng_seed=42, trace_max=0, print_max=0, record=False, pct_depth=0, pct_steps=0, "
                "timing=0, pe_throttle=False)\n--\n\n"
                "The C simulator state for one Program."},
    {0, NULL}
};

static PyType_Spec Sim_spec = {
    .name = "birsim._birsim.Sim",
    .basicsize = sizeof(SimObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = Sim_slots,
};

int bs_py_add_types(PyObject *m)
{
    bs_modstate *ms = PyModule_GetState(m);
    ms->program_type = PyType_FromModuleAndSpec(m, &bs_py_program_spec, NULL);
    if (ms->program_type == NULL || PyModule_AddType(m, (PyTypeObject *)ms->program_type) < 0)
        return -1;
    ms->sim_type = PyType_FromModuleAndSpec(m, &Sim_spec, NULL);
    if (ms->sim_type == NULL || PyModule_AddType(m, (PyTypeObject *)ms->sim_type) < 0)
        return -1;
    ms->pages_type = PyType_FromModuleAndSpec(m, &bs_py_pages_spec, NULL);
    if (ms->pages_type == NULL)
        return -1;
    if (bs_py_table_keys(ms) < 0)
        return -1;
    return 0;
}
