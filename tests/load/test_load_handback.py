"""The opcodes the C walker hands back (birsim/_load/fastload.py HANDBACK): loops,
DMATrigger, the queue instances, calls and kernels. The walker reads their generic keys
(name, engine, operands, sync, latency, the key checks); pass 1 places their blocks
(``passes._Loader._handed_back``) and pass 2 runs their handler alone. Tables, warnings
and errors (message and JSON path) must be those of the Python path, the specification.
"""

import copy
import random
import sys

import pytest

import birsim
import birsim._load.passes as L
from birsim._load import fastload as _fastload
from birsim._load.opcodes import OPS

from test_load_fastall import _DEL, _set
from test_load_fastload import ROOT, Counter, outcome, same

sys.path.insert(0, str(ROOT / "tests"))

import _examples  # noqa: E402

_EXAMPLES = dict(_examples.printed_examples())


def _copies(op, n, mutate=None, at=None):
    objs = []
    for k in range(n):
        obj = _examples.instruction(_EXAMPLES[op], "i%d" % k)
        if obj.get("blocks"):           # a loop body's block names are the function's
            obj["blocks"] = [dict(b, name="%s_%d" % (b["name"], k)) for b in obj["blocks"]]
        objs.append(obj)
    if mutate is not None:
        mutate(objs[at])
    return _examples.program(objs)


def _axis(key, **kv):
    def mutate(obj):
        for k, v in kv.items():
            if v is _DEL:
                obj[key].pop(k, None)
            else:
                obj[key][k] = v
    return mutate


_DYN = "DynamicForLoopAxis"

#: (opcode, mutation of instruction 2, where the error is below it, part of its message)
_BAD = [
    ("Loop", _set(LoopAxis=_DEL), "", "missing required key 'LoopAxis'"),
    ("Loop", _set(LoopAxis=[1]), "LoopAxis", "expected an object"),
    ("Loop", _axis("LoopAxis", name=""), "LoopAxis.name", ""),
    ("Loop", _axis("LoopAxis", ub=_DEL), "LoopAxis", "missing required key 'ub'"),
    ("Loop", _axis("LoopAxis", lb="0"), "LoopAxis.lb", "expected an integer"),
    ("Loop", _axis("LoopAxis", stride=0), "LoopAxis.stride", "must be > 0"),
    ("Loop", _set(isParallel="yes"), "isParallel", "expected a boolean"),
    ("Loop", _set(blocks=_DEL), "", "missing required key 'blocks'"),
    ("Loop", _set(blocks={"a": 1}), "blocks", "expected a list"),
    ("DynamicForLoop", _set(DynamicForLoopAxis=_DEL), "", "missing required key"),
    ("DynamicForLoop", _axis(_DYN, stride=0), _DYN + ".stride", "must be > 0"),
    ("DynamicForLoop", _axis(_DYN, ub=_DEL), _DYN, "missing required key 'ub'"),
    ("DynamicForLoop", _axis(_DYN, lb="x"), _DYN + ".lb", ""),
    ("DoWhile", _set(cond=_DEL), "", "missing required key 'cond'"),
    ("DoWhile", _set(cond={"kind": "Other", "regref": "r"}), "cond.kind",
     "IntRuntimeValueKind"),
    ("DoWhile", _set(cond={"regref": "nope"}), "cond.regref", "unknown register"),
    ("DMATrigger", _set(queue="nope"), "queue", "unknown DMA queue"),
    ("DMATrigger", _set(queue=_DEL), "", "missing required key 'queue'"),
    ("DMATrigger", _set(dma_blocks=["nope"]), "dma_blocks[0]", ""),
    ("DMATrigger", _set(dma_blocks=3), "dma_blocks", ""),
    ("Call", _set(target="nope"), "target", "unknown function"),
    ("Call", _set(target=_DEL, arguments={"a": "b"}), "arguments", "binds no arguments"),
    ("Call", _set(arguments={"nope": "src"}), "arguments.nope", ""),
    ("NKIKernel", _set(func=_DEL), "", "missing required key 'func'"),
    ("NKIKernel", _set(func="main"), "func", "unknown NKI function"),
    ("NKIKernel", _set(func_args=["src"]), "func_args", "tensor sets given"),
    ("CustomOp", _set(opFunctionName=_DEL), "", "missing required key 'opFunctionName'"),
    ("CustomOp", _set(opFunctionName=3), "opFunctionName", "expected a string"),
    ("CustomOp", _set(srcsShape=[[1], [2]]), "srcsShape", "has 2 shapes"),
    ("BIRKernel", _set(kernel_name=_DEL), "", "missing required key 'kernel_name'"),
    ("BIRKernel", _set(kernel_attrs=[1]), "kernel_attrs", "expected an object"),
    ("BIRKernel", _set(dsts_shape=[]), "dsts_shape", "has 0 shapes"),
    ("SwitchQueueInstance", _set(queue="nope"), "queue", "unknown DMA queue"),
    ("SwitchQueueInstance", _set(no_rearm=2), "no_rearm", "expected a boolean"),
    ("SwitchQueueInstance", _set(instance=["nope"]), "instance[0]", ""),
    ("ResetQueueInstance", _set(queue=_DEL), "", "missing required key 'queue'"),
    ("ResetQueueInstance", _set(instance=5), "instance", ""),
]


