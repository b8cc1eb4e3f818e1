"""The AVX-512 element rows (k_simd.c, issue 24) give the bits of the portable loops.

On CPUs with AVX-512F, the ALU's rows (TensorTensor, Reciprocal, every kernel calling
bs_alu_row_f32*) for add, subtract, mult, divide, max, min and bypass, TensorScalar /
TensorScalarPtr's two stages (fused into one pass) and Activation's affine step with
Square / Identity / Copy (one pass) run as 16-lane vector loops; ``BIRSIM_ELT_ISA=0``
forces the portable loops. Here every such instruction runs on edge values (NaNs with
different payloads in both operands, +-inf, +-0, denormals, the largest finite values),
on widths with every tail after a 16- and 64-lane step, dense, strided (through the
kernels' buffers), offset and in place:

- against an independent NumPy fp32 reference (max/min as ``l > r ? l : r``, each stage
  rounded), NaN positions and every other bit;
- against the portable loops in a fresh process (the path is chosen once per process),
  bit for bit, NaN payloads included, except where two NaNs meet: which payload an op
  of two NaNs returns is not pinned down (x86 returns its first operand's; the compiler
  may swap the operands of add and mult, and the portable loops' scalar remainder does).
  The vector forms return the left operand's.
"""

import json
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import birsim
from birsim import build as B

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

P = 5
WIDTHS = [1, 15, 16, 17, 63, 64, 65, 1037]      # 1037 = 64 * 16 + 13
EDGE_BITS = [
    0x7fc00000, 0xffc00000, 0x7fc12345, 0x7f800001, 0xff812345, 0x7fbfffff,   # NaNs
    0x7f800000, 0xff800000, 0x00000000, 0x80000000,                          # +-inf, +-0
    0x00000001, 0x80000001, 0x007fffff, 0x807fffff, 0x00800000, 0x80800000,  # denormals
    0x7f7fffff, 0xff7fffff, 0x3f800000, 0xbf800000, 0x1f800000, 0x5f800000,
]
OPS = ["add", "subtract", "mult", "divide", "max", "min"]


