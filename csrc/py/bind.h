/* py/bind.h -- shared declarations of the binding files (never included by the core). */
#ifndef BS_PY_BIND_H
#define BS_PY_BIND_H

#include "../birsim.h"

typedef struct bs_modstate {
    PyObject *errors;          /* the birsim.errors module */
    PyObject *program_type;
    PyObject *sim_type;
    PyObject *records_type;    /* py/fastload.c: a packed table handed to Python */
    PyObject *pages_type;      /* py/objects.c: an output buffer handed over (zero_copy) */
    PyObject *get_missing;     /* birsim/_load/schema.py: MISSING (_get_init) */
    PyObject *get_slow;        /* ... and its get(), which reads what _get does not */
    PyObject *str_fast, *str_key;
    PyObject *table_keys;      /* py/program.c: Program_new's table names, interned, in its order */
} bs_modstate;

/* An exact int within [lo, hi]; 0 otherwise (no error set). */
static inline int exact_int(PyObject *v, int64_t lo, int64_t hi, int64_t *out)
{
    int overflow = 0;
    long long x;
    if (v == NULL || !PyLong_CheckExact(v))
        return 0;
    x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || (x == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    if (x < lo || x > hi)
        return 0;
    *out = x;
    return 1;
}

/* The item types of a packed table's fields (the layouts' "I32", "I64", "F64"). */
#define BS_PY_I32 'i'
#define BS_PY_I64 'l'
#define BS_PY_F64 'd'

/* A value into a packed table's field item as NumPy converts it, when its conversion is
** plain (an exact int within the type, a bool, a float; an int within 2^53 for a float):
** 1; else 0 (NumPy converts it or reports it). Both record packers use it: the loader's
** (py/module.c, _pack_records) and the walker's (py/fastload_rec.c, _fast_fill). */
static inline int bs_py_put_value(char type, PyObject *v, void *dst)
{
    int64_t x;
    if (type == BS_PY_F64) {
        double d;
        if (PyFloat_CheckExact(v))
            d = PyFloat_AS_DOUBLE(v);
        else if (v == Py_True || v == Py_False)
            d = v == Py_True;
        else if (exact_int(v, -(INT64_C(1) << 53), INT64_C(1) << 53, &x))
            d = (double)x;
        else
            return 0;
        memcpy(dst, &d, sizeof d);
        return 1;
    }
    if (v == Py_True || v == Py_False)
        x = v == Py_True;
    else if (!exact_int(v, type == BS_PY_I32 ? INT32_MIN : INT64_MIN,
                        type == BS_PY_I32 ? INT32_MAX : INT64_MAX, &x))
        return 0;
    if (type == BS_PY_I32) {
        int32_t y = (int32_t)x;
        memcpy(dst, &y, sizeof y);
    } else {
        memcpy(dst, &x, sizeof x);
    }
    return 1;
}

/* Raise the birsim exception for err (from bs_status.def's exception column). */
PyObject *bs_py_raise(PyObject *module, const bs_error *err);
int bs_py_add_types(PyObject *module);
/* py/pages.c: the _Pages type, and one owning `mem` (`total` bytes from bs_calloc when
** `heap`, else from bs_pages_alloc; exporting its first `len`; location `loc`'s buffer);
** on failure `mem` is freed and NULL returned. When the _Pages goes, its buffer becomes a
** spare of `spares` (a capsule; NULL: none) if that still takes one for `loc`, else it is
** freed. Spares: the buffers a zero_copy Simulator handed over, given back once their
** arrays are gone; its next reset reuses them (bs_sim_give_loc) instead of new pages that
** would fault in again; the same for a traced run's trace buffers (bs_sim_trace_give).
** All under the GIL. */
/* A trace buffer's `loc` (which: 0 the pairs, 1 the times; always heap) and back. */
#define BS_PY_TRACE_SLOT(which) (-1 - (which))
#define BS_PY_TRACE_WHICH(loc) (-1 - (loc))
extern PyType_Spec bs_py_pages_spec;
PyObject *bs_py_spares_new(int32_t nlocs);
void      bs_py_spares_give(PyObject *spares, bs_sim *sim);   /* before a reset */
void      bs_py_spares_close(PyObject *spares);   /* the Simulator is gone: free, keep none */
/* Sim.take_trace: (pairs, dropped count, times) of the last run, each a _Pages (of `type`)
** owning the core's buffer (int32 (core, insn) pairs; bs_trace_time records: float64
** start, float64 duration, int32 src[2]), or b"" when nothing was recorded; the core's
** trace is left empty (bs_sim_trace_take): called once, when the run is over. When the
** arrays over a buffer are gone, *spares (made here when NULL, for nlocs locations) give
** it to the next traced run, so a loop of traced runs records into warm memory and copies
** nothing. */
PyObject *bs_py_take_trace(PyObject *type, bs_sim *sim, PyObject **spares, int32_t nlocs);

/* py/program.c: the Program type, the bs_program of one, and bs_modstate.table_keys (made
** by bs_py_add_types). */
extern PyType_Spec bs_py_program_spec;
bs_program *bs_py_program(PyObject *program);
int bs_py_table_keys(bs_modstate *ms);
PyObject *bs_py_pages(PyObject *type, void *mem, size_t total, int heap, Py_ssize_t len,
                      PyObject *spares, int32_t loc);
/* The host kernel hook (py/hostcall.c): ctx is the Python callable serving delegated
** kernels, call(kernel, config, insn, opcode, ins, outs, core). */
bs_status bs_py_host_call(void *ctx, const bs_host_call *call, bs_error *err);
/* The loader's fast path (py/fastload.c): _fast_new, _fast_block, _fast_fill. */
int bs_py_add_fastload(PyObject *module);
/* A name as the loader's as_name takes it: a non-empty str without NUL that encodes to
** UTF-8 (no lone surrogate): 1, else 0 (NULL too; no error set). py/fastload.c. */
int bs_fl_valid_name(PyObject *name);
/* The loader's reading of a common tensor set (py/loadalloc.c): _alloc_set. */
int bs_py_add_loadalloc(PyObject *module);
/* The loader's record packer (py/pack.c): _pack_records, _pack_spec, _pack_tables. */
int bs_py_add_pack(PyObject *module);
/* py/loadmod.c: _module_common, _io_tensors, _loc_bytes, _tables_bytes (the Module's parts of a load). */
int bs_py_add_loadmod(PyObject *module);

#endif
