"""Every opcode on the loader's C fast path (issue 24): the opcodes whose keys are read by
parameter rows (birsim/_load/opcodes.py) load through the C walker (csrc/py/fastload.c),
to the same tables, warnings and errors as the Python path (the specification).

The opcodes whose reading needs more than a row -- loops and DMA triggers (pass 1 places
their blocks), queue instances, calls and kernels (functions, strings, JSON attributes) --
are read by the walker but for their own keys and handed back: pass 1 places their
blocks, pass 2 runs their handler alone (tests/load/test_load_handback.py). DMABlock and
the terminators stay on the Python path. A row's integer list (GroupResetSemaphores' sema_group,
StreamShuffle's 32-entry mask, Iota's flattened [step, num] pattern) is placed in ipool
in pass 2 among the Python path's lists, so ipool is the same on both paths.
"""

import random
import sys
import warnings

import pytest

import birsim
import birsim._load.passes as L
from birsim._load import fastload as _fastload, insns as _insns
from birsim._load.opcodes import OPS
from birsim.errors import ProgramError

from test_load_fastload import ROOT, Counter, outcome, same

sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))

import _examples  # noqa: E402

#: What the walker leaves to the Python path (see the module's docstring): DMABlock
#: (only inside dma_queues, where the walker does not run) and the terminators.
PYTHON_ONLY = {"DMABlock", "CompareAndBranch", "UnconditionalBranch", "Return", "Exit",
               "Break"}
#: What the walker reads but for the keys its handler reads (fastload.HANDBACK).
HANDED_BACK = {"CustomOp", "BIRKernel", "NKIKernel", "Call", "SwitchQueueInstance",
               "ResetQueueInstance", "DMATrigger", "Loop", "DynamicForLoop", "DoWhile"}
#: The opcodes this change put on the fast path (they had handlers of their own).
NEWLY_FAST = ("MatmultSparse", "MatmultMx", "Pool", "TensorCopyDynamicSrc",
              "TensorCopyDynamicDst", "IndirectCopy", "IndirectLoad", "IndirectSave",
              "IndirectSaveAccumulate", "GenericIndirectLoad", "GenericIndirectSave",
              "Gather", "LocalGather", "TensorScalarPtr", "TensorScalarCache", "BNStats",
              "BNBackprop", "BNBackprop2", "CollectiveCompute", "CollectiveSend",
              "CollectiveRecv", "CopyPredicated", "Rand", "TensorScalarAffineSelect",
              "RangeSelect", "Dropout", "DMADescriptorCopy", "DMADescriptorCCE",
              "DMADescriptorTranspose", "DMADescriptorReplicate", "MatchReplace",
              "MaxIndexAndMatchReplace", "NonzeroWithCount", "Nonzero",
              "TongaReduceMacroSymbolic", "TopK", "Drain", "DevicePrint",
              "GetCurProcessingRankID", "GroupResetSemaphores")
#: The lists of other shapes (issue 24's second step): a mask of 32, a list of pairs.
LISTS_FAST = ("StreamShuffle", "Iota")
_EXAMPLES = dict(_examples.printed_examples())
_ONE_COPY = {"CompareAndBranch", "UnconditionalBranch", "Return", "Exit", "Break", "Loop",
             "DynamicForLoop", "DoWhile"}


def _copies(op, n, mutate=None, at=None):
    objs = [_examples.instruction(_EXAMPLES[op], "i%d" % k) for k in range(n)]
    if mutate is not None:
        mutate(objs[at])
    return _examples.program(objs)


class Declined:
    """The opcodes of the instructions the Python path builds (pass 2)."""

    def __init__(self, monkeypatch):
        self.ops = []
        real = _insns._Builder.build

        def build(b, info):
            if L.FAST_PATH and not info.back:   # BIRSIM_CHECK_FASTLOAD: once more without
                self.ops.append(info.op)
            return real(b, info)
        monkeypatch.setattr(_insns._Builder, "build", build)


def test_every_opcode_outside_the_python_only_set_is_on_the_fast_path():
    cat = birsim.loader.default_catalog()
    _, index = _fastload.fast_ops(cat)
    runnable = set(OPS)
    assert set(NEWLY_FAST) <= set(index)
    assert set(LISTS_FAST) <= set(index)
    assert runnable - set(index) == PYTHON_ONLY
    assert set(_fastload.HANDBACK) == HANDED_BACK


