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
} bs_modstate;

/* Raise the birsim exception for err (from bs_status.def's exception column). */
PyObject *bs_py_raise(PyObject *module, const bs_error *err);
int bs_py_add_types(PyObject *module);
/* py/pages.c: the _Pages type, and one owning `mem` (`total` bytes from bs_pages_alloc,
** exporting its first `len`); on failure `mem` is freed and NULL returned. */
extern PyType_Spec bs_py_pages_spec;
PyObject *bs_py_pages(PyObject *type, void *mem, size_t total, Py_ssize_t len);
/* The host kernel hook (py/hostcall.c): ctx is the Python callable serving delegated
** kernels, call(kernel, config, insn, opcode, ins, outs, core). */
bs_status bs_py_host_call(void *ctx, const bs_host_call *call, bs_error *err);
/* The loader's fast path (py/fastload.c): _fast_new, _fast_block, _fast_fill. */
int bs_py_add_fastload(PyObject *module);

#endif
