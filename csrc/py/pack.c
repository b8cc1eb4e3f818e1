/* py/pack.c -- the loader's dict records packed as table rows in C: _pack_records (one
** table), _pack_spec (a table's field spec parsed once) and _pack_tables (every
** dict-record table of a load in one call). birsim/_load/tables.py calls them; NumPy's
** conversion of the row tuples stays the specification (tests/load/test_load_pack.py). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>
#include "bind.h"
/* NumPy's C API, this file only (its own static table, set by bs_py_add_pack): a table's
** array made as np.frombuffer makes it, without a Python call per table */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wundef"            /* NumPy's header tests SWIG_VERSION */
#include <numpy/arrayobject.h>
#pragma GCC diagnostic pop

/* {=== Packing records ===} */

typedef struct pack_field {
    PyObject *name;            /* borrowed from the spec */
    Py_ssize_t offset, count;
    char type;                 /* BS_PY_I32, _I64, _F64 (the layouts' type) */
    PyObject *dflt;            /* borrowed: the value of a missing field */
} pack_field;

static Py_ssize_t pack_size(char type)
{
    return type == BS_PY_I32 ? 4 : 8;
}

/* One record (a dict) into rec; 1 packed, 0 hand the table back, -1 an error. A field
** the record leaves out takes its default; an array field takes a list or tuple of at
** most `count` values, padded with the default (None: all default), as
** birsim/_load/tables.py's row functions give NumPy. */
static int pack_record(uint8_t *rec, const pack_field *fs, Py_ssize_t nf, PyObject *r)
{
    if (!PyDict_CheckExact(r))
        return 0;
    for (Py_ssize_t i = 0; i < nf; i++) {
        const pack_field *f = &fs[i];
        Py_ssize_t w = pack_size(f->type);
        PyObject *v = PyDict_GetItemWithError(r, f->name);     /* borrowed */
        if (v == NULL && PyErr_Occurred())
            return -1;
        if (f->count == 1) {
            int ok = bs_py_put_value(f->type, v != NULL ? v : f->dflt, rec + f->offset);
            if (ok <= 0)
                return ok;
            continue;
        }
        Py_ssize_t n = 0;
        PyObject **items = NULL;
        if (v != NULL && v != Py_None) {
            if (!PyList_CheckExact(v) && !PyTuple_CheckExact(v))
                return 0;
            n = PySequence_Fast_GET_SIZE(v);
            items = PySequence_Fast_ITEMS(v);
            if (n > f->count)
                return 0;
        }
        for (Py_ssize_t k = 0; k < f->count; k++) {
            int ok = bs_py_put_value(f->type, k < n ? items[k] : f->dflt, rec + f->offset + k * w);
            if (ok <= 0)
                return ok;
        }
    }
    return 1;
}

/* The spec (a tuple of (name, offset, type, count, default) in the layout's order, from
** `layouts` and the loader's defaults) as nf fields in *out (PyMem_Calloc'd; names and
** defaults borrowed from the spec); 0, or -1 with an exception set. */
static int parse_spec(PyObject *spec, Py_ssize_t itemsize, pack_field **out, Py_ssize_t *nfp)
{
    Py_ssize_t nf = PyTuple_GET_SIZE(spec);
    pack_field *fs = PyMem_Calloc((size_t)(nf ? nf : 1), sizeof *fs);
    if (fs == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < nf; i++) {
        PyObject *row = PyTuple_GET_ITEM(spec, i);
        const char *type;
        if (!PyTuple_CheckExact(row) || PyTuple_GET_SIZE(row) != 5 ||
                !PyUnicode_Check(PyTuple_GET_ITEM(row, 0)) ||
                (type = PyUnicode_AsUTF8(PyTuple_GET_ITEM(row, 2))) == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "_pack_records: a bad spec row");
            goto fail;
        }
        fs[i].name = PyTuple_GET_ITEM(row, 0);
        fs[i].offset = PyLong_AsSsize_t(PyTuple_GET_ITEM(row, 1));
        fs[i].count = PyLong_AsSsize_t(PyTuple_GET_ITEM(row, 3));
        fs[i].dflt = PyTuple_GET_ITEM(row, 4);
        fs[i].type = strcmp(type, "I32") == 0 ? BS_PY_I32 : strcmp(type, "I64") == 0 ? BS_PY_I64 :
                     strcmp(type, "F64") == 0 ? BS_PY_F64 : 0;
        if (PyErr_Occurred())
            goto fail;
        if (fs[i].type == 0 || fs[i].offset < 0 || fs[i].count < 1 ||
                fs[i].count > (itemsize - fs[i].offset) / pack_size(fs[i].type)) {
            PyErr_SetString(PyExc_ValueError, "_pack_records: a spec row outside the record");
            goto fail;
        }
    }
    *out = fs;
    *nfp = nf;
    return 0;
