"""A tiny program's fixed cost (issue 24, bench/bench_oneshot.py section 1): what load and
Simulator() now do once per process or more cheaply gives the same results, and every
cache is keyed on what it depends on (a changed input is not served a stale answer).
References are computed independently (the previous formulations, or NumPy)."""

import copy
import itertools
import json
import types

import numpy as np
import pytest

import birsim
import birsim._load.passes as L
import birsim.simulator as S
from birsim import _birsim
from birsim._load import schema
from birsim._load.tables import Catalog
from birsim.errors import ProgramError


def _tensor(name, kind, shape, mem="DRAM", dtype="float32"):
    row = 4 * int(np.prod(shape[1:]))
    return {"Skind": "memory_location_set", "name": name, "kind": kind, "dtype": dtype,
            "tensor_shape": list(shape),
            "memorylocations": [{"name": name, "type": mem, "dims": [shape[0], row]}]}


def _copy_program(shape=(128, 64), out_loc="b_loc"):
    b = _tensor("b", "ExternalOutput", shape)
    b["memorylocations"][0]["name"] = out_loc
    ap = [[int(np.prod(shape[1:])), shape[0]], [1, int(np.prod(shape[1:]))]]
    return {"version": 2, "functions": [{
        "name": "main",
        "allocations": [_tensor("a", "ExternalInput", shape), b],
        "blocks": [{"name": "b0", "instructions": [
            {"name": "cp", "opcode": "TensorCopy", "engine": "DVE",
             "ins": [{"kind": "physical_ap", "memref": "a", "dtype": "float32", "ap": ap}],
             "outs": [{"kind": "physical_ap", "memref": out_loc, "dtype": "float32",
                       "ap": ap}]}]}]}]}


def _catalog_with(**changes):
    ext = L.default_catalog()
    parts = dict(opcodes=ext.opcodes, dtypes=ext.dtypes, alu_ops=ext.alu_ops,
                 act_funcs=ext.act_funcs, enums=ext.enums, arches=ext.arches,
                 layouts=ext.layouts, program_type=None, params=ext.params)
    parts.update(changes)
    return Catalog(**parts)


# ---- the tiny program end to end ---------------------------------------------------

def _outcome(fn):
    """("ok", a checker's list, its items' types), or its error's ("error", message, path)."""
    try:
        r = fn()
        return ("ok", r, [type(x) for x in r])
    except ProgramError as e:
        return ("error", str(e), e.path)


def test_tiny_program_load_to_outputs_matches_numpy():
    x = np.random.default_rng(1).standard_normal((128, 64)).astype(np.float32)
    text = json.dumps(_copy_program())
    for _ in range(3):              # the per-process state made by the first load is reused
        sim = birsim.Simulator(birsim.load(text))
        out = sim.run({"a": x})
        np.testing.assert_array_equal(out["b"], x.copy())
        assert sim.stats["opcodes"] == {"TensorCopy": 1}


# ---- once per catalog: the arch checker and the layout field counts ----------------

def test_arch_checker_follows_the_catalogs_arch_table():
    cat = L.default_catalog()
    ctx = schema.Ctx(("arch",))
    assert L._arch_check(cat)("gen3", ctx) == "gen3"
    assert L._arch_check(cat) is L._arch_check(cat)          # made once per catalog
    arches = {"gen3": cat.arches["gen3"], "genX": cat.arches["gen3"]}
    other = _catalog_with(arches=arches)
    with pytest.raises(ProgramError, match="unknown arch string \"genX\""):
        L._arch_check(cat)("genX", ctx)
    assert L._arch_check(other)("genX", ctx) == "genX"     # a new catalog: a new checker
    # the same catalog given a new arch table is not served the old checker
    other.arches = {"gen3": cat.arches["gen3"]}
    with pytest.raises(ProgramError, match="unknown arch"):
        L._arch_check(other)("genX", ctx)


