/* py/module.c -- the birsim._birsim extension: module state, the descriptive tables
** (opcodes, dtypes, enums, layouts) generated from the core's X-macro lists, and the
** status -> exception mapping driven by bs_status.def. Types live in py/objects.c. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "bind.h"
#include "../core/pool.h"     /* BS_POOL_MAX, for limits */

/* {=== Exceptions ===} */

PyObject *bs_py_raise(PyObject *module, const bs_error *err)
{
    static const char *const exc_names[BS_ST__COUNT] = {
#define BS_ST(name, exc, msg) [BS_##name] = #exc,
#include "../bs_status.def"
#undef BS_ST
    };
    bs_modstate *ms = PyModule_GetState(module);
    const char *name = (unsigned)err->status < BS_ST__COUNT ? exc_names[err->status] : "SimulationError";
    PyObject *cls = NULL, *exc = NULL, *args = NULL, *kw = NULL, *item = NULL;
    if (strcmp(name, "KeyboardInterrupt") == 0) {
        PyErr_SetNone(PyExc_KeyboardInterrupt);
        return NULL;
    }
    cls = PyObject_GetAttrString(ms->errors, name);
    if (cls == NULL)
        return NULL;
    args = Py_BuildValue("(s)", err->msg);
    kw = PyDict_New();
    if (args == NULL || kw == NULL)
        goto done;
    if (err->code) {
        item = PyLong_FromLongLong(err->code);
        if (item == NULL || PyDict_SetItemString(kw, "code", item) < 0)
            goto done;
        Py_CLEAR(item);
    }
    if (err->core >= 0) {
        item = PyLong_FromLong(err->core);
        if (item == NULL || PyDict_SetItemString(kw, "core", item) < 0)
            goto done;
        Py_CLEAR(item);
    }
    exc = PyObject_Call(cls, args, kw);
    if (exc == NULL)
        goto done;
    /* Location indices; the Python layer turns them into names. */
    item = Py_BuildValue("(iiiii)", err->func, err->block, err->insn, err->operand, err->core);
    if (item == NULL || PyObject_SetAttrString(exc, "_where", item) < 0)
        goto done;
    PyErr_SetObject(cls, exc);
done:
    Py_XDECREF(item);
    Py_XDECREF(cls);
    Py_XDECREF(exc);
    Py_XDECREF(args);
    Py_XDECREF(kw);
    return NULL;
}

/* {=== Tables ===} */

/* PyModule_Add (3.13) for older Pythons: steals `obj`. */
static int add_obj(PyObject *m, const char *name, PyObject *obj)
{
    int r;
    if (obj == NULL)
        return -1;
    r = PyModule_AddObjectRef(m, name, obj);
    Py_DECREF(obj);
    return r;
}

/* classes: {"sim" | "dtype_kind" | "alu": {letter: meaning}}, each in value order
** (the class lists of core/common.h). */
typedef struct class_row { const char *letter, *meaning; } class_row;
#define BS_CLASS_ROW(l, meaning) { #l, meaning },
static const class_row sim_rows[] = { BS_SIM_CLASSES(BS_CLASS_ROW) };
static const class_row dk_rows[] = { BS_DT_KINDS(BS_CLASS_ROW) };
static const class_row aluc_rows[] = { BS_ALU_CLASSES(BS_CLASS_ROW) };
#undef BS_CLASS_ROW

static int add_class_list(PyObject *d, const char *name, const class_row *rows, size_t n)
{
    PyObject *e = PyDict_New(), *t;
    int ok = e != NULL && PyDict_SetItemString(d, name, e) == 0;
    for (size_t i = 0; ok && i < n; i++) {
        t = PyUnicode_FromString(rows[i].meaning);
        ok = t != NULL && PyDict_SetItemString(e, rows[i].letter, t) == 0;
        Py_XDECREF(t);
    }
    Py_XDECREF(e);
    return ok ? 0 : -1;
}

