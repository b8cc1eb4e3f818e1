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

import numpy as np
import pytest

import birsim
import birsim._load.passes as L
from birsim._load import fastload as _fastload, insns as _insns, keys as _keys
from birsim.errors import ProgramError

import bir
from conftest import load_caught

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))


def outcome(src, fast, monkeypatch):
    """(tables by field, warnings) of a load, or the error's (type, message, path)."""
    monkeypatch.setattr(L, "FAST_PATH", fast)
    r, warned = load_caught(src)
    if isinstance(r, ProgramError):
        return ("error", str(r), r.path), warned
    return ("ok", _tables(r)), warned


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


@pytest.mark.parametrize("mix", ["eltwise", "dma"])
@pytest.mark.parametrize("spelling", ["birsim", "compiler"])
def test_both_paths_agree_on_bench_programs_and_the_walker_takes_them(spelling, mix,
                                                                     monkeypatch):
    import bench_load
    prog = bench_load.make_program(2000, spelling, mix)
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
           "no_such", "", [], {}, [1], "is_ge", 3, 4, 255, 256, 3.0, -0.0, 1e300,
           "Copy", "CCE", "Transpose", "None", "XYZW", "DoubleRow", "DoubleColumn",
           "Random", "Const"]


def _tensor(name, dtype="float32", mem="SB"):
    return {"Skind": "memory_location_set", "name": name, "kind": "Internal",
            "dtype": dtype, "tensor_shape": [4, 8],
            "memorylocations": [{"name": name, "type": mem}]}


def _ap(name):
    return {"kind": "physical_ap", "memref": name, "ap": [[8, 4], [1, 8]]}


def test_random_parameter_values_load_the_same_way(monkeypatch):
    rows, index = _fastload.fast_ops(birsim.loader.default_catalog())
    ops = sorted(index)
    assert {"TensorTensor", "TensorScalar", "Activation", "TensorReduce",
            "TensorCopy", "DMACopy", "Memset", "Matmult"} <= set(ops)
    rng = random.Random(5)
    outcomes = set()
    for n in range(len(ops) * 10):
        op = ops[n % len(ops)]
        row = _keys.OPS[L.OPCODE_ALIASES.get(op, op)]
        keys = sorted({k for p in row.params for k in
                       (p[1] if isinstance(p[1], tuple) else (p[1],))}
                      | set(row.unmodelled) | {"negat", "debug"})
        insns = []
        for k in range(4):
            obj = {"name": "i%d" % k, "opcode": op, "engine": rng.choice(
                ["DVE", "Pool", "Activation", "ACT", "bad", 3, None]),
                "ins": [_ap("a"), _ap("b")], "outs": [_ap("c")]}
            for key in keys:
                if rng.random() < 0.5:
                    obj[key] = rng.choice(_VALUES)
            insns.append(obj)
        # outs[0] of another item size now and then (Memset's constant must fit it)
        out = _tensor("c", rng.choice(["float32", "uint8", "bfloat16"]))
        prog = bir.module([{"name": "main", "allocations": [_tensor("a"), _tensor("b"), out],
                            "blocks": [{"name": "b0", "instructions": insns}]}])
        outcomes.add(same(prog, monkeypatch)[0][0])
    assert outcomes == {"ok", "error"}


# ---- DMACopy, Memset and Matmult: the common forms are taken, the rest declined ------

