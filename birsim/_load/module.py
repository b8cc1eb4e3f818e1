"""The loaded program as users see it: :class:`Module`.

A Module is immutable. It holds the validated program as the flat tables of
csrc/ir/program.h (``.tables``), the C program built from them (``.program``, on first
access), and a readable summary: functions, tensors, the entry function's inputs and
outputs, and a listing.
"""

from dataclasses import dataclass, fields
from typing import Any, Dict, Optional

import numpy as np

from .._birsim import _io_tensors, _loc_bytes, _module_common, _tables_bytes
from .._listing import render_listing
from .spell import ARCH_ALIASES
from .tables import make_program
from ..dtypes import numpy_dtype

__all__ = ["Module", "Tensor", "IOTensor"]


def _string(strings, off):
    end = strings.index(b"\0", off)
    return strings[off:end].decode()


@dataclass(frozen=True)
class Tensor:
    """A tensor set (``memory_location_set``) of some function.

    ``memory`` is the memory of its first location (``DRAM``, ``SB`` or ``PSUM``; ``None``
    for a set without locations); ``shared`` is ``addr_space: Shared``; ``index`` is the
    set's row in ``tables["sets"]``."""

    name: str
    kind: str
    dtype: str
    shape: tuple
    memory: str
    function: str
    shared: bool
    locations: tuple
    index: int

    @property
    def numpy_dtype(self) -> np.dtype:
        return numpy_dtype(self.dtype)


@dataclass(frozen=True)
class IOTensor:
    """An input or output of a run: a set of the entry function with an input or output
    kind, and its one memory location. ``rows`` and ``rowbytes`` say how the array's
    bytes sit in the location (``rows`` rows, one per partition, or one packed row);
    ``core`` is the core whose program holds it; ``debug_name`` the set's
    ``debug.tensor_name`` (None when absent), another name a work directory's files may
    use."""

    name: str
    location: str
    dtype: str
    shape: tuple
    set_index: int
    location_index: int
    rows: Optional[int] = None
    rowbytes: Optional[int] = None
    core: int = 0
    debug_name: Optional[str] = None

    @property
    def numpy_dtype(self) -> np.dtype:
        """The NumPy dtype of arrays given for (or returned from) this tensor."""
        return numpy_dtype(self.dtype)


def _maker(cls):
    """``make(*values)``: the frozen dataclass ``cls`` with its fields set in order, as
    ``cls(*values)`` makes it (the same instance dict) at under half the cost: a frozen
    dataclass's ``__init__`` sets each field through ``object.__setattr__``, and a tiny
    program's load makes one per tensor and per input and output."""
    names = tuple(f.name for f in fields(cls))
    new = object.__new__

    def make(*values):
        obj = new(cls)
        obj.__dict__.update(zip(names, values))
        return obj
    return make


_new_tensor = _maker(Tensor)
_new_io_tensor = _maker(IOTensor)
_TENSOR_FIELDS = tuple(f.name for f in fields(Tensor))
_IO_FIELDS = tuple(f.name for f in fields(IOTensor))
#: Make the Module's parts of a load in C (csrc/py/loadmod.c: _common, the inputs and
#: outputs, location_bytes, tables_bytes); False: the Python functions below, the
#: specification (tests/load/test_load_modfast.py compares the two).
MODULE_FAST = True


def _common(loader):
    """:func:`_common_py` (the specification), in C."""
    if MODULE_FAST:
        return _module_common(loader.sets, loader.locs, Tensor, _TENSOR_FIELDS)
    return _common_py(loader)


