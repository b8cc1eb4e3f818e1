"""The flat tables the C core runs (csrc/ir/program.h), built as NumPy structured arrays.

:class:`Catalog` holds what the extension exports about itself (opcodes, dtypes, enums,
memory sizes, table layouts); nothing here re-declares those lists. :class:`Tables`
collects records (dicts of field -> value) while the loader walks the program and turns
them into arrays whose layout comes from ``_birsim.layouts``.
"""

from types import MappingProxyType
from typing import Any, Dict, Mapping

import numpy as np

from .. import _birsim
from .._birsim import _fast_fill, _pack_records, _pack_spec, _pack_tables
from ..errors import ProgramError

__all__ = ["Catalog", "Tables", "TABLE_NAMES", "program_parts", "make_program"]

#: Tables whose records the C walker packs: table -> index in its state
#: (csrc/bs_fastload.def).
PACKED = dict(_birsim.fastload_codes["table"])
_PACKED_ROWS = tuple(PACKED.items())

TABLE_NAMES = ("module", "funcs", "sets", "locs", "regs", "regions", "blocks", "syncs",
               "opnds", "insns", "queues")

_FORMATS = {"I32": "<i4", "I64": "<i8", "F64": "<f8"}
_FTYPES = {v: k for k, v in _FORMATS.items()}
#: Pack dict records in C (``_birsim._pack_records``); False: NumPy's conversion of row
#: tuples only (tests compare the two).
PACK_RECORDS = True

# Values of fields a record leaves out (everything else is 0).
_DEFAULT_VALUES: Dict[str, Dict[str, Any]] = {
    "regions": {"owner": -1},
    "sets": {"alias": -1},
    "syncs": {"reg": -1, "target_core": -1},
    "opnds": {"loc": -1, "offset_expr": -1, "reg": -1, "addrs": -1},
    "insns": {"body": -1, "target": -1, "target2": -1, "str": -1, "str2": -1, "x": -1,
              "lat": -1.0},
}
_DEFAULTS: Dict[str, Mapping[str, Any]] = {t: MappingProxyType(d)
                                          for t, d in _DEFAULT_VALUES.items()}
del _DEFAULT_VALUES
#: id(a _DEFAULTS value) -> its row-function key (the values are read-only and live as
#: long as the module, so their ids are never another object's)
_DEFAULT_KEYS = {id(d): tuple(sorted(d.items())) for d in _DEFAULTS.values()}


class Catalog:
    """The extension's self-description, plus reverse maps for listings.

    Built from ``birsim._birsim`` by :meth:`from_extension`, or from plain dicts of the
    same shape (tests)."""

    def __init__(self, opcodes, dtypes, alu_ops, act_funcs, enums, arches, layouts,
                 program_type=None, params=None):
        self.opcodes = opcodes          # name -> (code, sim class letter, family)
        self.dtypes = dtypes            # name -> (code, size, kind letter, lanes)
        self.alu_ops = alu_ops          # name -> code
        self.act_funcs = act_funcs      # name -> code
        self.enums = enums              # GROUP -> {name: value}
        self.arches = arches            # name -> (level, sbuf parts/bpp, psum parts/bpp)
        self.layouts = layouts          # table -> {"itemsize", "fields"}
        self.program_type = program_type
        # opcode -> {field: (slot "i"/"f"/"x", index)}: the BS_PARAM rows of bs_ops.def
        self.params = params if params is not None else {n: {} for n in opcodes}
        self.op_code = {n: v[0] for n, v in opcodes.items()}
        self.op_name = {v[0]: n for n, v in opcodes.items()}
        self.dtype_code = {n: v[0] for n, v in dtypes.items()}
        self.dtype_name = {v[0]: n for n, v in dtypes.items()}
        self.dtype_size = {n: v[1] for n, v in dtypes.items()}
        self.alu_name = {v: n for n, v in alu_ops.items()}
        self.act_name = {v: n for n, v in act_funcs.items()}
        self.enum_name = {g: {v: n for n, v in t.items()} for g, t in enums.items()}
        self.numpy_dtypes = {t: _numpy_dtype(layouts[t]) for t in TABLE_NAMES}

    @classmethod
    def from_extension(cls, ext):
        return cls(ext.opcodes, ext.dtypes, ext.alu_ops, ext.act_funcs, ext.enums,
                   ext.arches, ext.layouts, ext.Program, ext.params)

    def abstract_opcodes(self):
        """Opcodes the loader rejects: the sim-class-B opcodes of family ``abstract``."""
        return {n for n, (_, sim, fam) in self.opcodes.items() if fam == "abstract"}


