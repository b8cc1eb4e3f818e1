"""The walker's key ids (csrc/py/fastload.h fl_keys, fl_scan): it reads each dict of an
instruction in one pass, filing its values by the id of their key (an id per key string,
cached per key object), instead of a hash lookup per key it reads.

The ids must give exactly what the lookups gave, whatever the key objects: one object per
key of every document (msgspec), one per document (json.loads), a new one per dict (a
caller's dict), keys of no id (a full vocabulary), cache slots taken by other objects,
too many keys, keys that are not str. Each case loads to the same tables, warnings and
errors on both paths, and the walker takes the instructions it took before.
"""

import json
import random

import pytest

import birsim._load.passes as L
from birsim._load import fastload as _fastload

from test_load_fastload import Counter, _ap, _tensor, outcome, same

import bir


def _insn(k, **extra):
    obj = {"name": "t%d" % k, "opcode": "TensorTensor", "engine": "DVE", "op": "add",
           "ins": [_ap("a"), _ap("b")], "outs": [_ap("c")],
           "sync_info": {"on_wait": [{"type": "semaphore", "id": 1, "mode": "sem-ge-imm",
                                      "value": 0}],
                         "on_update": [{"type": "semaphore", "id": 2,
                                        "mode": "sem-add-imm", "value": 1}]}}
    if k % 3 == 1:
        obj = {"name": "s%d" % k, "opcode": "TensorScalar", "engine": "Pool",
               "op0": "mult", "const0": 0.5 + k, "ins": [_ap("a")], "outs": [_ap("c")]}
    if k % 3 == 2:
        obj = {"name": "m%d" % k, "opcode": "Memset", "engine": "Pool",
               "constant": k * 1.5, "ins": [], "outs": [_ap("b")]}
    obj.update(extra)
    return obj


def _prog(insns):
    return bir.module([{"name": "main", "allocations": [_tensor(t) for t in "abc"],
                        "blocks": [{"name": "b0", "instructions": insns}]}])


