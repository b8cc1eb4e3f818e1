/* py/hostcall.c -- the in-process kernel_sim bridge: a delegated kernel (CustomOp,
** BIRKernel) calls back into Python under the GIL, its operands handed over as memoryviews
** of simulator memory and its results checked before anything is written. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdarg.h>
#include "bind.h"

/* The host kernel hook: call host(kernel, config, insn, opcode, ins, outs, core) where
** ins is a list of (read-only memoryview, dtype code, shape) and outs a list of
** (dtype code, shape). The host returns one (cast, array) per output: cast 0 = the array
** holds the output's dtype, cast 1 = it holds fp32 values that this hook encodes with the
** simulator's cast rules (bs_host_store_f32). Runs with the GIL re-taken.
**
** Order matters for "a failed call leaves memory untouched": the input memoryviews are
** released first (a kernel that kept a view of simulator memory past the call is an error,
** since that memory is freed or overwritten later), then every result is checked, and
** only then is anything written. */
static int host_fail_set(bs_error *err, const bs_host_call *call, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    bs_errorf(err, BS_E_KERNEL, "kernel_sim for '%s' failed: %s", call->kernel, msg);
    return -1;
}

/* One list per side: ins as (read-only memoryview, dtype code, shape), outs as
** (dtype code, shape). NULL with a Python error set on failure. */
static PyObject *operand_list(const bs_host_call *call, int side)
{
    int n = side ? call->nout : call->nin;
    PyObject *list = PyList_New(n);
    for (int i = 0; list != NULL && i < n; i++) {
        const int64_t *shape = side ? call->out_shape[i] : call->in_shape[i];
        int nd = side ? call->out_ndim[i] : call->in_ndim[i];
        int dt = side ? call->out_dtype[i] : call->in_dtype[i];
        Py_ssize_t bytes = bs_dtinfo_table[dt].size;
        PyObject *shp = PyTuple_New(nd), *item = NULL;
        for (int d = 0; shp != NULL && d < nd; d++) {
            PyObject *v = PyLong_FromLongLong(shape[d]);
            if (v == NULL)
                Py_CLEAR(shp);
            else
                PyTuple_SET_ITEM(shp, d, v);
            bytes *= (Py_ssize_t)shape[d];
        }
        if (shp != NULL && side) {
            item = Py_BuildValue("(iN)", dt, shp);
        } else if (shp != NULL) {
            PyObject *mv = PyMemoryView_FromMemory((char *)call->in_data[i], bytes, PyBUF_READ);
            item = mv ? Py_BuildValue("(NiN)", mv, dt, shp) : NULL;
            if (mv == NULL)
                Py_DECREF(shp);
        }
        if (item == NULL)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, i, item);
    }
    return list;
}

/* Release every input memoryview; returns the index of one the kernel still holds
** (it kept a view of simulator memory past the call), or -1. */
static Py_ssize_t release_inputs(PyObject *ins)
{
    Py_ssize_t kept = -1;
    for (Py_ssize_t i = 0; ins != NULL && i < PyList_GET_SIZE(ins); i++) {
        PyObject *item = PyList_GET_ITEM(ins, i), *r;
        if (item == NULL || !PyTuple_Check(item))
            continue;
        r = PyObject_CallMethod(PyTuple_GET_ITEM(item, 0), "release", NULL);
        if (r == NULL) {
            PyErr_Clear();
            if (kept < 0)
                kept = i;
        }
        Py_XDECREF(r);
    }
    return kept;
}