def _numpy_dtype(layout):
    names, formats, offsets = [], [], []
    for name, offset, ftype, count in layout["fields"]:
        names.append(name)
        fmt = _FORMATS[ftype]
        formats.append((fmt, (count,)) if count != 1 else fmt)
        offsets.append(offset)
    return np.dtype({"names": names, "formats": formats, "offsets": offsets,
                     "itemsize": layout["itemsize"]})


class Tables:
    """Records, pools and the string table of one program while it is being built."""

    def __init__(self):
        self.recs = {t: [] for t in TABLE_NAMES}
        self.exprs = []
        self.ipool = []
        self.fpool = []
        self._strings = {}
        self._sbuf = bytearray()
        self.string("")
        self.fast = None                # the C walker's state (birsim/_load/fastload.py)
        self.fast_lists = {}            # its records' integer lists: index -> JSON list
        self.fast_list_offsets = []     # (index, ipool offset) of those, once placed

    def add(self, table, **fields):
        """Append a record and return its index; fields can be filled in later through
        ``recs[table][index]``."""
        recs = self.recs[table]
        recs.append(fields)
        return len(recs) - 1

    def string(self, s):
        """The offset of string ``s`` in the string table (interned)."""
        off = self._strings.get(s)
        if off is None:
            off = self._strings[s] = self.label(s)
        return off

    def label(self, s):
        """The offset of ``s`` appended to the string table, not interned: what
        instruction names take (labels, mostly unique: a dict of every name cost ~10 % of
        a load; the C walker appends its instructions' names the same way)."""
        off = len(self._sbuf)
        try:
            data = s.encode("utf-8")
        except UnicodeEncodeError:
            raise ProgramError("string %s is not valid Unicode text (lone surrogate)"
                               % ascii(s)[:80]) from None
        self._sbuf += data + b"\0"
        return off

    def ilist(self, values):
        """Append integers to ``ipool``; return (offset, count)."""
        off = len(self.ipool)
        self.ipool.extend(values)
        return off, len(values)

    def fast_list(self, index, values):
        """The integer list of the C walker's record ``index`` (its nlist is set):
        appended to ipool now, its offset written at :meth:`arrays`."""
        self.fast_list_offsets.append((index, self.ilist(values)[0]))

    def flist(self, values):
        """Append floats to ``fpool``; return (offset, count)."""
        off = len(self.fpool)
        try:
            self.fpool.extend(float(v) for v in values)
        except OverflowError:
            raise ProgramError("an immediate array holds an integer too large for a "
                               "float64") from None
        return off, len(values)

    def _packed_arrays(self, fast, catalog, out):
        """insns, opnds and syncs when the C walker packed some of their records (a None
        in ``recs``): the walker's buffer becomes the array (no copy) and the dict records
        are written over their blank slots. Operand and sync records are in the order
        they were made, the walker's in pass 1 and the Python path's in pass 2; each
        instruction's are contiguous, which is all the tables ask."""
        for t, which in PACKED.items():
            recs = self.recs[t]
            data, rest = _fast_fill(fast, which, recs)
            arr = np.frombuffer(data, dtype=catalog.numpy_dtypes[t])
            if rest:
                _fill_rest(arr, recs, rest, t, self)
            if t == "insns":
                for index, off in self.fast_list_offsets:
                    arr["list"][index] = off
            out[t] = arr

    @property
    def strings(self):
        return bytes(self._sbuf)

    def arrays(self, catalog):
        """Every table as a structured array, ``exprs``/``ipool`` as int64 arrays,
        ``fpool`` as float64 and ``strings`` as bytes."""
        out = {}
        fast, self.fast = self.fast, None
        if fast is not None and PACK_RECORDS:
            # _packed_arrays and _arrays_rest's loop in one C call: the walker's tables
            # (their dict records NumPy converts, in fills), then the others
            dtypes = catalog.numpy_dtypes
            _table_plan(dtypes)
            fills = []
            left = _pack_tables(self.recs, _PLAN[2], dtypes, np.frombuffer, out, fast,
                                _fast_fill, _PACKED_ROWS, fills)
            for t, rest in fills:
                _fill_rest(out[t], self.recs[t], rest, t, self)
            if self.fast_list_offsets:
                arr = out["insns"]
                for index, off in self.fast_list_offsets:
                    arr["list"][index] = off
            if left is None:            # a dtype replaced: the plan again
                return self._arrays_rest(catalog, out)
            for t in left:
                out[t] = _to_array(self.recs[t], dtypes[t], _DEFAULTS.get(t, {}), t, self)
            return self._pools(out)
        if fast is not None:
            self._packed_arrays(fast, catalog, out)
        return self._arrays_rest(catalog, out)

    def _arrays_rest(self, catalog, out):
        dtypes = catalog.numpy_dtypes
        plan = _table_plan(dtypes)
        if PACK_RECORDS:
            # the loop below in one C call (_pack_tables); a table it leaves (None in
            # out, in its place) takes the loop's NumPy conversion
            left = _pack_tables(self.recs, _PLAN[2], dtypes, np.frombuffer, out)
            if left is not None:
                for t in left:
                    out[t] = _to_array(self.recs[t], dtypes[t], _DEFAULTS.get(t, {}), t, self)
                return self._pools(out)
        for t, dtype, fn in plan:
            if t in out:
                continue
            if dtypes[t] is not dtype:      # a dtype replaced in place: the plan again
                _PLAN[0] = None
                return self._arrays_rest(catalog, out)
            recs = self.recs[t]
            data = None
            if not recs:
                out[t] = fn.empty[:]        # as _to_array_fast makes it, without its calls
                continue
            if PACK_RECORDS and type(recs) is list:
                data = _pack_records(recs, fn.spec, dtype.itemsize)
            out[t] = np.frombuffer(data, dtype=dtype) if data is not None else \
                _to_array(recs, dtype, _DEFAULTS.get(t, {}), t, self)
        return self._pools(out)

    def _pools(self, out):
        out["exprs"] = _pool(self.exprs, _I8)
        out["ipool"] = _pool(self.ipool, _I8)
        out["fpool"] = _pool(self.fpool, _F8)
        out["strings"] = self.strings
        return out


