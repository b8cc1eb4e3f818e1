"""Custom ops and kernels (issue 5; docs/spec/control-flow-sync.md §6): Model A (CustomOp/BIRKernel delegated to a
kernel_sim: in-process callable, the @birsim.kernel registry, the external .npy protocol,
the shipped kernel_sim command), Model B (NKIKernel inline expansion), Model C (stubs)
and the RMSNorm example.

References are computed independently with NumPy / ml_dtypes from the program's
definition; failures are checked for the error class, the names they carry and that
simulator memory is left as it was (``sim.read`` after the failure).
"""

import importlib.util
import json
import os
import subprocess
import sys
import time

import ml_dtypes
import numpy as np
import pytest

import birsim
from birsim.kernels import unregister
from bir import (ap, function, insn, loop, module, sync_info, tensor, update, wait,
                 whole)

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(HERE)
SHIPPED = os.path.join(os.path.dirname(sys.executable), "kernel_sim")
KMOD = os.path.join(HERE, "_kernel_module.py")

P, F = 16, 8
SH = [P, F]
RNG = np.random.default_rng(5)
X = RNG.standard_normal(SH).astype(np.float32)
Z = RNG.standard_normal(SH).astype(np.float32)


# ---- program builders ----------------------------------------------------------------

def kop(name, kernel, ins, outs, srcs, dsts, op="CustomOp", engine="Pool", **keys):
    """A CustomOp (or BIRKernel) instruction."""
    if op == "CustomOp":
        keys.update(opFunctionName=kernel, srcsShape=srcs, dstsShape=dsts)
    else:
        keys.update(kernel_name=kernel, srcs_shape=srcs, dsts_shape=dsts)
    return insn(name, op, engine, ins=ins, outs=outs, **keys)


def world(*body, extra=(), dtype="float32"):
    """Inputs x, z; outputs y, w (all [P, F] DRAM). y := z and w := x first, so every
    byte of the outputs has a known value before the instructions of ``body`` run."""
    allocs = [tensor("x", "ExternalInput", dtype, SH, "DRAM"),
              tensor("z", "ExternalInput", dtype, SH, "DRAM"),
              tensor("y", "ExternalOutput", dtype, SH, "DRAM"),
              tensor("w", "ExternalOutput", dtype, SH, "DRAM")] + list(extra)
    init = [insn("init_y", "TensorCopy", "DVE", ins=[whole("z", SH, dtype)],
                 outs=[whole("y", SH, dtype)]),
            insn("init_w", "TensorCopy", "DVE", ins=[whole("x", SH, dtype)],
                 outs=[whole("w", SH, dtype)])]
    return module([function("main", allocs, init + list(body))])


def xy_op(kernel="kern", op="CustomOp", **keys):
    """world() with one kernel op: y := kernel(x)."""
    return world(kop("k", kernel, [whole("x", SH)], [whole("y", SH)], [SH], [SH], op=op,
                     **keys))


def run(prog, x=X, z=Z, **opts):
    sim = birsim.Simulator(prog, **opts)
    return sim, sim.run({"x": x, "z": z})


def assert_untouched(sim, x=X, z=Z):
    """After a failed op of world(): inputs unchanged, y still z, w still x."""
    np.testing.assert_array_equal(sim.read("x"), x)
    np.testing.assert_array_equal(sim.read("z"), z)
    np.testing.assert_array_equal(sim.read("y"), z)
    np.testing.assert_array_equal(sim.read("w"), x)


def fails(prog, *texts, exc=birsim.KernelSimError, insn_name="k", **opts):
    """Run world()-style ``prog``; expect ``exc`` naming the instruction and ``texts``;
    check memory was left untouched. Returns the exception."""
    sim = birsim.Simulator(prog, **opts)
    with pytest.raises(exc) as ei:
        sim.run({"x": X, "z": Z})
    e = ei.value
    assert e.instruction == insn_name
    assert f"instruction '{insn_name}'" in str(e)
    op, = [i for b in prog["functions"][0]["blocks"] for i in b["instructions"]
           if i["name"] == insn_name]
    kernel = op.get("opFunctionName", op.get("kernel_name"))
    assert f"'{kernel}'" in str(e)                  # names the kernel too
    for t in texts:
        assert t in str(e), (t, str(e))
    assert_untouched(sim)
    return e


@pytest.fixture
def registry():
    """Register kernels for one test; unregistered afterwards."""
    names = []

    def reg(name):
        names.append(name)
        return birsim.kernel(name)
    yield reg
    for n in names:
        unregister(n)


