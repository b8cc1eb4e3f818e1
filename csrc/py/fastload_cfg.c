/* py/fastload_cfg.c -- the loader fast path's state. _fast_static(config) reads the part
** of the config birsim/_load/fastload.py builds that no program changes (dicts, kinds and
** codes, per-opcode key classes and parameter specs) once per configuration;
** _fast_new(static, config) makes a load's state on it (the load's record lists and
** packed buffers), borrowing the rest. The walker (py/fastload.c) reads only that state. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#include "fastload.h"

static const char *const key_names[NKEYS] = {
    "name", "opcode", "type", "instruction_type", "engine", "ins", "outs", "sync_info",
    "on_wait", "on_update", "kind", "memref", "ap", "dtype", "offset", "mode", "id",
    "value", "wait_value", "update_value", "target_core", "set", "regref",
    "memsetref", "reg_ap_offset", "const_ap_offset", "nloc", "loc0", "predicted_latency_ns"
};

/* {=== state ===} */

/* A load's own references and buffers. */
static void fl_free_load(fl_state *st)
{
    Py_XDECREF(st->insn_recs); Py_XDECREF(st->opnd_recs); Py_XDECREF(st->sync_recs);
    Py_XDECREF(st->infos); Py_XDECREF(st->sbuf);
    Py_XDECREF(st->lists);
    Py_XDECREF(st->sets); Py_XDECREF(st->locs); Py_XDECREF(st->regs);
    for (int j = 0; j < FL_NBUFS; j++)
        PyMem_Free(st->bufs[j].data);
    if (st->r != NULL) {
        bs_fl_scan_done(st->r);
        PyMem_Free(st->r);
    }
}

static void fl_free(fl_state *st)
{
    Py_ssize_t i;
    int j, p;
    if (st == NULL)
        return;
    fl_free_load(st);
    if (st->base != NULL) {             /* the rest is the static state's */
        Py_DECREF(st->base);
        PyMem_Free(st);
        return;
    }
    Py_XDECREF(st->engines);
    Py_XDECREF(st->dtypes); Py_XDECREF(st->waits); Py_XDECREF(st->updates);
    Py_XDECREF(st->synctypes); Py_XDECREF(st->ops_index); Py_XDECREF(st->classify);
    Py_XDECREF(st->physical_ap); Py_XDECREF(st->register_access);
    Py_XDECREF(st->register_alias); Py_XDECREF(st->imm_value);
    Py_XDECREF(st->register_ap); Py_XDECREF(st->warn_reg_ap);
    for (i = 0; i < st->nops && st->ops != NULL; i++) {
        fl_op *op = &st->ops[i];
        PyMem_Free(op->kcls);
        Py_XDECREF(op->name);
        Py_XDECREF(op->keyclass);
        Py_XDECREF(op->warns);
        for (p = 0; p < op->nparams; p++) {
            for (j = 0; j < op->params[p].nkeys; j++)
                Py_XDECREF(op->params[p].keys[j]);
            Py_XDECREF(op->params[p].table);
            Py_XDECREF(op->params[p].ops);
        }
    }
    PyMem_Free(st->ops);
    if (st->keys != NULL) {
        Py_XDECREF(st->keys->vocab);
        PyMem_Free(st->keys);
    }
    for (j = 0; j < NKEYS; j++)
        Py_XDECREF(st->k[j]);
    for (j = 0; j < FL_NBUFS; j++)
        for (p = 0; p < FL_MAX_FIELDS; p++)
            Py_XDECREF(st->fname[j][p]);
    PyMem_Free(st);
}

/* {=== key ids (fastload.h fl_keys) ===} */

/* key's id in the vocabulary, a new one if it has none and there is room. */
static int vocab_id(fl_keys *kc, PyObject *key)
{
    PyObject *idobj = PyDict_GetItemWithError(kc->vocab, key);
    long id;
    if (idobj != NULL) {
        id = PyLong_AsLong(idobj);
        return id == -1 && PyErr_Occurred() ? FL_NOID - 1 : (int)id;
    }
    if (PyErr_Occurred())
        return FL_NOID - 1;
    if (kc->nvocab >= FL_VOCAB)
        return FL_NOID;
    idobj = PyLong_FromLong(kc->nvocab);
    if (idobj == NULL || PyDict_SetItem(kc->vocab, key, idobj) < 0) {
        Py_XDECREF(idobj);
        return FL_NOID - 1;
    }
    Py_DECREF(idobj);
    return kc->nvocab++;
}

