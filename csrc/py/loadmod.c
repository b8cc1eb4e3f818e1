/* py/loadmod.c -- what a load makes of its records for the Module, in C (issue 24
** "tiny"): _module_common (birsim/_load/module.py _common: every set as a Tensor, ...),
** _io_tensors (Module.io_tensor for a list of sets), _dict_versions, _loc_bytes (module.location_bytes
** from the location and set records) and _tables_bytes (module.tables_bytes). The Python
** functions of module.py are the specification (tests/load/test_load_modfast.py); a
** tiny program's load made ~20 Python calls of them. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "bind.h"

/* The keys and attributes read, as interned strings (made once, at import). */
#define BS_MOD_KEYS(X) X(name) X(kind) X(dtype) X(shape) X(memory) X(function) X(shared) \
    X(locs) X(debug_name) X(module) X(set) X(rows) X(index) X(placed) X(memtype) \
    X(parts) X(bpp) X(nbytes)
#define BS_MOD_KEY_ENUM(k) M_##k,
enum { BS_MOD_KEYS(BS_MOD_KEY_ENUM) M_N };
#undef BS_MOD_KEY_ENUM
static PyObject *mkeys[M_N];

/* d[key] as a new reference: d must be a dict holding it (KeyError as d[key] raises). */
static PyObject *need(PyObject *d, int key)
{
    PyObject *v;
    if (!PyDict_Check(d)) {
        PyErr_Format(PyExc_TypeError, "a loader record must be a dict, not %.100s",
                     Py_TYPE(d)->tp_name);
        return NULL;
    }
    v = PyDict_GetItemWithError(d, mkeys[key]);
    if (v == NULL && !PyErr_Occurred())
        PyErr_SetObject(PyExc_KeyError, mkeys[key]);
    return Py_XNewRef(v);
}

/* An instance of cls with its __dict__ set to names[i] -> v[i] in order (module.py
** _maker: object.__new__ and a dict update, a frozen dataclass's own __init__ bypassed);
** the values are new references, consumed (NULL: an error made before). */
static PyObject *new_record(PyObject *cls, PyObject *names, PyObject **v, Py_ssize_t n)
{
    PyObject *obj = NULL, *dict = NULL, *empty = NULL;
    Py_ssize_t i;
    for (i = 0; i < n; i++)
        if (v[i] == NULL)
            goto done;
    if (!PyType_Check(cls) || !PyTuple_CheckExact(names) || PyTuple_GET_SIZE(names) != n) {
        PyErr_SetString(PyExc_TypeError, "a record class and its field names");
        goto done;
    }
    empty = PyTuple_New(0);
    if (empty == NULL)
        goto done;
    obj = PyBaseObject_Type.tp_new((PyTypeObject *)cls, empty, NULL);
    if (obj == NULL)
        goto done;
    dict = PyObject_GenericGetDict(obj, NULL);
    if (dict == NULL) {
        Py_CLEAR(obj);
        goto done;
    }
    for (i = 0; i < n; i++)
        if (PyDict_SetItem(dict, PyTuple_GET_ITEM(names, i), v[i]) < 0) {
            Py_CLEAR(obj);
            break;
        }
done:
    for (i = 0; i < n; i++)
        Py_XDECREF(v[i]);
    Py_XDECREF(dict);
    Py_XDECREF(empty);
    return obj;
}

