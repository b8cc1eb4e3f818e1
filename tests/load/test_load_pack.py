"""The loader's dict records packed in C (``_birsim._pack_records``, issue 24 "tiny"):
the bytes NumPy's conversion of the row tuples gives, field by field, for every table
of every program of the corpus and for edge values; a value NumPy must judge (not an
exact int or float, out of its field's range, a list too long) hands the table back
(None), so NumPy's conversion and its errors stay the specification."""

import itertools
import pathlib
import random
import sys

import numpy as np
import pytest

import birsim
from birsim import _birsim
from birsim._load import passes as L, tables as T
from birsim.errors import ProgramError

from test_load_fastload import corpus_files

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT / "tests"))


def _fields(arr):
    """Each field's bytes (the layouts' padding is no value)."""
    return arr.dtype, tuple((f, arr[f].tobytes()) for f in arr.dtype.names)


def _numpy(recs, dtype, defaults):
    """NumPy's conversion of the row tuples (the path before the packer), or the
    exception type it raises."""
    fn = T._row_function(dtype, tuple(sorted(defaults.items())))
    try:
        return np.array([fn(r) for r in recs], dtype=dtype)
    except (OverflowError, ValueError, TypeError) as e:
        return type(e)


class _Spy:
    """Counts the tables the packer packed and handed back."""

    def __init__(self, monkeypatch):
        self.packed = self.back = 0
        real = T._pack_records

        def spy(recs, spec, itemsize):
            out = real(recs, spec, itemsize)
            if out is None:
                self.back += 1
            else:
                self.packed += 1
            return out
        monkeypatch.setattr(T, "_pack_records", spy)
        real_tables = T._pack_tables

        def spy_tables(recs, plan, dtypes, frombuffer, out, *walker):
            before = set(out)
            left = real_tables(recs, plan, dtypes, frombuffer, out, *walker)
            if left is not None:            # _arrays_rest's loop in one call: the same count
                # (with the walker's state it packs the walker's tables too: not counted)
                new = [t for t in out if t not in before and t not in T.PACKED and recs[t]]
                self.back += len(left)
                self.packed += len(new) - len(left)
            return left
        monkeypatch.setattr(T, "_pack_tables", spy_tables)


def _load(src, pack, monkeypatch):
    from conftest import _tables, load_caught
    monkeypatch.setattr(T, "PACK_RECORDS", pack)
    r, warned = load_caught(src)
    if isinstance(r, ProgramError):
        return ("error", str(r), r.path), warned
    mods = r if isinstance(r, list) else [r]
    return ("ok", _tables(r), [[_fields(v) for v in m.tables.values()
                                if isinstance(v, np.ndarray) and v.dtype.names]
                               for m in mods]), warned


@pytest.mark.parametrize("fast", [True, False])
def test_packed_tables_equal_numpys_on_every_json_file_of_the_corpus(fast, monkeypatch):
    monkeypatch.setattr(L, "FAST_PATH", fast)
    spy = _Spy(monkeypatch)
    files = corpus_files()
    ok = 0
    for p in files:
        packed = _load(str(p), True, monkeypatch)
        assert packed == _load(str(p), False, monkeypatch), p
        ok += packed[0][0] == "ok"
    assert ok > 50 and spy.packed > 500          # the packer did the work


def _edge_values(rng):
    ints = [0, 1, -1, 2**31 - 1, -2**31, 2**31, -2**31 - 1, 2**63 - 1, -2**63, 2**63,
            -2**63 - 1, 10**30, True, False]
    others = [0.5, -0.0, 1e308, float("nan"), float("inf"), 2**1024, None, "3",
              np.int64(5), np.int32(-2), np.float64(1.5), [], [1, 2], (3,), 10**400]
    pool = ints + others
    return rng.choice(pool)


