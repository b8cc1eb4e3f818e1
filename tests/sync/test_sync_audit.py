"""birsim.audit: every label is proved here by mutating the program and running the
race checker under schedules the audit did not use (random seeds 1..5)."""

import copy
import json
import subprocess
import sys
import warnings

import numpy as np
import pytest

import birsim
from birsim import build as B

SEM = "semaphore"


def _hand_synced():
    """Two loads on DMA, a DVE add reading only the first, a store of the add's result,
    a Pool copy of the second load (every semaphore ends at 0):

        ld_a  (DMA)  sa := a                          sem 0 += 1, sem 2 += 1
        ld_b  (DMA)  sb := b                          sem 0 += 1, sem 3 += 1
        add   (DVE)  sc := sa + sa   wait sem 0 >= 2 (over-strong: ld_a's 1 suffices)
                                                      sem 0 -= 2, sem 1 += 1
        st    (DMA)  out := sc       wait sem 1 >= 1 (needed)
        tail  (Pool) out2 := sb      wait sem 3 >= 1 (needed: sb is ld_b's)
                                     wait sem 2 >= 1 (redundant: ld_a and tail share
                                                      nothing)   sem 3 -= 1, sem 2 -= 1
    """
    a = B.tensor("a", "ExternalInput", "float32", [8, 8], "DRAM")
    b = B.tensor("b", "ExternalInput", "float32", [8, 8], "DRAM")
    out = B.tensor("out", "ExternalOutput", "float32", [8, 8], "DRAM")
    out2 = B.tensor("out2", "ExternalOutput", "float32", [8, 8], "DRAM")
    sa, sb, sc = (B.tensor(n, "Internal", "float32", [8, 8], "SB") for n in ("sa", "sb", "sc"))
    inc = lambda i: B.update(i, "sem-add-imm", 1, type=SEM)          # noqa: E731
    dec = lambda i, v: B.update(i, "sem-sub-imm", v, type=SEM)       # noqa: E731
    code = [
        B.load_(B.whole(a), B.whole(sa), name="ld_a", sync=B.sync_info([], [inc(0), inc(2)])),
        B.load_(B.whole(b), B.whole(sb), name="ld_b", sync=B.sync_info([], [inc(0), inc(3)])),
        B.tensor_tensor(B.whole(sa), B.whole(sa), B.whole(sc), "add", name="add",
                        sync=B.sync_info([B.sem_wait(0, 2)], [dec(0, 2), inc(1)])),
        B.save(B.whole(sc), B.whole(out), name="st",
               sync=B.sync_info([B.sem_wait(1, 1)], [dec(1, 1)])),
        B.tensor_copy(B.whole(sb), B.whole(out2), engine="Pool", name="tail",
                      sync=B.sync_info([B.sem_wait(3, 1), B.sem_wait(2, 1)],
                                       [dec(3, 1), dec(2, 1)])),
    ]
    return B.module([B.function("main", [a, b, out, out2, sa, sb, sc], code)])