int bs_fl_key_cache(fl_keys *voc, fl_kcache *kc, PyObject *key, size_t h)
{
    int id = vocab_id(voc, key);
    if (id < FL_NOID)
        return id;
    if (kc->ptr[h] == NULL)
        kc->used[kc->nused++] = (int)h;
    Py_XSETREF(kc->ptr[h], Py_NewRef(key));
    kc->id[h] = id;
    return id;
}

/* The id of a key of the configuration: one it must have (the walker's own keys get
** theirs first, K_* in order, then the parameter rows'). -1 with a Python error. */
static int config_id(fl_keys *kc, PyObject *key, int *out)
{
    int id = vocab_id(kc, key);
    if (id == FL_NOID)
        PyErr_SetString(PyExc_ValueError, "fast loader config: too many keys");
    if (id < 0)
        return -1;
    *out = id;
    return 0;
}

static void capsule_free(PyObject *cap)
{
    fl_free(PyCapsule_GetPointer(cap, PyCapsule_GetName(cap)));
}

/* A required entry of the config dict (new reference). */
static PyObject *cfg_get(PyObject *cfg, const char *key, PyTypeObject *type)
{
    PyObject *v = PyDict_GetItemString(cfg, key);
    if (v == NULL) {
        PyErr_Format(PyExc_KeyError, "fast loader config lacks %s", key);
        return NULL;
    }
    if (type != NULL && !PyObject_TypeCheck(v, type)) {
        PyErr_Format(PyExc_TypeError, "fast loader config %s: expected %s", key, type->tp_name);
        return NULL;
    }
    return Py_NewRef(v);
}

static int cfg_int(PyObject *cfg, const char *key, long long lo, long long hi, long long *out)
{
    PyObject *v = PyDict_GetItemString(cfg, key);
    long long x;
    if (v == NULL || !PyLong_Check(v)) {
        PyErr_Format(PyExc_KeyError, "fast loader config lacks integer %s", key);
        return -1;
    }
    x = PyLong_AsLongLong(v);
    if (x == -1 && PyErr_Occurred())
        return -1;
    if (x < lo || x > hi) {
        PyErr_Format(PyExc_ValueError, "fast loader config %s out of range", key);
        return -1;
    }
    *out = x;
    return 0;
}

static int cfg_i32(PyObject *cfg, const char *key, int32_t *out)
{
    long long x;
    if (cfg_int(cfg, key, INT32_MIN, INT32_MAX, &x) < 0)
        return -1;
    *out = (int32_t)x;
    return 0;
}

static int cfg_mask(PyObject *cfg, const char *key, uint64_t *out)
{
    PyObject *v = PyDict_GetItemString(cfg, key);
    Py_ssize_t i;
    *out = 0;
    if (v == NULL || !PyTuple_Check(v)) {
        PyErr_Format(PyExc_KeyError, "fast loader config lacks tuple %s", key);
        return -1;
    }
    for (i = 0; i < PyTuple_GET_SIZE(v); i++) {
        long x = PyLong_AsLong(PyTuple_GET_ITEM(v, i));
        if (x == -1 && PyErr_Occurred())
            return -1;
        if (x < 0 || x > 63) {
            PyErr_SetString(PyExc_ValueError, "fast loader config: mode code out of range");
            return -1;
        }
        *out |= (uint64_t)1 << x;
    }
    return 0;
}

static int cfg_template(PyObject *cfg, const char *key, void *out, size_t size)
{
    PyObject *v = PyDict_GetItemString(cfg, key);
    if (v == NULL || !PyBytes_Check(v) || (size_t)PyBytes_GET_SIZE(v) != size) {
        PyErr_Format(PyExc_ValueError, "fast loader config %s: expected %zu bytes", key, size);
        return -1;
    }
    memcpy(out, PyBytes_AS_STRING(v), size);
    return 0;
}

