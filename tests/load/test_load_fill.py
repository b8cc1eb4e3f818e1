"""The dict records of the packed tables written in C (csrc/py/fastload_rec.c put_record,
in ``_fast_fill``) against NumPy's conversion of them (tables._to_array, the Python
path's): the same bytes in every field of every record C writes (the bytes between two
fields belong to none), and every record C leaves (a value NumPy converts otherwise or
refuses) returned in ``rest`` for NumPy, which then names it in its error as before."""

import numpy as np
import pytest

import birsim
from birsim import _birsim
from birsim._load import fastload as _fastload
from birsim._load.tables import _DEFAULTS, _fill_rest, _to_array_fast
from birsim.errors import ProgramError

from test_load_fastload import _program

TABLES = {"insns": 0, "opnds": 1, "syncs": 2}


def _state():
    birsim.load(_program(lambda obj: None))             # the walker's static state exists after a load
    static = _fastload._STATIC[1]
    return _birsim._fast_new(static, {
        "insn_recs": [], "opnd_recs": [], "sync_recs": [], "infos": [], "sets": [],
        "locs": [], "regs": [], "sbuf": bytearray(), "lists": {}})


def _numpy(recs, table):
    dtype = birsim.loader.default_catalog().numpy_dtypes[table]
    try:
        return _to_array_fast(recs, dtype, _DEFAULTS.get(table, {}))
    except (OverflowError, ValueError, TypeError):
        return None


def _values(field_type):
    big = 1 << 31
    ints = [0, 1, -1, 7, big - 1, -big, big, -big - 1, (1 << 63) - 1, -(1 << 63), 1 << 63,
            1 << 53, (1 << 53) + 1, True, False]
    floats = [0.5, -0.0, float("nan"), float("inf"), 1e300, 3.0]
    other = [None, "1", [1], np.int32(3), np.float64(2.5)]
    return ints + floats + other


def _same(a, b):
    """Records a and b (arrays of one layout) hold the same bytes in every field."""
    return len(a) == len(b) and all(a[name].tobytes() == b[name].tobytes()
                                    for name in a.dtype.names)


def _fields(table):
    dtype = birsim.loader.default_catalog().numpy_dtypes[table]
    return [(name, dtype.fields[name][0]) for name in dtype.names]


def _cases(table):
    """Records with one field set to each value (an array field: lists of it, of each
    length up to one too many, and None), plus records of several fields."""
    out = [{}]
    for name, ftype in _fields(table):
        n = ftype.shape[0] if ftype.shape else 0
        for v in _values(ftype):
            if n:
                out += [{name: [v] * k} for k in range(n + 2)]
                out.append({name: tuple([v] * n)})
            else:
                out.append({name: v})
        if n:
            out.append({name: None})
    out.append({name: k for k, (name, ftype) in enumerate(_fields(table)) if not ftype.shape})
    out.append({"unrelated": object(), _fields(table)[0][0]: 3})
    return out


@pytest.mark.parametrize("table", sorted(TABLES))
def test_c_writes_what_numpy_writes_and_leaves_it_the_rest(table):
    recs = _cases(table)
    dtype = birsim.loader.default_catalog().numpy_dtypes[table]
    data, rest = _birsim._fast_fill(_state(), TABLES[table], recs)
    arr = np.frombuffer(data, dtype=dtype).copy()
    written = 0
    for i, rec in enumerate(recs):
        ref = _numpy([rec], table)
        if i in rest:
            continue
        written += 1
        assert ref is not None, (table, rec)             # C never takes what NumPy refuses
        assert _same(arr[i:i + 1], ref), (table, rec)
    assert written > len(recs) // 4                      # C takes the plain ones
    assert 0 not in rest                                 # ({}: the template)
    assert len(rest) > 10                                # and leaves the others
    # the rest through NumPy, as the loader does: the same table as NumPy's alone
    ok = [i for i in range(len(recs)) if _numpy([recs[i]], table) is not None]
    sub = [recs[i] for i in ok]
    data, rest = _birsim._fast_fill(_state(), TABLES[table], sub)
    arr = np.frombuffer(data, dtype=dtype).copy()
    _fill_rest(arr, sub, rest, table, None)
    assert _same(arr, _numpy(sub, table))


def test_a_record_numpy_refuses_is_still_reported_by_numpy():
    recs = [{"op": 1}, {"op": 1 << 40, "name": 0}]
    data, rest = _birsim._fast_fill(_state(), 0, recs)
    assert rest == [1]
    arr = np.frombuffer(data, dtype=birsim.loader.default_catalog().numpy_dtypes["insns"])
    with pytest.raises(ProgramError, match="insns record 1"):
        _fill_rest(arr.copy(), recs, rest, "insns", None)
