"""``birsim.load``: read BIR-JSON, validate it and build the C core's tables.

The contract is docs/spec/BIR-JSON.md (docs/program-format.md is its user-facing form); the tables
are csrc/ir/program.h. Loading runs in two passes over the program:

1. *structure*: functions, their allocations (sets, locations, registers), then every
   region (function body, loop body, DMA block) with its blocks and instructions. This
   assigns every index and records every name, so a name may be used before it is
   defined. Regions are placed breadth-first: a region's blocks are contiguous, a block's
   instructions are contiguous, and a loop body becomes a new region placed after its
   parent's blocks. DMA blocks come last, each as a ``DMABlock`` instruction whose body
   is a one-block region of its descriptors.
2. *details* (birsim/_load/insns.py): engines, operands, sync records and the per-opcode slots
   of every instruction, with every name resolved.

Every malformed input raises :class:`~birsim.errors.ProgramError` whose message starts with
the JSON path of the bad value.
"""

import collections
import contextvars
import gc
import itertools
import json
import operator
import os
import re
import sys
import traceback
import weakref
from typing import Any, Dict, Iterable, List, Tuple, Union, overload

from . import fastload as _fastload, insns as _insns
from .fastload import LazyInsns as _LazyInsns
from .. import _warn
from .._birsim import _alloc_set, _fast_block, _json_split, _trim_heap, limits as _limits
from .schema import (MISSING, Ctx, as_dict, as_int, as_list, as_name, as_str, enum_check,
                      enum_value, get, int_list, _I64_MAX)
from .tables import Catalog, Tables, make_program
from ..dtypes import DTYPE_ALIASES
from ..errors import ProgramError
from .module import (Module, _common as _module_common, record_bytes as _record_bytes,
                     tables_bytes as _tables_bytes)

from .spell import (ARCH_ALIASES, DMA_BLOCK_OPS, ENGINE_ALIASES, INPUT_KINDS, LOOP_OPS,
                    MUST_ALIAS, NO_DATA_MEMORY, OPCODE_ALIASES, OPCODE_KEYS, OUTPUT_KINDS,
                    PSUM_BANK_BYTES, REGISTER_DTYPES, STRICT_SUFFIX, TERMINATORS)

__all__ = ["load", "program_group", "Module", "ENGINE_ALIASES", "ARCH_ALIASES", "OPCODE_KEYS"]

_catalog = None
#: Load common instructions with the C walker (csrc/py/fastload.c); False: the Python
#: path only (the specification; tests compare the two).
FAST_PATH = True
#: Read common tensor sets with ``_alloc_set`` (csrc/py/loadalloc.c); False: ``_set``
#: only (the specification; tests/load/test_load_alloc.py compares the two).
ALLOC_FAST = True


def default_catalog():
    """The catalog of the compiled extension ``birsim._birsim`` (imported on first use)."""
    global _catalog
    if _catalog is None:
        from .. import _birsim
        _catalog = Catalog.from_extension(_birsim)
    return _catalog


@overload
def load(source: Union[List[Any], Tuple[Any, ...]], *, strict: bool = ...) -> List[Module]: ...
@overload
def load(source: Dict[str, Any], *, strict: bool = ...) -> Module: ...
@overload
def load(source: Union[str, bytes, "os.PathLike[str]"], *,
         strict: bool = ...) -> Union[Module, List[Module]]: ...


def load(source: Any, *, strict: bool = False) -> Union[Module, List[Module]]:
    """Load a BIR-JSON program and return a :class:`birsim.module.Module`.

    ``source`` is a module ``dict``, JSON text (``bytes``, or a ``str`` whose first
    non-blank character is ``{``) or a file path (any other ``str``, or an
    ``os.PathLike``). The module may be bare or wrapped as ``{"module": {...}}``, in
    birsim's spelling or the compiler's (docs/spec/BIR-JSON.md; both may be mixed).

    One program per core: a ``list`` (of anything ``load`` accepts, Modules included),
    JSON text holding an array, or a compiler work directory (``ncXX/sg00/`` per core,
    or ``sg00/``) gives a ``list`` of Modules, module k for core k, that
    :class:`birsim.Simulator` runs together.
    Raises :class:`~birsim.errors.ProgramError` for anything malformed; with
    ``strict=True`` also for what would be a load warning (a misspelled key, a reading
    birsim chose), with the warning's text. A Module keeps its load warnings
    (``module.warnings``)."""
    # Loading allocates millions of small objects while the whole JSON tree is alive, so
    # the cyclic collector's full passes kept rescanning it: pausing it halves load time
    # (a 20k-instruction file: 1.2 s -> 0.65 s). Nothing here needs collecting mid-load.
    return _gc_paused(_load_source, source, bool(strict))


def _gc_paused(fn, *args, **kw):
    """``fn(*args, **kw)`` with the cyclic collector paused; on failure its frames'
    objects are freed first (``_drop_frames``), and the C heap is trimmed after."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return fn(*args, **kw)
    except BaseException as e:
        _drop_frames(e)
        raise
    finally:
        if was_enabled:
            gc.enable()
        _release_heap()


def _drop_frames(e):
    """A failed (or interrupted) load: free what its frames hold (the JSON tree, the
    tables begun) before the collector is back on. Kept alive by the traceback, millions
    of objects made while it was paused would all be scanned by its first pass (seconds
    after a Ctrl-C during a 248 MB load). After a Ctrl-C they are freed by a thread
    (``birsim._free.defer``) so the interrupt reaches the caller at once."""
    if isinstance(e, KeyboardInterrupt):
        from .. import _free
        _free.defer(e)
    else:
        traceback.clear_frames(e.__traceback__)


def _load_source(source, strict=False):
    """load() without the GC pause: the JSON tree lives in this frame only, so it is
    freed before load() trims the heap."""
    try:
        if isinstance(source, (list, tuple)):
            return _load_group(list(source), default_catalog(), strict=strict)
        if isinstance(source, (str, os.PathLike)) and not _is_text(source) \
                and os.path.isdir(source):
            from .dumpdir import find_dumps
            return _load_group([str(d) for d in find_dumps(source)], default_catalog(),
                               strict=strict)
        root, prefix, keep, text = _read_source(source, lazy=True)
        if text is not None:                # its instruction arrays parsed one by one
            m = _load_lazily(root, prefix, keep, strict)
            if m is not None:
                return m
            root = None                     # any failure: the text parsed whole, as before
            filename = None if isinstance(source, (bytes, bytearray, memoryview)) else keep
            root, prefix, keep = _tree(_parse_json(text, filename), keep)
        if isinstance(root, list):          # JSON text holding an array: one per core
            for k, m in enumerate(root):
                if not isinstance(m, dict):
                    raise ProgramError("[%d]: the BIR-JSON module must be an object, got %s"
                                       % (k, type(m).__name__), path="[%d]" % k)
            return _load_group([_unwrap(m) + (None,) for m in root], default_catalog(),
                               strict=strict)
        return _load_group([(root, prefix, keep)], default_catalog(), single=True,
                           strict=strict)
    except RecursionError:
        raise ProgramError("the program is nested too deeply (expressions, blocks or "
                           "values more than about %d levels deep)"
                           % (sys.getrecursionlimit() // 4), path="") from None


#: True during a load on a lazily parsed tree (``_load_lazily``): its warnings are
#: emitted once it succeeded (its Module's ``warnings``, in order).
_DEFERRED = contextvars.ContextVar("birsim_deferred_warnings", default=False)


def _load_lazily(root, prefix, keep, strict):
    """The Module of a tree whose instruction arrays are parsed when the loader reaches
    their block (``fastload.lazy_tree``), or None when anything failed (a parse error in
    an array, a ProgramError, a warning under strict): the caller then loads the text
    parsed whole, so that errors and warnings are those of a whole parse (a syntax error
    anywhere before any semantic error, no warning before a syntax error). Its warnings
    wait for its success."""
    token = _DEFERRED.set(True)
    try:
        m = _load_group([(root, prefix, keep)], default_catalog(), single=True,
                        strict=strict)
    except Exception:                       # noqa: BLE001 -- loaded again, parsed whole
        return None
    finally:
        _DEFERRED.reset(token)
    for message in m.warnings:
        _warn.warn(message)
    return m


def program_group(items: Iterable[Any], strict: bool = False) -> List[Module]:
    """The Modules of one program per core for ``items`` (a list of Modules loaded
    together, or of anything :func:`load` accepts): ``load(items, strict=strict)`` unless
    they already are one group's modules, in order."""
    items = list(items)
    if items and all(isinstance(m, Module) for m in items):
        g = items[0]._group
        if g is not None and g.ncores == len(items) and \
                [ref() for ref in g.modules] == items:
            return items
    return _gc_paused(_load_group, items, default_catalog(), strict=bool(strict))


