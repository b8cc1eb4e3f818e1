"""Jupyter reprs (Module, Simulator, Trace) and the plot helpers."""

import os
import re
import warnings

import numpy as np
import pytest

import birsim
from birsim import build as B

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..", "examples")


def test_module_html_folds_blocks_and_loops_and_colours_engines():
    mod = birsim.load(os.path.join(EXAMPLES, "tiled_matmul.json"))
    h = mod._repr_html_()
    # function open; its block, the loop and the loop's body block folded
    assert h.count("<details open>") == 1
    summaries = re.findall(r"<summary><code>(.*?)</code></summary>", h)
    plain = [re.sub(r"<[^>]+>", "", s) for s in summaries]
    assert plain[0] == "function main (entry)" and plain[1] == "block entry:"
    assert plain[2].startswith("[2] kloop: Unassigned Loop")
    assert plain[3] == "block kbody:"
    assert h.count("<details") == 4 and h.count("</details>") == 4
    for name in ("load_bias", "load_x", "load_w", "mm", "epilogue", "store"):
        assert f"] {name}: " in h
    assert re.search(r'<span class="eng" style="color:#e45756">PE</span> Matmult', h)
    assert "<td>in</td><td>x</td><td>512x128</td><td>float32</td>" in h
    assert "<td>out</td><td>out</td><td>128x512</td><td>float32</td>" in h


def _nan_program():
    a = B.tensor("a", "ExternalInput", "float32", [4, 8], "DRAM")
    o = B.tensor("o", "ExternalOutput", "float32", [4, 8], "DRAM")
    u = B.tensor("u", "Internal", "float32", [4, 8], "SB")
    o2 = B.tensor("o2", "ExternalOutput", "float32", [4, 8], "DRAM")
    return B.module([B.function("main", [a, o, u, o2], [
        B.tensor_copy(B.whole(a), B.whole(o), name="cp"),
        B.tensor_copy(B.whole(u), B.whole(o2), name="uninit")])])


def test_simulator_html_summarises_outputs_warnings_stats():
    sim = birsim.Simulator(_nan_program())
    assert "not run yet" in sim._repr_html_()
    a = np.arange(32, dtype=np.float32).reshape(4, 8) - 5
    a[1, 1] = a[2, 2] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", birsim.BirsimWarning)
        sim.run({"a": a})
    h = sim._repr_html_()
    assert "<td>o</td><td>4x8</td><td>float32</td><td>-5</td><td>26</td><td>2</td>" in h
    assert "<td>o2</td><td>4x8</td><td>float32</td><td>0</td><td>0</td><td>0</td>" in h
    assert f"<b>warnings</b> ({len(sim.warnings)})" in h and "uninit" in h
    assert "2 instructions" in h and "<td>DVE</td><td>2</td>" in h


def test_paused_simulator_and_trace_html():
    sim = birsim.Simulator(_nan_program(), trace=True)
    sim.breakpoint(name="cp")
    sim.debug({"a": np.zeros((4, 8), np.float32)})
    h = sim._repr_html_()
    assert "<b>paused</b> after <code>cp</code> (TensorCopy on DVE, core 0, block b0 [0]" in h
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", birsim.BirsimWarning)
        sim.resume()
    th = sim.trace._repr_html_()
    assert "2 records" in th and "<td>core 0</td><td>DVE</td>" in th and "100%" in th
    assert "sim.trace.plot()" in sim._repr_html_()


def test_plots_draw_one_bar_per_instruction_and_a_heat_map():
    import matplotlib
    matplotlib.use("Agg")
    import birsim.plot
    sim = birsim.Simulator(os.path.join(EXAMPLES, "sync_pipeline.json"), trace=True)
    out = sim.run({"x": np.ones((96, 8), np.float32), "w": np.ones((16, 4), np.float32)})
    ax = birsim.plot.timeline(sim)
    bars = sum(len(c.get_paths()) for c in ax.collections)
    assert bars == len(sim.trace)
    assert [t.get_text() for t in ax.get_yticklabels()] == \
        ["Unassigned", "Activation", "PE", "DMA", "DVE"]
    assert {t.get_text() for t in ax.get_legend().get_texts()} == \
        {"Load", "Loop", "TensorScalar", "Activation", "Matmult", "Save"}
    ax = birsim.plot.tensor(out["out"])
    img = ax.images[0].get_array()
    assert img.shape == (24, 8) and np.array_equal(np.asarray(img), out["out"])
    with pytest.raises(ValueError, match="trace=True"):
        birsim.plot.timeline(birsim.Simulator(os.path.join(EXAMPLES, "sync_pipeline.json")))