_I8, _F8 = np.dtype("<i8"), np.dtype("<f8")
_EMPTY_POOLS = {_I8: np.zeros(0, _I8), _F8: np.zeros(0, _F8)}
#: (the catalog's numpy_dtypes, [(table, dtype, row function)], the same for
#: _pack_tables: ((table, dtype, spec parsed by _pack_spec, itemsize, zero-length array),
#: ...)): _table_plan
_PLAN: list = [None, None, None]


def _pool(values, dtype):
    """A pool as an array (an empty one a view of a shared zero-length array: a new array
    object without NumPy's conversion of an empty list)."""
    return np.array(values, dtype=dtype) if values else _EMPTY_POOLS[dtype][:]


def _table_plan(dtypes):
    """Each table with its dtype and row function (``_to_array_fast``'s, with the table's
    defaults), made once per catalog's dtypes rather than looked up per table per load
    (``Tables.arrays`` checks each dtype is still the catalog's)."""
    if _PLAN[0] is not dtypes:
        plan = [(t, dtypes[t], _row_function(
            dtypes[t], _DEFAULT_KEYS[id(_DEFAULTS[t])] if t in _DEFAULTS else ()))
            for t in TABLE_NAMES]
        # each spec parsed once (_pack_spec), not by every load's _pack_tables
        _PLAN[:] = [dtypes, plan, tuple((t, dtype, _pack_spec(fn.spec, dtype.itemsize),
                                         dtype.itemsize, fn.empty)
                                        for t, dtype, fn in plan)]
    return _PLAN[1]


