"""A common tensor set read in C (``_birsim._alloc_set``, csrc/py/loadalloc.c; issue 24
"tiny"): ``_Loader._set`` (with ``_location``) is the specification. Loading with and
without the C reader gives the same tables, the same records the Module is made of
(sets, locations, inputs and outputs, the JSON paths kept for later errors), the same
warnings and the same errors, over the corpus and over random and hostile allocations;
and the C reader does read the common sets (it is not declining everything)."""

import copy
import json
import pathlib
import random
import sys

import pytest

import birsim._load.passes as L
from birsim.errors import ProgramError

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from conftest import _tables, load_caught  # noqa: E402


class _Taken:
    """Counts the sets the C reader read and declined."""

    def __init__(self, monkeypatch):
        self.read = self.declined = 0
        real = L._alloc_set

        def spy(*args):
            got = real(*args)
            if got is None:
                self.declined += 1
            else:
                self.read += 1
            return got
        monkeypatch.setattr(L, "_alloc_set", spy)


def _loader_view(ld):
    """What a loader keeps of its allocations for the Module and later passes; repr
    keeps the types (a tuple is not a list, True is not 1)."""
    return repr((ld.shared.sets, ld.shared.locs, ld.shared_sets,
                 sorted((k, c.path, c.function, c.instruction)
                        for k, c in ((k, ld._set_path(k)) for k in ld.set_ctx)),
                 [(f.name, f.sets, f.locs, f.regs, f.inputs, f.outputs) for f in ld.funcs],
                 ld.shared.t.recs["sets"], ld.shared.t.recs["locs"],
                 ld.shared.t.recs["funcs"], bytes(ld.shared.t._sbuf)))


def _module_view(m):
    return repr((m.tensors, m.inputs, m.outputs, m._debug_names, m._loc0, m._loc_rows,
                 m._loc_names, m._byte_counts))


def outcome(src, fast, monkeypatch):
    monkeypatch.setattr(L, "ALLOC_FAST", fast)
    seen = []
    real = L._finish_group

    def spy(loaders, catalog, shared, single):
        seen.extend(_loader_view(ld) for ld in loaders)
        return real(loaders, catalog, shared, single)
    monkeypatch.setattr(L, "_finish_group", spy)
    r, warned = load_caught(copy.deepcopy(src) if isinstance(src, (dict, list)) else src)
    monkeypatch.setattr(L, "_finish_group", real)
    if isinstance(r, ProgramError):
        return ("error", str(r), r.path, r.function, r.instruction), warned
    mods = r if isinstance(r, list) else [r]
    return ("ok", _tables(r), seen, [_module_view(m) for m in mods]), warned


def same(src, monkeypatch):
    slow = outcome(src, False, monkeypatch)
    fast = outcome(src, True, monkeypatch)
    assert fast == slow, src if isinstance(src, str) else json.dumps(src)[:2000]
    return fast


def test_both_readers_agree_on_every_json_file_of_the_corpus(monkeypatch):
    taken = _Taken(monkeypatch)
    files = sorted(ROOT.glob("examples/**/*.json")) + sorted(ROOT.glob("tests/**/*.json"))
    assert len(files) > 100
    results = [same(str(p), monkeypatch)[0][0] for p in files]
    assert results.count("ok") > 50
    assert taken.read > 200 and taken.declined > 0


# ---- random and hostile allocations -------------------------------------------------

_NAMES = ["a", "b", "t", "", "x\0y", "a", "\ud800", "ü", 3, None, True, ["a"]]
_KINDS = [None, "Internal", "ExternalInput", "ExternalOutput", "Input", "Output",
          "ExternalInputParameter", "Const", "internal", 1, True, "no_such"]
_DTYPES = [None, "float32", "fp32", "bfloat16", "int8", "float8e4", "uint64", "bool", 5,
           "no_such", ""]
_SHAPES = [None, [128, 64], [2, 3, 4], [1], [], [0, 4], [-1, 4], [True, 4], [4.0, 4],
           [1 << 62, 1 << 62], [128, 64, 1, 1, 1, 1, 1, 1, 1], "x", [[4]], [3, 1 << 63]]
_MEMS = ["DRAM", "SB", "PSUM", "Unallocated", "Input", "RNGSTATE", "Reg", 0, 1, None,
         "dram", True]
_DIMS = [None, [128, 256], [128, 1 << 20], [1, 32768], [32768], [64, 256], [200, 4],
         [128, 1 << 30], [], [0, 4], [2, 2, 2], "x", [128.0, 256], [1 << 63, 1]]
