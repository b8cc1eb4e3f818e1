"""No field ignored in silence (issue 9): documented keys of implemented opcodes are
modelled or rejected at load naming the key; near-miss spellings warn with a suggestion;
far-off unknown keys stay silent. The schema of birsim/_load/keys.py is checked against the
keys each loader handler really reads."""

import warnings

import numpy as np
import pytest

import birsim
from birsim._load import insns as _insns, keys as _keys

from _compute import In, Out, program, run1


def load(opcode, ins, outs, **keys):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        m = birsim.load(program(opcode, ins, outs, **keys))
    return m, [str(x.message) for x in w if issubclass(x.category, birsim.BirsimWarning)]


_n = [0]


def x44():
    _n[0] += 1
    return In("x%d" % _n[0], np.arange(16, dtype=np.float32).reshape(4, 4) - 5)


def test_misspelled_negate_warns_with_suggestion():
    _, w = load("TensorReduce", [x44()], [Out("y", (4, 1))], op="add", negat=True)
    assert any("unknown key 'negat'" in m and "did you mean 'negate'" in m for m in w)


def test_far_unknown_keys_stay_silent():
    _, w = load("TensorReduce", [x44()], [Out("y", (4, 1))], op="add",
                compiler_internal_id=7, tpb_hint="x")
    assert not any("unknown key" in m for m in w)


def test_negate_is_modelled():
    (y,) = run1("TensorReduce", [x44()], [Out("y", (4, 1))], op="add", negate=True)
    np.testing.assert_array_equal(y[:, 0], -(np.arange(16).reshape(4, 4) - 5).sum(1))


@pytest.mark.parametrize("opcode,ins,outs,keys,bad", [
    ("TensorReduce", 1, (4, 1), {"op": "add"}, {"reduce_op": "bitwise_or", "acc": "Accumulate"}),
    ("TensorTensor", 2, (4, 4), {"op": "add"}, {"reduce_op": "bitwise_and", "acc": "Accumulate"}),
    ("TensorScalar", 1, (4, 4), {"op0": "add"}, {"reduce_op": "is_equal", "acc": "Accumulate"}),
    ("Activation", 1, (4, 4), {"func": "Identity"}, {"reduce_op": "divide", "acc": "Accumulate"}),
    ("Matmult", 2, (4, 4), {}, {"perf_mode": "DoublePixel"}),
    ("Matmult", 2, (4, 4), {}, {"perf_mode": "DoubleColumn"}),
])
def test_unmodelled_values_are_rejected_naming_the_key(opcode, ins, outs, keys, bad):
    # reduce_op with an accumulator in use (an Idle one leaves it unused: any ALU op loads)
    key = next(iter(bad))
    with pytest.raises(birsim.ProgramError, match="%s key '%s'.*is not modelled" % (opcode, key)):
        load(opcode, [x44() for _ in range(ins)], [Out("y", outs)], **keys, **bad)
    load(opcode, [x44() for _ in range(ins)], [Out("y", outs)], **keys)   # the default is fine


def test_modelled_defaults_of_unmodelled_keys_are_accepted():
    load("Matmult", [x44(), x44()], [Out("y", (4, 4))], is_transpose=False, perf_mode="None",
         psum_zero_region=0, tile_size=[128, 128], tile_position=[0, 0])


def test_edit_distance():
    assert _keys.edit_distance("negat", "negate") == 1
    assert _keys.edit_distance("revesre0", "reverse0") == 1          # transposition
    assert _keys.suggestion("TensorScalar", "const_0") == "const0"
    assert _keys.suggestion("TensorReduce", "color") is None


class _Recording(dict):
    def __init__(self, d):
        super().__init__(d)
        self.seen = set()

    def get(self, k, default=None):
        self.seen.add(k)
        return super().get(k, default)

    def __getitem__(self, k):
        self.seen.add(k)
        return super().__getitem__(k)

    def __contains__(self, k):
        self.seen.add(k)
        return super().__contains__(k)


@pytest.mark.parametrize("shortcut", [False, True])
@pytest.mark.parametrize("op", sorted(_insns._HANDLERS))     # every handler has a row
def test_schema_lists_every_key_the_handler_reads(op, shortcut, monkeypatch):  # noqa: C901
    """Run the loader with the instruction object recording key reads; every read key
    must be in the opcode's schema (or common), so a new key cannot be forgotten. The
    handler alone, then with its shortcut (insns._BACK_FAST, a handed-back opcode's),
    whose reads are recorded too."""
    seen = set()
    real = _insns._HANDLERS[op]

    def spy(b, info, rec, obj, ctx):
        r = _Recording(obj)
        try:
            real(b, info, rec, r, ctx)
        finally:
            seen.update(r.seen)
    monkeypatch.setitem(_insns._HANDLERS, op, spy)
    monkeypatch.setattr(_insns, "BACK_FAST", shortcut)
    fast = _insns._BACK_FAST.get(op)
    if fast is not None:
        def fast_spy(b, info, rec, obj):
            r = _Recording(obj)
            try:
                return fast(b, info, rec, r)
            finally:
                seen.update(r.seen)
        monkeypatch.setitem(_insns._BACK_FAST, op, fast_spy)
    keys = {"TensorTensor": {"op": "add"}, "TensorScalar": {"op0": "add"},
            "TensorScalarPtr": {"op0": "add"}, "TensorReduce": {"op": "add"},
            "Activation": {"func": "Identity"}, "TensorScalarCache":
            {"mode": "Cumulative", "op0": "add", "op1": "add"},
            "MatchReplace": {"imm_value": 0.0}, "MaxIndexAndMatchReplace": {"imm_value": 0.0},
            "Iota": {"pattern": [[1, 4]]}, "Memset": {"constant": 0}}.get(op, {})
    try:
        with warnings.catch_warnings():         # readings warned by some handlers
            warnings.simplefilter("ignore", birsim.BirsimWarning)
            birsim.load(program(op, [x44(), x44()], [Out("y", (4, 4))], **keys))
        assert seen, "the handler of %s read no key" % op
    except birsim.ProgramError:
        pass                                   # operand checks may fail; the keys were read
    assert seen <= _keys.OPS[op].read() | _keys.COMMON, seen - _keys.OPS[op].read()
