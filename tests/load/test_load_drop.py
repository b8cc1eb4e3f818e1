"""The walker frees the JSON of each instruction it tables as it goes (``_fast_block``'s
``drop``: only for a tree ``load()`` parsed itself), while it is still in cache; the
instructions it hands back (their pass 1 and 2 read the JSON) and the one it declines
(the Python path reads it) stay. A caller's tree is never touched. Tables equal those of
the Python path either way.
"""

import copy
import json

import birsim
import birsim._load.passes as L

from test_load_fastload import _tables

import bench_load  # noqa: E402 -- bench/ is on the path (test_load_fastload)


def _watch(monkeypatch):
    """Wrap the walker: after each call, check what it left in the instruction list."""
    calls = []
    real = L._fast_block

    def watched(state, insns, start, block, func, locs, regs, sets, seen, back, drop):
        k = real(state, insns, start, block, func, locs, regs, sets, seen, back, drop)
        handed = {entry[0] for entry in back}
        for j in range(start, k):
            if j in handed or not drop:
                assert isinstance(insns[j], dict), (j, drop)
            else:
                assert insns[j] is None, j          # freed by the walker itself
        if k < len(insns):
            assert isinstance(insns[k], dict)       # declined: the Python path reads it
        calls.append((drop, k - start, len(handed)))
        return k

    monkeypatch.setattr(L, "_fast_block", watched)
    return calls


def _program(tmp_path, n=1200):
    prog = bench_load.make_program(n, "birsim", "all")   # every opcode, loops and all
    path = tmp_path / "all.json"
    path.write_text(json.dumps(prog))
    return prog, path


def test_the_walker_frees_what_it_tables_from_a_tree_load_parsed(tmp_path, monkeypatch):
    prog, path = _program(tmp_path)
    calls = _watch(monkeypatch)
    m = birsim.load(str(path))
    assert calls and all(drop for drop, _, _ in calls)
    assert sum(taken for _, taken, _ in calls) > 1000
    assert sum(handed for _, _, handed in calls) > 50
    monkeypatch.setattr(L, "FAST_PATH", False)
    assert _tables(m) == _tables(birsim.load(str(path)))


def test_a_callers_tree_is_never_touched(tmp_path, monkeypatch):
    prog, path = _program(tmp_path)
    before = copy.deepcopy(prog)
    from_text = _tables(birsim.load(str(path)))
    calls = _watch(monkeypatch)
    m = birsim.load(prog)
    assert calls and not any(drop for drop, _, _ in calls)
    assert prog == before
    assert _tables(m) == from_text