def _fresh_keys(v):
    """A copy of v whose every dict key is a new str object (no two dicts share one)."""
    if isinstance(v, dict):
        return {"".join(list(k)): _fresh_keys(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_fresh_keys(x) for x in v]
    return v


def _taken(src, monkeypatch):
    counter = Counter(monkeypatch)
    assert outcome(src, True, monkeypatch)[0][0] == "ok"
    return counter.taken


def _fresh_static(monkeypatch):
    """A new static walker state for this test (its vocabulary and key cache start
    empty; the process's own is back afterwards)."""
    monkeypatch.setattr(_fastload, "_STATIC", [None, None])


@pytest.mark.parametrize("form", ["dict", "fresh keys", "text", "bytes", "json.loads"])
def test_every_way_of_sharing_key_objects_loads_the_same(form, monkeypatch):
    prog = _prog([_insn(k) for k in range(30)])
    src = {"dict": prog, "fresh keys": _fresh_keys(prog), "text": json.dumps(prog),
           "bytes": json.dumps(prog).encode(), "json.loads": json.loads(json.dumps(prog))}[form]
    if form == "text":                  # msgspec off: json.loads's key objects
        monkeypatch.setattr(L, "FAST_JSON", False)
    assert same(src, monkeypatch)[0][0] == "ok"
    assert _taken(src, monkeypatch) == 30


def test_a_full_vocabulary_and_evicted_cache_slots_read_the_same(monkeypatch):
    """Thousands of distinct unknown keys (no near miss: silent on both paths) fill the
    vocabulary (the later keys get no id and are classified by value) and evict each
    other's cache slots; the instructions' own keys keep their ids."""
    _fresh_static(monkeypatch)
    rng = random.Random(5)
    insns = []
    for k in range(300):
        extra = {"zq%dx%d" % (k, j): j for j in range(12)}
        insns.append(_insn(k, **extra))
    prog = _prog(insns)
    for src in (prog, json.dumps(prog), _fresh_keys(prog)):
        assert same(src, monkeypatch)[0][0] == "ok"
        assert _taken(src, monkeypatch) == 300
    # after the vocabulary is full: a misspelled key still declines (it warns), a known
    # one is still read, in a shuffled key order
    bad = [_insn(k) for k in range(20)]
    bad[7]["opp"] = "add"               # near "op": the Python path warns there
    for obj in bad:
        items = list(obj.items())
        rng.shuffle(items)
        obj.clear()
        obj.update(items)
    out, caught = same(_prog(bad), monkeypatch)
    assert out[0] == "ok" and any("opp" in w for w in caught)
    assert _taken(_prog(bad), monkeypatch) == 19


def test_too_many_keys_or_a_key_that_is_not_a_str_declines(monkeypatch):
    insns = [_insn(k) for k in range(6)]
    insns[2].update({"zq_many_%d" % j: j for j in range(70)})     # > FL_MAX_ENTRIES
    insns[4]["ins"][0] = dict(insns[4]["ins"][0])
    insns[4]["ins"][0][7] = "x"                                   # a caller's int key
    prog = _prog(insns)
    assert same(prog, monkeypatch)[0][0] == "ok"
    assert _taken(prog, monkeypatch) == 4       # all but the two


def test_a_value_filed_under_a_key_is_not_seen_by_the_next_dict(monkeypatch):
    """A scan's values are current for its own dict only: an operand's offset or dtype,
    a sync entry's value or target_core, an instruction's parameter must not leak into
    the next dict that lacks the key."""
    insns = []
    for k in range(12):
        obj = _insn(k)
        obj.setdefault("sync_info", {})
        if k % 2:
            for o in obj["ins"] + obj["outs"]:
                o["offset"] = 4
                o["dtype"] = "bfloat16"
            obj["sync_info"]["on_update"] = [{"type": "semaphore", "id": 3,
                                              "mode": "sem-add-imm", "value": 2,
                                              "target_core": 0}]
            obj["predicted_latency_ns"] = 12.5
        else:
            obj["sync_info"]["on_update"] = [{"type": "semaphore", "id": 3,
                                              "mode": "sem-inc"}]
        insns.append(obj)
    prog = _prog(insns)
    assert same(prog, monkeypatch)[0][0] == "ok"
    assert _taken(prog, monkeypatch) == 12


def test_the_value_cache_tells_tables_and_look_alike_names_apart(monkeypatch):
    """The walker remembers the codes of the values it looked up by content (a new str
    object each time): the same string in two tables (a location named like an engine,
    a dtype, an ALU op) keeps each table's code, and names of one length, first and last
    character (one cache slot) keep theirs."""
    names = ["Pool", "float32", "add", "DVE", "a0b", "a1b", "a2b", "aab", "b0a", "Relu"]
    insns = []
    for k in range(40):
        src, dst = names[k % len(names)], names[(3 * k + 1) % len(names)]
        obj = {"name": "t%d" % k, "opcode": "TensorTensor",
               "engine": ("DVE", "Pool")[k % 2], "op": ("add", "mult")[k % 3 == 0],
               "ins": [_ap(src), _ap(names[(k + 5) % len(names)])], "outs": [_ap(dst)]}
        if k % 4 == 1:
            obj["ins"][0]["dtype"] = "float32"
        insns.append(obj)
    prog = bir.module([{"name": "main",
                        "allocations": [_tensor(n, dtype=("float32", "bfloat16")[i % 2])
                                        for i, n in enumerate(names)],
                        "blocks": [{"name": "b0", "instructions": insns}]}])
    for src in (prog, json.dumps(prog)):
        assert same(src, monkeypatch)[0][0] == "ok"
        assert _taken(src, monkeypatch) == 40


def test_the_walker_keeps_no_key_or_value_of_the_tree_after_a_load(monkeypatch):
    """Its caches hold the key and value objects they met only during a walk: kept, the
    strings of a freed tree would pin its memory (resident memory per instruction of
    bench_load.py doubled when they were kept until the next load)."""
    prog = _fresh_keys(_prog([_insn(k) for k in range(30)]))
    birsim_load = __import__("birsim").load
    birsim_load(_fresh_keys(prog))      # every key string of prog has its id already
    strs = []

    def walk(v):
        if isinstance(v, dict):
            for k, x in v.items():
                strs.append(k)
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)
        elif isinstance(v, str):
            strs.append(v)
    walk(prog["functions"][0]["blocks"])
    import sys
    before = [sys.getrefcount(s) for s in strs]
    monkeypatch.setattr(L, "FAST_PATH", True)
    assert _taken(prog, monkeypatch) == 30
    assert [sys.getrefcount(s) for s in strs] == before