def test_pack_records_matches_numpy_or_hands_the_table_back_on_edge_values():
    rng = random.Random(24)
    cat = L.default_catalog()
    for table in T.TABLE_NAMES:
        dtype = cat.numpy_dtypes[table]
        defaults = T._DEFAULTS.get(table, {})
        names = dtype.names
        for trial in range(300):
            recs = []
            for _ in range(rng.randint(1, 3)):
                r = {}
                for name in rng.sample(names, rng.randint(0, len(names))):
                    shape = dtype.fields[name][0].shape
                    if shape and rng.random() < 0.8:
                        n = rng.randint(0, shape[0] + (trial % 7 == 0))
                        v = [_edge_values(rng) if rng.random() < 0.3 else rng.randint(-9, 9)
                             for _ in range(n)]
                        r[name] = tuple(v) if rng.random() < 0.3 else \
                            None if rng.random() < 0.1 else v
                    else:
                        r[name] = _edge_values(rng) if rng.random() < 0.5 else \
                            rng.randint(-2**40, 2**40)
                if rng.random() < 0.02:
                    r = list(r.items())         # not a record
                recs.append(r)
            ref = _numpy(recs, dtype, defaults) if all(isinstance(r, dict) for r in recs) \
                else TypeError
            fn = T._row_function(dtype, tuple(sorted(defaults.items())))
            got = _birsim._pack_records(recs, fn.spec, dtype.itemsize)
            if got is None:
                continue                        # NumPy's conversion judges it
            assert not isinstance(ref, type), (table, recs, ref)
            arr = np.frombuffer(got, dtype=dtype)
            assert _fields(arr) == _fields(ref), (table, recs)
            assert got == bytes(len(got)) or any(got)      # zeroed, padding included
    # the values NumPy rejects are handed back, never packed
    dt = cat.numpy_dtypes["syncs"]
    spec = T._row_function(dt, tuple(sorted(T._DEFAULTS["syncs"].items()))).spec
    for bad in (2**31, -2**31 - 1, 10**30, None, "1", 1.5, np.int64(1), [1]):
        assert _birsim._pack_records([{"id": bad}], spec, dt.itemsize) is None, bad
    assert _birsim._pack_records([{"id": 2**31 - 1}, {"id": True}], spec, dt.itemsize) \
        is not None


def test_pack_records_zeroes_padding_and_fills_defaults():
    cat = L.default_catalog()
    dt = cat.numpy_dtypes["opnds"]              # has a 4-byte gap
    fn = T._row_function(dt, tuple(sorted(T._DEFAULTS["opnds"].items())))
    got = _birsim._pack_records([{}, {"kind": 3}], fn.spec, dt.itemsize)
    arr = np.frombuffer(got, dtype=dt)
    assert arr["loc"].tolist() == [-1, -1] and arr["kind"].tolist() == [0, 3]
    ref = np.zeros(2, dt)
    for f, v in T._DEFAULTS["opnds"].items():
        ref[f] = v
    ref["kind"][1] = 3
    assert got == ref.tobytes()                 # zeros between the fields too
    assert arr.flags.writeable                  # the tables may be written, as before


def test_pack_records_refuses_a_bad_spec():
    with pytest.raises(TypeError):
        _birsim._pack_records((), (), 8)
    with pytest.raises(ValueError):
        _birsim._pack_records([{}], (("a", 4, "I64", 1, 0),), 8)     # past the record
    with pytest.raises(ValueError):
        _birsim._pack_records([{}], (("a", 0, "U8", 1, 0),), 8)
    with pytest.raises(ValueError):
        _birsim._pack_records([{}], (("a", 0, "I32", 1),), 8)
    with pytest.raises(ValueError):
        _birsim._pack_records([{}], (), 0)
    assert _birsim._pack_records([], (("a", 0, "I32", 2, 0),), 8) == bytearray()


def test_a_value_that_does_not_fit_is_still_named_with_the_packer_on():
    t = T.Tables()
    t.recs["syncs"] = [{"id": 1}, {"id": 2 ** 40}]
    dt = L.default_catalog().numpy_dtypes["syncs"]
    with pytest.raises(ProgramError, match=r"^a value does not fit the program tables: "
                       r"syncs record 1: id=1099511627776$"):
        T._to_array(t.recs["syncs"], dt, {}, "syncs", t)


def test_every_layout_field_type_has_a_packer_type():
    assert set(T._FTYPES.values()) == {ft for lay in _birsim.layouts.values()
                                       for _, _, ft, _ in lay["fields"]}
    assert list(itertools.chain.from_iterable(
        [(f[0], f[1]) for f in T._row_function(L.default_catalog().numpy_dtypes[t], ()).spec]
        for t in T.TABLE_NAMES)) == [(f[0], f[1]) for t in T.TABLE_NAMES
                                     for f in _birsim.layouts[t]["fields"]]