_INTS = [None, 0, 1, 4096, 1 << 20, -1, 1 << 63, True, 2.0, "0", 100000]
_SPACES = [None, "Shared", "Local", "Private", "no_such", 0, "shared"]
_SKINDS = [None, "memory_location_set", "register", "Register", 3]


def _pick(rng, values, p_absent=0.3):
    return "ABSENT" if rng.random() < p_absent else copy.deepcopy(rng.choice(values))


def _put(d, key, v):
    if v != "ABSENT":
        d[key] = v


def _location(rng, set_name):
    loc = {}
    _put(loc, "name", rng.choice([set_name, set_name + "_l", "l%d" % rng.randrange(3)])
         if rng.random() < 0.85 else _pick(rng, _NAMES, 0.2))
    _put(loc, "type", "DRAM" if rng.random() < 0.6 else _pick(rng, _MEMS, 0.05))
    _put(loc, "dims", _pick(rng, _DIMS, 0.6))
    for key in ("base", "addr", "bank"):
        _put(loc, key, _pick(rng, _INTS, 0.85))
    if rng.random() < 0.02:
        return rng.choice([None, [], "x", 4])
    return loc


def _allocation(rng, k):
    name = "s%d" % rng.randrange(6) if rng.random() < 0.9 else _pick(rng, _NAMES, 0.3)
    a = {}
    _put(a, "Skind", "memory_location_set" if rng.random() < 0.5 else _pick(rng, _SKINDS, 0.7))
    _put(a, "name", name)
    _put(a, "kind", "Internal" if rng.random() < 0.5 else _pick(rng, _KINDS))
    _put(a, "dtype", "float32" if rng.random() < 0.7 else _pick(rng, _DTYPES, 0.1))
    _put(a, "tensor_shape", [128, 64] if rng.random() < 0.7 else _pick(rng, _SHAPES, 0.15))
    _put(a, "partition_dim", _pick(rng, _INTS, 0.85))
    _put(a, "addr_space", _pick(rng, _SPACES, 0.7))
    if rng.random() < 0.2:
        a["debug"] = rng.choice([{"tensor_name": "dn%d" % k}, {"tensor_name": 3},
                                 {"shape": [128, 64]}, "x", None, {}])
    n = rng.choice([0, 1, 1, 1, 1, 1, 1, 2, 3])
    if rng.random() < 0.9:
        a["memorylocations"] = [_location(rng, name if isinstance(name, str) else "n")
                                for _ in range(n)]
    elif rng.random() < 0.5:
        a["memorylocations"] = rng.choice([None, "x", {}, 3])
    if rng.random() < 0.02:
        return rng.choice([None, [], "x", 4])
    return a


def _program(allocs, extra_func=False):
    funcs = [{"name": "main", "allocations": allocs, "blocks": [{"name": "b0",
              "instructions": []}]}]
    if extra_func:
        funcs.append({"name": "g", "allocations": copy.deepcopy(allocs),
                      "blocks": [{"name": "b0", "instructions": []}]})
    return {"version": 2, "arch": "gen3", "functions": funcs}


def test_both_readers_agree_on_random_and_hostile_allocations(monkeypatch):
    taken = _Taken(monkeypatch)
    rng = random.Random(20261202)
    kinds = set()
    for n in range(2000):
        allocs = [_allocation(rng, k) for k in range(rng.choice([1, 1, 2, 2, 3]))]
        kinds.add(same(_program(allocs, rng.random() < 0.2), monkeypatch)[0][0])
    assert kinds == {"ok", "error"}
    assert taken.read > 300 and taken.declined > 300


