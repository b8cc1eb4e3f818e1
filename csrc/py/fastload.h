/* py/fastload.h -- what the loader's fast path shares between its files (binding only):
**   py/fastload_cfg.c  the state: its static part once per configuration, the rest per load
**   py/fastload.c      the walker: instructions, operands and sync entries from JSON
**   py/fastload_rec.c  the packed record buffers and the Records tables handed to Python
**   py/jsonsplit.c     a large JSON document's structure, to parse it in interruptible pieces */
#ifndef BS_PY_FASTLOAD_H
#define BS_PY_FASTLOAD_H

#include "bind.h"

#define FL_CAPSULE "birsim._birsim.fastload"
#define FL_STATIC_CAPSULE "birsim._birsim.fastload_static"

/* key classes, parameter kinds and packed tables: csrc/bs_fastload.def */
enum {
#define BS_FL_CLASS(name) FL_##name,
#include "bs_fastload.def"
    FL_NCLASSES
};
enum {
#define BS_FL_KIND(name) FL_##name,
#include "bs_fastload.def"
    FL_NKINDS
};
enum {
#define BS_FL_TABLE(name) FL_BUF_##name,
#include "bs_fastload.def"
    FL_NBUFS
};
enum { FL_MAX_PARAMS = 8, FL_MAX_SYNCS = 64, FL_MAX_KEYS = 5, FL_MAX_DTYPES = 64 };
enum { FL_MAX_FIELDS = 32 };       /* fields of a packed table's record */
enum { FL_VCACHE = 256 };          /* slots of the value cache (a power of two) */
/* Key ids (fl_keys): the vocabulary's size, the pointer cache's slots (a power of two),
** the entries of an instruction a scan keeps for the key check; FL_NOID: a key the full
** vocabulary gave no id (the walker then looks it up by value). */
enum { FL_VOCAB = 1024, FL_PCACHE = 1024, FL_MAX_ENTRIES = 64, FL_NOID = -1 };

/* A value the walker looked up: in table, str (owned) had code (fastload.c lookup). */
typedef struct fl_vcache {
    PyObject *table;
    PyObject *str;
    int64_t   code;
} fl_vcache;

typedef struct fl_buf {
    char      *data;              /* cap bytes (NULL until the first record), owned */
    size_t     len, cap;          /* bytes in use, bytes allocated */
    Py_ssize_t count;             /* records (the walker's and blank slots) */
    Py_ssize_t own;               /* records the walker put */
    int        given;             /* _fast_fill handed the records over: no more of them */
    size_t     hint;              /* bytes to grow to at once when the first 64 KB fill up:
                                  ** the last load's size of this table (0: double) */
} fl_buf;

typedef struct fl_param {
    char       slot;              /* 'i' or 'f' */
    int        index;
    int        kind;
    int        nkeys;
    PyObject  *keys[FL_MAX_KEYS]; /* str, owned */
    PyObject  *table;             /* FL_TABLE, FL_ACC (commands): dict str -> int, owned */
    PyObject  *ops;               /* FL_ACC: the reduce ops, dict str -> ALU code, owned */
    uint64_t   fold_ops;          /* FL_ACC: bit per ALU code an accumulator folds with */
    int64_t    lo, hi;            /* FL_INT: the range; FL_RAW: 0 and the largest integer;
                                  ** FL_ACC: the LoadAccumulate start's ins index, and the
                                  ** LoadAccumulate code; FL_ILIST: its integers' range */
    int64_t    count;             /* FL_ILIST: the entries it must have, or -1: any */
    int64_t    hole_lo, hole_hi;  /* FL_ILIST: no integer within [hole_lo, hole_hi] */
    int64_t    second_lo;         /* FL_ILIST of pairs: a pair's second integer's least */
    int        width;             /* FL_ILIST: 0, or 2: a list of [a, b] pairs, flattened */
    int64_t    idle;              /* FL_ACC: the Idle command's code */
    int64_t    def_op;            /* FL_ACC: the reduce op when not given */
    int        flag, value;       /* FL_RAW: i index of the by-value flag, f index of it;
                                  ** FL_ACC: i index of reduce_op, f index of reduce_init */
    int        required;
    int64_t    def_i;
    double     def_f;
    int        kid[FL_MAX_KEYS];  /* the keys' ids (fl_keys) */
} fl_param;