def test_make_program_takes_the_loaders_tables_whole_and_copies_the_others():
    """The loader's tables go to the C Program as they are (no parts dict); a table it
    cannot take whole (strided, a list) is copied contiguous as before, and the program
    runs the same."""
    path = ROOT / "examples" / "tiled_matmul.json"
    m = birsim.load(str(path))
    got = []

    def spy(tables):
        got.append(tables)
        return _birsim.Program(tables)
    T.make_program(spy, m.tables)
    assert len(got) == 1 and got[0] is m.tables               # taken whole

    rng = np.random.default_rng(0)
    inputs = {t.name: rng.standard_normal(t.shape).astype(t.numpy_dtype) for t in m.inputs}
    ref = birsim.Simulator(birsim.load(str(path))).run(inputs)
    for change in ("strided", "list", "bytearray"):
        t = dict(m.tables)
        if change == "strided":
            t["insns"] = np.repeat(t["insns"], 2)[::2]
            assert not t["insns"].flags.c_contiguous
        elif change == "list":
            t["ipool"] = t["ipool"].tolist()
        else:
            t["strings"] = bytearray(t["strings"])
        got.clear()
        prog = T.make_program(spy, t)
        assert len(got) == 2 - (change == "bytearray")     # retried with copies
        m2 = birsim.load(str(path))
        m2._program = prog
        out = birsim.Simulator(m2).run(inputs)
        assert out.keys() == ref.keys()
        for k in ref:
            assert out[k].tobytes() == ref[k].tobytes()


def test_the_table_plan_follows_the_catalogs_dtypes_and_empty_pools_are_new_arrays():
    import json
    sys.path.insert(0, str(ROOT / "bench"))
    from bench_oneshot import tiny_text
    cat = L.default_catalog()
    a = birsim.load(tiny_text())
    b = birsim.load(tiny_text())
    for name, dt in (("exprs", "<i8"), ("fpool", "<f8")):
        assert len(a.tables[name]) == 0 and a.tables[name].dtype == np.dtype(dt)
        assert a.tables[name] is not b.tables[name] and a.tables[name].flags.writeable
    plan = T._table_plan(cat.numpy_dtypes)
    assert [p[0] for p in plan] == list(T.TABLE_NAMES)
    assert all(p[1] is cat.numpy_dtypes[p[0]] for p in plan)
    # a dtype replaced in place (same layout, a new object): the plan is made again
    old = cat.numpy_dtypes["sets"]
    new = np.dtype({"names": list(old.names), "formats": [old.fields[n][0] for n in old.names],
                    "offsets": [old.fields[n][1] for n in old.names],
                    "itemsize": old.itemsize})
    assert new == old and new is not old
    try:
        cat.numpy_dtypes["sets"] = new
        m = birsim.load(tiny_text())
        assert m.tables["sets"].dtype is new
        assert T._table_plan(cat.numpy_dtypes)[2][1] is new
    finally:
        cat.numpy_dtypes["sets"] = old
    m = birsim.load(json.loads(tiny_text()))
    assert m.tables["sets"].dtype is old
    assert _fields(m.tables["sets"]) == _fields(a.tables["sets"])


# ---- the loader's checked key read in C (schema.get = _birsim._get) ------------------

def _outcome(fn):
    try:
        v = fn()
    except Exception as e:              # noqa: BLE001 -- the outcome is compared
        return ("error", type(e), str(e), getattr(e, "path", None))
    return ("ok", type(v), repr(v))


def test_get_in_c_matches_the_python_get():
    from birsim._load import schema as S
    from birsim._load.passes import _positive_ints, _non_negative
    assert S.get is _birsim._get
    MISSING = S.MISSING

    class Sub(dict):
        pass

    class NoneFast:
        fast = None

        def __call__(self, v, ctx):
            return ("checked", v, ctx.path)

    class RaisingFast:
        def fast(self, v):
            raise KeyError("fast")

        def __call__(self, v, ctx):
            return v

    class BadAttr:
        @property
        def fast(self):
            raise ValueError("attr")

        def __call__(self, v, ctx):
            return v

    checks = [None, S.as_int, S.as_name, S.as_str, S.as_list, S.as_dict, S.as_bool,
              S.as_num, _positive_ints, _non_negative, S.enum_check("kind", {"a": 1, "b": 2}),
              S.enum_check("mem", {"DRAM": 0}, {"dram": "DRAM"}, allow_int=True),
              lambda v, c: (v, c.path), NoneFast(), RaisingFast(), BadAttr()]
    values = [None, 0, 1, -5, 2**63, True, 1.0, 1.5, "", "a", "x\0", "dram", [], [1, 2],
              [0], {}, {"k": 1}]
    rng = random.Random(10)
    ctx = S.Ctx(("functions", 0), "main", None)
    n = 0
    for _ in range(6000):
        key = rng.choice(["k", "q", ("k", "q"), ("q",), 3])
        obj = rng.choice([{}, {"k": rng.choice(values)}, {"k": None, "q": rng.choice(values)},
                          Sub(k=rng.choice(values)), ["k"]])
        check = rng.choice(checks)
        args = [obj, key, ctx]
        kw = {}
        if check is not None or rng.random() < 0.5:
            args.append(check)
        if rng.random() < 0.5:
            d = rng.choice([None, 0, "d", MISSING])
            if rng.random() < 0.5 and len(args) == 4:
                args.append(d)
            else:
                kw["default"] = d
        if rng.random() < 0.3:
            kw["what"] = "thing"
        if rng.random() < 0.05:
            kw["bogus"] = 1
        if rng.random() < 0.05 and len(args) > 3:
            kw["check"] = check                 # given twice
        got = _outcome(lambda: _birsim._get(*args, **kw))
        ref = _outcome(lambda: S._get_py(*args, **kw))
        assert got == ref, (args, kw, got, ref)
        n += got[0] == "ok"
    assert n > 1000
    # the dict may lose the value while its check runs
    obj = {"k": [1, 2]}

    def dropping(v, c):
        obj.clear()
        return v
    assert _birsim._get(obj, "k", ctx, dropping) == [1, 2]
    with pytest.raises(TypeError):
        _birsim._get_init(MISSING)