def test_both_readers_agree_on_the_common_forms(monkeypatch):
    """Each common form, read by the C reader (not declined): DRAM with and without
    dims (a row pitch, a flat byte space), SB and PSUM placed and not, inputs, outputs,
    Shared DRAM, a private Internal DRAM arena location, a no-data memory type, a
    debug name, an unused partition_dim, a dtype alias."""
    def tensor(name, kind="Internal", mem="DRAM", shape=(128, 64), **loc):
        a = {"Skind": "memory_location_set", "name": name, "kind": kind, "dtype": "float32",
             "tensor_shape": list(shape), "memorylocations": [dict(name=name, type=mem, **loc)]}
        return a
    forms = [
        tensor("a", "ExternalInput"), tensor("b", "ExternalOutput", dims=[128, 512]),
        tensor("c", mem="SB"), tensor("d", mem="SB", base=0, addr=1024),
        tensor("e", mem="PSUM", addr=0, dims=[128, 256]), tensor("f", dims=[1, 32768]),
        tensor("g", dims=[32768]), tensor("h", addr=64), tensor("i", mem="Unallocated"),
        dict(tensor("j"), addr_space="Shared"), dict(tensor("k"), debug={"tensor_name": "K"}),
        dict(tensor("l"), partition_dim=0), dict(tensor("m"), dtype="fp8_e4m3fn"),
        {"name": "n", "dtype": "int32", "tensor_shape": [4],
         "memorylocations": [{"name": "n", "type": "SB"}]},
        dict(tensor("o", shape=(2, 3, 4, 5)), kind="Input"),
    ]
    taken = _Taken(monkeypatch)
    for form in forms:
        same(_program([form]), monkeypatch)
    same(_program(forms), monkeypatch)
    assert taken.declined == 0 and taken.read == 2 * len(forms)


@pytest.mark.parametrize("bad", [
    {"name": "a"},                                             # a duplicate set name
    {"memorylocations": [{"name": "a_loc", "type": "DRAM"}]},  # a duplicate location
    {"memorylocations": [{"name": "x", "type": "SB", "dims": [200, 4]}]},   # too many parts
    {"memorylocations": [{"name": "x", "type": "SB", "addr": 1 << 30}]},    # does not fit
    {"memorylocations": [{"name": "x", "type": "DRAM", "dims": [4, 4]}]},   # too small
    {"memorylocations": [{"name": "x", "type": "SB"}], "addr_space": "Shared"},
    {"kind": "ExternalInput", "memorylocations": []},
    {"kind": "ExternalOutput", "memorylocations": [{"name": "x", "type": "DRAM"},
                                                   {"name": "y", "type": "DRAM"}]},
    {"tensor_shape": [1] * 9},
    {"memorylocations": [{"name": "x", "type": "Reg"}]},
    {"memorylocations": [{"name": "x", "type": "PSUM", "bank": 9, "addr": 0}]},
])
def test_an_error_in_a_set_is_the_python_readers(bad, monkeypatch):
    first = {"Skind": "memory_location_set", "name": "a", "kind": "Internal",
             "dtype": "float32", "tensor_shape": [128, 64],
             "memorylocations": [{"name": "a_loc", "type": "DRAM"}]}
    second = dict(first, name="b", memorylocations=[{"name": "b_loc", "type": "DRAM"}])
    second.update(bad)
    got = same(_program([first, second]), monkeypatch)
    assert got[0][0] == "error" and got[0][2].startswith("functions[0].allocations[1]")


# ---- the JSON path of a set read in C, made only for an error ---------------------------

@pytest.mark.parametrize("bad", ["dtype", "shape", "memory"])
def test_a_must_alias_error_names_the_output_set_as_the_python_reader_does(bad, monkeypatch):
    """A set read in C keeps (function Ctx, allocation index), not its JSON path; the
    must-alias check makes the path only for its error: the same message and path as the
    Python reader's, the output's allocation (the fourth of the second function)."""
    def t(name, kind, dtype="float32", shape=(4, 8), mem="DRAM"):
        return {"name": name, "kind": kind, "dtype": dtype, "tensor_shape": list(shape),
                "memorylocations": [{"name": name, "type": mem,
                                     "dims": [shape[0], shape[1] * 4]}]}
    out = {"dtype": t("kv", "ExternalOutput", dtype="int32"),
           "shape": t("kv", "ExternalOutput", shape=(4, 4)),
           "memory": t("kv", "ExternalOutput", mem="SB")}[bad]
    body = [{"name": "cp", "opcode": "TensorCopy", "engine": "DVE",
             "ins": [{"tensor": "x", "ap": [[8, 4], [1, 8]]}],
             "outs": [{"tensor": "y", "ap": [[8, 4], [1, 8]]}]}]
    other = {"name": "helper", "allocations": [t("h", "Internal")], "blocks": []}
    src = {"version": 2, "functions": [other, {
        "name": "main", "allocations": [t("kv.must_alias_input", "ExternalInput"),
                                        t("x", "ExternalInput"), t("y", "ExternalOutput"),
                                        out],
        "blocks": [{"name": "b0", "instructions": body}]}]}
    got = same(src, monkeypatch)[0]
    assert got[0] == "error" and "must-alias pair" in got[1], got
    assert got[2] == "functions[1].allocations[3]", got