#: Instructions loaded since the C heap was last trimmed (see _release_heap).
_loaded_since_trim = 0
#: Trim the C heap after loads totalling this many instructions (a trim costs ~15 us
#: after a small load; a 10k-instruction load leaves ~8 MB of freed heap resident).
TRIM_AFTER_INSNS = 2000


def _release_heap():
    """Give the freed heap of large loads back to the system. Loading frees the file's
    text and the parsed JSON tree; glibc keeps freed memory below its trim threshold
    (twice the largest freed mmap chunk: a 4.6 MB file's text raises it to 9 MB) and free
    chunks between live ones resident, so a 10k-instruction load left ~0.85 KB per
    instruction of free heap in the process's resident memory (DESIGN.md, loading)."""
    global _loaded_since_trim
    if _loaded_since_trim >= TRIM_AFTER_INSNS:
        _loaded_since_trim = 0
        _trim_heap()


#: JSON text: a str whose first character after blanks (and a BOM) is "{" or "[" (a
#: match, not an lstrip: that copied the whole text, twice per load)
_TEXT_START = re.compile("[ \t\r\n\ufeff]*[{\\[]")


def _is_text(source):
    return isinstance(source, str) and _TEXT_START.match(source) is not None


def _load(source, catalog):
    root, prefix, keep = _read_source(source)
    return _load_group([(root, prefix, keep)], catalog, single=True)


def raise_load_warnings(modules):
    """Under strict: a ProgramError with the first load warning of ``modules``, if any."""
    for m in modules:
        if m.warnings:
            raise ProgramError(m.warnings[0] + STRICT_SUFFIX, path="")


def _load_group(sources, catalog, single=False, strict=False):
    """Load the modules of ``sources`` (one per core) into one set of tables. Returns a
    Module (``single``) or the list of Modules."""
    if not sources:
        raise ProgramError("an empty list of modules", path="")
    if len(sources) > _limits["max_cores"]:
        raise ProgramError("a list of %d modules: one runs per core, and birsim runs at most %d "
                           "cores" % (len(sources), _limits["max_cores"]), path="")
    shared = _Shared()
    loaders = []
    for k, src in enumerate(sources):
        if isinstance(src, tuple):
            root, pre, keep = src
        elif isinstance(src, Module):
            if src._source is None:
                raise ProgramError("module %d of the list was loaded from a source birsim did "
                                   "not keep; pass its dict, text or path instead" % k, path="")
            root, pre, keep = _read_source(src._source)
        else:
            root, pre, keep = _read_source(src)
        if isinstance(root, list):
            raise ProgramError("module %d of the list is itself a list" % k, path="")
        if not single:
            pre = (k,) + pre
        ld = _Loader(catalog, root, pre, shared, k if not single else 0)
        ld.source = keep
        ld.owned = not isinstance(keep, dict)      # a caller's dict is never touched
        ld.strict = strict
        try:
            ld.run()
        except ProgramError as e:
            if single or not isinstance(keep, str) or _is_text(keep):
                raise
            raise ProgramError("%s (module %d, %s)" % (e, k, keep), path=e.path, code=e.code,
                               function=e.function, instruction=e.instruction) from None
        loaders.append(ld)
    if len({ld.arch for ld in loaders}) > 1:
        raise ProgramError("the modules of one run must have the same arch, got %s"
                           % ", ".join(ld.arch for ld in loaders), path="")
    if not single:
        _share_by_name(loaders)
    group = _finish_group(loaders, catalog, shared, single)
    return group[0] if single else group


def _read_source(source, lazy=False):
    """(root object, JSON path prefix, what to keep to reload it). The root may be a list
    (JSON text holding an array). ``lazy``: (root, prefix, keep, text), text not None when
    the root's large instruction arrays are left to parse (``fastload.lazy_tree``; the
    text to parse whole if a load on it fails)."""
    keep = source
    if isinstance(source, dict):
        data = source
    elif isinstance(source, (bytes, bytearray, memoryview)):
        keep = bytes(source)
        if lazy:
            data = _parse_lazy(keep)
            if data is not None:
                return _tree(data, keep) + (keep,)
        data = _parse_json(keep)
    elif _is_text(source):
        data = _parse_json(source)
    elif isinstance(source, (str, os.PathLike)):
        if os.path.isdir(source):
            raise ProgramError("%r is a directory: give birsim.load() the directory itself "
                               "(a compiler work directory), not inside a list"
                               % os.fspath(source), path="")
        try:
            with open(source, "rb") as fh:
                text = _read_file(fh)
        except (OSError, ValueError) as e:     # ValueError: a NUL or a lone surrogate
            raise ProgramError("cannot read BIR-JSON file %r: %s" % (os.fspath(source), e),
                               path="") from e
        _check_json_file(text, os.fspath(source))
        keep = os.fspath(source)
        if lazy:
            data = _parse_lazy(text)
            if data is not None:
                return _tree(data, keep) + (text,)
        data = _parse_json(text, keep)
    else:
        raise TypeError("birsim.load() takes a dict, JSON text, a path or a list of those, "
                        "not %s" % type(source).__name__)
    root = _tree(data, keep)
    return root + (None,) if lazy else root


def _tree(data, keep):
    if isinstance(data, list):
        return data, (), keep
    if not isinstance(data, dict):
        raise ProgramError("the BIR-JSON module must be an object, got %s"
                           % type(data).__name__, path="")
    return _unwrap(data) + (keep,)


#: Files and documents of at least this many bytes are read and parsed in pieces of
#: PIECE bytes, checking for Ctrl-C between them (a 248 MB file took 3.3 s to interrupt).
PIECES_FROM = 8 << 20
PIECE = 1 << 20


def _read_file(fh):
    """The file's bytes (a ``bytearray`` when large: read in pieces into one buffer)."""
    size = os.fstat(fh.fileno()).st_size
    if size < PIECES_FROM:
        return fh.read()
    buf = bytearray(size)
    with memoryview(buf) as mv:
        got = 0
        while got < size:
            n = fh.readinto(mv[got:got + 8 * PIECE])
            if not n:
                break
            got += n
    if got < size:                      # the file shrank meanwhile
        del buf[got:]
    buf += fh.read()                    # ... or grew
    return buf


def _parse_pieces(body):
    """msgspec's reading of a large document, parsed in pieces of about PIECE bytes
    (``_birsim._json_split`` finds them, checking for Ctrl-C as it scans) and joined: the
    objects a whole parse gives (a key given twice keeps its first place and its last
    value, as there). msgspec's errors propagate (the caller parses the text whole)."""
    node = _json_split(body, PIECE)
    if node is None:
        return _fast_json(body)
    with memoryview(body) as mv:
        return _join_pieces(mv, node)


def _join_pieces(mv, node):
    kind, segments = node
    if kind:
        items = []
        for seg in segments:
            if len(seg) == 2:
                items.extend(_fast_json(b"[" + mv[seg[0]:seg[1]] + b"]"))
            else:
                items.append(_join_pieces(mv, seg[0]))
        return items
    obj = {}
    for seg in segments:
        if len(seg) == 2:
            obj.update(_fast_json(b"{" + mv[seg[0]:seg[1]] + b"}"))
        else:
            obj[_fast_json(mv[seg[0]:seg[1]])] = _join_pieces(mv, seg[2])
    return obj


def _unwrap(data):
    if isinstance(data.get("module"), dict) and "functions" not in data:
        return data["module"], ("module",)
    return data, ()


