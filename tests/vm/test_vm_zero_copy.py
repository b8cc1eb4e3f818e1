"""Zero-copy runs, ``Simulator``'s default (``zero_copy=True``): inputs the program can
never write are read in place from the caller's arrays, whole own output buffers every
byte of which was written are handed over as the result arrays (vm/zerocopy.c;
docs/python-api.md, "Zero-copy runs").

Every test compares with the copying mode (``zero_copy=False``) or with NumPy, and checks
the caller's input arrays byte for byte after the run: a writer the static scan missed
would change them. Tests also assert which inputs were lent and which outputs handed over,
so a disabled path fails them too.
"""

import gc
import os
import resource
import sys
import warnings
import weakref

import numpy as np
import pytest

import birsim
from bir import (ap, block, dma_block, dma_queue, function, imm, insn, module, reg, register,
                 tensor, whole)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "sync"))
from test_sync_examples import CASES, prepared  # noqa: E402

LENT = "read in place"
HANDED = "handed over"


def _run(sim, inputs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", birsim.BirsimWarning)
        return sim.run(inputs)


def _same(a, b):
    assert a.keys() == b.keys()
    for k in a:
        assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape, k
        assert np.array_equal(np.ascontiguousarray(a[k]).view(np.uint8),
                              np.ascontiguousarray(b[k]).view(np.uint8)), k


def _snapshot(inputs):
    return {k: np.array(v, copy=True) for k, v in inputs.items()}


def _untouched(inputs, before):
    for k, v in before.items():
        assert np.array_equal(np.asarray(inputs[k]).view(np.uint8), v.view(np.uint8)), \
            f"input '{k}' was modified in the caller's array"


def _state(sim, name, core=0):
    """"lent", "handed" or None (the simulator holds it) for tensor `name` after a run."""
    try:
        sim.read(name, core)
    except birsim.SimulationError as e:
        if LENT in str(e):
            return "lent"
        if HANDED in str(e):
            return "handed"
        raise
    return None


def _modules_of(module):
    return module if isinstance(module, list) else [module]


# ---- every shipped example and bench program ------------------------------------------

@pytest.mark.parametrize("kind,name", CASES, ids=[f"{k}-{n}" for k, n in CASES])
def test_examples_bit_identical_and_inputs_untouched(kind, name):
    import rmsnorm_kernel  # noqa: F401  (serves the rmsnorm custom op, as the sync tests do)
    module, inputs, cores = prepared(kind, name)
    before = _snapshot(inputs)
    ref = _run(birsim.Simulator(module, cores=cores, zero_copy=False), inputs)
    sim = birsim.Simulator(module, cores=cores, zero_copy=True)
    first = _run(sim, inputs)
    _same(first, ref)
    _untouched(inputs, before)
    keep = {k: v.copy() for k, v in first.items()}
    second = _run(sim, inputs)                  # fresh buffers after a hand-over
    _same(second, ref)
    _same(first, keep)                          # the first run's arrays are unchanged
    _untouched(inputs, before)
    for k in first:
        assert not np.shares_memory(first[k], second[k])
    checked = _run(birsim.Simulator(module, cores=cores, zero_copy=True, checks="all"), inputs)
    _same(checked, ref)
    _untouched(inputs, before)


def test_public_kernels_lend_every_input_and_hand_over_the_output():
    """The kernels the zero-copy rows of bench_public_kernels.py time: every input read in
    place, the output handed over (fails if either path is off)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))), "examples"))
    import public_kernels as pk
    for name in ("layernorm", "rmsnorm", "softmax"):
        build, make, ref_fn, _, out, shape, _, tol = pk.KERNELS[name]
        shape = dict(shape, N=256)
        if "D" in shape:
            shape["D"] = min(shape["D"], 1024)
        data = make(**shape)
        before = _snapshot(data)
        prog = build(**shape)
        want = birsim.Simulator(prog, zero_copy=False).run(data)
        sim = birsim.Simulator(prog, zero_copy=True)
        got = sim.run(data)
        _same(got, want)
        _untouched(data, before)
        assert pk.rel_error(got[out], ref_fn(**data)) <= tol
        assert {k: _state(sim, k) for k in data} == {k: "lent" for k in data}
        assert _state(sim, out) == "handed"
        assert got[out].flags.writeable and got[out].flags.c_contiguous


# ---- random programs -------------------------------------------------------------------

P, F = 8, 1500
NAMES_IN = ("x", "y")


def _region(rng):
    if rng.random() < 0.3:
        return 0, P, 0, F, 1
    p0 = int(rng.integers(0, P))
    npart = int(rng.integers(1, P - p0 + 1))
    step = int(rng.choice([1, 2, 3]))
    nf = int(rng.integers(1, F // step + 1))
    f0 = int(rng.integers(0, F - (nf - 1) * step))
    return p0, npart, f0, nf, step


def _ap(name, r, npart, nf):
    p0, _, f0, _, step = r
    return ap(name, [[F, npart], [step, nf]], offset=p0 * F + f0)


def _random_program(seed):
    """TensorCopy / TensorTensor over random regions of inputs x, y, an Internal t and
    outputs o1, o2; some programs write their inputs (in place). Returns the module and
    the inputs the program writes."""
    rng = np.random.default_rng(seed)
    writes_inputs = rng.random() < 0.5
    dsts = ["t", "o1", "o2"] + (["x", "y"] if writes_inputs else [])
    insns, written = [], set()
    for i in range(int(rng.integers(2, 12))):
        a, b = _region(rng), _region(rng)
        npart, nf = min(a[1], b[1]), min(a[3], b[3])
        dst = str(rng.choice(dsts))
        src = str(rng.choice(["x", "y", "t", "o1"]))
        written.add(dst)
        outs = [_ap(dst, b, npart, nf)]
        if rng.random() < 0.5:
            insns.append(insn(f"c{i}", "TensorCopy", "DVE", ins=[_ap(src, a, npart, nf)],
                              outs=outs))
        else:
            c = _region(rng)
            c = (min(c[0], P - npart), npart, c[2], nf, 1) if c[2] + nf <= F else \
                (min(c[0], P - npart), npart, 0, nf, 1)
            insns.append(insn(f"c{i}", "TensorTensor", "DVE",
                              ins=[_ap(src, a, npart, nf), _ap("x", c, npart, nf)],
                              outs=outs, op="add"))
    mod = module([function("main", [
        tensor("x", "ExternalInput", "float32", [P, F], "DRAM"),
        tensor("y", "ExternalInput", "float32", [P, F], "DRAM"),
        tensor("t", "Internal", "float32", [P, F], "DRAM"),
        tensor("o1", "ExternalOutput", "float32", [P, F], "DRAM"),
        tensor("o2", "ExternalOutput", "float32", [P, F], "DRAM")],
        [block("b0", *insns)])])
    return mod, {n for n in NAMES_IN if n in written}


@pytest.mark.parametrize("seed", range(40))
def test_random_programs(seed):
    prog, writes = _random_program(seed)
    rng = np.random.default_rng(1000 + seed)
    inputs = {n: rng.standard_normal((P, F), dtype=np.float32) for n in NAMES_IN}
    before = _snapshot(inputs)
    opts = [{}, dict(uninitialized="nan"), dict(checks="all"),
            dict(timing=True, trace=True)][seed % 4]
    for i in range(2):                          # a second run on the same Simulators
        sim = birsim.Simulator(prog, zero_copy=True, **opts) if i == 0 else sim
        ref_sim = birsim.Simulator(prog, zero_copy=False, **opts) if i == 0 else ref_sim
        ref = _run(ref_sim, inputs)
        got = _run(sim, inputs)
        _same(got, ref)
        _untouched(inputs, before)
        assert sim.warnings == ref_sim.warnings and sim.stats == ref_sim.stats
        if "timing" in opts:
            assert sim.profile.total_ns == ref_sim.profile.total_ns
            assert len(sim.trace) == len(ref_sim.trace)
        for n in NAMES_IN:          # written inputs copied, the others read in place
            assert _state(sim, n) == (None if n in writes else "lent"), n
        for o in ("o1", "o2"):      # handed over when wholly written, else copied
            whole_ = bool(ref_sim.written(o).all())
            assert _state(sim, o) == ("handed" if whole_ else None), o
            np.testing.assert_array_equal(sim.written(o), ref_sim.written(o))


# ---- programs that write their inputs: copied ------------------------------------------

def _call_writes_parameter():
    """main: Call f(p=a, q=b), then o := a. f writes its parameter p (the caller's a)."""
    callee = function("f", [tensor("p", "Internal", "float32", [4, 8], "DRAM"),
                            tensor("q", "Internal", "float32", [4, 8], "DRAM")],
                      [insn("w", "TensorScalar", "DVE", ins=[whole("q", [4, 8])],
                            outs=[whole("p", [4, 8])], op0="mult", const0=3.0)])
    return module([
        function("main", [tensor("a", "ExternalInput", "float32", [4, 8], "DRAM"),
                          tensor("b", "ExternalInput", "float32", [4, 8], "DRAM"),
                          tensor("o", "ExternalOutput", "float32", [4, 8], "DRAM")],
                 [block("b0", insn("c", "Call", "Unassigned", target="f",
                                   arguments={"p": "a", "q": "b"})),
                  block("b1", insn("cp", "TensorCopy", "DVE", ins=[whole("a", [4, 8])],
                                   outs=[whole("o", [4, 8])]))]),
        callee])


def _dma_queue_writes_input():
    """A DMA block's descriptor writes x[0, 0:4] := init; then y := x."""
    q = dma_queue("q0", [dma_block(
        "blk", insn("d", "DMADescriptorCopy", "DMA", ins=[ap("init", [[4, 1], [1, 4]])],
                    outs=[ap("x", [[16, 1], [1, 4]])]),
        sync={"on_update": [{"id": 5, "update_value": 16}]})])
    return module([function("main", [
        tensor("x", "ExternalInput", "int32", [1, 16], "DRAM"),
        tensor("init", "ExternalInput", "int32", [1, 4], "DRAM"),
        tensor("y", "ExternalOutput", "int32", [1, 16], "DRAM"), register("r")], [block(
            "b0", insn("trig", "DMATrigger", "SP", queue="q0", dma_blocks=["blk"]),
            insn("c2", "DMACopy", "Activation", ins=[ap("x", [[16, 1], [1, 16]])],
                 outs=[ap("y", [[16, 1], [1, 16]])],
                 sync_info={"on_wait": [{"from": "blk", "id": 5, "wait_value": 16}],
                            "on_update": [{"id": 5, "mode": "sem-sub-imm", "value": 16}]}))])],
        dma_queues=[q])


def _must_alias():
    """kv.must_alias_input / kv, one buffer: rows 3..4 := new."""
    tile = [[16, 2], [1, 16]]
    return module([function("main", [
        tensor("kv.must_alias_input", "ExternalInput", "float32", [8, 16], "DRAM"),
        tensor("new", "ExternalInput", "float32", [2, 16], "DRAM"),
        tensor("t", "Internal", "float32", [2, 16], "SB"),
        tensor("kv", "ExternalOutput", "float32", [8, 16], "DRAM")], [block(
            "b0", insn("ld", "TensorCopy", "DVE", ins=[ap("new", tile)], outs=[ap("t", tile)]),
            insn("st", "TensorCopy", "DVE", ins=[ap("t", tile)],
                 outs=[ap("kv", tile, offset=3 * 16)]))])])


def test_call_writing_a_parameter_copies_the_input():
    rng = np.random.default_rng(0)
    inputs = {"a": rng.standard_normal((4, 8), dtype=np.float32),
              "b": rng.standard_normal((4, 8), dtype=np.float32)}
    before = _snapshot(inputs)
    sim = birsim.Simulator(_call_writes_parameter(), zero_copy=True)
    out = _run(sim, inputs)
    np.testing.assert_array_equal(out["o"], inputs["b"] * np.float32(3))
    _untouched(inputs, before)
    assert _state(sim, "a") is None and _state(sim, "b") is None


def test_dma_queue_writing_an_input_copies_it():
    inputs = {"x": np.arange(16, dtype=np.int32).reshape(1, 16),
              "init": np.full((1, 4), -1, np.int32)}
    before = _snapshot(inputs)
    sim = birsim.Simulator(_dma_queue_writes_input(), zero_copy=True)
    out = _run(sim, inputs)
    want = inputs["x"].copy()
    want[0, :4] = -1
    np.testing.assert_array_equal(out["y"], want)
    _untouched(inputs, before)
    assert _state(sim, "x") is None
    assert _state(sim, "y") == "handed"


def test_must_alias_pair_is_copied_both_ways():
    rng = np.random.default_rng(2)
    inputs = {"kv.must_alias_input": rng.standard_normal((8, 16), dtype=np.float32),
              "new": rng.standard_normal((2, 16), dtype=np.float32)}
    before = _snapshot(inputs)
    ref = _run(birsim.Simulator(_must_alias(), zero_copy=False), inputs)
    sim = birsim.Simulator(_must_alias(), zero_copy=True)
    out = _run(sim, inputs)
    _same(out, ref)
    want = inputs["kv.must_alias_input"].copy()
    want[3:5] = inputs["new"]
    np.testing.assert_array_equal(out["kv"], want)
    _untouched(inputs, before)
    assert _state(sim, "kv.must_alias_input") is None       # written through kv: copied
    assert _state(sim, "kv") is None                        # its input's buffer: copied out
    assert _state(sim, "new") == "lent"


def _copy_prog(dtype="float32", shape=(16, 32)):
    return module([function("main", [
        tensor("x", "ExternalInput", dtype, list(shape), "DRAM"),
        tensor("o", "ExternalOutput", dtype, list(shape), "DRAM")], [block(
            "b0", insn("cp", "TensorCopy", "DVE", ins=[whole("x", list(shape), dtype)],
                       outs=[whole("o", list(shape), dtype)]))])])


def _at_offset(a, off):
    """A copy of C-contiguous `a` whose data starts `off` bytes past a 64-byte boundary."""
    buf = np.zeros(a.nbytes + 128, np.uint8)
    start = -buf.ctypes.data % 64 + off
    out = buf[start:start + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


@pytest.mark.parametrize("how", ["cast", "strided", "fortran", "unaligned", "offset4",
                                 "list"])
def test_inputs_that_need_a_copy_are_copied(how):
    rng = np.random.default_rng(3)
    base = rng.standard_normal((16, 64), dtype=np.float32)
    x = {"cast": base[:, :32].astype(np.float64), "strided": base[:, ::2],
         "fortran": np.asfortranarray(base[:, :32]),
         "unaligned": np.frombuffer(b"\0" + base[:, :32].tobytes(), np.float32,
                                    offset=1).reshape(16, 32),
         "offset4": _at_offset(base[:, :32], 4),
         "list": base[:, :32].tolist()}[how]
    if how == "offset4":            # aligned for float32, not to 16 bytes
        assert x.flags.aligned and x.ctypes.data % 16 == 4
    sim = birsim.Simulator(_copy_prog(), zero_copy=True)
    out = _run(sim, {"x": x})
    np.testing.assert_array_equal(out["o"], np.asarray(x, np.float32))
    assert _state(sim, "x") is None             # (a list: float64 values, cast)
    np.testing.assert_array_equal(sim.read("x"), np.asarray(x, np.float32))


def test_one_program_per_core_copies():
    """A module list (one program per core): its inputs and outputs are one tensor for all
    cores, placed in the all-cores DRAM arena -- copied both ways."""
    x = np.arange(512, dtype=np.float32).reshape(16, 32)
    mods = [birsim.load(_copy_prog()), birsim.load(_copy_prog())]
    ref = _run(birsim.Simulator(mods, zero_copy=False), {"x": x})
    sim = birsim.Simulator(mods, zero_copy=True)
    out = _run(sim, {"x": x})
    _same(out, ref)
    np.testing.assert_array_equal(out["o"], x)
    assert _state(sim, "x") is None and _state(sim, "o") is None


# ---- ownership, repeated runs, errors --------------------------------------------------

def test_handed_over_outputs_outlive_the_simulator():
    x = np.arange(16 * 32, dtype=np.float32).reshape(16, 32)
    sim = birsim.Simulator(_copy_prog(), zero_copy=True)
    ref = weakref.ref(sim)
    first = sim.run({"x": x})["o"]
    second = sim.run({"x": x * 2})["o"]
    assert not np.shares_memory(first, second)
    np.testing.assert_array_equal(first, x)
    np.testing.assert_array_equal(second, x * 2)
    del sim
    gc.collect()
    assert ref() is None                    # the arrays do not keep the Simulator alive
    first += 1                              # writable, owned memory
    np.testing.assert_array_equal(first, x + 1)
    np.testing.assert_array_equal(second, x * 2)


def _rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc")
def test_repeated_runs_do_not_leak():
    shape = (128, 2048)                     # 1 MiB output (+ its shadow) a run
    sim = birsim.Simulator(_copy_prog(shape=shape), zero_copy=True)
    x = np.ones(shape, np.float32)
    for _ in range(20):
        sim.run({"x": x})
    gc.collect()
    start = _rss()
    for _ in range(300):                    # 600 MiB if buffers leaked
        out = sim.run({"x": x})["o"]
        assert out[0, 0] == 1
    del out
    gc.collect()
    assert _rss() - start < 64 << 20


def test_read_says_what_was_lent_or_handed_over_and_written_is_all_true():
    x = np.ones((16, 32), np.float32)
    sim = birsim.Simulator(_copy_prog(), zero_copy=True)
    sim.run({"x": x})
    for name, what in (("x", LENT), ("o", HANDED)):
        with pytest.raises(birsim.SimulationError, match=what + ".*zero_copy=False"):
            sim.read(name)
        w = sim.written(name)       # a lent input was given whole; only whole outputs go
        assert w.dtype == bool and w.shape == x.shape and w.all()
    sim.debug({"x": x})                     # a run that could pause: copies both ways
    np.testing.assert_array_equal(sim.read("x"), x)
    np.testing.assert_array_equal(sim.read("o"), x)


def test_runs_that_can_pause_copy():
    x = np.ones((16, 32), np.float32)
    sim = birsim.Simulator(_copy_prog(), zero_copy=True, on_instruction=lambda s, stop: False)
    out = sim.run({"x": x})
    np.testing.assert_array_equal(out["o"], x)
    assert _state(sim, "x") is None and _state(sim, "o") is None
    sim = birsim.Simulator(_copy_prog(), zero_copy=True)
    sim.start({"x": x})
    out = sim.resume()
    np.testing.assert_array_equal(out["o"], x)
    assert _state(sim, "x") is None and _state(sim, "o") is None


def test_zero_copy_is_the_default():
    x = np.ones((16, 32), np.float32)
    sim = birsim.Simulator(_copy_prog())
    assert sim.zero_copy is True
    out = sim.run({"x": x})["o"]
    assert _state(sim, "x") == "lent" and _state(sim, "o") == "handed"
    assert _handed_array(out)
    sim = birsim.Simulator(birsim.load(_copy_prog()), uninitialized="nan")  # general path
    assert sim.zero_copy is True
    sim.run({"x": x})
    assert _state(sim, "x") == "lent" and _state(sim, "o") == "handed"


@pytest.mark.parametrize("general", [False, True])
def test_zero_copy_false_copies_both_ways(general):
    x = np.ones((16, 32), np.float32)
    opts = dict(uninitialized="nan") if general else {}
    sim = birsim.Simulator(birsim.load(_copy_prog()), zero_copy=False, **opts)
    assert sim.zero_copy is False
    out = sim.run({"x": x})["o"]
    assert out.flags.owndata and not _handed_array(out)
    assert _state(sim, "x") is None and _state(sim, "o") is None
    x[:] = 5                                # the simulator kept its own copy
    np.testing.assert_array_equal(sim.read("x"), np.ones((16, 32), np.float32))
    np.testing.assert_array_equal(sim.read("o"), np.ones((16, 32), np.float32))


def test_a_partly_written_output_is_copied_and_written_tells_which():
    """Only a wholly written output is handed over: the rest stays with the simulator, so
    written() (birsim check's 0xFF fill) can say which elements were never written."""
    prog = module([function("main", [
        tensor("x", "ExternalInput", "float32", [16, 32], "DRAM"),
        tensor("o", "ExternalOutput", "float32", [16, 32], "DRAM")], [block(
            "b0", insn("cp", "DMACopy", "Pool", ins=[ap("x", [[32, 8], [1, 32]])],
                       outs=[ap("o", [[32, 8], [1, 32]])]))])])
    x = np.arange(16 * 32, dtype=np.float32).reshape(16, 32)
    sim = birsim.Simulator(prog)
    out = _run(sim, {"x": x})["o"]
    assert _state(sim, "x") == "lent" and _state(sim, "o") is None
    assert not _handed_array(out)
    w = sim.written("o")
    assert w[:8].all() and not w[8:].any()
    np.testing.assert_array_equal(out[:8], x[:8])
    np.testing.assert_array_equal(sim.read("o"), out)


def test_option_is_validated_and_reaches_run():
    with pytest.raises(ValueError, match="zero_copy"):
        birsim.Simulator(_copy_prog(), zero_copy="yes")
    x = np.ones((16, 32), np.float32)
    np.testing.assert_array_equal(birsim.run(_copy_prog(), {"x": x}, zero_copy=True)["o"], x)


@pytest.mark.parametrize("dtype", ["bfloat16", "int8", "float8_e4m3fn"])
def test_other_dtypes_round_trip(dtype):
    from birsim.dtypes import numpy_dtype
    dt = numpy_dtype(dtype)
    bits = np.uint8 if dt.itemsize == 1 else np.uint16
    x = (np.arange(16 * 32).reshape(16, 32) % 119 + 3).astype(bits).view(dt)   # no NaN
    sim = birsim.Simulator(_copy_prog(dtype), zero_copy=True)
    o = sim.run({"x": x})["o"]
    assert o.dtype == dt and o.shape == x.shape
    assert np.array_equal(o.view(np.uint8), x.view(np.uint8))
    assert _state(sim, "x") == "lent" and _state(sim, "o") == "handed"


def test_read_only_input_is_read_in_place():
    x = np.arange(16 * 32, dtype=np.float32).reshape(16, 32)
    x.flags.writeable = False
    sim = birsim.Simulator(_copy_prog(), zero_copy=True)
    np.testing.assert_array_equal(sim.run({"x": x})["o"], x)
    assert _state(sim, "x") == "lent"


def _out_of_bounds():
    """o[0:4, 4:12] := x: past o's end, an error mid-run."""
    return module([function("main", [
        tensor("x", "ExternalInput", "float32", [4, 8], "DRAM"),
        tensor("o", "ExternalOutput", "float32", [4, 8], "DRAM")], [block(
            "b0", insn("cp", "TensorCopy", "DVE", ins=[ap("x", [[8, 4], [1, 8]])],
                       outs=[ap("o", [[8, 4], [1, 8]], offset=4)]))])])


def test_the_lent_buffer_is_released_when_the_run_ends():
    """The binding holds a lent input's buffer export for the run (its reference to the
    array) and releases it when run() returns or raises."""
    x = np.arange(16 * 32, dtype=np.float32).reshape(16, 32)
    sim = birsim.Simulator(_copy_prog())
    before = sys.getrefcount(x)
    for _ in range(3):
        sim.run({"x": x})
        assert _state(sim, "x") == "lent"
        assert sys.getrefcount(x) == before
    bad = _out_of_bounds()
    y = np.ones((4, 8), np.float32)
    before = sys.getrefcount(y)
    with pytest.raises(birsim.BirsimError):
        birsim.Simulator(bad).run({"x": y})
    assert sys.getrefcount(y) == before


def _half_or_whole(P=1, F=8):
    """o[:, :F/2] := 7; then o[:, F/2:] := 9 only when the input flag f is not 0: o is
    written whole (handed over) or half (copied), as f says. Each half is set in an SBUF
    tile and moved out by a DMACopy of the same engine (in order: no semaphores needed).
    No instruction reads o. [128, 8192] int32 is 4 MiB: a mapped buffer, not a heap one."""
    def half(name, k, value):
        part = lambda t: ap(t, [[F, P], [1, F // 2]], "int32", offset=k)   # noqa: E731
        return [insn("set" + name, "Memset", "Pool", outs=[part("t")], constant=value),
                insn("mv" + name, "DMACopy", "Pool", ins=[part("t")], outs=[part("o")])]
    return module([function("main", [
        tensor("f", "ExternalInput", "int32", [1, 1], "DRAM"),
        tensor("t", "Internal", "int32", [P, F], "SB"),
        tensor("o", "ExternalOutput", "int32", [P, F], "DRAM"), register("r")], [
        block("b0", insn("ld", "TensorLoad", "Pool", ins=[ap("f", [[1, 1], [1, 1]], "int32")],
                         outs=[reg("r")]),
              *half("lo", 0, 7),
              insn("br", "CompareAndBranch", "Pool", ins=[reg("r"), imm(0, "int32")],
                   comp_op="IS_EQIMM", on_true="done", on_false="rest")),
        block("rest", *half("hi", F // 2, 9)),
        block("done", insn("end", "NoOp", "Pool"))])])


@pytest.mark.parametrize("uninitialized", ["zero", "nan"])
@pytest.mark.parametrize("P,F", [(1, 8), (128, 8192)], ids=["heap", "mapped"])
def test_a_buffer_given_back_is_reused_and_cleared(uninitialized, P, F):
    """An output array dropped before the next run gives its buffer back to the Simulator
    (py/pages.c spares): the next run writes into it, as never written as a new one, and an
    array still held is never reused. An output no instruction reads keeps its data when
    given back (uninitialized="zero"): a run that then writes it half must still show
    zeros, not the last run's 9s, where it did not write."""
    sim = birsim.Simulator(_half_or_whole(P, F), uninitialized=uninitialized)
    ref = birsim.Simulator(_half_or_whole(P, F), uninitialized=uninitialized, zero_copy=False)
    whole_, half = {"f": np.ones((1, 1), np.int32)}, {"f": np.zeros((1, 1), np.int32)}
    held = sim.run(whole_)["o"]                 # kept: its buffer is not given back
    assert _handed_array(held) and _state(sim, "o") == "handed"
    for inputs in (whole_, half, whole_, whole_, half, whole_):
        got = _run(sim, inputs)["o"]            # dropped at the next loop: given back
        want = _run(ref, inputs)["o"]
        assert np.array_equal(got.view(np.uint8), want.view(np.uint8))
        if inputs is half:                      # never-written bytes: as a fresh buffer's
            assert _state(sim, "o") is None and not _handed_array(got)
            np.testing.assert_array_equal(sim.written("o"), ref.written("o"))
            assert not sim.written("o")[:, F // 2:].any()
            np.testing.assert_array_equal(sim.read("o")[:, F // 2:], want[:, F // 2:])
        else:
            assert _state(sim, "o") == "handed"
        del got
    np.testing.assert_array_equal(held[:, ::F // 2], [[7, 9]] * P)


def test_a_big_output_no_instruction_reads_is_reused_without_new_pages():
    """A 4 MiB output (mapped, not heap) that no instruction reads: given back, its data is
    kept (only its shadow is cleared), so a warm loop of runs faults in no new pages; under
    uninitialized="nan" it is not reused (new pages, as before)."""
    faults = {}
    for uninitialized in ("zero", "nan"):
        sim = birsim.Simulator(_half_or_whole(128, 8192), uninitialized=uninitialized)
        f = {"f": np.ones((1, 1), np.int32)}
        for _ in range(3):
            np.testing.assert_array_equal(sim.run(f)["o"][:, ::4096], [[7, 9]] * 128)
            sim.outputs = None                  # the array gone before the next run
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        for _ in range(10):
            sim.run(f)
            sim.outputs = None
        faults[uninitialized] = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    assert faults["zero"] < 100 < faults["nan"], faults


def test_an_error_mid_run_forgets_the_lent_input():
    """A failing run (out-of-bounds access) still drops the caller's buffer; the next run
    works."""
    bad = _out_of_bounds()
    sim = birsim.Simulator(bad, zero_copy=True)
    x = np.ones((4, 8), np.float32)
    with pytest.raises(birsim.BirsimError):
        sim.run({"x": x})
    assert sim._sim is not None
    with pytest.raises(birsim.BirsimError):
        sim.run({"x": x})


# ---- the one-shot birsim.run() and the CLI: zero-copy, as Simulator --------------------

def _handed_array(a):
    """True when `a`'s memory is a buffer the simulator handed over (its base chain ends in
    birsim's page owner), False for an array NumPy allocated."""
    while isinstance(a, np.ndarray):
        a = a.base
    return type(a).__name__ == "_Pages"


def test_one_shot_run_is_zero_copy_unless_told_otherwise():
    x = np.arange(16 * 32, dtype=np.float32).reshape(16, 32)
    before = x.copy()
    out = birsim.run(_copy_prog(), {"x": x})["o"]
    assert _handed_array(out)
    np.testing.assert_array_equal(out, x)
    out = birsim.run(_copy_prog(), {"x": x}, zero_copy=False)["o"]
    assert out.flags.owndata and not _handed_array(out)
    np.testing.assert_array_equal(out, x)
    np.testing.assert_array_equal(x, before)


@pytest.mark.parametrize("kind,name", [c for c in CASES if c[0] in ("json", "builder")],
                         ids=lambda c: str(c))
def test_one_shot_run_equals_the_copying_run(kind, name):
    module, inputs, cores = prepared(kind, name)
    before = _snapshot(inputs)
    got = _run_one_shot(module, inputs, cores)
    _untouched(inputs, before)
    _same(got, _run(birsim.Simulator(module, cores=cores, zero_copy=False), inputs))


def _run_one_shot(module, inputs, cores):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", birsim.BirsimWarning)
        return birsim.run(module, inputs, cores=cores)


def test_one_shot_run_of_a_failing_program_raises_as_the_copying_run():
    """The same error (type, message, location) either way: nothing of the zero-copy run
    shows through an error either."""
    bad = _out_of_bounds()
    x = np.ones((4, 8), np.float32)
    errs = []
    for zc in (True, False):
        with pytest.raises(birsim.BirsimError) as e:
            birsim.run(bad, {"x": x}, zero_copy=zc)
        errs.append((type(e.value), str(e.value), e.value.instruction, e.value.block))
    assert errs[0] == errs[1]


def test_cli_run_outputs_equal_the_copying_run(tmp_path):
    """`birsim run` runs zero-copy (it owns its arrays): its saved outputs equal an
    in-process copying run's, bit for bit, on every JSON example."""
    import subprocess
    from birsim.kernels import _raw_dtype
    for kind, name in [c for c in CASES if c[0] == "json"]:
        module, inputs, cores = prepared(kind, name)
        if isinstance(module, list) or not inputs:
            continue
        examples = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
            os.path.abspath(__file__)))), "examples")
        path = os.path.join(examples, name)
        np.savez(tmp_path / "in.npz", **{k: np.asarray(v).view(_raw_dtype(np.asarray(v).dtype))
                                         for k, v in inputs.items()})
        r = subprocess.run([sys.executable, "-m", "birsim", "run", path, "--inputs",
                            str(tmp_path / "in.npz"), "--out", str(tmp_path / "out.npz"),
                            "--cores", str(cores), "--kernel-module",
                            os.path.join(examples, "rmsnorm_kernel.py")],
                           capture_output=True, text=True,
                           timeout=300)
        assert r.returncode == 0, (name, r.stderr)
        want = _run(birsim.Simulator(module, cores=cores, zero_copy=False), inputs)
        with np.load(tmp_path / "out.npz") as z:
            assert sorted(z.files) == sorted(want)
            for k, v in want.items():
                assert np.array_equal(z[k], v.view(_raw_dtype(v.dtype))), (name, k)
