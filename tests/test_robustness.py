"""Bad input gets a clear error and loses nothing (house style G18.6, G18.7).

- Allocation fault injection: the n-th allocation of the C core fails, for every n up to
  the number a full load + run needs; each attempt must end in MemoryError (or succeed),
  never crash, and a later normal run must still work. Under the ASan CI pass this also
  checks the failure paths for leaks and invalid accesses.
- Crash-only fuzzing: randomly mutated example programs must either run or raise a
  birsim error (or the documented ValueError/TypeError for bad options) -- no other
  exception, no crash, no hang (a small max_steps bounds every run).
"""

import copy
import os
import json
import pathlib
import random
import warnings

import numpy as np
import pytest

import birsim
from birsim import _birsim

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"


def example(name):
    return json.loads((EXAMPLES / name).read_text())


def tiled_inputs():
    rng = np.random.default_rng(7)
    return {"x": rng.standard_normal((512, 128), dtype=np.float32),
            "w": rng.standard_normal((512, 512), dtype=np.float32),
            "bias": rng.standard_normal((128, 1), dtype=np.float32)}


def load_and_run(prog, inputs, **opts):
    module = birsim.load(prog)
    return birsim.Simulator(module, **opts).run(inputs)


def test_every_allocation_failure_is_a_clean_memory_error():
    prog, inputs = example("tiled_matmul.json"), tiled_inputs()
    want = load_and_run(prog, inputs)["out"]
    failures = 0
    try:
        for n in range(0, 400):
            _birsim._fail_alloc_after(n)
            try:
                out = load_and_run(prog, inputs)["out"]
            except MemoryError:
                failures += 1
                continue
            finally:
                _birsim._fail_alloc_after(-1)
            np.testing.assert_array_equal(out, want)     # enough allocations: it ran
            break
        else:
            pytest.fail("the run never completed within 400 allowed allocations")
    finally:
        _birsim._fail_alloc_after(-1)
    assert failures > 10          # the loop really exercised the failure paths
    np.testing.assert_array_equal(load_and_run(prog, inputs)["out"], want)


_VALUES = [None, -1, 0, 1, 2**31, -2**40, 3.5, "", "zz", [], [[1, 2]], {}, True,
           [[1, 128], [0, 4]], {"kind": "AffIVKind", "axis": "k"}]


def _mutate(obj, rng):
    """Change one randomly chosen value somewhere in the JSON tree."""
    paths = []

    def walk(o, path):
        if isinstance(o, dict):
            for k, v in o.items():
                paths.append((o, k))
                walk(v, path + [k])
        elif isinstance(o, list):
            for i, v in enumerate(o):
                paths.append((o, i))
                walk(v, path + [i])
    walk(obj, [])
    parent, key = rng.choice(paths)
    r = rng.random()
    if r < 0.15 and isinstance(parent, dict):
        del parent[key]
    elif r < 0.3 and isinstance(parent[key], int) and not isinstance(parent[key], bool):
        parent[key] = parent[key] + rng.choice([-1, 1, 7, -1000, 1 << 20])
    else:
        parent[key] = copy.deepcopy(rng.choice(_VALUES))


@pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES.glob("*.json")))
def test_mutated_programs_raise_birsim_errors_only(name):
    base = example(name)
    rng = random.Random(name)
    outcomes = {"ran": 0, "error": 0}
    for _ in range(int(os.environ.get("BIRSIM_FUZZ_ITERATIONS", "60"))):
        prog = copy.deepcopy(base)
        for _ in range(rng.randint(1, 3)):
            _mutate(prog, rng)
        try:
            module = birsim.load(prog)
            sim = birsim.Simulator(module, max_steps=20_000, kernel_sim=lambda n, i, c: i[:1])
            inputs = {t.name: np.ones(t.shape, t.numpy_dtype) for t in module.inputs}
            with warnings.catch_warnings():        # mutated programs warn; that is fine
                warnings.simplefilter("ignore", birsim.BirsimWarning)
                sim.run(inputs)
            outcomes["ran"] += 1
        except (birsim.BirsimError, MemoryError):
            outcomes["error"] += 1
    assert outcomes["error"] > 0          # the mutations were real