def test_field_count_follows_the_layout():
    cat = L.default_catalog()
    want = next(c for n, _, _, c in cat.layouts["sets"]["fields"] if n == "shape")
    ld = types.SimpleNamespace(cat=cat)
    assert L._Loader._field_count(ld, "sets", "shape") == want
    layouts = copy.deepcopy(cat.layouts)
    layouts["sets"]["fields"] = [(n, o, t, 3 if n == "shape" else c)
                                 for n, o, t, c in layouts["sets"]["fields"]]
    ld2 = types.SimpleNamespace(cat=types.SimpleNamespace(layouts=layouts))
    assert L._Loader._field_count(ld2, "sets", "shape") == 3
    assert L._Loader._field_count(ld, "sets", "shape") == want
    with pytest.raises(KeyError):
        L._Loader._field_count(ld, "sets", "no_such_field")


# ---- enum checkers and integer lists -----------------------------------------------

def _reference_enum_value(v, what, table, aliases=None, allow_int=False):
    try:
        return schema.enum_value(v, schema.Ctx(("k",)), what, table, aliases, allow_int)
    except ProgramError as e:
        return ("error", str(e))


@pytest.mark.parametrize("v", ["a", "b", "al", "zz", 1, 2, 7, True, None, 1.0, [1]])
@pytest.mark.parametrize("allow_int", [False, True])
def test_enum_check_matches_enum_value(v, allow_int):
    table, aliases = {"a": 1, "b": 2}, {"al": "a"}
    check = schema.enum_check("thing", table, aliases, allow_int)
    ref = _reference_enum_value(v, "thing", table, aliases, allow_int)
    obj = {"k": v}
    try:
        got = schema.get(obj, "k", schema.Ctx(), check, default="dflt")
    except ProgramError as e:
        got = ("error", str(e))
    assert got == ("dflt" if v is None else ref)
    if ref != ("error", None) and not isinstance(ref, tuple):
        assert check.fast(v) in (ref, schema.MISSING)


def test_enum_check_reads_its_table_when_called():
    table = {"a": 1}
    check = schema.enum_check("thing", table)
    table["b"] = 2                      # as a closure over the table did
    assert check("b", schema.Ctx()) == 2 and check.fast("b") == 2


@pytest.mark.parametrize("v,lo,hi", [
    ([1, 2, 3], None, None), ([1, 2, 3], 1, None), ([0, 2], 1, None), ([5], None, 4),
    ([2.0, 3], None, None), ([2.5], None, None), ([True], None, None), (["1"], None, None),
    ([1 << 63], None, None), ([-(1 << 63)], None, None), ([], None, None), ("x", None, None),
    ((1, 2), None, None), ([None], None, None)])
def test_int_list_matches_the_per_element_check(v, lo, hi):
    ctx = schema.Ctx(("dims",))

    def reference():
        schema.as_list(v, ctx)
        return [schema.as_int(x, ctx.key(i), lo, hi) for i, x in enumerate(v)]

    got = _outcome(lambda: schema.int_list(v, ctx, lo, hi))
    assert got == _outcome(reference)
    if got[0] == "ok":
        assert schema.int_list(v, ctx, lo, hi) is not v       # a new list, as before


# ---- JSON text sniffing ------------------------------------------------------------

@pytest.mark.parametrize("s", ["{}", "  [1]", "\ufeff{", "\n\t\r {", " x{", "", "  ",
                               "a.json", "\ufeffa", "{" * 3, "\u00a0{"])
def test_is_text_matches_lstrip(s):
    assert L._is_text(s) == (s.lstrip(" \t\r\n\ufeff")[:1] in ("{", "["))


# ---- Module: the IO tensors' location names ----------------------------------------

def test_io_tensor_location_names_are_the_string_tables():
    mods = birsim.load([_copy_program(out_loc="b_loc"), _copy_program(out_loc="b_loc2")])
    for m in mods:
        strings = m.tables["strings"]
        for t in m.inputs + m.outputs:
            off = int(m.tables["locs"][t.location_index]["name"])
            assert t.location == strings[off:strings.index(b"\0", off)].decode()
    assert mods[1].outputs[0].location == "b_loc2"


# ---- Simulator(): the module's location bytes --------------------------------------

def _reference_location_bytes(module):
    t = module.tables
    dram = _birsim.enums["MEM"]["DRAM"]
    per_core = shared = 0
    for i in range(len(t["locs"])):
        loc = t["locs"][i]
        if int(loc["placed"]) and int(loc["memtype"]) != dram:
            continue
        size = 2 * int(loc["parts"]) * int(loc["bpp"])
        if int(t["sets"][int(loc["set"])]["shared"]) and int(loc["memtype"]) == dram:
            shared += size
        else:
            per_core += size
    return per_core, shared