typedef struct fl_op {
    PyObject  *name;              /* canonical opcode name (for classify), owned */
    int32_t    code;
    PyObject  *keyclass;          /* dict: key -> class int or ok(value) callable, owned */
    Py_ssize_t most[2];           /* most ins, outs (_keys.OPERANDS): more declines */
    PyObject  *warns;             /* the topic every instruction warns about, or NULL:
                                  ** the walker declines the first (opcodes.Op.warns) */
    int        handback;          /* its handler reads its own keys (fastload.HANDBACK):
                                  ** the walker reads the rest and hands it back */
    int        nparams;
    fl_param   params[FL_MAX_PARAMS];
    signed char *kcls;            /* FL_VOCAB entries: keyclass's class of the key of that
                                  ** id once the walker met it (a class int), or -1: ask
                                  ** keyclass (not met yet, or an UNMODELLED ok(value)) */
} fl_op;

/* Key ids: each key string the walker meets gets a small id by value (vocab), so one
** pass over a dict files its values by id (fl_scan) instead of a hash lookup per key
** read. The ids of the walker's keys (K_*) are their K_ value, then the parameter
** rows'. (The vocabulary keeps the first object of each key string it met: at most
** FL_VOCAB strings a process.) */
typedef struct fl_keys {
    PyObject *vocab;              /* dict str -> id (int), owned */
    int       nvocab;
} fl_keys;

/* The ids by key object, during one _fast_block call: the JSON parsers give each key of
** a document (msgspec: of every document) one string object. A cached object is
** referenced, so its address cannot be reused while it is there; a slot keeps the last
** key hashed to it. Released when the call ends (bs_fl_scan_done): held longer, the
** keys of a freed tree would pin its memory. */
typedef struct fl_kcache {
    PyObject *ptr[FL_PCACHE];     /* owned, or NULL */
    int       id[FL_PCACHE];
    int       used[FL_PCACHE];    /* the slots holding a key */
    int       nused;
} fl_kcache;

/* One dict's values by key id: val[id] is current when stamp[id] == cur; the entries
** (key, value, id) in order when kept (an instruction's, for the key check). */
typedef struct fl_scan {
    uint32_t  cur;
    int       n;
    uint32_t  stamp[FL_VOCAB];
    PyObject *val[FL_VOCAB];      /* borrowed from the dict */
    PyObject *ekey[FL_MAX_ENTRIES], *evalue[FL_MAX_ENTRIES];
    int       eid[FL_MAX_ENTRIES];
} fl_scan;

enum {
    K_name, K_opcode, K_type, K_instruction_type, K_engine, K_ins, K_outs, K_sync_info,
    K_on_wait, K_on_update, K_kind, K_memref, K_ap, K_dtype, K_offset, K_mode, K_id,
    K_value, K_wait_value, K_update_value, K_target_core, K_set, K_regref,
    K_memsetref, K_reg_ap_offset, K_const_ap_offset, K_nloc, K_loc0, K_predicted_latency_ns,
    NKEYS
};

typedef struct fl_state {
    PyObject *base;               /* a load's state: the static state's capsule, whose
                                  ** dicts, kinds and opcode rows it borrows (NULL in the
                                  ** static state itself: _fast_static) */
    /* per load (NULL in the static state) */
    PyObject *insn_recs, *opnd_recs, *sync_recs, *infos;    /* lists: None per record */
    PyObject *sbuf;               /* the string table's bytes (instruction names appended) */
    PyObject *lists;              /* Tables.fast_lists: record index -> its FL_ILIST list */
    PyObject *sets, *locs, *regs;                           /* record lists (dicts) */
    fl_buf    bufs[FL_NBUFS];                               /* FL_BUF_insns, ... */
    size_t    last_len[FL_NBUFS]; /* static: the tables' bytes at the last load's
                                  ** _fast_fill, the next load's growth hint (doubling
                                  ** from 64 KB copied and faulted in ~2x the table) */
    /* static: made once per configuration (birsim/_load/fastload.py new_state) */
    PyObject *engines, *dtypes, *waits, *updates, *synctypes, *ops_index, *classify;
    PyObject *physical_ap, *register_access, *register_alias, *imm_value;   /* kinds */
    PyObject *register_ap, *warn_reg_ap;
    fl_op    *ops;
    Py_ssize_t nops;
    fl_keys  *keys;               /* key ids (the static state's, shared) */
    fl_vcache *vc;                /* during a _fast_block call: its value cache */
    fl_kcache *kc;                /* during a _fast_block call: its key ids by object */
    struct fl_insn *r;            /* a load's walker scratch (NULL until its first call) */
    int32_t   physical, reg_ap, reg_access, imm, int32, float32;   /* kinds, dtypes */
    int32_t   semaphore, event, sem_ge_imm, sem_add_imm, sem_ge_reg, sem_inc, sem_dec;
    uint64_t  evt_waits, evt_updates;                       /* bit per mode code < 64 */
    int       dtype_size[FL_MAX_DTYPES];                    /* bytes per item, by code */
    Py_ssize_t max_dims, max_operands;
    bs_insn   insn_tmpl;
    bs_opnd   opnd_tmpl;
    bs_sync   sync_tmpl;
    PyObject *k[NKEYS];
    PyObject *fname[FL_NBUFS][FL_MAX_FIELDS];   /* the packed tables' field names */
} fl_state;