@pytest.fixture
def no_external(monkeypatch, tmp_path):
    """No BIRSIM_KERNEL_SIM and an empty PATH: only explicit/registered kernels work."""
    monkeypatch.delenv("BIRSIM_KERNEL_SIM", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty-path"))


def fake_exe(directory, mode, log, name="fake_kernel_sim"):
    """An executable running tests/_kernelsim_fake.py in ``mode``."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(str(directory), name)
    with open(path, "w") as f:
        f.write(f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {HERE!r})\n"
                f"import _kernelsim_fake\nsys.exit(_kernelsim_fake.main({mode!r}, {str(log)!r}))\n")
    os.chmod(path, 0o755)
    return path


def read_log(log):
    with open(log) as f:
        return [json.loads(line) for line in f]


def ap_elements(arr2d, pattern, offset=0):
    """Independent reference: the elements an AP [[step, num], ...] reads from a
    row-major [P, F] array (element steps, element offset), in row-major AP order."""
    flat = arr2d.reshape(-1)
    nums = [n for _, n in pattern]
    out = np.empty(nums, dtype=arr2d.dtype)
    for idx in np.ndindex(*nums):
        out[idx] = flat[offset + sum(s * i for (s, _), i in zip(pattern, idx))]
    return out


# ---- Model A: in-process callable ------------------------------------------------------

def test_callable_gets_inputs_and_config_and_result_is_written():
    seen = []

    def fn(name, inputs, config):
        seen.append((name, [(a.shape, a.dtype, a.copy()) for a in inputs], config))
        return inputs[0] * 2 + 1
    sim, out = run(xy_op("double_plus_one"), kernel_sim=fn)
    np.testing.assert_array_equal(out["y"], X * 2 + 1)
    np.testing.assert_array_equal(out["w"], X)
    (name, ins, cfg), = seen
    assert name == "double_plus_one"
    assert ins[0][0] == (P, F) and ins[0][1] == np.float32
    np.testing.assert_array_equal(ins[0][2], X)
    assert cfg == {"kernel_name": "double_plus_one", "opcode": "CustomOp", "instruction": "k",
                   "core": 0, "attrs": {}, "inputs": [{"shape": SH, "dtype": "float32"}],
                   "outputs": [{"shape": SH, "dtype": "float32"}]}
    assert sim.stats["opcodes"]["CustomOp"] == 1


def test_birkernel_config_merges_kernel_attrs_with_other_keys():
    seen = []

    def fn(name, inputs, config):
        seen.append(config)
        return -inputs[0]
    kattrs = {"scale": 0.5, "mode": "fast", "dims": [1, 2]}
    prog = xy_op("attn", op="BIRKernel", kernel_attrs=kattrs, is_causal=True, lnc_size=2)
    _, out = run(prog, kernel_sim=fn)
    np.testing.assert_array_equal(out["y"], -X)
    cfg, = seen
    assert cfg["opcode"] == "BIRKernel" and cfg["kernel_name"] == "attn"
    assert cfg["instruction"] == "k"
    assert cfg["attrs"] == {"scale": 0.5, "mode": "fast", "dims": [1, 2], "is_causal": True,
                            "lnc_size": 2, "kernel_attrs": kattrs}


def test_birkernel_without_kernel_attrs():
    seen = []
    prog = xy_op("plain", op="BIRKernel")
    run(prog, kernel_sim=lambda n, i, c: seen.append(c["attrs"]) or i[0])
    assert seen == [{"kernel_attrs": {}}]


def test_inputs_read_through_aps_into_src_shapes():
    """Strided, transposed, offset and broadcast APs; src shapes that differ from the AP
    dimensions. Each input array is the AP's elements (row-major) reshaped."""
    seen = []
    pats = [([[F, P], [2, F // 2]], 1, [P, F // 2]),           # odd columns
            ([[1, F], [F, P]], 0, [F * P]),                    # transposed, flattened
            ([[0, 3], [1, F]], 2 * F, [3, F]),                 # row 2 broadcast 3 times
            ([[F, P // 2], [1, F]], (P // 2) * F, [P // 4, 2, F])]   # bottom half, 3-D
    ins = [ap("x", p, offset=off) for p, off, _ in pats]
    prog = world(kop("k", "look", ins, [whole("y", SH)], [s for *_, s in pats], [SH]))

    def fn(name, inputs, config):
        seen.extend(a.copy() for a in inputs)
        return np.zeros(SH, np.float32)
    run(prog, kernel_sim=fn)
    for got, (p, off, shape) in zip(seen, pats):
        want = ap_elements(X, p, off).reshape(shape)
        assert got.shape == tuple(shape)
        np.testing.assert_array_equal(got, want)


def test_outputs_written_through_aps_rest_untouched():
    """Output 0 writes the odd columns of y; output 1 writes w transposed (a strided
    pattern); everything else keeps its value."""
    a = np.arange(P * F // 2, dtype=np.float32).reshape(P, F // 2) + 100
    b = np.arange(F * P, dtype=np.float32).reshape(F, P) - 50
    prog = world(kop("k", "two", [whole("x", SH)],
                     [ap("y", [[F, P], [2, F // 2]], offset=1), ap("w", [[1, F], [F, P]])],
                     [SH], [[P, F // 2], [F, P]]))
    _, out = run(prog, kernel_sim=lambda n, i, c: (a, b))
    want_y = Z.copy()
    want_y[:, 1::2] = a
    np.testing.assert_array_equal(out["y"], want_y)
    np.testing.assert_array_equal(out["w"], b.T)


def test_non_linear_sbuf_patterns_in_and_out():
    """A flat AP running across SBUF partitions (not one pointer + strides in the core)."""
    seen = []
    xs = tensor("xs", "Internal", "float32", SH, "SB")
    ys = tensor("ys", "Internal", "float32", SH, "SB")
    flat = [[1, P * F]]
    prog = world(insn("load", "TensorCopy", "DVE", ins=[whole("x", SH)], outs=[whole("xs", SH)]),
                 kop("k", "flat", [ap("xs", flat)], [ap("ys", flat)], [[P * F]], [[P * F]]),
                 insn("store", "TensorCopy", "DVE", ins=[whole("ys", SH)], outs=[whole("w", SH)]),
                 extra=[xs, ys])

    def fn(name, inputs, config):
        seen.append(inputs[0].copy())
        return inputs[0][::-1] * 3
    _, out = run(prog, kernel_sim=fn)
    np.testing.assert_array_equal(seen[0], X.reshape(-1))
    np.testing.assert_array_equal(out["w"], (X.reshape(-1)[::-1] * 3).reshape(SH))


def test_bf16_and_fp8_inputs_arrive_as_ml_dtypes_arrays():
    seen = []
    xb = X.astype(ml_dtypes.bfloat16)
    x8 = np.clip(X, -4, 4).astype(ml_dtypes.float8_e4m3fn)
    extra = [tensor("b16", "ExternalInput", "bfloat16", SH, "DRAM"),
             tensor("f8", "ExternalInput", "float8_e4m3fn", SH, "DRAM")]
    prog = world(kop("k", "dt", [whole("b16", SH, "bfloat16"), whole("f8", SH, "float8_e4m3fn")],
                     [whole("y", SH)], [SH, SH], [SH]), extra=extra)

    def fn(name, inputs, config):
        seen.append([(a.dtype, a.copy()) for a in inputs])
        seen.append([m["dtype"] for m in config["inputs"]])
        return inputs[0].astype(np.float32) + inputs[1].astype(np.float32)
    sim = birsim.Simulator(prog, kernel_sim=fn)
    out = sim.run({"x": X, "z": Z, "b16": xb, "f8": x8})
    (d0, a0), (d1, a1) = seen[0]
    assert d0 == np.dtype(ml_dtypes.bfloat16) and d1 == np.dtype(ml_dtypes.float8_e4m3fn)
    np.testing.assert_array_equal(a0.view(np.uint16), xb.view(np.uint16))
    np.testing.assert_array_equal(a1.view(np.uint8), x8.view(np.uint8))
    assert seen[1] == ["bfloat16", "float8_e4m3fn"]
    np.testing.assert_array_equal(out["y"], xb.astype(np.float32) + x8.astype(np.float32))


def test_many_operands_each_get_their_own_data():
    """16 strided inputs and 16 outputs (the per-instruction maximum): every input must
    arrive with its own values and every output land in its own place."""
    n = 16
    extra = [tensor(f"i{k}", "ExternalInput", "float32", [P, 2 * F], "DRAM") for k in range(n)]
    extra += [tensor(f"o{k}", "ExternalOutput", "float32", [P, 2 * F], "DRAM") for k in range(n)]
    strided = [[2 * F, P], [2, F]]                 # every other column
    prog = world(kop("k", "many", [ap(f"i{k}", strided) for k in range(n)],
                     [ap(f"o{k}", strided, offset=1) for k in range(n)],
                     [SH] * n, [SH] * n), extra=extra)
    data = {f"i{k}": RNG.standard_normal((P, 2 * F)).astype(np.float32) for k in range(n)}

    def fn(name, inputs, config):
        return [a * (k + 1) for k, a in enumerate(inputs)][::-1]
    sim = birsim.Simulator(prog, kernel_sim=fn)
    with pytest.warns(birsim.BirsimWarning, match="not fully written"):
        out = sim.run(dict(data, x=X, z=Z))
    for k in range(n):
        src = n - 1 - k
        np.testing.assert_array_equal(out[f"o{k}"][:, 1::2], data[f"i{src}"][:, ::2] * (src + 1))


def test_result_casts_follow_the_simulator_cast_rules():
    """Results of another dtype are cast to the output's dtype: RNE, fp8 and integers
    saturate, NaN stays NaN (fp8) / goes to max (int, positive NaN)."""
    vals = np.array([2.5, 3.5, -2.5, 1e10, -1e10, np.nan, 0.1, 448.5, 1000.0,
                     -1000.0, 1.0 + 2.0 ** -9, 7.0], dtype=np.float64)
    shape = [1, vals.size]
    extra = [tensor("r", "ExternalInput", "float32", shape, "DRAM"),
             tensor("o_i32", "ExternalOutput", "int32", shape, "DRAM"),
             tensor("o_u8", "ExternalOutput", "uint8", shape, "DRAM"),
             tensor("o_f8", "ExternalOutput", "float8_e4m3fn", shape, "DRAM"),
             tensor("o_bf", "ExternalOutput", "bfloat16", shape, "DRAM"),
             tensor("o_f32", "ExternalOutput", "float32", shape, "DRAM")]
    outs = [whole("o_i32", shape, "int32"), whole("o_u8", shape, "uint8"),
            whole("o_f8", shape, "float8_e4m3fn"), whole("o_bf", shape, "bfloat16"),
            whole("o_f32", shape, "float32")]
    prog = world(kop("k", "casts", [whole("r", shape)], outs, [shape], [shape] * 5), extra=extra)
    v = vals.reshape(shape)
    sim = birsim.Simulator(prog, kernel_sim=lambda n, i, c: [v] * 5)   # float64 results
    out = sim.run({"x": X, "z": Z, "r": v.astype(np.float32)})
    f32 = v.astype(np.float32)                       # values reach the cast as fp32 (RNE)

    def sat_int(a, lo, hi):
        r = np.where(np.isnan(a), hi, np.rint(np.nan_to_num(a)))
        return np.clip(r, lo, hi).astype(np.int64)
    np.testing.assert_array_equal(out["o_i32"], sat_int(f32.astype(np.float64), -2**31, 2**31 - 1))
    np.testing.assert_array_equal(out["o_u8"], sat_int(f32.astype(np.float64), 0, 255))
    fmax = float(ml_dtypes.finfo(ml_dtypes.float8_e4m3fn).max)
    want8 = np.clip(f32, -fmax, fmax).astype(ml_dtypes.float8_e4m3fn)
    np.testing.assert_array_equal(np.isnan(out["o_f8"].astype(np.float32)), np.isnan(f32))
    ok = ~np.isnan(f32)
    np.testing.assert_array_equal(out["o_f8"][ok].astype(np.float32), want8[ok].astype(np.float32))
    np.testing.assert_array_equal(out["o_bf"][ok].astype(np.float32),
                                  f32[ok].astype(ml_dtypes.bfloat16).astype(np.float32))
    np.testing.assert_array_equal(out["o_f32"], f32)


def test_same_dtype_result_is_copied_bit_for_bit():
    bits = np.full(SH, 0x7FA00001, dtype=np.uint32)          # a NaN with a payload
    bits[0, :3] = [0x80000000, 0x00000001, 0xFF800000]        # -0, denormal, -inf
    _, out = run(xy_op(), kernel_sim=lambda n, i, c: bits.view(np.float32))
    np.testing.assert_array_equal(out["y"].view(np.uint32), bits)


def test_packed_output_takes_its_own_dtype_only():
    shape = [P, 2]
    extra = [tensor("pk", "ExternalOutput", "float8_e4m3fn_x4", shape, "DRAM")]
    prog = world(kop("k", "pk", [whole("x", SH)], [whole("pk", shape, "float8_e4m3fn_x4")],
                     [SH], [shape]), extra=extra)
    words = np.arange(P * 2, dtype=np.uint32).reshape(shape) * 0x01010101
    sim = birsim.Simulator(prog, kernel_sim=lambda n, i, c: words)
    np.testing.assert_array_equal(sim.run({"x": X, "z": Z})["pk"], words)
    e = fails(prog, "cannot cast float32 to float8_e4m3fn_x4",
              kernel_sim=lambda n, i, c: words.astype(np.float32))
    assert "'pk'" in str(e)


def test_single_output_as_bare_array_or_one_tuple_and_list_for_many():
    for ret in (lambda x: x + 1, lambda x: (x + 1,), lambda x: [x + 1]):
        _, out = run(xy_op(), kernel_sim=lambda n, i, c, ret=ret: ret(i[0]))
        np.testing.assert_array_equal(out["y"], X + 1)


def test_zero_output_kernel_may_return_none():
    calls = []
    prog = world(kop("k", "sink", [whole("x", SH)], [], [SH], []))
    sim, out = run(prog, kernel_sim=lambda n, i, c: calls.append(float(i[0].sum())))
    assert calls == [pytest.approx(float(X.sum()), rel=1e-5)]
    np.testing.assert_array_equal(out["y"], Z)


def test_in_place_kernel_and_scalar_shapes():
    """Output AP = input AP (the kernel reads the old values, the result replaces them);
    a 0-d src/dst shape ([]) for single elements."""
    extra = [tensor("s", "ExternalOutput", "float32", [1, 1], "DRAM")]
    prog = world(kop("k", "inplace", [whole("y", SH), ap("x", [[1, 1], [1, 1]], offset=5)],
                     [whole("y", SH), whole("s", [1, 1])], [SH, []], [SH, []]), extra=extra)
    seen = []

    def fn(name, inputs, config):
        seen.append(inputs[1].shape)
        return inputs[0] * 2, inputs[1] + inputs[0].sum(dtype=np.float64)
    _, out = run(prog, kernel_sim=fn)
    np.testing.assert_array_equal(out["y"], Z * 2)
    assert seen == [()]
    np.testing.assert_array_equal(out["s"], [[np.float32(X.reshape(-1)[5] + Z.sum(dtype=np.float64))]])


def test_each_core_calls_the_kernel():
    calls = []
    sim = birsim.Simulator(xy_op(), cores=2,
                           kernel_sim=lambda n, i, c: calls.append(n) or i[0] + len(calls))
    out = sim.run({"x": X, "z": Z})
    assert calls == ["kern", "kern"]
    # y is one tensor for both cores (docs/spec/BIR-JSON.md, "One program per core"): the core
    # whose kernel ran last wrote it
    assert out["y"][0, 0] in (X[0, 0] + 1, X[0, 0] + 2)
    np.testing.assert_array_equal(out["y"], sim.read("y", core=0))
    np.testing.assert_array_equal(out["y"], sim.read("y", core=1))


def test_kernel_in_a_loop_sees_each_trip():
    """A CustomOp inside a Loop reading a tile that moves with the induction variable."""
    from bir import affine, iv
    T = 4
    body = [kop("k", "tile", [ap("x", [[F, T], [1, F]], offset=affine([(iv("i"), T * F)]))],
                [ap("y", [[F, T], [1, F]], offset=affine([(iv("i"), T * F)]))],
                [[T, F]], [[T, F]])]
    prog = world(loop("L", "i", 0, P // T, 1, body))
    trips = []

    def fn(name, inputs, config):
        trips.append(inputs[0][0, 0].item())
        return inputs[0] * len(trips)
    _, out = run(prog, kernel_sim=fn)
    assert trips == [X[i * T, 0] for i in range(P // T)]
    want = np.concatenate([X[i * T:(i + 1) * T] * (i + 1) for i in range(P // T)])
    np.testing.assert_array_equal(out["y"], want)


# ---- Model A: views of simulator memory --------------------------------------------------

def test_inputs_are_read_only_private_copies():
    facts = {}
    prog = world(kop("k", "views", [whole("x", SH), whole("x", SH), ap("x", [[F, P], [2, F // 2]])],
                     [whole("y", SH)], [SH, SH, [P, F // 2]], [SH]))

    def fn(name, inputs, config):
        a, b, c = inputs
        facts.update(shared=np.shares_memory(a, b), owns=a.flags.owndata,
                     writeable=[t.flags.writeable for t in inputs],
                     strided_shared=np.shares_memory(a, c), contiguous=c.flags.c_contiguous,
                     c_vals=c.copy())
        try:
            a.flags.writeable = True
            facts["made_writeable"] = True
        except ValueError:
            facts["made_writeable"] = False
        return a + b
    _, out = run(prog, kernel_sim=fn)
    # issue 12: copies, so a kept input never dangles into simulator memory
    assert not facts["shared"] and not facts["owns"]
    assert facts["writeable"] == [False, False, False]
    assert not facts["made_writeable"]
    assert not facts["strided_shared"] and facts["contiguous"]
    np.testing.assert_array_equal(facts["c_vals"], X[:, ::2])
    np.testing.assert_array_equal(out["y"], X + X)


def test_writing_into_an_input_raises_and_changes_nothing():
    def fn(name, inputs, config):
        inputs[0][0, 0] = 42.0
        return inputs[0]
    fails(xy_op("scribble"), "ValueError", "read-only", "'scribble'", kernel_sim=fn)


def test_kept_input_memory_is_a_private_copy():
    # Issue 12: a kernel that keeps its input gets the documented KernelSimError, and the
    # kept array holds a copy (never a dangling view of simulator memory, even after the
    # Simulator is freed and its memory reused).
    kept = []

    def fn(name, inputs, config):
        assert not inputs[0].flags.writeable
        kept.append(inputs[0])
        return inputs[0] * 1
    fails(xy_op("keeper"), "kept a reference to its input 0", kernel_sim=fn)
    import gc
    gc.collect()
    for _ in range(3):                     # reuse the freed memory
        run(xy_op(), kernel_sim=lambda n, i, c: i[0] * 7)
    np.testing.assert_array_equal(kept[0], X)


@pytest.mark.parametrize("keep", ["array", "view", "list"])
def test_keeping_an_input_past_the_call_is_an_error(keep):
    kept = []

    def fn(name, inputs, config):
        kept.append({"array": inputs[0], "view": inputs[0][1:, ::2], "list": inputs}[keep])
        return inputs[0] + 1
    fails(xy_op("keeper"), "kept a reference to its input 0", "'keeper'", kernel_sim=fn)


def test_returning_an_input_unchanged_is_fine():
    _, out = run(xy_op(), kernel_sim=lambda n, i, c: i[0])
    np.testing.assert_array_equal(out["y"], X)


# ---- Model A: failures -------------------------------------------------------------------

def boom(name, inputs, config):
    raise ZeroDivisionError("kernel exploded")


@pytest.mark.parametrize("result,texts", [
    (lambda i: (i[0], i[0]), ["returned 2 outputs, expected 1"]),
    (lambda i: [], ["returned 0 outputs, expected 1"]),
    (lambda i: i[0].T, [f"has shape {[F, P]}, expected {SH}"]),
    (lambda i: i[0].reshape(-1), [f"has shape {[P * F]}, expected {SH}"]),
    (lambda i: None, ["has shape [], expected"]),
    (lambda i: np.full(SH, "a"), ["cannot cast <U1 to float32"]),
    (lambda i: np.full(SH, 1 + 2j), ["cannot cast complex128 to float32"]),
    (lambda i: np.empty(SH, dtype=object), ["cannot cast object to float32"]),
    (lambda i: [[1, 2], [3]], ["returned 2 outputs"]),
])
def test_bad_results_raise_and_leave_memory_untouched(result, texts):
    fails(xy_op("badres"), "'badres'", *texts, kernel_sim=lambda n, i, c: result(i))


def test_kernel_exception_names_instruction_kernel_and_cause():
    e = fails(xy_op("exploder"), "'exploder'", "ZeroDivisionError", "kernel exploded",
              kernel_sim=boom)
    assert e.function == "main" and e.block == "b0"


def test_second_output_bad_leaves_first_output_untouched_too():
    prog = world(kop("k", "half", [whole("x", SH)], [whole("y", SH), whole("w", SH)],
                     [SH], [SH, SH]))
    fails(prog, "output 1 has shape", kernel_sim=lambda n, i, c: (i[0] + 1, i[0][:2]))
    # the same with a strided first output (goes through the scratch buffer)
    prog = world(kop("k", "half", [whole("x", SH)],
                     [ap("y", [[F, P], [2, F // 2]]), whole("w", SH)], [SH], [[P, F // 2], SH]))
    fails(prog, "output 1 has shape",
          kernel_sim=lambda n, i, c: (np.ones((P, F // 2)), np.ones((3, 3))))


def test_non_ap_operand_is_a_run_time_error():
    from bir import imm
    prog = world(kop("k", "k1", [imm(1.0)], [whole("y", SH)], [[1]], [SH]))
    e = fails(prog, "ins[0] is not an access pattern", kernel_sim=lambda n, i, c: i[0])
    assert e.operand == "ins[0]"


def test_keyboard_interrupt_in_a_kernel_still_interrupts():
    def fn(name, inputs, config):
        raise KeyboardInterrupt
    sim = birsim.Simulator(xy_op(), kernel_sim=fn)
    with pytest.raises(KeyboardInterrupt):
        sim.run({"x": X, "z": Z})
    assert_untouched(sim)


def test_process_goes_on_after_failures():
    for _ in range(3):
        fails(xy_op(), kernel_sim=boom)
    _, out = run(xy_op(), kernel_sim=lambda n, i, c: i[0] - 1)
    np.testing.assert_array_equal(out["y"], X - 1)


def test_shape_element_count_mismatch_is_a_run_time_error():
    calls = []
    prog = world(kop("k", "k1", [whole("x", SH)], [whole("y", SH)], [[P, F + 1]], [SH]))
    fails(prog, "ins[0] covers 128 elements but its shape (srcs_shape) has 144",
          kernel_sim=lambda n, i, c: calls.append(1))
    prog = world(kop("k", "k1", [whole("x", SH)], [whole("y", SH)], [SH], [[2, 2]]))
    fails(prog, "outs[0] covers 128 elements but its shape (dsts_shape) has 4",
          kernel_sim=lambda n, i, c: calls.append(1))
    assert calls == []


@pytest.mark.parametrize("op,key,bad", [("CustomOp", "srcsShape", [SH, SH]),
                                        ("CustomOp", "dstsShape", []),
                                        ("BIRKernel", "srcs_shape", []),
                                        ("BIRKernel", "dsts_shape", [SH, SH, SH])])
def test_shape_list_length_mismatch_is_a_load_error(op, key, bad):
    prog = xy_op(op=op)
    prog["functions"][0]["blocks"][0]["instructions"][-1][key] = bad
    with pytest.raises(birsim.ProgramError, match=key) as ei:
        birsim.load(prog)
    assert ei.value.path.endswith(key)


def test_no_kernel_sim_anywhere_names_kernel_and_what_was_tried(no_external):
    e = fails(xy_op("nowhere"), "no kernel_sim for kernel 'nowhere'", "Simulator(kernel_sim=...)",
              "@birsim.kernel", "BIRSIM_KERNEL_SIM", "PATH")
    assert isinstance(e, birsim.SimulationError)


# ---- Model A: the registry -------------------------------------------------------------------

def test_registered_kernel_gets_inputs_and_attrs(registry, no_external):
    seen = []

    @registry("reg_scale_add")
    def scale_add(x, y, alpha=1.0, **attrs):
        seen.append(attrs)
        return np.float32(alpha) * x + y, x - y
    assert "reg_scale_add" in birsim.kernels()
    prog = world(kop("k", "reg_scale_add", [whole("x", SH), whole("z", SH)],
                     [whole("y", SH), whole("w", SH)], [SH, SH], [SH, SH], op="BIRKernel",
                     kernel_attrs={"alpha": 3.0}, is_causal=False))
    _, out = run(prog)
    np.testing.assert_array_equal(out["y"], np.float32(3.0) * X + Z)
    np.testing.assert_array_equal(out["w"], X - Z)
    assert seen == [{"is_causal": False, "kernel_attrs": {"alpha": 3.0}}]


def test_registry_listing_replacing_and_validation(registry):
    registry("reg_a")(lambda x: x)
    registry("reg_b")(lambda x: x)
    names = birsim.kernels()
    assert names == sorted(names) and {"reg_a", "reg_b"} <= set(names)
    registry("reg_a")(lambda x: x + 5)                  # a new registration replaces
    _, out = run(xy_op("reg_a"))
    np.testing.assert_array_equal(out["y"], X + 5)
    unregister("reg_b")
    assert "reg_b" not in birsim.kernels()
    with pytest.raises(TypeError):
        birsim.kernel("")
    with pytest.raises(TypeError):
        birsim.kernel("reg_c")(42)


def test_registered_kernel_failure_is_a_kernel_sim_error(registry, no_external):
    @registry("reg_fails")
    def bad(x):
        raise KeyError("missing thing")
    fails(xy_op("reg_fails"), "KeyError", "missing thing", "'reg_fails'")


def test_explicit_callable_and_path_win_over_registry(registry, tmp_path):
    registry("prec")(lambda x: x + 100)
    _, out = run(xy_op("prec"), kernel_sim=lambda n, i, c: i[0] - 100)
    np.testing.assert_array_equal(out["y"], X - 100)
    log = tmp_path / "log"
    exe = fake_exe(tmp_path, "double", log)
    _, out = run(xy_op("prec"), kernel_sim=exe)
    np.testing.assert_array_equal(out["y"], X * 2)
    assert len(read_log(log)) == 1


def test_registry_wins_over_environment_and_path(registry, monkeypatch, tmp_path):
    log = tmp_path / "log"
    monkeypatch.setenv("BIRSIM_KERNEL_SIM", fake_exe(tmp_path / "env", "double", log))
    monkeypatch.setenv("PATH", str(tmp_path / "onpath"))
    fake_exe(tmp_path / "onpath", "double", log, name="kernel_sim")
    registry("prec2")(lambda x: x + 7)
    _, out = run(xy_op("prec2"))
    np.testing.assert_array_equal(out["y"], X + 7)
    assert not log.exists()


def test_environment_variable_then_path(monkeypatch, tmp_path):
    env_log, path_log = tmp_path / "env.log", tmp_path / "path.log"
    monkeypatch.setenv("PATH", str(tmp_path / "onpath"))
    fake_exe(tmp_path / "onpath", "f64", path_log, name="kernel_sim")
    monkeypatch.setenv("BIRSIM_KERNEL_SIM", fake_exe(tmp_path / "env", "double", env_log))
    _, out = run(xy_op("unregistered_env"))
    np.testing.assert_array_equal(out["y"], X * 2)
    monkeypatch.delenv("BIRSIM_KERNEL_SIM")
    _, out = run(xy_op("unregistered_env"))
    np.testing.assert_array_equal(out["y"], (X.astype(np.float64) + 0.5).astype(np.float32))
    assert len(read_log(env_log)) == 1 and len(read_log(path_log)) == 1


# ---- Model A: the external protocol ---------------------------------------------------------------

def test_external_protocol_files_config_cwd_and_cleanup(tmp_path):
    log = tmp_path / "log"
    exe = fake_exe(tmp_path, "double", log)
    kattrs = {"k": 1}
    prog = world(loop("L", "i", 0, 3, 1, [
        kop("k", "ext_double", [whole("x", SH), whole("z", SH, "float32")], [whole("y", SH)],
            [SH, [P * F]], [SH], op="BIRKernel", kernel_attrs=kattrs, lnc_size=1)]))
    _, out = run(prog, kernel_sim=exe)
    np.testing.assert_array_equal(out["y"], X * 2)
    recs = read_log(log)
    assert len(recs) == 3
    run_ids = []
    for r in recs:
        cwd, cfg = r["cwd"], r["config"]
        assert r["argv"] == [exe, os.path.join(cwd, "config.json")]
        assert os.path.isabs(cwd) and not os.path.exists(cwd)      # private dir, removed
        assert cfg["kernel_name"] == "ext_double"
        assert cfg["attrs"] == {"k": 1, "lnc_size": 1, "kernel_attrs": kattrs}
        assert cfg["opcode"] == "BIRKernel" and cfg["instruction"] == "k"
        rid = os.path.basename(cfg["inputs"][0]["path"]).split("-")[0]
        run_ids.append(int(rid))
        assert [{k: m[k] for k in ("shape", "dtype")} for m in cfg["inputs"]] == \
            [{"shape": SH, "dtype": "float32"}, {"shape": [P * F], "dtype": "float32"}]
        assert [m["path"] for m in cfg["inputs"]] == \
            [os.path.join(cwd, f"{rid}-{i}-birsim.npy") for i in range(2)]
        assert cfg["outputs"] == [{"shape": SH, "dtype": "float32",
                                   "path": os.path.join(cwd, f"{rid}-0-simout.npy")}]
        assert set(r["files"]) >= {"config.json", f"{rid}-0-birsim.npy", f"{rid}-1-birsim.npy"}
        assert r["in_shapes"] == [SH, [P * F]]
    assert run_ids == sorted(run_ids) and len(set(run_ids)) == 3
    assert len({r["cwd"] for r in recs}) == 3


def test_external_bf16_and_fp8_travel_as_raw_bits(tmp_path):
    log = tmp_path / "log"
    exe = fake_exe(tmp_path, "flipsign", log)
    xb = X.astype(ml_dtypes.bfloat16)
    x8 = np.clip(X, -4, 4).astype(ml_dtypes.float8e4 if hasattr(ml_dtypes, "float8e4")
                                  else ml_dtypes.float8_e4m3)
    extra = [tensor("b16", "ExternalInput", "bfloat16", SH, "DRAM"),
             tensor("f8", "ExternalInput", "float8e4", SH, "DRAM"),
             tensor("ob", "ExternalOutput", "bfloat16", SH, "DRAM"),
             tensor("o8", "ExternalOutput", "float8e4", SH, "DRAM")]
    prog = world(kop("k", "flip", [whole("b16", SH, "bfloat16"), whole("f8", SH, "float8e4")],
                     [whole("ob", SH, "bfloat16"), whole("o8", SH, "float8e4")], [SH, SH],
                     [SH, SH]), extra=extra)
    sim = birsim.Simulator(prog, kernel_sim=exe)
    out = sim.run({"x": X, "z": Z, "b16": xb, "f8": x8})
    rec, = read_log(log)
    assert rec["in_dtypes"] == ["uint16", "uint8"]
    assert [m["dtype"] for m in rec["config"]["inputs"]] == ["bfloat16", "float8e4"]
    np.testing.assert_array_equal(out["ob"].view(np.uint16), xb.view(np.uint16) ^ 0x8000)
    np.testing.assert_array_equal(out["o8"].view(np.uint8), x8.view(np.uint8) ^ 0x80)


def test_external_value_results_are_cast(tmp_path):
    exe = fake_exe(tmp_path, "f64", tmp_path / "log")
    _, out = run(xy_op(), kernel_sim=exe)
    np.testing.assert_array_equal(out["y"], (X.astype(np.float64) + 0.5).astype(np.float32))


def test_external_path_without_shell_and_relative(tmp_path, monkeypatch):
    weird = tmp_path / "dir with space;$(touch PWNED)"
    log = tmp_path / "log"
    exe = fake_exe(weird, "double", log)
    monkeypatch.chdir(tmp_path)
    _, out = run(xy_op(), kernel_sim=exe)
    np.testing.assert_array_equal(out["y"], X * 2)
    rel = os.path.relpath(exe, tmp_path)
    assert not os.path.isabs(rel)
    _, out = run(xy_op(), kernel_sim=rel)                     # relative to our cwd
    np.testing.assert_array_equal(out["y"], X * 2)
    import pathlib
    _, out = run(xy_op(), kernel_sim=pathlib.Path(rel))        # os.PathLike
    np.testing.assert_array_equal(out["y"], X * 2)
    assert not list(tmp_path.rglob("PWNED"))
    assert len(read_log(log)) == 3


def test_external_nonzero_exit_reports_stderr_tail(tmp_path):
    exe = fake_exe(tmp_path, "fail", tmp_path / "log")
    e = fails(xy_op("extfail"), "exited with status 3", "'extfail'",
              "FAKE-KERNEL-SIM-FAILED: bad things", kernel_sim=exe)
    assert len(str(e)) < 4000


def test_external_timeout_kills_the_process_group(tmp_path):
    log = tmp_path / "log"
    exe = fake_exe(tmp_path, "sleep", log)
    fails(xy_op("slow"), "timed out after 1.5 s", "'slow'", kernel_sim=exe, kernel_timeout=1.5)
    rec, = read_log(log)
    assert not os.path.exists(rec["cwd"])
    pid = rec["grandchild"]
    for _ in range(100):                      # the grandchild was killed with the group
        try:
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            break
        if state in "ZX":
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"grandchild {pid} still running")


@pytest.mark.parametrize("mode,texts", [
    ("nothing", ["wrote no output", "-0-simout.npy"]),
    ("garbage", ["is malformed"]),
    ("pickle", ["is malformed"]),
    ("npz", ["is malformed"]),
    ("wrongshape", [f"has shape {[F, P]}, expected {SH}"]),
])
def test_external_bad_outputs(tmp_path, mode, texts):
    log = tmp_path / "log"
    exe = fake_exe(tmp_path, mode, log)
    fails(xy_op("extbad"), "'extbad'", *texts, kernel_sim=exe)
    rec, = read_log(log)
    assert not os.path.exists(rec["cwd"])


def test_external_missing_or_not_executable(tmp_path):
    fails(xy_op(), "not found", str(tmp_path / "nope"), kernel_sim=str(tmp_path / "nope"))
    plain = tmp_path / "plain"
    plain.write_text("#!/bin/sh\nexit 0\n")
    fails(xy_op(), "not executable", kernel_sim=str(plain))
    fails(xy_op(), "not executable", kernel_sim=str(tmp_path))        # a directory


# ---- Model A: the shipped kernel_sim command ---------------------------------------------------------

def test_shipped_console_script_serves_registered_kernels(monkeypatch):
    assert os.access(SHIPPED, os.X_OK)
    assert "ext_scale_add" not in birsim.kernels()      # served by the child only
    monkeypatch.setenv("BIRSIM_KERNEL_MODULE", KMOD)
    prog = world(kop("k", "ext_scale_add", [whole("x", SH), whole("z", SH)],
                     [whole("y", SH), whole("w", SH)], [SH, SH], [SH, SH], op="BIRKernel",
                     kernel_attrs={"alpha": 2.5}))
    _, out = run(prog, kernel_sim=SHIPPED, kernel_timeout=120)
    np.testing.assert_array_equal(out["y"], np.float32(2.5) * X + Z)
    np.testing.assert_array_equal(out["w"], X - Z)


def test_shipped_kernel_sim_bf16_relative_module_and_failures(monkeypatch):
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("BIRSIM_KERNEL_MODULE", os.path.relpath(KMOD, ROOT))
    xb = X.astype(ml_dtypes.bfloat16)
    extra = [tensor("b16", "ExternalInput", "bfloat16", SH, "DRAM"),
             tensor("ob", "ExternalOutput", "bfloat16", SH, "DRAM")]
    prog = world(kop("k", "ext_neg_bf16", [whole("b16", SH, "bfloat16")],
                     [whole("ob", SH, "bfloat16")], [SH], [SH]), extra=extra)
    sim = birsim.Simulator(prog, kernel_sim=SHIPPED, kernel_timeout=120)
    out = sim.run({"x": X, "z": Z, "b16": xb})
    np.testing.assert_array_equal(out["ob"].view(np.uint16), xb.view(np.uint16) ^ 0x8000)
    fails(xy_op("ext_raises"), "exited with status 1", "RuntimeError",
          "ext_raises was asked to fail", kernel_sim=SHIPPED, kernel_timeout=120)
    fails(xy_op("ext_bad_shape"), "exited with status 1", "output 0 has shape",
          kernel_sim=SHIPPED, kernel_timeout=120)
    fails(xy_op("ext_unknown"), "no kernel registered as 'ext_unknown'",
          kernel_sim=SHIPPED, kernel_timeout=120)


def test_python_m_kernel_sim_with_module_option(tmp_path):
    """`python -m birsim.kernel_sim --module mod.py config.json` on a hand-written config."""
    xp, zp = tmp_path / "0-0-birsim.npy", tmp_path / "0-1-birsim.npy"
    np.save(xp, X)
    np.save(zp, Z)
    outs = [tmp_path / "0-0-simout.npy", tmp_path / "0-1-simout.npy"]
    cfg = {"kernel_name": "ext_scale_add", "attrs": {"alpha": -1.0},
           "inputs": [{"path": str(xp), "shape": SH, "dtype": "float32"},
                      {"path": str(zp), "shape": SH, "dtype": "float32"}],
           "outputs": [{"path": str(p), "shape": SH, "dtype": "float32"} for p in outs]}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    env = dict(os.environ)
    env.pop("BIRSIM_KERNEL_MODULE", None)
    cmd = [sys.executable, "-m", "birsim.kernel_sim", "--module", KMOD, "config.json"]
    r = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr.decode()
    np.testing.assert_array_equal(np.load(outs[0]), np.float32(-1.0) * X + Z)
    np.testing.assert_array_equal(np.load(outs[1]), X - Z)
    # without the module nothing is registered: exit status 1 and the reason on stderr
    r = subprocess.run(cmd[:3] + ["config.json"], cwd=tmp_path, env=env, capture_output=True,
                       timeout=120)
    assert r.returncode == 1 and b"no kernel registered as 'ext_scale_add'" in r.stderr


# ---- Model B: NKIKernel -------------------------------------------------------------------

def nki_body():
    """Allocation order (not names) binds: inputs 'second', 'first'; outputs 'o2', 'o1'.
    o2 := second - first, o1 := second * 2; 'tmp' is the callee's own SBUF tensor.
    c1 sets semaphore 5; c2 waits for it (visible inside the callee)."""
    return function("kfn", [
        tensor("second", "Input", "float32", SH, "DRAM"),
        tensor("tmp", "Internal", "float32", SH, "SB"),
        tensor("first", "Input", "float32", SH, "DRAM"),
        tensor("o2", "Output", "float32", SH, "DRAM"),
        tensor("o1", "Output", "float32", SH, "DRAM")],
        [insn("sub", "TensorTensor", "DVE", ins=[whole("second", SH), whole("first", SH)],
              outs=[whole("tmp", SH)], op="subtract"),
         insn("c1", "TensorCopy", "DVE", ins=[whole("tmp", SH)], outs=[whole("o2", SH)],
              sync=sync_info(updates=[update(5, "sem-add-imm", 1)])),
         insn("c2", "TensorScalar", "Activation", ins=[whole("second", SH)],
              outs=[whole("o1", SH)], op0="mult", const0=2.0,
              sync=sync_info(waits=[wait(5, "sem-ge-imm", 1)]))])


def test_nki_kernel_binds_args_in_allocation_order():
    prog = module([function("main", [
        tensor("x", "ExternalInput", "float32", SH, "DRAM"),
        tensor("z", "ExternalInput", "float32", SH, "DRAM"),
        tensor("y", "ExternalOutput", "float32", SH, "DRAM"),
        tensor("w", "ExternalOutput", "float32", SH, "DRAM")],
        [insn("k", "NKIKernel", "Pool", func="kfn", func_args=["x", "z"],
              func_outs=["y", "w"])])], nki_functions=[nki_body()])
    sim, out = run(prog)
    np.testing.assert_array_equal(out["y"], X - Z)            # o2 <- y, second <- x
    np.testing.assert_array_equal(out["w"], X * np.float32(2))
    assert sim.stats["opcodes"]["NKIKernel"] == 1
    assert sim.stats["opcodes"]["TensorTensor"] == 1


def test_nki_kernel_called_twice_with_other_bindings():
    allocs = [tensor(n, "ExternalInput", "float32", SH, "DRAM") for n in ("x", "z")]
    allocs += [tensor(n, "ExternalOutput", "float32", SH, "DRAM") for n in ("y", "w", "u", "v")]
    prog = module([function("main", allocs, [
        insn("k1", "NKIKernel", "Pool", func="kfn", func_args=["x", "z"], func_outs=["y", "w"]),
        insn("k2", "NKIKernel", "Pool", func="kfn", func_args=["y", "x"], func_outs=["u", "v"])])],
        nki_functions=[nki_body()])
    _, out = run(prog)
    np.testing.assert_array_equal(out["u"], (X - Z) - X)
    np.testing.assert_array_equal(out["v"], (X - Z) * np.float32(2))


def test_nki_kernel_synthetic_return_clears_semaphores():
    def prog_with(first):
        return module([function("main", [
            tensor("x", "ExternalInput", "float32", SH, "DRAM"),
            tensor("z", "ExternalInput", "float32", SH, "DRAM"),
            tensor("y", "ExternalOutput", "float32", SH, "DRAM"),
            tensor("w", "ExternalOutput", "float32", SH, "DRAM"),
            tensor("u", "ExternalOutput", "float32", SH, "DRAM")],
            [first,
             insn("after", "TensorCopy", "DVE", ins=[whole("z", SH)], outs=[whole("u", SH)],
                  sync=sync_info(waits=[wait(5, "sem-ge-imm", 1)]))])],
            nki_functions=[nki_body()])
    # control: the same wait passes when semaphore 5 was set in main
    ok = insn("set", "TensorCopy", "DVE", ins=[whole("x", SH)], outs=[whole("y", SH)],
              sync=sync_info(updates=[update(5, "sem-add-imm", 1)]))
    with pytest.warns(birsim.BirsimWarning, match="'w' was not fully written"):
        _, out = run(prog_with(ok))
    np.testing.assert_array_equal(out["u"], Z)
    # the callee set semaphore 5 (c2 saw it), but the Return wiped it
    k = insn("k", "NKIKernel", "Pool", func="kfn", func_args=["x", "z"], func_outs=["y", "w"])
    sim = birsim.Simulator(prog_with(k))
    with pytest.raises(birsim.DeadlockError, match="semaphore 5"):
        sim.run({"x": X, "z": Z})
    np.testing.assert_array_equal(sim.read("y"), X - Z)       # the kernel itself ran


@pytest.mark.parametrize("keys", [{}, {"func": "nope"}, {"func": "main"}])
def test_nki_kernel_missing_or_unknown_func_is_error_250(keys):
    prog = module([function("main", [
        tensor("x", "ExternalInput", "float32", SH, "DRAM"),
        tensor("y", "ExternalOutput", "float32", SH, "DRAM")],
        [insn("k", "NKIKernel", "Pool", func_args=["x"], func_outs=["y"], **keys)])],
        nki_functions=[nki_body()])
    with pytest.raises(birsim.ProgramError) as ei:
        birsim.load(prog)
    assert ei.value.code == 250
    assert "I.getFunc() != nullptr" in str(ei.value)


# ---- Model C: stubs and abstract opcodes --------------------------------------------------

STUBS = ["NKIKLIRKernel", "InlineASMBytes", "GenericRelu", "Rng"]   # NonzeroWithCount: NKI docs pin it


def stub(name, op):
    return insn(name, op, "Pool", ins=[whole("x", SH)], outs=[whole("y", SH)])


def test_stubs_leave_memory_alone_and_note_in_execution_order():
    body = [stub("s0", "Rng"), stub("s1", "GenericRelu"),
            loop("L", "i", 0, 2, 1, [stub("s2", "InlineASMBytes"), stub("s3", "NKIKLIRKernel")]),
            stub("s4", "GenericRelu"), stub("s5", "Rng")]
    with pytest.warns(birsim.BirsimWarning, match="is not simulated"):
        sim, out = run(world(*body), zero_copy=False)   # assert_untouched reads them all
    assert sim.notes == ["Rng;", "GenericRelu;", "InlineASMBytes;", "NKIKLIRKernel;",
                         "InlineASMBytes;", "NKIKLIRKernel;", "GenericRelu;", "Rng;"]
    # each stubbed instruction is also a diagnostic in sim.warnings (docs/spec/BIR-JSON.md)
    assert sum("is not simulated" in w for w in sim.warnings) == 8
    assert any("'s3'" in w and "NKIKLIRKernel" in w for w in sim.warnings)
    assert_untouched(sim)
    np.testing.assert_array_equal(out["y"], Z)
    with pytest.warns(birsim.BirsimWarning):
        sim.run({"x": X, "z": Z})                        # notes are per run
    assert len(sim.notes) == 8


@pytest.mark.parametrize("op", STUBS)
def test_stub_is_an_error_when_strict(op):
    sim = birsim.Simulator(world(stub("s", op)), strict=True, zero_copy=False)
    with pytest.raises(birsim.SimulationError, match=op) as ei:
        sim.run({"x": X, "z": Z})
    assert ei.value.instruction == "s"
    assert_untouched(sim)


@pytest.mark.parametrize("op", ["Generic", "MatmultBase", "DMA", "Collective", "DMADescriptor",
                                "Terminator"])
def test_abstract_opcodes_are_rejected_at_load(op):
    with pytest.raises(birsim.ProgramError, match=op):
        birsim.load(world(insn("a", op, "Pool")))


# ---- the RMSNorm example --------------------------------------------------------------------

def rmsnorm_ref(x, gamma, eps=1e-6):
    x = x.astype(np.float64)
    return x / np.sqrt((x * x).mean(axis=1, keepdims=True) + eps) * gamma


def example_inputs():
    rng = np.random.default_rng(11)
    return (rng.standard_normal((128, 512)).astype(np.float32) * 2,
            rng.uniform(0.5, 1.5, (1, 512)).astype(np.float32))


def test_rmsnorm_example_json_is_what_the_builder_writes():
    spec = importlib.util.spec_from_file_location("_build_examples",
                                                  os.path.join(ROOT, "examples", "build_examples.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.EXAMPLES["rmsnorm_customop.json"] is mod.rmsnorm_customop
    with open(os.path.join(ROOT, "examples", "rmsnorm_customop.json")) as f:
        assert json.load(f) == mod.rmsnorm_customop()


@pytest.fixture
def rmsnorm_unregistered(monkeypatch):
    """No 'rmsnorm' kernel registered during the test; whatever was registered before (the
    examples' rmsnorm_kernel module, imported by other rooms' tests in this process) is
    put back afterwards, so the outcome does not depend on which tests ran first."""
    from birsim.kernels import _REGISTRY
    monkeypatch.delitem(_REGISTRY, "rmsnorm", raising=False)


def test_rmsnorm_example_with_registered_python_kernel(rmsnorm_unregistered):
    spec = importlib.util.spec_from_file_location("_rmsnorm_kernel",
                                                  os.path.join(ROOT, "examples", "rmsnorm_kernel.py"))
    mod = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(mod)
        assert "rmsnorm" in birsim.kernels()
        x, gamma = example_inputs()
        sim = birsim.Simulator(os.path.join(ROOT, "examples", "rmsnorm_customop.json"))
        y = sim.run({"x": x, "gamma": gamma})["y"]
        np.testing.assert_allclose(y, rmsnorm_ref(x, gamma), rtol=1e-5, atol=1e-6)
        assert sim.stats["opcodes"] == {"Load": 2, "CustomOp": 1, "Save": 1,
                                        "GroupResetSemaphores": 1}   # synchronize's reset
    finally:
        unregister("rmsnorm")


def test_rmsnorm_example_through_external_kernel_sim(monkeypatch, rmsnorm_unregistered):
    assert "rmsnorm" not in birsim.kernels()
    monkeypatch.setenv("BIRSIM_KERNEL_MODULE", os.path.join(ROOT, "examples", "rmsnorm_kernel.py"))
    monkeypatch.setenv("BIRSIM_KERNEL_SIM", SHIPPED)
    x, gamma = example_inputs()
    sim = birsim.Simulator(os.path.join(ROOT, "examples", "rmsnorm_customop.json"),
                           kernel_timeout=120)
    y = sim.run({"x": x, "gamma": gamma})["y"]
    np.testing.assert_allclose(y, rmsnorm_ref(x, gamma), rtol=1e-5, atol=1e-6)


def test_benchmark_script_runs():
    """bench/bench_kernels.py runs and prints its table (no timing is checked)."""
    r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "bench_kernels.py"),
                        "--calls", "3", "--repeats", "1", "--external-calls", "2"],
                       capture_output=True, timeout=300, cwd=ROOT,
                       env=dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep
                                + os.environ.get("PATH", "")))
    assert r.returncode == 0, r.stderr.decode()
    lines = r.stdout.decode().splitlines()
    assert lines[1].split()[:2] == ["kernel", "direct"]
    assert [ln.split()[0] for ln in lines[2:4]] == ["rmsnorm", "add_one"]


def test_kernels_are_told_their_core():
    seen = []

    def fn(name, inputs, config):
        seen.append(config["core"])
        return inputs[0] + 1

    sim = birsim.Simulator(xy_op("inc"), cores=2, kernel_sim=fn)
    sim.run({"x": X, "z": Z})
    assert sorted(seen) == [0, 1]