def test_location_bytes_match_a_per_row_count():
    prog = _copy_program()
    allocs = prog["functions"][0]["allocations"]
    allocs.append(_tensor("t", "Internal", (128, 16), mem="SB"))          # unplaced SB
    placed = _tensor("p", "Internal", (64, 8), mem="SB")
    placed["memorylocations"][0]["addr"] = 0                              # placed: inside SBUF
    allocs.append(placed)
    sh = _tensor("s", "Internal", (4, 1000))
    sh["addr_space"] = "Shared"
    allocs.append(sh)
    m = birsim.load(prog)
    got = S._location_bytes(m)
    assert got == _reference_location_bytes(m)
    assert got[1] == 2 * 4 * 4000 and got[0] > 0
    assert S._location_bytes(m) == got                                    # cached per module
    assert S._location_bytes(birsim.load(_copy_program((8, 4)))) == (2 * (2 * 8 * 16), 0)


def test_run_stats_list_the_opcodes_that_ran():
    prog = _copy_program((8, 4))
    insns = prog["functions"][0]["blocks"][0]["instructions"]
    insns.append(dict(insns[0], name="cp2"))
    sim = birsim.Simulator(birsim.load(prog))
    x = np.arange(32, dtype=np.float32).reshape(8, 4)
    np.testing.assert_array_equal(sim.run({"a": x})["b"], x)
    ops, _, _ = sim._sim.stats()
    names = {v[0]: k for k, v in _birsim.opcodes.items()}
    assert sim.stats["opcodes"] == {names[i]: n for i, n in enumerate(ops) if n} == \
        {"TensorCopy": 2}
    assert list(itertools.compress(range(len(ops)), ops)) == \
        [_birsim.opcodes["TensorCopy"][0]]


# ---- Module: Tensor and IOTensor made without their __init__ ------------------------

def test_module_tensors_are_the_dataclasses_the_constructors_make():
    import dataclasses
    from birsim._load.module import IOTensor, Tensor
    prog = _copy_program()
    prog["functions"][0]["allocations"][0]["debug"] = {"tensor_name": "a_dbg"}
    m = birsim.load(prog)
    for obj, cls in [(t, Tensor) for t in m.tensors] + \
            [(t, IOTensor) for t in m.inputs + m.outputs]:
        ref = cls(*(getattr(obj, f.name) for f in dataclasses.fields(cls)))
        assert type(obj) is cls and obj == ref and hash(obj) == hash(ref)
        assert list(vars(obj).items()) == list(vars(ref).items())
        assert repr(obj) == repr(ref) and dataclasses.replace(obj) == ref
        with pytest.raises(dataclasses.FrozenInstanceError):
            obj.name = "x"
    assert m.inputs[0].debug_name == "a_dbg" and m.outputs[0].location == "b_loc"
    assert m.tensor("a").locations == ("a",) and m.tensor("b").shape == (128, 64)


# ---- run(): inputs and outputs handed to the core without byte views ----------------

def _typed_copy_program(dtype, itemsize, shape=(4, 6)):
    prog = _copy_program(shape)
    for a in prog["functions"][0]["allocations"]:
        a["dtype"] = dtype
        a["memorylocations"][0]["dims"] = [shape[0], shape[1] * itemsize]
    ins = prog["functions"][0]["blocks"][0]["instructions"][0]
    for o in ins["ins"] + ins["outs"]:
        o["dtype"] = dtype
    return prog


@pytest.mark.parametrize("dtype", ["float32", "int32", "uint8", "int16", "float16",
                                   "int64", "bfloat16", "float8e4"])