def test_the_tables_packed_in_one_call_equal_the_python_loops_in_its_order(monkeypatch):
    """``_pack_tables`` (``Tables._arrays_rest``'s loop in C) gives the loop's arrays, in
    the table order, with a table the packer hands back (a float in an int field, NumPy
    converts it) in its place, and empty tables as the layout's zero-length array."""
    cat = L.default_catalog()

    def tables(pack):
        monkeypatch.setattr(T, "PACK_RECORDS", pack)
        t = T.Tables()
        t.recs["module"].append({"arch": 1, "entry": 0})
        t.recs["funcs"].append({"name": 0, "set0": 2.0, "nset": 1})     # NumPy's
        t.recs["sets"].extend([{"name": 0, "shape": [3, 4], "ndim": 2}, {"alias": 5}])
        t.recs["regions"].append({"func": 0})
        out = t._arrays_rest(cat, {"insns": "kept"})
        return [(k, v if isinstance(v, (str, bytes)) else (v.dtype, v.tobytes()))
                for k, v in out.items()]
    got = tables(True)
    assert got == tables(False)
    assert [k for k, _ in got][:4] == ["insns", "module", "funcs", "sets"]


def test_a_spec_parsed_once_packs_as_the_spec_tuple_does():
    """_pack_tables' plan rows carry each spec parsed once (``_pack_spec``): the bytes (or
    the hand-back) of ``_pack_records`` with the spec tuple, for every table and random
    records with edge values; a bad spec is refused as _pack_records refuses it."""
    rng = random.Random(11)
    cat = L.default_catalog()
    for table in T.TABLE_NAMES:
        dtype = cat.numpy_dtypes[table]
        fn = T._row_function(dtype, tuple(sorted(T._DEFAULTS.get(table, {}).items())))
        parsed = _birsim._pack_spec(fn.spec, dtype.itemsize)
        row = (table, dtype, parsed, dtype.itemsize, fn.empty)
        for trial in range(60):
            recs = []
            for _ in range(rng.randint(1, 4)):
                r = {}
                for name in rng.sample(dtype.names, rng.randint(0, len(dtype.names))):
                    shape = dtype.fields[name][0].shape
                    if shape:
                        r[name] = [rng.randint(-9, 9) if rng.random() < 0.9 else
                                   _edge_values(rng) for _ in range(rng.randint(0, shape[0]))]
                    else:
                        r[name] = rng.randint(-2**31, 2**31 - 1) if rng.random() < 0.9 \
                            else _edge_values(rng)
                recs.append(r)
            want = _birsim._pack_records(recs, fn.spec, dtype.itemsize)
            out = {}
            left = _birsim._pack_tables({table: recs}, (row,), {table: dtype}, np.frombuffer,
                                        out)
            if want is None:
                assert left == [table] and out[table] is None, (table, recs)
            else:
                assert left == [] and out[table].tobytes() == bytes(want), (table, recs)
    with pytest.raises(ValueError):
        _birsim._pack_spec((("id", 0, "I32", 1, 0),), 2)       # outside the record
    with pytest.raises(ValueError):
        _birsim._pack_spec((("id", 0, "U8", 1, 0),), 8)        # not a layout type
    with pytest.raises(TypeError):
        _birsim._pack_spec([("id", 0, "I32", 1, 0)], 8)
    assert isinstance(T._table_plan(cat.numpy_dtypes) and T._PLAN[2][0][2],
                      type(_birsim._pack_spec((), 1)))          # the loader's plan uses it
