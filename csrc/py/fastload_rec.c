/* py/fastload_rec.c -- the fast path's records: packed buffers of the C structs, one
** per table (blank slots for the records the Python path appended between walks), and
** _fast_fill, which hands a buffer to Python as a Records object that becomes the
** table's memory without a copy; _trim_heap after a large load. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "fastload.h"

int bs_fl_buf_put(fl_buf *b, const void *rec, size_t size, Py_ssize_t count)
{
    size_t need = size * (size_t)count;
    if (need == 0)
        return 0;                       /* nothing to copy (b->data may still be NULL) */
    if (b->cap - b->len < need) {
        size_t cap = b->cap ? b->cap : 1 << 16;
        char *p;
        while (cap - b->len < need) {
            if (cap > ((size_t)PY_SSIZE_T_MAX) / 2) {
                PyErr_NoMemory();
                return -1;
            }
            cap *= 2;
        }
        p = PyMem_Realloc(b->data, cap);
        if (p == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        b->data = p;
        b->cap = cap;
    }
    memcpy(b->data + b->len, rec, need);
    b->len += need;
    b->count += count;
    return 0;
}

/* Bytes per record of the packed tables: 0 insns, 1 opnds, 2 syncs. */
static const size_t rec_size[FL_NBUFS] = {                 /* by FL_BUF_* */
    [FL_BUF_insns] = sizeof(bs_insn), [FL_BUF_opnds] = sizeof(bs_opnd),
    [FL_BUF_syncs] = sizeof(bs_sync)
};

/* Blank slots up to record `upto` of table `which`: the records the Python path appended
** to its list since the walker last put one. */
int bs_fl_buf_pad(fl_state *st, int which, Py_ssize_t upto)
{
    const void *tmpl[FL_NBUFS] = {[FL_BUF_insns] = &st->insn_tmpl,
                                  [FL_BUF_opnds] = &st->opnd_tmpl,
                                  [FL_BUF_syncs] = &st->sync_tmpl};
    fl_buf *b = &st->bufs[which];
    if (b->given) {
        PyErr_SetString(PyExc_ValueError, "_fast_block/_fast_fill: the table was already filled");
        return -1;
    }
    while (b->count < upto)
        if (bs_fl_buf_put(b, tmpl[which], rec_size[which], 1) < 0)
            return -1;
    return 0;
}

/* {=== Records: a packed table handed to Python ===} */

/* Exactly len bytes of records, exported as one writable buffer (np.frombuffer makes it
** the table without a copy); freed with the object. */
typedef struct {
    PyObject_HEAD
    char      *data;
    Py_ssize_t len;
} RecordsObject;

static int Records_getbuffer(PyObject *self, Py_buffer *view, int flags)
{
    static char empty[1];
    RecordsObject *r = (RecordsObject *)self;
    return PyBuffer_FillInfo(view, self, r->data != NULL ? r->data : empty, r->len, 0, flags);
}

static void Records_dealloc(PyObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyMem_Free(((RecordsObject *)self)->data);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyType_Slot Records_slots[] = {
    {Py_bf_getbuffer, Records_getbuffer},
    {Py_tp_dealloc, Records_dealloc},
    {Py_tp_doc, "A table of records packed by the loader's fast path (a writable buffer)."},
    {0, NULL}
};

PyType_Spec bs_fl_records_spec = {
    .name = "birsim._birsim._Records",
    .basicsize = sizeof(RecordsObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = Records_slots,
};

/* _fast_fill(state, table, recs): table 0 insns, 1 opnds, 2 syncs. Return (data, rest):
** data, len(recs) records in the C layout (the walker's where recs holds None, blank
** slots elsewhere) as a Records buffer of exactly that size, which becomes the table
** without a copy, and rest, the list of the other rows (the dict records the loader
** writes over the blank slots). The state gives the records up. */
PyObject *bs_fl_fill(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    bs_modstate *ms = PyModule_GetState(self);
    fl_state *st;
    fl_buf *b;
    RecordsObject *data = NULL;
    PyObject *recs, *rest = NULL, *out = NULL;
    long which;
    Py_ssize_t i, nones = 0, n;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "_fast_fill(state, table, recs) takes 3 arguments");
        return NULL;
    }
    st = PyCapsule_GetPointer(args[0], FL_CAPSULE);
    if (st == NULL)
        return NULL;
    which = PyLong_AsLong(args[1]);
    if (which == -1 && PyErr_Occurred())
        return NULL;
    recs = args[2];
    if (which < 0 || which >= FL_NBUFS || !PyList_Check(recs)) {
        PyErr_SetString(PyExc_ValueError, "_fast_fill: bad table or record list");
        return NULL;
    }
    b = &st->bufs[which];
    n = PyList_GET_SIZE(recs);
    if (bs_fl_buf_pad(st, (int)which, n) < 0)
        return NULL;
    if (b->count != n || b->len != (size_t)n * rec_size[which]) {
        PyErr_SetString(PyExc_ValueError, "_fast_fill: more packed records than rows");
        return NULL;
    }
    if ((rest = PyList_New(0)) == NULL)
        return NULL;
    for (i = 0; i < n; i++) {
        PyObject *ix;
        if (PyList_GET_ITEM(recs, i) == Py_None) {
            nones++;
            continue;
        }
        ix = PyLong_FromSsize_t(i);
        if (ix == NULL || PyList_Append(rest, ix) < 0) {
            Py_XDECREF(ix);
            goto done;
        }
        Py_DECREF(ix);
    }
    if (nones != b->own) {
        PyErr_SetString(PyExc_ValueError, "_fast_fill: placeholders and packed records differ");
        goto done;
    }
    data = PyObject_New(RecordsObject, (PyTypeObject *)ms->records_type);
    if (data == NULL)
        goto done;
    data->data = b->data;
    data->len = (Py_ssize_t)b->len;
    if (b->len < b->cap) {              /* give the slack back: shrinking stays in place */
        char *p = PyMem_Realloc(b->data, b->len);
        if (p != NULL)
            data->data = p;
    }
    memset(b, 0, sizeof *b);            /* the records are data's now */
    b->given = 1;
    out = PyTuple_Pack(2, (PyObject *)data, rest);
done:
    Py_XDECREF((PyObject *)data);
    Py_DECREF(rest);
    return out;
}

/* _trim_heap(): give the C heap's free pages back to the system (glibc malloc_trim).
** Loading frees the file's text and the parsed JSON tree, tens of MB; glibc keeps
** freed memory below its trim threshold (raised to twice the largest freed mmap chunk,
** e.g. the file's text) and any free chunk in the middle of the heap resident, so a
** 10k-instruction load left ~0.85 KB per instruction of freed heap in RSS. True when
** memory was released; False where the C library has no such call or nothing was. */
PyObject *bs_fl_trim_heap(PyObject *self, PyObject *unused)
{
    int released = 0;
    (void)self;
    (void)unused;
#if defined(__GLIBC__)
    released = malloc_trim(0);
#endif
    return PyBool_FromLong(released);
}
