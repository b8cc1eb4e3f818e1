"""The shortcuts of the handed-back opcodes' handlers (birsim/_load/insns.py
``_BACK_FAST``) against the handlers themselves, the specification.

A shortcut builds a handed-back instruction (fastload.HANDBACK) when its values are the
common ones and declines it otherwise, writing nothing (the handler then builds it or
reports the error). Every program here loads to the same tables, warnings and error
(message and JSON path) with the shortcuts on, off (``BACK_FAST = False``) and with the
Python path alone (``FAST_PATH = False``), on values each shortcut takes and values it
declines.
"""

import copy
import random
import sys

import pytest

from birsim._load import fastload as _fastload, insns as _insns

from test_load_fastload import ROOT, outcome

sys.path.insert(0, str(ROOT / "tests"))

import _examples  # noqa: E402

_EXAMPLES = dict(_examples.printed_examples())

_DEL = object()

_INTS = [_DEL, None, 0, 1, 3, 4, -2, 2.0, True, "0", 1 << 63, -(1 << 63), (1 << 63) - 1]
_BOOLS = [_DEL, None, True, False, 0, 1, 2, -1, "yes", 1.0]
_NAMES = [_DEL, None, "", 3, "a\0b", "caf\u00e9", "\ud800", ["x"]]
_UB = [{"kind": "AffExprKind", "c": 2, "terms": [{"idx": {"kind": "IntRuntimeValueKind",
                                                          "regref": "r"}, "coeff": 3}]},
       {"c": -1, "terms": [{"idx": {"kind": "IntRuntimeValueKind", "regref": "r"},
                            "coef": 2}]},
       {"terms": [{"idx": {"kind": "IntRuntimeValueKind", "regref": "r"}}]},
       {"kind": None, "terms": [{"idx": {"kind": "IntRuntimeValueKind", "regref": "r"}}]},
       {"terms": [{"idx": {"kind": "IntRuntimeValueKind", "regref": "r"}, "coeff": 1.0}]},
       {"c": True, "terms": [{"idx": {"kind": "IntRuntimeValueKind", "regref": "r"}}]},
       {"terms": [{"idx": {"kind": "IntRuntimeValueKind", "regref": "nope"}}]},
       {"terms": [{"idx": {"kind": "IntRuntimeValueKind", "regref": ""}}]},
       {"terms": [{"idx": {"kind": "AffIVKind", "regref": "r"}}]},
       {"terms": []}, {"terms": [1]}, 5, None, _DEL]
_SHAPES = [_DEL, None, [], [[128, 64]], [[128, 64], [1]], [[0]], [[-1]], [[1.0]], [[True]],
           [[1 << 63]], "x", [3], {}]