/* {=== shared by the walker's files ===} */

/* obj[key] or NULL when absent or null (borrowed). */
static inline PyObject *item(PyObject *d, PyObject *key)
{
    PyObject *v = PyDict_GetItemWithError(d, key);
    return v == Py_None ? NULL : v;
}

/* The id of key (an exact str): FL_NOID when the vocabulary is full, < FL_NOID with a
** Python error. bs_fl_key_cache (fastload_cfg.c) fills cache slot h. */
int bs_fl_key_cache(fl_keys *voc, fl_kcache *kc, PyObject *key, size_t h);
static inline int key_id(fl_keys *voc, fl_kcache *kc, PyObject *key)
{
    uintptr_t p = (uintptr_t)key;
    size_t h = (size_t)((p >> 4) ^ (p >> 14)) & (FL_PCACHE - 1);
    if (kc->ptr[h] == key)
        return kc->id[h];
    return bs_fl_key_cache(voc, kc, key, h);
}

/* The value the last scan of sc filed under key id `id` (NULL when absent or null). */
static inline PyObject *sget(const fl_scan *sc, int id)
{
    PyObject *v;
    if (id < 0 || sc->stamp[id] != sc->cur)
        return NULL;
    v = sc->val[id];
    return v == Py_None ? NULL : v;
}

typedef struct fl_insn {
    bs_insn   in;
    bs_opnd   opnds[2 * 64];
    bs_sync   syncs[FL_MAX_SYNCS];
    int       nopnd, nsync;
    PyObject *list;               /* FL_ILIST: the JSON list (borrowed), or NULL */
    fl_scan   top, sub;           /* the instruction's dict; one nested dict at a time */
    fl_vcache vc[FL_VCACHE];      /* the call's value cache */
    int       vused[FL_VCACHE];   /* its slots holding a value */
    int       nvused;
    fl_kcache kc;                 /* the call's key ids by object */
} fl_insn;

/* The names of the instruction's function and its loader's warnings. */
typedef struct fl_names {
    PyObject *locs, *regs, *sets;     /* dicts name -> index */
    PyObject *seen;                   /* topics the loader will warn about (a set) */
} fl_names;

/* fastload.c: an instruction read into r (its opcode's row in *opp): 1, or 0 when the
** walker declines it (the Python path loads it), -1 with a Python error. */
int bs_fl_read_insn(fl_state *st, PyObject *obj, const fl_names *nm, fl_insn *r, fl_op **opp);
/* A load's walker scratch (st->r, zeroed: stale stamps, empty caches) and the end of a
** call: the caches' objects released (the stamps stay: a scan's own are all current). */
fl_insn *bs_fl_scratch(fl_state *st);
void bs_fl_scan_done(fl_insn *r);

/* fastload_cfg.c: _fast_static(config), the part no program changes, as a capsule named
** FL_STATIC_CAPSULE; _fast_new(static, config), a load's state on it, named FL_CAPSULE. */
PyObject *bs_fl_static(PyObject *self, PyObject *cfg);
PyObject *bs_fl_new(PyObject *self, PyObject *const *args, Py_ssize_t nargs);

/* fastload_rec.c */
/* Append count records of size bytes at rec to b. -1 with MemoryError. */
int bs_fl_buf_put(fl_buf *b, const void *rec, size_t size, Py_ssize_t count);
/* Blank slots up to record `upto` of table `which` (0 insns, 1 opnds, 2 syncs). */
int bs_fl_buf_pad(fl_state *st, int which, Py_ssize_t upto);
extern PyType_Spec bs_fl_records_spec;
PyObject *bs_fl_fill(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
/* The field names of the packed tables' records into st->fname (static state). */
int bs_fl_field_names(fl_state *st);
PyObject *bs_fl_trim_heap(PyObject *self, PyObject *unused);
/* py/jsonsplit.c: _json_split(buf, piece), the structure of a large document in pieces. */
PyObject *bs_fl_json_split(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
/* py/jsonsplit.c: _json_lazy(buf, min_span, max_span, max_depth), a document's instruction
** arrays to parse when the loader reaches them. */
PyObject *bs_fl_json_lazy(PyObject *self, PyObject *const *args, Py_ssize_t nargs);

#endif
