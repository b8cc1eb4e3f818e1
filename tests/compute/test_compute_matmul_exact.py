"""Matmult is bit-exact: every output element is the fp32 sum of rounded products in k
order from +0 (birsim.reference.matmult), whichever tile the CPU runs (BIRSIM_MM_ISA caps
it: 0 = 4-lane, 1 = AVX2, 2 = AVX-512) and however the product is laid out (tails of the
register tiles, strided and aliased operands, accumulate onto PSUM)."""

import numpy as np
import pytest

from birsim import reference as ref
from test_compute_reference_diff import gen, rng_for, run_matmul

# (33, 20, 300): the packing decodes 256 columns of a row at a time; the second chunk is
# partial and its last panel padded
SHAPES = [(128, 128, 512), (3, 9, 33), (1, 1, 1), (17, 8, 32), (128, 7, 100), (5, 127, 31),
          (64, 33, 65), (33, 20, 300)]
DTYPES = [("float32", "float32"), ("bfloat16", "bfloat16"), ("float8e4", "float32"),
          ("uint8", "float8e5")]


@pytest.fixture(params=["0", "1", "2"], ids=["v4", "avx2", "avx512"])
def isa(request, monkeypatch):
    """Cap the tile width (the CPU may not have the wider ones: then the cap is moot)."""
    monkeypatch.setenv("BIRSIM_MM_ISA", request.param)
    return request.param


def same_bits(got, want):
    got = np.ascontiguousarray(got, np.float32)
    want = np.ascontiguousarray(want, np.float32)
    assert got.shape == want.shape
    bad = np.flatnonzero(got.view(np.uint32) != want.view(np.uint32))
    assert bad.size == 0, "%d of %d elements differ, first at %s: %r != %r" % (
        bad.size, got.size, np.unravel_index(bad[0], got.shape), got.flat[bad[0]],
        want.flat[bad[0]])


@pytest.mark.parametrize("dts", DTYPES, ids="-".join)
@pytest.mark.parametrize("K,M,N", SHAPES)
def test_matmult_bits(isa, dts, K, M, N):
    rng = rng_for("mmx", dts, K, M, N)
    mv = gen(dts[0], (K, N), rng, -3, 3)
    st = gen(dts[1], (K, M), rng, -3, 3)
    got, = run_matmul([mv], [st], [2])
    same_bits(got, ref.matmult(mv, st))


@pytest.mark.parametrize("layouts", [("strided", "contig"), ("poff", "strided"),
                                     ("alias", "poff"), ("contig", "alias")], ids="-".join)
def test_matmult_bits_layouts(isa, layouts):
    rng = rng_for("mmxl", layouts)
    K, M, N = 32, 19, 70
    mv, st = gen("bfloat16", (K, N), rng), gen("float32", (K, M), rng)
    got, = run_matmul([mv], [st], [2], layouts=layouts)
    same_bits(got, ref.matmult(mv, st))


def test_matmult_bits_accumulate(isa):
    """start, then accumulate twice: the scratch result added onto PSUM (not direct)."""
    rng = rng_for("mmxa")
    K, M, N = 40, 12, 50
    pairs = [(gen("float32", (K, N), rng), gen("float32", (K, M), rng)) for _ in range(3)]
    got = run_matmul([p[0] for p in pairs], [p[1] for p in pairs], [2, 1, 1])
    state = None
    for i, f in enumerate([2, 1, 1]):
        state = ref.psum_write(state, np.ones((M, N), bool), ref.matmult(*pairs[i]), f)
        same_bits(got[i], state)


def test_matmult_bits_accumulate_partly_written(isa):
    """Accumulate onto a PSUM tile of which only some partitions were written (Memset
    1.0f): added there, written elsewhere -- in place, tile by tile, per element."""
    from bir import ap
    rng = rng_for("mmxp")
    K, M, N = 24, 21, 45
    mv, st = gen("float32", (K, N), rng), gen("float32", (K, M), rng)
    part = ap("ps", [[N, 11], [1, N]])                 # partitions 0..10
    got, = run_matmul([mv], [st], [1], prefill=0x3F800000, written=part)
    written = np.zeros((M, N), bool)
    written[:11] = True
    same_bits(got, ref.psum_write(np.ones((M, N), np.float32), written,
                                  ref.matmult(mv, st), 1))


@pytest.mark.parametrize("case", ["underflow_both", "underflow_moving", "underflow_stationary",
                                  "overflow", "subnormal"])