_TAKEN = [
    ("DMACopy", {}), ("DMACopy", {"mode": "Transpose", "transpose_op": "XYZW"}),
    ("DMACopy", {"mode": "CCE"}), ("DMACopy", {"mode": "CCE", "op": "max"}),
    ("DMACopy", {"cce_op": "min", "mode": "CCE"}), ("DMACopy", {"oob_is_err": False}),
    ("DMACopy", {"oob_is_err": 1, "queue": "qSyncIO", "dge_mode": 2}),
    ("Memset", {}), ("Memset", {"constant": 0}), ("Memset", {"constant": 255}),
    ("Memset", {"constant": 1.5}), ("Memset", {"constant": -0.0}),
    ("Memset", {"constant": 1e10, "mode": "Const"}), ("Memset", {"mode": "Random"}),
    ("Memset", {"constant": 256}), ("Memset", {"constant": 2 ** 32 - 1}),   # float32: 4 bytes
    ("Memset", {"constant": 65535, "out": "bfloat16"}),
    ("Memset", {"constant": 255, "out": "uint8"}),
    ("Memset", {"constant": 2 ** 40, "out": "int64"}),
    ("Memset", {"constant": 2.0 ** 70, "out": "uint8"}),    # a float: by value
    ("Matmult", {}), ("Matmult", {"accumulation_flag": 3}),
    ("Matmult", {"accumulation_flag": 0, "start_tensor_calc": True}),
    ("Matmult", {"start_tensor_calc": True}), ("Matmult", {"start_tensor_calc": 0}),
    ("Matmult", {"ifmap_quant_offset": 5, "weights_quant_offset": 255}),
    ("Matmult", {"perf_mode": "DoubleRow", "is_transpose": True}),
    ("Matmult", {"stop_tensor_calc": True, "tile_position": [0, 0]}),
]
_DECLINED = [
    ("DMACopy", {"constants": [1.0]}, "ok"), ("DMACopy", {"mode": "Sideways"}, "error"),
    ("DMACopy", {"oob_is_err": 2}, "error"), ("DMACopy", {"moe": "CCE"}, "ok"),
    ("Memset", {"constant": 256, "out": "uint8"}, "error"),
    ("Memset", {"constant": 65536, "out": "bfloat16"}, "error"),
    ("Memset", {"constant": 2 ** 32}, "error"),
    ("Memset", {"constant": 2 ** 63}, "error"),     # beyond int64: declined, then rejected
    ("Memset", {"constant": -1}, "error"), ("Memset", {"constant": True}, "error"),
    ("Memset", {"constant": "1"}, "error"),
    ("Matmult", {"perf_mode": "DoubleColumn"}, "error"),
    ("Matmult", {"perf_mode": 1}, "error"),       # the enum takes names only
    ("Matmult", {"accumulation_flag": 4}, "error"),
    ("Matmult", {"accumulation_flag": 3.0}, "ok"),
    ("Matmult", {"ifmap_quant_offset": 256}, "error"),
    ("Matmult", {"weights_quant_offset": 2.0}, "ok"),
    ("Matmult", {"psum_zero_region": 1}, "ok"),   # read (and warned about) by Python
    ("Matmult", {"perf_mode": "DoubleRow", "is_transpose": True, "psum_zero_region": 0}, "ok"),
    ("Matmult", {"psum_zero_region": 4}, "error"),
    ("Matmult", {"start_tensor_calc": "yes"}, "error"),
]


def _one(op, extra):
    extra = dict(extra)
    dtype = extra.pop("out", "float32")
    ins = [_ap("a"), _ap("b")] if op == "Matmult" else [] if op == "Memset" else [_ap("a")]
    obj = dict({"name": "x", "opcode": op, "engine": "PE" if op == "Matmult" else "Pool",
                "ins": ins, "outs": [_ap("c")]}, **extra)
    out = _tensor("c", dtype, "PSUM" if op == "Matmult" else "SB")
    return bir.module([{"name": "main", "allocations": [_tensor("a"), _tensor("b"), out],
                        "blocks": [{"name": "b0", "instructions": [obj]}]}])


def _taken(prog, monkeypatch):
    counter = Counter(monkeypatch)
    outcome(prog, True, monkeypatch)
    return counter.taken


@pytest.mark.parametrize("op, extra", _TAKEN)
def test_the_walker_takes_the_common_dma_memset_and_matmult_forms(op, extra, monkeypatch):
    prog = _one(op, extra)
    assert same(prog, monkeypatch)[0][0] == "ok"
    assert _taken(prog, monkeypatch) == 1


@pytest.mark.parametrize("op, extra, result", _DECLINED)
def test_other_dma_memset_and_matmult_forms_decline_to_the_python_path(op, extra, result,
                                                                       monkeypatch):
    prog = _one(op, extra)
    assert same(prog, monkeypatch)[0][0] == result
    assert _taken(prog, monkeypatch) == 0


def test_a_dma_copy_without_constants_after_one_with_them_packs_the_same(monkeypatch):
    # the Python path leaves flist at 0 without constants, as the walker does
    consts = dict(_one("DMACopy", {"constants": [1.0, 2.0]})["functions"][0]["blocks"][0]
                  ["instructions"][0], name="y")
    prog = _one("DMACopy", {})
    prog["functions"][0]["blocks"][0]["instructions"].insert(0, consts)
    assert same(prog, monkeypatch)[0][0] == "ok"
    assert _taken(prog, monkeypatch) == 1