def _check_json_file(text, filename):
    """A clear error for files that are not the JSON dump (e.g. NKI's .colz)."""
    head = text[:64].lstrip(b"\xef\xbb\xbf \t\r\n")
    if filename.endswith(".colz") or (head[:1] not in (b"{", b"[") and text.strip()):
        raise ProgramError(
            "%s is not a BIR-JSON file: birsim reads the compiler's JSON dump of the backend "
            "IR (written per core as ncXX/sg00/bir_debug.*after-lower_sync*.json by "
            "neuronx-cc --internal-print-after=lower_sync); compressed .colz files are not "
            "read" % filename, path="")


try:                                    # a faster reader of the same JSON (DESIGN.md)
    import msgspec as _msgspec
    _fast_json = _msgspec.json.Decoder().decode
    _FAST_JSON_ERRORS = (_msgspec.MsgspecError, RecursionError)
except ImportError:                     # pragma: no cover -- a dependency; json does it all
    _fast_json = None  # type: ignore[assignment]
#: Parse with msgspec when it is installed (json.loads reads what it rejects).
FAST_JSON = True


def _where(filename):
    return " in %s" % filename if filename else ""


def _parse_lazy(text):
    """msgspec's tree of ``text`` (bytes) with its large instruction arrays left to parse
    when the loader reaches them (``fastload.lazy_tree``), or None: parse it whole."""
    if _fast_json is None or not FAST_JSON:
        return None
    if text[:3] == b"\xef\xbb\xbf":
        text = text[3:]
    try:
        return _fastload.lazy_tree(text, _fast_json)
    except _FAST_JSON_ERRORS:
        return None


def _parse_json(text, filename=None):
    if _fast_json is not None and FAST_JSON:
        # msgspec gives the objects json.loads gives for every document it accepts
        # (tests/load/test_load_fastload.py compares them); what it rejects (NaN/Infinity, numbers
        # out of the float range, lone surrogates, invalid UTF-8, bad syntax, deep
        # nesting) is read, or reported, by json.loads as before.
        body = text
        if isinstance(body, (bytes, bytearray)) and body[:3] == b"\xef\xbb\xbf":
            body = body[3:]
        elif isinstance(body, str) and body[:1] == "\ufeff":
            body = body[1:]
        try:
            if len(body) >= PIECES_FROM:
                return _parse_pieces(body.encode() if isinstance(body, str) else body)
            return _fast_json(body)
        except _FAST_JSON_ERRORS:
            pass
        except UnicodeEncodeError as e:       # a str holding a lone surrogate
            raise ProgramError("invalid JSON%s: the text holds a character that is not "
                               "Unicode text (%s)" % (_where(filename), e.reason),
                               path="") from None
    where = _where(filename)
    try:
        if isinstance(text, (bytes, bytearray)):
            text = text.decode("utf-8-sig")
        text = text.lstrip("\ufeff")
        return json.loads(text)
    except UnicodeDecodeError as e:
        raise ProgramError("invalid JSON%s: not UTF-8 (%s)" % (where, e), path="") from None
    except json.JSONDecodeError as e:
        raise ProgramError("invalid JSON%s: line %d column %d: %s"
                           % (where, e.lineno, e.colno, e.msg), path="") from None
    except ValueError as e:                   # e.g. Python's limit on an integer's digits
        raise ProgramError("invalid JSON%s: %s" % (where, e), path="") from None
    except RecursionError:
        raise ProgramError("invalid JSON%s: nested too deeply" % where, path="") from None


class _Shared:
    """What the modules of one group share: the tables and the global slot lists."""

    def __init__(self):
        self.t = Tables()
        self.insns = []                  # InsnInfo, by instruction index
        self.axes = []                   # axis names, by slot
        self.sets = []                   # per set: dict used by Module
        self.locs = []                   # per location: dict used by Module
        self.ntriggers = 0
        self.arena_all = 0               # bytes of the all-cores DRAM arena


def _share_by_name(loaders):
    """One program per core: the DRAM input/output sets and the Shared DRAM sets of one
    name are one tensor for all modules (docs/spec/BIR-JSON.md "Execution rules"): their locations
    move to one place in the all-cores DRAM arena (``placed`` 2)."""
    shared = loaders[0].shared
    locs = shared.t.recs["locs"]
    groups = {}
    for ld in loaders:
        for si in ld.entry.inputs + ld.entry.outputs + ld.shared_sets:
            info = shared.sets[si]
            if info["memory"] != "DRAM":
                continue
            groups.setdefault(info["name"], []).append((ld, si))
    for name, members in groups.items():
        first_ld, first = members[0]
        f_info = shared.sets[first]
        for ld, si in members[1:]:
            info = shared.sets[si]
            if (info["dtype"], info["shape"]) != (f_info["dtype"], f_info["shape"]):
                raise ProgramError(
                    "tensor '%s' is %s %s in module %d but %s %s in module %d: a tensor "
                    "shared by the modules must have one dtype and shape"
                    % (name, f_info["dtype"], list(f_info["shape"]), first_ld.module_index,
                       info["dtype"], list(info["shape"]), ld.module_index), path="")
        size = 0
        layouts = set()
        for ld, si in members:
            li = shared.t.recs["sets"][si]["loc0"]
            size = max(size, locs[li]["parts"] * locs[li]["bpp"])
            layouts.add(shared.locs[li]["rows"])
        if len(layouts) > 1:
            raise ProgramError("tensor '%s' is laid out differently in DRAM by the modules "
                               "(rows of %s bytes): a shared tensor needs one layout"
                               % (name, " vs ".join(str(r[1]) for r in sorted(layouts))),
                               path="")
        addr = shared.arena_all
        shared.arena_all += (size + 63) // 64 * 64
        for ld, si in members:
            if len(members) == 1 and not shared.t.recs["sets"][si]["shared"]:
                continue
            li = shared.t.recs["sets"][si]["loc0"]
            locs[li].update(placed=2, addr=addr, base=0)
            shared.t.recs["sets"][si]["shared"] = 1
            shared.sets[si]["shared"] = True


def _finish_group(loaders, catalog, shared, single):
    t = shared.t
    # t.ilist and t.add written out (a tiny load's every call counts)
    ipool = t.ipool
    off = len(ipool)
    if shared.axes:
        ipool.extend([t.string(a) for a in shared.axes])
    entries = [ld.entry.index for ld in loaders]
    e0 = len(ipool)
    ipool.extend(entries)
    t.recs["module"].append({
        "arch": catalog.enums["ARCH"][loaders[0].arch], "entry": entries[0],
        "naxes": len(shared.axes), "axis_names": off, "ntriggers": shared.ntriggers,
        "nentries": 0 if single else len(entries), "entries": e0})
    tables = t.arrays(catalog)
    group = _Group(tables, catalog, None if single else len(loaders))
    common = _module_common(loaders[0])
    mods = [Module(ld, tables, group, common) for ld in loaders]
    # what Simulator() counts of a module (birsim/simulator.py, _budget_logs), from the
    # records the tables were made of: a new program's first Simulator() read it back
    # from the structured arrays (a quarter of its Python time)
    recs = t.recs
    sets = recs["sets"]
    loc_bytes = _record_bytes(recs["locs"], sets, catalog.enums["MEM"]["DRAM"])
    nbytes = _tables_bytes(tables)
    arch = recs["module"][0]["arch"]
    for m in mods:
        m._byte_counts[:] = (loc_bytes, nbytes, arch)
    group.modules = tuple(weakref.ref(m) for m in mods)   # weak: no Module <-> group cycle
    global _loaded_since_trim
    _loaded_since_trim += len(tables["insns"])
    return mods


class _Group:
    """The modules loaded together (one per core) and their shared tables."""

    def __init__(self, tables, catalog, ncores):
        self.tables = tables
        self.catalog = catalog
        self.ncores = ncores             # None: one module
        self.modules = ()                # weak references to the group's Modules, in order
        self._program = None

    @property
    def program(self):
        if self._program is None:
            self._program = make_program(self.catalog.program_type, self.tables)
        return self._program


def _product(values):
    out = 1
    for v in values:
        out *= v
    return out


class FuncInfo:
    """A function while loading: its names and where its records are."""

    def __init__(self, index, name, obj, ctx, nki):
        self.index, self.name, self.obj, self.ctx, self.nki = index, name, obj, ctx, nki
        self.sets, self.locs, self.regs = {}, {}, {}
        self.blocks, self.insns = {}, {}
        self.inputs, self.outputs = [], []      # set indices, allocation order


