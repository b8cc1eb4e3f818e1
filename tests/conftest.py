"""Suite-wide hooks.

``BIRSIM_CHECK_FASTLOAD=1 python -m pytest`` loads every program of the suite twice, with
the Python loader alone (the specification) and with its C fast path
(csrc/py/fastload.c), and fails any load whose tables, warnings or error differ.
tests/load/test_load_fastload.py runs the same comparison over the example and test corpus on
every run; this switch extends it to every program the suite builds.
"""

import os
import sys
import warnings

import pytest

# Tests are grouped by subsystem (tests/<room>/test_<room>_<topic>.py); some import another
# room's test module (its program builders), and every one imports the helpers here.
_HERE = os.path.dirname(os.path.abspath(__file__))
for _room in sorted(os.listdir(_HERE)):
    if os.path.isfile(os.path.join(_HERE, _room, "__init__.py")) or \
            not os.path.isdir(os.path.join(_HERE, _room)) or _room in ("c", "data"):
        continue
    if os.path.join(_HERE, _room) not in sys.path:
        sys.path.append(os.path.join(_HERE, _room))


def _instruction_order(tables):
    """The tables with the operand and sync records in instruction order. The C walker
    makes its records in the loader's pass 1 and the Python path its own in pass 2, so a
    program with both has each instruction's run of records at another place; the runs
    themselves must be the same. Every record must belong to exactly one instruction."""
    import numpy as np
    insns = tables["insns"].copy()
    out = dict(tables, insns=insns)
    for t, start, counts in (("opnds", "opnd", ("nin", "nout")),
                             ("syncs", "sync", ("nwait", "nupd"))):
        cnt = sum(insns[c].astype(np.int64) for c in counts)
        new = np.cumsum(cnt) - cnt
        index = np.repeat(insns[start].astype(np.int64) - new, cnt) + np.arange(cnt.sum())
        assert np.array_equal(np.sort(index), np.arange(len(tables[t]))), \
            "%s records not owned by exactly one instruction" % t
        out[t] = tables[t][index]
        insns[start] = new          # an instruction without records too: where it would be
    return out


def _tables(result):
    import numpy as np
    mods = result if isinstance(result, list) else [result]
    out = []
    for m in mods:
        t = {}
        for k, v in _instruction_order(m.tables).items():
            if isinstance(v, np.ndarray) and v.dtype.names:
                t[k] = tuple((f, v[f].tobytes()) for f in v.dtype.names)
            else:
                t[k] = v.tobytes() if hasattr(v, "tobytes") else v
        out.append((t, m.warnings))
    return out


def load_caught(src):
    """``birsim.load(src)`` with every warning recorded: (the result, or the ProgramError it
    raised; the warnings' messages)."""
    import warnings
    import birsim
    from birsim.errors import ProgramError
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            r = birsim.load(src)
        except ProgramError as e:
            r = e
    return r, [str(w.message) for w in caught]


@pytest.fixture(autouse=True)
def _check_fastload(monkeypatch):
    if not os.environ.get("BIRSIM_CHECK_FASTLOAD"):
        yield
        return
    import birsim._load.passes as L
    real = L._load_group

    def both(sources, catalog, single=False, strict=False):
        monkeypatch.setattr(L, "FAST_PATH", False)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    slow, slow_err = _tables(real(sources, catalog, single, strict)), None
                except Exception as e:          # noqa: BLE001 -- compared below
                    slow, slow_err = None, e
        finally:
            monkeypatch.setattr(L, "FAST_PATH", True)
        try:
            result = real(sources, catalog, single, strict)
        except Exception as e:
            assert slow_err is not None, "only the fast path raised %r" % e
            assert (type(e), str(e), getattr(e, "path", None)) == \
                (type(slow_err), str(slow_err), getattr(slow_err, "path", None)), \
                "fast path: %r, Python path: %r" % (e, slow_err)
            raise
        assert slow_err is None, "only the Python path raised %r" % slow_err
        assert _tables(result) == slow, "fast and Python loads differ"
        return result

    monkeypatch.setattr(L, "_load_group", both)
    yield