def test_memset_constants_keep_their_int_and_float_readings(monkeypatch):
    monkeypatch.setattr(L, "FAST_PATH", True)
    cat = birsim.loader.default_catalog()
    for const, slots in [(7, (7, 0, 0.0)), (7.0, (0, 1, 7.0)), (-2.5, (0, 1, -2.5))]:
        rec = birsim.load(_one("Memset", {"constant": const})).tables["insns"][0]
        s = _insns.Slots(rec, cat.params["Memset"], "Memset")
        assert (s["constant"], s["by_value"], s["value"]) == slots


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
    # with an accumulator in use (an Idle one leaves reduce_op unused: any ALU op loads)
    msg = _err(lambda o: o.update(acc="Accumulate", reduce_op="bitwise_or"), monkeypatch)
    assert msg.startswith("functions[0].blocks[0].instructions[3].reduce_op: TensorTensor key "
                          "'reduce_op' = 'bitwise_or' is not modelled")


# ---- the walker follows the tables it is built from ---------------------------------

def test_an_opcode_with_a_handler_of_its_own_leaves_the_fast_path(monkeypatch):
    cat = birsim.loader.default_catalog()
    assert "TensorTensor" in _fastload.fast_ops(cat)[1]
    seen = []

    def handler(b, info, rec, obj, ctx):
        if L.FAST_PATH:                 # BIRSIM_CHECK_FASTLOAD loads once more without it
            seen.append(info.index)
        _insns._declared(b, info, rec, obj, ctx)
    monkeypatch.setitem(_insns._HANDLERS, "TensorTensor", handler)
    assert "TensorTensor" not in _fastload.fast_ops(cat)[1]
    monkeypatch.setattr(L, "FAST_PATH", True)
    birsim.load(_program(lambda o: None))
    assert len(seen) == 6               # every one through the Python handler


def test_a_schema_key_no_row_reads_makes_the_walker_decline(monkeypatch):
    monkeypatch.setitem(_keys.OPS, "TensorTensor",
                        _keys.OPS["TensorTensor"]._replace(keys=("new_key",)))
    prog = _program(lambda o: o.__setitem__("new_key", 1))
    same(prog, monkeypatch)
    counter = Counter(monkeypatch)
    monkeypatch.setattr(L, "FAST_PATH", True)
    birsim.load(prog)
    assert counter.taken == 5           # all but instruction 3


def test_instruction_names_are_appended_and_read_back_by_their_bytes(monkeypatch):
    # names are labels: each instruction's is appended to the string table (a dict of
    # every name cost ~10 % of a load), on both paths (same(): equal tables); other
    # names stay interned
    names = ["t0", "t0", "a", "t3", "t0", "t5"]
    prog = _program(lambda obj: None)
    for obj, name in zip(prog["functions"][0]["blocks"][0]["instructions"], names):
        obj["name"] = name
    assert same(prog, monkeypatch)[0][0] == "ok"
    monkeypatch.setattr(L, "FAST_PATH", True)
    counter = Counter(monkeypatch)
    t = birsim.load(prog).tables
    assert counter.taken == len(names)          # the walker's names
    sbuf = t["strings"]
    read = [sbuf[o:sbuf.index(b"\0", o)].decode() for o in t["insns"]["name"]]
    assert read == names
    assert len(set(t["insns"]["name"].tolist())) == len(names)
    strings = sbuf.split(b"\0")
    assert strings.count(b"t0") == 3 and strings.count(b"a") == 2           # + set "a"
    sets = [sbuf[o:sbuf.index(b"\0", o)].decode() for o in t["sets"]["name"]]
    assert sorted(sets) == ["a", "b", "c"]


def test_the_python_path_alone_packs_nothing(monkeypatch):
    monkeypatch.setattr(L, "FAST_PATH", False)
    m = birsim.load(_program(lambda o: None))
    assert len(m.tables["insns"]) == 6


# ---- the JSON reader: msgspec where it accepts the text, json.loads otherwise ---------

def _exact(a, b):
    """Equal values of equal types all the way down (floats bit for bit)."""
    import struct
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_exact(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_exact(x, y) for x, y in zip(a, b))
    if isinstance(a, float):
        return struct.pack("<d", a) == struct.pack("<d", b)
    return a == b


