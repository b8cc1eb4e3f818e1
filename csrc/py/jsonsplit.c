/* py/jsonsplit.c -- a large JSON document parsed in interruptible pieces (binding only).
** The loader (birsim/_load/passes.py _parse_pieces) parses each piece with msgspec and joins
** them into exactly what one whole parse gives. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
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


/* ---- _json_lazy: the blocks' instruction arrays, parsed when the loader reaches them ---- */

/* Nonzero when one of the 8 bytes of w is '"' or a backslash (a string's special bytes). */
static uint64_t lazy_special8(uint64_t w)
{
    const uint64_t ones = 0x0101010101010101u, highs = 0x8080808080808080u;
    uint64_t q = w ^ 0x2222222222222222u, b = w ^ 0x5c5c5c5c5c5c5c5cu;
    return (((q - ones) & ~q) | ((b - ones) & ~b)) & highs;
}

/* The first special byte of a word lazy_special8 marked, on little-endian targets with a
** count-trailing-zeros builtin: its mask's lowest set bit is exact (a borrow only marks
** bytes above a special one); the byte loop finds it elsewhere (most strings are keys
** shorter than 8 bytes: that loop was most of the scan). */
#if defined(__GNUC__) && defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__) \
        && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define LAZY_HAS_CTZ 1
#define LAZY_CTZ(m) ((unsigned)__builtin_ctzll(m))
#else
#define LAZY_HAS_CTZ 0
#endif

/* One past the value starting at s[i] (a container by bracket counting, strings skipped,
** a scalar up to its delimiter), or -1; *deep is raised to the deepest nesting seen from
** depth `depth` (the value's own). Loose by design: the text is parsed afterwards, and a
** scan that misreads it makes that parse fail (the loader then parses the text whole). */
static Py_ssize_t lazy_skip(const unsigned char *s, Py_ssize_t i, Py_ssize_t n, int depth,
                            int *deep)
{
    const unsigned char *p, *end = s + n;
    int d = 0;
    if (i >= n)
        return -1;
    if (s[i] != '{' && s[i] != '[') {
        Py_ssize_t j = i;
        if (s[i] == '"')
            return skip_string(s, i, n);
        while (i < n && s[i] != ',' && s[i] != ']' && s[i] != '}' && s[i] != ' '
                && s[i] != '\t' && s[i] != '\n' && s[i] != '\r')
            i++;
        return i == j ? -1 : i;
    }
    for (p = s + i; p < end; ) {
        unsigned char c = *p++;
        if (c == '"') {                         /* a string: past its closing quote */
            for (;;) {
                uint64_t w;
                while (end - p >= 8) {          /* 8 bytes at a time to a special one */
                    uint64_t m;
                    memcpy(&w, p, 8);
                    if ((m = lazy_special8(w)) != 0) {
#if LAZY_HAS_CTZ
                        p += LAZY_CTZ(m) >> 3;  /* straight to it: the lowest marked byte */
#endif
                        break;
                    }
                    p += 8;
                }
                while (p < end && *p != '"' && *p != '\\')
                    p++;
                if (p >= end)
                    return -1;
                if (*p++ == '"')
                    break;
                if (p >= end)
                    return -1;
                p++;                            /* the escaped byte */
            }
        } else if (c == '{' || c == '[') {
            if (++d + depth > *deep)
                *deep = d + depth;
        } else if (c == '}' || c == ']') {
            if (--d == 0)
                return p - s;
        }
    }
    return -1;
}

/* At an object's member (or its closer) s[i]: the key [*k0, *k1) (its text between the
** quotes) and i at the value; 0 at the closer (i past it), -1 malformed, -2 a key with an
** escape (the scanner compares keys by their text). */
static int lazy_key(const unsigned char *s, Py_ssize_t *ip, Py_ssize_t n, Py_ssize_t *k0,
                    Py_ssize_t *k1)
{
    Py_ssize_t i = skip_ws(s, *ip, n), e;
    if (i < n && s[i] == '}') {
        *ip = i + 1;
        return 0;
    }
    if (i >= n || s[i] != '"' || (e = skip_string(s, i, n)) < 0)
        return -1;
    if (memchr(s + i + 1, '\\', (size_t)(e - i - 2)) != NULL)
        return -2;
    *k0 = i + 1;
    *k1 = e - 1;
    i = skip_ws(s, e, n);
    if (i >= n || s[i] != ':')
        return -1;
    *ip = skip_ws(s, i + 1, n);
    return 1;
}

