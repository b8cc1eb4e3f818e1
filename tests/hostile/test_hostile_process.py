"""The host process stays safe (issue 25, items 5, 7 and 8): a Simulator dropped while
paused is freed at once; an external kernel_sim leaves no process, directory or huge read
behind; Ctrl-C interrupts a load; ``memory_limit=`` covers traces, print logs and
module-list tables."""

import gc
import json
import os
import resource
import signal
import subprocess
import sys
import time
import tracemalloc
import weakref

import numpy as np
import pytest

import birsim
from bir import function, insn, module, tensor, whole

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
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


# ---- item 7: an external kernel_sim leaves nothing behind ------------------------------

KERNEL = r'''
import json, os, subprocess, sys, time
import numpy as np
mode, log = {mode!r}, {log!r}
cfg = json.load(open(sys.argv[1]))
x = np.load(cfg["inputs"][0]["path"])
out = cfg["outputs"][0]["path"]
rec = {{"cwd": os.getcwd()}}
def spawn(code, **kw):
    return subprocess.Popen([sys.executable, "-c", code, os.getcwd()], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw).pid
if mode in ("background", "timeout"):
    rec["pids"] = [spawn("import time; time.sleep(60)")]
if mode in ("setsid", "timeout"):
    rec.setdefault("pids", []).append(
        spawn("import time; time.sleep(60)", start_new_session=True))
if mode == "late_writer":              # writes into the kernel's directory after it exits
    rec["pids"] = [spawn("import os, sys, time\nd = sys.argv[1]\n"
                         "t = time.monotonic() + 3\n"
                         "while time.monotonic() < t:\n"
                         "    if not os.path.isdir(d):      # birsim removed it: write anyway\n"
                         "        os.makedirs(d)\n"
                         "        open(os.path.join(d, 'late'), 'w').close()\n"
                         "        break\n"
                         "    time.sleep(0.005)", start_new_session=True)]
with open(log, "w") as f:
    json.dump(rec, f)
if mode == "timeout":
    time.sleep(60)
if mode == "sparse_shape":             # a 1 GiB sparse .npy of the wrong shape
    np.lib.format.open_memmap(out, mode="w+", dtype=np.float32, shape=(1 << 28,))
elif mode == "sparse_tail":            # the right header, then 1 GiB of holes
    np.save(out, x * 2)
    os.truncate(out, 1 << 30)
else:
    np.save(out, x * 2)
'''


def _kernel_exe(tmp_path, mode):
    log = str(tmp_path / f"{mode}.json")
    path = tmp_path / f"kernel_{mode}"
    path.write_text(f"#!{sys.executable}\n" + KERNEL.format(mode=mode, log=log))
    path.chmod(0o755)
    return str(path), log


def _kernel_prog():
    allocs = [tensor("in", "ExternalInput", "float32", SH, "DRAM"),
              tensor("out", "ExternalOutput", "float32", SH, "DRAM")]
    return module([function("main", allocs, [
        insn("k", "CustomOp", "Pool", ins=[whole("in", SH)], outs=[whole("out", SH)],
             opFunctionName="double", srcsShape=[SH], dstsShape=[SH])])])