def test_run_round_trips_every_kind_of_dtype(dtype):
    from birsim.dtypes import numpy_dtype
    dt = numpy_dtype(dtype)
    prog = _typed_copy_program(dtype, dt.itemsize)
    bits = np.random.default_rng(2).integers(0, 1 << (8 * min(dt.itemsize, 4)), (4, 6))
    raw = np.dtype("u%d" % dt.itemsize)
    x = bits.astype(raw).view(dt) if dt.kind != "f" or dt.isbuiltin != 1 else \
        np.linspace(-3, 3, 24).reshape(4, 6).astype(dt)
    if dt.isbuiltin != 1:                   # ml_dtypes: finite values only
        x = np.linspace(-3, 3, 24).reshape(4, 6).astype(np.float32).astype(dt)
    for zero_copy in (True, False):         # handed over / copied out
        sim = birsim.Simulator(birsim.load(prog), zero_copy=zero_copy)
        for _ in range(2):
            out = sim.run({"a": x})["b"]
            assert out.dtype == dt and out.shape == (4, 6)
            assert out.view(raw).tobytes() == np.ascontiguousarray(x).view(raw).tobytes()
        # a non-contiguous view and a read-only array are accepted as before
        wide = np.zeros((4, 12), dt)
        wide[:, ::2] = x
        ro = np.array(x)
        ro.flags.writeable = False
        for given in (wide[:, ::2], ro):
            assert sim.run({"a": given})["b"].view(raw).tobytes() == x.view(raw).tobytes()
    buf = np.empty((4, 6), dt)              # the copying Simulator still holds "b"
    assert sim.read("b", out=buf) is buf and buf.view(raw).tobytes() == x.view(raw).tobytes()


# ---- session 9: what the walker's state, the allocation checkers and the tables ----
# ---- cache, and that each cache is keyed on what it depends on ----------------------

def test_walker_static_config_is_rebuilt_when_an_opcode_table_changes(monkeypatch):
    from birsim._load import fastload as F, insns as I
    from birsim._load.spell import OPCODE_ALIASES
    cat = L.default_catalog()
    x = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)
    birsim.load(json.dumps(_copy_program()))
    assert F._static_current(cat)
    built = F._STATIC[1]
    birsim.load(json.dumps(_copy_program()))
    assert F._STATIC[1] is built                        # reused while nothing changed
    assert not F._static_current(_catalog_with())       # another catalog
    changes = [
        lambda: monkeypatch.setitem(F.OPS, "TensorCopy",
                                    F.OPS["TensorCopy"]._replace(warns="a topic")),
        lambda: monkeypatch.setitem(I._HANDLERS, "TensorCopy", lambda *a: None),
        lambda: monkeypatch.delitem(I.PARAMS_FIRST, next(iter(I.PARAMS_FIRST))),
        lambda: monkeypatch.setitem(OPCODE_ALIASES, "TensorCopyAlias", "TensorCopy"),
    ]
    for change in changes:
        change()                                        # replaced, added or removed
        assert not F._static_current(cat)
        birsim.load(json.dumps(_copy_program()))
        assert F._STATIC[1] is not built and F._static_current(cat)
        built = F._STATIC[1]
        monkeypatch.undo()                              # and back: rebuilt again
        assert not F._static_current(cat)
        sim = birsim.Simulator(birsim.load(json.dumps(_copy_program())))
        np.testing.assert_array_equal(sim.run({"a": x})["b"], x)
        built = F._STATIC[1]


def test_allocation_checkers_follow_the_catalog_and_the_dtype_aliases(monkeypatch):
    cat = L.default_catalog()
    checks = L._catalog_checks(cat)
    assert L._catalog_checks(cat) is checks             # made once per catalog
    ctx = schema.Ctx(("kind",))
    assert checks["kind"]("ExternalInput", ctx) == cat.enums["TKIND"]["ExternalInput"]
    enums = dict(cat.enums, TKIND=dict(cat.enums["TKIND"], Extra=99),
                 MEM=dict(cat.enums["MEM"], Extra=98))
    other = _catalog_with(enums=enums)
    got = L._catalog_checks(other)
    assert got["kind"]("Extra", ctx) == 99 and got["mem"]("Extra", ctx) == 98
    with pytest.raises(ProgramError, match="unknown tensor kind"):
        L._catalog_checks(cat)["kind"]("Extra", ctx)    # the first catalog's own again
    other.enums = cat.enums                             # the catalog given new tables
    with pytest.raises(ProgramError, match="unknown tensor kind"):
        L._catalog_checks(other)["kind"]("Extra", ctx)
    monkeypatch.setitem(cat.enums, "MEM", dict(cat.enums["MEM"], Extra2=97))   # one table
    assert L._catalog_checks(cat)["mem"]("Extra2", ctx) == 97
    monkeypatch.undo()
    with pytest.raises(ProgramError, match="unknown memory type"):
        L._catalog_checks(cat)["mem"]("Extra2", ctx)
    monkeypatch.setattr(L, "DTYPE_ALIASES", dict(L.DTYPE_ALIASES, f32x="float32"))
    assert L._catalog_checks(cat)["dtype"]("f32x", ctx) == cat.dtype_code["float32"]