def _fill_rest(arr, recs, rest, table, tables):
    """The dict records ``recs[i]`` for ``i`` in ``rest`` into ``arr[i]`` (an error names
    the record by its index)."""
    if rest:
        arr[rest] = _to_array([recs[i] for i in rest], arr.dtype, _DEFAULTS.get(table, {}),
                              table, tables, rest)


def _to_array(recs, dtype, defaults, table="?", tables=None, index=None):
    """One structured record per dict: a tuple per record in field order, so NumPy fills
    the array in C (columns built in Python cost ~5x more on large programs). A value that
    does not fit its column is a ProgramError naming the table, field and record
    (``index[k]`` for the k-th of ``recs`` when given)."""
    try:
        return _to_array_fast(recs, dtype, defaults)
    except (OverflowError, ValueError, TypeError):
        pass
    for k, r in enumerate(recs):
        try:
            _to_array_fast([r], dtype, defaults)
        except (OverflowError, ValueError, TypeError) as e:
            bad = []
            for name in dtype.names:
                if name in r:
                    try:
                        np.array(r[name], dtype=dtype.fields[name][0])
                    except (OverflowError, ValueError, TypeError):
                        bad.append("%s=%s" % (name, _short(r[name])))
            at = k if index is None else index[k]
            what = "%s record %d" % (table, at)
            if tables is not None and "name" in r and table in ("insns", "funcs", "blocks",
                                                               "sets", "locs", "regs"):
                what += " '%s'" % _string_at(tables, r["name"])
            elif tables is not None and table in _OWNED:
                what = _owner(tables, table, at) or what
            raise ProgramError("a value does not fit the program tables: %s: %s"
                               % (what, ", ".join(bad) or str(e))) from None
    raise ProgramError("the program tables cannot be built (%s)" % table)


# Records that instructions own: table -> (first-record field, count fields).
_OWNED = {"opnds": ("opnd", ("nin", "nout")), "syncs": ("sync", ("nwait", "nupd"))}


def _owner(tables, table, at):
    """Which instruction owns record ``at`` of an operand or sync table, as "operand 1
    of instruction 'cp' (function 'main', block 'b0', position 3)", or None. Only a dict
    record can hold a value that does not fit, and only an instruction the Python path
    built (a dict too) owns one, so the dict records are searched; this names the
    record the same way on both load paths, whose operand records come in other
    orders."""
    first, counts = _OWNED[table]
    for i, r in enumerate(tables.recs["insns"]):
        if r is None or first not in r:
            continue
        k = at - r[first]
        if not 0 <= k < sum(r.get(c, 0) for c in counts):
            continue
        where = []
        recs = tables.recs
        if 0 <= r.get("func", -1) < len(recs["funcs"]):
            where.append("function '%s'" % _string_at(tables, recs["funcs"][r["func"]]["name"]))
        if 0 <= r.get("block", -1) < len(recs["blocks"]):
            blk = recs["blocks"][r["block"]]
            where.append("block '%s'" % _string_at(tables, blk["name"]))
            if "insn0" in blk:
                where.append("position %d" % (i - blk["insn0"]))
        return "%s %d of instruction '%s'%s" % (
            "operand" if table == "opnds" else "sync entry", k,
            _string_at(tables, r.get("name", 0)), " (%s)" % ", ".join(where) if where else "")
    return None


def _short(v):
    s = repr(v)
    return s if len(s) <= 60 else s[:57] + "..."