/* _module_common(sets, locs, Tensor, field names): module.py _common's tuple from the
** loader's per-set and per-location dicts. */
static PyObject *module_common(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *sets, *locs, *all = NULL, *dbg = NULL, *loc0 = NULL, *rows = NULL;
    PyObject *names = NULL, *by_module = NULL, *by_tuple = NULL, *out = NULL;
    Py_ssize_t ns, nl, i;
    (void)self;
    if (nargs != 4 || !PyList_CheckExact(args[0]) || !PyList_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "_module_common(sets: list, locs: list, cls, names)");
        return NULL;
    }
    sets = args[0];
    locs = args[1];
    ns = PyList_GET_SIZE(sets);
    all = PyTuple_New(ns);
    dbg = PyTuple_New(ns);
    by_module = PyDict_New();
    loc0 = PyDict_New();
    if (all == NULL || dbg == NULL || by_module == NULL || loc0 == NULL)
        goto done;
    for (i = 0; i < ns && i < PyList_GET_SIZE(sets); i++) {
        static const int tk[7] = {M_name, M_kind, M_dtype, M_shape, M_memory, M_function,
                                  M_shared};
        PyObject *s = PyList_GET_ITEM(sets, i), *t, *mod, *lst, *d, *v[9] = {NULL};
        int r, ok = 1, j;
        Py_INCREF(s);
        if (!PyDict_Check(s)) {
            PyErr_Format(PyExc_TypeError, "a loader record must be a dict, not %.100s",
                         Py_TYPE(s)->tp_name);
            ok = 0;
        }
        for (j = 0; j < 7 && ok; j++)
            ok = (v[j] = need(s, tk[j])) != NULL;
        if (ok) {
            PyObject *lt = need(s, M_locs);
            v[7] = lt == NULL ? NULL : PySequence_Tuple(lt);
            Py_XDECREF(lt);
            ok = v[7] != NULL && (v[8] = PyLong_FromSsize_t(i)) != NULL;
        }
        t = new_record(args[2], args[3], v, 9);     /* consumes v (NULLs: an error) */
        if (t == NULL) {
            Py_DECREF(s);
            goto done;
        }
        PyTuple_SET_ITEM(all, i, t);
        d = PyDict_Check(s) ? PyDict_GetItemWithError(s, mkeys[M_debug_name]) : NULL;
        if (d == NULL && PyErr_Occurred()) {
            Py_DECREF(s);
            goto done;
        }
        PyTuple_SET_ITEM(dbg, i, Py_NewRef(d != NULL ? d : Py_None));
        mod = need(s, M_module);
        Py_DECREF(s);
        if (mod == NULL)
            goto done;
        lst = PyDict_GetItemWithError(by_module, mod);
        if (lst == NULL && !PyErr_Occurred()) {
            lst = PyList_New(0);
            r = lst == NULL ? -1 : PyDict_SetItem(by_module, mod, lst);
            Py_XDECREF(lst);            /* the dict holds it */
        } else {
            r = lst == NULL ? -1 : 0;
        }
        Py_DECREF(mod);
        if (r < 0 || PyList_Append(lst, t) < 0)
            goto done;
    }
    if (i < ns) {
        PyErr_SetString(PyExc_RuntimeError, "_module_common: the set list changed");
        goto done;
    }
    nl = PyList_GET_SIZE(locs);
    rows = PyTuple_New(nl);
    names = PyTuple_New(nl);
    if (rows == NULL || names == NULL)
        goto done;
    for (i = 0; i < nl && i < PyList_GET_SIZE(locs); i++) {
        PyObject *loc = PyList_GET_ITEM(locs, i), *si, *li, *row, *nm;
        int r;
        Py_INCREF(loc);
        si = need(loc, M_set);
        row = need(loc, M_rows);
        nm = need(loc, M_name);
        Py_DECREF(loc);
        li = PyLong_FromSsize_t(i);
        r = si == NULL || row == NULL || nm == NULL || li == NULL ? -1 :
            PyDict_SetDefault(loc0, si, li) == NULL ? -1 : 0;
        Py_XDECREF(si);
        Py_XDECREF(li);
        if (r < 0) {
            Py_XDECREF(row);
            Py_XDECREF(nm);
            goto done;
        }
        PyTuple_SET_ITEM(rows, i, row);
        PyTuple_SET_ITEM(names, i, nm);
    }
    if (i < nl) {
        PyErr_SetString(PyExc_RuntimeError, "_module_common: the location list changed");
        goto done;
    }
    by_tuple = PyDict_New();
    if (by_tuple == NULL)
        goto done;
    {
        Py_ssize_t pos = 0;
        PyObject *k, *v;
        while (PyDict_Next(by_module, &pos, &k, &v)) {
            PyObject *tup = PyList_AsTuple(v);
            int r = tup == NULL ? -1 : PyDict_SetItem(by_tuple, k, tup);
            Py_XDECREF(tup);
            if (r < 0)
                goto done;
        }
    }
    out = PyTuple_Pack(6, all, dbg, loc0, rows, by_tuple, names);
done:
    Py_XDECREF(all);
    Py_XDECREF(dbg);
    Py_XDECREF(loc0);
    Py_XDECREF(rows);
    Py_XDECREF(names);
    Py_XDECREF(by_module);
    Py_XDECREF(by_tuple);
    return out;
}

