"""A document's large instruction arrays are parsed when the loader reaches their block
(``fastload.lazy_tree``, ``_birsim._json_lazy``; DESIGN.md "Loading fast"): the load is
an attempt that, on any failure (a parse error in an array, a ProgramError, a warning
under strict or turned into an error), loads the text again parsed whole, and its
warnings wait for its success. Tables, warnings (and their order) and errors (message
and JSON path) must be those of the whole parse: here every array is taken lazily
(LAZY_FROM = LAZY_MIN = 0) and compared with the text parsed whole.
"""

import json
import os
import random
import warnings

import pytest

import birsim
import birsim._load.passes as L
from birsim._load import fastload as _fastload
from birsim.errors import BirsimWarning, ProgramError

from conftest import load_caught
from test_load_fastload import _tables, corpus_files

import bench_load  # noqa: E402 -- bench/ is on the path (test_load_fastload)


class _Parsed:
    """Counts the instruction arrays parsed lazily."""

    def __init__(self, monkeypatch):
        self.count = 0
        real = _fastload.LazyInsns.parse

        def counting(lazy, decode):
            self.count += 1
            return real(lazy, decode)
        monkeypatch.setattr(_fastload.LazyInsns, "parse", counting)


def _mode(lazy, monkeypatch):
    monkeypatch.setattr(_fastload, "LAZY_FROM", 0 if lazy else 1 << 62)
    monkeypatch.setattr(_fastload, "LAZY_MIN", 0)


def outcome(text, lazy, monkeypatch, strict=False):
    """(tables, or the error's (type, message, path); the warnings, in order)."""
    _mode(lazy, monkeypatch)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            r = ("ok", _tables(birsim.load(text, strict=strict)))
        except ProgramError as e:
            r = ("error", str(e), e.path)
    return r, [str(w.message) for w in caught]


def same(text, monkeypatch, strict=False):
    whole = outcome(text, False, monkeypatch, strict)
    lazy = outcome(text, True, monkeypatch, strict)
    assert lazy == whole
    return lazy


def _text(prog):
    return json.dumps(prog, separators=(",", ":")).encode()


def _blocks_program(nblocks=4, per=6):
    """Bench's eltwise mix in nblocks blocks of per instructions."""
    prog = bench_load.make_program(nblocks * per, "birsim", "eltwise")
    insns = prog["functions"][0]["blocks"][0]["instructions"]
    prog["functions"][0]["blocks"] = [{"name": "b%d" % b,
                                       "instructions": insns[b * per:(b + 1) * per]}
                                      for b in range(nblocks)]
    return prog


def test_every_json_file_of_the_corpus_loads_the_same_lazily(monkeypatch):
    parsed = _Parsed(monkeypatch)
    results = []
    for p in corpus_files():
        with open(p, "rb") as fh:
            text = fh.read()
        results.append(same(text, monkeypatch)[0][0])
    assert results.count("ok") > 50
    assert parsed.count > 100               # the lazy path did take part


@pytest.mark.parametrize("mix", ["all", "control", "eltwise"])
@pytest.mark.parametrize("spelling", ["birsim", "compiler"])
def test_bench_programs_load_the_same_lazily(spelling, mix, monkeypatch):
    parsed = _Parsed(monkeypatch)
    text = _text(bench_load.make_program(1200, spelling, mix))
    assert same(text, monkeypatch)[0][0] == "ok"
    assert parsed.count >= 3


def test_a_file_loads_lazily_at_the_default_sizes(tmp_path, monkeypatch):
    path = tmp_path / "p.json"
    text = _text(bench_load.make_program(2000, "compiler", "all"))
    path.write_bytes(text)
    parsed = _Parsed(monkeypatch)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m = birsim.load(str(path))
    assert parsed.count >= 3                # 500-instruction blocks: ~100 KB each
    warned = [str(w.message) for w in caught]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        whole = birsim.load(json.loads(text))
    assert _tables(m) == _tables(whole)
    assert warned == [str(w.message) for w in caught] and warned


def test_a_loops_axis_name_is_kept_once_per_name(tmp_path):
    # the Module keeps every loop's axis name: one string object per name, not one per
    # loop from the parsed tree (those pinned the allocator's arenas the freed tree used)
    path = tmp_path / "p.json"
    path.write_bytes(_text(bench_load.make_program(2000, "birsim", "all")))
    for m in (birsim.load(str(path)), birsim.load(path.read_text())):
        names = m.axis_names
        assert len(names) > 20 and len(set(names)) < len(names)
        first = {}
        assert all(first.setdefault(a, a) is a for a in names)


