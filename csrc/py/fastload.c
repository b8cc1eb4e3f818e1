/* py/fastload.c -- the loader's fast path: fill instruction, operand and sync records of
** common instructions straight from the parsed JSON objects (tensor access patterns,
** registers and immediates as operands; birsim/_load/fastload.py lists what it takes).
**
** The Python loader (birsim/_load/: passes.py, insns.py, operands.py) is the specification.
** This walker takes an instruction only when every key it carries is one it reads the
** same way (the per-opcode tables come from birsim/_load/fastload.py, built from the BS_PARAM
** rows, the rows of birsim/_load/opcodes.py); anything else, and every value the
** Python path would reject, makes it decline the instruction, which the Python path then
** loads (and reports with its JSON path). Declining never leaves a trace: records are
** built locally and committed only when the whole instruction was understood.
**
** Records go to packed buffers of the C structs (ir/program.h), one per table, that
** become the final tables' memory (a Records object); the Python record lists get a
** None placeholder per record. Buffer record i is always record i of its list: a
** record the Python path appended between two walks gets a blank slot before the
** walker puts its next one (and at _fast_fill), which the loader fills from the dict.
** The state the walker reads is built by fastload_cfg.c, the buffers and the Records by
** fastload_rec.c (fastload.h). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <string.h>
#include "fastload.h"

/* {=== reading values (every check mirrors the Python path; 0 = decline) ===} */

/* A Python call failed: decline (0; the Python path says what is wrong), unless with no
** Exception (a Ctrl-C whose handler ran in the call): kept, it fails the load (-1). */
static int decline_unless_interrupted(void)
{
    if (!PyErr_ExceptionMatches(PyExc_Exception))
        return -1;
    PyErr_Clear();
    return 0;
}

/* The value cache's slot for str v (length, first and last characters; not its table:
** a string of two tables, rare, takes turns in one slot). */
static inline size_t vslot(PyObject *v, Py_ssize_t len)
{
    size_t h = (size_t)len * 31u;
    if (len > 0)
        h += PyUnicode_READ_CHAR(v, 0) * 7u + PyUnicode_READ_CHAR(v, len - 1);
    return h & (FL_VCACHE - 1);
}

/* table[v] for an exact str v; 0 when v is not a str or not in the table. The values a
** walk meets repeat (names of locations, dtypes, engines, modes), each a new object:
** st->vc, when set, remembers the codes found by content (equal strs have the same kind
** and bytes), which spares hashing each anew. */
static int lookup(const fl_state *st, PyObject *table, PyObject *v, int64_t *out)
{
    PyObject *code;
    fl_vcache *e = NULL;
    Py_ssize_t len;
    size_t slot = 0;
    if (!PyUnicode_CheckExact(v))
        return 0;
    if (st->vc != NULL) {
        len = PyUnicode_GET_LENGTH(v);
        slot = vslot(v, len);
        e = &st->vc[slot];
        if (e->table == table && e->str != NULL && (e->str == v
                || (PyUnicode_GET_LENGTH(e->str) == len
                    && PyUnicode_KIND(e->str) == PyUnicode_KIND(v)
                    && memcmp(PyUnicode_DATA(e->str), PyUnicode_DATA(v),
                              (size_t)len * PyUnicode_KIND(v)) == 0))) {
            *out = e->code;
            return 1;
        }
    }
    code = PyDict_GetItemWithError(table, v);
    if (code == NULL) {
        PyErr_Clear();
        return 0;
    }
    if (!exact_int(code, INT32_MIN, INT32_MAX, out))
        return 0;
    if (e != NULL) {
        if (e->str == NULL)
            st->r->vused[st->r->nvused++] = (int)slot;
        e->table = table;
        Py_XSETREF(e->str, Py_NewRef(v));
        e->code = *out;
    }
    return 1;
}

/* {=== key ids: one pass over a dict (fastload.h fl_keys, fl_scan) ===} */