/* _io_tensors(common, set indices, core, IOTensor, field names): a tuple of
** Module.io_tensor(s) for each s (its first location). */
static PyObject *io_tensors(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *common, *idx, *all, *dbg, *loc0, *rows, *names, *out = NULL;
    Py_ssize_t n, i;
    (void)self;
    if (nargs != 5 || !PyTuple_CheckExact(args[0]) || PyTuple_GET_SIZE(args[0]) != 6 ||
            !PyList_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError,
                        "_io_tensors(common: 6-tuple, indices: list, core, cls, names)");
        return NULL;
    }
    common = args[0];
    idx = args[1];
    all = PyTuple_GET_ITEM(common, 0);
    dbg = PyTuple_GET_ITEM(common, 1);
    loc0 = PyTuple_GET_ITEM(common, 2);
    rows = PyTuple_GET_ITEM(common, 3);
    names = PyTuple_GET_ITEM(common, 5);
    n = PyList_GET_SIZE(idx);
    out = PyTuple_New(n);
    if (out == NULL)
        return NULL;
    for (i = 0; i < n && i < PyList_GET_SIZE(idx); i++) {
        PyObject *s = PyList_GET_ITEM(idx, i), *t = NULL, *li = NULL, *row = NULL, *rec;
        Py_INCREF(s);
        t = PyObject_GetItem(all, s);
        li = t == NULL ? NULL : PyObject_GetItem(loc0, s);
        row = li == NULL ? NULL : PyObject_GetItem(rows, li);
        if (row != NULL && (!PyTuple_CheckExact(row) || PyTuple_GET_SIZE(row) != 2)) {
            PyErr_SetString(PyExc_ValueError, "a location's rows must be a pair");
            Py_CLEAR(row);
        }
        if (row == NULL) {
            Py_DECREF(s);
            Py_XDECREF(t);
            Py_XDECREF(li);
            goto fail;
        }
        {
            /* t.name, location name, t.dtype, t.shape, t.index, li, rows, rowbytes, core,
            ** debug name: each read only while no error is set */
            PyObject *v[10] = {NULL};
            v[0] = PyObject_GetAttr(t, mkeys[M_name]);
            v[1] = v[0] == NULL ? NULL : PyObject_GetItem(names, li);
            v[2] = v[1] == NULL ? NULL : PyObject_GetAttr(t, mkeys[M_dtype]);
            v[3] = v[2] == NULL ? NULL : PyObject_GetAttr(t, mkeys[M_shape]);
            v[4] = v[3] == NULL ? NULL : PyObject_GetAttr(t, mkeys[M_index]);
            v[5] = Py_NewRef(li);
            v[6] = Py_NewRef(PyTuple_GET_ITEM(row, 0));
            v[7] = Py_NewRef(PyTuple_GET_ITEM(row, 1));
            v[8] = Py_NewRef(args[2]);
            v[9] = v[4] == NULL ? NULL : PyObject_GetItem(dbg, s);
            rec = new_record(args[3], args[4], v, 10);
        }
        Py_DECREF(s);
        Py_DECREF(t);
        Py_DECREF(li);
        Py_DECREF(row);
        if (rec == NULL)
            goto fail;
        PyTuple_SET_ITEM(out, i, rec);
    }
    if (i < n) {
        PyErr_SetString(PyExc_RuntimeError, "_io_tensors: the index list changed");
        goto fail;
    }
    return out;
fail:
    Py_DECREF(out);
    return NULL;
}

/* An exact int as a long long in *out: 1, 0 when it is not one or does not fit. */
static int small_int(PyObject *v, long long *out)
{
    int overflow = 0;
    if (!PyLong_CheckExact(v))
        return 0;
    *out = PyLong_AsLongLongAndOverflow(v, &overflow);
    return !overflow && !(*out == -1 && PyErr_Occurred());
}

/* _loc_bytes(location records, set records, dram): module.location_bytes of the records
** (placed, memtype, parts, bpp, set) and the sets' shared flags as (per-core, shared), or
** None when a value is not a small exact int (the Python function reads it). */
static PyObject *loc_bytes(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *locs, *sets;
    long long dram, per_core = 0, shared = 0;
    (void)self;
    if (nargs != 3 || !PyList_CheckExact(args[0]) || !PyList_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "_loc_bytes(locs: list, sets: list, dram)");
        return NULL;
    }
    locs = args[0];
    sets = args[1];
    if (!small_int(args[2], &dram))
        Py_RETURN_NONE;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(locs); i++) {
        PyObject *r = PyList_GET_ITEM(locs, i), *v[5], *srec, *sh;
        static const int k[5] = {M_placed, M_memtype, M_parts, M_bpp, M_set};
        long long x[5], size;
        if (!PyDict_CheckExact(r))
            Py_RETURN_NONE;
        for (int j = 0; j < 5; j++) {
            v[j] = PyDict_GetItemWithError(r, mkeys[k[j]]);    /* borrowed */
            if (v[j] == NULL) {
                if (PyErr_Occurred())
                    return NULL;
                Py_RETURN_NONE;
            }
            if (!small_int(v[j], &x[j])) {
                if (PyErr_Occurred())
                    return NULL;
                Py_RETURN_NONE;
            }
        }
        if (x[0] && x[1] != dram)
            continue;                   /* inside SBUF/PSUM */
        if (__builtin_mul_overflow(x[2], x[3], &size) || __builtin_mul_overflow(size, 2, &size)
                || x[4] < 0 || x[4] >= PyList_GET_SIZE(sets))
            Py_RETURN_NONE;
        srec = PyList_GET_ITEM(sets, x[4]);
        if (!PyDict_CheckExact(srec))
            Py_RETURN_NONE;
        sh = PyDict_GetItemWithError(srec, mkeys[M_shared]);
        if (sh == NULL) {
            if (PyErr_Occurred())
                return NULL;
            Py_RETURN_NONE;
        }
        if (!PyLong_CheckExact(sh) && !PyBool_Check(sh))
            Py_RETURN_NONE;
        if (PyObject_IsTrue(sh) && x[1] == dram) {
            if (__builtin_add_overflow(shared, size, &shared))
                Py_RETURN_NONE;
        } else if (__builtin_add_overflow(per_core, size, &per_core)) {
            Py_RETURN_NONE;
        }
    }
    return Py_BuildValue("(LL)", per_core, shared);
}