fail:
    PyMem_Free(fs);
    return -1;
}

/* The list of dict records packed by the parsed fields: a zeroed bytearray of
** len(recs) * itemsize bytes, or None (a value NumPy's conversion must judge). */
static PyObject *pack_list(PyObject *recs, const pack_field *fs, Py_ssize_t nf,
                           Py_ssize_t itemsize)
{
    Py_ssize_t n = PyList_GET_SIZE(recs);
    if (n > PY_SSIZE_T_MAX / itemsize) {
        PyErr_SetString(PyExc_ValueError, "_pack_records: bad itemsize");
        return NULL;
    }
    PyObject *out = PyByteArray_FromStringAndSize(NULL, n * itemsize);
    if (out == NULL)
        return NULL;
    uint8_t *buf = (uint8_t *)PyByteArray_AS_STRING(out);
    if (n)
        memset(buf, 0, (size_t)(n * itemsize));
    for (Py_ssize_t k = 0; k < n; k++) {
        int ok = pack_record(buf + k * itemsize, fs, nf, PyList_GET_ITEM(recs, k));
        if (ok < 0) {
            Py_DECREF(out);
            return NULL;
        }
        if (ok == 0) {
            Py_DECREF(out);
            Py_RETURN_NONE;
        }
    }
    return out;
}

/* _pack_records(recs, spec, itemsize): the list of dict records as a zeroed bytearray of
** len(recs) * itemsize bytes, each field at its offset (spec: parse_spec's tuple, or a
** _pack_spec of it), or None when a value is not an exact int/float that fits its field:
** NumPy's conversion then judges the table (and names a bad value). */
/* The itemsize argument of function fn: a positive size, or -1 with an error set. */
static Py_ssize_t arg_itemsize(PyObject *o, const char *fn)
{
    Py_ssize_t itemsize = PyLong_AsSsize_t(o);
    if (itemsize == -1 && PyErr_Occurred())
        return -1;
    if (itemsize <= 0) {
        PyErr_Format(PyExc_ValueError, "%s: bad itemsize", fn);
        return -1;
    }
    return itemsize;
}

static PyObject *pack_records(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *out;
    pack_field *fs = NULL;
    Py_ssize_t itemsize, nf;
    (void)self;
    if (nargs != 3 || !PyList_CheckExact(args[0]) || !PyTuple_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "_pack_records(recs: list, spec: tuple, itemsize)");
        return NULL;
    }
    itemsize = arg_itemsize(args[2], "_pack_records");
    if (itemsize < 0)
        return NULL;
    if (parse_spec(args[1], itemsize, &fs, &nf) < 0)
        return NULL;
    out = pack_list(args[0], fs, nf, itemsize);
    PyMem_Free(fs);
    return out;
}

/* {=== A spec parsed once ===} */

/* _pack_spec(spec, itemsize): the spec parsed once (a plan's, birsim/_load/tables.py
** _table_plan), for _pack_tables: each load's tables then skip the parse. Keeps the spec
** (the names and defaults the fields borrow). */
typedef struct {
    PyObject_HEAD
    PyObject *spec;
    pack_field *fs;
    Py_ssize_t nf, itemsize;
} PackSpec;

static void packspec_dealloc(PyObject *o)
{
    PackSpec *p = (PackSpec *)o;
    PyMem_Free(p->fs);
    Py_XDECREF(p->spec);
    Py_TYPE(o)->tp_free(o);
}

static PyTypeObject PackSpec_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "birsim._birsim._PackSpec",
    .tp_basicsize = sizeof(PackSpec),
    .tp_dealloc = packspec_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A _pack_records spec parsed once (_pack_spec).",
};

