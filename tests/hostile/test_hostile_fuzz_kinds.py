"""The fuzzer's module-list and work-directory cases (tests/fuzz.py): a short in-process
pass of each ends cleanly and leaves nothing behind, the generators reach the hostile
kinds they are meant to, the outside-write detector fires when something writes outside
the case's directory, and every case the fuzzer found is replayed (tests/data/fuzz_cases/).
The fixes those cases led to are tested directly too: a core directory symlinked out of the
work directory, a .npy header declaring more data than its file holds (or one NumPy's
header parser fails on), a dump that is a dangling symlink, a path holding a NUL or a lone
surrogate."""

import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import birsim
import fuzz
from birsim.errors import WorkdirError

HERE = pathlib.Path(__file__).resolve().parent.parent
CASES = sorted((HERE / "data" / "fuzz_cases").glob("*.fuzzcase"))


@pytest.fixture(scope="module")
def seeds():
    return fuzz.load_seeds()


@pytest.fixture
def sandbox(tmp_path, monkeypatch):
    d = tmp_path / "sandbox"
    d.mkdir()
    monkeypatch.chdir(d)                      # as the worker: a relative write lands here
    return d


def _numbers(kind, count, start=0):
    letter = {v: k for k, v in fuzz.KIND_NAMES.items()}[kind]
    n = start
    while count:
        if fuzz._KINDS[n % len(fuzz._KINDS)] == letter:
            yield n
            count -= 1
        n += 1


@pytest.mark.parametrize("kind", ["list", "workdir"])
def test_a_short_pass_ends_cleanly_and_leaves_nothing(kind, seeds, sandbox):
    findings = []
    for n in _numbers(kind, int(os.environ.get("BIRSIM_FUZZ_ITERATIONS", "300"))):
        k, name, case, rng = fuzz.make_any(seeds, 12, n)
        assert k == kind
        res = fuzz.run_any(k, case, rng, str(sandbox))
        if res is not None:
            findings.append((n, name, res))
    assert not findings, findings[:5]
    assert os.listdir(sandbox) == []


def test_case_kinds_keep_the_program_cases_their_numbers():
    # the findings tests/hostile/test_hostile_repros.py replays are program cases of seed 1
    for n in (10899, 36689, 51623, 59655, 98043, 99736):
        assert fuzz.case_kind(n) == "program"
    kinds = [fuzz.case_kind(n) for n in range(1000)]
    assert kinds.count("list") == kinds.count("workdir") == 200


def test_module_lists_mix_sizes_spellings_and_forms(seeds):
    sizes, forms, spellings, placed = set(), set(), set(), 0
    for n in _numbers("list", 400):
        _, case, _ = fuzz.make_list_case(seeds, 3, n)
        mods = case["modules"]
        sizes.add(len(mods))
        forms.add(case["form"])
        for m in mods:
            try:
                text = json.dumps(m, default=str)
            except RecursionError:                # a deeply nested mutation
                continue
            spellings.add("birsim" if '"Skind"' in text else "compiler")
            placed += '"Internal"' in text and '"addr"' in text and '"DRAM"' in text
    assert set(range(2, 9)) <= sizes
    assert forms == {"bytes", "str", "list"}
    assert spellings == {"birsim", "compiler"}
    assert placed > 100                       # the per-core arena placement shape


def _kinds_of(spec):
    """The hostile features of a work-directory spec."""
    out = set()
    for path, e in spec["tree"].items():
        if not path.startswith("case"):
            continue
        if e["kind"] == "symlink":
            to = e["to"]
            out.add("symlink to /dev" if to.startswith("/dev/") else
                    "symlink out" if e["base"] == "root" and to.startswith("outside") else
                    "symlink loop" if to == "self" else "symlink in")
            if path.count("/") == 2 and path.endswith("sg00"):
                out.add("core directory symlinked out")
        elif e["kind"] in ("fifo", "sparse", "mode"):
            out.add(e["kind"])
        elif e["kind"] == "dir" and path.endswith((".npy", ".json")):
            out.add("directory for a file")
        elif e["kind"] == "file":
            data = e["data"]
            if data.startswith(b"PK"):
                out.add("npz")
            if data.startswith(b"\x93NUMPY\x02"):
                out.add("huge header")
            if "nc99999999" in path or "nc66" in path or "nc65" in path:
                out.add("odd core numbers")
            if path.endswith(".json") and any(
                    ('"%s"' % n) in data.decode("utf-8", "replace")
                    for n in ("../y", "a/b", "..", "../../outside/victim")):
                out.add("name leaving the directory")
        if "/sg01" in path or "/sg02" in path or "/sg10" in path:
            out.add("extra subgraph")
        if path.startswith("case/nc") and path.split("/")[1] not in (
                "nc%02d" % k for k in range(8)):
            out.add("odd core numbers")
    if any(p.endswith("-birsim.npy") for p in spec["tree"]):
        out.add("result already there")
    return out


