"""Data movement by index: IndirectLoad/Save/SaveAccumulate, the Generic forms, DMACopy with
a vector dynamic offset, Gather (nc_n_gather), IndirectCopy (local_gather) and
TensorCopyDynamicSrc/Dst -- against NumPy oracles written here (fancy indexing), with
random indices including out-of-bounds ones under both ``oob_is_err`` values, the NKI doc
examples (docs/spec/nki-isa-semantics.md §3.15, §3.26, §4 item 21) and bad input."""

import warnings

import numpy as np
import pytest

import birsim
from bir import ap, block, function, imm, insn, module, reg, register, tensor, whole

RNG = np.random.default_rng(10)


def _run(prog, inputs, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", birsim.BirsimWarning)
        sim = birsim.Simulator(prog, **kw)
        return sim.run(inputs), sim


def _gather_prog(opcode, R, W, N, idx_dtype="int32", prefill=True, **keys):
    """out[N, W] := prefill, then `op` moves rows of tab[R, W] by idx[N]."""
    tensors = [tensor("tab", "ExternalInput", "float32", (R, W), "DRAM"),
               tensor("idx", "ExternalInput", idx_dtype, (N, 1), "DRAM"),
               tensor("pre", "ExternalInput", "float32", (N, W), "DRAM"),
               tensor("out", "ExternalOutput", "float32", (N, W), "DRAM")]
    body = []
    if prefill:
        body.append(insn("fill", "DMACopy", "SP", ins=[whole("pre", (N, W))],
                         outs=[whole("out", (N, W))]))
    body.append(insn("g", opcode, "SP", ins=[whole("tab", (R, W)), whole("idx", (N, 1), idx_dtype)],
                     outs=[whole("out", (N, W))], **keys))
    return module([function("main", tensors, [block("b0", *body)])])


def _scatter_prog(opcode, R, W, N, idx_dtype="int32", **keys):
    """out[R, W] := pre, then `op` moves src[N, W] rows to out rows idx[N]."""
    tensors = [tensor("src", "ExternalInput", "float32", (N, W), "DRAM"),
               tensor("idx", "ExternalInput", idx_dtype, (N, 1), "DRAM"),
               tensor("pre", "ExternalInput", "float32", (R, W), "DRAM"),
               tensor("out", "ExternalOutput", "float32", (R, W), "DRAM")]
    body = [insn("fill", "DMACopy", "SP", ins=[whole("pre", (R, W))], outs=[whole("out", (R, W))]),
            insn("s", opcode, "SP", ins=[whole("src", (N, W)), whole("idx", (N, 1), idx_dtype)],
                 outs=[whole("out", (R, W))], **keys)]
    return module([function("main", tensors, [block("b0", *body)])])


def _oracle_gather(tab, idx, pre):
    """NumPy: rows of tab by idx; -1 and out-of-range rows keep the prefill."""
    out = pre.copy()
    ok = (idx >= 0) & (idx < len(tab))
    out[ok] = tab[idx[ok]]
    return out


# ---- IndirectLoad and DMACopy with a vector dynamic offset ------------------------------

@pytest.mark.parametrize("op", ["IndirectLoad", "DMACopy", "GenericIndirectLoad"])
@pytest.mark.parametrize("idx_dtype", ["int32", "uint32", "int64", "uint16"])
def test_gather_rows_random_indices_skip_out_of_bounds(op, idx_dtype):
    R, W, N = 50, 24, 40
    tab = RNG.standard_normal((R, W)).astype(np.float32)
    pre = np.full((N, W), -1.0, np.float32)
    idx = RNG.integers(0, R, N)
    idx[[3, 17]] = [R, R + 7]                     # out of bounds: skipped
    idx[5] = -1                                   # unused slot marker: skipped
    raw = idx.astype(np.int64).astype(np.dtype(idx_dtype))   # -1 wraps to all-ones
    out, _ = _run(_gather_prog(op, R, W, N, idx_dtype, oob_is_err=False),
                  {"tab": tab, "idx": raw.reshape(N, 1), "pre": pre})
    np.testing.assert_array_equal(out["out"], _oracle_gather(tab, idx, pre))


@pytest.mark.parametrize("op", ["IndirectLoad", "DMACopy"])
def test_gather_out_of_bounds_is_an_error_naming_the_element(op):
    R, W, N = 16, 8, 10
    idx = np.arange(N, dtype=np.int32).reshape(N, 1)
    idx[6] = 99
    prog = _gather_prog(op, R, W, N, oob_is_err=True)
    sim = birsim.Simulator(prog)
    with pytest.raises(birsim.MemoryAccessError, match=r"index 99 \(element 6 of the index "
                       r"tensor\) is out of bounds for axis of size 16") as e:
        sim.run({"tab": np.ones((R, W), np.float32), "idx": idx,
                 "pre": np.full((N, W), -1, np.float32)})
    assert e.value.instruction == "g"
    # Nothing outside the instruction's outputs changed, and not even them: the prefill
    # is intact (all indices are checked before a row moves).
    np.testing.assert_array_equal(sim.read("out"), np.full((N, W), -1, np.float32))


def test_oob_is_err_defaults_to_true():
    prog = _gather_prog("IndirectLoad", 4, 2, 2)
    with pytest.raises(birsim.MemoryAccessError, match="out of bounds"):
        _run(prog, {"tab": np.ones((4, 2), np.float32), "idx": np.array([[0], [4]], np.int32),
                    "pre": np.zeros((2, 2), np.float32)})


def test_dma_copy_doc_example_gather_even_rows_with_skip():
    """nki-isa-semantics §4 item 21: gather rows 2*arange(64); skip keeps the -1 prefill."""
    R, W, N = 100, 16, 64
    tab = RNG.standard_normal((R, W)).astype(np.float32)
    idx = (2 * np.arange(N)).astype(np.int32)       # 100.. are out of range for R = 100
    out, _ = _run(_gather_prog("DMACopy", R, W, N, oob_is_err=False),
                  {"tab": tab, "idx": idx.reshape(N, 1), "pre": np.full((N, W), -1, np.float32)})
    golden = np.full((N, W), -1, np.float32)
    golden[:50] = tab[2 * np.arange(50)]
    np.testing.assert_array_equal(out["out"], golden)


def test_gather_bad_index_dtype_is_an_error():
    prog = _gather_prog("IndirectLoad", 4, 2, 2, idx_dtype="float32")
    with pytest.raises(birsim.SimulationError, match="index dtype float32 is not supported"):
        _run(prog, {"tab": np.ones((4, 2), np.float32), "idx": np.zeros((2, 1), np.float32),
                    "pre": np.zeros((2, 2), np.float32)})


def test_gather_into_sbuf_with_cast():
    """Token rows from DRAM into an SBUF tile, cast to bf16 on the way."""
    R, W, N = 64, 32, 128
    tab = RNG.standard_normal((R, W)).astype(np.float32)
    idx = RNG.integers(0, R, N).astype(np.int32).reshape(N, 1)
    prog = module([function("main", [
        tensor("tab", "ExternalInput", "float32", (R, W), "DRAM"),
        tensor("idx", "ExternalInput", "int32", (N, 1), "DRAM"),
        tensor("t", "Internal", "bfloat16", (N, W), "SB"),
        tensor("out", "ExternalOutput", "float32", (N, W), "DRAM")], [
        block("b0",
              insn("g", "IndirectLoad", "SP", ins=[whole("tab", (R, W)),
                                                   whole("idx", (N, 1), "int32")],
                   outs=[whole("t", (N, W), "bfloat16")]),
              insn("o", "DMACopy", "SP", ins=[whole("t", (N, W), "bfloat16")],
                   outs=[whole("out", (N, W))]))])])
    out, _ = _run(prog, {"tab": tab, "idx": idx})
    import ml_dtypes
    golden = tab[idx[:, 0]].astype(ml_dtypes.bfloat16).astype(np.float32)
    np.testing.assert_array_equal(out["out"], golden)


# ---- scatters -----------------------------------------------------------------------

@pytest.mark.parametrize("oob_is_err", [False, True])
def test_indirect_save_scatter_later_duplicate_wins(oob_is_err):
    R, W, N = 30, 12, 20
    src = RNG.standard_normal((N, W)).astype(np.float32)
    pre = RNG.standard_normal((R, W)).astype(np.float32)
    idx = RNG.integers(0, R, N)
    idx[4] = idx[9]                               # duplicate: row 9 (later) wins
    if not oob_is_err:
        idx[[2, 11]] = [R, 1000]
    out, _ = _run(_scatter_prog("IndirectSave", R, W, N, oob_is_err=oob_is_err),
                  {"src": src, "idx": idx.astype(np.int32).reshape(N, 1), "pre": pre})
    golden = pre.copy()
    for i, v in enumerate(idx):                   # serial, in order
        if 0 <= v < R:
            golden[v] = src[i]
    np.testing.assert_array_equal(out["out"], golden)


@pytest.mark.parametrize("op", ["IndirectSaveAccumulate", "GenericIndirectSave"])
def test_scatter_add_embedding_bag(op):
    """The embedding-bag scatter-add: out[idx[i]] += src[i], duplicates accumulate in order."""
    R, W, N = 10, 16, 64
    src = RNG.standard_normal((N, W)).astype(np.float32)
    pre = RNG.standard_normal((R, W)).astype(np.float32)
    idx = RNG.integers(0, R, N)
    idx[7] = -1                                   # unused slot
    out, _ = _run(_scatter_prog(op, R, W, N), {"src": src, "idx": idx.astype(np.int32).reshape(N, 1),
                                               "pre": pre})
    golden = pre.copy()
    for i, v in enumerate(idx):                   # fp32, serially in index order
        if v >= 0:
            golden[v] = (golden[v] + src[i]).astype(np.float32)
    np.testing.assert_array_equal(out["out"], golden)


def test_dma_rmw_doc_example():
    """§4 item 21: b_golden[2*arange(n)] += a with a prefill of 1."""
    R, W, N = 40, 8, 20
    a = RNG.standard_normal((N, W)).astype(np.float32)
    out, _ = _run(_scatter_prog("IndirectSaveAccumulate", R, W, N, op="add"),
                  {"src": a, "idx": (2 * np.arange(N)).astype(np.int32).reshape(N, 1),
                   "pre": np.ones((R, W), np.float32)})
    golden = np.ones((R, W), np.float32)
    golden[2 * np.arange(N)] += a
    np.testing.assert_array_equal(out["out"], golden)


def test_indirect_save_accumulate_entry_step_and_num_indices():
    """entry_step_elements is the destination row stride; only num_indices are used."""
    R, W, N = 8, 4, 6
    src = RNG.standard_normal((N, W)).astype(np.float32)
    idx = np.array([0, 3, 1, 3, 7, 2], np.int32).reshape(N, 1)
    # The destination AP covers one row of W elements; rows are 2*W apart (entry step).
    tensors = [tensor("src", "ExternalInput", "float32", (N, W), "DRAM"),
               tensor("idx", "ExternalInput", "int32", (N, 1), "DRAM"),
               tensor("pre", "ExternalInput", "float32", (2 * R, W), "DRAM"),
               tensor("out", "ExternalOutput", "float32", (2 * R, W), "DRAM")]
    prog = module([function("main", tensors, [block("b0",
        insn("fill", "DMACopy", "SP", ins=[whole("pre", (2 * R, W))], outs=[whole("out", (2 * R, W))]),
        insn("s", "IndirectSaveAccumulate", "SP",
             ins=[whole("src", (N, W)), whole("idx", (N, 1), "int32")],
             outs=[ap("out", [[W, 1], [1, W]])], entry_step_elements=2 * W, num_indices=5))])])
    pre = RNG.standard_normal((2 * R, W)).astype(np.float32)
    out, _ = _run(prog, {"src": src, "idx": idx, "pre": pre})
    golden = pre.copy()
    for i in range(5):
        golden[2 * idx[i, 0]] = golden[2 * idx[i, 0]] + src[i]
    np.testing.assert_array_equal(out["out"], golden)


def test_scatter_marks_only_rows_written():
    """Rows a scatter does not reach stay never-written (a later read warns)."""
    R, W, N = 8, 4, 2
    tensors = [tensor("src", "ExternalInput", "float32", (N, W), "DRAM"),
               tensor("idx", "ExternalInput", "int32", (N, 1), "DRAM"),
               tensor("t", "Internal", "float32", (R, W), "DRAM"),
               tensor("out", "ExternalOutput", "float32", (R, W), "DRAM")]
    prog = module([function("main", tensors, [block("b0",
        insn("s", "IndirectSave", "SP", ins=[whole("src", (N, W)), whole("idx", (N, 1), "int32")],
             outs=[whole("t", (R, W))]),
        insn("r", "DMACopy", "SP", ins=[ap("t", [[W, 2], [1, W]], offset=2 * W)],
             outs=[ap("out", [[W, 2], [1, W]])]))])])
    _, sim = _run(prog, {"src": np.ones((N, W), np.float32),
                         "idx": np.array([[2], [5]], np.int32)})
    assert any("'r'" in w and "never-written" in w for w in sim.warnings)
    _, sim = _run(prog, {"src": np.ones((N, W), np.float32),
                         "idx": np.array([[2], [3]], np.int32)})
    assert not any("'r'" in w and "never-written" in w for w in sim.warnings)


# ---- Generic forms: several indexed dims --------------------------------------------

def test_generic_indirect_load_two_indexed_dims():
    """indirect_dims [Z, Y] of a [A, B, W] table (left-padded to W,Z,Y,X): row i is
    tab[iz[i], iy[i], :]."""
    A, B, W, N = 5, 6, 7, 9
    tab = RNG.standard_normal((A, B, W)).astype(np.float32)
    iz = RNG.integers(0, A, N).astype(np.int32)
    iy = RNG.integers(0, B, N).astype(np.int32)
    prog = module([function("main", [
        tensor("tab", "ExternalInput", "float32", (A, B, W), "DRAM"),
        tensor("iz", "ExternalInput", "int32", (N, 1), "DRAM"),
        tensor("iy", "ExternalInput", "int32", (N, 1), "DRAM"),
        tensor("out", "ExternalOutput", "float32", (N, W), "DRAM")], [
        block("b0", insn("g", "GenericIndirectLoad", "SP",
                         ins=[whole("tab", (A, B, W)), whole("iz", (N, 1), "int32"),
                              whole("iy", (N, 1), "int32")],
                         outs=[whole("out", (N, W))], indirect_dims=["Z", "Y"]))])])
    out, _ = _run(prog, {"tab": tab, "iz": iz.reshape(N, 1), "iy": iy.reshape(N, 1)})
    np.testing.assert_array_equal(out["out"], tab[iz, iy])


# ---- Gather (nc_n_gather) -------------------------------------------------------------

def _ngather_prog(P, F, J, idx_dtype="uint32", **keys):
    return module([function("main", [
        tensor("d", "ExternalInput", "float32", (P, F), "DRAM"),
        tensor("ix", "ExternalInput", idx_dtype, (P, J), "DRAM"),
        tensor("sd", "Internal", "float32", (P, F), "SB"),
        tensor("si", "Internal", idx_dtype, (P, J), "SB"),
        tensor("so", "Internal", "float32", (P, J), "SB"),
        tensor("out", "ExternalOutput", "float32", (P, J), "DRAM")], [
        block("b0",
              insn("l0", "DMACopy", "SP", ins=[whole("d", (P, F))], outs=[whole("sd", (P, F))]),
              insn("l1", "DMACopy", "SP", ins=[whole("ix", (P, J), idx_dtype)],
                   outs=[whole("si", (P, J), idx_dtype)]),
              insn("g", "Gather", "Pool", ins=[whole("sd", (P, F)), whole("si", (P, J), idx_dtype)],
                   outs=[whole("so", (P, J))], **keys),
              insn("o", "DMACopy", "SP", ins=[whole("so", (P, J))], outs=[whole("out", (P, J))]))])])


def test_gather_per_partition_matches_take_along_axis():
    P, F, J = 128, 300, 64
    d = RNG.standard_normal((P, F)).astype(np.float32)
    ix = RNG.integers(0, F, (P, J)).astype(np.uint32)
    out, _ = _run(_ngather_prog(P, F, J), {"d": d, "ix": ix})
    np.testing.assert_array_equal(out["out"], np.take_along_axis(d, ix.astype(np.int64), axis=1))


def test_gather_index_out_of_partition_is_an_error():
    P, F, J = 4, 10, 3
    ix = np.zeros((P, J), np.uint32)
    ix[2, 1] = 10
    with pytest.raises(birsim.MemoryAccessError, match=r"index 10 \(element 7 .*size 10"):
        _run(_ngather_prog(P, F, J), {"d": np.ones((P, F), np.float32), "ix": ix})


# ---- IndirectCopy = local_gather --------------------------------------------------------

def test_local_gather_doc_example():
    """nki-isa-semantics §3.26: src [128, 512, 4], num_elem_per_idx 4; the indices given to
    the hardware are index * num_elem_per_idx (element offsets)."""
    P, S, E, M, nvalid = 128, 64, 4, 3, 40
    src = RNG.standard_normal((P, S, E)).astype(np.float32)
    index = RNG.integers(0, S, (P, M)).astype(np.uint16)
    golden = np.empty((P, nvalid, E), np.float32)
    for c in range(P // 16):
        sl = slice(16 * c, 16 * c + 16)
        idx1d = index[sl].flatten(order="F")[:nvalid]
        golden[sl] = np.take(src[sl], idx1d, axis=1)
    hw = (index.astype(np.int64) * E).astype(np.uint16)
    prog = module([function("main", [
        tensor("s", "ExternalInput", "float32", (P, S * E), "SB"),
        tensor("ix", "ExternalInput", "uint16", (P, M), "SB"),
        tensor("out", "ExternalOutput", "float32", (P, nvalid * E), "SB")], [
        block("b0", insn("g", "IndirectCopy", "Pool",
                         ins=[whole("s", (P, S * E)), whole("ix", (P, M), "uint16")],
                         outs=[whole("out", (P, nvalid * E))], num_valid_indices=nvalid))])])
    out, _ = _run(prog, {"s": src.reshape(P, S * E), "ix": hw})
    np.testing.assert_array_equal(out["out"].reshape(P, nvalid, E), golden)


# ---- TensorCopyDynamicSrc / Dst --------------------------------------------------------

def _dyn_prog(op, P, F, K, scale=None):
    src_shape, dst_shape = ((P, F), (P, K)) if op.endswith("Src") else ((P, K), (P, F))
    window = ap("s" if op.endswith("Src") else "d", [[F if op.endswith("Src") else F, P], [1, 1]])
    other = whole("d", dst_shape) if op.endswith("Src") else whole("s", src_shape)
    ins = [window if op.endswith("Src") else other, whole("off", (1, K), "int32")]
    outs = [other if op.endswith("Src") else window]
    return module([function("main", [
        tensor("s", "ExternalInput", "float32", src_shape, "SB"),
        tensor("off", "ExternalInput", "int32", (1, K), "SB"),
        tensor("pre", "ExternalInput", "float32", dst_shape, "SB"),
        tensor("d", "ExternalOutput", "float32", dst_shape, "SB")], [
        block("b0",
              insn("f", "TensorCopy", "DVE", ins=[whole("pre", dst_shape)], outs=[whole("d", dst_shape)]),
              insn("t", op, "DVE", ins=ins, outs=outs, scale=scale))])])


def test_tensor_copy_dynamic_src_doc_example_is_take():
    """Old-doc example: gathering columns at runtime offsets equals np.take(src, idx, axis=1)."""
    P, F, K = 128, 32, 8
    src = RNG.standard_normal((P, F)).astype(np.float32)
    off = np.array([[4, 5, 0, 31, 17, 4, 9, 2]], np.int32)
    out, _ = _run(_dyn_prog("TensorCopyDynamicSrc", P, F, K),
                  {"s": src, "off": off, "pre": np.zeros((P, K), np.float32)})
    np.testing.assert_array_equal(out["d"], np.take(src, off[0], axis=1))


def test_tensor_copy_dynamic_dst_scatters_columns():
    P, F, K = 16, 20, 4
    src = RNG.standard_normal((P, K)).astype(np.float32)
    pre = RNG.standard_normal((P, F)).astype(np.float32)
    off = np.array([[3, 0, 19, 7]], np.int32)
    out, _ = _run(_dyn_prog("TensorCopyDynamicDst", P, F, K), {"s": src, "off": off, "pre": pre})
    golden = pre.copy()
    golden[:, off[0]] = src
    np.testing.assert_array_equal(out["d"], golden)


def test_tensor_copy_dynamic_scale_and_register_offset():
    """A register offset times `scale` shifts the source window."""
    P, F = 8, 40
    src = RNG.standard_normal((P, F)).astype(np.float32)
    prog = module([function("main", [
        tensor("s", "ExternalInput", "float32", (P, F), "SB"),
        tensor("d", "ExternalOutput", "float32", (P, 4), "SB"), register("r")], [
        block("b0",
              insn("m", "RegisterMove", "DVE", ins=[imm(3, "int32")], outs=[reg("r")]),
              insn("t", "TensorCopyDynamicSrc", "DVE",
                   ins=[ap("s", [[F, P], [1, 4]]), reg("r")], outs=[whole("d", (P, 4))],
                   scale=5))])])
    out, _ = _run(prog, {"s": src})
    np.testing.assert_array_equal(out["d"], src[:, 15:19])


def test_tensor_copy_dynamic_window_outside_its_tensor_is_an_error():
    P, F, K = 4, 8, 2
    off = np.array([[1, 8]], np.int32)              # column 8 of an 8-column tensor
    sim = birsim.Simulator(_dyn_prog("TensorCopyDynamicSrc", P, F, K))
    pre = np.full((P, K), 7, np.float32)
    with pytest.raises(birsim.MemoryAccessError, match=r"offset 8 \(element 1 of ins\[1\]\)") as e:
        sim.run({"s": np.ones((P, F), np.float32), "off": off, "pre": pre})
    assert e.value.instruction == "t"
    np.testing.assert_array_equal(sim.read("d"), pre)   # nothing written


def test_tensor_copy_dynamic_offset_times_scale_overflow_is_an_error():
    """offset x scale past int64 is a MemoryAccessError naming the element, never a wrap."""
    P, F, K = 4, 8, 2
    off = np.array([[2**31 - 1, 1]], np.int32)
    sim = birsim.Simulator(_dyn_prog("TensorCopyDynamicSrc", P, F, K, scale=2**40))
    pre = np.full((P, K), 7, np.float32)
    with pytest.raises(birsim.MemoryAccessError, match=r"overflows int64") as e:
        sim.run({"s": np.ones((P, F), np.float32), "off": off, "pre": pre})
    assert e.value.instruction == "t" and e.value.position == 1
    assert str(e.value).count("function 'main'") == 1     # the location is attached once
    np.testing.assert_array_equal(sim.read("d"), pre)   # nothing written


# ---- DevicePrint ---------------------------------------------------------------------

def _print_prog():
    P, F = 4, 3
    return module([function("main", [
        tensor("a", "ExternalInput", "float32", (P, F), "SB"),
        tensor("u", "Internal", "int32", (2, 2), "SB")], [
        block("b0",
              insn("p", "DevicePrint", "Pool", ins=[ap("a", [[3, 4], [1, 2]])], outs=[],
                   prefix="a[:, :2] is"),
              insn("q", "DevicePrint", "Pool", ins=[whole("u", (2, 2), "int32")], outs=[]))])])


def test_device_print_records_values_and_prints_to_stdout(capsys):
    a = np.arange(12, dtype=np.float32).reshape(4, 3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sim = birsim.Simulator(_print_prog())
        sim.run({"a": a})
    p, q = sim.prints
    assert (p.core, p.instruction, p.operand, p.prefix) == (0, "p", 0, "a[:, :2] is")
    np.testing.assert_array_equal(p.values, a[:, :2])
    assert p.values.dtype == np.float32
    # an unwritten tensor: the never-written warning names the instruction; values shown
    assert q.prefix == "q" and q.values.dtype == np.int32 and q.values.shape == (2, 2)
    assert any("'q'" in str(w.message) and "never-written bytes of 'u'" in str(w.message)
               for w in caught)
    out = capsys.readouterr().out
    assert "a[:, :2] is: [[ 0.  1.]" in out and "q: [[0 0]" in out


def test_device_print_false_keeps_stdout_quiet(capsys):
    sim = birsim.Simulator(_print_prog(), print=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", birsim.BirsimWarning)
        sim.run({"a": np.ones((4, 3), np.float32)})
    assert len(sim.prints) == 2 and capsys.readouterr().out == ""


def test_device_print_on_two_cores_names_the_core(capsys):
    sim = birsim.Simulator(_print_prog(), cores=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", birsim.BirsimWarning)
        sim.run({"a": np.ones((4, 3), np.float32)})
    assert sorted(p.core for p in sim.prints) == [0, 0, 1, 1]
    assert "[core 1] a[:, :2] is:" in capsys.readouterr().out


def test_device_print_of_an_immediate_is_an_error():
    prog = module([function("main", [], [block("b0", insn("p", "DevicePrint", "Pool",
                                                           ins=[imm(1.0)], outs=[]))])])
    with pytest.raises(birsim.ProgramError, match=r"ins\[0\]: DevicePrint prints access patterns"):
        birsim.Simulator(prog).run({})


def test_dma_transpose_beyond_four_dims_is_a_clear_error():
    """TransposeOps name four axes (W, Z, Y, X); a 5-dim transpose is refused, naming it."""
    shape = (2, 2, 2, 2, 2)
    prog = module([function("main", [tensor("a", "ExternalInput", "float32", shape, "DRAM"),
                                     tensor("b", "ExternalOutput", "float32", shape, "DRAM")], [
        block("b0", insn("t", "DMACopy", "SP", ins=[whole("a", shape)], outs=[whole("b", shape)],
                         mode="Transpose", transpose_op="XYZW"))])])
    with pytest.raises(birsim.SimulationError, match="Transpose needs an input of at most 4 "
                       "dimensions") as e:
        birsim.Simulator(prog).run({"a": np.zeros(shape, np.float32)})
    assert e.value.instruction == "t"


# ---- GetSequenceBounds, NonzeroWithCount / Nonzero, LocalGather -------------------------

@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_sequence_bounds_doc_vector(dtype):
    """nki-isa-semantics §4 item 1."""
    ids = np.array([[0, 1, 1, 2, 2, 2, 0, 3, 3]]).astype(dtype)
    n = ids.shape[1]
    prog = module([function("main", [
        tensor("s", "ExternalInput", dtype, (1, n), "SB"),
        tensor("b", "ExternalOutput", dtype, (1, 2 * n), "SB")], [
        block("b0", insn("q", "GetSequenceBounds", "Pool", ins=[whole("s", (1, n), dtype)],
                         outs=[whole("b", (1, 2 * n), dtype)]))])])
    out, _ = _run(prog, {"s": ids})
    np.testing.assert_array_equal(out["b"].reshape(2, n),
                                  [[9, 1, 1, 3, 3, 3, 9, 7, 7], [-1, 3, 3, 6, 6, 6, -1, 9, 9]])


@pytest.mark.parametrize("opcode", ["NonzeroWithCount", "Nonzero"])
def test_nonzero_with_count_doc_vector(opcode):
    """§4 item 2: [0,1,1,0,0,1,0,0], index_offset 16, padding -1 -> [17,18,21,-1x5,3];
    only partitions 0, 16, ... are computed (here partitions 0 and 16 of 32)."""
    P, F = 32, 8
    src = np.zeros((P, F), np.float32)
    src[0] = [0, 1, 1, 0, 0, 1, 0, 0]
    src[16] = [1, 0, 0, 0, 0, 0, 0, 2]
    prog = module([function("main", [
        tensor("s", "ExternalInput", "float32", (P, F), "SB"),
        tensor("pre", "ExternalInput", "int32", (P, F + 1), "SB"),
        tensor("d", "ExternalOutput", "int32", (P, F + 1), "SB")], [
        block("b0",
              insn("f", "TensorCopy", "DVE", ins=[whole("pre", (P, F + 1), "int32")],
                   outs=[whole("d", (P, F + 1), "int32")]),
              insn("nz", opcode, "Pool", ins=[whole("s", (P, F))],
                   outs=[whole("d", (P, F + 1), "int32")], index_offset=16, padding_val=-1))])])
    pre = np.full((P, F + 1), 99, np.int32)
    out, _ = _run(prog, {"s": src, "pre": pre})
    np.testing.assert_array_equal(out["d"][0], [17, 18, 21, -1, -1, -1, -1, -1, 3])
    np.testing.assert_array_equal(out["d"][16], [16, 23, -1, -1, -1, -1, -1, -1, 2])
    others = [p for p in range(P) if p % 16]
    np.testing.assert_array_equal(out["d"][others], pre[others])     # not written


def test_local_gather_newer_name_is_indirect_copy():
    P, S, M = 16, 10, 1
    src = RNG.standard_normal((P, S)).astype(np.float32)
    index = RNG.integers(0, S, (P, M)).astype(np.uint16)
    prog = module([function("main", [
        tensor("s", "ExternalInput", "float32", (P, S), "SB"),
        tensor("ix", "ExternalInput", "uint16", (P, M), "SB"),
        tensor("out", "ExternalOutput", "float32", (P, 16), "SB")], [
        block("b0", insn("g", "LocalGather", "Pool",
                         ins=[whole("s", (P, S)), whole("ix", (P, M), "uint16")],
                         outs=[whole("out", (P, 16))]))])])
    out, _ = _run(prog, {"s": src, "ix": index})
    np.testing.assert_array_equal(out["out"], src[:, index[:, 0]])