def _with_tail(prog, tail):
    """The program's text with ``tail`` as the last instruction of its last block (raw
    text: it may be what no JSON parser takes)."""
    text = _text(prog).decode()
    last = prog["functions"][0]["blocks"][-1]["instructions"][-1]
    enc = json.dumps(last, separators=(",", ":"))
    at = text.rindex(enc) + len(enc)
    return (text[:at] + "," + tail + text[at:]).encode("utf-8", "surrogatepass")


_TAILS = [
    '{"name":"x","opcode":"Nop",}',                     # syntax: a trailing comma
    '{"name":"x" "opcode":"Nop"}',                      # syntax: no colon
    '{"name":"x","opcode":"Nop","v":NaN}',              # json.loads only
    '{"name":"x","opcode":"Nop","v":1e400}',            # json.loads only
    '{"name":"x\\ud800","opcode":"Nop"}',               # a lone surrogate
    '{"name":"x\udcff","opcode":"Nop"}',                # not UTF-8
    '{"name":"x","opcode":"NoSuchOp"}',                 # semantic
]


@pytest.mark.parametrize("tail", _TAILS)
def test_an_error_late_in_the_text_comes_before_an_early_semantic_error(tail, monkeypatch):
    prog = _blocks_program()
    prog["functions"][0]["blocks"][0]["instructions"][1]["opcode"] = "Bogus"
    same(_with_tail(prog, tail), monkeypatch)
    same(_with_tail(_blocks_program(), tail), monkeypatch)


@pytest.mark.parametrize("tail", _TAILS)
def test_no_warning_is_emitted_before_a_late_error(tail, monkeypatch):
    prog = _blocks_program()
    prog["functions"][0]["blocks"][0]["instructions"][2]["sclae"] = 1.0   # warns
    assert same(_text(prog), monkeypatch)[1]
    (r, warned) = same(_with_tail(prog, tail), monkeypatch)
    assert r[0] == "error" or warned


def test_warnings_come_in_the_order_of_a_whole_parse(monkeypatch):
    prog = _blocks_program()
    for b, key in ((0, "sclae"), (2, "fnuc"), (3, "scael")):
        prog["functions"][0]["blocks"][b]["instructions"][2][key] = 1
    r, warned = same(_text(prog), monkeypatch)
    assert r[0] == "ok" and len(warned) >= 2


def test_strict_and_warnings_as_errors_raise_what_a_whole_parse_raises(monkeypatch):
    prog = _blocks_program()
    prog["functions"][0]["blocks"][1]["instructions"][4]["sclae"] = 1
    text = _with_tail(prog, '{"name":"x","opcode":"NoSuchOp"}')
    assert same(text, monkeypatch, strict=True)[0][0] == "error"
    assert same(_text(prog), monkeypatch, strict=True)[0][0] == "error"
    # (BIRSIM_CHECK_FASTLOAD's double load runs its Python path with warnings ignored:
    # a warning turned into an error cannot be compared there; the plain suite does)
    for t in (text, _text(prog)) if not os.environ.get("BIRSIM_CHECK_FASTLOAD") else ():
        got = []
        for lazy in (False, True):
            _mode(lazy, monkeypatch)
            with warnings.catch_warnings():
                warnings.simplefilter("error", BirsimWarning)
                try:
                    birsim.load(t)
                    got.append("ok")
                except (ProgramError, BirsimWarning) as e:
                    got.append((type(e), str(e)))
        assert got[0] == got[1] and got[0] != "ok"


def _edge_texts():
    base = _blocks_program()
    text = _text(base).decode()
    yield text
    yield text.replace('"instructions":', '"instruct\\u0069ons":', 1)
    yield text.replace('"blocks":[{"name":"b0",', '"blocks":[{"name":"b0","instructions":[],', 1)
    yield text.replace('"functions":[', '"functions":[],"functions":[', 1)
    yield text.replace('"blocks":[', '"blocks":[7,', 1)
    yield text.replace('"blocks":[', '"blocks":[],"blocks":[', 1)
    yield '{"module":' + text + "}"
    yield "[" + text + "]"
    yield text.replace('"instructions":[', '"instructions":[' + "[" * 80 + "]" * 80 + ",", 1)
    yield text.replace('"instructions":[', '"instructions":[ ', 1).replace("},{", "} , {")
    yield text.replace('"instructions":[', '"instructions":{"a":[', 1)
    yield text[:-1]
    yield text + "x"


def test_documents_the_scanner_reads_carefully_load_the_same(monkeypatch):
    for t in _edge_texts():
        same(t.encode("utf-8", "surrogatepass"), monkeypatch)


def _later_empty(text, key):
    """Block b0 given ``key`` again after its instruction array, with an empty one (the
    value a whole parse keeps when key spells "instructions")."""
    at = text.index('"name":"b1"')
    close = text.rindex("}", 0, at)             # the end of block b0
    return text[:close] + "," + key + ":[]" + text[close:]