def _data(shape, seed):
    """Random values with the edge bits at seed-dependent places (so two operands pair
    different edges, NaN with NaN among them)."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 3).astype(np.float32)
    flat = x.reshape(-1).view(np.uint32)
    edges = np.array(EDGE_BITS, np.uint32)
    idx = rng.permutation(flat.size)[:min(flat.size, 3 * edges.size)]
    flat[idx] = np.resize(edges, idx.size)
    return x


def _layout(name, F):
    """(tensor width, operand for [P, F] in that layout)."""
    if name == "dense":
        return F, lambda t: B.whole(t, [P, F])
    if name == "strided":                       # every other element: buffered rows
        return 2 * F, lambda t: B.ap(t, [[2 * F, P], [2, F]])
    if name == "offset":                        # one element in: unaligned rows
        return F + 1, lambda t: B.ap(t, [[F + 1, P], [1, F]], offset=1)
    raise ValueError(name)


def _run_y(prog, ins, layout):
    """The program's output y; a strided or offset layout writes only part of y, and the
    run says so (the warning is asserted, not left to the log)."""
    if layout == "dense":
        with warnings.catch_warnings():
            warnings.simplefilter("error", birsim.BirsimWarning)
            return birsim.Simulator(prog).run(ins)["y"]
    with pytest.warns(birsim.BirsimWarning, match="output 'y' was not fully written"):
        return birsim.Simulator(prog).run(ins)["y"]


def _run(code_of, F, layout, nin):
    """One instruction over inputs a (and b), output y; returns (inputs, y as [P, F])."""
    W, op = _layout(layout, F)
    names = ["a", "b", "c", "d"][:nin]
    allocs = [B.tensor(n, "ExternalInput", "float32", [P, W]) for n in names]
    allocs.append(B.tensor("y", "ExternalOutput", "float32", [P, W]))
    ins = {n: _data((P, W), 1000 * F + 10 * i + len(layout)) for i, n in enumerate(names)}
    prog = B.module([B.function("main", allocs, [code_of(op)])])
    out = _run_y(prog, ins, layout)
    pick = {"dense": lambda v: v, "strided": lambda v: v[:, ::2],
            "offset": lambda v: v[:, 1:]}[layout]
    return {n: pick(v) for n, v in ins.items()}, pick(out)


def _col_tensor(name):
    return B.tensor(name, "ExternalInput", "float32", [P, 1])


# ---- the cases: name -> (run() -> (got, want)) ------------------------------------------

def _f(x):
    return np.asarray(x, np.float32)


def np_alu(op, l, r):
    l, r = np.broadcast_arrays(_f(l), _f(r))
    if op == "bypass":
        return l.copy()
    if op == "max":
        return np.where(l > r, l, r)
    if op == "min":
        return np.where(l < r, l, r)
    return {"add": np.add, "subtract": np.subtract, "mult": np.multiply,
            "divide": np.divide}[op](l, r, dtype=np.float32)


def _tt_case(op, F, layout, inplace=False):
    def run():
        if inplace:                             # out0 is in0: y = y op b
            W, opnd = _layout(layout, F)
            allocs = [B.tensor("b", "ExternalInput", "float32", [P, W]),
                      B.tensor("y", "ExternalOutput", "float32", [P, W]),
                      B.tensor("a", "ExternalInput", "float32", [P, W])]
            ins = {"a": _data((P, W), F + 7), "b": _data((P, W), F + 8)}
            code = [B.tensor_copy(opnd("a"), opnd("y")),
                    B.tensor_tensor(opnd("y"), opnd("b"), opnd("y"), op)]
            prog = B.module([B.function("main", allocs, code)], synchronize=True)
            got = _run_y(prog, ins, layout)
            pick = {"dense": lambda v: v, "strided": lambda v: v[:, ::2],
                    "offset": lambda v: v[:, 1:]}[layout]
            a, b = pick(ins["a"]), pick(ins["b"])
            return pick(got), np_alu(op, a, b), _two_nans(a, b)
        ins, got = _run(lambda o: B.tensor_tensor(o("a"), o("b"), o("y"), op), F, layout, 2)
        return got, np_alu(op, ins["a"], ins["b"]), _two_nans(ins["a"], ins["b"])
    return run


def _ts_case(op0, op1, rev0, rev1, c0, c1, F, layout):
    def run():
        ins, got = _run(lambda o: B.tensor_scalar(o("a"), o("y"), op0, c0, op1, c1,
                                                  reverse0=rev0, reverse1=rev1),
                        F, layout, 1)
        s = np_alu(op0, c0, ins["a"]) if rev0 else np_alu(op0, ins["a"], c0)
        two = _two_nans(ins["a"], c0, c1)
        if op1 is None:
            return got, s, two
        return got, np_alu(op1, c1, s) if rev1 else np_alu(op1, s, c1), two
    return run


def _tsp_case(op0, op1, rev0, F, layout):
    """TensorScalarPtr with both scalars per partition ([P, 1] operands)."""
    def run():
        W, opnd = _layout(layout, F)
        allocs = [B.tensor("a", "ExternalInput", "float32", [P, W]),
                  _col_tensor("s0"), _col_tensor("s1"),
                  B.tensor("y", "ExternalOutput", "float32", [P, W])]
        s0 = _f([[np.nan], [-0.0], [np.inf], [1e-40], [-2.5]])
        s1 = _f([[3.0], [np.float32(3.4e38)], [-np.inf], [0.0], [np.nan]])
        ins = {"a": _data((P, W), F + 3), "s0": s0, "s1": s1}
        col = lambda n: B.ap(n, [[1, P], [1, 1]])       # noqa: E731
        code = [B.insn("TensorScalarPtr", "DVE", [opnd("a"), col("s0"), col("s1")],
                       [opnd("y")], op0=op0, op1=op1, reverse0=rev0)]
        got = _run_y(B.module([B.function("main", allocs, code)]), ins, layout)
        pick = {"dense": lambda v: v, "strided": lambda v: v[:, ::2],
                "offset": lambda v: v[:, 1:]}[layout]
        a = pick(ins["a"])
        s = np_alu(op0, s0, a) if rev0 else np_alu(op0, a, s0)
        return pick(got), np_alu(op1, s, s1), _two_nans(a, s0, s1)
    return run


def _act_case(func, scale, bias, F, layout):
    def run():
        W, opnd = _layout(layout, F)
        allocs = [B.tensor("a", "ExternalInput", "float32", [P, W]), _col_tensor("bb"),
                  B.tensor("y", "ExternalOutput", "float32", [P, W])]
        bb = _f([[0.5], [-0.0], [np.inf], [1e-40], [np.nan]])
        ins = {"a": _data((P, W), F + 5), "bb": bb}
        kw = {"scale": scale}
        if bias == "ptr":
            kw["bias"] = B.ap("bb", [[1, P], [1, 1]])
        code = [B.activation(opnd("a"), opnd("y"), func, **kw)]
        got = _run_y(B.module([B.function("main", allocs, code)]), ins, layout)
        pick = {"dense": lambda v: v, "strided": lambda v: v[:, ::2],
                "offset": lambda v: v[:, 1:]}[layout]
        b = bb if bias == "ptr" else _f(0.0)
        t = np_alu("add", np_alu("mult", pick(ins["a"]), scale), b)
        return (pick(got), (np_alu("mult", t, t) if func == "Square" else t),
                _two_nans(pick(ins["a"]), b))
    return run


def _recip_case(F, layout):
    def run():
        ins, got = _run(lambda o: B.reciprocal(o("a"), o("y")), F, layout, 1)
        return got, np_alu("divide", 1.0, ins["a"]), _two_nans(ins["a"])
    return run


def _two_nans(x, *others):
    """Where x is NaN and so is one of the other operands (broadcast to x's shape)."""
    x = _f(x)
    other = np.zeros(x.shape, bool)
    for o in others:
        other |= np.broadcast_to(np.isnan(_f(o)), x.shape)
    return np.isnan(x) & other


def cases():
    out = {}
    for op in OPS:
        for layout in ("dense", "strided", "offset"):
            out["tt-%s-%s" % (op, layout)] = _tt_case(op, 1037, layout)
        out["tt-%s-inplace" % op] = _tt_case(op, 1037, "dense", inplace=True)
    for F in WIDTHS:
        out["tt-subtract-w%d" % F] = _tt_case("subtract", F, "dense")
        out["ts-sub-mult-w%d" % F] = _ts_case("subtract", "mult", False, False, 0.25, -3.0,
                                              F, "dense")
        out["act-square-w%d" % F] = _act_case("Square", 1.0, "ptr", F, "dense")
    for op0 in OPS + ["bypass"]:
        for op1 in [None, "add", "subtract", "divide", "max", "bypass"]:
            for rev0, rev1 in ((False, False), (True, False), (False, True), (True, True)):
                if op1 is None and rev1:
                    continue
                out["ts-%s-%s-%d%d" % (op0, op1, rev0, rev1)] = _ts_case(
                    op0, op1, rev0, rev1, -1.5, 1e-39, 67, "dense")
    for op0, op1 in (("subtract", "mult"), ("mult", "bypass"), ("divide", "min"),
                     ("max", "subtract")):
        for rev0 in (False, True):
            for layout in ("dense", "strided", "offset"):
                out["tsp-%s-%s-%d-%s" % (op0, op1, rev0, layout)] = _tsp_case(
                    op0, op1, rev0, 1037, layout)
    for func in ("Square", "Identity", "Copy"):
        for scale in (1.0, -2.5):
            for bias in (None, "ptr"):
                for layout in ("dense", "strided", "offset"):
                    out["act-%s-%g-%s-%s" % (func, scale, bias, layout)] = _act_case(
                        func, scale, bias, 1037, layout)
    for layout in ("dense", "strided"):
        out["recip-%s" % layout] = _recip_case(1037, layout)
    return out


def results():
    """name -> (hex bits of birsim's output, positions where two NaNs met), every case,
    on this process's path."""
    out = {}
    for name, run in cases().items():
        got, _, two = run()
        out[name] = (np.ascontiguousarray(got).tobytes().hex(),
                     np.flatnonzero(two).tolist())
    return out


def _assert_bits(got, want, name):
    got, want = _f(got), _f(want)
    assert got.shape == want.shape, name
    assert np.array_equal(np.isnan(got), np.isnan(want)), name
    keep = ~np.isnan(want)
    bad = np.flatnonzero(got[keep].view(np.uint32) != want[keep].view(np.uint32))
    assert bad.size == 0, "%s: %d differ, first %r vs %r" % (
        name, bad.size, got[keep][bad[:1]], want[keep][bad[:1]])


@pytest.mark.parametrize("name", sorted(cases()))
def test_against_numpy(name):
    got, want, _ = cases()[name]()
    _assert_bits(got, want, name)


_CHILD = """
import json, sys
sys.path.insert(0, sys.argv[1])
import test_compute_elt_simd as t
print(json.dumps(t.results()))
"""


def test_vector_and_portable_same_bits():
    """This process's path (AVX-512F where the CPU has it) and the portable loops
    (BIRSIM_ELT_ISA=0 in a fresh process) agree bit for bit, NaN payloads included."""
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, BIRSIM_ELT_ISA="0")
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(here), here,
                                         env.get("PYTHONPATH", "")])
    out = subprocess.run([sys.executable, "-c", _CHILD, here], env=env, check=True,
                         capture_output=True, text=True, timeout=300).stdout
    portable = json.loads(out.strip().splitlines()[-1])
    mine = results()
    assert sorted(portable) == sorted(mine)
    bad = []
    for k, (bits, two) in mine.items():
        a = np.frombuffer(bytes.fromhex(bits), np.uint32)
        b = np.frombuffer(bytes.fromhex(portable[k][0]), np.uint32)
        assert two == portable[k][1], k
        diff = np.flatnonzero(a != b)
        # Two NaNs meeting: either payload (the portable loops' scalar remainder of a
        # commutative op may swap operands); still a NaN, checked by test_against_numpy.
        if not set(diff.tolist()) <= set(two):
            bad.append(k)
    assert not bad, "differ: %s" % bad[:10]