def test_matmult_bits_narrow_products_that_round(isa, case):
    """Two bf16 operands take fused multiply-adds on AVX2 with FMA, which give the rounded
    products' bits only when every product is exact in fp32. Here two terms are not: as
    rounded products 2^-149 + 2^-150 sums to 2^-149 (the second product rounds to 0), fused
    to 2^-148; -2^127 + 2^128 is inf (the product overflows), fused 2^127; a subnormal bf16
    value makes a subnormal product. birsim must see this and keep the rounded products."""
    K, M, N = 2, 4, 32
    lo = {"underflow_both": (-75, -74, -75, -75), "underflow_moving": (-100, -49, -100, -50),
          "underflow_stationary": (-49, -100, -50, -100)}
    if case in lo:
        ea0, eb0, ea1, eb1 = lo[case]
        a, b = [2.0 ** ea0, 2.0 ** ea1], [2.0 ** eb0, 2.0 ** eb1]
    elif case == "overflow":
        a, b = [-2.0 ** 63, 2.0 ** 64], [2.0 ** 64, 2.0 ** 64]
    else:
        a, b = [2.0 ** -130, 2.0 ** -130], [2.0 ** -19, 2.0 ** -20]      # 2^-149 + 2^-150
    mv = np.array([[a[k]] * N for k in range(K)], np.float32)
    st = np.array([[b[k]] * M for k in range(K)], np.float32)
    mv, st = ref.cast(mv, "bfloat16"), ref.cast(st, "bfloat16")
    assert np.array_equal(ref.decode(mv)[:, 0], np.float32(a))       # the values are bf16's
    got, = run_matmul([mv], [st], [2])
    with np.errstate(over="ignore", under="ignore"):
        want = ref.matmult(mv, st)
    fused = {"overflow": 2.0 ** 127}.get(case, 2.0 ** -148)
    assert want[0, 0] != np.float32(fused)                            # the cases do differ
    same_bits(got, want)


@pytest.mark.parametrize("operand,col", [("moving", 0), ("moving", 9), ("moving", 63),
                                         ("stationary", 0), ("stationary", 7),
                                         ("stationary", 8), ("stationary", 11)])
def test_matmult_bits_one_product_that_rounds(isa, operand, col):
    """One bf16 column whose products underflow (2^-149 + 2^-150: 2^-149 as rounded
    products, 2^-148 fused) among ordinary ones: the packing must see it wherever it sits.
    The bf16 packing widens 8 columns at a time; the stationary operand's 12 columns fill
    panels of 4 on the narrower tiles (two groups of 8 columns would need 16), so column 8
    to 11 is a last panel of 4; the moving operand's 64 columns fill whole panels."""
    K, M, N = 2, 12, 64
    mv = np.ones((K, N), np.float32)
    st = np.ones((K, M), np.float32)
    if operand == "moving":
        mv[:, col] = 2.0 ** -100
        st[:] = np.float32([[2.0 ** -49], [2.0 ** -50]])
    else:
        mv[:] = np.float32([[2.0 ** -49], [2.0 ** -50]])
        st[:, col] = 2.0 ** -100
    mv, st = ref.cast(mv, "bfloat16"), ref.cast(st, "bfloat16")
    got, = run_matmul([mv], [st], [2])
    with np.errstate(under="ignore"):
        want = ref.matmult(mv, st)
    hit = (col, 0) if operand == "stationary" else (0, col)
    assert want[hit] == np.float32(2.0 ** -149)                   # fused would give 2^-148
    same_bits(got, want)


def test_matmult_bits_specials(isa):
    """Inf, NaN, signed zeros and subnormals go through the tiles like the reference."""
    rng = rng_for("mmxs")
    K, M, N = 9, 10, 40
    mv = gen("float32", (K, N), rng)
    st = gen("float32", (K, M), rng)
    mv[0, :4] = [np.inf, -np.inf, np.nan, -0.0]
    mv[1, 4:8] = [1e-40, -1e-40, 3e38, -3e38]
    st[2, :3] = [-0.0, 1e-42, np.inf]
    st[:, 5] = -0.0
    got, = run_matmul([mv], [st], [2])
    with np.errstate(invalid="ignore", over="ignore"):
        want = ref.matmult(mv, st)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    got, want = got.copy(), want.copy()
    got[nan] = want[nan] = 0
    same_bits(got, want)


# ==== Simulator(threads=...) ==========================================================