@pytest.mark.parametrize("op, mutate, key, message", _BAD,
                         ids=["%s-%s-%d" % (b[0], b[2] or "missing", k)
                              for k, b in enumerate(_BAD)])
def test_a_malformed_key_of_a_handed_back_opcode_gives_the_python_paths_error(
        op, mutate, key, message, monkeypatch):
    # instructions 0..1 and 3 are well formed (taken by the walker), 2 is not
    prog = _copies(op, 4, mutate, 2)
    out, _ = same(prog, monkeypatch)
    assert out[0] == "error"
    path = "functions[0].blocks[0].instructions[2]" + ("." + key if key else "")
    assert out[2].startswith(path)
    assert out[1].startswith(out[2] + ": ")
    assert message in out[1]
    assert out[1].endswith("(instruction 'i2' in function 'main')")


@pytest.mark.parametrize("op", _fastload.HANDBACK)
def test_each_handed_back_opcode_is_taken_by_the_walker_and_built_by_its_handler_alone(
        op, monkeypatch):
    prog = _copies(op, 3)
    assert same(prog, monkeypatch)[0][0] == "ok"
    built = []
    real = L._Loader._handed_back

    def handed_back(self, back, *rest):
        built.extend(self.cat.op_name[b[2]] for b in back)
        return real(self, back, *rest)
    monkeypatch.setattr(L._Loader, "_handed_back", handed_back)
    counter = Counter(monkeypatch)
    outcome(prog, True, monkeypatch)
    assert built.count(op) == 3
    assert counter.taken >= 3


def test_handed_back_errors_come_in_the_python_paths_order(monkeypatch):
    # pass 2: a handler's error (instruction 1) before a later operand's (instruction 3)
    objs = [_examples.instruction(_EXAMPLES[op], "i%d" % k)
            for k, op in enumerate(["TensorCopy", "Call", "TensorCopy", "TensorCopy"])]
    objs[1]["target"] = "nope"
    objs[3]["ins"][0]["memref"] = "nope"
    out, _ = same(_examples.program(objs), monkeypatch)
    assert out[0] == "error" and out[2] == "functions[0].blocks[0].instructions[1].target"
    # pass 1: a loop's missing axis (instruction 1) before a later nameless instruction
    objs = [_examples.instruction(_EXAMPLES[op], "i%d" % k)
            for k, op in enumerate(["TensorCopy", "Loop", "TensorCopy", "TensorCopy"])]
    del objs[1]["LoopAxis"]
    del objs[3]["name"]
    out, _ = same(_examples.program(objs), monkeypatch)
    assert out[0] == "error" and out[2] == "functions[0].blocks[0].instructions[1]"
    assert "LoopAxis" in out[1]


def _nest(depth, k=0):
    """A Loop whose body holds copies, a DMATrigger, a DoWhile and a loop of depth - 1."""
    body = [_examples.instruction(_EXAMPLES["TensorCopy"], "c%d_%d" % (depth, k)),
            _examples.instruction(_EXAMPLES["DMATrigger"], "t%d_%d" % (depth, k)),
            _examples.instruction(_EXAMPLES["DoWhile"], "w%d_%d" % (depth, k))]
    body[2]["blocks"] = [{"name": "wb%d_%d" % (depth, k), "instructions": [
        _examples.instruction(_EXAMPLES["TensorTensor"], "tt%d_%d" % (depth, k))]}]
    if depth > 0:
        body += [_nest(depth - 1, 2 * k), _nest(depth - 1, 2 * k + 1)]
    loop = _examples.instruction(_EXAMPLES["Loop"], "l%d_%d" % (depth, k))
    loop["LoopAxis"] = dict(loop["LoopAxis"], name="ax%d_%d" % (depth, k))
    loop["blocks"] = [{"name": "lb%d_%d" % (depth, k), "instructions": body},
                      {"name": "lc%d_%d" % (depth, k), "instructions": [
                          _examples.instruction(_EXAMPLES["Call"], "call%d_%d" % (depth, k))]}]
    return loop