/* Check the host's results -- one (cast, C-contiguous buffer) per output of the right
** byte size -- and only then write them all. 0 on success; -1 with err set (py_error=0)
** or a Python error pending (*py_error=1). */
static int store_results(const bs_host_call *call, PyObject *res, bs_error *err,
                         int *py_error)
{
    Py_buffer bufs[BS_KMAX];
    int casts[BS_KMAX], nbufs = 0, rc = -1;
    PyObject *seq = PySequence_Fast(res, "the host must return a list of (cast, array)");
    *py_error = seq == NULL;
    if (seq != NULL && PySequence_Fast_GET_SIZE(seq) != call->nout) {
        host_fail_set(err, call, "the host returned %zd results for %d outputs",
                      PySequence_Fast_GET_SIZE(seq), call->nout);
        goto done;
    }
    for (int j = 0; seq != NULL && j < call->nout; j++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, j);
        Py_ssize_t want = 1;
        int dt = call->out_dtype[j];
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2) {
            host_fail_set(err, call, "result %d is not a (cast, array) pair", j);
            goto done;
        }
        casts[j] = PyObject_IsTrue(PyTuple_GET_ITEM(item, 0));
        if (casts[j] < 0 ||
            PyObject_GetBuffer(PyTuple_GET_ITEM(item, 1), &bufs[j], PyBUF_C_CONTIGUOUS) < 0) {
            *py_error = 1;
            goto done;
        }
        nbufs = j + 1;
        for (int d = 0; d < call->out_ndim[j]; d++)
            want *= (Py_ssize_t)call->out_shape[j][d];
        if (casts[j] && (bs_dtinfo_table[dt].kind == BS_DK_P)) {
            host_fail_set(err, call, "result %d: values cannot be cast to the packed dtype %s "
                          "of outs[%d]", j, bs_dtinfo_table[dt].name, j);
            goto done;
        }
        want *= casts[j] ? 4 : bs_dtinfo_table[dt].size;
        if (bufs[j].len != want) {
            host_fail_set(err, call, "result %d has %zd bytes, expected %zd", j, bufs[j].len, want);
            goto done;
        }
    }
    for (int j = 0; seq != NULL && j < call->nout; j++) {
        if (casts[j])
            bs_host_store_f32(call, j, (const float *)bufs[j].buf);
        else if (bufs[j].len)
            memcpy(call->out_data[j], bufs[j].buf, (size_t)bufs[j].len);
    }
    rc = seq != NULL ? 0 : -1;
done:
    for (int j = 0; j < nbufs; j++)
        PyBuffer_Release(&bufs[j]);
    Py_XDECREF(seq);
    return rc;
}

/* Turn the pending Python exception into err (E_KERNEL). Ctrl-C inside a kernel ends the
** run with E_INTERRUPT, which Sim.run raises as the KeyboardInterrupt itself. */
static bs_status report_python_error(const bs_host_call *call, bs_error *err)
{
    if (PyErr_ExceptionMatches(PyExc_KeyboardInterrupt)) {
        PyErr_Clear();
        bs_errorf(err, BS_E_INTERRUPT, "interrupted in kernel_sim for '%s'", call->kernel);
        return BS_E_INTERRUPT;
    }
    PyObject *etype = NULL, *exc = NULL, *etb = NULL, *s;
    const char *text, *tname;
    PyErr_Fetch(&etype, &exc, &etb);
    PyErr_NormalizeException(&etype, &exc, &etb);
    Py_XDECREF(etype);
    Py_XDECREF(etb);
    s = exc ? PyObject_Str(exc) : NULL;
    text = s ? PyUnicode_AsUTF8(s) : NULL;
    if (text == NULL)
        PyErr_Clear();
    tname = exc ? Py_TYPE(exc)->tp_name : "error";
    if (text && *text && strcmp(tname, "KernelSimError") == 0)
        tname = "";                      /* birsim's own message says it all */
    bs_errorf(err, BS_E_KERNEL, "kernel_sim for '%s' failed: %s%s%s", call->kernel, tname,
              text && *text && *tname ? ": " : "", text ? text : "");
    Py_XDECREF(s);
    Py_XDECREF(exc);
    return BS_E_KERNEL;
}

bs_status bs_py_host_call(void *ctx, const bs_host_call *call, bs_error *err)
{
    PyObject *host = ctx;             /* the Sim's callable, alive for the run */
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject *ins = operand_list(call, 0), *outs = NULL, *res = NULL;
    int py_error = 1;
    bs_status st = BS_E_KERNEL;
    Py_ssize_t kept;
    if (ins != NULL && (outs = operand_list(call, 1)) != NULL)
        res = PyObject_CallFunction(host, "sssiOOi", call->kernel, call->config,
                                    call->insn_name, call->opcode, ins, outs, call->core);
    if (res != NULL) {
        py_error = 0;
        kept = release_inputs(ins);
        if (kept >= 0)
            host_fail_set(err, call, "the kernel kept a reference to its input ins[%zd] "
                          "after returning (inputs view simulator memory only during the "
                          "call; copy them, e.g. np.array(x), to keep them)", kept);
        else if (store_results(call, res, err, &py_error) == 0)
            st = BS_OK;
    }
    if (st != BS_OK && py_error)
        st = report_python_error(call, err);
    release_inputs(ins);                 /* in every case: no view outlives the call */
    Py_XDECREF(res);
    Py_XDECREF(ins);
    Py_XDECREF(outs);
    PyGILState_Release(g);
    return st;
}