@pytest.mark.parametrize("value,ok", [
    ([128, 64], True), ([1], True), ([0, 4], False), ([2.0, 4], True), ([True, 4], False),
    ([1 << 63], False), ("x", False), ([-1], False), ([], True)])
def test_shape_checker_matches_int_list(value, ok):
    ctx = schema.Ctx(("tensor_shape",))
    ref = _outcome(lambda: schema.int_list(value, ctx, lo=1))
    assert _outcome(lambda: schema.get({"tensor_shape": value}, "tensor_shape", schema.Ctx(),
                                      L._positive_ints)) == ref
    assert (ref[0] == "ok") == ok
    fast = L._positive_ints.fast(value)
    assert fast is schema.MISSING or ("ok", fast, [type(v) for v in fast]) == ref


@pytest.mark.parametrize("value", [0, 5, -1, 2.0, 2.5, True, "3", 1 << 63, None])
def test_non_negative_checker_matches_as_int(value):
    ctx = schema.Ctx(("addr",))

    def _outcome(fn):
        try:
            r = fn()
            return ("ok", r, type(r))
        except ProgramError as e:
            return ("error", str(e), e.path)
    ref = _outcome(lambda: schema.as_int(value, ctx, lo=0)) if value is not None else \
        ("ok", "dflt", str)
    assert _outcome(lambda: schema.get({"addr": value}, "addr", schema.Ctx(), L._non_negative,
                                      "dflt")) == ref


def test_table_rows_are_cached_by_the_dtype_itself():
    from birsim._load import tables as T
    cat = L.default_catalog()
    dt = cat.numpy_dtypes["blocks"]
    other = np.dtype({"names": ["name", "x"], "formats": ["<i4", "<i8"],
                      "offsets": [0, 8], "itemsize": 16})
    recs = [{"name": 3, "func": 1, "region": 2, "insn0": 4, "ninsn": 5}, {"name": 7}]
    ref = np.zeros(2, dt)
    for i, r in enumerate(recs):
        for k, v in r.items():
            ref[i][k] = v
    got = T._to_array_fast(recs, dt, {})
    assert got.dtype == dt and got.tobytes() == ref.tobytes()
    # an entry left under the id of another dtype (a freed dtype's id reused) is not used
    T._ROW_CACHE[(id(other), ())] = (dt, T._row_function(dt, ()))
    got = T._to_array_fast([{"name": 1, "x": 2}], other, {})
    assert got.dtype == other and got["x"].tolist() == [2] and got["name"].tolist() == [1]
    empty = T._to_array_fast([], other, {})
    assert empty.dtype == other and len(empty) == 0 and empty.flags.writeable
    assert T._to_array_fast([], other, {}) is not empty           # a new array each time
    # the defaults are part of the key
    d = T._to_array_fast([{}], cat.numpy_dtypes["regions"], {"owner": -1})
    assert d["owner"].tolist() == [-1]
    assert T._to_array_fast([{}], cat.numpy_dtypes["regions"], {})["owner"].tolist() == [0]


def test_a_modules_empty_tables_are_its_own():
    a = birsim.load(json.dumps(_copy_program()))
    b = birsim.load(json.dumps(_copy_program()))
    for name in ("regs", "queues", "syncs"):
        assert len(a.tables[name]) == 0 and a.tables[name] is not b.tables[name]
        assert a.tables[name].dtype == L.default_catalog().numpy_dtypes[name]


def test_tables_bytes_count_each_buffer_once():
    mods = birsim.load([_copy_program(), _copy_program(out_loc="b2")])
    unique = {id(v): v for m in mods for v in m.tables.values()}
    want = sum(v.nbytes if isinstance(v, np.ndarray) else len(v) for v in unique.values())
    assert S._tables_bytes(mods) == want
    m = birsim.load(_copy_program())
    want = sum(v.nbytes if isinstance(v, np.ndarray) else len(v) for v in m.tables.values())
    assert S._tables_bytes([m]) == want and S._tables_bytes([m]) == want     # cached
    sim = birsim.Simulator(m)
    assert sim.memory_limit == S._physical_memory()