def _string_at(tables, off):
    try:
        b = tables.strings
        return b[off:b.index(b"\0", off)].decode()
    except (ValueError, TypeError, IndexError, UnicodeDecodeError):
        return "?"


def _to_array_fast(recs, dtype, defaults):
    key = _DEFAULT_KEYS.get(id(defaults)) if defaults else ()
    fn = _row_function(dtype, key if key is not None else tuple(sorted(defaults.items())))
    if not recs:
        # a view of the layout's zero-length array: a new array object, without NumPy's
        # allocation of one (an empty program table is common)
        return fn.empty[:]
    if PACK_RECORDS and type(recs) is list:
        # packed in C when every value is an exact int or float that fits its field (the
        # bytes NumPy's conversion gives: tests/load/test_load_pack.py); else NumPy's
        # conversion below judges the table, as before
        data = _pack_records(recs, fn.spec, dtype.itemsize)
        if data is not None:
            return np.frombuffer(data, dtype=dtype)
    return np.array([fn(r) for r in recs], dtype=dtype)


#: (id(dtype), defaults) -> (dtype, row function): _row_function. Keyed by the dtype's
#: id, not the dtype: a structured dtype's hash walks its fields at every call (a tiny
#: program's load converts eleven tables); the entry keeps the dtype (its id) alive.
_ROW_CACHE: dict = {}


def _pad(v, width, default):
    if v is None:
        return (default,) * width
    if len(v) == width:
        return v
    return tuple(v) + (default,) * (width - len(v))


def _row_function(dtype, defaults):
    """``row(record) -> tuple`` for ``dtype``, generated once per layout so a record costs
    one call instead of a loop over its fields (loading 20k instructions: this was a third
    of the time): missing fields take their default, short array fields are padded.
    ``row.empty`` is the layout's zero-length array."""
    key = (id(dtype), defaults)
    hit = _ROW_CACHE.get(key)
    if hit is not None and hit[0] is dtype:
        return hit[1]
    d = dict(defaults)
    parts = []
    for name in dtype.names:
        shape = dtype.fields[name][0].shape
        default = d.get(name, 0)
        if shape:
            parts.append("_pad(g(%r), %d, %r)" % (name, shape[0], default))
        else:
            parts.append("g(%r, %r)" % (name, default))
    src = "def row(r):\n    g = r.get\n    return (%s,)\n" % ", ".join(parts)
    env = {"_pad": _pad}
    exec(src, env)                      # noqa: S102 -- code built from the layout only
    fn = env["row"]
    fn.empty = np.zeros(0, dtype=dtype)
    fn.spec = tuple((name, dtype.fields[name][1], _FTYPES[dtype.fields[name][0].base.str],
                     dtype.fields[name][0].shape[0] if dtype.fields[name][0].shape else 1,
                     d.get(name, 0)) for name in dtype.names)
    if len(_ROW_CACHE) >= 256:
        _ROW_CACHE.clear()
    _ROW_CACHE[key] = (dtype, fn)
    return fn


def program_parts(arrays):
    """The ``dict`` of buffers that ``_birsim.Program`` takes (it copies them): the
    contiguous arrays themselves, no bytes copy of each table in between."""
    parts = {}
    for name, value in arrays.items():
        parts[name] = value if isinstance(value, bytes) else np.ascontiguousarray(value)
    return parts


def make_program(program_type, tables):
    """``program_type(program_parts(tables))`` without the parts dict when every value is a
    buffer the C type takes whole (the loader's own tables: contiguous arrays and bytes),
    as it is; a value it cannot take (a strided array, a list) makes it retry with
    :func:`program_parts`' contiguous copies, as before (an error the copies raise too is
    raised by the retry, so every error is the one it was).
    """
    if type(tables) is dict:
        try:
            return program_type(tables)
        except (BufferError, TypeError, ValueError):   # NumPy: ValueError
            pass
    return program_type(program_parts(tables))
