/* py/loadalloc.c -- the loader's reading of a common tensor set in C (_alloc_set).
**
** birsim/_load/passes.py `_Loader._set` (with `_set_name`, `_set_shape`, `_memtype` and
** `_location`) is the specification: it reads every allocation, reports every error with
** its JSON path and builds the records. `_alloc_set` reads a set the way those do when
** every value is plain (exact dicts, lists of exact ints, names the checkers' fast paths
** take, no alias key, no derived name or shape, no PSUM bank) and returns what they read;
** anything else -- every value that would be an error among them -- is declined (None)
** and the Python path reads the set from the start. It changes nothing: the caller
** (`_Loader._set_fast`) writes the records. tests/load/test_load_alloc.py compares the
** two over the corpus and random allocations. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "bind.h"

/* The configuration tuple (passes.py `_catalog_checks`, "set_cfg"). */
enum {
    CFG_TKIND,          /* tensor kind name -> code */
    CFG_TKIND_NAME,     /* code -> name */
    CFG_INTERNAL,       /* the code of Internal (kind's default) */
    CFG_DTYPE,          /* dtype name -> code */
    CFG_DTYPE_ALIASES,  /* alias -> dtype name */
    CFG_DTYPE_NAME,     /* code -> name */
    CFG_DTYPE_SIZE,     /* name -> bytes */
    CFG_ADDRSPACE,      /* addr_space name -> code */
    CFG_SHARED,         /* the code of Shared */
    CFG_SHARED_IF_ABSENT, /* the code of Shared is 0 (an absent addr_space is space 0) */
    CFG_MEM,            /* memory type name -> code */
    CFG_MEM_NAME,       /* code -> name */
    CFG_NO_DATA,        /* memory types that hold no data (read as DRAM) */
    CFG_INPUT_KINDS,
    CFG_OUTPUT_KINDS,
    CFG_MAX_RANK,       /* the sets table's shape count */
    CFG_N
};

enum { MEM_DRAM, MEM_SB, MEM_PSUM };

/* d[key] as a borrowed reference for a str key, NULL when absent or null (no error). */
static PyObject *item(PyObject *d, const char *key)
{
    PyObject *v = PyDict_GetItemString(d, key);
    return v == Py_None ? NULL : v;
}

/* A name as as_name's fast path takes it (a non-empty str without NUL) that t.string
** can encode: 1; else 0 (no error set). */
static int plain_name(PyObject *v)
{
    Py_ssize_t n;
    const char *s;
    if (v == NULL || !PyUnicode_CheckExact(v) || PyUnicode_GET_LENGTH(v) == 0)
        return 0;
    s = PyUnicode_AsUTF8AndSize(v, &n);
    if (s == NULL) {
        PyErr_Clear();
        return 0;
    }
    return memchr(s, 0, (size_t)n) == NULL;
}

/* A list of exact ints in [1, INT64_MAX] (_positive_ints' fast path) into out[0..n):
** its length, or -1 (decline). */
static Py_ssize_t positive_ints(PyObject *v, int64_t *out, Py_ssize_t cap)
{
    Py_ssize_t n;
    if (v == NULL || !PyList_CheckExact(v))
        return -1;
    n = PyList_GET_SIZE(v);
    if (n > cap)
        return -1;
    for (Py_ssize_t i = 0; i < n; i++)
        if (!exact_int(PyList_GET_ITEM(v, i), 1, INT64_MAX, &out[i]))
            return -1;
    return n;
}

/* table[key] with key looked up as is: a new reference, NULL when absent (no error) or
** on an error (set). */
static PyObject *lookup(PyObject *table, PyObject *key)
{
    PyObject *v;
    if (!PyDict_Check(table))
        return NULL;
    v = PyDict_GetItemWithError(table, key);
    return Py_XNewRef(v);
}

static PyObject *int_list(const int64_t *v, Py_ssize_t n)
{
    PyObject *out = PyList_New(n);
    if (out == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = PyLong_FromLongLong(v[i]);
        if (x == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, x);
    }
    return out;
}

#define MAX_DIMS 16