def test_walker_state_borrows_the_static_state_safely():
    """A load's walker state is a shallow copy of the static one (made once per
    configuration) that holds a reference to it: the static state outlives every load's,
    a load state is refused where the static one is expected, and loads after the static
    state was replaced run on the new one."""
    import gc
    from birsim._load import fastload as F
    x = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)
    birsim.load(json.dumps(_copy_program()))
    static = F._STATIC[1]
    cfg = {"insn_recs": [], "opnd_recs": [], "sync_recs": [], "infos": [], "sets": [],
           "locs": [], "regs": [], "sbuf": bytearray(), "lists": {}}
    states = [_birsim._fast_new(static, dict(cfg)) for _ in range(50)]
    with pytest.raises(ValueError):
        _birsim._fast_new(states[0], dict(cfg))             # a load's state is not static
    with pytest.raises(KeyError):
        _birsim._fast_new(static, {k: v for k, v in cfg.items() if k != "lists"})
    with pytest.raises(TypeError):
        _birsim._fast_new(static, dict(cfg, sbuf=b""))
    F._STATIC[:] = [None, None]                             # the static state replaced:
    del static
    gc.collect()
    del states                                              # ... the loads' keep theirs
    gc.collect()
    sim = birsim.Simulator(birsim.load(json.dumps(_copy_program())))
    np.testing.assert_array_equal(sim.run({"a": x})["b"], x)
    assert F._STATIC[1] is not None


# ---- session 10: what Simulator() counts is counted at load, from the records ----------

def _counted_from_tables(m):
    """The module's counts as Simulator() makes them from its tables (the path for a
    Module that load() did not count)."""
    saved = list(m._byte_counts)
    m._byte_counts[:] = [None, None, None]
    try:
        return (S._location_bytes(m), S._tables_bytes([m]), S._declared_bytes(m, 3, None),
                list(m._byte_counts))
    finally:
        m._byte_counts[:] = saved


def test_load_counts_what_simulator_would_count_from_the_tables():
    progs = [_copy_program(), _copy_program((8, 4))]
    prog = _copy_program()
    allocs = prog["functions"][0]["allocations"]
    allocs.append(_tensor("t", "Internal", (128, 16), mem="SB"))
    placed = _tensor("p", "Internal", (64, 8), mem="PSUM")
    placed["memorylocations"][0]["addr"] = 0
    allocs.append(placed)
    sh = _tensor("s", "Internal", (4, 1000))
    sh["addr_space"] = "Shared"
    allocs.append(sh)
    prog["arch"] = "gen2"
    progs.append(prog)
    for p in progs:
        m = birsim.load(p)
        assert None not in m._byte_counts               # counted at load
        loaded = (S._location_bytes(m), S._tables_bytes([m]), S._declared_bytes(m, 3, None),
                  list(m._byte_counts))
        assert loaded == _counted_from_tables(m)
        assert loaded[0] == _reference_location_bytes(m)
    # a module list: each module's counts are the group's tables, as the tables give them
    mods = birsim.load([_copy_program(), _copy_program(out_loc="b2")])
    for m in mods:
        assert S._location_bytes(m) == _counted_from_tables(m)[0] == \
            _reference_location_bytes(m)
        assert m._byte_counts[1] == _counted_from_tables(m)[1] == S._tables_bytes(mods)
    assert mods[0]._byte_counts is not mods[1]._byte_counts
    # the examples and the corpus programs (shared DRAM, arenas, every memory)
    import pathlib
    root = pathlib.Path(__file__).resolve().parent.parent.parent
    seen = 0
    for path in sorted(root.glob("examples/**/*.json")) + sorted(root.glob("tests/data/**/*.json")):
        try:
            loaded = birsim.load(str(path))
        except ProgramError:
            continue
        for m in loaded if isinstance(loaded, list) else [loaded]:
            assert m._byte_counts[:2] == _counted_from_tables(m)[3][:2], path
            assert m._byte_counts[2] == int(m.tables["module"][0]["arch"])
            seen += 1
    assert seen > 10