class InsnInfo:
    """An instruction while loading. ``loops`` is the chain of enclosing loops, outermost
    first, as (opcode, axis name or None, axis slot or -1). A handed-back instruction
    without a pass-1 part has ``ctx`` None and ``where`` (its block's path, position)
    until pass 2 needs its context."""

    __slots__ = ("index", "obj", "ctx", "op", "func", "block", "region", "loops", "dma",
                 "back", "where")

    def __init__(self, index, obj, ctx, op, func, block, region, loops, dma=False):
        self.index, self.obj, self.ctx, self.op = index, obj, ctx, op
        self.func, self.block, self.region, self.loops, self.dma = \
            func, block, region, loops, dma
        self.back = False                # the C walker read all but its handler's keys


#: The opcodes with a pass-1 part (_Loader._structure): loops and DMATrigger.
_STRUCTURED = frozenset(LOOP_OPS) | {"DMATrigger"}
_ABSTRACT: List[Any] = [None, frozenset()]   # (catalog, its abstract opcodes): _Loader
#: (id(layout fields), field) -> (those fields, the field's count): _Loader._field_count
_FIELD_COUNTS: Dict[Any, Any] = {}
#: (catalog, its arches, its arch checker): _arch_check
_ARCH_CHECK: List[Any] = [None, None, None]


def _positive_ints(v, ctx):
    """A list of integers >= 1 (a shape, dims)."""
    return int_list(v, ctx, lo=1)


def _positive_ints_fast(v):
    if type(v) is list:
        for x in v:
            if type(x) is not int or not 1 <= x <= _I64_MAX:
                return MISSING
        return list(v)
    return MISSING


_positive_ints.fast = _positive_ints_fast  # type: ignore[attr-defined]


def _non_negative(v, ctx):
    return as_int(v, ctx, lo=0)


_non_negative.fast = (lambda v: v if type(v) is int and 0 <= v <= _I64_MAX  # type: ignore
                      else MISSING)

#: (catalog, the tables its checkers read, {what: checker}): _catalog_checks; one tuple
#: replaced whole, so a load in another thread never sees a mix of two catalogs'
_CHECKS: Tuple[Any, ...] = (None, (), None)


def _catalog_checks(cat):
    """The enum checkers of allocations for ``cat``, made once per catalog and tables
    (the checkers read the tables themselves, so only a table replaced by another makes
    new ones) rather than a dozen per load."""
    global _CHECKS
    E = cat.enums
    tables = (E, E["TKIND"], E["ADDRSPACE"], E["MEM"], cat.dtype_code, DTYPE_ALIASES,
              cat.enum_name, cat.dtype_name, cat.dtype_size, cat.layouts["sets"]["fields"])
    hit = _CHECKS
    # map(operator.is_): the comparison in C (a generator cost a load ~1 us)
    if hit[0] is not cat or not all(map(operator.is_, tables, hit[1])):
        hit = _CHECKS = (cat, tables, {
            "dtype": enum_check("dtype", cat.dtype_code, DTYPE_ALIASES),
            "kind": enum_check("tensor kind", E["TKIND"]),
            "addr_space": enum_check("addr_space", E["ADDRSPACE"]),
            "mem": enum_check("memory type", E["MEM"], allow_int=True),
            "set_cfg": _set_config(cat)})
    return hit[2]


def _set_config(cat):
    """What ``_alloc_set`` reads (csrc/py/loadalloc.c, in its CFG_* order): the tables
    themselves, so it reads what the checkers of _catalog_checks read; None (the Python
    path only) for a catalog without the names it assumes."""
    E = cat.enums
    try:
        shared = E["ADDRSPACE"]["Shared"]
        count = [c for name, _, _, c in cat.layouts["sets"]["fields"] if name == "shape"][0]
        return (E["TKIND"], cat.enum_name["TKIND"], E["TKIND"]["Internal"], cat.dtype_code,
                DTYPE_ALIASES, cat.dtype_name, cat.dtype_size, E["ADDRSPACE"], shared,
                shared == 0, E["MEM"], cat.enum_name["MEM"], NO_DATA_MEMORY, INPUT_KINDS,
                OUTPUT_KINDS, count)
    except (KeyError, IndexError):
        return None


def _arch_check(cat):
    """The ``arch`` key's checker for ``cat`` (made once per catalog and arch table)."""
    if _ARCH_CHECK[0] is not cat or _ARCH_CHECK[1] is not cat.arches:
        _ARCH_CHECK[:] = [cat, cat.arches,
                          enum_check("arch", {n: n for n in cat.arches}, ARCH_ALIASES)]
    return _ARCH_CHECK[2]


