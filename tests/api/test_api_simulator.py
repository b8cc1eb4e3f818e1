"""The Simulator API (issue 2 "Running"): inputs and outputs, read(), stats, options,
repeated runs, warnings, arch override, and the GIL being released while the core runs."""

import threading
import warnings

import ml_dtypes
import numpy as np
import pytest

import birsim
from birsim import _birsim
from bir import block, function, imm, insn, loop, module, reg, register, tensor, whole

P, F = 4, 8


def add_program(dtype="float32"):
    """out = a + b through an SBUF tile (a, b, out in DRAM)."""
    return module([function("main", [
        tensor("a", "ExternalInput", dtype, (P, F), "DRAM"),
        tensor("b", "ExternalInput", dtype, (P, F), "DRAM", loc="b_loc"),
        tensor("t", "Internal", dtype, (P, F), "SB"),
        tensor("out", "ExternalOutput", dtype, (P, F), "DRAM"),
    ], [block("b0",
              insn("tt", "TensorTensor", "DVE", ins=[whole("a", (P, F), dtype),
                                                      whole("b_loc", (P, F), dtype)],
                   outs=[whole("t", (P, F), dtype)], op="add"),
              insn("st", "Save", "DMA", ins=[whole("t", (P, F), dtype)],
                   outs=[whole("out", (P, F), dtype)]))])])


