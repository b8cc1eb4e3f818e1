"""The Module's parts of a load made in C (csrc/py/loadmod.c; issue 24 "tiny", session 12):
``_module_common``, ``_io_tensors``, ``_loc_bytes`` and ``_tables_bytes`` against the
Python functions of birsim/_load/module.py they replace (the specification,
``MODULE_FAST = False``); the walker's static configuration reused by the tables' dict
version tags (``_dict_versions``); a table's array made by NumPy's C API (``_wrap_rows``)
against ``np.frombuffer``."""

import json
import pathlib
import random
import sys

import numpy as np
import pytest

import birsim
import birsim._load.module as M
from birsim import _birsim
from birsim._load import fastload as F
from birsim.errors import ProgramError

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from conftest import _tables, load_caught  # noqa: E402
from test_load_fastload import corpus_files  # noqa: E402


def _view(m):
    """Everything the C parts make, with types and each record's field order (repr
    keeps a tuple from a list, True from 1; vars() keeps the instance dict's order)."""
    recs = [(type(t).__name__, list(vars(t).items()))
            for t in m.tensors + m.inputs + m.outputs + m._all_tensors]
    return repr((recs, m.tensors, m.inputs, m.outputs, m._all_tensors, m._debug_names,
                 m._loc0, m._loc_rows, m._loc_names, m.functions, m.nki_functions,
                 m._queue_blocks, m._byte_counts))


def _outcome(src, fast, monkeypatch):
    monkeypatch.setattr(M, "MODULE_FAST", fast)
    r, warned = load_caught(src)
    if isinstance(r, ProgramError):
        return ("error", str(r), r.path), warned
    mods = r if isinstance(r, list) else [r]
    return ("ok", [_view(m) for m in mods], _tables(r)), warned


def test_module_parts_equal_the_python_functions_on_every_json_file(monkeypatch):
    files = corpus_files()
    ok = 0
    for p in files:
        got = _outcome(str(p), True, monkeypatch)
        assert got == _outcome(str(p), False, monkeypatch), p
        ok += got[0][0] == "ok"
    assert ok > 50


def _program(sets, ncores=None):
    allocs = [{"Skind": "memory_location_set", "name": n, "kind": k, "dtype": dt,
               "tensor_shape": list(shape), "addr_space": space,
               "memorylocations": [{"name": n + "_loc", "type": mem}],
               **({"debug": {"tensor_name": "dbg_" + n}} if dbg else {})}
              for n, k, dt, shape, space, mem, dbg in sets]
    return {"functions": [{"name": "main", "allocations": allocs,
                           "blocks": [{"name": "b0", "instructions": []}]}]}


def test_module_parts_equal_the_python_functions_on_random_sets_and_groups(monkeypatch):
    rng = random.Random(12)
    kinds = ["ExternalInput", "ExternalOutput", "Internal", "Const"]
    for trial in range(150):
        sets = []
        for j in range(rng.randint(1, 6)):
            kind = rng.choice(kinds)
            mem = "DRAM" if kind != "Internal" else rng.choice(["DRAM", "SB"])
            space = rng.choice(["Local", "Shared"]) if mem == "DRAM" else "Local"
            shape = [rng.randint(1, 128), rng.randint(1, 64)][:rng.randint(1, 2)]
            sets.append(("t%d" % j, kind, rng.choice(["float32", "bfloat16", "int32"]),
                         shape, space, mem, rng.random() < 0.5))
        prog = _program(sets)
        src = json.dumps(prog) if trial % 3 else [prog, prog]    # a group of two cores
        fast = _outcome(src, True, monkeypatch)
        assert fast == _outcome(src, False, monkeypatch), sets
        assert fast[0][0] == "ok", fast


def test_record_bytes_equal_location_bytes_on_random_and_edge_records():
    rng = random.Random(5)
    edge = [0, 1, 2**31, 2**62, 2**63 - 1, -1, 10**30, True, False, 1.5]
    for _ in range(3000):
        nset = rng.randint(1, 4)
        sets = [{"shared": rng.choice([0, 1, True, False])} for _ in range(nset)]
        locs = []
        for _ in range(rng.randint(0, 5)):
            pick = (lambda: rng.choice(edge)) if rng.random() < 0.1 else \
                (lambda: rng.randint(0, 4096))
            locs.append({"name": 0, "set": rng.randrange(nset), "memtype": rng.randint(0, 3),
                         "placed": rng.choice([0, 1]), "parts": pick(), "bpp": pick(),
                         "base": 0, "addr": 0})
        want = M.location_bytes([(r["placed"], r["memtype"], r["parts"], r["bpp"], r["set"])
                                 for r in locs], [s["shared"] for s in sets], 1)
        got = _birsim._loc_bytes(locs, sets, 1)
        assert got is None or got == want, (locs, sets)     # None: the Python function
        assert M.record_bytes(locs, sets, 1) == want
        if all(type(r[k]) is int and 0 <= r[k] < 2**20 for r in locs
               for k in ("parts", "bpp")) and all(type(s["shared"]) is int for s in sets):
            assert got == want                                # small ints: read in C