/* The engine accumulator's row (kind FL_ACC), its table: (commands dict, reduce ops dict,
** (ALU codes it folds with), LoadAccumulate code, default reduce op, start's ins index,
** reduce_op's i index, reduce_init's f index, Idle code); its keys: the three command
** spellings, reduce_op and reduce_init. 0, or -1 (then the caller reports a malformed
** row). */
static int acc_row(fl_param *fp, PyObject *t)
{
    PyObject *folds;
    Py_ssize_t i;
    long long v[6];
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 9 || fp->nkeys != 5
            || !PyDict_Check(PyTuple_GET_ITEM(t, 0)) || !PyDict_Check(PyTuple_GET_ITEM(t, 1))
            || !PyTuple_Check(PyTuple_GET_ITEM(t, 2)))
        return -1;
    folds = PyTuple_GET_ITEM(t, 2);
    fp->fold_ops = 0;
    for (i = 0; i < PyTuple_GET_SIZE(folds); i++) {
        long x = PyLong_AsLong(PyTuple_GET_ITEM(folds, i));
        if (x < 0 || x > 63)
            return -1;
        fp->fold_ops |= (uint64_t)1 << x;
    }
    for (i = 0; i < 6; i++)
        v[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(t, 3 + i));
    if (PyErr_Occurred() || v[2] < 0 || v[3] < 0 || v[3] >= BS_NSLOT_i || v[4] < 0
            || v[4] >= BS_NSLOT_f)
        return -1;
    fp->table = Py_NewRef(PyTuple_GET_ITEM(t, 0));
    fp->ops = Py_NewRef(PyTuple_GET_ITEM(t, 1));
    fp->hi = v[0];
    fp->def_op = v[1];
    fp->lo = v[2];
    fp->flag = (int)v[3];
    fp->value = (int)v[4];
    fp->idle = v[5];
    return 0;
}

/* One opcode: (name, code, keyclass dict, ((slot, index, kind, keys, table, default), ...),
** most ins, most outs, warns: the topic or None, handback: a bool) */
static int parse_op(fl_keys *kc, PyObject *spec, fl_op *op)
{
    PyObject *params;
    Py_ssize_t p, j;
    if (!PyTuple_Check(spec) || PyTuple_GET_SIZE(spec) != 8)
        goto bad;
    if (!PyBool_Check(PyTuple_GET_ITEM(spec, 7)))
        goto bad;
    op->handback = PyTuple_GET_ITEM(spec, 7) == Py_True;
    if (PyTuple_GET_ITEM(spec, 6) != Py_None) {
        if (!PyUnicode_CheckExact(PyTuple_GET_ITEM(spec, 6)))
            goto bad;
        op->warns = Py_NewRef(PyTuple_GET_ITEM(spec, 6));
    }
    for (j = 0; j < 2; j++) {
        op->most[j] = PyLong_AsSsize_t(PyTuple_GET_ITEM(spec, 4 + j));
        if (op->most[j] == -1 && PyErr_Occurred())
            return -1;
    }
    op->name = Py_NewRef(PyTuple_GET_ITEM(spec, 0));
    op->code = (int32_t)PyLong_AsLong(PyTuple_GET_ITEM(spec, 1));
    if (op->code == -1 && PyErr_Occurred())
        return -1;
    if (!PyDict_Check(PyTuple_GET_ITEM(spec, 2)))
        goto bad;
    op->keyclass = Py_NewRef(PyTuple_GET_ITEM(spec, 2));
    if ((op->kcls = PyMem_Malloc(FL_VOCAB)) == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    memset(op->kcls, -1, FL_VOCAB);
    params = PyTuple_GET_ITEM(spec, 3);
    if (!PyTuple_Check(params) || PyTuple_GET_SIZE(params) > FL_MAX_PARAMS
            || (op->handback && (PyTuple_GET_SIZE(params) != 0 || op->warns != NULL)))
        goto bad;
    for (p = 0; p < PyTuple_GET_SIZE(params); p++) {
        PyObject *row = PyTuple_GET_ITEM(params, p), *keys, *def;
        fl_param *fp = &op->params[p];
        const char *slot;
        long index, kind;
        if (!PyTuple_Check(row) || PyTuple_GET_SIZE(row) != 6)
            goto bad;
        op->nparams = (int)p + 1;
        slot = PyUnicode_Check(PyTuple_GET_ITEM(row, 0))
             ? PyUnicode_AsUTF8(PyTuple_GET_ITEM(row, 0)) : NULL;
        index = PyLong_AsLong(PyTuple_GET_ITEM(row, 1));
        kind = PyLong_AsLong(PyTuple_GET_ITEM(row, 2));
        if (PyErr_Occurred())
            return -1;
        if (slot == NULL || !((slot[0] == 'i' && index >= 0 && index < BS_NSLOT_i
                               && kind != FL_NUM && kind != FL_COUNT && kind != FL_ILIST)
                              || (slot[0] == 'l' && index == 0 && kind == FL_ILIST)
                              || (slot[0] == 'f' && index >= 0 && index < BS_NSLOT_f
                                  && (kind == FL_NUM || kind == FL_COUNT))))
            goto bad;
        fp->slot = slot[0];
        fp->index = (int)index;
        fp->kind = (int)kind;
        keys = PyTuple_GET_ITEM(row, 3);
        if (!PyTuple_Check(keys) || PyTuple_GET_SIZE(keys) < (kind == FL_CONST ? 0 : 1)
                || PyTuple_GET_SIZE(keys) > (kind == FL_CONST ? 0 : FL_MAX_KEYS))
            goto bad;
        for (j = 0; j < PyTuple_GET_SIZE(keys); j++) {
            if (!PyUnicode_CheckExact(PyTuple_GET_ITEM(keys, j)))
                goto bad;
            fp->keys[j] = Py_NewRef(PyTuple_GET_ITEM(keys, j));
            fp->nkeys = (int)j + 1;
            if (config_id(kc, fp->keys[j], &fp->kid[j]) < 0)
                return -1;
        }
        if (kind == FL_TABLE) {
            if (!PyDict_Check(PyTuple_GET_ITEM(row, 4)))
                goto bad;
            fp->table = Py_NewRef(PyTuple_GET_ITEM(row, 4));
        } else if (kind == FL_INT || kind == FL_RAW || kind == FL_ILIST) {
            PyObject *t = PyTuple_GET_ITEM(row, 4);
            if (!PyTuple_Check(t) || !(PyTuple_GET_SIZE(t) == (kind == FL_RAW ? 3 : 2)
                                       || (kind == FL_ILIST && PyTuple_GET_SIZE(t) == 7)))
                goto bad;
            fp->count = -1;
            fp->hole_lo = 1;
            fp->hole_hi = 0;                /* an empty hole */
            if (kind != FL_RAW) {
                fp->lo = PyLong_AsLongLong(PyTuple_GET_ITEM(t, 0));
                fp->hi = PyLong_AsLongLong(PyTuple_GET_ITEM(t, 1));
            } else {
                long flag = PyLong_AsLong(PyTuple_GET_ITEM(t, 0));
                long value = PyLong_AsLong(PyTuple_GET_ITEM(t, 1));
                fp->lo = 0;
                fp->hi = PyLong_AsLongLong(PyTuple_GET_ITEM(t, 2));
                if (PyErr_Occurred())
                    return -1;
                if (flag < 0 || flag >= BS_NSLOT_i || value < 0 || value >= BS_NSLOT_f)
                    goto bad;
                fp->flag = (int)flag;
                fp->value = (int)value;
            }
            if (PyTuple_GET_SIZE(t) == 7) {     /* count, hole, width, second's least */
                long width = PyLong_AsLong(PyTuple_GET_ITEM(t, 5));
                fp->count = PyLong_AsLongLong(PyTuple_GET_ITEM(t, 2));
                fp->hole_lo = PyLong_AsLongLong(PyTuple_GET_ITEM(t, 3));
                fp->hole_hi = PyLong_AsLongLong(PyTuple_GET_ITEM(t, 4));
                fp->second_lo = PyLong_AsLongLong(PyTuple_GET_ITEM(t, 6));
                if (PyErr_Occurred())
                    return -1;
                if (width != 0 && width != 2)
                    goto bad;
                fp->width = (int)width;
            }
            if (PyErr_Occurred())
                return -1;
        } else if (kind == FL_ACC) {
            if (acc_row(fp, PyTuple_GET_ITEM(row, 4)) < 0)
                goto bad;
        } else if (kind == FL_ACC_FLAGS) {
            if (PyTuple_GET_SIZE(keys) != 2)
                goto bad;
        } else if (kind != FL_BOOL && kind != FL_NUM && kind != FL_NOT_BOOL
                   && kind != FL_CONST && kind != FL_COUNT) {
            goto bad;
        }
        def = PyTuple_GET_ITEM(row, 5);
        fp->required = def == Py_None;
        if (fp->required && kind == FL_CONST)
            goto bad;
        if (!fp->required) {
            if (kind == FL_NUM || kind == FL_COUNT) {
                fp->def_f = PyFloat_AsDouble(def);
            } else {
                fp->def_i = PyLong_AsLongLong(def);
            }
            if (PyErr_Occurred())
                return -1;
        }
    }
    return 0;
bad:
    PyErr_SetString(PyExc_ValueError, "fast loader config: malformed opcode row");
    return -1;
}

PyObject *bs_fl_static(PyObject *self, PyObject *cfg)
{
    fl_state *st;
    PyObject *ops, *cap;
    long long x;
    int j;
    (void)self;
    if (!PyDict_Check(cfg)) {
        PyErr_SetString(PyExc_TypeError, "_fast_static(config): config must be a dict");
        return NULL;
    }
    st = PyMem_Calloc(1, sizeof *st);
    if (st == NULL)
        return PyErr_NoMemory();
    if ((st->keys = PyMem_Calloc(1, sizeof *st->keys)) == NULL) {
        PyErr_NoMemory();
        goto error;
    }
    if ((st->keys->vocab = PyDict_New()) == NULL)
        goto error;
    for (j = 0; j < NKEYS; j++) {
        int id;
        if ((st->k[j] = PyUnicode_InternFromString(key_names[j])) == NULL
                || config_id(st->keys, st->k[j], &id) < 0)
            goto error;
        if (id != j) {
            PyErr_SetString(PyExc_ValueError, "fast loader: a walker key given twice");
            goto error;
        }
    }
    if (bs_fl_field_names(st) < 0)
        goto error;
    if ((st->physical_ap = PyUnicode_InternFromString("physical_ap")) == NULL
            || (st->register_access = PyUnicode_InternFromString("register_access")) == NULL
            || (st->register_alias = PyUnicode_InternFromString("register")) == NULL
            || (st->imm_value = PyUnicode_InternFromString("imm_value")) == NULL
            || (st->register_ap = PyUnicode_InternFromString("register_ap")) == NULL
            || (st->warn_reg_ap = PyUnicode_InternFromString("register-ap")) == NULL)
        goto error;
#define DICT(f) if ((st->f = cfg_get(cfg, #f, &PyDict_Type)) == NULL) goto error
    DICT(engines); DICT(dtypes); DICT(waits); DICT(updates); DICT(synctypes);
#undef DICT
    if ((st->classify = cfg_get(cfg, "classify", NULL)) == NULL)
        goto error;
    if (cfg_i32(cfg, "physical", &st->physical) < 0
            || cfg_i32(cfg, "register_access", &st->reg_access) < 0
            || cfg_i32(cfg, "register_ap", &st->reg_ap) < 0
            || cfg_i32(cfg, "imm_value", &st->imm) < 0
            || cfg_i32(cfg, "int32", &st->int32) < 0
            || cfg_i32(cfg, "float32", &st->float32) < 0
            || cfg_i32(cfg, "semaphore", &st->semaphore) < 0
            || cfg_i32(cfg, "event", &st->event) < 0
            || cfg_i32(cfg, "sem_ge_imm", &st->sem_ge_imm) < 0
            || cfg_i32(cfg, "sem_add_imm", &st->sem_add_imm) < 0
            || cfg_i32(cfg, "sem_ge_reg", &st->sem_ge_reg) < 0
            || cfg_i32(cfg, "sem_inc", &st->sem_inc) < 0
            || cfg_i32(cfg, "sem_dec", &st->sem_dec) < 0
            || cfg_mask(cfg, "evt_waits", &st->evt_waits) < 0
            || cfg_mask(cfg, "evt_updates", &st->evt_updates) < 0)
        goto error;
    {
        PyObject *sizes = PyDict_GetItemString(cfg, "dtype_sizes");
        Py_ssize_t i;
        if (sizes == NULL || !PyTuple_Check(sizes) || PyTuple_GET_SIZE(sizes) > FL_MAX_DTYPES) {
            PyErr_SetString(PyExc_KeyError, "fast loader config lacks tuple dtype_sizes");
            goto error;
        }
        for (i = 0; i < PyTuple_GET_SIZE(sizes); i++) {
            long v = PyLong_AsLong(PyTuple_GET_ITEM(sizes, i));
            if (v == -1 && PyErr_Occurred())
                goto error;
            st->dtype_size[i] = v < 0 || v > 64 ? 0 : (int)v;     /* 0: not a dtype */
        }
    }
    if (cfg_int(cfg, "max_dims", 1, BS_MAX_DIMS, &x) < 0)
        goto error;
    st->max_dims = (Py_ssize_t)x;
    if (cfg_int(cfg, "max_operands", 0, 64, &x) < 0)
        goto error;
    st->max_operands = (Py_ssize_t)x;
    if (cfg_template(cfg, "insn_tmpl", &st->insn_tmpl, sizeof st->insn_tmpl) < 0
            || cfg_template(cfg, "opnd_tmpl", &st->opnd_tmpl, sizeof st->opnd_tmpl) < 0
            || cfg_template(cfg, "sync_tmpl", &st->sync_tmpl, sizeof st->sync_tmpl) < 0)
        goto error;
    /* ops: tuple of opcode rows; ops_index: dict name (and aliases) -> row index */
    if ((ops = PyDict_GetItemString(cfg, "ops")) == NULL || !PyTuple_Check(ops)) {
        PyErr_SetString(PyExc_KeyError, "fast loader config lacks tuple ops");
        goto error;
    }
    if ((st->ops_index = cfg_get(cfg, "ops_index", &PyDict_Type)) == NULL)
        goto error;
    st->ops = PyMem_Calloc((size_t)PyTuple_GET_SIZE(ops) + 1, sizeof *st->ops);
    if (st->ops == NULL) {
        PyErr_NoMemory();
        goto error;
    }
    for (st->nops = 0; st->nops < PyTuple_GET_SIZE(ops); ) {
        fl_op *op = &st->ops[st->nops++];
        if (parse_op(st->keys, PyTuple_GET_ITEM(ops, st->nops - 1), op) < 0)
            goto error;
    }
    cap = PyCapsule_New(st, FL_STATIC_CAPSULE, capsule_free);
    if (cap == NULL)
        goto error;
    return cap;
error:
    fl_free(st);
    return NULL;
}

/* _fast_new(static, config): a load's state on the static one (a shallow copy of it, no
** references of its own but the static capsule's) with the load's record lists. */
PyObject *bs_fl_new(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    const fl_state *stat;
    fl_state *st;
    PyObject *cfg, *cap;
    (void)self;
    if (nargs != 2 || !PyDict_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "_fast_new(static, config): config must be a dict");
        return NULL;
    }
    if ((stat = PyCapsule_GetPointer(args[0], FL_STATIC_CAPSULE)) == NULL)
        return NULL;
    cfg = args[1];
    st = PyMem_Malloc(sizeof *st);
    if (st == NULL)
        return PyErr_NoMemory();
    *st = *stat;
    st->base = Py_NewRef(args[0]);
    st->insn_recs = st->opnd_recs = st->sync_recs = st->infos = NULL;
    st->sbuf = st->lists = st->sets = st->locs = st->regs = NULL;
    memset(st->bufs, 0, sizeof st->bufs);
    for (int j = 0; j < FL_NBUFS; j++)
        st->bufs[j].hint = stat->last_len[j];
    st->r = NULL;
    st->vc = NULL;
    st->kc = NULL;
#define LIST(f) if ((st->f = cfg_get(cfg, #f, &PyList_Type)) == NULL) goto error
    LIST(insn_recs); LIST(opnd_recs); LIST(sync_recs); LIST(infos); LIST(sets); LIST(locs);
    LIST(regs);
#undef LIST
    if ((st->lists = cfg_get(cfg, "lists", &PyDict_Type)) == NULL
            || (st->sbuf = cfg_get(cfg, "sbuf", &PyByteArray_Type)) == NULL)
        goto error;
    cap = PyCapsule_New(st, FL_CAPSULE, capsule_free);
    if (cap == NULL)
        goto error;
    return cap;
error:
    fl_free(st);
    return NULL;
}