def inputs(seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    return {"a": rng.standard_normal((P, F)).astype(dtype),
            "b": rng.standard_normal((P, F)).astype(dtype)}


def test_run_returns_outputs_and_read_shows_internal_tensors():
    x = inputs()
    sim = birsim.Simulator(add_program(), zero_copy=False)  # read() of an input below
    out = sim.run(x)
    assert set(out) == {"out"} and out["out"].dtype == np.float32
    np.testing.assert_array_equal(out["out"], x["a"] + x["b"])
    np.testing.assert_array_equal(sim.read("t"), x["a"] + x["b"])
    np.testing.assert_array_equal(sim.read("b_loc"), x["b"])      # by location name too


def test_birsim_run_one_call_and_bf16_outputs_are_ml_dtypes():
    x = inputs(1, ml_dtypes.bfloat16)
    out = birsim.run(add_program("bfloat16"), x)["out"]
    assert out.dtype == ml_dtypes.bfloat16
    want = (x["a"].astype(np.float32) + x["b"].astype(np.float32)).astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(out.view(np.uint16), want.view(np.uint16))


def test_input_given_by_location_name_and_cast_from_float64():
    x = inputs(2)
    out = birsim.run(add_program(), {"a": x["a"].astype(np.float64), "b_loc": x["b"]})
    np.testing.assert_array_equal(out["out"], x["a"] + x["b"])


@pytest.mark.parametrize("bad,match", [
    ({"a": np.zeros((P, F))}, "missing input 'b'"),
    ({"a": np.zeros((P, F)), "b": np.zeros((P, F)), "c": 1}, "unknown input 'c'"),
    ({"a": np.zeros((P, F + 1)), "b": np.zeros((P, F))}, "input 'a' has shape"),
    ({"a": np.array([["x"] * F] * P), "b": np.zeros((P, F))}, "input 'a'"),
    ({"a": np.zeros((P, F)), "b": np.zeros((P, F), complex)}, "input 'b'"),
])
def test_bad_inputs_are_program_errors_naming_the_tensor(bad, match):
    with pytest.raises(birsim.ProgramError, match=match):
        birsim.Simulator(add_program()).run(bad)


def test_stats_count_opcodes_and_engines():
    sim = birsim.Simulator(add_program())
    sim.run(inputs())
    assert sim.stats["opcodes"] == {"TensorTensor": 1, "Save": 1}
    assert sim.stats["engines"] == {"DVE": 1, "DMA": 1}
    assert sim.stats["instructions"] == 2


def test_repeated_runs_start_from_unwritten_memory():
    """A second run must not see the first run's memory: reading a tile only the first
    run wrote is a never-written read again."""
    prog = module([function("main", [
        tensor("a", "ExternalInput", "float32", (P, F), "DRAM"),
        tensor("t", "Internal", "float32", (P, F), "SB"),
        tensor("out", "ExternalOutput", "float32", (P, F), "DRAM"),
        register("r")], [
        block("b0", insn("cp", "TensorCopy", "DVE", ins=[whole("t", (P, F))],
                         outs=[whole("out", (P, F))]))])])
    sim = birsim.Simulator(prog)
    with pytest.warns(birsim.BirsimWarning, match="never-written"):
        sim.run({"a": np.ones((P, F), np.float32)})
    with pytest.warns(birsim.BirsimWarning, match="never-written"):
        sim.run({"a": np.ones((P, F), np.float32)})
    assert any("never-written" in w for w in sim.warnings)


def test_output_not_fully_written_is_reported():
    prog = module([function("main", [
        tensor("a", "ExternalInput", "float32", (P, F), "DRAM"),
        tensor("out", "ExternalOutput", "float32", (P, F), "DRAM")], [
        block("b0", insn("half", "TensorCopy", "DVE", ins=[whole("a", (P // 2, F))],
                         outs=[whole("out", (P // 2, F))]))])])
    sim = birsim.Simulator(prog)
    with pytest.warns(birsim.BirsimWarning, match="'out' was not fully written"):
        sim.run({"a": np.ones((P, F), np.float32)})
    with pytest.raises(birsim.SimulationError, match="not fully written"):
        birsim.Simulator(prog, strict=True).run({"a": np.ones((P, F), np.float32)})


def test_arch_override_changes_memory_sizes():
    """A tile placed at byte 100,000 of each partition fits gen3's 224 KiB SBUF partitions
    but not inferentia's 96 KiB ones."""
    prog = module([function("main", [
        tensor("a", "ExternalInput", "float32", (P, F), "DRAM"),
        tensor("t", "Internal", "float32", (P, F), "SB", base=0, addr=100_000),
        tensor("out", "ExternalOutput", "float32", (P, F), "DRAM")], [
        block("b0", insn("c1", "TensorCopy", "DVE", ins=[whole("a", (P, F))], outs=[whole("t", (P, F))]),
              insn("c2", "TensorCopy", "DVE", ins=[whole("t", (P, F))], outs=[whole("out", (P, F))]))])])
    x = np.arange(P * F, dtype=np.float32).reshape(P, F)
    np.testing.assert_array_equal(birsim.Simulator(prog).run({"a": x})["out"], x)
    np.testing.assert_array_equal(birsim.Simulator(prog, arch="trn1").run({"a": x})["out"], x)
    with pytest.raises(birsim.ProgramError, match="does not fit the SBUF"):
        birsim.Simulator(prog, arch="inferentia")
    with pytest.raises(ValueError, match="unknown arch"):
        birsim.Simulator(prog, arch="gen9")


@pytest.mark.parametrize("kw", [{"schedule": "fastest"}, {"cores": 0}, {"kernel_sim": 42}])
def test_bad_options_are_rejected(kw):
    with pytest.raises((ValueError, TypeError)):
        birsim.Simulator(add_program(), **kw)


def test_read_before_run_and_unknown_names():
    sim = birsim.Simulator(add_program())
    with pytest.raises(birsim.SimulationError):
        sim.read("t")
    sim.run(inputs())
    with pytest.raises(KeyError):
        sim.read("nope")
    with pytest.raises(ValueError):
        sim.read("t", core=3)


def test_the_gil_is_released_while_the_core_runs():
    """While one thread simulates a long loop, another thread keeps running Python. If the
    binding held the GIL through bs_sim_run, the counter could not move during the run."""
    prog = module([function("main", [register("r")], [block("b0",
        insn("init", "RegisterMove", "SP", ins=[imm(0, "int32")], outs=[reg("r")]),
        loop("L", "i", 0, 3_000_000, 1, [block("body",
            insn("inc", "RegisterAlu", "SP", ins=[reg("r"), imm(1, "int32")], outs=[reg("r")],
                 op="add"))]))])])
    sim = birsim.Simulator(prog)
    count = [0]
    seen = {}
    done = threading.Event()

    def worker():
        seen["start"] = count[0]
        sim.run({})
        seen["end"] = count[0]
        done.set()

    t = threading.Thread(target=worker)
    t.start()
    while not done.is_set():
        count[0] += 1
    t.join()
    assert sim.register("r") == 3_000_000
    assert seen["end"] - seen["start"] > 1000


def test_ctrl_c_stops_a_run_of_expensive_instructions():
    """Slices end by time as well as by steps, so an interrupt lands promptly even when
    each instruction is a [128,128]x[128,512] matmul (100,000 trips would take minutes)."""
    import signal
    mm = module([function("main", [
        tensor("a", "Internal", "float32", (128, 512), "SB", base=0, addr=0),
        tensor("b", "Internal", "float32", (128, 128), "SB", base=0, addr=4096),
        tensor("p", "Internal", "float32", (128, 512), "PSUM", base=0, addr=0)], [block("b0",
        insn("z", "Memset", "DVE", ins=[], outs=[whole("a", (128, 512))], mode="Const", constant=0),
        insn("z2", "Memset", "DVE", ins=[], outs=[whole("b", (128, 128))], mode="Const", constant=0),
        loop("L", "i", 0, 100_000, 1, [block("body",
            insn("mm", "Matmult", "PE", ins=[whole("a", (128, 512)), whole("b", (128, 128))],
                 outs=[whole("p", (128, 512))], accumulation_flag=2))]))])])
    sim = birsim.Simulator(mm)

    def handler(signum, frame):
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, handler)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.2)
        with pytest.raises(KeyboardInterrupt):
            sim.run({})
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert sim._sim.stats()[2] < 200_000          # it stopped long before the end


ALL_DTYPES = sorted(_birsim.dtypes)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_every_dtype_round_trips_bit_exactly(dtype):
    """All 20 dtypes are readable and writable: input -> TensorCopy (same dtype) -> SBUF
    -> Save -> output reproduces the bits (packed x4 and e8m0 included)."""
    from birsim.dtypes import numpy_dtype
    nd = numpy_dtype(dtype)
    shape = (4, 6)
    raw = np.random.default_rng(len(dtype)).integers(0, 256, size=(4, 6 * nd.itemsize),
                                                     dtype=np.uint8)
    x = raw.view(nd).reshape(shape)
    prog = module([function("main", [
        tensor("a", "ExternalInput", dtype, shape, "DRAM"),
        tensor("t", "Internal", dtype, shape, "SB", base=32, addr=64),
        tensor("out", "ExternalOutput", dtype, shape, "DRAM")], [block("b0",
        insn("c1", "TensorCopy", "DVE", ins=[whole("a", shape, dtype)], outs=[whole("t", shape, dtype)]),
        insn("c2", "Save", "DMA", ins=[whole("t", shape, dtype)], outs=[whole("out", shape, dtype)]))])])
    out = birsim.run(prog, {"a": x})["out"]
    assert out.dtype == nd and out.shape == shape
    np.testing.assert_array_equal(out.view(np.uint8), x.view(np.uint8))


def test_exit_on_one_of_two_cores_stops_only_that_core():
    """Core 1 (rank 1) takes the Exit branch; core 0 goes on and writes its output."""
    from bir import register
    prog = module([function("main", [
        tensor("a", "ExternalInput", "float32", (P, F), "DRAM"),
        tensor("out", "ExternalOutput", "float32", (P, F), "DRAM"),
        register("rank")], [
        block("b0", insn("rk", "GetGlobalRankId", "SP", ins=[], outs=[reg("rank")]),
              insn("br", "CompareAndBranch", "SP", ins=[reg("rank"), imm(1, "int32")],
                   comp_op="IS_EQIMM", on_true="quit", on_false="work")),
        block("quit", insn("x", "Exit", "SP", ins=[], outs=[])),
        block("work", insn("cp", "TensorCopy", "DVE", ins=[whole("a", (P, F))],
                           outs=[whole("out", (P, F))]))])])
    x = inputs()["a"]
    sim = birsim.Simulator(prog, cores=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", birsim.BirsimWarning)
        out = sim.run({"a": x})
    assert sim.exited
    np.testing.assert_array_equal(out["out"], x)                 # core 0 finished its work
    np.testing.assert_array_equal(sim.read("out", core=1), x)   # one tensor for both cores


def test_no_opcode_is_left_unimplemented():
    """Every opcode has a kernel, the VM, or is a stub/no-op/abstract: no `todo` handler is
    left (MatmultSparse and TopK were the last; tests/compute/test_compute_coverage.py runs each)."""
    assert [n for n, h in birsim._birsim.handlers.items() if h == "todo"] == []


def _acc_program(acc_modes, out_ap):
    """Activation(Relu) with the given acc modes, one after the other, then
    ReadActivationAccumulator into `s`."""
    acts = [insn(f"act{k}", "Activation", "Activation", ins=[whole("x", (P, F))],
                 outs=[whole("y", (P, F))], func="Relu", acc=mode)
            for k, mode in enumerate(acc_modes)]
    return module([function("main", [
        tensor("x", "ExternalInput", "float32", (P, F), "DRAM"),
        tensor("y", "Internal", "float32", (P, F), "SB"),
        tensor("s", "ExternalOutput", "float32", (P, 1), "DRAM")], [
        block("b0", *acts, insn("rd", "ReadActivationAccumulator", "Activation", ins=[],
                                outs=[out_ap]))])])


def _relu_rowsum(x):
    acc = np.zeros(x.shape[0], np.float32)
    for j in range(x.shape[1]):                   # sequential fp32 sum, in element order
        acc = (acc + np.maximum(x[:, j], np.float32(0))).astype(np.float32)
    return acc


@pytest.mark.parametrize("out_ap", ["2d", "1d"])
def test_activation_accumulator_is_read_back(out_ap):
    x = np.random.default_rng(5).standard_normal((P, F)).astype(np.float32)
    ap_ = whole("s", (P, 1)) if out_ap == "2d" else {"kind": "physical_ap", "memref": "s",
                                                        "dtype": "float32", "ap": [[1, P]]}
    s = birsim.run(_acc_program(["ZeroAccumulate"], ap_), {"x": x})["s"]
    np.testing.assert_array_equal(s[:, 0], _relu_rowsum(x))
    # Zero, then two Accumulates: the sum of two passes; Idle leaves it alone
    s2 = birsim.run(_acc_program(["Zero", "Accumulate", "Idle", "Accumulate"], ap_),
                    {"x": x})["s"]
    once = _relu_rowsum(x)
    np.testing.assert_array_equal(s2[:, 0], (once + once).astype(np.float32))


def test_trace_records_the_executed_order():
    """in_order runs a block without sync in block order; the trace shows it, loop bodies
    once per trip, and nothing is recorded unless asked."""
    prog = module([function("main", [register("r")], [block("b0",
        insn("init", "RegisterMove", "SP", ins=[imm(0, "int32")], outs=[reg("r")]),
        loop("L", "i", 0, 3, 1, [block("body",
            insn("inc", "RegisterAlu", "Pool", ins=[reg("r"), imm(1, "int32")], outs=[reg("r")],
                 op="add"))]),
        insn("end", "RegisterMove", "SP", ins=[reg("r")], outs=[reg("r")]))])])
    sim = birsim.Simulator(prog, trace=True)
    sim.run({})
    assert [(e[1], e[2], e[3]) for e in sim.trace] == (
        [("SP", "init", "RegisterMove"), ("Unassigned", "L", "Loop")]
        + [("Pool", "inc", "RegisterAlu")] * 3 + [("SP", "end", "RegisterMove")])
    assert {e[0] for e in sim.trace} == {0}
    quiet = birsim.Simulator(prog)
    quiet.run({})
    assert quiet.trace == []


def test_unwritten_memory_reads_as_zero_and_is_reported():
    prog = module([function("main", [
        tensor("t", "Internal", "int32", (P, F), "SB"),
        tensor("out", "ExternalOutput", "int32", (P, F), "DRAM")], [
        block("b0", insn("cp", "TensorCopy", "DVE", ins=[whole("t", (P, F), "int32")],
                         outs=[whole("out", (P, F), "int32")]))])])
    sim = birsim.Simulator(prog)
    with pytest.warns(birsim.BirsimWarning, match="never-written bytes of 't'"):
        out = sim.run({})["out"]
    np.testing.assert_array_equal(out, np.zeros((P, F), np.int32))


def test_region_nesting_deeper_than_256_is_a_clear_error():
    body = [block("leaf", insn("n", "NoOp", "SP", ins=[], outs=[]))]
    for depth in range(300):
        body = [block(f"b{depth}", loop(f"L{depth}", f"i{depth}", 0, 1, 1, body))]
    prog = module([function("main", [], body)])
    with pytest.raises(birsim.SimulationError, match="nesting deeper than 256"):
        birsim.run(prog, {})


def test_simulators_in_concurrent_threads_do_not_interfere():
    """The core has no global state: two runs at once (the GIL is released) give the
    same results as run one after the other."""
    import json
    import pathlib
    path = pathlib.Path(__file__).resolve().parent.parent.parent / "examples" / "tiled_matmul.json"
    module = birsim.load(json.loads(path.read_text()))
    rng = np.random.default_rng(9)
    feeds = [{"x": rng.standard_normal((512, 128), dtype=np.float32),
              "w": rng.standard_normal((512, 512), dtype=np.float32),
              "bias": rng.standard_normal((128, 1), dtype=np.float32)} for _ in range(4)]
    alone = [birsim.Simulator(module).run(f)["out"] for f in feeds]
    results = [None] * len(feeds)

    def work(i):
        sim = birsim.Simulator(module)
        for _ in range(3):
            results[i] = sim.run(feeds[i])["out"]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(feeds))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for got, want in zip(results, alone):
        np.testing.assert_array_equal(got, want)