/* _tables_bytes(tables, ndarray): module.tables_bytes (an array's nbytes, else len). */
static PyObject *tables_bytes(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *sum, *k, *v;
    Py_ssize_t pos = 0;
    (void)self;
    if (nargs != 2 || !PyDict_Check(args[0]) || !PyType_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "_tables_bytes(tables: dict, ndarray)");
        return NULL;
    }
    sum = PyLong_FromLong(0);
    while (sum != NULL && PyDict_Next(args[0], &pos, &k, &v)) {
        PyObject *n;
        Py_INCREF(v);
        if (PyObject_TypeCheck(v, (PyTypeObject *)args[1])) {
            n = PyObject_GetAttr(v, mkeys[M_nbytes]);
        } else {
            Py_ssize_t len = PyObject_Length(v);
            n = len < 0 ? NULL : PyLong_FromSsize_t(len);
        }
        Py_DECREF(v);
        if (n == NULL) {
            Py_CLEAR(sum);
            break;
        }
        Py_SETREF(sum, PyNumber_Add(sum, n));
        Py_DECREF(n);
    }
    return sum;
}

/* _dict_versions(dicts): each exact dict's version tag (PEP 509: a new one at every
** change, unique in the process) as a tuple of ints, for birsim/_load/fastload.py
** _static_current; None where the tag is not available (Python 3.12 deprecates it: the
** caller compares the dicts as before). */
static PyObject *dict_versions(PyObject *self, PyObject *arg)
{
    (void)self;
    if (!PyTuple_CheckExact(arg)) {
        PyErr_SetString(PyExc_TypeError, "_dict_versions(dicts: tuple)");
        return NULL;
    }
#if PY_VERSION_HEX < 0x030C0000
    {
        Py_ssize_t n = PyTuple_GET_SIZE(arg);
        PyObject *out = PyTuple_New(n);
        for (Py_ssize_t i = 0; out != NULL && i < n; i++) {
            PyObject *d = PyTuple_GET_ITEM(arg, i), *v;
            if (!PyDict_CheckExact(d)) {
                Py_DECREF(out);
                Py_RETURN_NONE;
            }
            v = PyLong_FromUnsignedLongLong(((PyDictObject *)d)->ma_version_tag);
            if (v == NULL)
                Py_CLEAR(out);
            else
                PyTuple_SET_ITEM(out, i, v);
        }
        return out;
    }
#else
    Py_RETURN_NONE;
#endif
}

static PyMethodDef loadmod_methods[] = {
    {"_dict_versions", dict_versions, METH_O,
     "_dict_versions($module, dicts, /)\n--\n\nThe version tag of each dict (a tuple), or "
     "None where Python does not give it."},
    {"_module_common", (PyCFunction)(void (*)(void))module_common, METH_FASTCALL,
     "_module_common($module, sets, locs, cls, names, /)\n--\n\nbirsim/_load/module.py "
     "_common's tuple from the loader's per-set and per-location dicts."},
    {"_io_tensors", (PyCFunction)(void (*)(void))io_tensors, METH_FASTCALL,
     "_io_tensors($module, common, indices, core, cls, names, /)\n--\n\n"
     "Module.io_tensor of each set index, as a tuple."},
    {"_loc_bytes", (PyCFunction)(void (*)(void))loc_bytes, METH_FASTCALL,
     "_loc_bytes($module, locs, sets, dram, /)\n--\n\nmodule.location_bytes of the "
     "location and set records, or None (the Python function reads them)."},
    {"_tables_bytes", (PyCFunction)(void (*)(void))tables_bytes, METH_FASTCALL,
     "_tables_bytes($module, tables, ndarray, /)\n--\n\nmodule.tables_bytes."},
    {NULL, NULL, 0, NULL}
};

int bs_py_add_loadmod(PyObject *module)
{
#define BS_MOD_KEY_MAKE(k) \
    if (mkeys[M_##k] == NULL && (mkeys[M_##k] = PyUnicode_InternFromString(#k)) == NULL) \
        return -1;
    BS_MOD_KEYS(BS_MOD_KEY_MAKE)
#undef BS_MOD_KEY_MAKE
    return PyModule_AddFunctions(module, loadmod_methods);
}