def _mm_program(K, M, N, dts, acc_flags=(2,)):
    """Matmuls of in[0] (moving [K, N]) and in[1] (stationary [K, M]) into one PSUM tile,
    copied out after each."""
    from bir import function, insn, module, tensor, whole
    allocs = [tensor("mv", "ExternalInput", dts[0], [K, N]),
              tensor("st", "ExternalInput", dts[1], [K, M]),
              tensor("ps", "Internal", "float32", [M, N], "PSUM")]
    code = []
    for i, f in enumerate(acc_flags):
        allocs.append(tensor("o%d" % i, "ExternalOutput", "float32", [M, N]))
        code += [insn("mm%d" % i, "Matmult", "PE", ins=[whole("mv", (K, N), dts[0]),
                                                        whole("st", (K, M), dts[1])],
                      outs=[whole("ps", (M, N))], accumulation_flag=f),
                 insn("cp%d" % i, "TensorCopy", "DVE", ins=[whole("ps", (M, N))],
                      outs=[whole("o%d" % i, (M, N))])]
    return module([function("main", allocs, code)])


@pytest.mark.parametrize("dts", DTYPES, ids="-".join)
@pytest.mark.parametrize("K,M,N", [(128, 128, 512), (128, 128, 33), (128, 9, 512),
                                   (128, 127, 200), (64, 128, 256)])
def test_threads_bit_identical(isa, dts, K, M, N):
    """threads=2 and 4 give byte-for-byte what threads=1 gives (and the reference), on
    shapes large enough to be split, by panels (wide N) or by blocks (narrow N)."""
    import birsim
    rng = rng_for("mmt", dts, K, M, N)
    mv = gen(dts[0], (K, N), rng, -3, 3)
    st = gen(dts[1], (K, M), rng, -3, 3)
    prog = _mm_program(K, M, N, dts, (2, 1))
    outs = {}
    for t in (1, 2, 4):
        sim = birsim.Simulator(prog, threads=t)
        assert sim.threads == t
        r = sim.run({"mv": mv, "st": st})
        outs[t] = [np.asarray(r["o0"]).tobytes(), np.asarray(r["o1"]).tobytes()]
    assert outs[2] == outs[1] and outs[4] == outs[1]
    want = ref.matmult(mv, st)
    same_bits(np.frombuffer(outs[1][0], np.float32).reshape(M, N), want)
    same_bits(np.frombuffer(outs[1][1], np.float32).reshape(M, N),
              ref.psum_write(want, np.ones((M, N), bool), want, 1))


def test_threads_option():
    import os
    import birsim
    prog = _mm_program(4, 4, 4, ("float32", "float32"))
    assert birsim.Simulator(prog).threads == 1
    n = birsim.Simulator(prog, threads="auto").threads
    assert n == max(1, min(64, len(os.sched_getaffinity(0))))
    for bad in (0, 65, -1, 1.5, True, "two", None):
        with pytest.raises(ValueError, match="threads"):
            birsim.Simulator(prog, threads=bad)


@pytest.mark.skipif(not __import__("os").path.isdir("/proc/self/task") or
                    not hasattr(__import__("os"), "fork"), reason="needs fork() and /proc")
def test_threads_fork_and_free(tmp_path):
    """In a subprocess: the workers start on the first large matmul, a forked child runs
    the same Simulator (inline) with the same bytes, and freeing the Simulator joins them."""
    import subprocess
    import sys
    import textwrap
    script = tmp_path / "fork.py"
    script.write_text(textwrap.dedent("""
        import gc, os, sys
        sys.path[:0] = %r
        import numpy as np, birsim
        from test_compute_matmul_exact import _mm_program
        tasks = lambda: len(os.listdir("/proc/self/task"))
        rng = np.random.default_rng(5)
        data = {"mv": rng.standard_normal((128, 512), dtype=np.float32),
                "st": rng.standard_normal((128, 128), dtype=np.float32)}
        base = tasks()
        sim = birsim.Simulator(_mm_program(128, 128, 512, ("float32", "float32")), threads=3)
        assert tasks() == base, "workers started before they were needed"
        want = np.asarray(sim.run(data)["o0"]).tobytes()
        assert tasks() == base + 2, tasks() - base
        pid = os.fork()
        if pid == 0:
            ok = np.asarray(sim.run(data)["o0"]).tobytes() == want
            os._exit(0 if ok else 3)
        _, status = os.waitpid(pid, 0)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
        assert np.asarray(sim.run(data)["o0"]).tobytes() == want
        del sim
        gc.collect()
        assert tasks() == base, tasks() - base
        print("ok")
    """ % [str(__import__("pathlib").Path(__file__).parent),
           str(__import__("pathlib").Path(__file__).parent.parent)]))
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                       timeout=120, env=dict(__import__("os").environ, OPENBLAS_NUM_THREADS="1"))
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr
