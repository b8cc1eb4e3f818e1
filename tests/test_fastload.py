"""The loader's C fast path (csrc/py/fastload.c) against the Python path it shortcuts.

The Python loader is the specification: every program loads to the same tables, the same
warnings and the same error (message and JSON path) with the fast path on and off. The
corpus: every JSON file of examples/ and tests/, programs in the shape of bench_load.py
in both spellings, fuzz mutations of the seeds, and random parameter values of every
opcode the walker reads. ``BIRSIM_CHECK_FASTLOAD=1 python -m pytest`` (tests/conftest.py)
extends the comparison to every program the suite loads.
"""

import pathlib
import random
import sys
import warnings

import numpy as np
import pytest

import birsim
import birsim.loader as L
from birsim import _fastload, _insns, _keys
from birsim.errors import ProgramError

import bir

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))


def outcome(src, fast, monkeypatch):
    """(tables by field, warnings) of a load, or the error's (type, message, path)."""
    monkeypatch.setattr(L, "FAST_PATH", fast)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            r = birsim.load(src)
        except ProgramError as e:
            return ("error", str(e), e.path), [str(w.message) for w in caught]
    mods = r if isinstance(r, list) else [r]
    tables = {}
    for k, v in mods[0].tables.items():
        if isinstance(v, np.ndarray) and v.dtype.names:
            tables[k] = tuple((f, v[f].tobytes()) for f in v.dtype.names)
        else:
            tables[k] = v.tobytes() if hasattr(v, "tobytes") else v
    return ("ok", tables, tuple(m.warnings for m in mods)), [str(w.message) for w in caught]


class Counter:
    """Counts the instructions the walker takes."""

    def __init__(self, monkeypatch):
        self.taken = 0
        real = L._fast_block

        def counting(state, insns, start, *rest):
            k = real(state, insns, start, *rest)
            self.taken += k - start
            return k
        monkeypatch.setattr(L, "_fast_block", counting)


def same(src, monkeypatch):
    slow = outcome(src, False, monkeypatch)
    fast = outcome(src, True, monkeypatch)
    assert fast == slow
    return fast


def corpus_files():
    files = sorted(ROOT.glob("examples/**/*.json")) + sorted(ROOT.glob("tests/**/*.json"))
    assert len(files) > 100
    return files


def test_both_paths_agree_on_every_json_file_of_the_corpus(monkeypatch):
    counter = Counter(monkeypatch)
    results = [same(str(p), monkeypatch)[0][0] for p in corpus_files()]
    assert results.count("ok") > 50
    assert counter.taken > 200          # the walker did take part


@pytest.mark.parametrize("spelling", ["birsim", "compiler"])
def test_both_paths_agree_on_bench_programs_and_the_walker_takes_them(spelling,
                                                                     monkeypatch):
    import bench_load
    prog = bench_load.make_program(2000, spelling)
    same(prog, monkeypatch)
    counter = Counter(monkeypatch)
    monkeypatch.setattr(L, "FAST_PATH", True)
    birsim.load(prog)
    assert counter.taken == 2000


def test_both_paths_agree_on_fuzz_mutations(monkeypatch):
    import fuzz
    seeds = fuzz.load_seeds()
    kinds = set()
    for n in range(400):
        _, prog, _ = fuzz.make_case(seeds, 7, n)
        kinds.add(same(prog, monkeypatch)[0][0])
    assert kinds == {"ok", "error"}


# ---- random parameter values of every opcode the walker reads -----------------------

_VALUES = [None, True, False, 0, 1, 2, -1, 0.5, 1.0, float("nan"), 1 << 63, -(1 << 64),
           10 ** 400, "add", "mult", "bypass", "X", "Idle", "Zero", "Relu", "Exp",
           "no_such", "", [], {}, [1], "is_ge"]


def _tensor(name):
    return {"Skind": "memory_location_set", "name": name, "kind": "Internal",
            "dtype": "float32", "tensor_shape": [4, 8],
            "memorylocations": [{"name": name, "type": "SB"}]}


def _ap(name):
    return {"kind": "physical_ap", "memref": name, "ap": [[8, 4], [1, 8]]}


def test_random_parameter_values_load_the_same_way(monkeypatch):
    rows, index = _fastload.fast_ops(birsim.loader.default_catalog())
    ops = sorted(index)
    assert {"TensorTensor", "TensorScalar", "Activation", "TensorReduce",
            "TensorCopy"} <= set(ops)
    rng = random.Random(5)
    outcomes = set()
    for n in range(300):
        op = ops[n % len(ops)]
        keys = sorted({k for p in _insns.PARAMS.get(op, ()) for k in
                       (p[1] if isinstance(p[1], tuple) else (p[1],))}
                      | set(_keys.UNMODELLED.get(op, {})) | {"negat", "debug"})
        insns = []
        for k in range(4):
            obj = {"name": "i%d" % k, "opcode": op, "engine": rng.choice(
                ["DVE", "Pool", "Activation", "ACT", "bad", 3, None]),
                "ins": [_ap("a"), _ap("b")], "outs": [_ap("c")]}
            for key in keys:
                if rng.random() < 0.5:
                    obj[key] = rng.choice(_VALUES)
            insns.append(obj)
        prog = bir.module([{"name": "main", "allocations": [_tensor(t) for t in "abc"],
                            "blocks": [{"name": "b0", "instructions": insns}]}])
        outcomes.add(same(prog, monkeypatch)[0][0])
    assert outcomes == {"ok", "error"}


