"""Issue 12's reproducers (tests/data/repros/, offsets converted to element counts) end
cleanly: each used to kill the process, hang, leak a foreign exception or silently wrap.
Those that used to kill the process run in a subprocess."""

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import birsim

REPROS = pathlib.Path(__file__).resolve().parent.parent / "data" / "repros"
ROOT = REPROS.parent.parent.parent


def repro(name):
    return json.loads((REPROS / name).read_text())


def inputs_for(module):
    return {t.name: np.ones(t.shape, t.numpy_dtype) for t in module.inputs}


def in_subprocess(code, timeout=120):
    """Run code in a fresh interpreter; its last stdout line (it must exit 0)."""
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT,
                       capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, (p.returncode, p.stderr[-2000:])
    return p.stdout.strip().splitlines()[-1]


# ---- process death: SIGFPE and undefined float -> int conversion ------------------------

@pytest.mark.parametrize("name,reg", [
    ("sigfpe_registeralu_divide.json", 0),    # INT64_MIN / -1 wraps to INT64_MIN; 32-bit cell 0
    ("sigfpe_registeralu_mod.json", 0),       # INT64_MIN % -1 is 0
    ("sigfpe_registeralu_float_imm.json", 0),  # -1e300 saturates to INT64_MIN, then as above
    ("ub_float_to_int_imm_nan.json", 1),      # NaN converts to 0; 0 + 1
])
def test_register_alu_never_traps(name, reg):
    out = in_subprocess(f"""
        import json, numpy as np, birsim
        sim = birsim.Simulator(json.load(open({str(REPROS / name)!r})))
        sim.run(a=np.ones((4, 4), np.float32))
        print(sim.register("r"))
    """)
    assert int(out) == reg


def test_fuzz_found_sigfpe_case_runs():
    out = in_subprocess(f"""
        import json, numpy as np, birsim
        m = birsim.load(json.load(open({str(REPROS / "fuzz_found_sigfpe_case.json")!r})))
        sim = birsim.Simulator(m, max_steps=2000)
        sim.run({{t.name: np.ones(t.shape, t.numpy_dtype) for t in m.inputs}})
        print(sim.register("r0"))
    """)
    assert int(out) == 0       # INT64_MIN mod_int (r0 = -1) is 0


def _alu64(op, a, b):
    p = repro("sigfpe_registeralu_divide.json")
    f = p["functions"][0]
    f["allocations"][2]["dtype"] = "int64"
    ins = f["blocks"][0]["instructions"][0]
    ins.update(op=op, is_64bit=True)
    # an integer-typed immediate holding a float goes through the int64 conversion
    ins["ins"] = [{"kind": "imm_value", "value": a, "dtype": "int64"},
                  {"kind": "imm_value", "value": b, "dtype": "int64"}]
    sim = birsim.Simulator(p)
    sim.run(a=np.ones((4, 4), np.float32))
    return sim.register("r")


@pytest.mark.parametrize("op,a,b,want", [
    ("divide", -2**63, -1, 2**63),             # wraps to INT64_MIN (raw cell 0x8000...)
    ("mod", -2**63, -1, 0),
    ("divide", -7, 2, 2**64 - 3),              # C truncation: -3
    ("add", 2**63 - 1, 1, 2**63),              # documented wrap-around
    ("add", float("nan"), 5, 5),               # NaN -> 0
    ("add", float("inf"), 0, 2**63 - 1),       # saturates
    ("add", -1e300, 0, 2**63),                 # saturates to INT64_MIN
])
def test_register_alu_64bit_wraps_and_converts(op, a, b, want):
    assert _alu64(op, a, b) == want


def test_strided_int8_gather_of_placed_sb_tensor():
    # Used to make a misaligned int64 store (UBSan abort in the sanitizer build).
    p = repro("ubsan_misaligned_gather_offsets.json")
    x = (np.arange(8 * 84) % 100).astype(np.int8).reshape(8, 84)
    out = birsim.Simulator(p).run(s=x)["o"]
    np.testing.assert_array_equal(out.ravel(), x.ravel()[::4][:129])


def test_fuzz_found_misaligned_case_is_a_clean_error():
    m = birsim.load(repro("fuzz_found_misaligned_case.json"))
    with pytest.raises(birsim.MemoryAccessError, match="outside the location"):
        birsim.Simulator(m, max_steps=200).run(inputs_for(m))


# ---- silent wrap-around ---------------------------------------------------------------