def test_work_directories_reach_every_hostile_kind(seeds):
    seen, layouts = set(), set()
    for n in _numbers("workdir", 2000):
        _, spec, _ = fuzz.make_workdir_case(seeds, 3, n)
        seen |= _kinds_of(spec)
        tree = spec["tree"]
        layouts.add(("nc" if any(p.startswith("case/nc") for p in tree) else "sg00",
                     "baremetal" if any(p.endswith("/bir.json") for p in tree) else
                     "standard"))
    assert seen >= {"fifo", "sparse", "mode", "npz", "huge header", "symlink to /dev",
                    "symlink out", "symlink in", "symlink loop", "directory for a file",
                    "core directory symlinked out", "odd core numbers", "extra subgraph",
                    "result already there", "name leaving the directory"}, seen
    assert layouts == {("nc", "standard"), ("nc", "baremetal"), ("sg00", "standard"),
                       ("sg00", "baremetal")}


def _one_workdir_case(seeds):
    n = next(_numbers("workdir", 1, 40))
    return fuzz.make_workdir_case(seeds, 3, n)


def test_the_outside_write_detector_fires(seeds, sandbox, monkeypatch):
    """A check() that writes outside the case's directory is a finding, and so is one that
    raises a foreign exception; the case's files are removed either way."""
    import birsim.workdir
    _, spec, rng = _one_workdir_case(seeds)

    def writes_victim(workdir, **kw):
        root = pathlib.Path(workdir).parent
        (root / "outside" / "victim.npy").write_bytes(b"x")
    monkeypatch.setattr(birsim.workdir, "check", writes_victim)
    assert fuzz.run_workdir_case(spec, rng, str(sandbox)) == \
        "outside: changed outside/victim.npy"

    def writes_cwd(workdir, **kw):
        pathlib.Path("stray.npy").write_bytes(b"x")
    monkeypatch.setattr(birsim.workdir, "check", writes_cwd)
    assert fuzz.run_workdir_case(spec, rng, str(sandbox)) == "outside: changed stray.npy"
    os.unlink(sandbox / "stray.npy")

    def raises(workdir, **kw):
        raise KeyError("x")
    monkeypatch.setattr(birsim.workdir, "check", raises)
    assert fuzz.run_workdir_case(spec, rng, str(sandbox)).startswith("foreign at ")
    assert os.listdir(sandbox) == []


def test_a_case_saved_by_the_fuzzer_replays_as_found(seeds, sandbox, tmp_path):
    kind, _, spec, rng = fuzz.make_any(seeds, 3, next(_numbers("workdir", 1, 40)))
    path = tmp_path / "case.fuzzcase"
    fuzz.save_case(path, kind, spec, rng, 3, 40)
    saved = json.loads(path.read_text())
    assert fuzz._unjson(saved["case_json"]) == spec
    assert fuzz.replay_saved(path, str(sandbox)) is None
    assert os.listdir(sandbox) == []


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_saved_fuzz_case_ends_cleanly(path, tmp_path):
    """Each case the fuzzer found (tests/data/fuzz_cases/, see its README), replayed in a
    subprocess so that a crash fails the test rather than the session."""
    sandbox = tmp_path / "sandbox"
    sandbox.mkdir()
    code = ("import sys; sys.path.insert(0, %r); import fuzz; "
            "r = fuzz.replay_saved(sys.argv[1], sys.argv[2]); print(r or 'clean'); "
            "sys.exit(0 if r is None else 3)" % str(HERE))
    p = subprocess.run([sys.executable, "-c", code, str(path), str(sandbox)],
                       capture_output=True, text=True, timeout=120, cwd=str(sandbox))
    assert p.returncode == 0, (p.stdout + p.stderr)[-800:]
    assert os.listdir(sandbox) == []


def test_there_are_saved_cases_of_both_kinds():
    kinds = {json.loads(p.read_text())["kind"] for p in CASES}
    assert kinds == {"list", "workdir"}


# ---- the fixes the fuzzer led to -------------------------------------------------------

