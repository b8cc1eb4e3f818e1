/* py/fastload_rec.c -- the fast path's records: packed buffers of the C structs, one
** per table (blank slots for the records the Python path appended between walks), and
** _fast_fill, which hands a buffer to Python as a Records object that becomes the
** table's memory without a copy; _trim_heap after a large load. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
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
        if (b->cap && b->hint > cap)    /* a large table: at once to the last one's size */
            cap = b->hint;
        if (b->cap)
            b->hint = 0;
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

/* The blank record of table `which` (its defaults). */
static const void *tmpl_of(const fl_state *st, int which)
{
    return which == FL_BUF_insns ? (const void *)&st->insn_tmpl
         : which == FL_BUF_opnds ? (const void *)&st->opnd_tmpl : (const void *)&st->sync_tmpl;
}

/* Blank slots up to record `upto` of table `which`: the records the Python path appended
** to its list since the walker last put one. */
int bs_fl_buf_pad(fl_state *st, int which, Py_ssize_t upto)
{
    fl_buf *b = &st->bufs[which];
    if (b->given) {
        PyErr_SetString(PyExc_ValueError, "_fast_block/_fast_fill: the table was already filled");
        return -1;
    }
    while (b->count < upto)
        if (bs_fl_buf_put(b, tmpl_of(st, which), rec_size[which], 1) < 0)
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

/* {=== the dict records of a packed table, written in C ===} */

/* A field of a packed table's record (the BS_*_FIELDS lists of ir/program.h): its name,
** type ('i' int32, 'l' int64, 'd' float64), byte offset, and length (0: a scalar). */
typedef struct fl_field {
    const char *name;
    char        type;
    size_t      off;
    int         n;
} fl_field;

#define FL_TY_I32 BS_PY_I32
#define FL_TY_I64 BS_PY_I64
#define FL_TY_F64 BS_PY_F64
#define FL_FIELD_F(type, name) {#name, FL_TY_##type, offsetof(FL_REC, name), 0},
#define FL_FIELD_A(type, name, n) {#name, FL_TY_##type, offsetof(FL_REC, name), n},
#define FL_REC bs_insn
static const fl_field insn_fields[] = { BS_INSN_FIELDS(FL_FIELD_F, FL_FIELD_A) };
#undef FL_REC
#define FL_REC bs_opnd
static const fl_field opnd_fields[] = { BS_OPND_FIELDS(FL_FIELD_F, FL_FIELD_A) };
#undef FL_REC
#define FL_REC bs_sync
static const fl_field sync_fields[] = { BS_SYNC_FIELDS(FL_FIELD_F, FL_FIELD_A) };
#undef FL_REC

static const struct { const fl_field *f; int n; } fl_fields[FL_NBUFS] = {
    [FL_BUF_insns] = {insn_fields, (int)(sizeof insn_fields / sizeof insn_fields[0])},
    [FL_BUF_opnds] = {opnd_fields, (int)(sizeof opnd_fields / sizeof opnd_fields[0])},
    [FL_BUF_syncs] = {sync_fields, (int)(sizeof sync_fields / sizeof sync_fields[0])},
};

int bs_fl_field_names(fl_state *st)
{
    int t, j;
    for (t = 0; t < FL_NBUFS; t++) {
        if (fl_fields[t].n > FL_MAX_FIELDS) {
            PyErr_SetString(PyExc_ValueError, "fast loader: a table of too many fields");
            return -1;
        }
        for (j = 0; j < fl_fields[t].n; j++)
            if ((st->fname[t][j] = PyUnicode_InternFromString(fl_fields[t].f[j].name)) == NULL)
                return -1;
    }
    return 0;
}

/* The dict record rec of table t into out (the table's template there already), as
** tables._to_array_fast's row function and NumPy make it, field by field (the bytes
** between fields, e.g. bs_opnd's before imm, are no field's: the template's here,
** whatever NumPy leaves there): a field absent takes the template's value, an array field's list is padded with the template's (None: all of
** it). 1 written; 0 left to NumPy (a value it converts otherwise or refuses: out
** partly written); -1 with a Python error. */
static int put_record(fl_state *st, int t, PyObject *rec, char *out)
{
    const fl_field *f = fl_fields[t].f;
    int j, nf = fl_fields[t].n;
    if (!PyDict_CheckExact(rec))
        return 0;
    for (j = 0; j < nf; j++) {
        PyObject *v = PyDict_GetItemWithError(rec, st->fname[t][j]);
        size_t size = f[j].type == FL_TY_I32 ? 4 : 8;
        Py_ssize_t m, e;
        if (v == NULL) {
            if (PyErr_Occurred())
                return -1;
            continue;
        }
        if (f[j].n == 0) {
            if (!bs_py_put_value(f[j].type, v, out + f[j].off))
                return 0;
            continue;
        }
        if (v == Py_None)
            continue;
        if (!PyList_CheckExact(v) && !PyTuple_CheckExact(v))
            return 0;
        m = PySequence_Fast_GET_SIZE(v);
        if (m > f[j].n)
            return 0;
        for (e = 0; e < m; e++)
            if (!bs_py_put_value(f[j].type, PySequence_Fast_ITEMS(v)[e],
                           out + f[j].off + (size_t)e * size))
                return 0;
    }
    return 1;
}

/* _fast_fill(state, table, recs): table 0 insns, 1 opnds, 2 syncs. Return (data, rest):
** data, len(recs) records in the C layout (the walker's where recs holds None, blank
** slots elsewhere) as a Records buffer of exactly that size, which becomes the table
** without a copy, and rest, the list of the other rows' indices: the dict records this
** function could not write over their blank slots as NumPy would (put_record), which
** the loader converts. The state gives the records up. */
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
        PyObject *ix, *rec = PyList_GET_ITEM(recs, i);
        char *slot = b->data + (size_t)i * rec_size[which];
        int rc;
        if (rec == Py_None) {
            nones++;
            continue;
        }
        Py_INCREF(rec);
        rc = put_record(st, (int)which, rec, slot);
        Py_DECREF(rec);
        if (rc < 0)
            goto done;
        if (rc > 0)
            continue;
        memcpy(slot, tmpl_of(st, (int)which), rec_size[which]);  /* as it was */
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
    {                                   /* the next load's growth hint */
        fl_state *stat = PyCapsule_GetPointer(st->base, FL_STATIC_CAPSULE);
        if (stat == NULL)
            goto done;
        stat->last_len[which] = b->len;
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