static PyObject *pack_spec(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    PackSpec *p;
    Py_ssize_t itemsize;
    (void)self;
    if (nargs != 2 || !PyTuple_CheckExact(args[0])) {
        PyErr_SetString(PyExc_TypeError, "_pack_spec(spec: tuple, itemsize)");
        return NULL;
    }
    itemsize = arg_itemsize(args[1], "_pack_spec");
    if (itemsize < 0)
        return NULL;
    p = PyObject_New(PackSpec, &PackSpec_Type);
    if (p == NULL)
        return NULL;
    p->spec = NULL;
    p->fs = NULL;
    p->nf = 0;
    p->itemsize = itemsize;
    if (parse_spec(args[0], itemsize, &p->fs, &p->nf) < 0) {
        Py_DECREF(p);
        return NULL;
    }
    p->spec = Py_NewRef(args[0]);
    return (PyObject *)p;
}

/* np.frombuffer(data, dtype) for a dtype object and a buffer of whole rows, as NumPy
** makes it (PyArray_FromBuffer: data itself its base when its buffer needs no release
** -- bytes, the walker's Records --, else a memoryview of data, which keeps the buffer
** exported while the array lives; the buffer's writability),
** without the Python call; anything else (a memoryview given, and every error) through
** frombuffer itself. */
static PyObject *wrap_rows(PyObject *frombuffer, PyObject *data, PyObject *dtype)
{
    PyObject *arr, *base;
    npy_intp n;
    Py_ssize_t size, len;
    char *ptr;
    int readonly;
    if (!PyArray_DescrCheck(dtype) || (size = (Py_ssize_t)PyDataType_ELSIZE(
            (PyArray_Descr *)dtype)) <= 0 || !PyObject_CheckBuffer(data) ||
            PyMemoryView_Check(data))
        goto numpy;
    if (Py_TYPE(data)->tp_as_buffer->bf_releasebuffer == NULL) {
        Py_buffer tmp;                  /* nothing to release: data itself the base */
        if (PyObject_GetBuffer(data, &tmp, PyBUF_SIMPLE) < 0)
            return NULL;
        ptr = tmp.buf;
        len = tmp.len;
        readonly = tmp.readonly;
        PyBuffer_Release(&tmp);
        base = Py_NewRef(data);
    } else {
        const Py_buffer *view;
        base = PyMemoryView_FromObject(data);
        if (base == NULL)
            return NULL;
        view = PyMemoryView_GET_BUFFER(base);
        if (view->ndim > 1) {
            Py_DECREF(base);
            goto numpy;
        }
        ptr = view->buf;
        len = view->len;
        readonly = view->readonly;
    }
    if (len % size != 0) {
        Py_DECREF(base);
        goto numpy;
    }
    n = (npy_intp)(len / size);
    Py_INCREF(dtype);                   /* NewFromDescr steals it */
    arr = PyArray_NewFromDescr(&PyArray_Type, (PyArray_Descr *)dtype, 1, &n, NULL, ptr,
                               NPY_ARRAY_CARRAY, NULL);
    if (arr == NULL) {
        Py_DECREF(base);
        return NULL;
    }
    if (readonly)
        PyArray_CLEARFLAGS((PyArrayObject *)arr, NPY_ARRAY_WRITEABLE);
    if (PyArray_SetBaseObject((PyArrayObject *)arr, base) < 0) {     /* steals base */
        Py_DECREF(arr);
        return NULL;
    }
    return arr;
numpy:
    {
        PyObject *fargs[2] = {data, dtype};
        return PyObject_Vectorcall(frombuffer, fargs, 2, NULL);
    }
}

