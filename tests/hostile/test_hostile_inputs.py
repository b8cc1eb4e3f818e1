"""Hostile inputs end in a birsim error, never a foreign exception: module lists (one
program per core) at the limits -- more programs than cores are refused at load, naming
the limit; what the modules of a list share is made once, not once per module (a list of N
programs loaded in time and memory quadratic in N before) -- and JSON Python cannot hold."""

import subprocess
import sys

import json
import os

import pytest

import birsim

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MAX = birsim._birsim.limits["max_cores"]


def _program():
    with open(os.path.join(ROOT, "examples", "tiled_matmul.json")) as fh:
        return json.load(fh)


@pytest.mark.parametrize("form", ["text", "list", "simulator"])
def test_more_modules_than_cores_are_refused_at_load(form):
    m = _program()
    with pytest.raises(birsim.ProgramError, match="list of %d modules.*at most %d cores"
                       % (MAX + 1, MAX)):
        if form == "text":
            birsim.load(json.dumps([m] * (MAX + 1)))
        elif form == "list":
            birsim.load([m] * (MAX + 1))
        else:
            birsim.Simulator([m] * (MAX + 1))
    assert len(birsim.load([m] * MAX)) == MAX


def test_the_modules_of_a_list_share_their_tensor_tables():
    mods = birsim.load([_program()] * 4)
    assert all(m._all_tensors is mods[0]._all_tensors for m in mods)
    assert all(m._loc_rows is mods[0]._loc_rows for m in mods)
    # ... while each keeps its own tensors and inputs
    assert [len(m.tensors) for m in mods] == [len(mods[0].tensors)] * 4
    assert all(t in m._all_tensors for m in mods for t in m.tensors)
    assert len({id(t) for m in mods for t in m.tensors}) == 4 * len(mods[0].tensors)


@pytest.mark.parametrize("as_bytes", [False, True])
def test_an_integer_beyond_pythons_digit_limit_is_a_program_error(as_bytes):
    text = json.dumps(_program())[:-1] + ', "version": ' + "9" * 4400 + "}"
    with pytest.raises(birsim.ProgramError, match="invalid JSON.*4300.*digits"):
        birsim.load(text.encode() if as_bytes else text)