def test_tables_bytes_and_io_tensor_equal_the_python_path():
    m = birsim.load(json.dumps(_program([("a", "ExternalInput", "float32", [128, 64],
                                          "Local", "DRAM", True),
                                         ("b", "ExternalOutput", "int32", [4], "Shared",
                                          "DRAM", False)])))
    assert _birsim._tables_bytes(m.tables, np.ndarray) == sum(
        v.nbytes if isinstance(v, np.ndarray) else len(v) for v in m.tables.values())
    common = (m._all_tensors, m._debug_names, m._loc0, m._loc_rows, {}, m._loc_names)
    got = _birsim._io_tensors(common, [0, 1], 0, M.IOTensor, M._IO_FIELDS)
    assert got == (m.io_tensor(0), m.io_tensor(1)) == m.inputs + m.outputs
    assert got[0].debug_name == "dbg_a" and got[1].rows == 4 and got[1].rowbytes == 4
    with pytest.raises(KeyError):                   # as io_tensor: a set with no location
        _birsim._io_tensors(common[:2] + ({},) + common[3:], [0], 0, M.IOTensor,
                            M._IO_FIELDS)


def test_dict_version_tags_follow_every_change():
    d = {"a": 1}
    v0 = _birsim._dict_versions((d,))
    if v0 is None:                      # Python 3.12+: the comparison always runs
        pytest.skip("no dict version tags on this Python")
    assert _birsim._dict_versions((d,)) == v0
    d["a"] = 2
    v1 = _birsim._dict_versions((d,))
    assert v1 != v0
    del d["a"]
    assert _birsim._dict_versions((d,)) != v1
    assert _birsim._dict_versions((dict(d),)) != _birsim._dict_versions((d,))
    assert _birsim._dict_versions(({}, [])) is None


def test_walker_static_state_is_reused_by_version_without_comparing(monkeypatch):
    cat = birsim.loader.default_catalog()
    birsim.load(json.dumps(_program([("a", "ExternalInput", "float32", [4], "Local",
                                      "DRAM", False)])))
    key = F._STATIC[0]
    if key[-1] is None:
        pytest.skip("no dict version tags on this Python")

    class Unequal(dict):                # a copy no table equals: only the tags can pass
        def __ne__(self, other):
            return True
    fake = key[:1] + tuple(Unequal(c) for c in key[1:-1]) + key[-1:]
    assert F._static_current(cat, fake)             # the tags alone say current
    row = F.OPS["TensorCopy"]
    monkeypatch.setitem(F.OPS, "TensorCopy", row._replace())   # an equal row: a new tag
    assert not F._static_current(cat, fake)         # ... so the copies are compared
    assert F._static_current(cat, key)              # equal rows: still current
    monkeypatch.setitem(F.OPS, "TensorCopy", row._replace(warns="a topic"))
    assert not F._static_current(cat, key)          # a changed row: not


@pytest.mark.parametrize("make", [bytearray, bytes, lambda b: __import__("array").array("b", b),
                                  lambda b: memoryview(bytearray(b))])
def test_wrap_rows_is_np_frombuffer(make):
    cat = birsim.loader.default_catalog()
    for table, dtype in cat.numpy_dtypes.items():
        for n in (0, 1, 3):
            data = make(bytes(range(256)) * (dtype.itemsize * n // 256 + 1))[:dtype.itemsize * n]
            _same_array(_birsim._wrap_rows(data, dtype), np.frombuffer(data, dtype), data)
    for bad in (make(b"\0" * 7),):
        with pytest.raises(ValueError) as e1:
            _birsim._wrap_rows(bad, np.dtype("<i8"))
        with pytest.raises(ValueError) as e2:
            np.frombuffer(bad, np.dtype("<i8"))
        assert str(e1.value) == str(e2.value)


def _same_array(got, want, data):
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes()
    assert type(got.base) is type(want.base)        # a memoryview keeps data exported
    assert (got.base is data) == (want.base is data)
    assert getattr(got.base, "obj", None) is getattr(want.base, "obj", None)
    for flag in ("C_CONTIGUOUS", "F_CONTIGUOUS", "OWNDATA", "WRITEABLE", "ALIGNED",
                 "WRITEBACKIFCOPY"):
        assert got.flags[flag] == want.flags[flag], flag


def test_wrap_rows_is_np_frombuffer_on_the_walkers_buffers():
    sys.path.insert(0, str(ROOT / "bench"))
    import bench_load
    m = birsim.load(json.dumps(bench_load.make_program(64, "birsim", "eltwise")))
    for t in ("insns", "opnds", "syncs"):
        rec = m.tables[t].base
        assert type(rec).__name__ == "_Records"     # the walker's buffer, not a copy
        _same_array(_birsim._wrap_rows(rec, m.tables[t].dtype),
                    np.frombuffer(rec, m.tables[t].dtype), rec)