/* The walker's packed tables (birsim/_load/tables.py Tables._packed_arrays): for each
** (table, index) of rows, fill(state, index, recs[table]) gives (data, rest); data
** becomes out[table] (dtypes[table]), and (table, rest) goes to fills when rest is not
** empty (the dict records NumPy converts there). 0, or -1 with an error set. */
static int packed_tables(PyObject *recs, PyObject *dtypes, PyObject *frombuffer, PyObject *out,
                         PyObject *state, PyObject *fill, PyObject *rows, PyObject *fills)
{
    if (!PyTuple_CheckExact(rows) || !PyList_CheckExact(fills)) {
        PyErr_SetString(PyExc_TypeError, "_pack_tables: the packed rows and fills");
        return -1;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(rows); i++) {
        PyObject *row = PyTuple_GET_ITEM(rows, i), *table, *lst, *got, *dtype, *arr;
        int r;
        if (!PyTuple_CheckExact(row) || PyTuple_GET_SIZE(row) != 2) {
            PyErr_SetString(PyExc_ValueError, "_pack_tables: a bad packed row");
            return -1;
        }
        table = PyTuple_GET_ITEM(row, 0);
        lst = PyObject_GetItem(recs, table);
        if (lst == NULL)
            return -1;
        {
            PyObject *fargs[3] = {state, PyTuple_GET_ITEM(row, 1), lst};
            got = PyObject_Vectorcall(fill, fargs, 3, NULL);
        }
        Py_DECREF(lst);
        if (got == NULL)
            return -1;
        if (!PyTuple_CheckExact(got) || PyTuple_GET_SIZE(got) != 2) {
            Py_DECREF(got);
            PyErr_SetString(PyExc_ValueError, "_pack_tables: fill gives (data, rest)");
            return -1;
        }
        dtype = PyObject_GetItem(dtypes, table);
        arr = dtype == NULL ? NULL : wrap_rows(frombuffer, PyTuple_GET_ITEM(got, 0), dtype);
        Py_XDECREF(dtype);
        r = arr == NULL ? -1 : PyDict_SetItem(out, table, arr);
        Py_XDECREF(arr);
        if (r == 0) {
            PyObject *rest = PyTuple_GET_ITEM(got, 1);
            int nonempty = PyObject_IsTrue(rest);
            if (nonempty < 0) {
                r = -1;
            } else if (nonempty) {
                PyObject *pair = PyTuple_Pack(2, table, rest);
                r = pair == NULL ? -1 : PyList_Append(fills, pair);
                Py_XDECREF(pair);
            }
        }
        Py_DECREF(got);
        if (r < 0)
            return -1;
    }
    return 0;
}

/* _pack_tables(recs, plan, dtypes, frombuffer, out[, state, fill, rows, fills]):
** Tables.arrays' loops over the tables (birsim/_load/tables.py) in one call. With the
** walker's state: its packed tables first (packed_tables). Then for each plan row (table,
** dtype, spec, itemsize, empty) not already in out: an empty record list gives empty[:], a
** list _pack_records packs gives frombuffer(its bytes, dtype), any other table is set to
** None in out (its place in the order kept) and listed for the Python loop. Returns that
** list, or None when a dtype of the plan is no longer the catalog's (the plan is made
** again). */
static PyObject *pack_tables(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *recs, *plan, *dtypes, *frombuffer, *out, *left = NULL, *all = NULL;
    if ((nargs != 5 && nargs != 9) || !PyDict_Check(args[0]) || !PyTuple_CheckExact(args[1]) ||
            !PyDict_Check(args[2]) || !PyDict_CheckExact(args[4])) {
        PyErr_SetString(PyExc_TypeError,
                        "_pack_tables(recs: dict, plan: tuple, dtypes: dict, frombuffer, out: dict"
                        "[, state, fill, rows: tuple, fills: list])");
        return NULL;
    }
    recs = args[0];
    plan = args[1];
    dtypes = args[2];
    frombuffer = args[3];
    out = args[4];
    if (nargs == 9 && packed_tables(recs, dtypes, frombuffer, out, args[5], args[6], args[7],
                                    args[8]) < 0)
        return NULL;
    left = PyList_New(0);
    all = PySlice_New(NULL, NULL, NULL);
    if (left == NULL || all == NULL)
        goto fail;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(plan); i++) {
        PyObject *row = PyTuple_GET_ITEM(plan, i), *table, *dtype, *cur, *lst, *arr;
        int r;
        if (!PyTuple_CheckExact(row) || PyTuple_GET_SIZE(row) != 5) {
            PyErr_SetString(PyExc_ValueError, "_pack_tables: a bad plan row");
            goto fail;
        }
        table = PyTuple_GET_ITEM(row, 0);
        dtype = PyTuple_GET_ITEM(row, 1);
        r = PyDict_Contains(out, table);
        if (r < 0)
            goto fail;
        if (r)
            continue;
        cur = PyDict_GetItemWithError(dtypes, table);
        if (cur == NULL && PyErr_Occurred())
            goto fail;
        if (cur != dtype) {                 /* a dtype replaced in place */
            Py_DECREF(left);
            Py_DECREF(all);
            Py_RETURN_NONE;
        }
        lst = PyObject_GetItem(recs, table);
        if (lst == NULL)
            goto fail;
        if (PyList_CheckExact(lst) && PyList_GET_SIZE(lst) == 0) {
            arr = PyObject_GetItem(PyTuple_GET_ITEM(row, 4), all);
        } else if (PyList_CheckExact(lst)) {
            PyObject *spec = PyTuple_GET_ITEM(row, 2), *data;
            if (Py_IS_TYPE(spec, &PackSpec_Type)) {
                const PackSpec *ps = (const PackSpec *)spec;
                data = pack_list(lst, ps->fs, ps->nf, ps->itemsize);
            } else {
                PyObject *pargs[3] = {lst, spec, PyTuple_GET_ITEM(row, 3)};
                data = pack_records(self, pargs, 3);
            }
            if (data == NULL || data == Py_None) {
                arr = data;
            } else {
                arr = wrap_rows(frombuffer, data, dtype);
                Py_DECREF(data);
            }
        } else {
            arr = Py_NewRef(Py_None);
        }
        Py_DECREF(lst);
        if (arr == NULL)
            goto fail;
        r = PyDict_SetItem(out, table, arr);
        if (r == 0 && arr == Py_None)
            r = PyList_Append(left, table);
        Py_DECREF(arr);
        if (r < 0)
            goto fail;
    }
    Py_DECREF(all);
    return left;