def _random_json(rng, depth=0):
    r = rng.random()
    if depth > 3 or r < 0.4:
        return rng.choice(["1", "-0", "0.1", "-0.0", "1e5", "1E-5", "5e-324", "1e308",
                           "2.2250738585072011e-308", "123456789012345678901234567890",
                           "9223372036854775808", "true", "false", "null", '"a"', '"\\u00e9"',
                           '"\\ud83d\\ude00"', '"\\n\\t\\/"', '"\u00e9"', "3.0000000000000004",
                           "1.7976931348623157e308", "0.30000000000000004"])
    if r < 0.7:
        return "[%s]" % ", ".join(_random_json(rng, depth + 1)
                                  for _ in range(rng.randrange(4)))
    return "{%s}" % ",".join('"k%d": %s' % (rng.randrange(3), _random_json(rng, depth + 1))
                             for _ in range(rng.randrange(4)))


def test_the_fast_json_reader_gives_what_json_gives():
    import json
    if L._fast_json is None:
        pytest.skip("msgspec is not installed (json.loads reads everything)")
    rng = random.Random(3)
    for text in [p.read_bytes() for p in corpus_files()] + \
            [_random_json(rng).encode() for _ in range(2000)]:
        assert _exact(L._parse_json(text), json.loads(text))


@pytest.mark.parametrize("text, message", [
    (b'{"a": NaN}', None), (b'{"a": 1e400}', None), (b'{"a": "\\ud800"}', None),
    (b'{"a": 1,}', "invalid JSON: line 1 column 9"), (b'\xff{}', "not UTF-8"),
    (b"[" * 100000 + b"]" * 100000, "nested too deeply")])
def test_what_the_fast_json_reader_rejects_json_reads_or_reports(text, message):
    import json
    if message is None:
        assert _exact(L._parse_json(text), json.loads(text))
    else:
        with pytest.raises(ProgramError, match=message):
            L._parse_json(text)


# ---- the heap freed by a large load goes back to the system ---------------------------

def test_large_loads_trim_the_heap_after_the_json_tree_is_freed(monkeypatch):
    import bench_load
    import weakref
    trims = []
    probe = {}

    def trim():
        trims.append(probe["tree"]() is None)   # the tree is gone when the heap is trimmed
        return True
    real_read = L._read_source

    class Root(dict):                   # a dict that takes weak references
        pass

    def read(source, lazy=False):
        got = real_read(source, lazy)
        root = Root(got[0])
        probe["tree"] = weakref.ref(root)
        return (root,) + got[1:]
    monkeypatch.setattr(L, "_trim_heap", trim)
    monkeypatch.setattr(L, "_read_source", read)
    monkeypatch.setattr(L, "_loaded_since_trim", 0)
    import json
    small = json.dumps(bench_load.make_program(8, "birsim"))
    birsim.load(small)
    assert trims == []                  # small loads add up before a trim is worth it
    big = json.dumps(bench_load.make_program(L.TRIM_AFTER_INSNS, "birsim"))
    birsim.load(big)
    assert trims == [True]
    assert L._loaded_since_trim == 0
    assert isinstance(birsim._birsim._trim_heap(), bool)


# ---- registers, immediates and the generic opcodes of lowered loops ---------------------

def _reg(name, **kw):
    return dict({"kind": "register_access", "regref": name}, **kw)


def _imm(value, **kw):
    return dict({"kind": "imm_value", "value": value}, **kw)


def _control(obj):
    """obj (an instruction, or a list of them) in a function with registers r (int32), q
    (uint32) and w (int64), tensors a, b, c and ab (two locations, a2 and b2)."""
    insns = obj if isinstance(obj, list) else [obj]
    regs = [{"Skind": "register", "name": n, "dtype": d}
            for n, d in (("r", "int32"), ("q", "uint32"), ("w", "int64"))]
    two = dict(_tensor("ab"), memorylocations=[{"name": "a2", "type": "SB"},
                                               {"name": "b2", "type": "SB"}])
    return bir.module([{"name": "main",
                        "allocations": [_tensor(t) for t in "abc"] + [two] + regs,
                        "blocks": [{"name": "b0", "instructions": insns}]}])


def _alu(ins, outs=None, **keys):
    return dict({"name": "inc-Pool0", "opcode": "RegisterAlu", "engine": "Pool", "op": "add",
                 "ins": ins, "outs": outs or [_reg("r")]}, **keys)


def _save(out):
    return {"name": "save", "opcode": "TensorSave", "engine": "DVE", "ins": [_reg("r")],
            "outs": [out]}


def _rap(**kw):
    """A register_ap on c (element r of its first partition)."""
    return {k: v for k, v in dict({"kind": "register_ap", "memref": "c", "ap": [[8, 1], [1, 1]]},
                                  **kw).items() if v is not None}