@pytest.mark.parametrize("op", sorted(_EXAMPLES))
def test_every_printed_example_loads_the_same_on_both_paths_and_the_walker_takes_it(
        op, monkeypatch):
    n = 1 if op in _ONE_COPY else 3
    prog = _copies(op, n)
    assert same(prog, monkeypatch)[0][0] == "ok"
    counter = Counter(monkeypatch)
    outcome(prog, True, monkeypatch)
    if op in PYTHON_ONLY:
        return
    # an opcode that warns (opcodes.OPS warns): the first goes to the Python path; the
    # program's other instructions (a DMATrigger for a queue's blocks) are taken too
    assert counter.taken == _in_functions(prog) - (OPS[op].warns is not None)


def _in_functions(prog):
    """The instructions of prog's functions (loop bodies included) the walker takes."""
    def count(blocks):
        return sum(count(i.get("blocks") or []) + (i.get("opcode") not in PYTHON_ONLY)
                   for b in blocks for i in b.get("instructions") or [])
    return sum(count(f["blocks"]) for key in ("functions", "nki_functions")
               for f in prog.get(key, ()))


@pytest.mark.parametrize("spelling", ["birsim", "compiler"])
def test_the_all_opcodes_bench_mix_loads_the_same_and_only_python_only_opcodes_decline(
        spelling, monkeypatch):
    import bench_load
    prog = bench_load.make_program(1500, spelling, "all")
    out, caught = same(prog, monkeypatch)
    assert out[0] == "ok"
    declined = Declined(monkeypatch)
    outcome(prog, True, monkeypatch)
    warned = {op for op in OPS if OPS[op].warns}
    assert set(declined.ops) <= PYTHON_ONLY | warned
    for op in warned:                   # the first of each, for its warning
        assert declined.ops.count(op) == 1
    assert len(declined.ops) < 0.03 * 1500    # DMABlock (in dma_queues) and the warned


# ---- malformed keys of the newly fast constructs: the Python path's error -----------

def _set(**kv):
    def mutate(obj):
        for k, v in kv.items():
            if v is _DEL:
                obj.pop(k, None)
            else:
                obj[k] = v
    return mutate


_DEL = object()