def test_a_later_empty_array_of_the_same_key_is_the_one_a_whole_parse_keeps(monkeypatch):
    text = _text(_blocks_program()).decode()
    for key in ('"instructions"', '"instruct\\u0069ons"'):
        t = _later_empty(text, key).encode()
        # the scanner declines (a large min_span: the empty array is no span of its own)
        assert birsim._birsim._json_lazy(t, 100, 1 << 30, 64) is None
        monkeypatch.setattr(_fastload, "LAZY_MIN", 100)
        monkeypatch.setattr(_fastload, "LAZY_FROM", 0)
        r, _ = outcome(t, True, monkeypatch)
        assert r == outcome(t, False, monkeypatch)[0]
    ok = _later_empty(text, '"other"').encode()
    assert birsim._birsim._json_lazy(ok, 100, 1 << 30, 64) is not None


def test_a_warning_of_pass_1_waits_for_the_arrays_parse(monkeypatch):
    """Today every load warning comes from pass 2 (after every array was parsed); one
    that pass 1 gave would be emitted only once the lazy load succeeded."""
    real = L._Loader._opcode

    def warning_opcode(self, obj, ctx):
        self.warn("pass-1", "a pass-1 warning")
        return real(self, obj, ctx)
    monkeypatch.setattr(L._Loader, "_opcode", warning_opcode)
    monkeypatch.setattr(_fastload, "LAZY_MIN", 0)
    prog = _blocks_program()
    prog["functions"][0]["blocks"][0]["instructions"][2]["sclae"] = 1  # the Python path
    for tail in (None, _TAILS[0], _TAILS[2]):
        t = _text(prog) if tail is None else _with_tail(prog, tail)
        whole, lazy = outcome(t, False, monkeypatch), outcome(t, True, monkeypatch)
        assert lazy == whole
        assert ("a pass-1 warning" in lazy[1]) == (tail is not _TAILS[0])


def test_random_byte_mutations_load_the_same(monkeypatch):
    rng = random.Random(24)
    text = _text(_blocks_program(3, 5))
    alphabet = b'{}[]",: \\0a-e1'
    for _ in range(150):
        t = bytearray(text)
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(len(t))
            op = rng.randrange(3)
            if op == 0:
                del t[at]
            elif op == 1:
                t.insert(at, rng.choice(alphabet))
            else:
                t[at] = rng.choice(alphabet)
        same(bytes(t), monkeypatch)


def _scanned(prog, text):
    """The skeleton _json_lazy makes of ``text`` (parsed), its spans checked: one per block
    of ``prog``'s first function, each the block's instruction array."""
    skeleton, spans = birsim._birsim._json_lazy(text, 0, 1 << 30, 64)
    blocks = prog["functions"][0]["blocks"]
    assert [(k, f, b) for k, f, b, _, _ in spans] == [(0, 0, b) for b in range(len(blocks))]
    for (_, _, b, start, end) in spans:
        assert json.loads(text[start:end]) == blocks[b]["instructions"]
    return json.loads(skeleton)


def test_the_scanner_finds_each_blocks_array_and_the_skeleton_keeps_the_rest():
    prog = _blocks_program()
    text = _text(prog)
    skel = _scanned(prog, text)
    for b in skel["functions"][0]["blocks"]:
        assert b.pop("instructions") == []
    for b in prog["functions"][0]["blocks"]:
        del b["instructions"]
    assert skel == prog
    assert birsim._birsim._json_lazy(text, len(text), 1 << 30, 64) is None   # none so large
    assert birsim._birsim._json_lazy(text, 0, 100, 64) is None               # above max
    assert birsim._birsim._json_lazy(text, 0, 1 << 30, 3) is None            # too deep


def test_the_scanner_skips_strings_of_every_length_and_escape_position():
    # the string loop jumps 8 bytes at a time, then straight to the word's first quote or
    # backslash: strings of 0-24 bytes, with an escaped quote or backslash at each offset
    # (brackets inside, so that a misread string shifts the span), in keys and values
    names = []
    for n in range(25):
        names.append("x" * n)
        for at in range(n):
            for esc in ('"', "\\", "]", "}"):
                names.append("y" * at + esc + "z" * (n - at))
    prog = _blocks_program(nblocks=3, per=4)
    for b, blk in enumerate(prog["functions"][0]["blocks"]):
        blk["instructions"][0]["comment"] = names[b::3]
        blk["instructions"][1].update({nm + "]": 1 for nm in names[b::5]})
    text = _text(prog)
    skel = _scanned(prog, text)
    blocks = prog["functions"][0]["blocks"]
    assert [b["name"] for b in skel["functions"][0]["blocks"]] == [b["name"] for b in blocks]