def test_an_integer_beyond_the_digit_limit_from_the_cli_is_no_traceback(tmp_path):
    p = tmp_path / "big.json"
    p.write_text(json.dumps(_program())[:-1] + ', "version": ' + "9" * 4400 + "}")
    r = subprocess.run([sys.executable, "-m", "birsim", "run", str(p)], capture_output=True,
                       text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 1 and "ProgramError" in r.stderr
    assert "Traceback" not in r.stderr


def test_a_str_holding_a_lone_surrogate_is_a_program_error():
    text = json.dumps(_program())[:-1] + ', "junk\ud800": 1}'
    with pytest.raises(birsim.ProgramError, match="not Unicode text"):
        birsim.load(text)


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("pair, what", [([2 ** 63 - 1, 8], "step"), ([-(2 ** 40), 8], "step"),
                                        ([1, 2 ** 31 + 1], "num")])
def test_an_access_pattern_out_of_range_names_the_instruction_and_json_path(
        monkeypatch, fast, pair, what):
    """Was 'opnds[0]: step out of range' from the C verifier, naming a table row."""
    from birsim import dumps as D
    monkeypatch.setattr(birsim._load.passes, "FAST_PATH", fast)
    prog = D.module([D.dram("x", "ExternalInput", [4, 8]), D.dram("y", "ExternalOutput", [4, 8])],
                    [("b", [D.insn("c", "TensorCopy", "DVE", ins=[D.ap("x", [[8, 4], pair])],
                                   outs=[D.full("y", 4, 8)])])])
    with pytest.raises(birsim.ProgramError, match=what) as e:
        birsim.load(prog)
    assert e.value.path == "functions[0].blocks[0].instructions[0].ins[0].ap[1][%d]" % (
        0 if what == "step" else 1)
    assert "instruction 'c'" in str(e.value)


@pytest.mark.nosan
def test_a_large_tensor_barely_written_costs_what_was_written_at_each_reset():
    """A 256 MiB Internal DRAM scratch of which each run writes 128 bytes: the runs after the
    first add no resident memory (the reset used to clear its whole shadow: +256 MiB)."""
    import numpy as np
    from birsim import dumps as D
    n = 256 << 20

    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    prog = D.module([D.dram("x", "ExternalInput", [4, 8]), D.dram("scr", "Internal", [n // 4]),
                     D.dram("y", "ExternalOutput", [4, 8])],
                    [("b", [D.insn("w", "TensorCopy", "DVE", ins=[D.full("x", 4, 8)],
                                   outs=[D.ap("scr", [[8, 4], [1, 8]])]),
                            D.insn("r", "TensorCopy", "DVE", ins=[D.ap("scr", [[8, 4], [1, 8]])],
                                   outs=[D.full("y", 4, 8)])])])
    sim = birsim.Simulator(prog)
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    sim.run({"x": x})
    before = rss()
    for _ in range(3):
        np.testing.assert_array_equal(sim.run({"x": x})["y"], x)
    assert rss() - before < 32 << 20


# ---- hostile work directories: `birsim check` names the problem (exit status 2), never
# ---- hangs, never leaks a foreign exception's traceback, never writes outside

def _hostile(tmp_path, name):
    from test_workdir_flows import write_workdir
    d = tmp_path / name
    d0, _ = write_workdir(d, "standard")
    return d, d0


def _check_refuses(d, *needles):
    from test_workdir_flows import check
    code, out, err = check(d)
    assert code == 2, out + err
    assert "Traceback" not in err and "WorkdirError" in err, err
    for n in needles:
        assert n in err, err


def test_hostile_dump_kinds(tmp_path):
    d, d0 = _hostile(tmp_path, "devzero")
    dump = next(d0.glob("bir_debug*"))
    dump.unlink()
    os.symlink("/dev/zero", dump)                       # would eat memory if read
    _check_refuses(d, "not a regular file")
    d, d0 = _hostile(tmp_path, "dir")
    dump = next(d0.glob("bir_debug*"))
    dump.unlink()
    dump.mkdir()
    _check_refuses(d, "is a directory")


def test_hostile_input_files(tmp_path):
    import numpy as np
    d, d0 = _hostile(tmp_path, "npz")
    x = np.load(d0 / "value_x.npy")
    with open(d0 / "value_x.npy", "wb") as fh:               # an .npz under an .npy name
        np.savez(fh, x=x)
    _check_refuses(d, "value_x.npy")
    d, d0 = _hostile(tmp_path, "header")
    with open(d0 / "value_x.npy", "wb") as fh:               # a 60 kB .npy header
        fh.write(b"\x93NUMPY\x01\x00" + (60000).to_bytes(2, "little") + b"{" + b" " * 59998
                 + b"\n")
    _check_refuses(d, "value_x.npy")
    d, d0 = _hostile(tmp_path, "huge")
    with open(d0 / "value_x.npy", "wb") as fh:               # far larger than x needs
        fh.truncate(1 << 30)                                  # sparse: no disk used
    _check_refuses(d, "value_x.npy", "needs")


def test_hostile_directory_layouts(tmp_path):
    (tmp_path / "gap" / "nc99999999").mkdir(parents=True)    # was 3 GiB and 20 s
    _check_refuses(tmp_path / "gap", "missing nc00")
    for k in range(MAX + 1):
        (tmp_path / "many" / ("nc%02d" % k) / "sg00").mkdir(parents=True)
    _check_refuses(tmp_path / "many", "at most %d cores" % MAX)
    d, d0 = _hostile(tmp_path, "outdir")
    (d0 / "value_y-birsim.npy").mkdir()
    _check_refuses(d, "a directory has that name")


@pytest.mark.parametrize("name", ["../y", "a/b", ".."])
def test_tensor_names_that_would_leave_the_directory(tmp_path, name):
    d, d0 = _hostile(tmp_path, "names")
    dump = next(d0.glob("bir_debug*"))
    m = json.loads(dump.read_text())
    for a in m["functions"][0]["allocations"]:
        if a["debug"]["tensor_name"] == "y":
            a["memorylocations"][0]["name"] = a["debug"]["tensor_name"] = name
    for b in m["functions"][0]["blocks"]:
        for i in b["instructions"]:
            for o in i["outs"]:
                if o.get("memref") == "y":
                    o["memref"] = name
    dump.write_text(json.dumps(m))
    _check_refuses(d, "would leave the directory")
    assert not (tmp_path / "y-birsim.npy").exists() and not (d / "value_y-birsim.npy").exists()