def _common_py(loader):
    """What every Module of a group shares, made once per group (a module list of N
    programs would otherwise cost N times the group's tensors): every set as a
    :class:`Tensor`, their ``debug.tensor_name``, each set's first location, each
    location's (rows, rowbytes), the tensors by module and each location's name."""
    all_tensors, by_module = [], {}
    for index, s in enumerate(loader.sets):
        t = _new_tensor(s["name"], s["kind"], s["dtype"], s["shape"], s["memory"],
                        s["function"], s["shared"], tuple(s["locs"]), index)
        all_tensors.append(t)
        by_module.setdefault(s["module"], []).append(t)
    loc0 = {}
    for li, loc in enumerate(loader.locs):
        loc0.setdefault(loc["set"], li)
    # list comprehensions made tuples, not generators (a generator each cost a tiny
    # program's load ~0.3 us)
    return (tuple(all_tensors), tuple([s.get("debug_name") for s in loader.sets]), loc0,
            tuple([loc["rows"] for loc in loader.locs]),
            {k: tuple(v) for k, v in by_module.items()},
            tuple([loc["name"] for loc in loader.locs]))


def record_bytes(loc_recs, set_recs, dram):
    """:func:`location_bytes` of the location and set records (dicts) of a load."""
    got = _loc_bytes(loc_recs, set_recs, dram) if MODULE_FAST else None
    if got is None:
        got = location_bytes([(r["placed"], r["memtype"], r["parts"], r["bpp"], r["set"])
                              for r in loc_recs], [s["shared"] for s in set_recs], dram)
    return got


def location_bytes(locs, set_shared, dram):
    """(per-core, shared) bytes of data + shadow of the buffers a Simulator allocates for
    the location records ``locs`` ((placed, memtype, parts, bpp, set) each; ``set_shared``
    by set; ``dram`` the DRAM memtype): a location placed in SBUF/PSUM has none of its
    own, a Shared DRAM set's is allocated once for all cores."""
    per_core = shared = 0
    for placed, memtype, parts, bpp, si in locs:
        if placed and memtype != dram:
            continue                     # inside SBUF/PSUM
        size = 2 * parts * bpp
        if set_shared[si] and memtype == dram:
            shared += size
        else:
            per_core += size
    return per_core, shared


def tables_bytes(tables):
    """Bytes of one set of loaded tables (arrays and the string table)."""
    if MODULE_FAST:
        return _tables_bytes(tables, np.ndarray)
    return sum([v.nbytes if isinstance(v, np.ndarray) else len(v) for v in tables.values()])


