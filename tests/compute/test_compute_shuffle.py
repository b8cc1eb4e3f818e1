"""StreamShuffle against the NumPy reference (birsim.reference.stream_shuffle, from
docs/spec/nki-isa-semantics.md §3.34), with the NKI vectors of §4 item 20 and mask 255."""

import numpy as np
import pytest

import birsim
from birsim import reference as ref

from bir import function, insn, module, tensor, whole

F = 8


def run(x, mask, dtype="float32", prefill=None, inplace=False):
    P = x.shape[0]
    allocs = [tensor("x", "ExternalInput", dtype, (P, F), "DRAM"),
              tensor("y", "ExternalInput" if prefill is not None else "ExternalOutput", dtype,
                     (P, F), "DRAM")]
    if prefill is not None:
        allocs.append(tensor("z", "ExternalOutput", dtype, (P, F), "DRAM"))
    src = "y" if inplace else "x"
    body = [insn("sh", "StreamShuffle", "DVE", ins=[whole(src, (P, F), dtype)],
                 outs=[whole("y", (P, F), dtype)], mask=list(mask))]
    if prefill is not None:
        body.append(insn("cp", "TensorCopy", "DVE", ins=[whole("y", (P, F), dtype)],
                         outs=[whole("z", (P, F), dtype)]))
    inputs = {"x": x}
    if prefill is not None:
        inputs["y"] = prefill
    out = birsim.Simulator(module([function("main", allocs, body)])).run(inputs)
    return out["z" if prefill is not None else "y"]


def data(P, seed, dtype="float32"):
    return ref.cast(np.random.default_rng(seed).uniform(-9, 9, (P, F)).astype(np.float32), dtype)


def test_nki_rotate_vector():
    x = data(128, 1)
    mask = [(i - 1) % 32 for i in range(32)]
    y = run(x, mask)
    for q in range(4):
        for i in range(32):
            np.testing.assert_array_equal(y[q * 32 + i], x[q * 32 + (i - 1) % 32])


def test_nki_broadcast_vector():
    x = data(32, 2)
    np.testing.assert_array_equal(run(x, [0] * 32), np.repeat(x[:1], 32, axis=0))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int8", "int64", "float8e5"])
@pytest.mark.parametrize("P", [32, 64, 128])
def test_mask_255_leaves_rows_and_bits_are_kept(dtype, P):
    rng = np.random.default_rng(P)
    mask = [int(m) for m in rng.integers(0, 32, 32)]
    mask[3] = mask[17] = 255
    x, old = data(P, 3, dtype), data(P, 4, dtype)
    y = run(x, mask, dtype, prefill=old)
    want = ref.stream_shuffle(x, mask, old)
    np.testing.assert_array_equal(np.asarray(y).view(np.uint8), want.view(np.uint8))


def test_in_place_reads_before_writing():
    x = data(64, 5)
    mask = [(i + 5) % 32 for i in range(32)]
    y = run(np.zeros_like(x), mask, prefill=x, inplace=True)
    np.testing.assert_array_equal(y, ref.stream_shuffle(x, mask, x))


def test_bad_masks():
    with pytest.raises(birsim.ProgramError, match="32 partition numbers"):
        run(data(32, 6), [0] * 31)
    with pytest.raises(birsim.ProgramError, match="32 partition numbers"):
        run(data(32, 6), [40] + [0] * 31)
    with pytest.raises(birsim.SimulationError, match="names partition 20 of 16"):
        run(data(16, 6), [20] + [0] * 31)