# ---- errors met in the walker's territory keep their JSON paths ---------------------

def _program(mutate):
    insns = [{"name": "t%d" % k, "opcode": "TensorTensor", "engine": "DVE", "op": "add",
              "ins": [_ap("a"), _ap("b")], "outs": [_ap("c")],
              "sync_info": {"on_wait": [{"type": "semaphore", "id": 1, "mode": "sem-ge-imm",
                                         "value": 0}]}}
             for k in range(6)]
    mutate(insns[3])
    return bir.module([{"name": "main", "allocations": [_tensor(t) for t in "abc"],
                        "blocks": [{"name": "b0", "instructions": insns}]}])


def _err(mutate, monkeypatch):
    out = same(_program(mutate), monkeypatch)
    assert out[0][0] == "error"
    return out[0][1]


def test_a_malformed_operand_is_reported_with_its_path(monkeypatch):
    msg = _err(lambda o: o["ins"][1]["ap"][1].__setitem__(0, True), monkeypatch)
    assert msg.startswith("functions[0].blocks[0].instructions[3].ins[1].ap[1][0]: "
                          "expected an integer")


def test_an_unknown_opcode_is_reported_with_its_path(monkeypatch):
    msg = _err(lambda o: o.__setitem__("opcode", "TensorTensr"), monkeypatch)
    assert msg.startswith("functions[0].blocks[0].instructions[3].opcode: unknown opcode")


def test_a_bad_sync_entry_is_reported_with_its_path(monkeypatch):
    msg = _err(lambda o: o["sync_info"]["on_wait"][0].__setitem__("id", 300), monkeypatch)
    assert msg.startswith("functions[0].blocks[0].instructions[3].sync_info.on_wait[0].id:"
                          " sync id 300 out of range")


def test_a_bad_parameter_is_reported_with_its_path(monkeypatch):
    msg = _err(lambda o: o.__setitem__("op", "plus"), monkeypatch)
    assert msg.startswith("functions[0].blocks[0].instructions[3].op: unknown ALU op")


def test_a_misspelled_key_warns_with_its_path(monkeypatch):
    out, caught = same(_program(lambda o: o.__setitem__("opp", "add")), monkeypatch)
    assert out[0] == "ok"
    assert any("functions[0].blocks[0].instructions[3].opp: unknown key 'opp' of "
               "TensorTensor is ignored; did you mean 'op'?" in w for w in caught)


def test_an_unmodelled_value_is_rejected_with_its_path(monkeypatch):
    msg = _err(lambda o: o.__setitem__("reduce_op", "bitwise_or"), monkeypatch)
    assert msg.startswith("functions[0].blocks[0].instructions[3].reduce_op: TensorTensor key "
                          "'reduce_op' = 'bitwise_or' is not modelled")


# ---- the walker follows the tables it is built from ---------------------------------

def test_an_opcode_with_a_handler_of_its_own_leaves_the_fast_path(monkeypatch):
    cat = birsim.loader.default_catalog()
    assert "TensorTensor" in _fastload.fast_ops(cat)[1]
    seen = []

    def handler(b, info, rec, obj, ctx):
        seen.append(info.index)
        _insns._declared(b, info, rec, obj, ctx)
    monkeypatch.setitem(_insns._HANDLERS, "TensorTensor", handler)
    assert "TensorTensor" not in _fastload.fast_ops(cat)[1]
    monkeypatch.setattr(L, "FAST_PATH", True)
    birsim.load(_program(lambda o: None))
    assert len(seen) == 6               # every one through the Python handler


def test_a_schema_key_no_row_reads_makes_the_walker_decline(monkeypatch):
    monkeypatch.setitem(_keys.SCHEMA, "TensorTensor", ("op", "new_key"))
    prog = _program(lambda o: o.__setitem__("new_key", 1))
    same(prog, monkeypatch)
    counter = Counter(monkeypatch)
    monkeypatch.setattr(L, "FAST_PATH", True)
    birsim.load(prog)
    assert counter.taken == 5           # all but instruction 3


def test_the_python_path_alone_packs_nothing(monkeypatch):
    monkeypatch.setattr(L, "FAST_PATH", False)
    m = birsim.load(_program(lambda o: None))
    assert len(m.tables["insns"]) == 6