/* One memory location (passes.py _location): its tuple (name, memtype code, memory name,
** placed, dims, base, addr, rows), Py_None to decline, NULL on an error. */
static PyObject *location(PyObject *const *cfg, PyObject *loc, PyObject *flocs, PyObject *seen,
                          const int64_t *shape, int64_t row, int shared, int internal,
                          const int64_t *arch)
{
    PyObject *name, *v, *code = NULL, *mem_name = NULL, *rec_code = NULL, *dims_l = NULL;
    PyObject *out = NULL;
    int64_t dims[MAX_DIMS], base = 0, addr = 0, total, prod = 1, rows[2];
    Py_ssize_t nd;
    int mem, has_base, has_addr, placed = 0, r;
    if (!PyDict_CheckExact(loc))
        return Py_NewRef(Py_None);
    name = item(loc, "name");
    if (!plain_name(name))
        return Py_NewRef(Py_None);
    r = PyDict_Contains(flocs, name);
    if (r == 0)
        r = PySet_Contains(seen, name);
    if (r != 0)
        return r < 0 ? NULL : Py_NewRef(Py_None);
    /* _memtype: a memory type name only (a number takes the checker) */
    v = item(loc, "type");
    if (v == NULL || !PyUnicode_CheckExact(v))
        return Py_NewRef(Py_None);
    code = lookup(cfg[CFG_MEM], v);
    if (code == NULL)
        goto decline;
    mem_name = lookup(cfg[CFG_MEM_NAME], code);
    if (mem_name == NULL)
        goto decline;
    r = PySequence_Contains(cfg[CFG_NO_DATA], mem_name);
    if (r < 0)
        goto done;
    if (r) {
        Py_SETREF(mem_name, PyUnicode_FromString("DRAM"));
        if (mem_name == NULL)
            goto done;
    }
    if (PyUnicode_CompareWithASCIIString(mem_name, "DRAM") == 0)
        mem = MEM_DRAM;
    else if (PyUnicode_CompareWithASCIIString(mem_name, "SB") == 0)
        mem = MEM_SB;
    else if (PyUnicode_CompareWithASCIIString(mem_name, "PSUM") == 0)
        mem = MEM_PSUM;
    else
        goto decline;
    rec_code = lookup(cfg[CFG_MEM], mem_name);
    if (rec_code == NULL)
        goto decline;
    v = item(loc, "dims");
    nd = 0;
    if (v != NULL && (nd = positive_ints(v, dims, MAX_DIMS)) < 0)
        goto decline;
    if (__builtin_mul_overflow(row, shape[0], &total))
        goto decline;
    rows[0] = shape[0];
    rows[1] = row;
    if (v == NULL) {
        nd = 2;
        dims[0] = shape[0];
        dims[1] = row;
    } else if (mem == MEM_DRAM) {
        if (!(nd == 2 && dims[0] >= shape[0] && dims[1] >= row)) {
            for (Py_ssize_t i = 0; i < nd; i++)
                if (__builtin_mul_overflow(prod, dims[i], &prod))
                    goto decline;
            if (prod < total)
                goto decline;
            nd = 2;
            dims[0] = 1;
            dims[1] = prod;
            rows[0] = 1;
            rows[1] = total;
        }
    } else if (nd != 2 || dims[0] < shape[0] || dims[1] < row) {
        goto decline;
    }
    if (shared && mem != MEM_DRAM)
        goto decline;
    has_base = (v = item(loc, "base")) != NULL;
    if (has_base && !exact_int(v, 0, INT64_MAX, &base))
        goto decline;
    has_addr = (v = item(loc, "addr")) != NULL;
    if (has_addr && !exact_int(v, 0, INT64_MAX, &addr))
        goto decline;
    if (mem != MEM_DRAM) {
        if (mem == MEM_PSUM && item(loc, "bank") != NULL)
            goto decline;               /* a bank-relative address: the Python path */
        placed = has_addr;
        if (!has_base)
            base = 0;
    } else if (has_addr && internal && !shared) {
        placed = 1;
        base = 0;
    }
    if (mem != MEM_DRAM) {
        int64_t parts = mem == MEM_SB ? arch[0] : arch[2];
        int64_t bpp = mem == MEM_SB ? arch[1] : arch[3];
        int64_t e0, e1;
        if (!placed && dims[0] > parts)
            goto decline;
        if (placed && (__builtin_add_overflow(base, dims[0], &e0) ||
                       __builtin_add_overflow(addr, dims[1], &e1) || e0 > parts || e1 > bpp))
            goto decline;
    }
    if (!placed)
        base = addr = 0;
    dims_l = int_list(dims, nd);
    if (dims_l == NULL)
        goto done;
    if (PySet_Add(seen, name) < 0)
        goto done;
    out = Py_BuildValue("(OOOiOLL(LL))", name, rec_code, mem_name, placed, dims_l,
                        (long long)base, (long long)addr, (long long)rows[0],
                        (long long)rows[1]);
    goto done;
decline:
    if (!PyErr_Occurred())
        out = Py_NewRef(Py_None);
done:
    Py_XDECREF(code);
    Py_XDECREF(mem_name);
    Py_XDECREF(rec_code);
    Py_XDECREF(dims_l);
    return out;
}