_BAD = [
    ("Pool", _set(func="Min"), "func", "unknown pool function"),
    ("Pool", _set(func=_DEL), "", "missing required key 'func' of Pool"),
    ("TensorCopyDynamicSrc", _set(scale=-1), "scale", "-1 is out of range: must be >= 0"),
    ("TensorCopyDynamicDst", _set(scale="2"), "scale", "expected an integer"),
    ("IndirectCopy", _set(oob_is_err=2), "oob_is_err", "expected a boolean"),
    ("LocalGather", _set(num_valid_indices=-3), "num_valid_indices", "out of range"),
    ("IndirectSaveAccumulate", _set(op="nope"), "op", "unknown ALU op"),
    ("GenericIndirectSave", _set(op=3), "op", "unknown ALU op"),
    ("TensorScalarPtr", _set(op0=_DEL), "", "missing required key 'op0' of TensorScalarPtr"),
    ("TensorScalarPtr", _set(acc="Accumulate", reduce_op="is_gt"), "reduce_op",
     "not modelled by birsim as an accumulator reduce op"),
    ("TensorScalarCache", _set(mode="Nope"), "mode", "unknown TensorScalarCache mode"),
    ("TensorScalarCache", _set(mode=_DEL), "",
     "missing required key 'mode' of TensorScalarCache"),
    ("TensorScalarCache", _set(acc="Nope"), "acc", "unknown accumulator command"),
    ("BNStats", _set(apply_transpose="yes"), "apply_transpose", "expected a boolean"),
    ("BNBackprop", _set(total_elements=0), "total_elements",
     "BNBackprop total_elements must be a finite count > 0, got 0"),
    ("BNBackprop2", _set(total_elements=float("inf")), "total_elements",
     "must be a finite count > 0"),
    ("BNBackprop2", _set(total_elements=_DEL), "",
     "missing required key 'total_elements' of BNBackprop2"),
    ("CollectiveCompute", _set(kind="Nope"), "kind", "unknown collective kind"),
    ("CollectiveCompute", _set(kind="Permute"), "",
     "CollectiveCompute kind Permute needs 'src_target_pairs'"),
    ("CollectiveSend", _set(peer_id=-1), "peer_id", "out of range"),
    ("CollectiveRecv", _set(peer_id=_DEL), "", "missing required key 'peer_id' of "
     "CollectiveRecv"),
    ("CopyPredicated", _set(reduce_op="bypass", acc="Accumulate"), "reduce_op",
     "cannot feed the accumulator"),
    ("CopyPredicated", _set(reduce_op="nope"), "reduce_op", "unknown ALU op"),
    ("Rand", _set(random_algorithm="Nope"), "random_algorithm", "unknown random algorithm"),
    ("Rand", _set(rand_num_steps=256), "rand_num_steps", "must be <= 255"),
    ("TensorScalarAffineSelect", _set(compare_op="nope"), "compare_op", "unknown comparison"),
    ("TensorScalarAffineSelect", _set(cmp_op="is_equal", fill_value="x"), "fill_value",
     "expected a number"),
    ("RangeSelect", _set(comp_op0="nope"), "comp_op0", "unknown comparison"),
    ("RangeSelect", _set(acc="LoadAccumulate"), "acc", "LoadAccumulate needs its start"),
    ("Dropout", _set(is_keep_threshold=2), "is_keep_threshold", "expected a boolean"),
    ("DMADescriptorCCE", _set(cce_op="nope"), "cce_op", "unknown ALU op"),
    ("DMADescriptorCopy", _set(transpose_op="nope"), "transpose_op", "unknown transpose op"),
    ("DMADescriptorTranspose", _set(oob_is_err="no"), "oob_is_err", "expected a boolean"),
    ("MatchReplace", _set(imm_value=_DEL), "",
     "missing required key 'imm_value' (or 'imm') of MatchReplace"),
    ("MaxIndexAndMatchReplace", _set(imm_value="x"), "imm_value", "expected a number"),
    ("Nonzero", _set(index_offset=1.5), "index_offset", "expected an integer"),
    ("NonzeroWithCount", _set(padding_val=True), "padding_val", "expected a number"),
    ("TongaReduceMacroSymbolic", _set(is_first_reduce=_DEL), "",
     "missing required key 'is_first_reduce' of TongaReduceMacroSymbolic"),
    ("TopK", _set(n=7), "n", "7 is out of range: must be >= 8"),
    ("MatmultMx", _set(accumulation_flag=4), "accumulation_flag", "must be <= 3"),
    ("MatmultSparse", _set(start_tensor_calc="yes"), "start_tensor_calc",
     "expected a boolean"),
    ("GroupResetSemaphores", _set(sema_group=[0, 256]), "sema_group[1]",
     "256 is out of range: must be <= 255"),
    ("GroupResetSemaphores", _set(sema_group=3), "sema_group", "expected a list"),
    ("StreamShuffle", _set(mask=list(range(31))), "mask",
     "StreamShuffle mask must be 32 partition numbers 0..31 or 255"),
    ("StreamShuffle", _set(mask=[32] + list(range(31))), "mask",
     "StreamShuffle mask must be 32 partition numbers 0..31 or 255"),
    ("StreamShuffle", _set(mask=[254] * 32), "mask", "must be 32 partition numbers"),
    ("StreamShuffle", _set(mask=[0] * 31 + [256]), "mask[31]", "must be <= 255"),
    ("StreamShuffle", _set(mask=[-1] + [0] * 31), "mask[0]", "must be >= 0"),
    ("StreamShuffle", _set(mask=[0.5] * 32), "mask[0]", "expected an integer"),
    ("StreamShuffle", _set(mask="0"), "mask", "expected a list"),
    ("StreamShuffle", _set(mask=_DEL), "",
     "missing required key 'mask' (or 'shuffle_mask') of StreamShuffle"),
    ("StreamShuffle", _set(mask=_DEL, shuffle_mask=[True] * 32), "mask[0]",
     "expected an integer"),
    ("Iota", _set(base="0"), "base", "expected an integer"),
    ("Iota", _set(base=1 << 63), "base", "does not fit in 64 bits"),
    ("Iota", _set(channel_multiplier=1.5), "channel_multiplier", "expected an integer"),
    ("Iota", _set(pattern=[[1, 0]]), "pattern[0]", "expected a [step, num] pair with num >= 1"),
    ("Iota", _set(pattern=[[1, 2], [3]]), "pattern[1]", "expected a [step, num] pair"),
    ("Iota", _set(pattern=[[1, 2, 3]]), "pattern[0]", "expected a [step, num] pair"),
    ("Iota", _set(pattern=[[1, "2"]]), "pattern[0][1]", "expected an integer"),
    ("Iota", _set(pattern=[1, 2]), "pattern[0]", "expected a list"),
    ("Iota", _set(pattern={"a": 1}), "pattern", "expected a list"),
]