#: opcode -> {key (a tuple: a key of an object key) -> the values tried}
_KEYS = {
    "Loop": {("LoopAxis", "lb"): _INTS, ("LoopAxis", "ub"): _INTS,
             ("LoopAxis", "stride"): _INTS + [0, -1], ("isParallel",): _BOOLS},
    "DynamicForLoop": {("DynamicForLoopAxis", "lb"): _INTS,
                       ("DynamicForLoopAxis", "stride"): _INTS + [0, -1],
                       ("DynamicForLoopAxis", "ub"): _UB},
    "DoWhile": {("cond",): [{"regref": "r"}, {"kind": "IntRuntimeValueKind", "regref": "r"},
                            {"kind": None, "regref": "r"}, {"kind": "X", "regref": "r"},
                            {"regref": "nope"}, {"regref": ""}, {"regref": 3}, {}, [1],
                            None, _DEL]},
    "DMATrigger": {("queue",): ["q0", "q0", "nope"] + _NAMES,
                   ("dma_blocks",): [_DEL, None, "blk0", ["blk0"], [], ["blk0", "blk0"],
                                     ["nope"], 3, [3], ["", "blk0"]]},
    "SwitchQueueInstance": {("queue",): ["q0", "q0", "nope"] + _NAMES,
                            ("no_rearm",): _BOOLS,
                            ("instance",): [_DEL, None, "blk0", ["blk0"], [], ["nope"], 5,
                                            ["blk0", "blk0"]]},
    "ResetQueueInstance": {("queue",): ["q0", "q0", "nope"] + _NAMES,
                           ("instance",): [_DEL, None, "blk0", ["blk0"], [], ["nope"], 5]},
    "Call": {("target",): ["callee", "callee", "main", "nope"] + _NAMES,
             ("arguments",): [_DEL, None, {}, {"cin": "src"}, {"cin": "src", "cout": "dst"},
                              {"cin": "two"}, {"two": "src"}, {"nope": "src"},
                              {"cin": "nope"}, {"cin": 3}, [], "x"]},
    "NKIKernel": {("func",): ["nki_kern", "nki_kern", "main", "callee", "nope"] + _NAMES,
                  ("func_args",): [_DEL, None, [], ["src"], "src", ["two"], ["nope"], [3],
                                   ["src", "a"], 3],
                  ("func_outs",): [_DEL, None, [], ["dst"], "dst", ["two"], [""]]},
    "CustomOp": {("opFunctionName",): ["my_kernel", "k2", "my_kernel"] + _NAMES,
                 ("srcsShape",): _SHAPES, ("dstsShape",): _SHAPES},
    "BIRKernel": {("kernel_name",): ["my_kernel", "k2", "my_kernel"] + _NAMES,
                  ("srcs_shape",): _SHAPES, ("dsts_shape",): _SHAPES,
                  ("kernel_attrs",): [_DEL, None, {}, {"a": 1}, [1], "x"],
                  ("sb_buf_shape",): [_DEL, None, [1, 2]],
                  ("lower_bound",): [_DEL, None, 0.5]},
}


def _program(op, objs):
    """The example program of ``objs``, with bound tensor sets in the callees: ``cin``
    (an input), ``cout`` (an output) and ``two`` (two locations) in ``callee``, an input
    and an output in ``nki_kern``; ``two`` in ``main``."""
    prog = _examples.program(objs)
    funcs = {f["name"]: f for f in prog["functions"] + prog.get("nki_functions", [])}
    src = next(a for a in funcs["main"]["allocations"] if a.get("name") == "src")

    def alloc(name, kind, nloc=1):
        a = copy.deepcopy(src)
        a.update(name=name, kind=kind)
        a["memorylocations"] = [dict(a["memorylocations"][0], name="%s_%d" % (name, j))
                                for j in range(nloc)]
        return a
    funcs["main"].setdefault("allocations", []).append(alloc("two", "Internal", 2))
    if "callee" in funcs:
        funcs["callee"].setdefault("allocations", []).extend(
            [alloc("cin", "Input"), alloc("cout", "Output"), alloc("two", "Internal", 2)])
    if "nki_kern" in funcs:
        funcs["nki_kern"].setdefault("allocations", []).extend(
            [alloc("kin", "ExternalInput"), alloc("kout", "ExternalOutput")])
    return prog


def _copies(op, n):
    objs = []
    for k in range(n):
        obj = _examples.instruction(_EXAMPLES[op], "i%d" % k)
        if obj.get("blocks"):           # a loop body's block names are the function's
            obj["blocks"] = [dict(b, name="%s_%d" % (b["name"], k)) for b in obj["blocks"]]
        if op == "NKIKernel":
            obj.update(func_args=["src"], func_outs=["dst"])
        objs.append(obj)
    return objs


def _put(obj, path, value):
    for k in path[:-1]:
        obj = obj.get(k)
        if not isinstance(obj, dict):
            return
    if value is _DEL:
        obj.pop(path[-1], None)
    else:
        obj[path[-1]] = copy.deepcopy(value)


class Shortcuts:
    """Counts the shortcuts' builds and declines."""

    def __init__(self, monkeypatch):
        self.took, self.declined = {}, {}
        table = dict(_insns._BACK_FAST)
        for op, fn in _insns._BACK_FAST.items():
            def counting(b, info, rec, obj, fn=fn):
                ok = fn(b, info, rec, obj)
                d = self.took if ok else self.declined
                d[info.op] = d.get(info.op, 0) + 1
                return ok
            table[op] = counting
        monkeypatch.setattr(_insns, "_BACK_FAST", table)