_CONTROL_TAKEN = [
    _alu([_reg("r"), _imm(1)]),
    _alu([_reg("r"), _imm(1, dtype="int32")], is_64bit=False),
    _alu([_reg("w"), _imm(-(1 << 63))], [_reg("w")], is_64bit=True, op="subtract"),
    _alu([_reg("q", dtype="uint32"), _imm((1 << 63) - 1)], [_reg("q")], op="mult"),
    _alu([_reg("r"), _imm(2.5)], op="max"),
    _alu([_reg("r"), _imm(-0.0, dtype="float32")]),
    _alu([_reg("r"), _imm(1e300)]),
    _alu([_reg("r"), _imm(-9.3e18)]),
    _alu([_reg("r"), _imm(True)]),
    _alu([{"kind": "register", "regref": "r"}, _imm(False)], is_64bit=1),
    _alu([_reg("r"), _imm(3)], debug={"lineno": 3}, loop_carried_dependencies=[],
         dependencies=["x"]),
    {"name": "init", "opcode": "RegisterMove", "engine": "SP", "ins": [_imm(0)],
     "outs": [_reg("r")]},
    {"name": "save", "opcode": "TensorSave", "engine": "DVE", "ins": [_reg("r")],
     "outs": [_ap("c")]},
    {"name": "bar", "opcode": "AllEngineBarrier", "engine": "ALL"},
    {"name": "ev", "opcode": "EventSemaphore", "engine": "Pool",
     "sync_info": {"on_wait": [{"from": "x", "id": 3, "wait_value": 16}],
                   "on_update": [{"id": 4, "update_value": 1}]}},
    {"name": "wr", "opcode": "NoOp", "engine": "DVE",
     "sync_info": {"on_wait": [{"type": "semaphore", "id": 3, "mode": "sem-ge-reg",
                                "regref": "r"}]}},
    {"name": "act", "opcode": "Activation", "engine": "Activation", "func": "Relu",
     "ins": [_ap("a"), _imm(0.5)], "outs": [_ap("c")]},
    _save(_rap(reg_ap_offset="r")),
    _save(_rap(reg_ap_offset="w", const_ap_offset=-3, dtype="int32", offset=2)),
    _save(_rap(reg_ap_offset="r", regref="q")),     # reg_ap_offset first: no warning
    _save(_rap(reg_ap_offset="r", memref=None, memsetref="c_set")),   # the compiler's
    _save(_rap(reg_ap_offset="r", memref=None, memsetref="c")),       # a set's name
    _save(dict(_ap("c"), memref=None, memsetref="c_set")),
    _save(dict(_ap("c"), memsetref="b")),           # memref first
]
_CONTROL_DECLINED = [           # (instruction, "ok" or "error" in both paths)
    (_alu([_reg("nope"), _imm(1)]), "error"),       # unknown register
    (_alu([_reg(""), _imm(1)]), "error"),
    (_alu([_reg(3), _imm(1)]), "error"),
    (_alu([{"kind": "register_access"}, _imm(1)]), "error"),
    (_alu([_reg("r", dtype="int33"), _imm(1)]), "error"),
    (_alu([_reg("a"), _imm(1)]), "error"),           # a tensor, not a register
    (_alu([_reg("r"), _imm("1")]), "error"),
    (_alu([_reg("r"), _imm(None)]), "error"),
    (_alu([_reg("r"), {"kind": "imm_value"}]), "error"),
    (_alu([_reg("r"), _imm(1, dtype="float99")]), "error"),
    (_alu([_reg("r"), _imm(1 << 63)]), "error"),   # beyond int64: declined, not guessed
    (_alu([_reg("r"), _imm(1)], op="plus"), "error"),
    (_alu([_reg("r"), _imm(1)], op=None), "error"),
    (_alu([_reg("r"), _imm(1)], is_64bit=2), "error"),
    (_alu([_reg("r"), {"kind": "imm_array", "value_array": [1, 2]}]), "ok"),
    (_alu([_reg("r"), {"kind": "registr", "regref": "r"}]), "error"),
    ({"name": "wr", "opcode": "NoOp", "engine": "DVE",
      "sync_info": {"on_wait": [{"type": "semaphore", "id": 3, "mode": "sem-ge-reg",
                                 "regref": "zz"}]}}, "error"),
    ({"name": "wr", "opcode": "NoOp", "engine": "DVE",
      "sync_info": {"on_wait": [{"type": "semaphore", "id": 3, "mode": "sem-ge-reg"}]}},
     "error"),
    (_save(_rap(reg_ap_offset="r", memref="nope")), "error"),
    (_save(_rap(reg_ap_offset="nope")), "error"),
    (_save(_rap()), "error"),                       # no register
    (_save(_rap(reg_ap_offset="r", const_ap_offset="1")), "error"),
    (_save(_rap(reg_ap_offset="r", const_ap_offset=1.0)), "ok"),
    (_save(_rap(reg_ap_offset="r", offset={"op": "add", "args": [1, 2]})), "error"),
    (_save(_rap(reg_ap_offset="r", memref=None, memsetref="ab")), "error"),   # 2 locations
    (_save(_rap(reg_ap_offset="r", memref=None, memsetref="zz_set")), "error"),
    (_save(_rap(reg_ap_offset="r", memref=None)), "error"),
    (_save(_rap(regref="r")), "ok"),               # warns: the first one is the Python path's
    (_save(dict(_ap("c"), memref=None, memsetref="c_sett")), "error"),
]