class _Loader:
    # slots: a load sets ~40 attributes, past the 30 an instance keeps without a dict of
    # its own, so every read and store was a dict operation; "__dict__" keeps any other
    # attribute possible
    __slots__ = ("cat", "root", "ctx", "shared", "module_index", "source", "t", "insns",
                 "axes", "sets", "locs", "insn0", "set0", "queue0", "funcs",
                 "func_by_name", "axis_slots", "triggers", "trigger_names", "queues",
                 "compiler_queues", "queue_blocks", "queue_all", "dma_blocks",
                 "dma_insn_names", "shared_sets", "set_ctx", "warned", "warnings", "_pending", "E",
                 "abstract", "checks", "dtype_check", "set_cfg", "fast", "fast_seen",
                 "owned", "strict", "version", "arch", "arch_info", "entry", "__dict__")

    def __init__(self, cat, root, prefix, shared=None, module_index=0):
        self.cat = cat
        self.root = root
        self.ctx = Ctx(tuple(prefix))
        self.shared = shared = shared or _Shared()
        self.module_index = module_index
        self.source = None
        self.t = shared.t
        self.insns = shared.insns        # InsnInfo, by instruction index (all modules);
        #                                  None: loaded by the C walker (fastload.py)
        self.axes = shared.axes          # axis names, by slot (all modules)
        self.sets = shared.sets          # per set: dict used by Module
        self.locs = shared.locs          # per location: dict used by Module
        self.insn0 = len(self.insns)
        self.set0 = len(self.sets)
        self.queue0 = len(self.t.recs["queues"])
        self.funcs = []
        self.func_by_name = {}
        self.axis_slots = collections.defaultdict(list)
        self.triggers = collections.defaultdict(list)   # (queue, DMA block name) -> [InsnInfo]
        self.trigger_names = collections.defaultdict(set)  # function index -> names
        self.queues = {}                 # queue name -> index
        self.compiler_queues = set()     # indices of queues from top-level `queues`
        self.queue_blocks = []           # per queue: [DMABlock insn index]
        self.queue_all = {}              # queue -> (ipool offset, count) of all its blocks
        self.dma_blocks = {}             # (queue index, DMA block name) -> [insn index]
        self.dma_insn_names = {}         # instruction names inside dma_queues
        self.shared_sets = []            # Shared DRAM sets (set indices)
        self.set_ctx = {}                # entry function's input/output sets: their JSON path
        self.warned = set()
        self.warnings = []
        self._pending = collections.deque()
        self.E = cat.enums
        if _ABSTRACT[0] is not cat:      # a catalog's opcodes never change: once per catalog
            _ABSTRACT[:] = [cat, frozenset(cat.abstract_opcodes())]
        self.abstract = _ABSTRACT[1]
        self.checks = _catalog_checks(cat)
        self.dtype_check = self.checks["dtype"]
        # the Python path alone (FAST_PATH False) reads sets in Python too
        self.set_cfg = self.checks["set_cfg"] if ALLOC_FAST and FAST_PATH else None
        if FAST_PATH and self.t.fast is None:
            self.t.fast = _fastload.new_state(self)
        self.fast = self.t.fast if FAST_PATH else None
        self.fast_seen = set()           # warnings the walker left to the Python path
        self.owned = False               # the tree is load()'s own (parsed from text)
        self.strict = False              # load(strict=True): a warning is a ProgramError

    def warn(self, topic, message):
        """A load-time warning, once per topic and module: the program depends on a
        reading birsim chose where the evidence is silent (README choices table)."""
        if topic in self.warned:
            return
        self.warned.add(topic)
        if self.strict:
            raise ProgramError(message + STRICT_SUFFIX, path="")
        self.warnings.append(message)
        if not _DEFERRED.get():
            _warn.warn(message)

    # ---- module -------------------------------------------------------------------

    def run(self):
        root, ctx = self.root, self.ctx
        self.version = get(root, "version", ctx, as_int, 2)
        if self.version not in (1, 2):
            raise ctx.key("version").error("unsupported version %d; accepted: 1, 2"
                                           % self.version)
        self.arch = get(root, "arch", ctx, _arch_check(self.cat), "gen3")
        self.arch_info = self.cat.arches[self.arch]
        self._index_functions()
        self._drain()
        self._index_queues()
        _insns.build_all(self)

    def _index_functions(self):
        root, ctx = self.root, self.ctx
        functions = get(root, "functions", ctx, as_list, [])
        # absent or null: the default, without get()'s call (most programs have none)
        nki = [] if root.get("nki_functions") is None else \
            get(root, "nki_functions", ctx, as_list, [])
        if not functions:
            raise ctx.error("the module has no functions (missing or empty 'functions')")
        index = len(self.t.recs["funcs"])
        for key, lst in (("functions", functions), ("nki_functions", nki)):
            for i, f in enumerate(lst):
                fctx = ctx.key(key, i)
                as_dict(f, fctx)
                name = get(f, "name", fctx, as_name, what="function")
                if name in self.func_by_name:
                    raise fctx.key("name").error("duplicate function name '%s'" % name)
                info = FuncInfo(index, name, f, fctx.named(function=name),
                                key == "nki_functions")
                self.funcs.append(info)
                self.func_by_name[name] = info
                index += 1
        main = self.func_by_name.get("main")
        self.entry = main if main is not None and not main.nki else self.funcs[0]
        for f in self.funcs:
            self._allocations(f)
        self._must_alias()
        for f in self.funcs:
            rec = self.t.recs["funcs"][f.index]
            rec["region"] = self._new_region(-1, f, get(f.obj, "blocks", f.ctx, as_list, []),
                                             f.ctx.key("blocks"), ())

    # ---- allocations --------------------------------------------------------------

    def _allocations(self, f):
        t = self.t
        rec = {"name": t.string(f.name), "set0": len(t.recs["sets"]),
               "reg0": len(t.recs["regs"]), "prog": self.module_index}
        t.recs["funcs"].append(rec)
        allocs = get(f.obj, "allocations", f.ctx, as_list, [])
        cfg = self.set_cfg
        if cfg is not None and allocs:
            entry = f is self.entry
            sink = (t._strings, t._sbuf, t.recs["sets"], t.recs["locs"], self.sets,
                    self.locs, f.sets, f.locs, f.index, f.name, self.module_index, entry)
        for i, a in enumerate(allocs):
            if cfg is not None:
                # a common tensor set read and its records made in C as _set makes them;
                # None: this set is read here from the start
                got = _alloc_set(cfg, a, sink, self.arch_info)
                if got is not None:
                    index, io, shared_dram = got
                    if io:
                        (f.inputs if io == 1 else f.outputs).append(index)
                        # its JSON path made only for an error (_set_path)
                        self.set_ctx[index] = (f.ctx, i)
                    if shared_dram and entry:
                        self.shared_sets.append(index)
                    continue
            actx = f.ctx.key("allocations", i)
            as_dict(a, actx)
            skind = get(a, "Skind", actx, as_str, None)
            if skind is None:           # compiler dumps: a set has memorylocations
                skind = "memory_location_set" if a.get("memorylocations") is not None \
                    else "register"
            if skind == "memory_location_set":
                self._set(f, a, actx)
            elif skind == "register":
                self._register(f, a, actx)
            else:
                raise actx.key("Skind").error("unknown allocation Skind '%s'; accepted: "
                                              "memory_location_set, register" % skind)
        rec["nset"] = len(t.recs["sets"]) - rec["set0"]
        rec["nreg"] = len(t.recs["regs"]) - rec["reg0"]

    def _set_name(self, a, ctx, locs):
        """``name``, else ``debug.tensor_name``, else the name of its single location."""
        if a.get("name") is not None:
            return get(a, "name", ctx, as_name)
        debug = a.get("debug")
        if isinstance(debug, dict) and debug.get("tensor_name") is not None:
            return as_name(debug["tensor_name"], ctx.key("debug", "tensor_name"))
        if isinstance(locs, list) and len(locs) == 1 and isinstance(locs[0], dict) \
                and locs[0].get("name") is not None:
            return as_name(locs[0]["name"], ctx.key("memorylocations", 0, "name"))
        raise ctx.error("missing required key 'name' of tensor set (and no debug.tensor_name "
                        "or single memory location to name it)")

    def _set_shape(self, a, ctx, name, locs, itemsize):
        """``tensor_shape``, else ``debug.shape``, else derived from the first location's
        ``dims`` (docs/spec/BIR-JSON.md, Allocations)."""
        check = _positive_ints
        if a.get("tensor_shape") is not None:
            return get(a, "tensor_shape", ctx, check)
        debug = a.get("debug")
        if isinstance(debug, dict) and debug.get("shape") is not None:
            return check(debug["shape"], ctx.key("debug", "shape"))
        if not locs:
            raise ctx.error("missing required key 'tensor_shape' of tensor set '%s' (and no "
                            "debug.shape or memory location dims to derive it)" % name)
        lctx = ctx.key("memorylocations", 0)
        loc = as_dict(locs[0], lctx)
        dims = get(loc, "dims", lctx, _positive_ints,
                   what="memory location (tensor set '%s' has no tensor_shape)" % name)
        mem = self._memtype(loc, lctx, name)
        if mem in ("SB", "PSUM"):
            if len(dims) != 2:
                raise lctx.key("dims").error("dims of %s must be [num_partitions, "
                                             "bytes_per_partition]" % mem)
            total, shape = dims[1], [dims[0]]
        else:
            total, shape = _product(dims), []
        if total % itemsize:
            raise lctx.key("dims").error(
                "dims %s do not divide into whole %d-byte elements (tensor set '%s' has no "
                "tensor_shape to give its shape)" % (dims, itemsize, name))
        return shape + [total // itemsize]

    def _memtype(self, loc, ctx, name):
        mem = loc.get("type")
        mem = self.checks["mem"].fast(mem) if mem is not None else MISSING
        if mem is MISSING:              # absent or not a plain name: get() says why
            mem = get(loc, "type", ctx, self.checks["mem"], what="memory location '%s'" % name)
        mem_name = self.cat.enum_name["MEM"][mem]
        if mem_name in NO_DATA_MEMORY:
            return "DRAM"
        if mem_name not in ("DRAM", "SB", "PSUM"):
            raise ctx.key("type").error("memory type %s cannot hold a tensor (use DRAM, SB "
                                        "or PSUM)" % mem_name)
        return mem_name

    def _set(self, f, a, ctx):
        t, E = self.t, self.E
        locs = get(a, "memorylocations", ctx, as_list, [])
        name = self._set_name(a, ctx, locs)
        if name in f.sets:
            raise ctx.key("name").error("duplicate tensor set name '%s'" % name)
        kind = get(a, "kind", ctx, self.checks["kind"], E["TKIND"]["Internal"])
        kind_name = self.cat.enum_name["TKIND"][kind]
        dtype = get(a, "dtype", ctx, self.dtype_check, what="tensor set '%s'" % name)
        dtype_name = self.cat.dtype_name[dtype]
        itemsize = self.cat.dtype_size[dtype_name]
        shape = self._set_shape(a, ctx, name, locs, itemsize)
        max_rank = self._field_count("sets", "shape")
        if not 1 <= len(shape) <= max_rank:
            raise ctx.key("tensor_shape").error("tensor_shape must have 1 to %d dimensions, "
                                                "got %d" % (max_rank, len(shape)))
        # optional keys read (checked) only when given: get() of an absent key is its
        # default, so the common case skips the call
        if a.get("partition_dim") is not None:
            get(a, "partition_dim", ctx, as_int)
        space = 0 if a.get("addr_space") is None else \
            get(a, "addr_space", ctx, self.checks["addr_space"])
        shared = space == E["ADDRSPACE"]["Shared"]
        io = 0
        if kind_name in INPUT_KINDS or kind_name in OUTPUT_KINDS:
            io = 1 if kind_name in INPUT_KINDS else 2
        index = len(t.recs["sets"])
        f.sets[name] = index
        rec = {"name": t.string(name), "func": f.index, "kind": kind, "dtype": dtype,
               "shared": int(shared), "ndim": len(shape), "shape": shape,
               "loc0": len(t.recs["locs"]),
               "io": io if f is self.entry else 0}
        t.recs["sets"].append(rec)
        if f is self.entry and io:
            (f.inputs if io == 1 else f.outputs).append(index)
            self.set_ctx[index] = ctx
        row = itemsize
        for n in shape[1:]:
            row *= n
        debug = a.get("debug")
        info = {"name": name, "kind": kind_name, "dtype": dtype_name, "shape": tuple(shape),
                "function": f.name, "shared": shared, "locs": [], "memory": None,
                "io": rec["io"], "module": self.module_index,
                "debug_name": debug.get("tensor_name") if isinstance(debug, dict) and
                isinstance(debug.get("tensor_name"), str) else None}
        for j, loc in enumerate(locs):
            self._location(f, index, info, loc, ctx.key("memorylocations", j), shape, row,
                           shared, ctx, kind_name)
        if io and len(locs) > 1:
            raise ctx.key("memorylocations").error(
                "%s tensor set '%s' must have exactly one memory location, has %d"
                % (kind_name, name, len(locs)))
        if io and not locs:
            raise ctx.key("memorylocations").error(
                "%s tensor set '%s' must have exactly one memory location, has 0"
                % (kind_name, name))
        if not locs and a.get("memorylocations") is not None:   # []: private DRAM
            self._location(f, index, info, {"name": name, "type": "DRAM"},
                           ctx.key("memorylocations"), shape, row, shared, ctx, kind_name)
        rec["nloc"] = len(info["locs"])
        if shared and info["memory"] == "DRAM" and f is self.entry:
            self.shared_sets.append(index)
        self.sets.append(info)

    def _must_alias(self):
        """Must-alias pairs (docs/spec/BIR-JSON.md, "Inputs and outputs of a run"): an output whose
        memory location (or set) is named ``<name>`` and an input whose location (or set)
        is ``<name>.must_alias_input`` are one buffer; the output's set record names the
        input (``alias``)."""
        by_name = {}
        for si in self.entry.inputs:
            info = self.sets[si]
            for n in (info["locs"][0], info["name"]):
                if n.endswith(MUST_ALIAS):
                    by_name.setdefault(n[:-len(MUST_ALIAS)], si)
        if not by_name:
            return
        for so in self.entry.outputs:
            out = self.sets[so]
            si = by_name.get(out["locs"][0], by_name.get(out["name"]))
            if si is None:
                continue
            inp = self.sets[si]
            li, lo = self.t.recs["sets"][si]["loc0"], self.t.recs["sets"][so]["loc0"]
            a, b = self.locs[li], self.locs[lo]
            if (inp["dtype"], inp["shape"]) != (out["dtype"], out["shape"]):
                raise self._set_path(so).error(
                    "must-alias pair: output '%s' is %s %s but its input '%s' is %s %s; the "
                    "two are one buffer and must have the same dtype and shape"
                    % (out["name"], out["dtype"], list(out["shape"]), inp["name"],
                       inp["dtype"], list(inp["shape"])))
            if (a["memory"], a["dims"], a["rows"]) != (b["memory"], b["dims"], b["rows"]):
                raise self._set_path(so).error(
                    "must-alias pair: output '%s' (%s, dims %s) and its input '%s' (%s, dims "
                    "%s) are one buffer and must have the same memory and dims"
                    % (out["name"], b["memory"], list(b["dims"]), inp["name"], a["memory"],
                       list(a["dims"])))
            self.t.recs["sets"][so]["alias"] = si

    def _set_path(self, index):
        """The Ctx of an entry input/output set: kept as made, or (function Ctx,
        allocation index) for a set read in C (_allocations), made here."""
        ctx = self.set_ctx[index]
        if isinstance(ctx, tuple):
            ctx = ctx[0].key("allocations", ctx[1])
        return ctx

    def _field_count(self, table, field):
        fields = self.cat.layouts[table]["fields"]
        key = (id(fields), field)
        hit = _FIELD_COUNTS.get(key)
        if hit is not None and hit[0] is fields:
            return hit[1]
        for name, _, _, count in fields:
            if name == field:
                if len(_FIELD_COUNTS) >= 64:
                    _FIELD_COUNTS.clear()
                _FIELD_COUNTS[key] = (fields, count)   # keeps `fields` (its id) alive
                return count
        raise KeyError(field)

    def _location(self, f, set_index, info, loc, ctx, shape, row, shared, set_ctx, kind):
        t, E = self.t, self.E
        as_dict(loc, ctx)
        name = get(loc, "name", ctx, as_name, what="memory location")
        if name in f.locs:
            raise ctx.key("name").error("duplicate memory location name '%s'" % name)
        mem_name = self._memtype(loc, ctx, name)
        dims = get(loc, "dims", ctx, _positive_ints, None)
        total = row * shape[0]
        rows = (shape[0], row)                          # host rows: (count, bytes)
        if dims is None:
            dims = [shape[0], row]
        elif mem_name == "DRAM":
            # A flat byte space of product(dims) bytes (compiler dumps: [1, nbytes] or
            # [nbytes]); rows keep the [P', B] pitch when dims has that shape.
            if len(dims) == 2 and dims[0] >= shape[0] and dims[1] >= row:
                pass
            elif _product(dims) >= total:
                dims, rows = [1, _product(dims)], (1, total)
            else:
                raise ctx.key("dims").error(
                    "dims %s (%d bytes) too small for tensor_shape %s of %s (%d bytes)"
                    % (dims, _product(dims), list(shape), info["dtype"], total))
        elif len(dims) != 2:
            raise ctx.key("dims").error("dims must be [num_partitions, bytes_per_partition]")
        elif dims[0] < shape[0] or dims[1] < row:
            raise ctx.key("dims").error(
                "dims %s too small for tensor_shape %s of %s: need at least [%d, %d]"
                % (dims, list(shape), info["dtype"], shape[0], row))
        if shared and mem_name != "DRAM":
            raise set_ctx.key("addr_space").error(
                "addr_space Shared is only allowed on DRAM; location '%s' is %s"
                % (name, mem_name))
        base = None if loc.get("base") is None else get(loc, "base", ctx, _non_negative)
        addr = None if loc.get("addr") is None else get(loc, "addr", ctx, _non_negative)
        placed = 0
        if mem_name in ("SB", "PSUM"):
            if mem_name == "PSUM" and loc.get("bank") is not None:
                addr = self._psum_bank(loc, ctx, name, base, addr, dims)
            placed = int(addr is not None)
            base = base or 0
        elif addr is not None and kind == "Internal" and not shared:
            placed = 1                  # the per-core Internal DRAM arena
            base = 0
        if mem_name != "DRAM":
            _, sb_parts, sb_bpp, ps_parts, ps_bpp = self.arch_info
            parts, bpp = (sb_parts, sb_bpp) if mem_name == "SB" else (ps_parts, ps_bpp)
            if not placed and dims[0] > parts:
                raise ctx.error("location '%s' has %d partitions; the %s of arch %s has %d"
                                % (name, dims[0], mem_name, self.arch, parts))
            if placed and (base + dims[0] > parts or addr + dims[1] > bpp):
                raise ctx.error(
                    "location '%s' at base %d, addr %d with dims %s does not fit the %s "
                    "of arch %s (%d partitions x %d bytes)"
                    % (name, base, addr, dims, mem_name, self.arch, parts, bpp))
        index = len(t.recs["locs"])
        f.locs[name] = index
        t.recs["locs"].append({
            "name": t.string(name), "set": set_index, "memtype": E["MEM"][mem_name],
            "placed": placed, "parts": dims[0], "bpp": dims[1],
            "base": base if placed else 0, "addr": addr if placed else 0})
        info["locs"].append(name)
        if info["memory"] is None:
            info["memory"] = mem_name
        self.locs.append({"name": name, "set": set_index, "memory": mem_name,
                          "dims": tuple(dims), "placed": bool(placed), "rows": rows})

    def _psum_bank(self, loc, ctx, name, base, addr, dims):
        """The byte address of a PSUM location given by ``bank`` and a bank-relative
        ``addr`` (None when it is not placed)."""
        ps_bpp = self.arch_info[4]
        nbanks = ps_bpp // PSUM_BANK_BYTES
        bank = get(loc, "bank", ctx, lambda v, c: as_int(v, c, 0, nbanks - 1))
        if addr is None:
            if base is None:
                return None
            addr = 0
        if addr >= PSUM_BANK_BYTES:
            raise ctx.key("addr").error("PSUM addr %d is bank-relative and must be below the "
                                        "bank size %d" % (addr, PSUM_BANK_BYTES))
        if addr + dims[1] > PSUM_BANK_BYTES:
            raise ctx.error("PSUM location '%s' at addr %d of bank %d with %d bytes per "
                            "partition crosses the end of the %d-byte bank"
                            % (name, addr, bank, dims[1], PSUM_BANK_BYTES))
        return bank * PSUM_BANK_BYTES + addr

    def _register(self, f, a, ctx):
        t = self.t
        name = get(a, "name", ctx, as_name, what="register")
        if name in f.regs:
            raise ctx.key("name").error("duplicate register name '%s'" % name)
        dt = get(a, "dtype", ctx, lambda v, c: DTYPE_ALIASES.get(as_str(v, c), v), "int32")
        if dt not in REGISTER_DTYPES:
            raise ctx.key("dtype").error("unknown register dtype %r; accepted: %s"
                                         % (dt, ", ".join(REGISTER_DTYPES)))
        f.regs[name] = len(t.recs["regs"])
        t.add("regs", name=t.string(name), func=f.index, dtype=self.cat.dtype_code[dt],
              wide=int(dt.endswith("64")))

    # ---- regions, blocks, instructions --------------------------------------------

    def _new_region(self, owner, f, blocks, ctx, loops):
        index = self.t.add("regions", owner=owner, func=f.index)
        self._pending.append((index, f, blocks, ctx, loops))
        return index

    def _drain(self):
        while self._pending:
            self._place_region(*self._pending.popleft())

    def _place_region(self, region, f, blocks, ctx, loops):
        t = self.t
        block0 = len(t.recs["blocks"])
        t.recs["regions"][region].update(block0=block0, nblock=len(blocks))
        brecs = t.recs["blocks"]
        for i, b in enumerate(blocks):
            name = b.get("name") if type(b) is dict else None
            if type(name) is not str or not name or "\0" in name:   # not as_name.fast's
                bctx = ctx.key(i)
                as_dict(b, bctx)
                name = get(b, "name", bctx, as_name, what="block")
            if name in f.blocks:
                raise ctx.key(i, "name").error("duplicate block name '%s'" % name)
            f.blocks[name] = block0 + i
            brecs.append({"name": t.string(name), "func": f.index, "region": region})
        for i, b in enumerate(blocks):
            insns = b.get("instructions")
            if insns.__class__ is _LazyInsns:   # parsed now, just before the walker
                b["instructions"] = insns = insns.parse(_fast_json)
            if type(insns) is not list:
                insns = get(b, "instructions", ctx.key(i), as_list, [])
            if not insns:           # _place_block of no instructions (a loop's empty body)
                brec = brecs[block0 + i]
                brec["insn0"], brec["ninsn"] = len(t.recs["insns"]), 0
                continue
            self._place_block(block0 + i, region, f, insns, ctx.key(i, "instructions"), loops)

    def _place_block(self, block, region, f, insns, ctx, loops, dma=False, in_queue=False):
        t = self.t
        rec = t.recs["blocks"][block]
        rec["insn0"] = len(t.recs["insns"])
        rec["ninsn"] = len(insns)
        if not insns:               # (a loop's empty body)
            return
        terms = {}                  # engine class -> (position, name) of its terminator
        fast = self.fast if not dma and not in_queue else None
        back = []
        count, k = len(insns), -1
        while k + 1 < count:
            k += 1
            if fast is not None and not terms:
                # the C walker loads the instructions it reads exactly as below and
                # _insns.build would (birsim/_load/fastload.py); it stops at the first it
                # declines, which takes this path
                k0 = k
                k = _fast_block(fast, insns, k, block, f.index, f.locs, f.regs, f.sets,
                                self.fast_seen, back, self.owned)
                if back:
                    # instructions the walker read but whose opcode's own keys its
                    # handler reads (fastload.HANDBACK): their pass-1 part here, in order,
                    # before anything after them; pass 2 runs their handler alone
                    self._handed_back(back, insns, block, region, f, ctx, loops)
                    if self.owned and k > k0:
                        # the walker's instructions are tables now: their JSON is freed
                        # while still in cache (a separate pass over a 1M-instruction
                        # tree at the end of load() took 20 % of it); only trees load()
                        # parsed. The walker freed each as it tabled it (in L1/L2, not
                        # after its block: with none handed back, all of them); the
                        # handed-back ones, read above, go here
                        insns[k0:k] = itertools.repeat(None, k - k0)
                if k >= count:
                    break
            obj = insns[k]
            ictx = ctx.key(k).named(function=f.name)
            as_dict(obj, ictx)
            name = get(obj, "name", ictx, as_name, what="instruction")
            ictx = ictx.named(instruction=name)
            index = len(t.recs["insns"])
            if dma:
                if name in self.dma_insn_names:
                    raise ictx.key("name").error("duplicate instruction name '%s' in "
                                                 "dma_queues" % name)
                self.dma_insn_names[name] = index
            # elsewhere names are labels: they may repeat (docs/spec/BIR-JSON.md)
            op = self._opcode(obj, ictx)
            if in_queue and op not in DMA_BLOCK_OPS:
                raise ictx.error("opcode %s is not allowed in a DMA block; accepted: %s"
                                 % (op, ", ".join(DMA_BLOCK_OPS)))
            self._check_terminator(terms, k, name, op, obj, ictx)
            if op == "Break" and not loops:
                raise ictx.error("Break outside any Loop, DynamicForLoop or DoWhile")
            t.add("insns", op=self.cat.op_code[op], name=t.label(name), func=f.index,
                  block=block)
            info = InsnInfo(index, obj, ictx, op, f, block, region, loops, in_queue)
            self.insns.append(info)
            self._structure(info, obj, ictx, f, loops, name)

    def _structure(self, info, obj, ictx, f, loops, name):
        """Pass 1's part of a loop (its axis slot and body region) or a DMATrigger (the
        DMA blocks it names)."""
        op = info.op
        if op in LOOP_OPS:
            self._loop(info, obj, ictx, f, loops)
        elif op == "DMATrigger":
            names = obj.get("dma_blocks") or []
            queue = obj.get("queue")
            if not isinstance(queue, (str, int, type(None))):
                queue = None                    # a bad queue is reported in pass 2
            self.trigger_names[f.index].add(name)
            for n in [names] if isinstance(names, str) else \
                    names if isinstance(names, list) else []:
                if isinstance(n, str):          # checked in pass 2
                    self.triggers[(queue, n)].append(info)

    def _handed_back(self, back, insns, block, region, f, ctx, loops):
        """The instructions the walker handed back (``back``: (position, record index,
        opcode code, name offset, engine, opnd, nin, nout, sync, nwait, nupd, lat), emptied):
        their record as the Python path makes it in pass 1 and 2 but for the handler's
        fields, their InsnInfo (``back``: pass 2 runs the handler alone) and their pass-1
        part (``_structure``), in instruction order."""
        recs, op_name, infos = self.t.recs["insns"], self.cat.op_name, self.insns
        parts, fname, findex = ctx.parts, f.name, f.index
        for k, index, code, nm, eng, opnd, nin, nout, sync, nwait, nupd, lat in back:
            obj = insns[k]
            recs[index] = {"op": code, "name": nm, "func": findex, "block": block,
                           "engine": eng, "opnd": opnd, "nin": nin, "nout": nout,
                           "sync": sync, "nwait": nwait, "nupd": nupd, "lat": lat}
            op = op_name[code]
            if op in _STRUCTURED:
                name = obj["name"]
                # ctx.key(k).named(function=f.name, instruction=name), made at once
                ictx = Ctx(parts + (k,), fname, name)
                info = InsnInfo(index, obj, ictx, op, f, block, region, loops)
                info.back = True
                infos[index] = info
                self._structure(info, obj, ictx, f, loops, name)
            else:
                # its context made by pass 2 only when its handler runs (_insns.build:
                # the shortcut of most needs none)
                info = InsnInfo(index, obj, None, op, f, block, region, loops)
                info.back = True
                info.where = (parts, k)
                infos[index] = info
        back.clear()

    def _check_terminator(self, terms, k, name, op, obj, ctx):
        """Terminators come after all the block's other instructions, at most one per
        engine (ALL and Unassigned together count as one, the rendezvous)."""
        if op not in TERMINATORS:
            if terms:
                pos, tname, top, tctx = min(terms.values(), key=lambda v: v[0])
                raise tctx.error("terminator %s ('%s') at position %d must come after the "
                                 "block's other instructions (last instruction or with the "
                                 "other terminators), but %s ('%s') at position %d follows it"
                                 % (top, tname, pos, op, name, k))
            return
        eng = obj.get("engine")
        code = self.E["ENGINE"]["Unassigned"] if eng is None else \
            enum_value(eng, ctx.key("engine"), "engine", self.E["ENGINE"], ENGINE_ALIASES)
        if code == self.E["ENGINE"]["ALL"]:
            code = self.E["ENGINE"]["Unassigned"]
        if code in terms:
            raise ctx.key("engine").error(
                "two terminators on one engine: %s ('%s') at position %d and %s ('%s') at "
                "position %d" % (terms[code][2], terms[code][1], terms[code][0], op, name, k))
        terms[code] = (k, name, op, ctx)

    def _opcode(self, obj, ctx):
        op = get(obj, OPCODE_KEYS, ctx, what="instruction")
        key = next(k for k in OPCODE_KEYS if obj.get(k) is not None)
        op = enum_value(op, ctx.key(key), "opcode", self.cat.op_code, OPCODE_ALIASES)
        op = self.cat.op_name[op]
        if op in self.abstract:
            raise ctx.key(key).error("%s is an abstract opcode and cannot be instantiated"
                                     % op)
        if op == "DMABlock":
            raise ctx.key(key).error("DMABlock instructions exist only inside dma_queues")
        return op

    def _loop(self, info, obj, ctx, f, loops):
        t = self.t
        axis_name, slot = None, -1
        if info.op != "DoWhile":
            key = "LoopAxis" if info.op == "Loop" else "DynamicForLoopAxis"
            axis = get(obj, key, ctx, as_dict, what=info.op)
            axis_name = get(axis, "name", ctx.key(key), as_name, what=key)
            if type(axis_name) is str:
                # one object per name: the Module keeps every loop's axis name, and the
                # JSON tree's own strings, one kept per loop, pinned the allocator's arenas
                # the freed tree had used (the all-opcode mix: +0.27 KB per instruction)
                axis_name = sys.intern(axis_name)
            slot = len(self.axes)
            self.axes.append(axis_name)
            self.axis_slots[axis_name].append(slot)
            rec = t.recs["insns"][info.index]
            _insns.fresh_slots(rec)
            where, at = self.cat.params[info.op]["axis"]      # its Slots' "axis"
            rec[where][at] = slot
        blocks = get(obj, "blocks", ctx, as_list, what=info.op)
        body = self._new_region(info.index, f, blocks, ctx.key("blocks"),
                                loops + ((info.op, axis_name, slot),))
        t.recs["insns"][info.index]["body"] = body

    # ---- DMA queues ---------------------------------------------------------------

    def _index_queues(self):
        """birsim's ``dma_queues`` and the compiler's ``queues`` (docs/spec/BIR-JSON.md, DMA
        queues), read into one model."""
        for key in ("dma_queues", "queues"):
            queues = get(self.root, key, self.ctx, as_list, [])
            for qi, q in enumerate(queues):
                self._queue(q, self.ctx.key(key, qi), key == "queues")

    def _queue(self, q, qctx, compiler):
        t = self.t
        as_dict(q, qctx)
        name = get(q, "name", qctx, as_name, what="DMA queue")
        if name in self.queues:
            raise qctx.key("name").error("duplicate DMA queue name '%s'%s" % (
                name, " (in dma_queues and queues)" if compiler else ""))
        qi = len(self.queue_blocks)
        self.queues[name] = qi
        if compiler:
            self.compiler_queues.add(qi)
        sems = get(q, "semaphores", qctx, lambda v, c: int_list(v, c, 0, 255), [])
        special = get(q, "use_special_sema", qctx, lambda v, c: int_list(v, c, 0, 255), [])
        s0, ns = t.ilist(sems)
        p0, np_ = t.ilist(special)
        t.add("queues", name=t.string(name), sems=s0, nsems=ns, special=p0, nspecial=np_)
        blocks = []
        self.queue_blocks.append(blocks)
        if not compiler:
            for bi, b in enumerate(get(q, "dma_blocks", qctx, as_list, [])):
                blocks.append(self._dma_block(qi, name, b, qctx.key("dma_blocks", bi), False))
            return
        for gi, g in enumerate(get(q, "blocks", qctx, as_list, [])):
            gctx = qctx.key("blocks", gi)
            as_dict(g, gctx)
            for bi, b in enumerate(get(g, "instructions", gctx, as_list, [])):
                blocks.append(self._dma_block(qi, name, b, gctx.key("instructions", bi), True))

    def _dma_block(self, queue, qname, b, ctx, compiler):
        t = self.t
        as_dict(b, ctx)
        name = get(b, "name", ctx, as_name, what="DMA block")
        key = (queue, name)
        if key in self.dma_blocks and not compiler:
            raise ctx.key("name").error("duplicate DMA block name '%s'" % name)
        op = get(b, OPCODE_KEYS, ctx, as_str, "DMABlock")
        if op != "DMABlock":
            raise ctx.key("opcode").error("a DMA block's opcode must be DMABlock, got '%s'"
                                          % op)
        triggers = self.triggers.get((qname, name)) or [
            tr for (q, n), trs in self.triggers.items() if n == name for tr in trs]
        trig = b.get("dma_trigger")
        if isinstance(trig, str):
            triggers = [tr for tr in triggers if tr.obj.get("name") == trig] or triggers
        if not triggers:
            raise ctx.key("name").error("DMA block '%s' of queue '%s' is not listed by any "
                                        "DMATrigger of that queue" % (name, qname))
        funcs = sorted({tr.func.name for tr in triggers})
        if len(funcs) > 1:
            raise ctx.key("name").error("DMA block '%s' is listed by DMATriggers in "
                                        "different functions (%s)" % (name, ", ".join(funcs)))
        f, loops = triggers[0].func, triggers[0].loops
        # The DMABlock instruction is in no block's range; its `block` is its own (first)
        # descriptor block (so error locations name it).
        index = t.add("insns", op=self.cat.op_code["DMABlock"], name=t.label(name),
                      func=f.index, engine=self.E["ENGINE"]["DMA"])
        self.dma_blocks.setdefault(key, []).append(index)
        bctx = ctx.named(function=f.name, instruction=name)
        self.insns.append(InsnInfo(index, b, bctx, "DMABlock", f, -1, -1, loops, True))
        if compiler:                    # descriptors in nested blocks, in order
            nested = get(b, "blocks", ctx, as_list, [])
            parts = []
            for j, nb in enumerate(nested):
                nctx = ctx.key("blocks", j)
                as_dict(nb, nctx)
                parts.append((get(nb, "name", nctx, as_name, "%s_Block%d" % (name, j)),
                              get(nb, "instructions", nctx, as_list, []),
                              nctx.key("instructions")))
            if not parts:
                parts = [(name, [], ctx.key("blocks"))]
        else:
            parts = [(name, get(b, "instructions", ctx, as_list, []), ctx.key("instructions"))]
        region = t.add("regions", owner=index, func=f.index,
                       block0=len(t.recs["blocks"]), nblock=len(parts))
        first = len(t.recs["blocks"])
        for bname, _, _ in parts:
            t.add("blocks", name=t.string(bname), func=f.index, region=region)
        t.recs["insns"][index].update(body=region, block=first)
        info = self.insns[-1]
        info.block, info.region = first, region
        for j, (_, insns, ictx) in enumerate(parts):
            self._place_block(first + j, region, f, insns, ictx, loops, dma=not compiler,
                              in_queue=True)
        return index