def _three_ways(prog, monkeypatch):
    monkeypatch.setattr(_insns, "BACK_FAST", True)
    on = outcome(prog, True, monkeypatch)
    monkeypatch.setattr(_insns, "BACK_FAST", False)
    off = outcome(prog, True, monkeypatch)
    python = outcome(prog, False, monkeypatch)
    monkeypatch.setattr(_insns, "BACK_FAST", True)
    assert on == off
    assert on == python
    return on


def test_every_handed_back_opcode_has_a_shortcut():
    assert set(_insns._BACK_FAST) == set(_fastload.HANDBACK)
    assert set(_KEYS) == set(_fastload.HANDBACK)


@pytest.mark.parametrize("op", _fastload.HANDBACK)
def test_the_shortcut_builds_the_examples_as_the_handler(op, monkeypatch):
    shortcuts = Shortcuts(monkeypatch)
    out, _ = _three_ways(_program(op, _copies(op, 3)), monkeypatch)
    assert out[0] == "ok"
    assert shortcuts.took.get(op, 0) == 3 and not shortcuts.declined


@pytest.mark.parametrize("op", _fastload.HANDBACK)
def test_the_shortcut_agrees_with_the_handler_on_values_it_takes_and_declines(
        op, monkeypatch):
    shortcuts = Shortcuts(monkeypatch)
    rng = random.Random(hash(op) & 0xffff)
    outcomes = set()
    keys = _KEYS[op]
    for n in range(60):
        objs = _copies(op, 4)
        for obj in objs[1:3]:
            for path, values in keys.items():
                if rng.random() < (0.5 if n % 2 else 0.2):
                    _put(obj, path, rng.choice(values))
        out, _ = _three_ways(_program(op, objs), monkeypatch)
        outcomes.add(out[0])
    assert outcomes == {"ok", "error"}
    # both sides of each shortcut were exercised
    assert shortcuts.took.get(op, 0) > 20 and shortcuts.declined.get(op, 0) > 5


@pytest.mark.parametrize("spelling", ["birsim", "compiler"])
def test_the_bench_programs_of_every_opcode_load_the_same_with_the_shortcuts(
        spelling, monkeypatch):
    sys.path.insert(0, str(ROOT / "bench"))
    import bench_load
    shortcuts = Shortcuts(monkeypatch)
    out, _ = _three_ways(bench_load.make_program(1500, spelling, "all"), monkeypatch)
    assert out[0] == "ok"
    assert set(shortcuts.took) == set(_fastload.HANDBACK)


@pytest.mark.parametrize("back_fast,fast_path", [(True, True), (False, True), (False, False)])
def test_every_instance_less_queue_switch_shares_one_list_of_all_the_queues_blocks(
        back_fast, fast_path, monkeypatch):
    # a queue of n blocks reset n times held n * n ipool entries (1M instructions of the
    # all-opcode mix: 2 KB of tables per instruction); one range per queue now
    import birsim
    import birsim._load.passes as L
    sys.path.insert(0, str(ROOT / "bench"))
    import bench_load
    monkeypatch.setattr(_insns, "BACK_FAST", back_fast)
    monkeypatch.setattr(L, "FAST_PATH", fast_path)
    sizes = {}
    for n in (2000, 4000):
        m = birsim.load(bench_load.make_program(n, "birsim", "all"))
        T = m.tables
        ops = {birsim._birsim.opcodes[k][0] for k in ("ResetQueueInstance",
                                                       "SwitchQueueInstance")}
        ranges = {(int(r["list"]), int(r["nlist"])) for r in T["insns"] if int(r["op"]) in ops}
        blocks = [i for i, r in enumerate(T["insns"])
                  if int(r["op"]) == birsim._birsim.opcodes["DMABlock"][0]]
        assert len(ranges) == 1
        (off, count), = ranges
        assert list(T["ipool"][off:off + count]) == blocks     # every block of the queue
        sizes[n] = len(T["ipool"])
    assert sizes[4000] < 2.2 * sizes[2000]                      # linear, not quadratic