fl_insn *bs_fl_scratch(fl_state *st)
{
    if (st->r == NULL && (st->r = PyMem_Calloc(1, sizeof *st->r)) == NULL)
        PyErr_NoMemory();
    return st->r;
}

void bs_fl_scan_done(fl_insn *r)
{
    int j;
    for (j = 0; j < r->nvused; j++)
        Py_CLEAR(r->vc[r->vused[j]].str);
    r->nvused = 0;
    for (j = 0; j < r->kc.nused; j++)
        Py_CLEAR(r->kc.ptr[r->kc.used[j]]);
    r->kc.nused = 0;
}

/* File d's values in sc by key id (keep: and its entries, at most FL_MAX_ENTRIES). 1, or
** 0 = decline (d not an exact dict, a key not an exact str, too many entries), -1 with
** a Python error. */
static int scan(fl_state *st, PyObject *d, fl_scan *sc, int keep)
{
    Py_ssize_t pos = 0;
    PyObject *key, *val;
    if (!PyDict_CheckExact(d))
        return 0;
    if (++sc->cur == 0) {                       /* stamps wrapped: all stale */
        memset(sc->stamp, 0, sizeof sc->stamp);
        sc->cur = 1;
    }
    sc->n = 0;
    while (PyDict_Next(d, &pos, &key, &val)) {
        int id;
        if (!PyUnicode_CheckExact(key))
            return 0;
        id = key_id(st->keys, st->kc, key);
        if (id < FL_NOID)
            return -1;
        if (keep) {
            if (sc->n == FL_MAX_ENTRIES)
                return 0;
            sc->ekey[sc->n] = key;
            sc->evalue[sc->n] = val;
            sc->eid[sc->n++] = id;
        }
        if (id >= 0) {
            sc->val[id] = val;
            sc->stamp[id] = sc->cur;
        }
    }
    return 1;
}

