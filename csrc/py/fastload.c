/* py/fastload.c -- the loader's fast path: fill instruction, operand and sync records of
** common instructions straight from the parsed JSON objects (tensor access patterns,
** registers and immediates as operands; birsim/_fastload.py lists what it takes).
**
** The Python loader (birsim/loader.py, _insns.py, _operands.py) is the specification.
** This walker takes an instruction only when every key it carries is one it reads the
** same way (the per-opcode tables come from birsim/_fastload.py, built from the BS_PARAM
** rows, birsim/_insns.PARAMS and birsim/_keys.py); anything else, and every value the
** Python path would reject, makes it decline the instruction, which the Python path then
** loads (and reports with its JSON path). Declining never leaves a trace: records are
** built locally and committed only when the whole instruction was understood.
**
** Records go to packed buffers of the C structs (ir/program.h), one per table, that
** become the final tables' memory (a Records object); the Python record lists get a
** None placeholder per record. Buffer record i is always record i of its list: a
** record the Python path appended between two walks gets a blank slot before the
** walker puts its next one (and at _fast_fill), which the loader fills from the dict. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <string.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include "bind.h"

#define FL_CAPSULE "birsim._birsim.fastload"

enum { FL_GENERIC = 0, FL_DECLARED = 1, FL_SKIP = 2, FL_DECLINE = 3 };   /* key classes */
enum {                                                                  /* param kinds */
    FL_TABLE = 0, FL_BOOL = 1, FL_NUM = 2, FL_NOT_BOOL = 3, FL_INT = 4, FL_ACC_FLAGS = 5,
    FL_RAW = 6
};
enum { FL_MAX_PARAMS = 8, FL_MAX_SYNCS = 64, FL_MAX_KEYS = 3, FL_MAX_DTYPES = 64 };

typedef struct fl_buf {
    char      *data;              /* cap bytes (NULL until the first record), owned */
    size_t     len, cap;          /* bytes in use, bytes allocated */
    Py_ssize_t count;             /* records (the walker's and blank slots) */
    Py_ssize_t own;               /* records the walker put */
    int        given;             /* _fast_fill handed the records over: no more of them */
} fl_buf;

typedef struct fl_param {
    char       slot;              /* 'i' or 'f' */
    int        index;
    int        kind;
    int        nkeys;
    PyObject  *keys[FL_MAX_KEYS]; /* str, owned */
    PyObject  *table;             /* FL_TABLE: dict str -> int, owned */
    int64_t    lo, hi;            /* FL_INT: the range; FL_RAW: 0 and the largest integer */
    int        flag, value;       /* FL_RAW: i index of the by-value flag, f index of it */
    int        required;
    int64_t    def_i;
    double     def_f;
} fl_param;

typedef struct fl_op {
    PyObject  *name;              /* canonical opcode name (for classify), owned */
    int32_t    code;
    PyObject  *keyclass;          /* dict: key -> class int or ok(value) callable, owned */
    Py_ssize_t most[2];           /* most ins, outs (_keys.OPERANDS): more declines */
    int        nparams;
    fl_param   params[FL_MAX_PARAMS];
} fl_op;

enum {
    K_name, K_opcode, K_type, K_instruction_type, K_engine, K_ins, K_outs, K_sync_info,
    K_on_wait, K_on_update, K_kind, K_memref, K_ap, K_dtype, K_offset, K_mode, K_id,
    K_value, K_wait_value, K_update_value, K_target_core, K_set, K_regref,
    K_memsetref, K_reg_ap_offset, K_const_ap_offset, K_nloc, K_loc0, NKEYS
};
static const char *const key_names[NKEYS] = {
    "name", "opcode", "type", "instruction_type", "engine", "ins", "outs", "sync_info",
    "on_wait", "on_update", "kind", "memref", "ap", "dtype", "offset", "mode", "id",
    "value", "wait_value", "update_value", "target_core", "set", "regref",
    "memsetref", "reg_ap_offset", "const_ap_offset", "nloc", "loc0"
};

typedef struct fl_state {
    PyObject *insn_recs, *opnd_recs, *sync_recs, *infos;    /* lists: None per record */
    PyObject *strings, *sbuf;                               /* string table */
    PyObject *sets, *locs, *regs;                           /* record lists (dicts) */
    PyObject *engines, *dtypes, *waits, *updates, *synctypes, *ops_index, *classify;
    PyObject *physical_ap, *register_access, *register_alias, *imm_value;   /* kinds */
    PyObject *register_ap, *warn_reg_ap;
    fl_op    *ops;
    Py_ssize_t nops;
    int32_t   physical, reg_ap, reg_access, imm, int32, float32;   /* kinds, dtypes */
    int32_t   semaphore, event, sem_ge_imm, sem_add_imm, sem_ge_reg, sem_inc, sem_dec;
    uint64_t  evt_waits, evt_updates;                       /* bit per mode code < 64 */
    int       dtype_size[FL_MAX_DTYPES];                    /* bytes per item, by code */
    Py_ssize_t max_dims, max_operands;
    bs_insn   insn_tmpl;
    bs_opnd   opnd_tmpl;
    bs_sync   sync_tmpl;
    fl_buf    bufs[3];                                      /* insns, opnds, syncs */
    PyObject *k[NKEYS];
} fl_state;

/* {=== state ===} */

static void fl_free(fl_state *st)
{
    Py_ssize_t i;
    int j, p;
    if (st == NULL)
        return;
    Py_XDECREF(st->insn_recs); Py_XDECREF(st->opnd_recs); Py_XDECREF(st->sync_recs);
    Py_XDECREF(st->infos); Py_XDECREF(st->strings); Py_XDECREF(st->sbuf);
    Py_XDECREF(st->sets); Py_XDECREF(st->locs); Py_XDECREF(st->regs);
    Py_XDECREF(st->engines);
    Py_XDECREF(st->dtypes); Py_XDECREF(st->waits); Py_XDECREF(st->updates);
    Py_XDECREF(st->synctypes); Py_XDECREF(st->ops_index); Py_XDECREF(st->classify);
    Py_XDECREF(st->physical_ap); Py_XDECREF(st->register_access);
    Py_XDECREF(st->register_alias); Py_XDECREF(st->imm_value);
    Py_XDECREF(st->register_ap); Py_XDECREF(st->warn_reg_ap);
    for (i = 0; i < st->nops && st->ops != NULL; i++) {
        fl_op *op = &st->ops[i];
        Py_XDECREF(op->name);
        Py_XDECREF(op->keyclass);
        for (p = 0; p < op->nparams; p++) {
            for (j = 0; j < op->params[p].nkeys; j++)
                Py_XDECREF(op->params[p].keys[j]);
            Py_XDECREF(op->params[p].table);
        }
    }
    PyMem_Free(st->ops);
    for (j = 0; j < NKEYS; j++)
        Py_XDECREF(st->k[j]);
    for (j = 0; j < 3; j++)
        PyMem_Free(st->bufs[j].data);
    PyMem_Free(st);
}