# ---- large DMA writes to DRAM: streaming stores (k_simd.c bs_simd_copy_stream) -----------

@pytest.mark.parametrize("dtype,F,off,doff", [
    ("float32", 2048, 0, 0),          # exactly 1 MiB: the AVX-512 threshold
    ("float32", 2051, 0, 3),          # destination 12 bytes past a line: a head
    ("float32", 2113, 5, 0),          # source unaligned, a tail after 256-byte steps
    ("uint8", 8195, 1, 7),            # odd byte counts
    ("float32", 2047, 0, 1),          # just below it: memmove (AVX-512), streaming (AVX2)
    ("float32", 512, 0, 0),           # exactly 256 KiB: the AVX2 threshold
    ("float32", 515, 3, 5),           # a head and a tail after 128-byte steps
    ("float32", 511, 0, 1),           # just below both: memmove
])
def test_large_save_copies_bytes(dtype, F, off, doff):
    """DRAM -> SBUF -> DRAM copies of >= 1 MiB (AVX-512) or >= 256 KiB (AVX2 without
    AVX-512) go through streaming stores to DRAM: they move every byte (edge bit patterns
    included) and leave the bytes around the destination alone."""
    P = 128                           # 128 rows of F elements, one dense segment
    W = F + 8
    allocs = [B.tensor("x", "ExternalInput", dtype, [P, W], mem="DRAM"),
              B.tensor("t", "Internal", dtype, [P, F]),
              B.tensor("y", "ExternalOutput", dtype, [P * W + 16], mem="DRAM")]
    rows = lambda n, o: B.ap(n, [[W, P], [1, F]], dtype, offset=o or None)  # noqa: E731
    code = [B.load_(rows("x", off), B.whole("t", [P, F], dtype)),
            B.save(B.whole("t", [P, F], dtype), B.ap("y", [[F, P], [1, F]], dtype,
                                                     offset=doff or None))]
    if dtype == "uint8":
        x = np.random.default_rng(F).integers(0, 256, (P, W), dtype=np.uint8)
    else:
        x = _data((P, W), F)
    prog = B.module([B.function("main", allocs, code)], synchronize=True)
    with pytest.warns(birsim.BirsimWarning, match="not fully written"):
        y = birsim.Simulator(prog).run({"x": x})["y"]       # never-written bytes read 0
    want = np.zeros(P * W + 16, x.dtype)
    want[doff:doff + P * F] = x[:, off:off + F].reshape(-1)
    assert np.array_equal(y.view(np.uint8), want.view(np.uint8))
