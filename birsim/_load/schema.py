"""Validation helpers for the BIR-JSON loader: JSON paths, typed key access, enum lookup.

Every error is a :class:`~birsim.errors.ProgramError` whose message starts with the JSON
path of the bad value (``functions[0].blocks[2].instructions[5].ins[1].ap: ...``) and whose
``path``, ``function`` and ``instruction`` attributes are set when known.
"""

import re

from .. import _birsim
from ..errors import ProgramError

__all__ = ["Ctx", "MISSING", "as_int", "as_num", "as_str", "as_name", "as_bool",
           "as_list", "as_dict", "get", "enum_value", "enum_check", "int_list", "describe"]

MISSING = object()
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1


class Ctx:
    """Where a value sits: its JSON path (kept as parts, formatted only on error) and the
    function and instruction it belongs to."""

    __slots__ = ("parts", "function", "instruction")

    def __init__(self, parts=(), function=None, instruction=None):
        self.parts = parts
        self.function = function
        self.instruction = instruction

    def key(self, *keys):
        """The context of ``obj[key]`` (several keys or indices: a deeper path)."""
        return Ctx(self.parts + keys, self.function, self.instruction)

    def named(self, function=MISSING, instruction=MISSING):
        """The same path with the function and/or instruction name set."""
        return Ctx(self.parts,
                   self.function if function is MISSING else function,
                   self.instruction if instruction is MISSING else instruction)

    @property
    def path(self):
        out = []
        for p in self.parts:
            if isinstance(p, int):
                out.append("[%d]" % p)
            elif _IDENT.match(p):
                out.append("." + p if out else p)
            else:
                out.append("[%s]" % _quote(p))
        return "".join(out)

    def where(self):
        """`` (instruction 'i' in function 'f')`` or ``''``."""
        if self.instruction is not None and self.function is not None:
            return " (instruction '%s' in function '%s')" % (self.instruction, self.function)
        if self.function is not None:
            return " (function '%s')" % self.function
        return ""

    def error(self, message, code=None):
        """A ProgramError for this place; ``raise ctx.error("...")``."""
        path = self.path
        text = "%s: %s%s" % (path, message, self.where()) if path else message + self.where()
        return ProgramError(text, path=path, code=code, function=self.function,
                            instruction=self.instruction)


def _quote(s):
    return '"%s"' % s.replace("\\", "\\\\").replace('"', '\\"')


def describe(v):
    """A short description of a JSON value for messages."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean %s" % ("true" if v else "false")
    if isinstance(v, int):
        return "integer %d" % v
    if isinstance(v, float):
        return "number %r" % v
    if isinstance(v, str):
        return "string %s" % _quote(v if len(v) <= 40 else v[:37] + "...")
    if isinstance(v, list):
        return "a list"
    if isinstance(v, dict):
        return "an object"
    return type(v).__name__


def _expected(what, v, ctx):
    return ctx.error("expected %s, got %s" % (what, describe(v)))


_F64_MAX_INT = int(1.7976931348623157e308)


def as_int(v, ctx, lo=None, hi=None):
    """An integer (not a boolean; a float with an integral value is accepted)."""
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, int):
        raise _expected("an integer", v, ctx)
    if not _I64_MIN <= v <= _I64_MAX:
        raise ctx.error("integer %s does not fit in 64 bits" % _short_int(v))
    if lo is not None and v < lo:
        raise ctx.error("%d is out of range: must be >= %d" % (v, lo))
    if hi is not None and v > hi:
        raise ctx.error("%d is out of range: must be <= %d" % (v, hi))
    return v


def as_num(v, ctx):
    """A number (integer or float; booleans are not numbers). Integers must fit in a
    float64 (about 1.8e308)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise _expected("a number", v, ctx)
    if type(v) is int and not -_F64_MAX_INT <= v <= _F64_MAX_INT:
        raise ctx.error("integer %s is too large for a float64" % _short_int(v))
    return v


def _short_int(v):
    d = str(abs(v)) if v.bit_length() < 4000 else None
    if d is None or len(d) > 30:
        return "%s~2^%d" % ("-" if v < 0 else "", v.bit_length())
    return str(v)


def _check_text(v, ctx):
    if not v.isascii():
        try:
            v.encode("utf-8")
        except UnicodeEncodeError:
            raise ctx.error("string %s is not valid Unicode text (lone surrogate)"
                            % ascii(v)[:80]) from None


def as_str(v, ctx):
    if not isinstance(v, str):
        raise _expected("a string", v, ctx)
    _check_text(v, ctx)
    return v


def as_name(v, ctx):
    """A non-empty name without NUL characters."""
    if not isinstance(v, str):
        raise _expected("a name (string)", v, ctx)
    if not v or "\0" in v:
        raise ctx.error("invalid name %s" % _quote(v))
    _check_text(v, ctx)
    return v


