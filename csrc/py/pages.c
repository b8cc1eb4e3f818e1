/* py/pages.c -- _Pages: an output's buffer handed over by a zero_copy run
** (bs_sim_take_loc, vm/zerocopy.c). It exports the data half as one writable buffer
** (np.frombuffer makes it the output array without a copy) and frees the whole allocation
** (data and shadow, bs_pages_free with its size) with the object. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "bind.h"

typedef struct {
    PyObject_HEAD
    void      *mem;
    size_t     total;
    Py_ssize_t len;
} PagesObject;

static int Pages_getbuffer(PyObject *self, Py_buffer *view, int flags)
{
    PagesObject *g = (PagesObject *)self;
    return PyBuffer_FillInfo(view, self, g->mem, g->len, 0, flags);
}

static void Pages_dealloc(PyObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PagesObject *g = (PagesObject *)self;
    bs_pages_free(g->mem, g->total);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyType_Slot Pages_slots[] = {
    {Py_bf_getbuffer, Pages_getbuffer},
    {Py_tp_dealloc, Pages_dealloc},
    {Py_tp_doc, "An output's memory handed over by a zero_copy run (a writable buffer)."},
    {0, NULL}
};

PyType_Spec bs_py_pages_spec = {
    .name = "birsim._birsim._Pages",
    .basicsize = sizeof(PagesObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = Pages_slots,
};

PyObject *bs_py_pages(PyObject *type, void *mem, size_t total, Py_ssize_t len)
{
    PagesObject *g = PyObject_New(PagesObject, (PyTypeObject *)type);
    if (g == NULL) {
        bs_pages_free(mem, total);
        return NULL;
    }
    g->mem = mem;
    g->total = total;
    g->len = len;
    return (PyObject *)g;
}
