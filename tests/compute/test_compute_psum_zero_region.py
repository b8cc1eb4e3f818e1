"""Matmult / MatmultMx / MatmultSparse `psum_zero_region` (docs/spec/machine-model.md §4.4: a start
"memsets the PSUM region to 0 (2^psum_zero_region banks), then writes"), birsim's reading
(README choices): with the key given (r in 0..3) and the start bit set, the window of 2^r
PSUM banks (2 KiB per partition each), aligned to 2^r banks, that holds the output's first
byte is zeroed on the output's partitions before the result is written; bytes of the same
window outside the output (other tensors too) read 0 afterwards. Checked against NumPy."""

import warnings

import numpy as np
import pytest

import birsim

from bir import ap, function, insn, module, tensor, whole

BANK = 512                       # fp32 elements per partition in one 2 KiB bank
PP, FF = 8, 4 * 1024             # the probe tensor: 8 partitions x 16 KiB (all 8 banks)
K, M, N = 4, 4, 8


def run_prog(r, flag=2, at=(0, 576), placed=True, op="Matmult", extra=None):
    """Fill `big` (PSUM, [PP, FF] fp32) with a ramp, then one `op` writing [M, N] at
    partition at[0], element at[1] of `big`, then read `big` back."""
    fill = (np.arange(PP * FF, dtype=np.float32).reshape(PP, FF) % 1000) + 1.0
    rng = np.random.default_rng(0)
    a = rng.integers(-3, 4, (K, N)).astype(np.float32)
    b = rng.integers(-3, 4, (K, M)).astype(np.float32)
    big = (tensor("big", "Internal", "float32", (PP, FF), "PSUM", base=0, addr=0) if placed
           else tensor("big", "Internal", "float32", (PP, FF), "PSUM"))
    allocs = [tensor("f", "ExternalInput", "float32", (PP, FF), "DRAM"),
              tensor("a", "ExternalInput", "float32", (K, N), "DRAM"),
              tensor("b", "ExternalInput", "float32", (K, M), "DRAM"), big,
              tensor("y", "ExternalOutput", "float32", (PP, FF), "DRAM")]
    keys = {"accumulation_flag": flag}
    if r is not None:
        keys["psum_zero_region"] = r
    keys.update(extra or {})
    out = ap("big", [[FF, M], [1, N]], "float32", offset=at[0] * FF + at[1])
    body = [insn("fill", "TensorCopy", "DVE", ins=[whole("f", (PP, FF))],
                 outs=[whole("big", (PP, FF))]),
            insn("mm", op, "PE", ins=[whole("a", (K, N)), whole("b", (K, M))], outs=[out],
                 **keys),
            insn("rd", "TensorCopy", "DVE", ins=[whole("big", (PP, FF))],
                 outs=[whole("y", (PP, FF))])]
    prog = module([function("main", allocs, body)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", birsim.BirsimWarning)
        y = birsim.Simulator(prog).run({"f": fill, "a": a, "b": b})["y"]
    return y, fill, b.T @ a


def expected(fill, prod, at, window=None):
    """NumPy: the fill, the window [w0, w1) (elements) zeroed on the output's partitions,
    then the product at its place."""
    e = fill.copy()
    p0, f0 = at
    if window is not None:
        e[p0:p0 + M, window[0]:window[1]] = 0.0
    e[p0:p0 + M, f0:f0 + N] = prod
    return e


@pytest.mark.parametrize("r,window", [(0, (BANK, 2 * BANK)), (1, (0, 2 * BANK)),
                                      (2, (0, 4 * BANK)), (3, (0, 8 * BANK))])
def test_start_zeroes_the_aligned_window(r, window):
    y, fill, prod = run_prog(r, at=(0, 576))          # element 576: byte 2304, bank 1
    np.testing.assert_array_equal(y, expected(fill, prod, (0, 576), window))


def test_window_is_aligned_not_started_at_the_output_bank():
    """Output in bank 3 with r = 1: banks 2..3 are zeroed (aligned), not banks 3..4."""
    y, fill, prod = run_prog(1, at=(2, 3 * BANK + 40))
    np.testing.assert_array_equal(y, expected(fill, prod, (2, 3 * BANK + 40),
                                              (2 * BANK, 4 * BANK)))
    assert (y[2:6, 4 * BANK:5 * BANK] == fill[2:6, 4 * BANK:5 * BANK]).all()


def test_only_the_output_partitions_are_zeroed():
    y, fill, prod = run_prog(0, at=(3, 100))
    np.testing.assert_array_equal(y, expected(fill, prod, (3, 100), (0, BANK)))
    np.testing.assert_array_equal(y[:3], fill[:3])
    np.testing.assert_array_equal(y[7:], fill[7:])


@pytest.mark.parametrize("flag", [0, 1])
def test_no_start_no_zeroing(flag):
    y, fill, prod = run_prog(2, flag=flag, at=(0, 576))
    e = fill.copy()
    e[0:M, 576:576 + N] = prod + (fill[0:M, 576:576 + N] if flag == 1 else 0)
    np.testing.assert_array_equal(y, e)


def test_key_absent_writes_only_the_output():
    y, fill, prod = run_prog(None, at=(0, 576))
    np.testing.assert_array_equal(y, expected(fill, prod, (0, 576)))


def test_unplaced_psum_tensor_is_its_own_bank_space():
    y, fill, prod = run_prog(0, at=(1, 600), placed=False)
    np.testing.assert_array_equal(y, expected(fill, prod, (1, 600), (BANK, 2 * BANK)))


def test_output_past_the_window_is_a_simulation_error():
    with pytest.raises(birsim.SimulationError, match="psum_zero_region 0.*past the 1-bank window"):
        run_prog(0, at=(0, BANK - 4))                  # elements 508..515 straddle banks 0, 1


def test_transpose_start_zeroes_too():
    """is_transpose (a bit copy of the stationary operand) goes through the same start."""
    fill = (np.arange(PP * FF, dtype=np.float32).reshape(PP, FF) % 1000) + 1.0
    b = np.arange(K * M, dtype=np.float32).reshape(K, M)
    eye = np.eye(K, dtype=np.float32)
    allocs = [tensor("f", "ExternalInput", "float32", (PP, FF), "DRAM"),
              tensor("a", "ExternalInput", "float32", (K, K), "DRAM"),
              tensor("b", "ExternalInput", "float32", (K, M), "DRAM"),
              tensor("big", "Internal", "float32", (PP, FF), "PSUM", base=0, addr=0),
              tensor("y", "ExternalOutput", "float32", (PP, FF), "DRAM")]
    out = ap("big", [[FF, M], [1, K]], "float32", offset=BANK + 7)
    body = [insn("fill", "TensorCopy", "DVE", ins=[whole("f", (PP, FF))],
                 outs=[whole("big", (PP, FF))]),
            insn("mm", "Matmult", "PE", ins=[whole("a", (K, K)), whole("b", (K, M))],
                 outs=[out], accumulation_flag=2, is_transpose=True, psum_zero_region=0),
            insn("rd", "TensorCopy", "DVE", ins=[whole("big", (PP, FF))],
                 outs=[whole("y", (PP, FF))])]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", birsim.BirsimWarning)
        y = birsim.Simulator(module([function("main", allocs, body)])).run(
            {"f": fill, "a": eye, "b": b})["y"]
    e = fill.copy()
    e[0:M, BANK:2 * BANK] = 0.0
    e[0:M, BANK + 7:BANK + 7 + K] = b.T
    np.testing.assert_array_equal(y, e)


def test_matmult_sparse_start_zeroes_too():
    fill = (np.arange(PP * FF, dtype=np.float32).reshape(PP, FF) % 1000) + 1.0
    rng = np.random.default_rng(4)
    x = rng.integers(-2, 3, (128, 4 * N)).astype(np.float32)
    w = rng.integers(-2, 3, (128, M)).astype(np.float32)
    t = np.zeros((32, M), np.int16)                    # every row picks position 0: k = g
    allocs = [tensor("f", "ExternalInput", "float32", (PP, FF), "DRAM"),
              tensor("x", "ExternalInput", "float32", (128, 4 * N), "DRAM"),
              tensor("w", "ExternalInput", "float32", (128, M), "DRAM"),
              tensor("t", "ExternalInput", "int16", (32, M), "DRAM"),
              tensor("big", "Internal", "float32", (PP, FF), "PSUM", base=0, addr=0),
              tensor("y", "ExternalOutput", "float32", (PP, FF), "DRAM")]
    out = ap("big", [[FF, M], [1, N]], "float32", offset=2 * BANK + 5)
    body = [insn("fill", "TensorCopy", "DVE", ins=[whole("f", (PP, FF))],
                 outs=[whole("big", (PP, FF))]),
            insn("mm", "MatmultSparse", "PE", ins=[whole("x", (128, 4 * N)),
                                                   whole("w", (128, M)),
                                                   whole("t", (32, M), "int16")],
                 outs=[out], accumulation_flag=2, psum_zero_region=1),
            insn("rd", "TensorCopy", "DVE", ins=[whole("big", (PP, FF))],
                 outs=[whole("y", (PP, FF))])]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", birsim.BirsimWarning)
        y = birsim.Simulator(module([function("main", allocs, body)])).run(
            {"f": fill, "x": x, "w": w, "t": t})["y"]
    xd = x.reshape(128, 4, N).transpose(1, 0, 2).reshape(512, N)
    k = np.arange(128) % 32                            # d = 0: dense row g
    prod = sum(w[r][:, None] * xd[k[r]] for r in range(128))
    e = fill.copy()
    e[0:M, 2 * BANK:4 * BANK] = 0.0
    e[0:M, 2 * BANK + 5:2 * BANK + 5 + N] = prod
    np.testing.assert_array_equal(y, e)


def test_psum_zero_region_warns():
    allocs = [tensor("a", "Internal", "float32", (K, N), "SB"),
              tensor("b", "Internal", "float32", (K, M), "SB"),
              tensor("p", "Internal", "float32", (M, N), "PSUM")]
    prog = module([function("main", allocs, [
        insn("mm", "Matmult", "PE", ins=[whole("a", (K, N)), whole("b", (K, M))],
             outs=[whole("p", (M, N))], accumulation_flag=2, psum_zero_region=0)])])
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        birsim.load(prog)
    assert any("psum_zero_region" in str(m.message) and "birsim's reading" in str(m.message)
               for m in w if issubclass(m.category, birsim.BirsimWarning))


@pytest.mark.parametrize("op", ["Matmult", "MatmultMx", "MatmultSparse"])
@pytest.mark.parametrize("bad", [4, -1, True, 1.5, "1"])
def test_bad_psum_zero_region_is_a_program_error(op, bad):
    allocs = [tensor("a", "Internal", "float32", (K, N), "SB"),
              tensor("p", "Internal", "float32", (M, N), "PSUM")]
    prog = module([function("main", allocs, [
        insn("mm", op, "PE", ins=[whole("a", (K, N)), whole("a", (K, N))],
             outs=[whole("p", (M, N))], accumulation_flag=2, psum_zero_region=bad)])])
    with pytest.raises(birsim.ProgramError, match="psum_zero_region"):
        birsim.load(prog)


def test_matmult_mx_start_zeroes_too():
    from birsim import reference as ref
    rng = np.random.default_rng(9)
    dt = "float8_e4m3fn_x4"
    mv, ms = ref.quantize_mx(ref.cast(rng.standard_normal((32, 4 * N)).astype(np.float32),
                                      "bfloat16"), dt)
    st, ss = ref.quantize_mx(ref.cast(rng.standard_normal((32, 4 * M)).astype(np.float32),
                                      "bfloat16"), dt)
    fill = (np.arange(PP * FF, dtype=np.float32).reshape(PP, FF) % 1000) + 1.0
    allocs = [tensor("f", "ExternalInput", "float32", (PP, FF), "DRAM"),
              tensor("mv", "ExternalInput", dt, (32, N), "DRAM"),
              tensor("st", "ExternalInput", dt, (32, M), "DRAM"),
              tensor("ms", "ExternalInput", "uint8", ms.shape, "DRAM"),
              tensor("ss", "ExternalInput", "uint8", ss.shape, "DRAM"),
              tensor("big", "Internal", "float32", (PP, FF), "PSUM", base=0, addr=0),
              tensor("y", "ExternalOutput", "float32", (PP, FF), "DRAM")]
    out = ap("big", [[FF, M], [1, N]], "float32", offset=FF + 5 * BANK + 3)
    body = [insn("fill", "TensorCopy", "DVE", ins=[whole("f", (PP, FF))],
                 outs=[whole("big", (PP, FF))]),
            insn("mm", "MatmultMx", "PE", ins=[whole("mv", (32, N), dt), whole("st", (32, M), dt),
                                               whole("ms", ms.shape, "uint8"),
                                               whole("ss", ss.shape, "uint8")],
                 outs=[out], accumulation_flag=2, psum_zero_region=2),
            insn("rd", "TensorCopy", "DVE", ins=[whole("big", (PP, FF))],
                 outs=[whole("y", (PP, FF))])]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", birsim.BirsimWarning)
        y = birsim.Simulator(module([function("main", allocs, body)])).run(
            {"f": fill, "mv": mv, "st": st, "ms": ms, "ss": ss})["y"]
    e = fill.copy()
    e[1:1 + M, 4 * BANK:8 * BANK] = 0.0                # bank 5, r = 2: banks 4..7
    e[1:1 + M, 5 * BANK + 3:5 * BANK + 3 + N] = ref.matmult_mx(mv, st, ms, ss, dt, dt)
    np.testing.assert_array_equal(y, e)