static void capsule_free(PyObject *cap)
{
    fl_free(PyCapsule_GetPointer(cap, FL_CAPSULE));
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

/* One opcode: (name, code, keyclass dict, ((slot, index, kind, keys, table, default), ...),
** most ins, most outs) */
static int parse_op(PyObject *spec, fl_op *op)
{
    PyObject *params;
    Py_ssize_t p, j;
    if (!PyTuple_Check(spec) || PyTuple_GET_SIZE(spec) != 6)
        goto bad;
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
    params = PyTuple_GET_ITEM(spec, 3);
    if (!PyTuple_Check(params) || PyTuple_GET_SIZE(params) > FL_MAX_PARAMS)
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
                               && kind != FL_NUM)
                              || (slot[0] == 'f' && index >= 0 && index < BS_NSLOT_f
                                  && kind == FL_NUM)))
            goto bad;
        fp->slot = slot[0];
        fp->index = (int)index;
        fp->kind = (int)kind;
        keys = PyTuple_GET_ITEM(row, 3);
        if (!PyTuple_Check(keys) || PyTuple_GET_SIZE(keys) < 1
                || PyTuple_GET_SIZE(keys) > FL_MAX_KEYS)
            goto bad;
        for (j = 0; j < PyTuple_GET_SIZE(keys); j++) {
            if (!PyUnicode_CheckExact(PyTuple_GET_ITEM(keys, j)))
                goto bad;
            fp->keys[j] = Py_NewRef(PyTuple_GET_ITEM(keys, j));
            fp->nkeys = (int)j + 1;
        }
        if (kind == FL_TABLE) {
            if (!PyDict_Check(PyTuple_GET_ITEM(row, 4)))
                goto bad;
            fp->table = Py_NewRef(PyTuple_GET_ITEM(row, 4));
        } else if (kind == FL_INT || kind == FL_RAW) {
            PyObject *t = PyTuple_GET_ITEM(row, 4);
            if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != (kind == FL_INT ? 2 : 3))
                goto bad;
            if (kind == FL_INT) {
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
            if (PyErr_Occurred())
                return -1;
        } else if (kind == FL_ACC_FLAGS) {
            if (PyTuple_GET_SIZE(keys) != 2)
                goto bad;
        } else if (kind != FL_BOOL && kind != FL_NUM && kind != FL_NOT_BOOL) {
            goto bad;
        }
        def = PyTuple_GET_ITEM(row, 5);
        fp->required = def == Py_None;
        if (!fp->required) {
            if (kind == FL_NUM) {
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

static PyObject *fast_new(PyObject *self, PyObject *cfg)
{
    fl_state *st;
    PyObject *ops, *cap;
    long long x;
    int j;
    (void)self;
    if (!PyDict_Check(cfg)) {
        PyErr_SetString(PyExc_TypeError, "_fast_new(config): config must be a dict");
        return NULL;
    }
    st = PyMem_Calloc(1, sizeof *st);
    if (st == NULL)
        return PyErr_NoMemory();
    for (j = 0; j < NKEYS; j++)
        if ((st->k[j] = PyUnicode_InternFromString(key_names[j])) == NULL)
            goto error;
    if ((st->physical_ap = PyUnicode_InternFromString("physical_ap")) == NULL
            || (st->register_access = PyUnicode_InternFromString("register_access")) == NULL
            || (st->register_alias = PyUnicode_InternFromString("register")) == NULL
            || (st->imm_value = PyUnicode_InternFromString("imm_value")) == NULL
            || (st->register_ap = PyUnicode_InternFromString("register_ap")) == NULL
            || (st->warn_reg_ap = PyUnicode_InternFromString("register-ap")) == NULL)
        goto error;
#define LIST(f) if ((st->f = cfg_get(cfg, #f, &PyList_Type)) == NULL) goto error
#define DICT(f) if ((st->f = cfg_get(cfg, #f, &PyDict_Type)) == NULL) goto error
    LIST(insn_recs); LIST(opnd_recs); LIST(sync_recs); LIST(infos); LIST(sets); LIST(locs);
    LIST(regs);
    DICT(strings); DICT(engines); DICT(dtypes); DICT(waits); DICT(updates); DICT(synctypes);
#undef LIST
#undef DICT
    if ((st->sbuf = cfg_get(cfg, "sbuf", &PyByteArray_Type)) == NULL
            || (st->classify = cfg_get(cfg, "classify", NULL)) == NULL)
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
        if (parse_op(PyTuple_GET_ITEM(ops, st->nops - 1), op) < 0)
            goto error;
    }
    cap = PyCapsule_New(st, FL_CAPSULE, capsule_free);
    if (cap == NULL)
        goto error;
    return cap;
error:
    fl_free(st);
    return NULL;
}

/* {=== reading values (every check mirrors the Python path; 0 = decline) ===} */

/* obj[key] or NULL when absent or null (borrowed). */
static PyObject *item(PyObject *d, PyObject *key)
{
    PyObject *v = PyDict_GetItemWithError(d, key);
    return v == Py_None ? NULL : v;
}

/* An exact int within [lo, hi]; 0 otherwise. */
static int exact_int(PyObject *v, int64_t lo, int64_t hi, int64_t *out)
{
    int overflow = 0;
    long long x;
    if (v == NULL || !PyLong_CheckExact(v))
        return 0;
    x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || (x == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    if (x < lo || x > hi)
        return 0;
    *out = x;
    return 1;
}

/* table[v] for an exact str v; 0 when v is not a str or not in the table. */
static int lookup(PyObject *table, PyObject *v, int64_t *out)
{
    PyObject *code;
    if (!PyUnicode_CheckExact(v))
        return 0;
    code = PyDict_GetItemWithError(table, v);
    if (code == NULL) {
        PyErr_Clear();
        return 0;
    }
    return exact_int(code, INT32_MIN, INT32_MAX, out);
}

/* {=== one instruction ===} */

typedef struct fl_insn {
    bs_insn   in;
    bs_opnd   opnds[2 * 64];
    bs_sync   syncs[FL_MAX_SYNCS];
    int       nopnd, nsync;
} fl_insn;

static int valid_name(PyObject *name);

/* The names of the instruction's function and its loader's warnings. */
typedef struct fl_names {
    PyObject *locs, *regs, *sets;     /* dicts name -> index */
    PyObject *seen;                   /* topics the loader will warn about (a set) */
} fl_names;

static int reg_index(fl_state *st, PyObject *name, PyObject *regs, int64_t *reg);

/* memsetref (Resolver._ap): the compiler's "<location>_set" when no set has that name,
** else a set with exactly one location. */
static int memsetref(fl_state *st, PyObject *ref, const fl_names *nm, int64_t *loc)
{
    PyObject *srec, *stem, *hit;
    int64_t set, nloc;
    Py_ssize_t len;
    if (!PyUnicode_CheckExact(ref))
        return 0;
    hit = PyDict_GetItemWithError(nm->sets, ref);
    if (hit == NULL && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    len = PyUnicode_GET_LENGTH(ref);
    if (hit == NULL && len > 4 && PyUnicode_Tailmatch(ref, st->k[K_set], len - 4, len, 1) == 1
            && PyUnicode_READ_CHAR(ref, len - 4) == '_') {
        int found;
        stem = PyUnicode_Substring(ref, 0, len - 4);
        if (stem == NULL) {
            PyErr_Clear();
            return 0;
        }
        found = lookup(nm->locs, stem, loc);
        Py_DECREF(stem);
        if (found)
            return *loc >= 0 && *loc < PyList_GET_SIZE(st->locs);
    }
    if (!lookup(nm->sets, ref, &set) || set < 0 || set >= PyList_GET_SIZE(st->sets))
        return 0;
    srec = PyList_GET_ITEM(st->sets, set);
    if (!PyDict_CheckExact(srec) || !exact_int(item(srec, st->k[K_nloc]), 1, 1, &nloc)
            || !exact_int(item(srec, st->k[K_loc0]), 0, PyList_GET_SIZE(st->locs) - 1, loc))
        return 0;
    return 1;
}

/* A physical_ap or register_ap operand (v a dict of that kind): _operands.Resolver._ap
** (whose plain case is _fast_ap). A register_ap naming its register by regref warns
** once per module, in pass 2, at the first such operand: the walker declines the first
** instruction where it meets one (the Python path then warns there, or the load fails)
** and notes it in `seen`; it takes the later ones, for which the Python path's warning
** is a no-op. The walker goes in instruction order, so no earlier one escapes it. */
static int ap_operand(fl_state *st, PyObject *v, const fl_names *nm, int is_reg, bs_opnd *o)
{
    PyObject *ref, *ap, *dt, *off;
    Py_ssize_t d, n;
    int64_t loc, code, step, num, reg = -1, cao = 0;
    ref = item(v, st->k[K_memref]);
    if (ref != NULL) {
        if (!PyUnicode_CheckExact(ref) || !lookup(nm->locs, ref, &loc) || loc < 0
                || loc >= PyList_GET_SIZE(st->locs))
            return 0;
    } else if ((ref = item(v, st->k[K_memsetref])) == NULL || !memsetref(st, ref, nm, &loc)) {
        return 0;
    }
    if (is_reg) {
        PyObject *name = item(v, st->k[K_reg_ap_offset]), *c;
        if (name == NULL) {
            int seen;
            name = item(v, st->k[K_regref]);
            if (name == NULL)
                return 0;
            seen = PySet_Contains(nm->seen, st->warn_reg_ap);
            if (seen != 1) {
                if (seen < 0 || PySet_Add(nm->seen, st->warn_reg_ap) < 0)
                    PyErr_Clear();
                return 0;
            }
        }
        if (!reg_index(st, name, nm->regs, &reg))
            return 0;
        c = item(v, st->k[K_const_ap_offset]);
        if (c != NULL && !exact_int(c, INT64_MIN, INT64_MAX, &cao))
            return 0;
    }
    ap = item(v, st->k[K_ap]);
    if (ap == NULL || !PyList_CheckExact(ap))
        return 0;
    n = PyList_GET_SIZE(ap);
    if (n < 1 || n > st->max_dims)
        return 0;
    *o = st->opnd_tmpl;
    dt = item(v, st->k[K_dtype]);
    if (dt == NULL) {                           /* the dtype of the location's set */
        PyObject *lrec = PyList_GET_ITEM(st->locs, loc), *srec;
        int64_t set;
        if (!PyDict_CheckExact(lrec)
                || !exact_int(item(lrec, st->k[K_set]), 0, PY_SSIZE_T_MAX, &set)
                || set >= PyList_GET_SIZE(st->sets))
            return 0;
        srec = PyList_GET_ITEM(st->sets, set);
        if (!PyDict_CheckExact(srec)
                || !exact_int(item(srec, st->k[K_dtype]), INT32_MIN, INT32_MAX, &code))
            return 0;
    } else if (!lookup(st->dtypes, dt, &code)) {
        return 0;
    }
    for (d = 0; d < n; d++) {
        PyObject *pair = PyList_GET_ITEM(ap, d);
        if (!PyList_CheckExact(pair) || PyList_GET_SIZE(pair) != 2)
            return 0;
        if (!exact_int(PyList_GET_ITEM(pair, 0), d ? -BS_AP_STEP_LIMIT + 1 : 0,
                       BS_AP_STEP_LIMIT - 1, &step)
                || !exact_int(PyList_GET_ITEM(pair, 1), 1, BS_AP_NUM_MAX, &num))
            return 0;                  /* the Python path reports it, with its JSON path */
        o->step[d] = step;
        o->num[d] = num;
    }
    off = item(v, st->k[K_offset]);
    if (off != NULL && !exact_int(off, INT64_MIN, INT64_MAX, &o->offset))
        return 0;
    o->kind = is_reg ? st->reg_ap : st->physical;
    if (is_reg) {
        o->reg = (int32_t)reg;
        o->const_ap_offset = cao;
    }
    o->loc = (int32_t)loc;
    o->dtype = (int32_t)code;
    o->ndim = (int32_t)n;
    return 1;
}

/* A register by name (Resolver.reg): its index, or 0 = decline. */
static int reg_index(fl_state *st, PyObject *name, PyObject *regs, int64_t *reg)
{
    if (name == NULL || !valid_name(name) || !lookup(regs, name, reg))
        return 0;
    return *reg >= 0 && *reg < PyList_GET_SIZE(st->regs);
}

/* {kind: register_access | register, regref, dtype?}: Resolver.operand. */
static int register_access(fl_state *st, PyObject *v, PyObject *regs, bs_opnd *o)
{
    PyObject *dt;
    int64_t reg, code;
    if (!reg_index(st, item(v, st->k[K_regref]), regs, &reg))
        return 0;
    dt = item(v, st->k[K_dtype]);
    if (dt == NULL) {                           /* the register's dtype */
        PyObject *rrec = PyList_GET_ITEM(st->regs, reg);
        if (!PyDict_CheckExact(rrec)
                || !exact_int(item(rrec, st->k[K_dtype]), INT32_MIN, INT32_MAX, &code))
            return 0;
    } else if (!lookup(st->dtypes, dt, &code)) {
        return 0;
    }
    *o = st->opnd_tmpl;
    o->kind = st->reg_access;
    o->loc = (int32_t)reg;
    o->dtype = (int32_t)code;
    return 1;
}

/* {kind: imm_value, value, dtype?}: Resolver.operand (a boolean is the integer 0/1; an
** integer the walker takes only within int64, as the record's imm_bits holds it). */
static int imm_value(fl_state *st, PyObject *v, bs_opnd *o)
{
    PyObject *val = item(v, st->k[K_value]), *dt;
    int64_t iv = 0, code;
    double fv = 0.0;
    int is_int;
    if (val == NULL)
        return 0;
    if (val == Py_True || val == Py_False) {
        is_int = 1;
        iv = val == Py_True;
    } else if (PyLong_CheckExact(val)) {
        if (!exact_int(val, INT64_MIN, INT64_MAX, &iv))
            return 0;
        is_int = 1;
    } else if (PyFloat_CheckExact(val)) {
        is_int = 0;
        fv = PyFloat_AS_DOUBLE(val);
    } else {
        return 0;
    }
    dt = item(v, st->k[K_dtype]);
    if (dt == NULL)
        code = is_int ? st->int32 : st->float32;
    else if (!lookup(st->dtypes, dt, &code))
        return 0;
    *o = st->opnd_tmpl;
    o->kind = st->imm;
    o->dtype = (int32_t)code;
    o->imm = is_int ? (double)iv : fv;
    o->imm_is_int = is_int;
    /* int(value) when finite and below 2^63 in magnitude, else 0 */
    o->imm_bits = is_int ? iv : (isfinite(fv) && fabs(fv) < 9223372036854775808.0)
                  ? (int64_t)fv : 0;
    return 1;
}

/* One operand of ins/outs: the kinds the walker reads; 0 = decline. */
static int operand(fl_state *st, PyObject *v, const fl_names *nm, bs_opnd *o)
{
    PyObject *kind;
    if (!PyDict_CheckExact(v))
        return 0;
    kind = item(v, st->k[K_kind]);
    if (kind == NULL || !PyUnicode_CheckExact(kind))
        return 0;
    if (kind == st->physical_ap || PyUnicode_Compare(kind, st->physical_ap) == 0)
        return ap_operand(st, v, nm, 0, o);
    if (PyUnicode_Compare(kind, st->register_ap) == 0)
        return ap_operand(st, v, nm, 1, o);
    if (PyUnicode_Compare(kind, st->register_access) == 0
            || PyUnicode_Compare(kind, st->register_alias) == 0)
        return register_access(st, v, nm->regs, o);
    if (PyUnicode_Compare(kind, st->imm_value) == 0)
        return imm_value(st, v, o);
    return 0;
}

/* birsim's {type, id, mode, value[, target_core]} or the compiler's {from, id,
** wait_value} / {id, update_value}: _operands.Resolver._sync / _fast_sync. */
static int sync_entry(fl_state *st, PyObject *e, int wait, PyObject *regs, bs_sync *s)
{
    PyObject *mode, *type, *val;
    int64_t id, value, code, stype, core;
    int is_event;
    if (!PyDict_CheckExact(e))
        return 0;
    *s = st->sync_tmpl;
    mode = item(e, st->k[K_mode]);
    type = item(e, st->k[K_type]);
    if (mode == NULL) {                         /* the compiler's spelling */
        PyObject *given;
        if (type != NULL)
            return 0;
        val = item(e, st->k[wait ? K_wait_value : K_update_value]);
        if (val == NULL || (!wait && item(e, st->k[K_target_core]) != NULL))
            return 0;
        given = item(e, st->k[K_value]);
        if (given != NULL)
            val = given;
        if (!exact_int(item(e, st->k[K_id]), 0, 255, &id)
                || !exact_int(val, 0, UINT32_MAX, &value))    /* a semaphore value: uint32 */
            return 0;
        s->type = st->semaphore;
        s->id = (int32_t)id;
        s->value = value;
        s->mode = wait ? st->sem_ge_imm : st->sem_add_imm;
        return 1;
    }
    if (!lookup(wait ? st->waits : st->updates, mode, &code) || code < 0 || code > 63)
        return 0;
    is_event = (((wait ? st->evt_waits : st->evt_updates) >> code) & 1) != 0;
    {
        int64_t want = is_event ? st->event : st->semaphore;
        if (type == NULL)
            stype = want;
        else if (!lookup(st->synctypes, type, &stype))
            return 0;
        if (stype != want)
            return 0;
    }
    if (!exact_int(item(e, st->k[K_id]), 0, 255, &id))
        return 0;
    val = item(e, st->k[K_value]);
    if (val == NULL)
        value = (!wait && (code == st->sem_inc || code == st->sem_dec)) ? 1 : 0;
    else if (!exact_int(val, is_event ? INT64_MIN : 0, is_event ? INT64_MAX : UINT32_MAX,
                        &value))
        return 0;
    if (wait && code == st->sem_ge_reg) {          /* the register it compares with */
        int64_t reg;
        if (!reg_index(st, item(e, st->k[K_regref]), regs, &reg))
            return 0;
        s->reg = (int32_t)reg;
    }
    if (!wait) {
        PyObject *tc = item(e, st->k[K_target_core]);
        if (tc == NULL)
            core = -1;
        else if (!exact_int(tc, 0, INT32_MAX, &core))
            return 0;
        s->target_core = (int32_t)core;
    }
    s->type = (int32_t)stype;
    s->id = (int32_t)id;
    s->mode = (int32_t)code;
    s->value = value;
    return 1;
}

/* Every key of obj is one the walker reads, one the Python path ignores in silence, or an
** unmodelled key at its modelled value: _keys.check_keys. 1 = fine, 0 = decline,
** -1 = a Python error. */
static int check_keys(fl_state *st, fl_op *op, PyObject *obj)
{
    Py_ssize_t pos = 0;
    PyObject *key, *val;
    while (PyDict_Next(obj, &pos, &key, &val)) {
        PyObject *cls = PyDict_GetItemWithError(op->keyclass, key);
        long c;
        if (cls == NULL) {
            PyObject *r;
            if (PyErr_Occurred() || !PyUnicode_CheckExact(key)) {
                PyErr_Clear();
                return 0;
            }
            /* a key of no list: silent when no known key is near it (else it warns) */
            r = PyObject_CallFunctionObjArgs(st->classify, op->name, key, NULL);
            if (r == NULL)
                return -1;
            if (PyDict_SetItem(op->keyclass, key, r) < 0) {
                Py_DECREF(r);
                return -1;
            }
            cls = r;
            Py_DECREF(r);               /* the dict holds it */
        }
        if (PyLong_CheckExact(cls)) {
            c = PyLong_AsLong(cls);
            if (c == FL_DECLINE || c < 0 || c > FL_DECLINE)
                return 0;
            continue;
        }
        if (val != Py_None) {           /* UNMODELLED: ok(value) */
            PyObject *r = PyObject_CallOneArg(cls, val);
            int ok;
            if (r == NULL) {
                PyErr_Clear();
                return 0;
            }
            ok = PyObject_IsTrue(r);
            Py_DECREF(r);
            if (ok != 1) {
                PyErr_Clear();
                return 0;
            }
        }
    }
    return 1;
}

/* as_bool: true/false or the integers 0 and 1; 0 otherwise. */
static int exact_bool(PyObject *v, int64_t *out)
{
    if (v == Py_True || v == Py_False) {
        *out = v == Py_True;
        return 1;
    }
    return exact_int(v, 0, 1, out);
}

/* out0: the instruction's outs[0] record, or NULL without outs. */
static int params(fl_state *st, fl_op *op, PyObject *obj, bs_insn *in, const bs_opnd *out0)
{
    int p, j;
    for (p = 0; p < op->nparams; p++) {
        fl_param *fp = &op->params[p];
        PyObject *v = NULL;
        int64_t iv = fp->def_i;
        double fv = fp->def_f;
        if (fp->kind == FL_ACC_FLAGS) {
            /* accumulation_flag (0..3), else start_tensor_calc: true 2, false 1, absent 0 */
            v = item(obj, fp->keys[0]);
            if (v != NULL) {
                if (!exact_int(v, 0, 3, &iv))
                    return 0;
            } else if ((v = item(obj, fp->keys[1])) != NULL) {
                if (!exact_bool(v, &iv))
                    return 0;
                iv = iv ? 2 : 1;
            } else {
                iv = 0;
            }
            in->i[fp->index] = iv;
            continue;
        }
        for (j = 0; j < fp->nkeys && v == NULL; j++)
            v = item(obj, fp->keys[j]);
        if (v == NULL) {
            if (fp->required)
                return 0;
        } else if (fp->kind == FL_TABLE) {
            if (!lookup(fp->table, v, &iv))
                return 0;
        } else if (fp->kind == FL_BOOL || fp->kind == FL_NOT_BOOL) {
            if (!exact_bool(v, &iv))
                return 0;
            if (fp->kind == FL_NOT_BOOL)
                iv = !iv;
        } else if (fp->kind == FL_INT) {
            if (!exact_int(v, fp->lo, fp->hi, &iv))
                return 0;
        } else if (fp->kind == FL_RAW) {
            /* Memset's constant: a JSON float is a value, an integer the raw bits, which
            ** must fit outs[0]'s item size (_insns._raw_constant) */
            if (PyFloat_CheckExact(v)) {
                in->i[fp->flag] = 1;
                in->f[fp->value] = PyFloat_AS_DOUBLE(v);
                continue;
            }
            if (!exact_int(v, 0, fp->hi, &iv))
                return 0;
            if (out0 != NULL) {
                int size = out0->dtype >= 0 && out0->dtype < FL_MAX_DTYPES
                         ? st->dtype_size[out0->dtype] : 0;
                if (size < 1 || (size < 8 && iv >= (INT64_C(1) << (8 * size))))
                    return 0;
            }
        } else {                        /* FL_NUM: as_num then float() */
            if (PyFloat_CheckExact(v))
                fv = PyFloat_AS_DOUBLE(v);
            else if (exact_int(v, INT64_MIN, INT64_MAX, &iv))
                fv = (double)iv;
            else
                return 0;
        }
        if (fp->slot == 'i')
            in->i[fp->index] = iv;
        else
            in->f[fp->index] = fv;
    }
    return 1;
}

/* as_name: a non-empty str without NUL that encodes to UTF-8 (no lone surrogate). */
static int valid_name(PyObject *name)
{
    const char *utf8;
    Py_ssize_t len;
    if (!PyUnicode_CheckExact(name) || PyUnicode_GET_LENGTH(name) == 0)
        return 0;
    utf8 = PyUnicode_AsUTF8AndSize(name, &len);
    if (utf8 == NULL) {
        PyErr_Clear();
        return 0;
    }
    return memchr(utf8, 0, (size_t)len) == NULL;
}

/* 1: the instruction is understood and its records are in *r; 0: decline; -1: error. */
static int read_insn(fl_state *st, PyObject *obj, const fl_names *nm, fl_insn *r,
                     fl_op **opp)
{
    static const int opcode_keys[3] = {K_opcode, K_type, K_instruction_type};
    PyObject *name, *v = NULL, *idx;
    int64_t code, k;
    Py_ssize_t i, n;
    int side, wait, rc;
    fl_op *op;
    if (!PyDict_CheckExact(obj))
        return 0;
    name = item(obj, st->k[K_name]);
    if (name == NULL || !valid_name(name))
        return 0;
    for (i = 0; i < 3 && v == NULL; i++)
        v = item(obj, st->k[opcode_keys[i]]);
    if (v == NULL || !PyUnicode_CheckExact(v))
        return 0;
    idx = PyDict_GetItemWithError(st->ops_index, v);
    if (idx == NULL || !exact_int(idx, 0, st->nops - 1, &k)) {
        PyErr_Clear();
        return 0;
    }
    *opp = op = &st->ops[k];
    r->in = st->insn_tmpl;
    r->in.op = op->code;
    v = item(obj, st->k[K_engine]);
    code = 0;
    if (v != NULL && !lookup(st->engines, v, &code))
        return 0;
    r->in.engine = (int32_t)code;
    r->nopnd = 0;
    for (side = 0; side < 2; side++) {
        PyObject *lst = item(obj, st->k[side ? K_outs : K_ins]);
        n = 0;
        if (lst != NULL) {
            if (!PyList_CheckExact(lst))
                return 0;
            n = PyList_GET_SIZE(lst);
            if (n > st->max_operands || n > op->most[side])
                return 0;
            for (i = 0; i < n; i++)
                if (!operand(st, PyList_GET_ITEM(lst, i), nm, &r->opnds[r->nopnd++]))
                    return 0;
        }
        if (side)
            r->in.nout = (int32_t)n;
        else
            r->in.nin = (int32_t)n;
    }
    r->nsync = 0;
    v = item(obj, st->k[K_sync_info]);
    if (v != NULL && !PyDict_CheckExact(v))
        return 0;
    for (wait = 1; wait >= 0; wait--) {
        PyObject *lst = v == NULL ? NULL : item(v, st->k[wait ? K_on_wait : K_on_update]);
        n = 0;
        if (lst != NULL) {
            if (!PyList_CheckExact(lst))
                return 0;
            n = PyList_GET_SIZE(lst);
            if (n > FL_MAX_SYNCS - r->nsync)
                return 0;
            for (i = 0; i < n; i++)
                if (!sync_entry(st, PyList_GET_ITEM(lst, i), wait, nm->regs,
                                &r->syncs[r->nsync++]))
                    return 0;
        }
        if (wait)
            r->in.nwait = (int32_t)n;
        else
            r->in.nupd = (int32_t)n;
    }
    rc = check_keys(st, op, obj);
    if (rc <= 0)
        return rc;
    return params(st, op, obj, &r->in, r->in.nout > 0 ? &r->opnds[r->in.nin] : NULL);
}

static int buf_put(fl_buf *b, const void *rec, size_t size, Py_ssize_t count)
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
static const size_t rec_size[3] = {sizeof(bs_insn), sizeof(bs_opnd), sizeof(bs_sync)};

/* Blank slots up to record `upto` of table `which`: the records the Python path appended
** to its list since the walker last put one. */
static int buf_pad(fl_state *st, int which, Py_ssize_t upto)
{
    const void *tmpl[3] = {&st->insn_tmpl, &st->opnd_tmpl, &st->sync_tmpl};
    fl_buf *b = &st->bufs[which];
    if (b->given) {
        PyErr_SetString(PyExc_ValueError, "_fast_block/_fast_fill: the table was already filled");
        return -1;
    }
    while (b->count < upto)
        if (buf_put(b, tmpl[which], rec_size[which], 1) < 0)
            return -1;
    return 0;
}

static int append_nones(PyObject *list, Py_ssize_t n)
{
    Py_ssize_t i;
    for (i = 0; i < n; i++)
        if (PyList_Append(list, Py_None) < 0)
            return -1;
    return 0;
}

/* Tables.string(name): the offset of name in the string table (interned). */
static int intern_name(fl_state *st, PyObject *name, int32_t *out)
{
    PyObject *off = PyDict_GetItemWithError(st->strings, name);
    const char *utf8;
    Py_ssize_t len, at;
    int64_t x;
    if (off != NULL) {
        if (!exact_int(off, 0, INT32_MAX, &x))
            return 0;
        *out = (int32_t)x;
        return 1;
    }
    if (PyErr_Occurred())
        return -1;
    utf8 = PyUnicode_AsUTF8AndSize(name, &len);      /* valid_name() passed */
    if (utf8 == NULL)
        return -1;
    at = PyByteArray_GET_SIZE(st->sbuf);
    if (at > INT32_MAX - len - 1)
        return 0;
    if (PyByteArray_Resize(st->sbuf, at + len + 1) < 0)
        return -1;
    memcpy(PyByteArray_AS_STRING(st->sbuf) + at, utf8, (size_t)len + 1);
    off = PyLong_FromSsize_t(at);
    if (off == NULL || PyDict_SetItem(st->strings, name, off) < 0) {
        Py_XDECREF(off);
        return -1;
    }
    Py_DECREF(off);
    *out = (int32_t)at;
    return 1;
}

/* The walker checks for signals (Ctrl-C) once per this many instructions. */
#define FL_SIGNAL_EVERY 256

static PyObject *fast_block(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    fl_state *st;
    PyObject *insns;
    fl_names nm;
    Py_ssize_t k, n;
    long long start, block, func;
    fl_insn *r;
    (void)self;
    if (nargs != 9) {
        PyErr_SetString(PyExc_TypeError, "_fast_block(state, insns, start, block, func, locs, "
                        "regs, sets, seen) takes 9 arguments");
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
    start = PyLong_AsLongLong(args[2]);
    block = PyLong_AsLongLong(args[3]);
    func = PyLong_AsLongLong(args[4]);
    if (PyErr_Occurred())
        return NULL;
    if (!PyList_Check(insns) || !PyDict_Check(nm.locs) || !PyDict_Check(nm.regs)
            || !PyDict_Check(nm.sets) || !PySet_Check(nm.seen) || start < 0 || block < 0
            || block > INT32_MAX || func < 0 || func > INT32_MAX) {
        PyErr_SetString(PyExc_TypeError, "_fast_block: bad arguments");
        return NULL;
    }
    if (buf_pad(st, 0, PyList_GET_SIZE(st->insn_recs)) < 0
            || buf_pad(st, 1, PyList_GET_SIZE(st->opnd_recs)) < 0
            || buf_pad(st, 2, PyList_GET_SIZE(st->sync_recs)) < 0)
        return NULL;
    r = PyMem_Malloc(sizeof *r);
    if (r == NULL)
        return PyErr_NoMemory();
    n = PyList_GET_SIZE(insns);
    for (k = (Py_ssize_t)start; k < n; k++) {
        PyObject *obj = PyList_GET_ITEM(insns, k);
        fl_op *op = NULL;
        int rc;
        if ((k - (Py_ssize_t)start) % FL_SIGNAL_EVERY == FL_SIGNAL_EVERY - 1
                && PyErr_CheckSignals() < 0)
            goto error;                 /* Ctrl-C: ~1 ms of records between checks */
        Py_INCREF(obj);                 /* classify/ok callbacks run Python code */
        rc = read_insn(st, obj, &nm, r, &op);
        if (rc > 0)
            rc = intern_name(st, item(obj, st->k[K_name]), &r->in.name);
        Py_DECREF(obj);
        if (rc < 0)
            goto error;
        if (rc == 0 || PyList_GET_SIZE(insns) != n)
            break;
        r->in.func = (int32_t)func;
        r->in.block = (int32_t)block;
        r->in.opnd = (int32_t)PyList_GET_SIZE(st->opnd_recs);
        r->in.sync = (int32_t)PyList_GET_SIZE(st->sync_recs);
        if (buf_put(&st->bufs[0], &r->in, sizeof r->in, 1) < 0
                || buf_put(&st->bufs[1], r->opnds, sizeof r->opnds[0], r->nopnd) < 0
                || buf_put(&st->bufs[2], r->syncs, sizeof r->syncs[0], r->nsync) < 0
                || append_nones(st->insn_recs, 1) < 0 || append_nones(st->infos, 1) < 0
                || append_nones(st->opnd_recs, r->nopnd) < 0
                || append_nones(st->sync_recs, r->nsync) < 0)
            goto error;
        st->bufs[0].own += 1;
        st->bufs[1].own += r->nopnd;
        st->bufs[2].own += r->nsync;
    }
    PyMem_Free(r);
    return PyLong_FromSsize_t(k);
error:
    PyMem_Free(r);
    return NULL;
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

static PyType_Spec Records_spec = {
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
static PyObject *fast_fill(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
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
    if (which < 0 || which > 2 || !PyList_Check(recs)) {
        PyErr_SetString(PyExc_ValueError, "_fast_fill: bad table or record list");
        return NULL;
    }
    b = &st->bufs[which];
    n = PyList_GET_SIZE(recs);
    if (buf_pad(st, (int)which, n) < 0)
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
static PyObject *trim_heap(PyObject *self, PyObject *unused)
{
    int released = 0;
    (void)self;
    (void)unused;
#if defined(__GLIBC__)
    released = malloc_trim(0);
#endif
    return PyBool_FromLong(released);
}

/* {=== JSON split: a large document parsed in interruptible pieces ===} */

/* _json_split(buf, piece) -> node or None. msgspec parses a whole buffer in one call
** that never checks for signals (a 248 MB file: seconds Ctrl-C cannot interrupt), so the
** loader parses a large document in pieces: this scanner finds its structure (checking
** for signals every FL_SPLIT_SIGNAL bytes) and the loader parses each piece and joins
** them (birsim/loader.py _parse_pieces). A container whose text holds more than `piece`
** bytes of members is a node (kind, segments): kind 0 an object, 1 an array; a segment
** is (start, end), the text of consecutive members (at most about `piece` bytes, to be
** parsed wrapped in {} or []), or a large member: (node,) in an array, (key_start,
** key_end, node) in an object. The scanner checks only the structure (strings, brackets,
** commas and colons); the pieces' parser checks everything else. None: the scanner does
** not take this text (not one container, a structure error, nested deeper than
** FL_SPLIT_DEPTH): the loader parses it whole, as before. */
#define FL_SPLIT_DEPTH  256
#define FL_SPLIT_SIGNAL ((size_t)1 << 20)

typedef struct fl_frame {
    int        kind;              /* 0 object, 1 array */
    PyObject  *segs;              /* list of segments, NULL while none was needed */
    Py_ssize_t run0, run1;        /* text of the current run of small members (run0 < 0: none) */
    Py_ssize_t key0, key1;        /* the current member's key (objects) */
    Py_ssize_t mem0;              /* where the current member began */
} fl_frame;

static int split_flush(fl_frame *f)
{
    PyObject *seg;
    int rc;
    if (f->run0 < 0)
        return 0;
    if (f->segs == NULL && (f->segs = PyList_New(0)) == NULL)
        return -1;
    seg = Py_BuildValue("(nn)", f->run0, f->run1);
    if (seg == NULL)
        return -1;
    rc = PyList_Append(f->segs, seg);
    Py_DECREF(seg);
    f->run0 = -1;
    return rc;
}

/* The member [mem0, end) of f closed; node is the member's node when it is large. */
static int split_member(fl_frame *f, Py_ssize_t end, PyObject *node, Py_ssize_t piece)
{
    PyObject *seg;
    int rc;
    if (node == NULL) {
        if (f->run0 < 0)
            f->run0 = f->mem0;
        f->run1 = end;
        return f->run1 - f->run0 > piece ? split_flush(f) : 0;
    }
    if (split_flush(f) < 0)
        return -1;
    if (f->segs == NULL && (f->segs = PyList_New(0)) == NULL)
        return -1;
    seg = f->kind ? PyTuple_Pack(1, node) : Py_BuildValue("(nnO)", f->key0, f->key1, node);
    if (seg == NULL)
        return -1;
    rc = PyList_Append(f->segs, seg);
    Py_DECREF(seg);
    return rc;
}

static Py_ssize_t skip_ws(const unsigned char *s, Py_ssize_t i, Py_ssize_t n)
{
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
        i++;
    return i;
}

/* The end of the string starting at s[i] == '"' (one past its closing quote), or -1. */
static Py_ssize_t skip_string(const unsigned char *s, Py_ssize_t i, Py_ssize_t n)
{
    for (i++; i < n; ) {
        const unsigned char *q = memchr(s + i, '"', (size_t)(n - i));
        Py_ssize_t j, bs = 0;
        if (q == NULL)
            return -1;
        j = q - s;
        while (j - bs - 1 >= i && s[j - bs - 1] == '\\')
            bs++;                           /* an odd run of backslashes escapes it */
        if (bs % 2 == 0)
            return j + 1;
        i = j + 1;
    }
    return -1;
}

static PyObject *json_split(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    fl_frame stack[FL_SPLIT_DEPTH];
    Py_buffer view;
    const unsigned char *s;
    Py_ssize_t i, n, piece, depth = 0, k;
    size_t next_check = FL_SPLIT_SIGNAL;
    PyObject *out = NULL, *node = NULL;
    int ok = 0;
    (void)self;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "_json_split(buf, piece) takes 2 arguments");
        return NULL;
    }
    piece = PyLong_AsSsize_t(args[1]);
    if (piece == -1 && PyErr_Occurred())
        return NULL;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    s = view.buf;
    n = view.len;
    i = skip_ws(s, 0, n);
    if (i >= n || (s[i] != '{' && s[i] != '['))
        goto done;                                  /* not one container: parse it whole */
    for (;;) {
        /* at a value */
        if ((size_t)i >= next_check) {
            next_check = (size_t)i + FL_SPLIT_SIGNAL;
            if (PyErr_CheckSignals() < 0)
                goto done;
        }
        if (i >= n)
            goto done;
        if (s[i] == '{' || s[i] == '[') {
            fl_frame *f;
            if (depth == FL_SPLIT_DEPTH)
                goto done;
            f = &stack[depth++];
            f->kind = s[i] == '[';
            f->segs = NULL;
            f->run0 = -1;
            i = skip_ws(s, i + 1, n);
            if (i < n && s[i] == (f->kind ? ']' : '}')) {
                i++;                                /* empty: a small member */
                Py_CLEAR(node);
                goto closed;
            }
            goto member;
        }
        Py_CLEAR(node);
        if (s[i] == '"') {
            if ((i = skip_string(s, i, n)) < 0)
                goto done;
        } else {
            Py_ssize_t j = i;
            while (i < n && s[i] != ',' && s[i] != ']' && s[i] != '}' && s[i] != ' '
                    && s[i] != '\t' && s[i] != '\n' && s[i] != '\r')
                i++;
            if (i == j)
                goto done;
        }
        if (depth == 0)
            goto done;                              /* unreachable: the root is a container */
        goto after;
member:
        /* at a member of stack[depth - 1] (not its closer) */
        stack[depth - 1].mem0 = i;
        if (!stack[depth - 1].kind) {
            if (i >= n || s[i] != '"')
                goto done;
            stack[depth - 1].key0 = i;
            if ((i = skip_string(s, i, n)) < 0)
                goto done;
            stack[depth - 1].key1 = i;
            i = skip_ws(s, i, n);
            if (i >= n || s[i] != ':')
                goto done;
            i = skip_ws(s, i + 1, n);
        }
        continue;
closed:
        /* stack[depth - 1] closed at i: pop it, a member of its parent */
        {
            fl_frame *f = &stack[depth - 1];
            if (f->segs != NULL) {                  /* a large container: a node */
                if (split_flush(f) < 0)
                    goto done;
                node = Py_BuildValue("(iN)", f->kind, f->segs);
                f->segs = NULL;
                if (node == NULL)
                    goto done;
            }
            depth--;
            if (depth == 0) {
                i = skip_ws(s, i, n);
                if (i != n || node == NULL)
                    goto done;                      /* trailing text, or a small document */
                out = node;
                node = NULL;
                ok = 1;
                goto done;
            }
        }
after:
        /* a member of stack[depth - 1] ended at i (node: its node when large) */
        if (split_member(&stack[depth - 1], i, node, piece) < 0)
            goto done;
        Py_CLEAR(node);
        i = skip_ws(s, i, n);
        if (i < n && s[i] == ',') {
            i = skip_ws(s, i + 1, n);
            if (i < n && s[i] == (stack[depth - 1].kind ? ']' : '}'))
                goto done;                          /* a trailing comma */
            goto member;
        }
        if (i < n && s[i] == (stack[depth - 1].kind ? ']' : '}')) {
            i++;
            goto closed;
        }
        goto done;
    }
done:
    Py_XDECREF(node);
    for (k = 0; k < depth; k++)
        Py_XDECREF(stack[k].segs);
    PyBuffer_Release(&view);
    if (ok)
        return out;
    if (PyErr_Occurred())
        return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef fastload_methods[] = {
    {"_trim_heap", trim_heap, METH_NOARGS,
     "_trim_heap($module, /)\n--\n\nReturn the C heap's free pages to the system after a large "
     "load (glibc malloc_trim; False elsewhere)."},
    {"_fast_new", fast_new, METH_O,
     "_fast_new($module, config, /)\n--\n\nThe loader's fast-path state (birsim/_fastload.py builds "
     "the config)."},
    {"_fast_block", (PyCFunction)(void (*)(void))fast_block, METH_FASTCALL,
     "_fast_block($module, state, insns, start, block, func, locs, regs, sets, seen, /)\n--\n\nLoad insns[start:] while "
     "the fast path understands them; return the index of the first it declined."},
    {"_json_split", (PyCFunction)(void (*)(void))json_split, METH_FASTCALL,
     "_json_split($module, buf, piece, /)\n--\n\nThe structure of a large JSON document as pieces "
     "of about piece bytes to parse one by one (None: parse it whole)."},
    {"_fast_fill", (PyCFunction)(void (*)(void))fast_fill, METH_FASTCALL,
     "_fast_fill($module, state, table, recs, /)\n--\n\nThe table's records as a buffer in the C "
     "layout (the walker's where recs holds None) and the indices of the other records."},
    {NULL, NULL, 0, NULL}
};

int bs_py_add_fastload(PyObject *module)
{
    bs_modstate *ms = PyModule_GetState(module);
    ms->records_type = PyType_FromModuleAndSpec(module, &Records_spec, NULL);
    if (ms->records_type == NULL)
        return -1;
    return PyModule_AddFunctions(module, fastload_methods);
}