static int add_classes(PyObject *m)
{
    PyObject *d = PyDict_New();
    if (d == NULL || add_class_list(d, "sim", sim_rows, BS_ARRAY_LEN(sim_rows)) < 0 ||
            add_class_list(d, "dtype_kind", dk_rows, BS_ARRAY_LEN(dk_rows)) < 0 ||
            add_class_list(d, "alu", aluc_rows, BS_ARRAY_LEN(aluc_rows)) < 0) {
        Py_XDECREF(d);
        return -1;
    }
    return add_obj(m, "classes", d);
}

/* arch_aliases: alias -> architecture name (bs_arch.def). */
static int add_arch_aliases(PyObject *m)
{
    PyObject *d = PyDict_New(), *t;
    int ok = d != NULL;
#define BS_ARCH_ALIAS(alias, name) \
    if (ok) { \
        (void)BS_ARCHI_##name;      /* an alias names an architecture (compile check) */ \
        t = PyUnicode_FromString(#name); \
        ok = t != NULL && PyDict_SetItemString(d, #alias, t) == 0; \
        Py_XDECREF(t); \
    }
#include "../bs_arch.def"
#undef BS_ARCH
    if (!ok) {
        Py_XDECREF(d);
        return -1;
    }
    return add_obj(m, "arch_aliases", d);
}

/* opcodes: name -> (code, sim letter, family) */
static int add_opcodes(PyObject *m)
{
    static const char sim_letters[] = BS_LETTERS(BS_SIM_CLASSES);
    PyObject *d = PyDict_New(), *t;
    if (d == NULL)
        return -1;
    for (int i = 0; i < BS_OP__COUNT; i++) {
        const bs_opinfo *o = &bs_opinfo_table[i];
        t = Py_BuildValue("(iCs)", i, sim_letters[o->sim], bs_family_names[o->family]);
        if (t == NULL || PyDict_SetItemString(d, o->name, t) < 0)
            return -1;
        Py_DECREF(t);
    }
    return add_obj(m, "opcodes", d);
}

/* dtypes: name -> (code, size, kind letter, lanes) */
static int add_dtypes(PyObject *m)
{
    PyObject *d = PyDict_New(), *t;
    if (d == NULL)
        return -1;
    for (int i = 0; i < BS_DT__COUNT; i++) {
        const bs_dtinfo *o = &bs_dtinfo_table[i];
        t = Py_BuildValue("(iiCi)", i, o->size, BS_LETTERS(BS_DT_KINDS)[o->kind], o->lanes);
        if (t == NULL || PyDict_SetItemString(d, o->name, t) < 0)
            return -1;
        Py_DECREF(t);
    }
    return add_obj(m, "dtypes", d);
}

static const char *alu_name(int i) { return bs_alu_table[i].name; }
static const char *act_name(int i) { return bs_act_names[i]; }
static const char *status_name(int i) { return bs_status_name(i); }

/* `attr`: {name(i): i} for i < n (alu_ops, act_funcs, statuses) */
static int add_index(PyObject *m, const char *attr, const char *(*name)(int), int n)
{
    PyObject *d = PyDict_New(), *t;
    if (d == NULL)
        return -1;
    for (int i = 0; i < n; i++)
        if (PyDict_SetItemString(d, name(i), t = PyLong_FromLong(i)) < 0)
            return -1;
        else
            Py_DECREF(t);
    return add_obj(m, attr, d);
}

/* enums: group -> {name: value} (bs_enums.def) */
static int add_enums(PyObject *m)
{
    PyObject *d = PyDict_New(), *t;
    if (d == NULL)
        return -1;
    for (const bs_enuminfo *e = bs_enum_table; e->group; e++) {
        PyObject *g = PyDict_GetItemString(d, e->group);
        if (g == NULL) {
            g = PyDict_New();
            if (g == NULL || PyDict_SetItemString(d, e->group, g) < 0)
                return -1;
            Py_DECREF(g);
        }
        if (PyDict_SetItemString(g, e->name, t = PyLong_FromLongLong(e->value)) < 0)
            return -1;
        Py_DECREF(t);
    }
    return add_obj(m, "enums", d);
}

/* arches: name -> (level, sbuf partitions, sbuf bytes/partition, psum ..., psum ...) */
static int add_arches(PyObject *m)
{
    PyObject *d = PyDict_New(), *t;
    if (d == NULL)
        return -1;
    for (int i = 0; i < BS_ARCHI__COUNT; i++) {
        const bs_archinfo *a = &bs_arch_table[i];
        t = Py_BuildValue("(iiLiL)", a->level, a->sbuf_parts, (long long)a->sbuf_bpp,
                          a->psum_parts, (long long)a->psum_bpp);
        if (t == NULL || PyDict_SetItemString(d, a->name, t) < 0)
            return -1;
        Py_DECREF(t);
    }
    return add_obj(m, "arches", d);
}

/* expr_ops: name -> code (ir/program.h BS_XOPS) */
static int add_expr_ops(PyObject *m)
{
    PyObject *d = PyDict_New(), *t;
    if (d == NULL)
        return -1;
#define BS_XOP_ADD(name, code) \
    if (PyDict_SetItemString(d, #name, t = PyLong_FromLong(code)) < 0) return -1; \
    Py_DECREF(t);
    BS_XOPS(BS_XOP_ADD)
#undef BS_XOP_ADD
    return add_obj(m, "expr_ops", d);
}

/* limits: the core's bounds (core/common.h and friends) */
static int add_limits(PyObject *m)
{
    return add_obj(m, "limits", Py_BuildValue(
        "{s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:L,s:L,s:L,s:L}",
        "max_dims", BS_MAX_DIMS,
        "max_shape", BS_MAX_SHAPE, "operands_per_side", BS_KMAX,
        "expr_stack", BS_EXPR_STACK, "semaphores", BS_NUM_SEMS,
        "events", BS_NUM_EVENTS, "max_frames", BS_MAX_FRAMES,
        "max_call_depth", BS_MAX_CALL_DEPTH, "max_cores", BS_MAX_CORES,
        "out_operand", BS_OUT_OPERAND, "max_threads", BS_POOL_MAX,
        "ap_step_limit", (long long)BS_AP_STEP_LIMIT,
        "ap_num_max", (long long)BS_AP_NUM_MAX,
        "trace_max", (long long)BS_TRACE_MAX,
        "print_max", (long long)BS_PRINT_MAX));
}

/* {"class": {name: code}, "kind": {...}, "table": {...}} from csrc/bs_fastload.def (the
** loader's fast path: birsim/_load/fastload.py), or NULL. */
static PyObject *fastload_codes(void)
{
    PyObject *d = PyDict_New(), *g[3] = {NULL, NULL, NULL}, *t;
    static const char *const groups[3] = {"class", "kind", "table"};
    long n[3] = {0, 0, 0};
    int i;
    if (d == NULL)
        return NULL;
    for (i = 0; i < 3; i++) {
        g[i] = PyDict_New();
        if (g[i] == NULL || PyDict_SetItemString(d, groups[i], g[i]) < 0)
            goto fail;
    }
#define BS_FL_ADD(k, name) \
    if ((t = PyLong_FromLong(n[k]++)) == NULL || PyDict_SetItemString(g[k], #name, t) < 0) { \
        Py_XDECREF(t); \
        goto fail; \
    } \
    Py_DECREF(t);
#define BS_FL_CLASS(name) BS_FL_ADD(0, name)
#define BS_FL_KIND(name) BS_FL_ADD(1, name)
#define BS_FL_TABLE(name) BS_FL_ADD(2, name)
#include "../bs_fastload.def"
#undef BS_FL_ADD
    for (i = 0; i < 3; i++)
        Py_DECREF(g[i]);
    return d;
fail:
    for (i = 0; i < 3; i++)
        Py_XDECREF(g[i]);
    Py_DECREF(d);
    return NULL;
}

static int add_tables(PyObject *m)
{
    return add_opcodes(m) < 0 || add_dtypes(m) < 0 ||
           add_index(m, "alu_ops", alu_name, BS_ALU__COUNT) < 0 ||
           add_index(m, "act_funcs", act_name, BS_ACT__COUNT) < 0 || add_enums(m) < 0 ||
           add_arches(m) < 0 || add_index(m, "statuses", status_name, BS_ST__COUNT) < 0 ||
           add_expr_ops(m) < 0 || add_limits(m) < 0 ||
           add_obj(m, "fastload_codes", fastload_codes()) < 0 ? -1 : 0;
}

/* The op rows of bs_ops.def, per opcode: handlers (kernel stem, "vm" or "todo"),
** semantics (one line, "" if none), params ({field: (slot, index)}) and param_notes
** ({field: note}); every opcode has a params and a param_notes dict, possibly empty. */
enum { ROW_HANDLERS, ROW_SEMANTICS, ROW_PARAMS, ROW_NOTES, ROW__COUNT };
static const char *const row_attrs[ROW__COUNT] = { "handlers", "semantics", "params",
                                                   "param_notes" };

static int add_op_rows(PyObject *m)
{
    PyObject *d[ROW__COUNT] = { 0 }, *per[2][BS_OP__COUNT] = { { 0 } }, *t;
    int ok = 1, r;
    for (r = 0; r < ROW__COUNT; r++)
        ok = ok && (d[r] = PyDict_New()) != NULL;
    for (int i = 0; ok && i < BS_OP__COUNT; i++) {
        const bs_opinfo *o = &bs_opinfo_table[i];
        for (r = 0; ok && r < ROW__COUNT; r++) {
            t = r == ROW_HANDLERS ? PyUnicode_FromString(o->handler)
              : r == ROW_SEMANTICS ? PyUnicode_FromString(o->semantics)
              : (per[r - ROW_PARAMS][i] = PyDict_New());
            ok = t != NULL && PyDict_SetItemString(d[r], o->name, t) == 0;
            Py_XDECREF(t);                       /* d[r] holds the per-opcode dicts */
        }
    }
    for (int32_t k = 0; ok && k < bs_param_count; k++) {
        const bs_paraminfo *q = &bs_param_table[k];
        t = Py_BuildValue("(Ci)", q->slot, q->index);
        ok = t != NULL && PyDict_SetItemString(per[0][q->op], q->field, t) == 0;
        Py_XDECREF(t);
        t = ok ? PyUnicode_FromString(q->note) : NULL;
        ok = t != NULL && PyDict_SetItemString(per[1][q->op], q->field, t) == 0;
        Py_XDECREF(t);
    }
    for (r = 0; r < ROW__COUNT; r++) {
        if (ok)
            ok = add_obj(m, row_attrs[r], d[r]) == 0;       /* takes d[r] either way */
        else
            Py_XDECREF(d[r]);
    }
    return ok ? 0 : -1;
}

/* layouts: table -> {"itemsize": n, "fields": [(name, offset, type, count)]} */
static int add_layouts(PyObject *m)
{
    PyObject *d = PyDict_New(), *fields, *entry, *t;
    if (d == NULL)
        return -1;
#define F_SCALAR(type, name) \
    t = Py_BuildValue("(sns n)", #name, (Py_ssize_t)offsetof(REC, name), #type, (Py_ssize_t)1); \
    if (t == NULL || PyList_Append(fields, t) < 0) return -1; \
    Py_DECREF(t);
#define F_ARRAY(type, name, n) \
    t = Py_BuildValue("(sns n)", #name, (Py_ssize_t)offsetof(REC, name), #type, (Py_ssize_t)(n)); \
    if (t == NULL || PyList_Append(fields, t) < 0) return -1; \
    Py_DECREF(t);
#define BS_LAYOUT(tname, type, flist) \
    fields = PyList_New(0); \
    if (fields == NULL) return -1; \
    { typedef type REC; flist(F_SCALAR, F_ARRAY) } \
    entry = Py_BuildValue("{s:n,s:N}", "itemsize", (Py_ssize_t)sizeof(type), "fields", fields); \
    if (entry == NULL || PyDict_SetItemString(d, #tname, entry) < 0) return -1; \
    Py_DECREF(entry);
    BS_TABLES(BS_LAYOUT)
#undef BS_LAYOUT
#undef F_SCALAR
#undef F_ARRAY
    return add_obj(m, "layouts", d);
}

/* {=== The loader's checked key read ===} */

/* _get_init(MISSING, get): the sentinel and the Python get() that _get hands everything
** but its common case to. */
static PyObject *get_init(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    bs_modstate *ms = PyModule_GetState(self);
    if (nargs != 2 || !PyCallable_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "_get_init(missing, get)");
        return NULL;
    }
    PyObject *old_missing = ms->get_missing, *old_slow = ms->get_slow;
    ms->get_missing = Py_NewRef(args[0]);
    ms->get_slow = Py_NewRef(args[1]);
    Py_XDECREF(old_missing);
    Py_XDECREF(old_slow);
    Py_RETURN_NONE;
}

/* _get(obj, key, ctx, check=None, default=MISSING, what=None): birsim/_load/schema.py's
** get() in C for a plain dict and a str key: the value when present and not null (checked
** by check.fast, else check(value, ctx.key(key))), the default when absent or null; the
** Python get() for everything else (an alias tuple, a missing required key: its error). */
static PyObject *get_key(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    bs_modstate *ms = PyModule_GetState(self);
    PyObject *argv[6] = {NULL, NULL, NULL, Py_None, NULL, Py_None};
    PyObject *v, *fast = NULL, *sub = NULL, *out = NULL;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    static const char *const names[6] = {"obj", "key", "ctx", "check", "default", "what"};
    if (ms->get_slow == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_get: _get_init was not called");
        return NULL;
    }
    argv[4] = ms->get_missing;
    if (nargs > 6)
        goto slow;
    for (Py_ssize_t i = 0; i < nargs; i++)
        argv[i] = args[i];
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, k);
        int found = 0;
        for (int i = 0; i < 6; i++)
            if (PyUnicode_CompareWithASCIIString(name, names[i]) == 0) {
                if (i < nargs)
                    goto slow;              /* given twice: the Python get() says so */
                argv[i] = args[nargs + k];
                found = 1;
                break;
            }
        if (!found)
            goto slow;
    }
    if (argv[0] == NULL || argv[1] == NULL || argv[2] == NULL ||
            !PyDict_CheckExact(argv[0]) || !PyUnicode_CheckExact(argv[1]))
        goto slow;
    v = PyDict_GetItemWithError(argv[0], argv[1]);             /* borrowed */
    if (v == NULL && PyErr_Occurred())
        return NULL;
    if (v == NULL || v == Py_None) {
        if (argv[4] == ms->get_missing)
            goto slow;                      /* a required key: its error */
        return Py_NewRef(argv[4]);
    }
    Py_INCREF(v);                           /* the dict may change under the calls below */
    if (argv[3] == Py_None) {
        return v;
    }
    fast = PyObject_GetAttr(argv[3], ms->str_fast);     /* getattr(check, "fast", None) */
    if (fast == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError))
            goto done;
        PyErr_Clear();
    }
    if (fast != NULL && fast != Py_None) {
        out = PyObject_CallOneArg(fast, v);
        if (out == NULL || out != ms->get_missing)
            goto done;
        Py_CLEAR(out);
    }
    sub = PyObject_CallMethodOneArg(argv[2], ms->str_key, argv[1]);
    if (sub != NULL) {
        PyObject *call[2] = {v, sub};
        out = PyObject_Vectorcall(argv[3], call, 2, NULL);
    }
done:
    Py_XDECREF(fast);
    Py_XDECREF(sub);
    Py_DECREF(v);
    return out;
slow:
    return PyObject_Vectorcall(ms->get_slow, args, (size_t)nargs, kwnames);
}

static PyObject *fail_alloc_after(PyObject *self, PyObject *arg)
{
    long long n = PyLong_AsLongLong(arg);
    (void)self;
    if (n == -1 && PyErr_Occurred())
        return NULL;
    bs_alloc_fail_after(n);
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"_fail_alloc_after", fail_alloc_after, METH_O,
     "_fail_alloc_after($module, n, /)\n--\n\nTest hook: make every core allocation after the next n "
     "fail (n < 0 turns it off)."},
    {"_get_init", (PyCFunction)(void (*)(void))get_init, METH_FASTCALL,
     "_get_init($module, missing, get, /)\n--\n\nThe loader's MISSING and its Python get() "
     "(birsim/_load/schema.py), for _get."},
    {"_get", (PyCFunction)(void (*)(void))get_key, METH_FASTCALL | METH_KEYWORDS,
     "_get(obj, key, ctx, check=None, default=MISSING, what=None)\n--\n\nThe loader's "
     "checked key read (birsim/_load/schema.py get) for a dict and a str key; the Python "
     "get() reads everything else."},
    {NULL, NULL, 0, NULL}
};

static int module_exec(PyObject *m)
{
    bs_modstate *ms = PyModule_GetState(m);
    ms->errors = PyImport_ImportModule("birsim.errors");
    if (ms->errors == NULL)
        return -1;
    ms->str_fast = PyUnicode_InternFromString("fast");
    ms->str_key = PyUnicode_InternFromString("key");
    if (ms->str_fast == NULL || ms->str_key == NULL)
        return -1;
    if (add_tables(m) < 0 || add_classes(m) < 0 || add_arch_aliases(m) < 0 || add_layouts(m) < 0 || add_op_rows(m) < 0
            || bs_py_add_fastload(m) < 0 || bs_py_add_loadalloc(m) < 0
            || bs_py_add_pack(m) < 0 || bs_py_add_loadmod(m) < 0)
        return -1;
    return bs_py_add_types(m);
}

static int module_traverse(PyObject *m, visitproc visit, void *arg)
{
    bs_modstate *ms = PyModule_GetState(m);
    Py_VISIT(ms->errors);
    Py_VISIT(ms->program_type);
    Py_VISIT(ms->sim_type);
    Py_VISIT(ms->records_type);
    Py_VISIT(ms->pages_type);
    Py_VISIT(ms->table_keys);
    Py_VISIT(ms->get_missing);
    Py_VISIT(ms->get_slow);
    return 0;
}

static int module_clear(PyObject *m)
{
    bs_modstate *ms = PyModule_GetState(m);
    Py_CLEAR(ms->errors);
    Py_CLEAR(ms->program_type);
    Py_CLEAR(ms->sim_type);
    Py_CLEAR(ms->records_type);
    Py_CLEAR(ms->pages_type);
    Py_CLEAR(ms->table_keys);
    Py_CLEAR(ms->get_missing);
    Py_CLEAR(ms->get_slow);
    Py_CLEAR(ms->str_fast);
    Py_CLEAR(ms->str_key);
    return 0;
}

static PyModuleDef_Slot module_slots[] = {
    {Py_mod_exec, module_exec},
    {0, NULL}
};

static struct PyModuleDef birsim_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "birsim._birsim",
    .m_doc = "The C core of birsim (private; use the birsim package).",
    .m_size = sizeof(bs_modstate),
    .m_methods = module_methods,
    .m_slots = module_slots,
    .m_traverse = module_traverse,
    .m_clear = module_clear,
};

PyMODINIT_FUNC PyInit__birsim(void);
PyMODINIT_FUNC PyInit__birsim(void)
{
    return PyModuleDef_Init(&birsim_module);
}
