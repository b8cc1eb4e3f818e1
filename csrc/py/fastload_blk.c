/* py/fastload_blk.c -- the walker's entry point, _fast_block(state, instructions, ...):
** one block's instructions through bs_fl_read_insn (fastload.c), committed to the packed
** buffers (fastload_rec.c) or declined to the Python path, and the names appended. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>
#include "fastload.h"

static int append_nones(PyObject *list, Py_ssize_t n)
{
    Py_ssize_t i;
    for (i = 0; i < n; i++)
        if (PyList_Append(list, Py_None) < 0)
            return -1;
    return 0;
}

/* Tables.label(name): the offset of name appended to the string table. An instruction's
** name is a label, not interned: looking each up and keeping it in a dict cost ~10 % of
** a load (the dict held every name's string past its tree, then freed them all at once). */
static int append_name(fl_state *st, PyObject *name, int32_t *out)
{
    const char *utf8;
    Py_ssize_t len, at;
    utf8 = PyUnicode_AsUTF8AndSize(name, &len);      /* bs_fl_valid_name() passed */
    if (utf8 == NULL)
        return -1;
    at = PyByteArray_GET_SIZE(st->sbuf);
    if (at > INT32_MAX - len - 1)
        return 0;
    if (PyByteArray_Resize(st->sbuf, at + len + 1) < 0)
        return -1;
    memcpy(PyByteArray_AS_STRING(st->sbuf) + at, utf8, (size_t)len + 1);
    *out = (int32_t)at;
    return 1;
}

/* Commit the instruction r read: the instruction record `in` (r's, or a blank slot),
** its operand and sync records (the walker's own), and a None per record in the lists
** the Python side keeps. -1 with a Python error. */
static int commit(fl_state *st, const bs_insn *in, const fl_insn *r)
{
    if (bs_fl_buf_put(&st->bufs[FL_BUF_insns], in, sizeof *in, 1) < 0
            || bs_fl_buf_put(&st->bufs[FL_BUF_opnds], r->opnds, sizeof r->opnds[0],
                             r->nopnd) < 0
            || bs_fl_buf_put(&st->bufs[FL_BUF_syncs], r->syncs, sizeof r->syncs[0],
                             r->nsync) < 0
            || append_nones(st->insn_recs, 1) < 0 || append_nones(st->infos, 1) < 0
            || append_nones(st->opnd_recs, r->nopnd) < 0
            || append_nones(st->sync_recs, r->nsync) < 0)
        return -1;
    st->bufs[FL_BUF_opnds].own += r->nopnd;
    st->bufs[FL_BUF_syncs].own += r->nsync;
    return 0;
}

/* A HANDBACK instruction (fastload.h fl_op.handback) read into r at position k: its
** operand and sync records are the walker's, its instruction record a blank slot (its
** list entry None until pass 1 puts the dict there), and (k, index, op, name, engine,
** opnd, nin, nout, sync, nwait, nupd, lat) appended to back for passes._handed_back. */
static int hand_back(fl_state *st, PyObject *back, Py_ssize_t k, const fl_insn *r)
{
    PyObject *t;
    int bad;
    t = Py_BuildValue("(nniiiiiiiiid)", k, PyList_GET_SIZE(st->insn_recs), (int)r->in.op,
                      (int)r->in.name, (int)r->in.engine, (int)r->in.opnd, (int)r->in.nin,
                      (int)r->in.nout, (int)r->in.sync, (int)r->in.nwait, (int)r->in.nupd,
                      r->in.lat);
    if (t == NULL)
        return -1;
    bad = PyList_Append(back, t) < 0;
    Py_DECREF(t);
    return bad ? -1 : commit(st, &st->insn_tmpl, r);
}

/* The walker checks for signals (Ctrl-C) once per this many instructions. */
#define FL_SIGNAL_EVERY 256

