"""The walker's packed tables grow at once to the last load's size (fastload_rec.c
bs_fl_buf_put's hint): loads of larger, smaller and equal sizes in turn give the tables
of the Python path."""
import sys

import pytest

from test_load_fastload import ROOT, outcome


@pytest.mark.parametrize("spelling", ["birsim", "compiler"])
def test_loads_after_a_larger_or_smaller_one_fill_the_same_tables(spelling, monkeypatch):
    sys.path.insert(0, str(ROOT / "bench"))
    import bench_load
    # 64 KB holds ~320 instructions' records: every size here outgrows it; 3000 outgrows
    # the hint left by 1500, 600 and 1200 stay under the one left by 3000
    for n in (1500, 3000, 600, 1200, 1200, 2400):
        prog = bench_load.make_program(n, spelling, "all")
        slow = outcome(prog, False, monkeypatch)
        fast = outcome(prog, True, monkeypatch)
        assert fast[0][0] == "ok"
        assert fast == slow, n