@pytest.mark.parametrize("name,exc,match", [
    ("wrap_register_ap_offset.json", birsim.MemoryAccessError, "overflows int64"),
    ("oob_register_ap_offset_control.json", birsim.MemoryAccessError, "outside the location"),
    ("wrap_offset_expr.json", birsim.ProgramError, "expression overflows int64"),
    ("wrap_offset_expr_bytes.json", birsim.MemoryAccessError, "overflows int64"),
    ("wrap_dynamic_loop_ub.json", birsim.ProgramError, "upper bound .* overflows int64"),
])
def test_address_and_bound_overflow_is_an_error_naming_the_instruction(name, exc, match):
    m = birsim.load(repro(name))
    with pytest.raises(exc, match=match) as e:
        birsim.Simulator(m, max_steps=1000).run(inputs_for(m))
    assert e.value.instruction is not None and e.value.function == "main"


def test_loop_over_the_whole_int64_range_runs_until_the_step_limit():
    # lb = -2^63, ub = 2^63-1: `ub - iv` used to wrap and end the loop after one trip.
    m = birsim.load(repro("wrap_loop_bounds.json"))
    sim = birsim.Simulator(m, max_steps=1000)
    with pytest.raises(birsim.StepLimitError):
        sim.run(inputs_for(m))
    assert sim.stats["opcodes"]["TensorCopy"] > 100


def test_loop_ending_near_int64_max_stops():
    p = repro("wrap_loop_bounds.json")
    axis = p["functions"][0]["blocks"][0]["instructions"][0]["LoopAxis"]
    axis.update(lb=2**63 - 5, ub=2**63 - 1, stride=3)     # trips at -5 and -2 only
    sim = birsim.Simulator(p)
    sim.run(a=np.ones((4, 4), np.float32))
    assert sim.stats["opcodes"]["TensorCopy"] == 3        # 2 trips + the copy after


# ---- foreign exceptions ---------------------------------------------------------------

@pytest.mark.parametrize("name,match", [
    ("pyexc_overflow_imm_value_int.json",
     r"instructions\[0\]\.ins\[0\]\.value: integer immediate ~2\^100 does not fit 64 bits"),
    ("pyexc_overflow_tensorscalar_const.json", "too large for a float64"),
    ("pyexc_overflow_activation_scale.json", "too large for a float64"),
    ("pyexc_overflow_imm_array.json", "too large for a float64"),
    ("pyexc_overflow_target_core.json", "target_core|does not fit"),
    ("pyexc_overflow_shape_product.json", "does not fit|too large|64 bits"),
    ("pyexc_unicode_surrogate_name.json", "lone surrogate"),
    ("sbuf_over_capacity_accepted.json", "4096 partitions; the SB of arch .* has 128"),
    ("fuzz_asan_only_slow_calloc_case.json", "partitions; the SB of arch"),
])
def test_bad_programs_are_program_errors(name, match):
    with pytest.raises(birsim.ProgramError, match=match) as e:
        m = birsim.load(repro(name))
        birsim.Simulator(m).run(inputs_for(m))
    assert str(e.value)


def test_deeply_nested_dict_source_is_a_program_error():
    e = {"kind": "AffIVKind", "axis": "i"}
    for _ in range(2000):
        e = {"kind": "AffExprKind", "c": 1, "terms": [{"idx": e, "coeff": 1}]}
    p = repro("wrap_offset_expr.json")
    p["functions"][0]["blocks"][0]["instructions"][0]["ins"][0]["offset"] = e
    with pytest.raises(birsim.ProgramError, match="nested too deeply"):
        birsim.load(p)


def test_one_tib_tensor_is_a_clear_birsim_error_before_allocating():
    m = birsim.load(repro("memoryerror_1tib_dram.json"))
    with pytest.raises(birsim.OutOfMemoryError, match="declares 2.0 TiB .* memory_limit") as e:
        birsim.Simulator(m)
    assert isinstance(e.value, MemoryError) and isinstance(e.value, birsim.BirsimError)


def test_memory_limit_is_configurable():
    m = birsim.load(repro("sigfpe_registeralu_divide.json"))
    with pytest.raises(birsim.OutOfMemoryError, match="memory_limit"):
        birsim.Simulator(m, memory_limit=1 << 20)          # below SBUF + PSUM
    birsim.Simulator(m, memory_limit=1 << 30).run(a=np.ones((4, 4), np.float32))


@pytest.mark.parametrize("kw,exc", [
    (dict(cores=2**40), ValueError), (dict(cores=0), ValueError), (dict(cores=65), ValueError),
    (dict(max_steps=2**64), ValueError), (dict(max_steps=-1), ValueError),
    (dict(seed="x"), TypeError), (dict(memory_limit=-1), ValueError),
    (dict(kernel_timeout=0), ValueError),
])
def test_out_of_range_options_are_value_errors(kw, exc):
    with pytest.raises(exc):
        birsim.Simulator(repro("sigfpe_registeralu_divide.json"), **kw)


@pytest.mark.parametrize("core,exc", [(99, ValueError), (-1, ValueError), (2**70, ValueError),
                                      ("0", TypeError)])