fail:
    Py_XDECREF(left);
    Py_XDECREF(all);
    return NULL;
}

/* _wrap_rows(data, dtype): np.frombuffer(data, dtype) as _pack_tables makes it (a test
** hook: tests/load/test_load_pack.py compares the two). */
static PyObject *wrap_rows_py(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *np = NULL, *fb = NULL, *out = NULL;
    (void)self;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "_wrap_rows(data, dtype)");
        return NULL;
    }
    np = PyImport_ImportModule("numpy");
    fb = np == NULL ? NULL : PyObject_GetAttrString(np, "frombuffer");
    if (fb != NULL)
        out = wrap_rows(fb, args[0], args[1]);
    Py_XDECREF(np);
    Py_XDECREF(fb);
    return out;
}

static PyMethodDef pack_methods[] = {
    {"_pack_records", (PyCFunction)(void (*)(void))pack_records, METH_FASTCALL,
     "_pack_records($module, recs, spec, itemsize, /)\n--\n\nThe dict records as one "
     "zeroed bytearray of packed rows (spec: (name, offset, type, count, default) per "
     "field), or None when a value is not an exact int or float that fits its field."},
    {"_pack_spec", (PyCFunction)(void (*)(void))pack_spec, METH_FASTCALL,
     "_pack_spec($module, spec, itemsize, /)\n--\n\nA _pack_records spec parsed once, for "
     "_pack_tables' plan rows."},
    {"_pack_tables", (PyCFunction)(void (*)(void))pack_tables, METH_FASTCALL,
     "_pack_tables($module, recs, plan, dtypes, frombuffer, out, state=None, fill=None, "
     "rows=None, fills=None, /)\n--\n\nThe loader's tables packed into out (birsim/_load/"
     "tables.py Tables.arrays): the walker's first when given; returns the tables left to "
     "NumPy's conversion, or None when the plan is stale."},
    {"_wrap_rows", (PyCFunction)(void (*)(void))wrap_rows_py, METH_FASTCALL,
     "_wrap_rows($module, data, dtype, /)\n--\n\nnp.frombuffer(data, dtype) as _pack_tables "
     "makes it (tests)."},
    {NULL, NULL, 0, NULL}
};

int bs_py_add_pack(PyObject *module)
{
    if (_import_array() < 0)
        return -1;
    if (PyType_Ready(&PackSpec_Type) < 0)
        return -1;
    return PyModule_AddFunctions(module, pack_methods);
}