@pytest.mark.parametrize("op, mutate, key, message", _BAD,
                         ids=["%s-%s-%d" % (b[0], b[2] or "missing", k)
                              for k, b in enumerate(_BAD)])
def test_a_malformed_key_gives_the_python_paths_error_with_its_place(op, mutate, key,
                                                                      message, monkeypatch):
    # instructions 0..1 are taken by the walker, instruction 2 is malformed
    prog = _copies(op, 4, mutate, 2)
    out, _ = same(prog, monkeypatch)
    assert out[0] == "error"
    path = "functions[0].blocks[0].instructions[2]" + ("." + key if key else "")
    assert out[2] == path
    assert out[1].startswith(path + ": ")
    assert message in out[1]
    assert out[1].endswith("(instruction 'i2' in function 'main')")
    monkeypatch.setattr(L, "FAST_PATH", True)
    with pytest.raises(ProgramError) as err:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            birsim.load(prog)
    assert (err.value.path, err.value.function, err.value.instruction) == (path, "main", "i2")


# ---- random values of the newly fast rows load the same way -------------------------

_VALUES = [None, True, False, 0, 1, 2, 3, 7, 8, 255, 256, -1, 0.5, 2.0, -0.0, 1e300,
           float("inf"), float("nan"), 1 << 63, "add", "max", "bypass", "is_gt", "greater",
           "LessThanEq", "Max", "avg", "Avg", "nope", "", [], {}, [1], "Idle", "Zero",
           "Accumulate", "ZeroAccumulate", "LoadAccumulate", "reset_reduce", "maximum",
           "AllReduce", "Permute", "AllGather", "LFSR", "Raw", "Reduce", "Copy", "XYZW",
           "None"]


def test_random_values_of_the_newly_fast_rows_load_the_same_way(monkeypatch):
    rng = random.Random(24)
    outcomes = set()
    for n in range(len(NEWLY_FAST) * 8):
        op = NEWLY_FAST[n % len(NEWLY_FAST)]
        row = OPS[op]
        keys = sorted(row.read() | set(row.unmodelled))
        objs = [_examples.instruction(_EXAMPLES[op], "i%d" % k) for k in range(4)]
        for obj in objs[1:]:
            for key in keys:
                if rng.random() < 0.3:
                    obj[key] = rng.choice(_VALUES)
        outcomes.add(same(_examples.program(objs), monkeypatch)[0][0])
    assert outcomes == {"ok", "error"}