@pytest.mark.parametrize("obj", _CONTROL_TAKEN)
def test_the_walker_takes_registers_immediates_and_generic_opcodes(obj, monkeypatch):
    prog = _control(obj)
    assert same(prog, monkeypatch)[0][0] == "ok"
    assert _taken(prog, monkeypatch) == 1


@pytest.mark.parametrize("obj, result", _CONTROL_DECLINED)
def test_other_register_and_immediate_forms_decline_to_the_python_path(obj, result,
                                                                       monkeypatch):
    prog = _control(obj)
    assert same(prog, monkeypatch)[0][0] == result
    assert _taken(prog, monkeypatch) == 0


def test_register_and_immediate_records_hold_the_python_paths_values(monkeypatch):
    # the immediates' three readings (imm, imm_bits, imm_is_int) and the registers'
    # dtypes, field by field, through both paths (same() compares every table)
    ins = [_imm(v) for v in (7, -1, 2.75, -2.75, 1e19, float("inf"), float("nan"), True)]
    prog = _control([_alu([_reg("q"), x], [_reg("w")]) for x in ins])
    out = same(prog, monkeypatch)
    assert out[0][0] == "ok"
    m = birsim.load(prog)
    o = m.tables["opnds"]
    imms = o[o["kind"] == birsim.loader.default_catalog().enums["OPND"]["imm_value"]]
    assert list(imms["imm_bits"]) == [7, -1, 2, -2, 0, 0, 0, 1]
    assert list(imms["imm_is_int"]) == [1, 1, 0, 0, 0, 0, 0, 1]
    assert _taken(prog, monkeypatch) == len(ins)


def test_a_lowered_loop_loads_the_same_way_and_the_walker_takes_all_but_two_opcodes(
        monkeypatch):
    # the branches (terminators) keep their Python handlers; the DMA trigger is handed
    # back (fastload.HANDBACK); the DMA descriptors are in queues, where the walker does
    # not go
    import bench_load
    python_path = ("CompareAndBranch",)
    for spelling in ("birsim", "compiler"):
        prog = bench_load.make_program(2 * bench_load.BLOCK, spelling, "control")
        assert same(prog, monkeypatch)[0][0] == "ok"
        insns = [i for f in prog["functions"] for b in f["blocks"] for i in b["instructions"]]
        declined = sum(i["opcode"] in python_path for i in insns)
        assert sum(i["opcode"] == "RegisterAlu" for i in insns) > 200
        assert 0 < declined < len(insns) // 50
        # and in the compiler's spelling the first register_ap with regref (it warns)
        first_regref = int(spelling == "compiler")
        assert _taken(prog, monkeypatch) == len(insns) - declined - first_regref


def _bad_control(mutate):
    insns = [_alu([_reg("r"), _imm(k)], name="a%d" % k) for k in range(6)]
    mutate(insns[3])
    return _control(insns)


@pytest.mark.parametrize("mutate, where, message", [
    (lambda o: o["ins"][0].__setitem__("regref", "nope"), "ins[0].regref",
     "unknown register 'nope'"),
    (lambda o: o["ins"][1].__setitem__("value", "x"), "ins[1].value", "expected a number"),
    (lambda o: o["ins"][1].__setitem__("dtype", "int99"), "ins[1].dtype", "unknown dtype"),
    (lambda o: o["outs"][0].__setitem__("dtype", 3), "outs[0].dtype", "unknown dtype"),
    (lambda o: o.__setitem__("op", "plus"), "op", "unknown ALU op"),
    (lambda o: o.__setitem__("is_64bit", "yes"), "is_64bit", "expected a boolean"),
])
def test_bad_register_and_immediate_operands_keep_their_json_paths(mutate, where, message,
                                                                   monkeypatch):
    out = same(_bad_control(mutate), monkeypatch)
    assert out[0][0] == "error"
    assert out[0][1].startswith("functions[0].blocks[0].instructions[3].%s: " % where)
    assert message in out[0][1]


