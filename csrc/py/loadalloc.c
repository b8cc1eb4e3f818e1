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

/* The keys read and written, as interned strings (made once, at import). */
#define BS_ALLOC_KEYS(X) X(name) X(type) X(dims) X(base) X(addr) X(bank) X(Skind) \
    X(memorylocations) X(kind) X(dtype) X(tensor_shape) X(partition_dim) X(addr_space) \
    X(debug) X(tensor_name) X(func) X(shared) X(ndim) X(shape) X(loc0) X(io) X(nloc) \
    X(function) X(locs) X(memory) X(module) X(debug_name) X(set) X(memtype) X(placed) \
    X(parts) X(bpp) X(rows)
#define BS_ALLOC_KEY_ENUM(k) K_##k,
enum { BS_ALLOC_KEYS(BS_ALLOC_KEY_ENUM) K_N };
#undef BS_ALLOC_KEY_ENUM
static PyObject *keys[K_N];

/* Every key of d an exact str: its lookups below cannot fail (no __eq__ of another key
** type runs). */
static int str_keys(PyObject *d)
{
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (PyDict_Next(d, &pos, &k, &v))
        if (!PyUnicode_CheckExact(k))
            return 0;
    return 1;
}

/* d[key] borrowed (d has str keys only), NULL when absent or null. */
static PyObject *item(PyObject *d, int key)
{
    PyObject *v = PyDict_GetItemWithError(d, keys[key]);
    return v == Py_None ? NULL : v;
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
    if (!PyDict_CheckExact(loc) || !str_keys(loc))
        return Py_NewRef(Py_None);
    name = item(loc, K_name);
    if (!bs_fl_valid_name(name))
        return Py_NewRef(Py_None);
    r = PyDict_Contains(flocs, name);
    if (r == 0)
        r = PySet_Contains(seen, name);
    if (r != 0)
        return r < 0 ? NULL : Py_NewRef(Py_None);
    /* _memtype: a memory type name only (a number takes the checker) */
    v = item(loc, K_type);
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
    v = item(loc, K_dims);
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
    has_base = (v = item(loc, K_base)) != NULL;
    if (has_base && !exact_int(v, 0, INT64_MAX, &base))
        goto decline;
    has_addr = (v = item(loc, K_addr)) != NULL;
    if (has_addr && !exact_int(v, 0, INT64_MAX, &addr))
        goto decline;
    if (mem != MEM_DRAM) {
        if (mem == MEM_PSUM && item(loc, K_bank) != NULL)
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

/* Where a set's records go (the sink tuple _Loader._allocations makes per function). */
enum {
    SINK_STRINGS,       /* Tables._strings: str -> offset */
    SINK_SBUF,          /* Tables._sbuf: the string table's bytearray */
    SINK_SET_RECS,      /* t.recs["sets"] */
    SINK_LOC_RECS,      /* t.recs["locs"] */
    SINK_SETS,          /* the loader's per-set dicts (Module's) */
    SINK_LOCS,          /* ... and per-location dicts */
    SINK_FSETS,         /* the function's set names -> index */
    SINK_FLOCS,         /* ... and location names -> index */
    SINK_FUNC,          /* the function's index */
    SINK_FNAME,         /* ... and name */
    SINK_MODULE,        /* the module's index */
    SINK_ENTRY,         /* True: the entry function */
    SINK_N
};

/* Tables.string(s): the offset of s in the string table, added when new (s encodes). */
static PyObject *string_offset(PyObject *const *sink, PyObject *s)
{
    PyObject *off = PyDict_GetItemWithError(sink[SINK_STRINGS], s);
    Py_ssize_t n, len;
    const char *data;
    if (off != NULL || PyErr_Occurred())
        return Py_XNewRef(off);
    data = PyUnicode_AsUTF8AndSize(s, &n);
    if (data == NULL)
        return NULL;
    len = PyByteArray_GET_SIZE(sink[SINK_SBUF]);
    off = PyLong_FromSsize_t(len);
    if (off == NULL || PyByteArray_Resize(sink[SINK_SBUF], len + n + 1) < 0) {
        Py_XDECREF(off);
        return NULL;
    }
    memcpy(PyByteArray_AS_STRING(sink[SINK_SBUF]) + len, data, (size_t)n + 1);
    if (PyDict_SetItem(sink[SINK_STRINGS], s, off) < 0) {
        Py_DECREF(off);
        return NULL;
    }
    return off;
}

/* Per key list (by its address: write_set's four), a dict of those keys in that order
** (values None), made once: a record is a copy of it with the values replaced -- NumPy
** never sees the difference, and a copy of a small dict's key table is one memcpy, where
** inserting n keys into a new dict grew it (twice for 9 keys). */
static struct { const int *k; PyObject *d; } templates[4];
#define N_TEMPLATES ((int)(sizeof templates / sizeof templates[0]))

static PyObject *template_copy(int n, const int *k)
{
    int t;
    for (t = 0; t < N_TEMPLATES && templates[t].k != NULL; t++)
        if (templates[t].k == k)
            return PyDict_Copy(templates[t].d);
    {
        PyObject *d = PyDict_New();
        for (int i = 0; d != NULL && i < n; i++)
            if (PyDict_SetItem(d, keys[k[i]], Py_None) < 0)
                Py_CLEAR(d);
        if (d == NULL || t == N_TEMPLATES)   /* no slot left: this one alone */
            return d;
        templates[t].k = k;
        templates[t].d = d;             /* kept for the process */
        return PyDict_Copy(d);
    }
}

/* A dict of n (key, value) pairs, the values new references (consumed; NULL: an error
** made before, the dict not made). */
static PyObject *new_dict(int n, const int *k, PyObject **v)
{
    PyObject *d = NULL;
    int i;
    for (i = 0; i < n; i++)
        if (v[i] == NULL)
            goto done;
    d = template_copy(n, k);
    for (i = 0; d != NULL && i < n; i++)
        if (PyDict_SetItem(d, keys[k[i]], v[i]) < 0)
            Py_CLEAR(d);
done:
    for (i = 0; i < n; i++)
        Py_XDECREF(v[i]);
    return d;
}

static int append_new(PyObject *list, PyObject *v)
{
    int r;
    if (v == NULL)
        return -1;
    r = PyList_Append(list, v);
    Py_DECREF(v);
    return r;
}

/* The records passes.py _set and _location make of a set read (the same dicts, keys in
** their order): (set index, its record's io, a Shared DRAM set), NULL on an error. */
static PyObject *write_set(PyObject *const *sink, PyObject *name, PyObject *kind,
                           PyObject *kind_name, int io, PyObject *dtype, PyObject *dname,
                           PyObject *shape_l, int shared, PyObject *debug_name,
                           PyObject *out_locs)
{
    static const int rec_keys[] = {K_name, K_func, K_kind, K_dtype, K_shared, K_ndim,
                                   K_shape, K_loc0, K_io};
    static const int info_keys[] = {K_name, K_kind, K_dtype, K_shape, K_function, K_shared,
                                    K_locs, K_memory, K_io, K_module, K_debug_name};
    static const int lrec_keys[] = {K_name, K_set, K_memtype, K_placed, K_parts, K_bpp,
                                    K_base, K_addr};
    static const int linfo_keys[] = {K_name, K_set, K_memory, K_dims, K_placed, K_rows};
    PyObject *set_recs = sink[SINK_SET_RECS], *loc_recs = sink[SINK_LOC_RECS];
    PyObject *index = NULL, *rec = NULL, *names = NULL, *out = NULL, *memory = Py_None;
    Py_ssize_t nloc = PyList_GET_SIZE(out_locs);
    int rec_io = PyObject_IsTrue(sink[SINK_ENTRY]) == 1 ? io : 0;
    index = PyLong_FromSsize_t(PyList_GET_SIZE(set_recs));
    if (index == NULL || PyDict_SetItem(sink[SINK_FSETS], name, index) < 0)
        goto done;
    {
        PyObject *v[] = {string_offset(sink, name), Py_NewRef(sink[SINK_FUNC]),
                         Py_NewRef(kind), Py_NewRef(dtype), PyLong_FromLong(shared),
                         PyLong_FromSsize_t(PyList_GET_SIZE(shape_l)), Py_NewRef(shape_l),
                         PyLong_FromSsize_t(PyList_GET_SIZE(loc_recs)),
                         PyLong_FromLong(rec_io)};
        rec = new_dict(9, rec_keys, v);
    }
    if (rec == NULL || PyList_Append(set_recs, rec) < 0)
        goto done;
    names = PyList_New(0);
    if (names == NULL)
        goto done;
    if (nloc)
        memory = PyTuple_GET_ITEM(PyList_GET_ITEM(out_locs, 0), 2);
    for (Py_ssize_t j = 0; j < nloc; j++) {
        /* (name, memtype code, memory name, placed, dims, base, addr, rows) */
        PyObject *const *l = &PyTuple_GET_ITEM(PyList_GET_ITEM(out_locs, j), 0);
        PyObject *li = PyLong_FromSsize_t(PyList_GET_SIZE(loc_recs));
        int placed = PyObject_IsTrue(l[3]);
        int r = li == NULL ? -1 : PyDict_SetItem(sink[SINK_FLOCS], l[0], li);
        Py_XDECREF(li);
        if (r < 0)
            goto done;
        {
            PyObject *v[] = {string_offset(sink, l[0]), Py_NewRef(index), Py_NewRef(l[1]),
                             Py_NewRef(l[3]), Py_NewRef(PyList_GET_ITEM(l[4], 0)),
                             Py_NewRef(PyList_GET_ITEM(l[4], 1)), Py_NewRef(l[5]),
                             Py_NewRef(l[6])};
            if (append_new(loc_recs, new_dict(8, lrec_keys, v)) < 0)
                goto done;
        }
        if (PyList_Append(names, l[0]) < 0)
            goto done;
        {
            PyObject *v[] = {Py_NewRef(l[0]), Py_NewRef(index), Py_NewRef(l[2]),
                             PyList_AsTuple(l[4]), PyBool_FromLong(placed), Py_NewRef(l[7])};
            if (append_new(sink[SINK_LOCS], new_dict(6, linfo_keys, v)) < 0)
                goto done;
        }
    }
    {
        PyObject *nl = PyLong_FromSsize_t(nloc);
        int r = nl == NULL ? -1 : PyDict_SetItem(rec, keys[K_nloc], nl);
        Py_XDECREF(nl);
        if (r < 0)
            goto done;
    }
    {
        PyObject *v[] = {Py_NewRef(name), Py_NewRef(kind_name), Py_NewRef(dname),
                         PyList_AsTuple(shape_l), Py_NewRef(sink[SINK_FNAME]),
                         PyBool_FromLong(shared), Py_NewRef(names), Py_NewRef(memory),
                         PyLong_FromLong(rec_io), Py_NewRef(sink[SINK_MODULE]),
                         Py_NewRef(debug_name)};
        if (append_new(sink[SINK_SETS], new_dict(11, info_keys, v)) < 0)
            goto done;
    }
    out = Py_BuildValue("(Oii)", index, rec_io,
                        shared && memory != Py_None &&
                        PyUnicode_CompareWithASCIIString(memory, "DRAM") == 0);
done:
    Py_XDECREF(index);
    Py_XDECREF(rec);
    Py_XDECREF(names);
    return out;
}

/* _alloc_set(cfg, a, sink, arch): see the file's comment. The tuple is (name,
** kind code, kind name, io, dtype code, dtype name, shape, shared, debug name, [location
** tuples]); io is the kind's (1 input, 2 output, 0 other) whatever the function. */
static PyObject *alloc_set(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *const *cfg, *const *sink;
    PyObject *a, *fsets, *flocs, *v, *locs, *name;
    PyObject *kind = NULL, *kind_name = NULL, *dname = NULL, *dtype = NULL, *size_o = NULL;
    PyObject *space = NULL, *shape_l = NULL, *out_locs = NULL, *seen = NULL, *out = NULL;
    PyObject *debug_name = Py_None;
    int64_t shape[MAX_DIMS], arch[4], itemsize, row, max_rank, pdim;
    Py_ssize_t ns, nloc;
    int shared = 0, io = 0, r, internal;
    (void)self;
    if (nargs != 4 || !PyTuple_CheckExact(args[0]) || PyTuple_GET_SIZE(args[0]) != CFG_N ||
            !PyTuple_CheckExact(args[2]) || PyTuple_GET_SIZE(args[2]) != SINK_N) {
        PyErr_SetString(PyExc_TypeError, "_alloc_set(cfg, a, sink, arch_info)");
        return NULL;
    }
    cfg = &PyTuple_GET_ITEM(args[0], 0);
    a = args[1];
    sink = &PyTuple_GET_ITEM(args[2], 0);
    fsets = sink[SINK_FSETS];
    flocs = sink[SINK_FLOCS];
    if (!PyDict_CheckExact(sink[SINK_STRINGS]) || !PyByteArray_CheckExact(sink[SINK_SBUF]) ||
            !PyDict_CheckExact(fsets) || !PyDict_CheckExact(flocs)) {
        PyErr_SetString(PyExc_TypeError, "_alloc_set: a bad sink");
        return NULL;
    }
    for (int i = SINK_SET_RECS; i <= SINK_LOCS; i++)
        if (!PyList_CheckExact(sink[i])) {
            PyErr_SetString(PyExc_TypeError, "_alloc_set: a bad sink");
            return NULL;
        }
    if (!PyTuple_CheckExact(args[3]) || PyTuple_GET_SIZE(args[3]) != 5)
        Py_RETURN_NONE;
    for (int i = 0; i < 4; i++)
        if (!exact_int(PyTuple_GET_ITEM(args[3], i + 1), INT64_MIN, INT64_MAX, &arch[i]))
            Py_RETURN_NONE;
    if (!exact_int(cfg[CFG_MAX_RANK], 1, MAX_DIMS, &max_rank) || !PyDict_CheckExact(a) ||
            !str_keys(a))
        Py_RETURN_NONE;
    /* _allocations: a set by Skind, or by its memorylocations */
    v = item(a, K_Skind);
    locs = item(a, K_memorylocations);
    if (v != NULL ? !PyUnicode_CheckExact(v) ||
            PyUnicode_CompareWithASCIIString(v, "memory_location_set") != 0 : locs == NULL)
        Py_RETURN_NONE;
    if (locs != NULL && !PyList_CheckExact(locs))
        Py_RETURN_NONE;
    nloc = locs != NULL ? PyList_GET_SIZE(locs) : 0;
    name = item(a, K_name);                 /* _set_name: a name given, not derived */
    if (!bs_fl_valid_name(name))
        Py_RETURN_NONE;
    r = PyDict_Contains(fsets, name);
    if (r != 0)
        return r < 0 ? NULL : Py_NewRef(Py_None);
    v = item(a, K_kind);
    if (v == NULL) {
        kind = Py_NewRef(cfg[CFG_INTERNAL]);
    } else if (!PyUnicode_CheckExact(v) || (kind = lookup(cfg[CFG_TKIND], v)) == NULL) {
        goto decline;
    }
    kind_name = lookup(cfg[CFG_TKIND_NAME], kind);
    if (kind_name == NULL || !PyUnicode_CheckExact(kind_name))
        goto decline;
    v = item(a, K_dtype);
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
    ns = positive_ints(item(a, K_tensor_shape), shape, MAX_DIMS);   /* _set_shape: given */
    if (ns < 1 || ns > max_rank)
        goto decline;
    v = item(a, K_partition_dim);
    if (v != NULL && !exact_int(v, INT64_MIN, INT64_MAX, &pdim))
        goto decline;
    v = item(a, K_addr_space);
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
    v = item(a, K_debug);
    if (v != NULL && PyDict_Check(v)) {
        PyObject *tn;
        if (!PyDict_CheckExact(v) || !str_keys(v))
            goto decline;
        tn = item(v, K_tensor_name);
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
    out = write_set(sink, name, kind, kind_name, io, dtype, dname, shape_l, shared,
                    debug_name, out_locs);
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
     "_alloc_set($module, cfg, a, sink, arch_info, /)\n--\n\nA common tensor set read "
     "and its records made as the loader's _set makes them (birsim/_load/passes.py): "
     "(set index, io, Shared DRAM), or None: the Python path reads it."},
    {NULL, NULL, 0, NULL}
};

int bs_py_add_loadalloc(PyObject *module)
{
#define BS_ALLOC_KEY_MAKE(k) \
    if (keys[K_##k] == NULL && (keys[K_##k] = PyUnicode_InternFromString(#k)) == NULL) \
        return -1;
    BS_ALLOC_KEYS(BS_ALLOC_KEY_MAKE)
#undef BS_ALLOC_KEY_MAKE
    return PyModule_AddFunctions(module, loadalloc_methods);
}
