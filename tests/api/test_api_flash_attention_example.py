"""The flash-attention forward of examples/flash_attention.py (the program of
bench/bench_flash.py) at small sizes: it matches a float64 softmax attention, and NumPy
running the same tiling, for fp32 and bf16 matmul inputs, on 1 and 2 threads."""

import os
import sys

import numpy as np
import pytest

import birsim
from birsim import reference as ref

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "examples"))
import flash_attention as fa  # noqa: E402


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("S,d", [(512, 32), (1024, 64)])
def test_flash_attention_matches_numpy(dtype, S, d):
    q, k, v = fa.inputs(S, d, seed=S + d)
    q = q * 2                      # sharper softmax rows: the running max moves
    prog = fa.build(S, d, dtype)
    out = {}
    for threads in (1, 2):
        sim = birsim.Simulator(prog, threads=threads)
        out[threads] = np.asarray(sim.run(fa.to_inputs(q, k, v, dtype))["o"]).copy()
    assert out[1].tobytes() == out[2].tobytes()
    o = fa.from_output(out[1], S, d)
    qw, kw, vw = (ref.decode(ref.cast(a, dtype)).astype(np.float32) for a in (q, k, v))
    want = fa.attention(qw, kw, vw)
    scale = np.max(np.abs(want))
    assert np.max(np.abs(o - want)) <= fa.TOLERANCE[dtype] * scale
    if dtype == "float32":        # same tiling, same fp32 steps: only the sum orders differ
        np.testing.assert_allclose(o, fa.numpy_tiled(qw, kw, vw), rtol=0, atol=1e-5 * scale)


def test_flash_attention_example_main(capsys):
    assert fa.main(["--seq", "512", "--dim", "16"]) == 0
    assert "MATCH" in capsys.readouterr().out