def test_register_ap_regref_warns_once_at_the_first_and_the_walker_takes_the_rest(
        monkeypatch):
    insns = [_save(_rap(regref="r", offset=k)) for k in range(5)]
    insns[0] = _alu([_reg("r"), _imm(1)])           # the walker's, before the first regref
    out, caught = same(_control(insns), monkeypatch)
    assert out[0] == "ok"
    assert [w for w in caught if "register_ap 'regref'" in w] == [
        "functions[0].blocks[0].instructions[1].outs[0]: register_ap 'regref' is read as a "
        "number of elements added to the pattern's start, like reg_ap_offset (how the "
        "compiler computes it is unknown; README choices)"]
    assert _taken(_control(insns), monkeypatch) == 4    # all but instruction 1


def test_a_regref_operand_the_walker_never_saw_still_warns_first(monkeypatch):
    # instruction 0 (CustomOp: handed back, fastload.HANDBACK) declines at its first
    # regref operand: the Python path warns there, and the walker takes the later ones
    first = {"name": "p", "opcode": "CustomOp", "engine": "Pool",
             "opFunctionName": "k", "ins": [_ap("a")], "outs": [_rap(regref="r")]}
    insns = [first] + [_save(_rap(regref="r", offset=k)) for k in range(3)]
    out, caught = same(_control(insns), monkeypatch)
    assert out[0] == "ok"
    assert [w for w in caught if "register_ap 'regref'" in w][0].startswith(
        "functions[0].blocks[0].instructions[0].outs[0]: ")
    assert _taken(_control(insns), monkeypatch) == 3


_OPERAND_VALUES = [None, True, 0, 1, -1, 2.5, float("nan"), 1 << 63, -(1 << 63), "r", "q", "w",
                   "nope", "", "c", "c_set", "ab", "ab_set", "_set", "a2", "int32", "float32",
                   "uint8", "int64", "bad", "register_ap", "physical_ap", "register_access",
                   "register", "imm_value", "imm_array", [], [[8, 1], [1, 1]], [[8, 4], [1, 8]],
                   [[-1, 1]], {}, {"op": "add", "args": [1, 2]}, [1, 2]]
_OPERAND_KEYS = ["kind", "regref", "reg_ap_offset", "memref", "memsetref", "dtype", "value",
                 "ap", "offset", "const_ap_offset", "value_array"]


def test_random_register_and_immediate_operands_load_the_same_way(monkeypatch):
    # lowered-loop-shaped instructions whose operands get random keys and values: both
    # paths give the same tables, warnings and errors (and the walker takes some)
    rng = random.Random(11)
    seeds = [_alu([_reg("r"), _imm(1)]), _save(_rap(reg_ap_offset="r")),
             _save(_rap(regref="q", memref=None, memsetref="c_set")),
             {"name": "mv", "opcode": "RegisterMove", "engine": "SP", "ins": [_imm(0)],
              "outs": [_reg("w")]},
             {"name": "wr", "opcode": "NoOp", "engine": "DVE",
              "sync_info": {"on_wait": [{"type": "semaphore", "id": 3, "mode": "sem-ge-reg",
                                         "regref": "r"}]}}]
    outcomes, taken = set(), 0
    for n in range(300):
        insns = []
        for k in range(4):
            obj = json_copy(rng.choice(seeds))
            obj["name"] = "i%d" % k
            for side in ("ins", "outs"):
                for opnd in obj.get(side, []):
                    for _ in range(rng.randrange(3)):
                        key = rng.choice(_OPERAND_KEYS)
                        v = rng.choice(_OPERAND_VALUES)
                        if v is None:
                            opnd.pop(key, None)
                        else:
                            opnd[key] = json_copy(v)
            insns.append(obj)
        prog = _control(insns)
        outcomes.add(same(prog, monkeypatch)[0][0])
        taken += _taken(prog, monkeypatch)
    assert outcomes == {"ok", "error"}
    assert 100 < taken < 1100, taken      # some taken, some declined


def json_copy(v):
    import copy
    return copy.deepcopy(v)


