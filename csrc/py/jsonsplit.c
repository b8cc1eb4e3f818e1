/* py/jsonsplit.c -- a large JSON document parsed in interruptible pieces (binding only).
** The loader (birsim/_load/passes.py _parse_pieces) parses each piece with msgspec and joins
** them into exactly what one whole parse gives. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#include "fastload.h"

/* _json_split(buf, piece) -> node or None. msgspec parses a whole buffer in one call
** that never checks for signals (a 248 MB file: seconds Ctrl-C cannot interrupt), so the
** loader parses a large document in pieces: this scanner finds its structure (checking
** for signals every FL_SPLIT_SIGNAL bytes) and the loader parses each piece and joins
** them (birsim/_load/passes.py _parse_pieces). A container whose text holds more than `piece`
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

PyObject *bs_fl_json_split(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
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