def _workdir(root):
    from test_workdir_flows import write_workdir
    d0, _ = write_workdir(root, "standard", cores=2)
    return d0


def test_a_core_directory_symlinked_out_gets_no_results(tmp_path):
    """Core 0's directory a symlink to a directory outside: the results were written
    there (outside the work directory); now refused, naming --out, before the run."""
    import shutil
    wd = tmp_path / "wd"
    d0 = _workdir(wd)
    elsewhere = tmp_path / "elsewhere"
    shutil.move(str(d0), str(elsewhere))
    os.symlink(elsewhere, d0)
    before = sorted(os.listdir(elsewhere))
    with pytest.raises(WorkdirError, match="outside the work directory.*--out"):
        birsim.workdir.check(wd)
    assert sorted(os.listdir(elsewhere)) == before
    out = tmp_path / "out"
    report = birsim.workdir.check(wd, out=out)    # where the user says: fine
    assert report.status == 0 and sorted(os.listdir(out)) == ["value_kv-birsim.npy",
                                                              "value_y-birsim.npy"]
    assert sorted(os.listdir(elsewhere)) == before


def test_a_symlinked_work_directory_is_still_checked_in_place(tmp_path):
    wd = tmp_path / "wd"
    d0 = _workdir(wd)
    link = tmp_path / "link"
    os.symlink(wd, link)
    assert birsim.workdir.check(link).status == 0
    assert (d0 / "value_y-birsim.npy").is_file()


def _header(d):
    h = repr(d).encode()
    h += b" " * (63 - (10 + len(h)) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(h).to_bytes(2, "little") + h


@pytest.mark.parametrize("shape", [(1 << 40,), (1 << 62,), (10 ** 30,), (-1,), (4, -8),
                                   (2 ** 31, 2 ** 31)])
def test_a_npy_header_declaring_more_than_the_file_holds(tmp_path, shape):
    """Was MemoryError (NumPy allocating 4 TiB), OverflowError or a ValueError after the
    allocation; now refused from the header, before any allocation."""
    d0 = _workdir(tmp_path / "wd")
    (d0 / "value_x.npy").write_bytes(
        _header({"descr": "<f4", "fortran_order": False, "shape": shape}) + bytes(64))
    with pytest.raises(WorkdirError, match="value_x.npy"):
        birsim.workdir.check(tmp_path / "wd")


@pytest.mark.parametrize("data", [
    b"\x93NUMPY\x01\x00\x10\x00{'descr':'<f4',  \n",          # tokenize's TokenError
    b"\x93NUMPY\x01\x00\x10\x00{'descr':<f4}   \n",
    b"\x93NUMPY\x03\x00\x10\x00\x00\x00{'descr':'<f4'} \n",     # format 3.0
    _header({"descr": "|O", "fortran_order": False, "shape": (2,)}) + bytes(16)])
def test_a_npy_header_numpy_cannot_parse_is_a_workdir_error(tmp_path, data):
    d0 = _workdir(tmp_path / "wd")
    (d0 / "value_x.npy").write_bytes(data)
    with pytest.raises(WorkdirError, match="cannot read .*value_x.npy as a .npy file"):
        birsim.workdir.check(tmp_path / "wd")


def test_valid_npy_files_of_both_header_versions_still_load(tmp_path):
    d0 = _workdir(tmp_path / "wd")
    x = np.load(d0 / "value_x.npy")
    with open(d0 / "value_x.npy", "wb") as fh:
        np.lib.format.write_array(fh, x, version=(2, 0))
    assert birsim.workdir.check(tmp_path / "wd").status == 0


def test_a_dump_that_is_a_dangling_symlink(tmp_path):
    """Was FileNotFoundError from os.path.getsize."""
    d0 = _workdir(tmp_path / "wd")
    dump = next(d0.glob("bir_debug*"))
    dump.unlink()
    os.symlink(tmp_path / "nothing", dump)
    with pytest.raises(WorkdirError, match="a symlink to nothing"):
        birsim.workdir.check(tmp_path / "wd")


@pytest.mark.parametrize("path", ["\ud800", "a\x00b", "x/\ud800.json"])
@pytest.mark.parametrize("in_list", [False, True])
def test_a_path_holding_a_nul_or_a_lone_surrogate_is_a_program_error(path, in_list):
    """Was UnicodeEncodeError / ValueError from open()."""
    with pytest.raises(birsim.ProgramError, match="cannot read BIR-JSON file"):
        birsim.load([path, {}] if in_list else path)