/* _alloc_set(cfg, a, fsets, flocs, arch): see the file's comment. The tuple is (name,
** kind code, kind name, io, dtype code, dtype name, shape, shared, debug name, [location
** tuples]); io is the kind's (1 input, 2 output, 0 other) whatever the function. */
static PyObject *alloc_set(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *const *cfg;
    PyObject *a, *fsets, *flocs, *v, *locs, *name;
    PyObject *kind = NULL, *kind_name = NULL, *dname = NULL, *dtype = NULL, *size_o = NULL;
    PyObject *space = NULL, *shape_l = NULL, *out_locs = NULL, *seen = NULL, *out = NULL;
    PyObject *debug_name = Py_None;
    int64_t shape[MAX_DIMS], arch[4], itemsize, row, max_rank, pdim;
    Py_ssize_t ns, nloc;
    int shared = 0, io = 0, r, internal;
    (void)self;
    if (nargs != 5 || !PyTuple_CheckExact(args[0]) || PyTuple_GET_SIZE(args[0]) != CFG_N ||
            !PyDict_CheckExact(args[2]) || !PyDict_CheckExact(args[3])) {
        PyErr_SetString(PyExc_TypeError, "_alloc_set(cfg, a, fsets, flocs, arch_info)");
        return NULL;
    }
    cfg = &PyTuple_GET_ITEM(args[0], 0);
    a = args[1];
    fsets = args[2];
    flocs = args[3];
    if (!PyTuple_CheckExact(args[4]) || PyTuple_GET_SIZE(args[4]) != 5)
        Py_RETURN_NONE;
    for (int i = 0; i < 4; i++)
        if (!exact_int(PyTuple_GET_ITEM(args[4], i + 1), INT64_MIN, INT64_MAX, &arch[i]))
            Py_RETURN_NONE;
    if (!exact_int(cfg[CFG_MAX_RANK], 1, MAX_DIMS, &max_rank) || !PyDict_CheckExact(a))
        Py_RETURN_NONE;
    /* _allocations: a set by Skind, or by its memorylocations */
    v = item(a, "Skind");
    locs = item(a, "memorylocations");
    if (v != NULL ? !PyUnicode_CheckExact(v) ||
            PyUnicode_CompareWithASCIIString(v, "memory_location_set") != 0 : locs == NULL)
        Py_RETURN_NONE;
    if (locs != NULL && !PyList_CheckExact(locs))
        Py_RETURN_NONE;
    nloc = locs != NULL ? PyList_GET_SIZE(locs) : 0;
    name = item(a, "name");                 /* _set_name: a name given, not derived */
    if (!plain_name(name))
        Py_RETURN_NONE;
    r = PyDict_Contains(fsets, name);
    if (r != 0)
        return r < 0 ? NULL : Py_NewRef(Py_None);
    v = item(a, "kind");
    if (v == NULL) {
        kind = Py_NewRef(cfg[CFG_INTERNAL]);
    } else if (!PyUnicode_CheckExact(v) || (kind = lookup(cfg[CFG_TKIND], v)) == NULL) {
        goto decline;
    }
    kind_name = lookup(cfg[CFG_TKIND_NAME], kind);
    if (kind_name == NULL || !PyUnicode_CheckExact(kind_name))
        goto decline;
    v = item(a, "dtype");
    if (v == NULL || !PyUnicode_CheckExact(v))
        goto decline;
    {
        PyObject *alias = lookup(cfg[CFG_DTYPE_ALIASES], v);
        if (alias == NULL && PyErr_Occurred())
            goto done;
        dtype = lookup(cfg[CFG_DTYPE], alias != NULL ? alias : v);
        Py_XDECREF(alias);
    }
    if (dtype == NULL || (dname = lookup(cfg[CFG_DTYPE_NAME], dtype)) == NULL ||
            (size_o = lookup(cfg[CFG_DTYPE_SIZE], dname)) == NULL ||
            !exact_int(size_o, 0, INT64_MAX, &itemsize))
        goto decline;
    ns = positive_ints(item(a, "tensor_shape"), shape, MAX_DIMS);   /* _set_shape: given */
    if (ns < 1 || ns > max_rank)
        goto decline;
    v = item(a, "partition_dim");
    if (v != NULL && !exact_int(v, INT64_MIN, INT64_MAX, &pdim))
        goto decline;
    v = item(a, "addr_space");
    if (v != NULL) {
        if (!PyUnicode_CheckExact(v) || (space = lookup(cfg[CFG_ADDRSPACE], v)) == NULL)
            goto decline;
        r = PyObject_RichCompareBool(space, cfg[CFG_SHARED], Py_EQ);
        if (r < 0)
            goto done;
        shared = r;
    } else {
        shared = PyObject_IsTrue(cfg[CFG_SHARED_IF_ABSENT]);   /* `space = 0` when absent */
        if (shared < 0)
            goto done;
    }
    r = PySequence_Contains(cfg[CFG_INPUT_KINDS], kind_name);
    if (r < 0)
        goto done;
    if (r) {
        io = 1;
    } else {
        r = PySequence_Contains(cfg[CFG_OUTPUT_KINDS], kind_name);
        if (r < 0)
            goto done;
        io = r ? 2 : 0;
    }
    if (io && nloc != 1)
        goto decline;                   /* an input/output set has exactly one location */
    if (locs != NULL && nloc == 0)
        goto decline;                   /* []: a private DRAM location (the Python path) */
    row = itemsize;
    for (Py_ssize_t i = 1; i < ns; i++)
        if (__builtin_mul_overflow(row, shape[i], &row))
            goto decline;
    v = item(a, "debug");
    if (v != NULL && PyDict_Check(v)) {
        PyObject *tn;
        if (!PyDict_CheckExact(v))
            goto decline;
        tn = item(v, "tensor_name");
        if (tn != NULL && PyUnicode_Check(tn))
            debug_name = tn;
    }
    internal = PyUnicode_CompareWithASCIIString(kind_name, "Internal") == 0;
    seen = PySet_New(NULL);
    out_locs = PyList_New(nloc);
    if (seen == NULL || out_locs == NULL)
        goto done;
    for (Py_ssize_t j = 0; j < nloc; j++) {
        PyObject *t = location(cfg, PyList_GET_ITEM(locs, j), flocs, seen, shape, row, shared,
                               internal, arch);
        if (t == NULL)
            goto done;
        if (t == Py_None) {
            Py_DECREF(t);
            goto decline;
        }
        PyList_SET_ITEM(out_locs, j, t);
    }
    shape_l = int_list(shape, ns);
    if (shape_l == NULL)
        goto done;
    out = Py_BuildValue("(OOOiOOOOOO)", name, kind, kind_name, io, dtype, dname, shape_l,
                        shared ? Py_True : Py_False, debug_name, out_locs);
    goto done;
decline:
    if (!PyErr_Occurred())
        out = Py_NewRef(Py_None);
done:
    Py_XDECREF(kind);
    Py_XDECREF(kind_name);
    Py_XDECREF(dtype);
    Py_XDECREF(dname);
    Py_XDECREF(size_o);
    Py_XDECREF(space);
    Py_XDECREF(shape_l);
    Py_XDECREF(out_locs);
    Py_XDECREF(seen);
    return out;
}

static PyMethodDef loadalloc_methods[] = {
    {"_alloc_set", (PyCFunction)(void (*)(void))alloc_set, METH_FASTCALL,
     "_alloc_set($module, cfg, a, fsets, flocs, arch_info, /)\n--\n\nWhat the loader's "
     "_set reads of a common tensor set (birsim/_load/passes.py), or None: the Python "
     "path reads it."},
    {NULL, NULL, 0, NULL}
};

int bs_py_add_loadalloc(PyObject *module)
{
    return PyModule_AddFunctions(module, loadalloc_methods);
}