def _alive(pid):
    """True while ``pid`` runs (a zombie or a missing process is not running)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in "ZX"
    except FileNotFoundError:
        return False


def _dead_soon(pid, within=5.0):
    """``pid`` is no longer running within ``within`` seconds (a liveness bound: a
    SIGKILLed process may take a moment to go)."""
    t = time.monotonic() + within
    while time.monotonic() < t:
        if not _alive(pid):
            return True
        time.sleep(0.02)
    return False


@pytest.fixture
def reap_pids():
    """Pids a test started indirectly: killed at the end if a failing test left them."""
    pids = []
    yield pids
    for pid in pids:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("mode", ["background", "setsid"])
def test_a_successful_kernels_children_do_not_outlive_the_call(tmp_path, mode, reap_pids):
    exe, log = _kernel_exe(tmp_path, mode)
    out = birsim.Simulator(_kernel_prog(), kernel_sim=exe).run({"in": X})
    np.testing.assert_array_equal(out["out"], X * 2)
    rec = json.load(open(log))
    reap_pids += rec["pids"]
    for pid in rec["pids"]:
        assert _dead_soon(pid), f"kernel_sim child {pid} outlived the call ({mode})"
    assert not os.path.exists(rec["cwd"])


def test_a_timed_out_kernels_setsid_grandchild_is_killed(tmp_path, reap_pids):
    exe, log = _kernel_exe(tmp_path, "timeout")
    with pytest.raises(birsim.KernelSimError, match="timed out after 1.5 s"):
        birsim.Simulator(_kernel_prog(), kernel_sim=exe, kernel_timeout=1.5).run({"in": X})
    rec = json.load(open(log))
    reap_pids += rec["pids"]
    assert len(rec["pids"]) == 2
    for pid in rec["pids"]:
        assert _dead_soon(pid), f"kernel_sim descendant {pid} survived the timeout"
    assert not os.path.exists(rec["cwd"])


def test_a_late_writer_leaves_no_kernel_directory(tmp_path, reap_pids):
    exe, log = _kernel_exe(tmp_path, "late_writer")
    out = birsim.Simulator(_kernel_prog(), kernel_sim=exe).run({"in": X})
    np.testing.assert_array_equal(out["out"], X * 2)
    rec = json.load(open(log))
    reap_pids += rec["pids"]
    assert _dead_soon(rec["pids"][0])
    assert not os.path.exists(rec["cwd"]), os.listdir(rec["cwd"])


def _max_rss():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


@pytest.mark.parametrize("mode,text", [
    ("sparse_shape", r"output 0 has shape \[268435456\], expected \[4, 8\]"),
    ("sparse_tail", r"malformed: 1073741696 bytes of data after its header, 128 expected"),
])
def test_a_huge_sparse_output_is_refused_before_it_is_read(tmp_path, mode, text):
    exe, log = _kernel_exe(tmp_path, mode)
    before = _max_rss()
    with pytest.raises(birsim.KernelSimError, match=text):
        birsim.Simulator(_kernel_prog(), kernel_sim=exe).run({"in": X})
    assert _max_rss() - before < (256 << 20), "the 1 GiB output file was read"
    assert not os.path.exists(json.load(open(log))["cwd"])


# ---- item 8: Ctrl-C interrupts a load ----------------------------------------------------

def _json_docs(rng, n):
    """Random JSON values: nested objects and arrays, strings with escapes and non-ASCII,
    repeated keys, numbers and literals."""
    def value(depth):
        r = rng.random()
        if depth > 4 or r < 0.3:
            return rng.choice(['"a\\\\"', '"q\\"uote"', '"\\u00e9t\\u00e9 \u00e9"', "1", "-2.5e3",
                               "true", "null", '"x, y: [z]{w}"', '""', "0"])
        items = [value(depth + 1) for _ in range(rng.integers(0, 6))]
        if r < 0.65:
            return "[" + " , ".join(items) + "]"
        keys = [rng.choice(['"k"', '"k"', '"\\"k\\\\"', '"l"', '"m\u00e9"']) for _ in items]
        return "{ " + ",".join(f"{k}:{v}" for k, v in zip(keys, items)) + " }"
    return [value(0) for _ in range(n)]


def test_a_document_parsed_in_pieces_is_the_document_parsed_whole(monkeypatch):
    """The pieces path (large documents) gives msgspec's objects, keys in order, and
    fails where a whole parse fails; tiny pieces make every container a node."""
    msgspec = pytest.importorskip("msgspec")
    from birsim._load import passes as loader
    monkeypatch.setattr(loader, "PIECE", 8)
    rng = np.random.default_rng(25)
    checked = failed = 0
    for doc in _json_docs(rng, 600):
        doc = ("[" + doc + ", " + doc + "]").encode()
        texts = [doc]
        for _ in range(3):                         # damaged copies
            k = int(rng.integers(0, len(doc)))
            texts.append(doc[:k] + doc[k + 1:])
            texts.append(doc[:k] + rng.choice([b",", b"]", b"}", b'"', b":", b" "]) + doc[k:])
        for text in texts:
            try:
                want = json.dumps(msgspec.json.decode(text))
            except msgspec.DecodeError:
                want = None
            try:
                got = json.dumps(loader._parse_pieces(text))
            except msgspec.DecodeError:
                got = None
            assert got == want, text
            checked += 1
            failed += want is None
    assert checked > 3000 and failed > 500


def _big_program(path, n):
    """A one-block program of ``n`` TensorCopy instructions, written as JSON text."""
    prog = _copy_chain(1)
    head = json.dumps(prog).replace(json.dumps(prog["functions"][0]["blocks"][0]["instructions"]),
                                    "@")
    one = json.dumps(prog["functions"][0]["blocks"][0]["instructions"][0])
    pre, post = head.split("@")
    with open(path, "w") as f:
        f.write(pre + "[")
        f.write(",".join(one.replace('"c0"', f'"c{i}"') for i in range(n)))
        f.write("]" + post)


LOAD_AND_CATCH = r'''
import signal, sys, time
# Ctrl-C is KeyboardInterrupt even when the suite was started with SIGINT ignored (as a
# background job: its children inherit that, and Python then leaves it ignored)
signal.signal(signal.SIGINT, signal.default_int_handler)
import birsim
print("loading", flush=True)
try:
    birsim.load(sys.argv[1])
    print("loaded", time.monotonic(), flush=True)
except KeyboardInterrupt:
    print("interrupted", time.monotonic(), flush=True)
'''


def test_ctrl_c_interrupts_the_load_of_a_large_file(tmp_path):
    """SIGINT while a ~200 MB program file is read and parsed: KeyboardInterrupt reaches
    the caller well within a liveness bound (the parse was one uninterruptible call of
    seconds; measured: tens of ms, README)."""
    path = tmp_path / "big.json"
    _big_program(path, 1_000_000)
    assert os.path.getsize(path) > 150 << 20
    p = subprocess.Popen([sys.executable, "-c", LOAD_AND_CATCH, str(path)],
                         stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert p.stdout.readline().strip() == "loading"
        time.sleep(0.5)
        sent = time.monotonic()
        p.send_signal(signal.SIGINT)
        what, when = p.stdout.readline().split()
        assert what == "interrupted"
        assert float(when) - sent < 1.5, f"Ctrl-C took {float(when) - sent:.2f} s"
    finally:
        p.kill()
        p.wait()


# ---- item 8: memory_limit= counts traces, print logs and tables --------------------------

def _looped(body, trips):
    """in/out [4, 8] DRAM, ``body`` in a Loop of ``trips`` trips, then out := in."""
    from bir import loop
    allocs = [tensor("in", "ExternalInput", "float32", SH, "DRAM"),
              tensor("out", "ExternalOutput", "float32", SH, "DRAM")]
    return module([function("main", allocs, [
        loop("L", "i", 0, trips, 1, body),
        insn("cp", "TensorCopy", "DVE", ins=[whole("in", SH)], outs=[whole("out", SH)])])])


def _committed(prog):
    """Bytes memory_limit= counts before any run: declared memory and the tables."""
    from birsim import simulator as S
    m = birsim.load(prog)
    return S._declared_bytes(m, 1, None) + S._tables_bytes([m])


def test_memory_limit_caps_the_trace(recwarn):
    from birsim.simulator import TRACE_RECORD_BYTES
    trips = 20_000
    prog = _looped([insn("c", "TensorCopy", "DVE", ins=[whole("in", SH)],
                         outs=[whole("out", SH)])], trips)
    left = 4 << 20                                  # room for ~6k of ~40k records
    sim = birsim.Simulator(prog, trace=True, memory_limit=_committed(prog) + left)
    tracemalloc.start()
    try:
        out = sim.run({"in": X})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    np.testing.assert_array_equal(out["out"], X)
    full = birsim.Simulator(prog, trace=True)        # the default limit: every record
    full.run({"in": X})
    executed = len(full.trace)
    assert executed == trips + 2 and not full.trace.dropped
    assert len(sim.trace) == left // 2 // TRACE_RECORD_BYTES < executed
    assert sim.trace.dropped == executed - len(sim.trace)
    assert list(sim.trace) == list(full.trace)[:len(sim.trace)]
    assert peak < left, f"the traced run peaked at {peak} bytes of Python memory"
    assert any("capped" in str(w.message) and "memory_limit=" in str(w.message)
               for w in recwarn.list)


def test_memory_limit_caps_the_print_log(recwarn):
    from birsim.simulator import PRINT_LOG_FACTOR
    trips = 3000
    prog = _looped([insn("p", "DevicePrint", "Pool", ins=[whole("in", SH)], outs=[])], trips)
    left = 1 << 20
    sim = birsim.Simulator(prog, memory_limit=_committed(prog) + left, print=False)
    sim.run({"in": X})
    assert 0 < len(sim.prints) < trips
    assert len(sim.prints) * (128 + 8) <= left // PRINT_LOG_FACTOR   # 128 bytes printed each
    assert all(np.array_equal(p.values, X) for p in sim.prints)
    assert any(f"{trips - len(sim.prints)} DevicePrint operands not recorded" in str(w.message)
               and "memory_limit=" in str(w.message) for w in recwarn.list)
    full = birsim.Simulator(prog, print=False)
    full.run({"in": X})
    assert len(full.prints) == trips


@pytest.mark.parametrize("as_list", [False, True])
def test_memory_limit_counts_the_tables(as_list):
    from birsim import simulator as S
    prog = _looped([insn("c", "TensorCopy", "DVE", ins=[whole("in", SH)],
                         outs=[whole("out", SH)])], 4)
    src = [prog, prog] if as_list else prog
    mods = birsim.load(src)
    mods = mods if as_list else [mods]
    declared = sum(S._declared_bytes(m, 1, None) for m in mods)
    tables = S._tables_bytes(mods)
    assert tables > 0
    with pytest.raises(birsim.OutOfMemoryError, match="tables take"):
        birsim.Simulator(src, memory_limit=declared + tables - 1)
    birsim.Simulator(src, memory_limit=declared + tables).run({"in": X})


class _Leaf:
    pass


def test_an_interrupted_loads_objects_are_freed_by_a_thread_not_the_caller():
    """After a Ctrl-C the frames' objects go to a daemon thread that frees them in
    slices (the caller is not held up by millions of deallocations; measured by
    bench/bench_interrupt.py): the frames are cleared at once, every object is freed by
    the thread, containers nested anywhere are emptied, and the collector's permanent
    generation is given back."""
    import gc
    import weakref
    from birsim import _free
    box = [_Leaf()]
    probe = weakref.ref(box[0])

    def deep():
        leaf = box.pop()                                 # the tree holds the only reference
        tree = {"module": {"functions": [{"blocks": [{"instructions": [
            {"name": "i%d" % k, "opnds": [[k, 1]]} for k in range(5000)] + [[[leaf]]]}]}]}}
        big = list(range(3 * _free.SLICE))
        assert tree and big
        del leaf
        raise KeyboardInterrupt

    def caller():
        deep()
    try:
        caller()
    except KeyboardInterrupt as e:
        assert probe() is not None
        worker = _free.defer(e)
        frames = []
        tb = e.__traceback__
        while tb is not None:
            frames.append(tb.tb_frame)
            tb = tb.tb_next
        assert all(not f.f_locals for f in frames[1:])   # cleared before defer returns
    assert worker.name == "birsim-free" and worker.daemon
    worker.join(60)
    assert not worker.is_alive()
    assert probe() is None                               # freed by the thread
    assert gc.get_freeze_count() == 0
