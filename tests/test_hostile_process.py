"""The host process stays safe (issue 25, items 5, 7 and 8): a Simulator dropped while
paused is freed at once; an external kernel_sim leaves no process, directory or huge read
behind; Ctrl-C interrupts a load; ``memory_limit=`` covers traces, print logs and
module-list tables."""

import gc
import os
import weakref

import numpy as np
import pytest

import birsim
from bir import function, insn, module, tensor, whole

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SH = [4, 8]
X = np.arange(32, dtype=np.float32).reshape(SH)


def _copy_chain(n=3):
    """out := in through ``n`` TensorCopy instructions (c0 .. c{n-1}) on one engine."""
    allocs = [tensor("in", "ExternalInput", "float32", SH, "DRAM"),
              tensor("out", "ExternalOutput", "float32", SH, "DRAM")]
    return module([function("main", allocs, [
        insn(f"c{i}", "TensorCopy", "DVE", ins=[whole("in", SH)], outs=[whole("out", SH)])
        for i in range(n)])])


# ---- item 5: a paused Simulator is freed when its last reference goes ----------------

@pytest.mark.parametrize("how", ["breakpoint", "step", "start", "on_instruction"])
def test_a_paused_simulator_is_freed_without_the_cyclic_gc(how):
    was = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        sim = birsim.Simulator(_copy_chain(), on_instruction=(
            (lambda s, stop: stop.instruction == "c1") if how == "on_instruction" else None))
        if how == "breakpoint":
            sim.breakpoint("c1")
            assert sim.debug({"in": X}) is None
        elif how == "on_instruction":
            assert sim.debug({"in": X}) is None
        else:
            sim.start({"in": X})
            if how == "step":
                assert sim.step().instruction == "c0"
        assert sim.paused
        ref = weakref.ref(sim)
        del sim
        assert ref() is None, "a reference cycle keeps the paused Simulator alive"
    finally:
        if was:
            gc.enable()


def test_a_dropped_paused_simulator_gives_its_memory_back():
    """A paused Simulator with a 64 MiB tensor: 8 of them dropped in turn keep at most
    one alive at a time (RSS grows by far less than 8 x 64 MiB)."""
    big = [4096, 4096]
    prog = module([function("main", [
        tensor("in", "ExternalInput", "float32", SH, "DRAM"),
        tensor("out", "ExternalOutput", "float32", SH, "DRAM"),
        tensor("big", "Internal", "float32", big, "DRAM")], [
        insn("fill", "Memset", "DVE", ins=[], outs=[whole("big", big)], value=1.0),
        insn("c0", "TensorCopy", "DVE", ins=[whole("in", SH)], outs=[whole("out", SH)])])])
    module_ = birsim.load(prog)

    def rss():
        with open("/proc/self/status") as f:
            return next(int(ln.split()[1]) * 1024 for ln in f if ln.startswith("VmRSS:"))

    was = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        before = rss()
        for _ in range(8):
            sim = birsim.Simulator(module_)
            sim.breakpoint("fill")
            assert sim.debug({"in": X}) is None
            del sim
        grown = rss() - before
    finally:
        if was:
            gc.enable()
    assert grown < 3 * (64 << 20), f"RSS grew by {grown >> 20} MiB"
