"""No field ignored in silence: the key checks of every instruction, from the opcode rows.

Every opcode birsim runs has a row in :data:`birsim._load.opcodes.OPS` (its keys, ignored
and unmodelled keys, operand counts); :func:`known_keys` of an opcode without one is a
KeyError, so a forgotten row fails every load of that opcode instead of leaving its
misspelled keys unwarned (tests/house/test_house_layers.py misspells a key of every opcode the core
runs). tests/compute/test_compute_keys.py checks each row against what the handler really reads.
An unmodelled value of a documented key is a ProgramError naming the key, never a
silently different result.

An optional key in no list but within a small edit distance of one that is gets a
warning with the suggestion (``negat`` -> ``negate``); keys far from every known one stay
silent (real compiler dumps carry many).
"""

from .opcodes import BIRKERNEL_ATTRS, COMMON, OPS

__all__ = ["COMMON", "BIRKERNEL_ATTRS", "check_keys", "edit_distance", "suggestion",
           "known_keys", "operand_limits"]


def edit_distance(a, b):
    """Levenshtein distance with adjacent transpositions (optimal string alignment)."""
    d = [[i + j if i * j == 0 else 0 for j in range(len(b) + 1)] for i in range(len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1,
                          d[i - 1][j - 1] + (a[i - 1] != b[j - 1]))
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
    return d[-1][-1]


def _limit(key):
    return 1 if len(key) <= 5 else 2


def known_keys(op):
    """The keys ``op`` knows (KeyError for an opcode without a row in ``opcodes.OPS``)."""
    r = OPS[op]
    return COMMON | r.read() | set(r.ignored) | set(r.unmodelled)


def operand_limits(op):
    """(most ins, most outs) of ``op``, None for any (KeyError without a row)."""
    return OPS[op].operands


def suggestion(op, key):
    """The known key of ``op`` closest to ``key`` within the warning distance, or None.
    Memoised per (opcode, key): compiler dumps carry the same far-off keys (``debug``,
    ``loop_carried_dependencies``) on every instruction, and the edit distances to every
    known key cost ~1 ms per instruction. The cache is keyed by the known-key set too, so
    a schema extended at run time is not answered from a stale entry."""
    known = frozenset(known_keys(op))
    ck = (op, key, known)
    hit = _SUGGESTIONS.get(ck, MISSING)
    if hit is MISSING:
        if len(_SUGGESTIONS) >= 4096:       # bounded: keys come from the input
            _SUGGESTIONS.clear()
        hit = _SUGGESTIONS[ck] = _suggestion(known, key)
    return hit


_SUGGESTIONS: dict = {}
MISSING = object()


def _suggestion(known, key):
    best = None
    for k in sorted(known):
        dist = edit_distance(key, k)
        if dist <= _limit(k) and (best is None or dist < best[0]):
            best = (dist, k)
    return best and best[1]


def check_keys(op, obj, ctx, warn):
    """Reject unmodelled values of documented keys of ``op``; warn about near misses.
    ``warn(topic, message)`` is the loader's once-per-topic warning."""
    for key, (ok, modelled) in OPS[op].unmodelled.items():     # KeyError: no row
        v = obj.get(key)
        if v is not None and not ok(v):
            raise ctx.key(key).error("%s key '%s' = %r is not modelled by birsim (only %s is); "
                                     "refusing to give different numbers" % (op, key, v, modelled))
    known = None
    for key in obj:
        if key in COMMON:
            continue
        if known is None:
            known = known_keys(op)
        if key in known:
            continue
        near = suggestion(op, key)
        if near is not None:
            warn("key:%s:%s" % (op, key), "%s: unknown key '%s' of %s is ignored; did you "
                 "mean '%s'?" % (ctx.key(key).path, key, op, near))