static PyObject *fast_block(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    fl_state *st;
    PyObject *insns, *back;
    fl_names nm;
    Py_ssize_t k, n;
    long long start, block, func;
    int drop;
    fl_insn *r;
    (void)self;
    if (nargs != 11) {
        PyErr_SetString(PyExc_TypeError, "_fast_block(state, insns, start, block, func, locs, "
                        "regs, sets, seen, back, drop) takes 11 arguments");
        return NULL;
    }
    st = PyCapsule_GetPointer(args[0], FL_CAPSULE);
    if (st == NULL)
        return NULL;
    insns = args[1];
    nm.locs = args[5];
    nm.regs = args[6];
    nm.sets = args[7];
    nm.seen = args[8];
    back = args[9];
    if ((drop = PyObject_IsTrue(args[10])) < 0)
        return NULL;
    start = PyLong_AsLongLong(args[2]);
    block = PyLong_AsLongLong(args[3]);
    func = PyLong_AsLongLong(args[4]);
    if (PyErr_Occurred())
        return NULL;
    if (!PyList_Check(insns) || !PyDict_Check(nm.locs) || !PyDict_Check(nm.regs)
            || !PyDict_Check(nm.sets) || !PySet_Check(nm.seen) || !PyList_Check(back)
            || start < 0 || block < 0
            || block > INT32_MAX || func < 0 || func > INT32_MAX) {
        PyErr_SetString(PyExc_TypeError, "_fast_block: bad arguments");
        return NULL;
    }
    if (bs_fl_buf_pad(st, FL_BUF_insns, PyList_GET_SIZE(st->insn_recs)) < 0
            || bs_fl_buf_pad(st, FL_BUF_opnds, PyList_GET_SIZE(st->opnd_recs)) < 0
            || bs_fl_buf_pad(st, FL_BUF_syncs, PyList_GET_SIZE(st->sync_recs)) < 0)
        return NULL;
    if ((r = bs_fl_scratch(st)) == NULL)
        return NULL;
    st->vc = r->vc;
    st->kc = &r->kc;
    n = PyList_GET_SIZE(insns);
    for (k = (Py_ssize_t)start; k < n; k++) {
        PyObject *obj = PyList_GET_ITEM(insns, k);
        fl_op *op = NULL;
        int rc;
        if ((k - (Py_ssize_t)start) % FL_SIGNAL_EVERY == FL_SIGNAL_EVERY - 1
                && PyErr_CheckSignals() < 0)
            goto error;                 /* Ctrl-C: ~1 ms of records between checks */
        Py_INCREF(obj);                 /* classify/ok callbacks run Python code */
        rc = bs_fl_read_insn(st, obj, &nm, r, &op);
        if (rc > 0 && PyList_GET_SIZE(insns) != n)
            rc = 0;                     /* a callback changed the list: the Python path */
        if (rc > 0)                     /* (last: a declined name is not appended) */
            rc = append_name(st, sget(&r->top, K_name), &r->in.name);
        Py_DECREF(obj);
        if (rc < 0)
            goto error;
        if (rc == 0)
            break;
        r->in.func = (int32_t)func;
        r->in.block = (int32_t)block;
        r->in.opnd = (int32_t)PyList_GET_SIZE(st->opnd_recs);
        r->in.sync = (int32_t)PyList_GET_SIZE(st->sync_recs);
        if (r->list != NULL) {          /* placed in ipool in pass 2 (_insns.build_all) */
            PyObject *index = PyLong_FromSsize_t(PyList_GET_SIZE(st->insn_recs));
            int bad = index == NULL || PyDict_SetItem(st->lists, index, r->list) < 0;
            Py_XDECREF(index);
            if (bad)
                goto error;
        }
        if (op->handback) {
            /* a blank slot: pass 1 makes the record a dict (its handler's fields are
            ** written in pass 2), filled over the slot at _fast_fill */
            if (hand_back(st, back, k, r) < 0)
                goto error;
            continue;
        }
        if (commit(st, &r->in, r) < 0)
            goto error;
        st->bufs[FL_BUF_insns].own += 1;
        if (drop) {
            /* the instruction is records now: free its JSON while it is in cache (the
            ** tree is load()'s own; a handed-back one stays: pass 1 and 2 read it) */
            PyList_SET_ITEM(insns, k, Py_NewRef(Py_None));
            Py_DECREF(obj);
        }
    }
    st->vc = NULL;
    st->kc = NULL;
    bs_fl_scan_done(r);
    return PyLong_FromSsize_t(k);
error:
    st->vc = NULL;
    st->kc = NULL;
    bs_fl_scan_done(r);
    return NULL;
}

static PyMethodDef fastload_methods[] = {
    {"_trim_heap", bs_fl_trim_heap, METH_NOARGS,
     "_trim_heap($module, /)\n--\n\nReturn the C heap's free pages to the system after a large "
     "load (glibc malloc_trim; False elsewhere)."},
    {"_fast_static", bs_fl_static, METH_O,
     "_fast_static($module, config, /)\n--\n\nThe part of the loader's fast-path state no "
     "program changes (birsim/_load/fastload.py builds the config, once per configuration)."},
    {"_fast_new", (PyCFunction)(void (*)(void))bs_fl_new, METH_FASTCALL,
     "_fast_new($module, static, config, /)\n--\n\nA load's fast-path state on the static one "
     "(config: the load's record lists)."},
    {"_fast_block", (PyCFunction)(void (*)(void))fast_block, METH_FASTCALL,
     "_fast_block($module, state, insns, start, block, func, locs, regs, sets, seen, back, drop, /)\n--\n\nLoad insns[start:] while "
     "the fast path understands them (appending those it hands back to back; drop: each one it tabled is replaced by None in insns); return the index of the first it declined."},
    {"_json_split", (PyCFunction)(void (*)(void))bs_fl_json_split, METH_FASTCALL,
     "_json_split($module, buf, piece, /)\n--\n\nThe structure of a large JSON document as pieces "
     "of about piece bytes to parse one by one (None: parse it whole)."},
    {"_json_lazy", (PyCFunction)(void (*)(void))bs_fl_json_lazy, METH_FASTCALL,
     "_json_lazy($module, buf, min_span, max_span, max_depth, /)\n--\n\nThe text of the "
     "blocks' instruction arrays of at least min_span bytes and the document without them "
     "((skeleton, spans), or None: parse it whole)."},
    {"_fast_fill", (PyCFunction)(void (*)(void))bs_fl_fill, METH_FASTCALL,
     "_fast_fill($module, state, table, recs, /)\n--\n\nThe table's records as a buffer in the C "
     "layout (the walker's where recs holds None) and the indices of the other records."},
    {NULL, NULL, 0, NULL}
};

int bs_py_add_fastload(PyObject *module)
{
    bs_modstate *ms = PyModule_GetState(module);
    ms->records_type = PyType_FromModuleAndSpec(module, &bs_fl_records_spec, NULL);
    if (ms->records_type == NULL)
        return -1;
    return PyModule_AddFunctions(module, fastload_methods);
}