class Module:
    """A loaded BIR program. Made by :func:`birsim.load`.

    Attributes: ``functions`` (names; ``functions`` then ``nki_functions``), ``entry``
    (the entry function's name), ``arch`` (canonical name, e.g. ``"gen3"``), ``version``,
    ``tensors`` (every :class:`Tensor`), ``inputs`` and ``outputs`` (:class:`IOTensor`,
    allocation order), ``axis_names`` (loop axis name per axis slot), ``tables`` (the
    structured arrays, pools and string table handed to the C core) and ``program`` (the
    ``birsim._birsim.Program``)."""

    def __init__(self, loader: Any, tables: Any = None, group: Any = None,
                 common: Any = None) -> None:
        cat = loader.cat
        self._catalog = cat
        self.version = loader.version
        self.arch = loader.arch
        self.core = loader.module_index
        funcs = loader.funcs
        if len(funcs) == 1:             # the common case without two list comprehensions
            self.functions = (funcs[0].name,)
            self.nki_functions = self.functions if funcs[0].nki else ()
        else:
            self.functions = tuple([f.name for f in funcs])
            self.nki_functions = tuple([f.name for f in funcs if f.nki])
        self.entry = loader.entry.name
        self.warnings = tuple(loader.warnings)
        self._source = loader.source
        self._group = group
        self._func0 = loader.funcs[0].index
        common = common if common is not None else _common(loader)
        (self._all_tensors, self._debug_names, self._loc0, self._loc_rows, by_module,
         self._loc_names) = common
        self.tensors = by_module.get(self.core, ())
        self.tables = tables if tables is not None else loader.t.arrays(cat)
        if MODULE_FAST:             # io_tensor of each, in C
            self.inputs = _io_tensors(common, loader.entry.inputs, self.core, IOTensor,
                                      _IO_FIELDS)
            self.outputs = _io_tensors(common, loader.entry.outputs, self.core, IOTensor,
                                       _IO_FIELDS)
        else:
            self.inputs = tuple([self.io_tensor(s) for s in loader.entry.inputs])
            self.outputs = tuple([self.io_tensor(s) for s in loader.entry.outputs])
        self.axis_names = tuple(loader.axes)
        self._queue_blocks = tuple([tuple(q) for q in loader.queue_blocks]) \
            if loader.queue_blocks else ()
        self._queue0 = loader.queue0
        self._program: Any = None
        self._arch_programs: Dict[str, Any] = {}
        #: [(per-core, shared) location bytes, tables bytes, the tables' arch code]:
        #: load() counts them from its records (birsim/_load/passes.py, _finish_group),
        #: else birsim/simulator.py at the first Simulator() (the tables never change)
        self._byte_counts: list = [None, None, None]

    def io_tensor(self, set_index: int, location_index: Optional[int] = None) -> IOTensor:
        """The :class:`IOTensor` of set ``set_index`` (a row of ``tables["sets"]``)."""
        t = self._all_tensors[set_index]
        li = self._loc0[set_index] if location_index is None else location_index
        rows, rowbytes = self._loc_rows[li]
        # the location's name as loaded (the string table holds the same text)
        return _new_io_tensor(t.name, self._loc_names[li],
                              t.dtype, t.shape, t.index, li, rows, rowbytes, self.core,
                              self._debug_names[set_index])

    @property
    def program(self) -> Any:
        """The C program (``birsim._birsim.Program``), built and verified on first use.
        For a module loaded with others (one per core) it runs this module alone."""
        if self._program is None:
            if self._catalog.program_type is None:
                raise RuntimeError("this Module was loaded without the birsim extension")
            self._program = make_program(self._catalog.program_type, self._alone())
        return self._program

    def _alone(self, arch=None):
        """The tables with this module's entry on every core."""
        tables = self.tables
        if (self._group is None or self._group.ncores is None) and arch is None:
            return tables
        tables = dict(tables)
        tables["module"] = tables["module"].copy()
        if self._group is not None and self._group.ncores is not None:
            tables["module"]["nentries"] = 0
            tables["module"]["entry"] = self._entry_index()
        if arch is not None:
            tables["module"]["arch"] = self._catalog.enums["ARCH"][arch]
        return tables

    def _entry_index(self):
        return self._func0 + self.functions.index(self.entry)

    def program_for_arch(self, arch: str) -> Any:
        """The C program with the module's ``arch`` replaced by ``arch`` (a name or alias,
        e.g. ``"trn1"``); placed locations must fit that arch's memories."""
        name = ARCH_ALIASES.get(arch, arch)
        if name not in self._catalog.arches:
            raise ValueError("unknown arch %r; accepted: %s (aliases: %s)" % (
                arch, ", ".join(self._catalog.arches), ", ".join(sorted(ARCH_ALIASES))))
        if name == self.arch:
            return self.program
        cached = self._arch_programs.get(name)
        if cached is None:
            cached = make_program(self._catalog.program_type, self._alone(name))
            self._arch_programs[name] = cached
        return cached

    def tensor(self, name: str, function: Optional[str] = None) -> Tensor:
        """The tensor set called ``name`` (in ``function``, default the entry function)."""
        function = function or self.entry
        for t in self.tensors:
            if t.name == name and t.function == function:
                return t
        raise KeyError("no tensor set '%s' in function '%s'" % (name, function))

    def listing(self) -> str:
        """A readable listing of the program: functions, tensors, registers, blocks and
        instructions (engine, opcode, operands, keys, sync), loop bodies indented, then
        the DMA queues."""
        return render_listing(self.tables, self._catalog, self)

    def __str__(self) -> str:
        return self.listing()

    def _repr_html_(self):
        """Jupyter: summary, inputs/outputs and the listing with blocks and loops folded."""
        from .._html import module_html
        return module_html(self)

    def __repr__(self) -> str:
        ninsn = len(self.tables["insns"])
        return ("<birsim.Module entry=%r functions=%d instructions=%d inputs=%s outputs=%s "
                "arch=%s>" % (self.entry, len(self.functions), ninsn,
                              [t.name for t in self.inputs], [t.name for t in self.outputs],
                              self.arch))