def test_register_and_read_check_the_core(core, exc):
    sim = birsim.Simulator(repro("sigfpe_registeralu_divide.json"))
    sim.run(a=np.ones((4, 4), np.float32))
    with pytest.raises(exc):
        sim.register("r", core=core)
    with pytest.raises(exc):
        sim.read("o", core=core)
    with pytest.raises(birsim.UnknownNameError, match="no register named 'nope'"):
        sim.register("nope")


# ---- unbounded cost ---------------------------------------------------------------------

def _rss_mib():
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) // 1024
    return 0


def test_untouched_dram_tensor_costs_no_resident_memory():
    out = in_subprocess("""
        import numpy as np, birsim
        def rss():
            for l in open("/proc/self/status"):
                if l.startswith("VmRSS"):
                    return int(l.split()[1]) // 1024
        T = lambda n, kind, shape: {"Skind": "memory_location_set", "name": n, "kind": kind,
             "dtype": "float32", "tensor_shape": shape,
             "memorylocations": [{"name": n, "type": "DRAM"}]}
        P = {"functions": [{"name": "main", "allocations": [
            T("a", "ExternalInput", [4, 4]), T("o", "ExternalOutput", [4, 4]),
            T("unused", "Internal", [512, 1 << 20])],          # 2 GiB
            "blocks": [{"name": "b", "instructions": [
                {"name": "c", "opcode": "TensorCopy", "engine": "DVE",
                 "ins": [{"kind": "physical_ap", "memref": "a", "ap": [[4, 4], [1, 4]]}],
                 "outs": [{"kind": "physical_ap", "memref": "o", "ap": [[4, 4], [1, 4]]}]}]}]}]}
        s = birsim.Simulator(P)
        before = rss()
        for _ in range(3):
            s.run(a=np.ones((4, 4), np.float32))
        print(rss() - before)
    """)
    assert int(out) < 64            # MiB; the tensor and its shadow are 4 GiB


def test_huge_broadcast_operand_is_rejected_not_run():
    k = 28       # 2^28 elements re-reading one 4-byte element: 1 GiB of scratch, ~10 s
    ap = lambda m, pat, **kw: dict({"kind": "physical_ap", "memref": m, "ap": pat}, **kw)
    t = lambda n, kind: {"Skind": "memory_location_set", "name": n, "kind": kind,
                         "dtype": "float32", "tensor_shape": [1, 1],
                         "memorylocations": [{"name": n, "type": "DRAM"}]}
    P = {"functions": [{"name": "main", "allocations": [t("x", "Internal"), t("o", "ExternalOutput")],
         "blocks": [{"name": "b", "instructions": [
             {"name": "init", "opcode": "Memset", "engine": "Pool", "constant": 0,
              "outs": [ap("x", [[1, 1], [1, 1]])]},
             {"name": "big", "opcode": "TensorCopy", "engine": "DVE",
              "ins": [ap("x", [[0, 1], [0, 1 << k]], dtype="float32")],
              "outs": [ap("x", [[0, 1], [0, 1 << k]], dtype="int32")]}]}]}]}
    with pytest.raises(birsim.ProgramError, match="268435456 elements, above the 16777216") as e:
        birsim.Simulator(P, max_steps=10).run()
    assert e.value.instruction == "big"


@pytest.mark.nosan             # ASan's quarantine grows RSS by design
def test_no_leak_per_run_time_error():
    p = repro("oob_register_ap_offset_control.json")
    sim = birsim.Simulator(p)
    a = np.ones((4, 4), np.float32)

    def errors(n):
        for _ in range(n):
            with pytest.raises(birsim.MemoryAccessError):
                sim.run(a=a)
    errors(2000)
    before = _rss_mib()
    errors(20000)
    assert _rss_mib() - before < 1          # was ~80 bytes per error: 1.5 MiB here


# Cases the CI fuzz pass (tests/fuzz.py, seed 1) found under the strict sanitizer build:
# float -> int64 of NaN/1e300 in CompareAndBranch immediates (vm/branch.c) and custom-op
# shape products past int64 (vm/host.c). Replayed exactly (same mutations, same rng) in a
# subprocess, so a sanitizer report or a crash fails the test instead of the session.
# 36829: a Loop whose body block is empty took the dispatch fast path's one-step trip and
# ran "instruction 0" of the empty block (a heap read past the instructions).
@pytest.mark.parametrize("case", [10899, 36689, 36829, 51623, 59655, 98043, 99736])
def test_fuzz_found_case_ends_cleanly(case):
    code = ("import sys; sys.path.insert(0, %r); import fuzz; "
            "name, prog, rng = fuzz.make_case(fuzz.load_seeds(), 1, %d); "
            "r = fuzz.run_case(prog, rng); print(r or 'clean'); sys.exit(0 if r is None else 3)"
            % (os.path.dirname(os.path.dirname(os.path.abspath(__file__))), case))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, (p.stdout + p.stderr)[-800:]