/* After a member's value: past the comma (1), or past the closer `close` (0); -1 else. */
static int lazy_next(const unsigned char *s, Py_ssize_t *ip, Py_ssize_t n, unsigned char close)
{
    Py_ssize_t i = skip_ws(s, *ip, n);
    if (i < n && s[i] == ',') {
        *ip = i + 1;
        return 1;
    }
    if (i < n && s[i] == close) {
        *ip = i + 1;
        return 0;
    }
    return -1;
}

static int key_is(const unsigned char *s, Py_ssize_t k0, Py_ssize_t k1, const char *name)
{
    size_t len = strlen(name);
    return (size_t)(k1 - k0) == len && memcmp(s + k0, name, len) == 0;
}

typedef struct lazy_scan {
    const unsigned char *s;
    Py_ssize_t n, min_span, max_span;
    int max_depth, deep;
    PyObject *spans;              /* [(key, function, block, start, end)] */
} lazy_scan;

/* A member of a block: its value skipped; an `instructions` array of at least min_span
** bytes listed as a span. 1 done, 0 decline, -1 error. */
static int lazy_block_member(lazy_scan *z, Py_ssize_t *ip, Py_ssize_t k0, Py_ssize_t k1,
                             int key, Py_ssize_t fi, Py_ssize_t bj, int *seen)
{
    Py_ssize_t v = *ip, i = lazy_skip(z->s, v, z->n, 5, &z->deep);
    if (i < 0)
        return 0;
    *ip = i;
    if (!key_is(z->s, k0, k1, "instructions"))
        return 1;
    if ((*seen)++)
        return 0;                       /* a key twice: the last value counts */
    if (z->s[v] == '[' && i - v >= z->min_span) {
        PyObject *t;
        if (i - v > z->max_span)
            return 0;
        t = Py_BuildValue("(innnn)", key, fi, bj, v, i);
        if (t == NULL || PyList_Append(z->spans, t) < 0) {
            Py_XDECREF(t);
            return -1;
        }
        Py_DECREF(t);
    }
    return 1;
}

/* The objects of array s[*ip]: a document's functions (fi < 0; their `blocks` arrays
** scanned in turn) or function fi's blocks (their `instructions` arrays listed). 1
** scanned, 0 decline, -1 error. */
static int lazy_objects(lazy_scan *z, Py_ssize_t *ip, int key, Py_ssize_t fi)
{
    const unsigned char *s = z->s;
    Py_ssize_t i = skip_ws(s, *ip + 1, z->n), n = z->n, j = 0, k0, k1;
    int more = 1, r, depth = fi < 0 ? 2 : 4;    /* the objects' own nesting */
    if (i < n && s[i] == ']') {
        *ip = i + 1;
        return 1;
    }
    for (; more; j++) {
        int seen = 0;
        i = skip_ws(s, i, n);
        if (i >= n || s[i] != '{') {            /* not an object: the loader reports it */
            if ((i = lazy_skip(s, i, n, depth, &z->deep)) < 0)
                return 0;
            goto next;
        }
        i++;
        while ((r = lazy_key(s, &i, n, &k0, &k1)) == 1) {
            if (fi >= 0) {
                if ((r = lazy_block_member(z, &i, k0, k1, key, fi, j, &seen)) <= 0)
                    return r;
            } else if (key_is(s, k0, k1, "blocks") && seen++) {
                return 0;
            } else if (key_is(s, k0, k1, "blocks") && i < n && s[i] == '[') {
                if ((r = lazy_objects(z, &i, key, j)) <= 0)
                    return r;
            } else if ((i = lazy_skip(s, i, n, depth + 1, &z->deep)) < 0) {
                return 0;
            }
            if ((r = lazy_next(s, &i, n, '}')) < 0)
                return 0;
            if (r == 0)
                break;
        }
        if (r < 0)
            return 0;
next:
        if ((more = lazy_next(s, &i, n, ']')) < 0)
            return 0;
        if (fi >= 0 && PyErr_CheckSignals() < 0)
            return -1;
    }
    *ip = i;
    return 1;
}