@pytest.mark.parametrize("spelling", ["birsim", "compiler"])
def test_nested_loop_bodies_are_placed_as_on_the_python_path(spelling, monkeypatch):
    objs = [_examples.instruction(_EXAMPLES["DMATrigger"], "first"), _nest(3),
            _examples.instruction(_EXAMPLES["CustomOp"], "last")]
    prog = _examples.program(objs)
    if spelling == "compiler":
        for f in prog["functions"]:
            for a in f.get("allocations", ()):
                a.pop("Skind", None)
    out, _ = same(prog, monkeypatch)
    assert out[0] == "ok"
    counter = Counter(monkeypatch)
    outcome(prog, True, monkeypatch)
    # every instruction of every body is the walker's (the blocks are plain)
    assert counter.taken == _count(prog["functions"][0]["blocks"])


def _count(blocks):
    return sum(1 + _count(i.get("blocks") or []) for b in blocks for i in b["instructions"])


_VALUES = [None, True, False, 0, 1, 2, -1, 0.5, 1 << 63, "", "r", "q0", "blk0", "nope",
           "main", "callee", "nki_kern", "src", "dst", "my_kernel", [], {}, ["blk0"],
           ["src"], [[128, 64]], {"a": 1}, {"name": "i", "ub": 2}, {"regref": "r"},
           {"kind": "IntRuntimeValueKind", "regref": "r"},
           [{"name": "x", "instructions": []}]]


def test_random_values_of_handed_back_keys_load_the_same_way(monkeypatch):
    rng = random.Random(2402)
    outcomes = set()
    for n in range(len(_fastload.HANDBACK) * 12):
        op = _fastload.HANDBACK[n % len(_fastload.HANDBACK)]
        keys = sorted(OPS[op].read() | set(OPS[op].unmodelled) | {"engine"})
        prog = _copies(op, 3)
        body = prog["functions"][0]["blocks"][0]["instructions"]
        for obj in body[1:3]:
            for key in keys:
                if rng.random() < 0.3:
                    obj[key] = copy.deepcopy(rng.choice(_VALUES))
        outcomes.add(same(prog, monkeypatch)[0][0])
    assert outcomes == {"ok", "error"}


@pytest.mark.parametrize("op", _fastload.HANDBACK)
def test_the_generic_fields_of_a_handed_back_record_are_the_python_paths(op, monkeypatch):
    # the walker's values of each generic field (engine, operands, sync, latency), each
    # different from its neighbours' (nin != nout, nwait != nupd) and from the defaults
    objs = []
    for k in range(3):
        obj = _examples.instruction(_EXAMPLES[op], "i%d" % k)
        if obj.get("blocks"):
            obj["blocks"] = [dict(b, name="%s_%d" % (b["name"], k)) for b in obj["blocks"]]
        obj["engine"] = "Activation"
        obj["predicted_latency_ns"] = 5.0 + k
        obj["sync_info"] = {
            "on_wait": [{"type": "semaphore", "id": 3, "mode": "sem-ge-imm", "value": 1},
                        {"id": 4, "wait_value": 2}],
            "on_update": [{"type": "semaphore", "id": 5, "mode": "sem-add-imm", "value": 1}]}
        if op == "CustomOp":
            obj["ins"] = [_examples.B.whole(_examples._tensors()["src"]),
                          _examples.B.whole(_examples._tensors()["a"])]
            obj["srcsShape"] = [[128, 64], [128, 64]]
        objs.append(obj)
    prog = _examples.program(objs)
    out, _ = same(prog, monkeypatch)
    assert out[0] == "ok"
    monkeypatch.setattr(L, "FAST_PATH", True)
    t = birsim.load(prog).tables
    code = birsim.loader.default_catalog().op_code[op]
    mine = [r for r in t["insns"] if r["op"] == code and r["lat"] >= 5.0]
    assert len(mine) == 3
    for r in mine:
        assert (r["nwait"], r["nupd"]) == (2, 1)
        assert (r["nin"], r["nout"]) == ((2, 1) if op == "CustomOp" else (len(objs[0]["ins"]),
                                                                         len(objs[0]["outs"])))