def _races(prog, seeds=range(1, 6)):
    found = []
    rng = np.random.default_rng(7)
    mod = birsim.load(prog)
    inputs = {t.name: (rng.integers(1, 8, t.shape) if t.numpy_dtype.kind in "iu"
                       else rng.standard_normal(t.shape)).astype(t.numpy_dtype)
              for t in mod.inputs}
    for seed in seeds:
        sim = birsim.Simulator(mod, checks="races", schedule="random", seed=seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                sim.run(inputs)
            except birsim.BirsimError as e:
                return [str(e)]
        found += [f.message for f in sim.findings if f.kind == "races"]
    return found


def _insn(prog, rec):
    f = next(f for f in prog["functions"] if f["name"] == rec["function"])

    def find(blocks):
        for b in blocks:
            if b["name"] == rec["block"]:
                return b["instructions"][rec["position"]]
            for i in b["instructions"]:
                r = find(i.get("blocks", []))
                if r is not None:
                    return r
    return find(f["blocks"])


def _prove(prog, records):
    """Each record's label holds on a fresh mutant, checked under other schedules."""
    for rec in records:
        deleted = copy.deepcopy(prog)
        insn = _insn(deleted, rec)
        assert insn["name"] == rec["instruction"]
        w = insn["sync_info"]["on_wait"].pop(rec["wait"])
        assert w == rec["entry"]
        if rec["label"] == "redundant":
            assert _races(deleted) == [], rec
        else:
            assert _races(deleted), rec
        if rec["label"] == "over-strong":
            key = "wait_value" if "wait_value" in w else "value"
            assert rec["suggested_value"] < w[key]
            for v, racy in ((rec["suggested_value"], False), (rec["suggested_value"] - 1, True)):
                low = copy.deepcopy(prog)
                _insn(low, rec)["sync_info"]["on_wait"][rec["wait"]][key] = v
                if v >= 1:
                    assert bool(_races(low)) == racy, (rec, v)
        else:
            assert rec["suggested_value"] is None


def test_labels_of_a_hand_synchronised_program():
    prog = _hand_synced()
    assert _races(prog) == []
    recs = birsim.audit(prog)
    got = [(r["instruction"], r["wait"], r["label"], r["suggested_value"]) for r in recs]
    assert got == [("add", 0, "over-strong", 1), ("st", 0, "needed", None),
                   ("tail", 0, "needed", None), ("tail", 1, "redundant", None)]
    for r in recs:
        assert {"core", "function", "block", "position", "instruction", "wait", "label",
                "suggested_value", "evidence", "entry"} <= set(r)
        assert r["function"] == "main" and r["block"] == "b0"
    needed = next(r for r in recs if r["instruction"] == "st")
    assert needed["evidence"] and needed["evidence"][0]["access"] == "RAW"
    assert needed["evidence"][0]["first"]["instruction"] == "add"
    assert needed["evidence"][0]["second"]["instruction"] == "st"
    _prove(prog, recs)


@pytest.mark.parametrize("name", ["tiled_matmul.json", "sync_pipeline.json",
                                  "dynamic_add.json", "rmsnorm_customop.json"])
def test_labels_of_the_examples_are_true(name):
    sys.path.insert(0, "examples")
    import rmsnorm_kernel  # noqa: F401  (serves the custom op)
    with open("examples/" + name) as f:
        prog = json.load(f)
    recs = birsim.audit(prog)
    assert recs
    _prove(prog, recs)


def test_compiler_spelling_and_over_strong_lowering():
    """Waits spelled {from, id, wait_value} are judged and lowered in that spelling."""
    prog = _hand_synced()
    add = prog["functions"][0]["blocks"][0]["instructions"][2]
    add["sync_info"]["on_wait"] = [{"from": "ld_b", "id": 0, "wait_value": 2}]
    add["sync_info"]["on_update"][0] = {"id": 0, "update_value": 2 ** 32 - 2}   # -= 2
    recs = birsim.audit(prog)
    rec = next(r for r in recs if r["instruction"] == "add")
    assert (rec["label"], rec["suggested_value"]) == ("over-strong", 1)
    _prove(prog, recs)


def test_a_racy_program_is_refused():
    prog = _hand_synced()
    prog["functions"][0]["blocks"][0]["instructions"][3]["sync_info"]["on_wait"] = []
    with pytest.raises(birsim.ProgramError, match="not race-free"):
        birsim.audit(prog)


def test_cli_prints_the_table(tmp_path):
    path = tmp_path / "p.json"
    path.write_text(json.dumps(_hand_synced()))
    r = subprocess.run([sys.executable, "-m", "birsim", "audit", str(path)],
                       capture_output=True, text=True, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "over-strong" in r.stdout and "redundant" in r.stdout
    assert "4 wait(s): 2 needed, 1 redundant, 1 over-strong" in r.stdout


def test_the_modelled_time_each_unneeded_wait_costs():
    """``saved_ns``: what deleting a redundant wait or lowering an over-strong one gains
    under the timing model, checked against the mutant run here; needed waits have none.
    The add waits for both loads though it reads only the first: lowering the wait lets
    it start before the second load lands."""
    prog = _hand_synced()
    rng = np.random.default_rng(3)
    inputs = {n: rng.standard_normal((8, 8)).astype(np.float32) for n in ("a", "b")}
    records = birsim.audit(prog, inputs)

    def total(p):
        sim = birsim.Simulator(p, timing=True)
        sim.run(inputs)
        return sim.profile.total_ns
    base = total(prog)
    for rec in records:
        if rec["label"] == "needed":
            assert rec["saved_ns"] is None
            continue
        mutant = copy.deepcopy(prog)
        waits = _insn(mutant, rec)["sync_info"]["on_wait"]
        if rec["label"] == "redundant":
            waits.pop(rec["wait"])
        else:
            key = "wait_value" if "wait_value" in waits[rec["wait"]] else "value"
            waits[rec["wait"]][key] = rec["suggested_value"]
        assert rec["saved_ns"] == pytest.approx(base - total(mutant)), rec
    add = next(r for r in records if r["instruction"] == "add")
    assert add["label"] == "over-strong" and add["saved_ns"] > 0