def test_the_walkers_integer_lists_take_their_place_in_ipool_among_the_python_paths(
        monkeypatch):
    # GroupResetSemaphores' sema_group (a row: taken by the walker in pass 1) between
    # lists the Python path makes in pass 2: ipool comes out the same, in instruction order
    def reset(name, group):
        obj = _examples.instruction(_EXAMPLES["GroupResetSemaphores"], name)
        if group is None:
            del obj["sema_group"]
        else:
            obj["sema_group"] = group
        return obj
    shuffle = _examples.instruction(_EXAMPLES["StreamShuffle"], "s")
    iota = _examples.instruction(_EXAMPLES["Iota"], "t")
    # integral floats (as_int takes them): the walker declines both, the Python path
    # makes their lists
    shuffle["mask"] = [float(m) for m in shuffle["mask"]]
    iota["base"] = 0.0
    objs = [reset("r0", [1, 2]), shuffle, reset("r1", [3]), iota, reset("r2", None),
            reset("r3", [4, 5, 6]), reset("r4", [])]
    prog = _examples.program(objs)
    out, caught = same(prog, monkeypatch)
    assert out[0] == "ok"
    assert any("without sema_group" in w for w in caught)
    counter = Counter(monkeypatch)
    outcome(prog, True, monkeypatch)
    assert counter.taken == 4                   # all but r2 (it warns), s and t
    monkeypatch.setattr(L, "FAST_PATH", True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")         # r2's, compared above
        t = birsim.load(prog).tables
    lists = [list(t["ipool"][r["list"]:r["list"] + r["nlist"]]) for r in t["insns"][:7]]
    assert lists[0] == [1, 2] and lists[2] == [3] and lists[5] == [4, 5, 6]
    assert lists[1] == list(range(31, -1, -1)) and lists[4] == lists[6] == []


# ---- lists of other shapes: StreamShuffle's mask, Iota's pattern --------------------

def _with(op, **kv):
    obj = _examples.instruction(_EXAMPLES[op], "x")
    for k, v in kv.items():
        if v is _DEL:
            obj.pop(k, None)
        else:
            obj[k] = v
    return obj


@pytest.mark.parametrize("op, keys, taken", [
    ("StreamShuffle", {"mask": _DEL, "shuffle_mask": list(range(32))}, True),
    ("StreamShuffle", {"mask": [255] * 16 + list(range(16))}, True),
    ("StreamShuffle", {"mask": list(range(32)), "shuffle_mask": [0] * 32}, True),
    ("StreamShuffle", {"mask": None, "shuffle_mask": [31] * 32}, True),
    ("StreamShuffle", {"mask": [2.0] * 32}, False),         # as_int takes it: declined
    ("Iota", {"base": -5, "channel_multiplier": -(1 << 63),
              "pattern": [[1, 4], [-(1 << 63), (1 << 63) - 1], [0, 1]]}, True),
    ("Iota", {"base": _DEL, "channel_multiplier": _DEL}, True),
    ("Iota", {"base": None, "channel_multiplier": None}, True),
    ("Iota", {"pattern": []}, True),
    ("Iota", {"pattern": _DEL}, False),                     # absent list: declined
    ("Iota", {"base": {"terms": [], "c": 3}}, False),       # an expression: declined
    ("Iota", {"base": 3.0}, False),
])
def test_masks_and_patterns_load_the_same_on_both_paths(op, keys, taken, monkeypatch):
    # each form around a list the Python path makes (a StreamShuffle it declines: an
    # integral float), so ipool's order is checked too
    other = _with("StreamShuffle", mask=[7.0] * 32)
    objs = [_with(op, **keys), other, _with(op, **keys), _with(op, **keys)]
    for k, obj in enumerate(objs):
        obj["name"] = "i%d" % k
    prog = _examples.program(objs)
    out, _ = same(prog, monkeypatch)
    assert out[0] == "ok"
    counter = Counter(monkeypatch)
    outcome(prog, True, monkeypatch)
    assert counter.taken == (3 if taken else 0)


def test_the_walkers_pattern_is_flattened_into_ipool(monkeypatch):
    pattern = [[1, 4], [-7, 2], [1 << 40, 1]]
    objs = [_with("Iota", pattern=pattern), _with("Iota", pattern=pattern)]
    objs[1]["name"] = "y"
    prog = _examples.program(objs)
    assert same(prog, monkeypatch)[0][0] == "ok"
    monkeypatch.setattr(L, "FAST_PATH", True)
    counter = Counter(monkeypatch)
    t = birsim.load(prog).tables
    assert counter.taken == 2
    flat = [x for pair in pattern for x in pair]
    for r in t["insns"][:2]:
        assert list(t["ipool"][r["list"]:r["list"] + r["nlist"]]) == flat


_LIST_VALUES = [None, 0, 1, 31, 32, 254, 255, 256, -1, 1 << 63, 0.5, 2.0, True, "1", [],
                [1], [1, 0], [1, 1], [2, 3, 4], [[1, 1]], {}]


def test_random_masks_and_patterns_load_the_same_way(monkeypatch):
    rng = random.Random(2424)
    outcomes = set()
    for n in range(160):
        op = LISTS_FAST[n % 2]
        objs = [_examples.instruction(_EXAMPLES[op], "i%d" % k) for k in range(3)]
        for obj in objs[1:]:
            if op == "StreamShuffle":
                key = rng.choice(["mask", "shuffle_mask"])
                mask = [rng.choice([0, 5, 31, 255]) for _ in range(32)]
                if rng.random() < 0.5:
                    at = rng.randrange(33)
                    mask[at:at + 1] = [rng.choice(_LIST_VALUES)] * rng.randrange(3)
                obj[key] = mask if rng.random() < 0.9 else rng.choice(_LIST_VALUES)
            else:
                pattern = [[rng.randrange(-3, 4), rng.randrange(1, 4)]
                           for _ in range(rng.randrange(4))]
                if pattern and rng.random() < 0.5:
                    pattern[rng.randrange(len(pattern))] = rng.choice(_LIST_VALUES)
                obj["pattern"] = pattern
                for key in ("base", "channel_multiplier"):
                    if rng.random() < 0.3:
                        obj[key] = rng.choice(_LIST_VALUES)
        outcomes.add(same(_examples.program(objs), monkeypatch)[0][0])
    assert outcomes == {"ok", "error"}