def as_bool(v, ctx):
    """``true``/``false`` (or the integers 0 and 1)."""
    if isinstance(v, bool):
        return v
    if isinstance(v, int) and v in (0, 1):
        return bool(v)
    raise _expected("a boolean", v, ctx)


def as_list(v, ctx):
    if not isinstance(v, list):
        raise _expected("a list", v, ctx)
    return v


def as_dict(v, ctx):
    if not isinstance(v, dict):
        raise _expected("an object", v, ctx)
    return v


def _get_py(obj, key, ctx, check=None, default=MISSING, what=None):
    """``obj[key]`` checked by ``check(value, ctx_of_key)``.

    A key that is absent or ``null`` takes ``default``; with no default it is a required
    key and its absence is an error naming it (``what`` says what it belongs to, e.g.
    ``"Loop axis"``). ``key`` may be a tuple of aliases, the first present one wins."""
    if type(key) is tuple:
        for k in key:
            if obj.get(k) is not None:
                return _get_py(obj, k, ctx, check)
        keys = key
    else:
        v = obj.get(key)
        if v is not None:
            if check is None:
                return v
            fast = getattr(check, "fast", None)
            if fast is not None:
                v2 = fast(v)
                if v2 is not MISSING:
                    return v2
            return check(v, ctx.key(key))
        keys = (key,)
    if default is MISSING:
        owner = " of %s" % what if what else ""
        alias = " (or %s)" % ", ".join("'%s'" % k for k in keys[1:]) if len(keys) > 1 else ""
        raise ctx.error("missing required key '%s'%s%s" % (keys[0], alias, owner))
    return default


#: get() in C (``_birsim._get``: a dict and a str key, a loader's every read of a key),
#: this Python one reading the rest (an alias tuple, a missing required key: its error);
#: tests/load/test_load_pack.py compares the two
_birsim._get_init(MISSING, _get_py)
get = _birsim._get


def enum_value(v, ctx, what, table, aliases=None, allow_int=False):
    """Look ``v`` up in ``table`` (name -> code), accepting ``aliases`` (alias -> name)
    and, with ``allow_int``, the codes themselves. Errors name the enum, the bad value
    and the accepted values."""
    if isinstance(v, str):
        name = aliases.get(v, v) if aliases else v
        if name in table:
            return table[name]
    elif allow_int and isinstance(v, int) and not isinstance(v, bool):
        if v in table.values():
            return v
    accepted = ", ".join(table)
    if aliases:
        accepted += " (aliases: %s)" % ", ".join(sorted(aliases))
    if allow_int:
        accepted += " or their numbers (%s)" % ", ".join(str(c) for c in table.values())
    raise ctx.error("unknown %s %s; accepted: %s" % (what, describe(v), accepted))


def enum_check(what, table, aliases=None, allow_int=False):
    """A ``get`` checker looking a value up in an enum table (see :func:`enum_value`)."""
    return _EnumCheck(what, table, aliases, allow_int)


class _EnumCheck:
    """enum_check's checker: ``check(v, ctx)`` and its ``fast(v)``. An object rather than
    two closures and a function attribute: a loader makes a dozen at every load, and the
    closures cost a tiny program's load ~4x as much to make."""

    __slots__ = ("what", "table", "aliases", "allow_int")

    def __init__(self, what, table, aliases, allow_int):
        self.what, self.table, self.aliases, self.allow_int = what, table, aliases, allow_int

    def __call__(self, v, ctx):
        return enum_value(v, ctx, self.what, self.table, self.aliases, self.allow_int)

    def fast(self, v):
        if type(v) is str:
            aliases = self.aliases
            return self.table.get(aliases.get(v, v) if aliases else v, MISSING)
        return MISSING


# Fast paths used by `get`: return the value when the check would pass it unchanged,
# else MISSING (then the full check runs and builds the error context).
as_int.fast = lambda v: v if type(v) is int and _I64_MIN <= v <= _I64_MAX else MISSING  # type: ignore
as_name.fast = lambda v: v if type(v) is str and v and "\0" not in v else MISSING  # type: ignore
as_str.fast = lambda v: v if type(v) is str else MISSING  # type: ignore
as_list.fast = lambda v: v if type(v) is list else MISSING  # type: ignore
as_dict.fast = lambda v: v if type(v) is dict else MISSING  # type: ignore


def int_list(v, ctx, lo=None, hi=None):
    """A list of integers."""
    if type(v) is list:
        # the common case, checked without a context per element: plain ints in range
        # come back as as_int returns them; anything else takes the full path below,
        # which builds the error
        for x in v:
            if type(x) is not int or not _I64_MIN <= x <= _I64_MAX or \
                    (lo is not None and x < lo) or (hi is not None and x > hi):
                break
        else:
            return list(v)
    as_list(v, ctx)
    return [as_int(x, ctx.key(i), lo, hi) for i, x in enumerate(v)]