def test_a_callers_dict_is_never_touched_and_a_parsed_tree_loads_the_same(monkeypatch):
    """The walker frees the JSON of the instructions it took while loading a tree load()
    parsed itself (text, bytes, a file); a caller's dict stays as it was given, and the
    module can be loaded again from it."""
    import copy
    import json
    monkeypatch.setattr(L, "FAST_PATH", True)
    prog = _program(lambda o: None)
    before = copy.deepcopy(prog)
    from_dict = birsim.load(prog)
    assert prog == before
    assert all(isinstance(i, dict) for i in prog["functions"][0]["blocks"][0]["instructions"])
    from_text = birsim.load(json.dumps(prog))
    from_bytes = birsim.load(json.dumps({"module": prog}).encode())
    assert _tables(from_dict) == _tables(from_text) == _tables(from_bytes)
    two = birsim.load([prog, json.dumps(prog)])        # one per core: a dict and a text
    assert len(two) == 2 and prog == before
    assert _tables(birsim.load(prog)) == _tables(from_dict)


def _tables(result):
    from conftest import _tables as tables
    return tables(result)


def test_a_record_that_does_not_fit_names_its_instruction_not_its_table_position():
    # The walker's operand records come in another order than the Python path's, so a
    # value that does not fit an operand or sync column is named by the instruction
    # that owns it (the same on both paths), found among the Python path's records.
    from birsim._load import tables as T
    t = T.Tables()
    t.string("cp")
    main, b0 = t.string("main"), t.string("b0")
    t.recs["funcs"] = [{"name": main}]
    t.recs["blocks"] = [{"name": b0, "func": 0, "insn0": 0}]
    t.recs["insns"] = [None, {"name": 1, "func": 0, "block": 0, "opnd": 3, "nin": 1,
                              "nout": 1, "sync": 0, "nwait": 1, "nupd": 0}]
    t.recs["opnds"] = [None, None, None, {"kind": 0}, {"kind": 0, "imm_bits": 10 ** 30}]
    t.recs["syncs"] = [{"id": 2 ** 40}]
    dt = L.default_catalog().numpy_dtypes
    with pytest.raises(ProgramError, match=r"^a value does not fit the program tables: "
                       r"operand 1 of instruction 'cp' \(function 'main', block 'b0', "
                       r"position 1\): imm_bits=10{30}$"):
        T._to_array(t.recs["opnds"][3:], dt["opnds"], {}, "opnds", t, [3, 4])
    with pytest.raises(ProgramError, match=r": sync entry 0 of instruction 'cp' \(.*\): id="):
        T._to_array(t.recs["syncs"], dt["syncs"], {}, "syncs", t)


def test_the_walkers_records_become_the_tables_without_slack():
    # _fast_fill hands each packed buffer over as the table's memory, shrunk to the
    # records it holds (the buffer grew by doubling), with the Python path's records
    # written over their blank slots.
    import json
    import bench_load
    with pytest.warns(birsim.BirsimWarning, match="register_ap 'regref'"):
        m = birsim.load(json.dumps(bench_load.make_program(1200, "compiler", "control")))
    for t in ("insns", "opnds", "syncs"):
        arr = m.tables[t]
        assert type(arr.base).__name__ == "_Records" and arr.flags.writeable
        assert memoryview(arr.base).nbytes == arr.nbytes == len(arr) * arr.dtype.itemsize
    with pytest.raises(TypeError):
        type(m.tables["insns"].base)()
    op_name = L.default_catalog().op_name
    kinds = {op_name[int(op)] for op in m.tables["insns"]["op"]}
    assert {"CompareAndBranch", "DMATrigger", "Matmult"} <= kinds   # both paths wrote


class _CtrlCOnce:
    """A perf_mode value that reads as "None", except that the first comparison with it
    raises KeyboardInterrupt: a Ctrl-C whose handler runs inside the walker's call of the
    key's accepted() function."""

    def __init__(self):
        self.raised = False

    def __eq__(self, other):
        if not self.raised:
            self.raised = True
            raise KeyboardInterrupt
        return other == "None"

    __hash__ = None


def test_a_ctrl_c_inside_an_accepted_check_is_not_swallowed_by_a_decline():
    """The walker declines to the Python path when a key's check fails -- but not when the
    failure is a Ctrl-C: declining would clear it, and the Python path, asking again, would
    load the program as if no Ctrl-C had come."""
    once = _CtrlCOnce()
    with pytest.raises(KeyboardInterrupt):
        birsim.load(_one("Matmult", {"perf_mode": once}))
    assert once.raised
