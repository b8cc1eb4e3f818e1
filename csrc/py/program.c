/* py/program.c -- the Program heap type: a verified bs_program over the loader's table
** arrays (it holds their buffers: bs_program_parts.borrow). The Sim type is py/objects.c. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "bind.h"

enum { BS_PY_NVIEWS = 16 };
#define BS_PY_ONE(name, type, fields) + 1
_Static_assert(0 BS_TABLES(BS_PY_ONE) + 4 <= BS_PY_NVIEWS, "a view per table and pool");
#undef BS_PY_ONE

typedef struct {
    PyObject_HEAD
    bs_program *prog;
    PyObject   *module;
    Py_buffer   views[BS_PY_NVIEWS];  /* the tables prog points at (bs_program_parts.borrow) */
    int         nviews;
} ProgramObject;

/* {=== Program ===} */

static int get_bytes(PyObject *tables, PyObject *key, Py_buffer *view, Py_ssize_t itemsize)
{
    PyObject *o = PyDict_GetItemWithError(tables, key);
    if (o == NULL) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_KeyError, "tables is missing %U", key);
        return -1;
    }
    if (PyObject_GetBuffer(o, view, PyBUF_SIMPLE) < 0)
        return -1;
    if (itemsize > 0 && view->len % itemsize != 0) {
        PyErr_Format(PyExc_ValueError, "table %U: %zd bytes is not a multiple of %zd",
                     key, view->len, itemsize);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* The names Program_new reads from its tables dict, in its order (bs_modstate.table_keys:
** made once, interned, so each lookup is a hash compare rather than a new str). */
#define BS_PY_KEY(name, type, fields) #name,
static const char *const table_names[] = { BS_TABLES(BS_PY_KEY) "exprs", "ipool", "fpool",
                                           "strings" };
#undef BS_PY_KEY
enum { BS_PY_NKEYS = (int)(sizeof table_names / sizeof table_names[0]) };

static PyObject *Program_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"tables", NULL};
    PyObject *tables, *keys;
    ProgramObject *self = NULL;
    bs_program_parts parts;
    Py_buffer *views;
    bs_error err;
    bs_status st;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!", kwlist, &PyDict_Type, &tables))
        return NULL;
    self = (ProgramObject *)type->tp_alloc(type, 0);   /* zeroed: nviews 0, prog NULL */
    if (self == NULL)
        return NULL;
    self->module = PyType_GetModule(type);
    Py_XINCREF(self->module);
    keys = ((bs_modstate *)PyModule_GetState(self->module))->table_keys;
    views = self->views;                 /* held until dealloc: prog points at them */
    memset(&parts, 0, sizeof parts);
#define BS_PART(name, type, fields) \
    if (get_bytes(tables, PyTuple_GET_ITEM(keys, self->nviews), &views[self->nviews], \
                  sizeof(type)) < 0) goto error; \
    parts.name = views[self->nviews].buf; \
    parts.n_##name = views[self->nviews].len / (Py_ssize_t)sizeof(type); \
    self->nviews++;
    BS_TABLES(BS_PART)
#undef BS_PART
#define BS_POOL(field, size) \
    if (get_bytes(tables, PyTuple_GET_ITEM(keys, self->nviews), &views[self->nviews], size) < 0) \
        goto error; \
    parts.field = views[self->nviews].buf; \
    parts.n_##field = views[self->nviews].len / (size ? size : 1); \
    self->nviews++;
    BS_POOL(exprs, 8)
    BS_POOL(ipool, 8)
    BS_POOL(fpool, 8)
    BS_POOL(strings, 0)
#undef BS_POOL
    bs_error_clear(&err);
    /* The program points at the tables' buffers instead of copying them (when aligned):
    ** the loader's arrays are not written once loaded. */
    parts.borrow = 1;
    st = bs_program_new(&self->prog, &parts, &err);
    if (st != BS_OK) {
        bs_py_raise(self->module, &err);
        goto error;
    }
    return (PyObject *)self;
error:
    Py_DECREF(self);                     /* releases the views taken so far */
    return NULL;
}

static void Program_dealloc(ProgramObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    bs_program_free(self->prog);
    for (int i = 0; i < self->nviews; i++)
        PyBuffer_Release(&self->views[i]);
    Py_XDECREF(self->module);
    tp->tp_free((PyObject *)self);
    Py_DECREF(tp);
}

static PyType_Slot Program_slots[] = {
    {Py_tp_new, Program_new},
    {Py_tp_dealloc, Program_dealloc},
    {Py_tp_doc, "Program(tables)\n--\n\nA verified program built from the loader's tables."},
    {0, NULL}
};

PyType_Spec bs_py_program_spec = {
    .name = "birsim._birsim.Program",
    .basicsize = sizeof(ProgramObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = Program_slots,
};

bs_program *bs_py_program(PyObject *program)
{
    return ((ProgramObject *)program)->prog;
}

int bs_py_table_keys(bs_modstate *ms)
{
    ms->table_keys = PyTuple_New(BS_PY_NKEYS);
    if (ms->table_keys == NULL)
        return -1;
    for (int i = 0; i < BS_PY_NKEYS; i++) {
        PyObject *k = PyUnicode_InternFromString(table_names[i]);
        if (k == NULL)
            return -1;
        PyTuple_SET_ITEM(ms->table_keys, i, k);
    }
    return 0;
}