/* {=== one instruction ===} */




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
        found = lookup(st, nm->locs, stem, loc);
        Py_DECREF(stem);
        if (found)
            return *loc >= 0 && *loc < PyList_GET_SIZE(st->locs);
    }
    if (!lookup(st, nm->sets, ref, &set) || set < 0 || set >= PyList_GET_SIZE(st->sets))
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
static int ap_operand(fl_state *st, const fl_scan *v, const fl_names *nm, int is_reg,
                      bs_opnd *o)
{
    PyObject *ref, *ap, *dt, *off;
    Py_ssize_t d, n;
    int64_t loc, code, step, num, reg = -1, cao = 0;
    ref = sget(v, K_memref);
    if (ref != NULL) {
        if (!PyUnicode_CheckExact(ref) || !lookup(st, nm->locs, ref, &loc) || loc < 0
                || loc >= PyList_GET_SIZE(st->locs))
            return 0;
    } else if ((ref = sget(v, K_memsetref)) == NULL || !memsetref(st, ref, nm, &loc)) {
        return 0;
    }
    if (is_reg) {
        PyObject *name = sget(v, K_reg_ap_offset), *c;
        if (name == NULL) {
            int seen;
            name = sget(v, K_regref);
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
        c = sget(v, K_const_ap_offset);
        if (c != NULL && !exact_int(c, INT64_MIN, INT64_MAX, &cao))
            return 0;
    }
    ap = sget(v, K_ap);
    if (ap == NULL || !PyList_CheckExact(ap))
        return 0;
    n = PyList_GET_SIZE(ap);
    if (n < 1 || n > st->max_dims)
        return 0;
    *o = st->opnd_tmpl;
    dt = sget(v, K_dtype);
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
    } else if (!lookup(st, st->dtypes, dt, &code)) {
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
    off = sget(v, K_offset);
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
    if (name == NULL || !bs_fl_valid_name(name) || !lookup(st, regs, name, reg))
        return 0;
    return *reg >= 0 && *reg < PyList_GET_SIZE(st->regs);
}

/* {kind: register_access | register, regref, dtype?}: Resolver.operand. */
static int register_access(fl_state *st, const fl_scan *v, PyObject *regs, bs_opnd *o)
{
    PyObject *dt;
    int64_t reg, code;
    if (!reg_index(st, sget(v, K_regref), regs, &reg))
        return 0;
    dt = sget(v, K_dtype);
    if (dt == NULL) {                           /* the register's dtype */
        PyObject *rrec = PyList_GET_ITEM(st->regs, reg);
        if (!PyDict_CheckExact(rrec)
                || !exact_int(item(rrec, st->k[K_dtype]), INT32_MIN, INT32_MAX, &code))
            return 0;
    } else if (!lookup(st, st->dtypes, dt, &code)) {
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
static int imm_value(fl_state *st, const fl_scan *v, bs_opnd *o)
{
    PyObject *val = sget(v, K_value), *dt;
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
    dt = sget(v, K_dtype);
    if (dt == NULL)
        code = is_int ? st->int32 : st->float32;
    else if (!lookup(st, st->dtypes, dt, &code))
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
static int operand(fl_state *st, PyObject *d, const fl_names *nm, fl_scan *v, bs_opnd *o)
{
    PyObject *kind;
    int rc = scan(st, d, v, 0);
    if (rc <= 0)
        return rc;
    kind = sget(v, K_kind);
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
static int sync_entry(fl_state *st, PyObject *d, int wait, PyObject *regs, fl_scan *e,
                      bs_sync *s)
{
    PyObject *mode, *type, *val;
    int64_t id, value, code, stype, core;
    int is_event, rc = scan(st, d, e, 0);
    if (rc <= 0)
        return rc;
    *s = st->sync_tmpl;
    mode = sget(e, K_mode);
    type = sget(e, K_type);
    if (mode == NULL) {                         /* the compiler's spelling */
        PyObject *given;
        if (type != NULL)
            return 0;
        val = sget(e, wait ? K_wait_value : K_update_value);
        if (val == NULL || (!wait && sget(e, K_target_core) != NULL))
            return 0;
        given = sget(e, K_value);
        if (given != NULL)
            val = given;
        if (!exact_int(sget(e, K_id), 0, 255, &id)
                || !exact_int(val, 0, UINT32_MAX, &value))    /* a semaphore value: uint32 */
            return 0;
        s->type = st->semaphore;
        s->id = (int32_t)id;
        s->value = value;
        s->mode = wait ? st->sem_ge_imm : st->sem_add_imm;
        return 1;
    }
    if (!lookup(st, wait ? st->waits : st->updates, mode, &code) || code < 0 || code > 63)
        return 0;
    is_event = (((wait ? st->evt_waits : st->evt_updates) >> code) & 1) != 0;
    {
        int64_t want = is_event ? st->event : st->semaphore;
        if (type == NULL)
            stype = want;
        else if (!lookup(st, st->synctypes, type, &stype))
            return 0;
        if (stype != want)
            return 0;
    }
    if (!exact_int(sget(e, K_id), 0, 255, &id))
        return 0;
    val = sget(e, K_value);
    if (val == NULL)
        value = (!wait && (code == st->sem_inc || code == st->sem_dec)) ? 1 : 0;
    else if (!exact_int(val, is_event ? INT64_MIN : 0, is_event ? INT64_MAX : UINT32_MAX,
                        &value))
        return 0;
    if (wait && code == st->sem_ge_reg) {          /* the register it compares with */
        int64_t reg;
        if (!reg_index(st, sget(e, K_regref), regs, &reg))
            return 0;
        s->reg = (int32_t)reg;
    }
    if (!wait) {
        PyObject *tc = sget(e, K_target_core);
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

/* Every key of obj (its entries in sc) is one the walker reads, one the Python path
** ignores in silence, or an unmodelled key at its modelled value: _keys.check_keys. A
** key's class comes from op->kcls by its id once met (keyclass otherwise: the memoised
** classify for a key of no list; an UNMODELLED key's ok(value) every time). 1 = fine,
** 0 = decline, -1 = a Python error. */
static int check_keys(fl_state *st, fl_op *op, const fl_scan *sc)
{
    int i;
    for (i = 0; i < sc->n; i++) {
        PyObject *key = sc->ekey[i], *val = sc->evalue[i], *cls;
        int id = sc->eid[i];
        long c;
        if (id >= 0 && op->kcls[id] >= 0) {
            if (op->kcls[id] == FL_DECLINE)
                return 0;
            continue;
        }
        cls = PyDict_GetItemWithError(op->keyclass, key);
        if (cls == NULL) {
            PyObject *r;
            if (PyErr_Occurred()) {
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
            if (c < 0 || c >= FL_NCLASSES) {
                PyErr_Clear();
                return 0;
            }
            if (id >= 0)
                op->kcls[id] = (signed char)c;
            if (c == FL_DECLINE)
                return 0;
            continue;
        }
        if (val != Py_None) {           /* UNMODELLED: ok(value) */
            PyObject *r = PyObject_CallOneArg(cls, val);
            int ok = r != NULL ? PyObject_IsTrue(r) : -1;
            Py_XDECREF(r);
            if (ok != 1)                /* the Python path judges the value again */
                return ok < 0 ? decline_unless_interrupted() : 0;
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

/* FL_NUM's reading (as_num then float()): a float, or an integer within int64. */
static int exact_num(PyObject *v, double *out)
{
    int64_t iv;
    if (PyFloat_CheckExact(v)) {
        *out = PyFloat_AS_DOUBLE(v);
        return 1;
    }
    if (!exact_int(v, INT64_MIN, INT64_MAX, &iv))
        return 0;
    *out = (double)iv;
    return 1;
}

/* The engine accumulator (FL_ACC, _insns._accumulator): without any of its keys and an
** Idle default the slots stay the template's; else the command (default: fp->def_i),
** reduce_op (default fp->def_op; a fold op unless the command is Idle) and reduce_init;
** LoadAccumulate needs its start (ins[fp->lo] or reduce_init). 1, or 0: decline. */
static int acc_param(const fl_state *st, const fl_param *fp, const fl_scan *obj,
                     bs_insn *in)
{
    PyObject *v[5];
    int64_t cmd = fp->def_i, op = fp->def_op;
    double init = 0.0;
    int j, any = 0;
    for (j = 0; j < 5; j++) {
        v[j] = sget(obj, fp->kid[j]);
        any |= v[j] != NULL;
    }
    if (!any && fp->def_i == fp->idle)
        return 1;
    for (j = 0; j < 3 && v[j] == NULL; j++)
        ;
    if (j < 3 && !lookup(st, fp->table, v[j], &cmd))
        return 0;
    if (v[3] != NULL && !lookup(st, fp->ops, v[3], &op))
        return 0;
    if (cmd != fp->idle && (op < 0 || op > 63 || !((fp->fold_ops >> op) & 1)))
        return 0;
    if (v[4] != NULL && !exact_num(v[4], &init))
        return 0;
    if (cmd == fp->hi && v[4] == NULL && in->nin <= fp->lo)
        return 0;
    in->i[fp->index] = cmd;
    in->i[fp->flag] = op;
    in->f[fp->value] = init;
    return 1;
}

/* FL_ILIST: a list of exact integers within [fp->lo, fp->hi] (int_list), none within
** [fp->hole_lo, fp->hole_hi], fp->count of them unless it is -1 (StreamShuffle's mask);
** width 2: a list of [a, b] pairs with b >= fp->second_lo (Iota's pattern), flattened
** in pass 2. Its length in in->nlist, the JSON list in *list (NULL when empty:
** list/nlist stay 0). 1, or 0: decline. */
static int ilist_param(const fl_param *fp, PyObject *v, bs_insn *in, PyObject **list)
{
    Py_ssize_t i, j, n;
    int64_t x;
    if (!PyList_CheckExact(v) || (n = PyList_GET_SIZE(v)) > INT32_MAX / 2
            || (fp->count >= 0 && n != fp->count))
        return 0;
    for (i = 0; i < n; i++) {
        PyObject *e = PyList_GET_ITEM(v, i);
        if (fp->width == 0) {
            if (!exact_int(e, fp->lo, fp->hi, &x) || (x >= fp->hole_lo && x <= fp->hole_hi))
                return 0;
            continue;
        }
        if (!PyList_CheckExact(e) || PyList_GET_SIZE(e) != fp->width)
            return 0;
        for (j = 0; j < fp->width; j++)
            if (!exact_int(PyList_GET_ITEM(e, j), j == fp->width - 1 ? fp->second_lo : fp->lo,
                           fp->hi, &x))
                return 0;
    }
    in->nlist = (int32_t)(n * (fp->width ? fp->width : 1));
    *list = n > 0 ? v : NULL;
    return 1;
}

/* out0: the instruction's outs[0] record, or NULL without outs; *list: an FL_ILIST
** row's list (fastload_blk.c hands it to Tables.fast_lists). */
static int params(fl_state *st, fl_op *op, const fl_scan *obj, bs_insn *in,
                  const bs_opnd *out0, PyObject **list)
{
    int p, j;
    for (p = 0; p < op->nparams; p++) {
        fl_param *fp = &op->params[p];
        PyObject *v = NULL;
        int64_t iv = fp->def_i;
        double fv = fp->def_f;
        if (fp->kind == FL_ACC) {
            if (!acc_param(st, fp, obj, in))
                return 0;
            continue;
        }
        if (fp->kind == FL_CONST) {
            in->i[fp->index] = iv;
            continue;
        }
        if (fp->kind == FL_ACC_FLAGS) {
            /* accumulation_flag (0..3), else start_tensor_calc: true 2, false 1, absent 0 */
            v = sget(obj, fp->kid[0]);
            if (v != NULL) {
                if (!exact_int(v, 0, 3, &iv))
                    return 0;
            } else if ((v = sget(obj, fp->kid[1])) != NULL) {
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
            v = sget(obj, fp->kid[j]);
        if (v == NULL) {
            if (fp->required)
                return 0;
            if (fp->kind == FL_ILIST)
                continue;
        } else if (fp->kind == FL_ILIST) {
            if (!ilist_param(fp, v, in, list))
                return 0;
            continue;
        } else if (fp->kind == FL_TABLE) {
            if (!lookup(st, fp->table, v, &iv))
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
        } else {                        /* FL_NUM, FL_COUNT: as_num then float() */
            if (PyFloat_CheckExact(v))
                fv = PyFloat_AS_DOUBLE(v);
            else if (exact_int(v, INT64_MIN, INT64_MAX, &iv))
                fv = (double)iv;
            else
                return 0;
            if (fp->kind == FL_COUNT && !(fv > 0.0 && fv < INFINITY))
                return 0;               /* _insns.read_params: a finite count > 0 */
        }
        if (fp->slot == 'i')
            in->i[fp->index] = iv;
        else
            in->f[fp->index] = fv;
    }
    return 1;
}

/* bind.h */
int bs_fl_valid_name(PyObject *name)
{
    const char *utf8;
    Py_ssize_t len;
    if (name == NULL || !PyUnicode_CheckExact(name) || PyUnicode_GET_LENGTH(name) == 0)
        return 0;
    utf8 = PyUnicode_AsUTF8AndSize(name, &len);
    if (utf8 == NULL) {
        PyErr_Clear();
        return 0;
    }
    return memchr(utf8, 0, (size_t)len) == NULL;
}

/* 1: the instruction is understood and its records are in *r; 0: decline; -1: error. */
int bs_fl_read_insn(fl_state *st, PyObject *obj, const fl_names *nm, fl_insn *r,
                     fl_op **opp)
{
    static const int opcode_keys[3] = {K_opcode, K_type, K_instruction_type};
    PyObject *name, *v = NULL, *lists[2];
    const fl_scan *top = &r->top;
    int64_t code, k;
    Py_ssize_t i, n;
    int side, wait, rc;
    fl_op *op;
    rc = scan(st, obj, &r->top, 1);
    if (rc <= 0)
        return rc;
    name = sget(top, K_name);
    if (name == NULL || !bs_fl_valid_name(name))
        return 0;
    for (i = 0; i < 3 && v == NULL; i++)
        v = sget(top, opcode_keys[i]);
    if (v == NULL || !PyUnicode_CheckExact(v))
        return 0;
    if (!lookup(st, st->ops_index, v, &k) || k < 0 || k >= st->nops)
        return 0;
    *opp = op = &st->ops[k];
    r->in = st->insn_tmpl;
    r->in.op = op->code;
    v = sget(top, K_engine);
    code = 0;
    if (v != NULL && !lookup(st, st->engines, v, &code))
        return 0;
    r->in.engine = (int32_t)code;
    r->nopnd = 0;
    for (side = 0; side < 2; side++) {
        PyObject *lst = sget(top, side ? K_outs : K_ins);
        n = 0;
        if (lst != NULL) {
            if (!PyList_CheckExact(lst))
                return 0;
            n = PyList_GET_SIZE(lst);
            if (n > st->max_operands || n > op->most[side])
                return 0;
            for (i = 0; i < n; i++)
                if ((rc = operand(st, PyList_GET_ITEM(lst, i), nm, &r->sub,
                                  &r->opnds[r->nopnd++])) <= 0)
                    return rc;
        }
        if (side)
            r->in.nout = (int32_t)n;
        else
            r->in.nin = (int32_t)n;
    }
    r->nsync = 0;
    v = sget(top, K_sync_info);
    lists[0] = lists[1] = NULL;
    if (v != NULL) {
        if ((rc = scan(st, v, &r->sub, 0)) <= 0)
            return rc;
        lists[0] = sget(&r->sub, K_on_update);
        lists[1] = sget(&r->sub, K_on_wait);
    }
    for (wait = 1; wait >= 0; wait--) {
        PyObject *lst = lists[wait];
        n = 0;
        if (lst != NULL) {
            if (!PyList_CheckExact(lst))
                return 0;
            n = PyList_GET_SIZE(lst);
            if (n > FL_MAX_SYNCS - r->nsync)
                return 0;
            for (i = 0; i < n; i++)
                if ((rc = sync_entry(st, PyList_GET_ITEM(lst, i), wait, nm->regs, &r->sub,
                                     &r->syncs[r->nsync++])) <= 0)
                    return rc;
        }
        if (wait)
            r->in.nwait = (int32_t)n;
        else
            r->in.nupd = (int32_t)n;
    }
    v = sget(top, K_predicted_latency_ns);   /* _insns.latency: else it refuses */
    if (v != NULL) {
        double lat;
        if (!exact_num(v, &lat) || !isfinite(lat) || lat < 0.0)
            return 0;
        r->in.lat = lat;
    }
    rc = check_keys(st, op, top);
    if (rc <= 0)
        return rc;
    r->list = NULL;
    rc = params(st, op, top, &r->in, r->in.nout > 0 ? &r->opnds[r->in.nin] : NULL, &r->list);
    if (rc == 1 && op->warns != NULL) {
        /* the opcode warns once per module: the first instruction goes to the Python
        ** path (which warns there; it comes first in pass 2 too), the later ones here */
        int seen = PySet_Contains(nm->seen, op->warns);
        if (seen != 1) {
            if (seen < 0 || PySet_Add(nm->seen, op->warns) < 0)
                PyErr_Clear();
            return 0;
        }
    }
    return rc;
}