/* _json_lazy(buf, min_span, max_span, max_depth) -> (skeleton, spans) or None. The
** instruction arrays of the blocks of a document's functions and nki_functions of at
** least min_span bytes: spans [(0 functions | 1 nki_functions, function index, block
** index, start, end)] and the text with each replaced by [] (the skeleton) -- the loader
** parses the skeleton and each array when it reaches its block (birsim/_load/fastload.py
** lazy_tree). None: the loader parses the text whole, as before (no span, a span above
** max_span bytes, nesting above max_depth, a key given twice or escaped on the way to
** the arrays, text this scanner does not read). */
PyObject *bs_fl_json_lazy(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer view;
    lazy_scan z;
    Py_ssize_t i, n, k0, k1, size, k, pos, out_pos;
    PyObject *skel = NULL, *res = NULL;
    char *out;
    int r, seen[2] = {0, 0};
    (void)self;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError,
                        "_json_lazy(buf, min_span, max_span, max_depth) takes 4 arguments");
        return NULL;
    }
    z.min_span = PyLong_AsSsize_t(args[1]);
    z.max_span = PyLong_AsSsize_t(args[2]);
    z.max_depth = (int)PyLong_AsLong(args[3]);
    if (PyErr_Occurred())
        return NULL;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    if ((z.spans = PyList_New(0)) == NULL)
        goto done;
    z.s = view.buf;
    z.n = n = view.len;
    z.deep = 1;
    i = skip_ws(z.s, 0, n);
    if (i >= n || z.s[i] != '{')
        goto decline;
    i++;
    while ((r = lazy_key(z.s, &i, n, &k0, &k1)) == 1) {
        int key = key_is(z.s, k0, k1, "functions") ? 0
                : key_is(z.s, k0, k1, "nki_functions") ? 1 : -1;
        if (key >= 0 && seen[key]++)
            goto decline;
        if (key >= 0 && i < n && z.s[i] == '[') {
            if ((r = lazy_objects(&z, &i, key, -1)) < 0)
                goto done;
            if (r == 0)
                goto decline;
        } else if ((i = lazy_skip(z.s, i, n, 1, &z.deep)) < 0) {
            goto decline;
        }
        if ((r = lazy_next(z.s, &i, n, '}')) < 0)
            goto decline;
        if (r == 0)
            break;
    }
    if (r < 0 || skip_ws(z.s, i, n) != n || z.deep > z.max_depth
            || PyList_GET_SIZE(z.spans) == 0)
        goto decline;
    size = n;
    for (k = 0; k < PyList_GET_SIZE(z.spans); k++) {
        PyObject *t = PyList_GET_ITEM(z.spans, k);
        size -= PyLong_AsSsize_t(PyTuple_GET_ITEM(t, 4))
                - PyLong_AsSsize_t(PyTuple_GET_ITEM(t, 3)) - 2;
    }
    if (size > z.max_span)
        goto decline;
    if ((skel = PyBytes_FromStringAndSize(NULL, size)) == NULL)
        goto done;
    out = PyBytes_AS_STRING(skel);
    pos = out_pos = 0;
    for (k = 0; k < PyList_GET_SIZE(z.spans); k++) {
        PyObject *t = PyList_GET_ITEM(z.spans, k);
        Py_ssize_t a = PyLong_AsSsize_t(PyTuple_GET_ITEM(t, 3));
        Py_ssize_t b = PyLong_AsSsize_t(PyTuple_GET_ITEM(t, 4));
        memcpy(out + out_pos, z.s + pos, (size_t)(a - pos));
        out_pos += a - pos;
        memcpy(out + out_pos, "[]", 2);
        out_pos += 2;
        pos = b;
    }
    memcpy(out + out_pos, z.s + pos, (size_t)(n - pos));
    res = PyTuple_Pack(2, skel, z.spans);
    goto done;
decline:
    res = Py_NewRef(Py_None);
done:
    Py_XDECREF(skel);
    Py_XDECREF(z.spans);
    PyBuffer_Release(&view);
    return res;
}
