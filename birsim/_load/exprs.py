"""Affine expressions: BIR-JSON (version 1 or 2) -> the postfix code of ``exprs``.

An expression index points at a length word ``n`` followed by ``n/2`` (op, arg) pairs
(csrc/ir/program.h, ``BS_X_*``). Version 2 objects are tagged by ``kind``
(``AffExprKind``, ``AffIVKind``, ``IntRuntimeValueKind``, ``ShardIDKind``, ``SumKind``,
``MultKind``, ``FloorDivKind``, ``ModuloKind``); version 1 writes
``{"terms": [{"axis": name, "coef": k}, ...], "c": n}``. A plain integer is a constant.
Both spellings are accepted in either version (they cannot be confused).

Names are resolved through a *scope* with ``axis(name, ctx) -> slot`` and
``reg(name, ctx) -> register index``.
"""

from .schema import as_dict, as_int, as_list, as_name, as_str, describe, get

__all__ = ["compile_expr", "constant_value", "dynamic_ub", "DFL_UB_CODE", "DFL_UB_MESSAGE"]

# The BS_X_* opcodes of csrc/ir/program.h (the encoding contract of `exprs`), exported
# by the extension from the same X-macro list.
from .. import _birsim as _b
X_CONST, X_IV, X_REG, X_SHARD, X_ADD, X_MUL, X_FLOORDIV, X_MOD = (
    _b.expr_ops[k] for k in ("CONST", "IV", "REG", "SHARD", "ADD", "MUL", "FLOORDIV", "MOD"))

DFL_UB_CODE = 1910
DFL_UB_MESSAGE = "Only scalar values supported in Dynamic For Loop upper bound expressions"

_KINDS = ("AffExprKind", "AffIVKind", "IntRuntimeValueKind", "ShardIDKind", "SumKind",
          "MultKind", "FloorDivKind", "ModuloKind")


def compile_expr(value, ctx, scope, exprs):
    """Append the code of expression ``value`` to ``exprs`` (a list of ints) and return
    its index."""
    code = []
    _gen(value, ctx, scope, code)
    index = len(exprs)
    exprs.append(len(code))
    exprs.extend(code)
    return index


def constant_value(value):
    """The value of an expression written as a constant (an integer, or an affine
    expression without terms), else ``None``. Does not validate."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, dict) and value.get("kind", "AffExprKind") == "AffExprKind" \
            and not value.get("terms"):
        c = value.get("c", 0)
        return c if isinstance(c, int) and not isinstance(c, bool) else None
    return None


def dynamic_ub(value, ctx, scope):
    """Check a DynamicForLoop ``ub`` written as ``c + coeff x register`` (one term, an
    ``IntRuntimeValueKind``, judged as written) and return ``(c, coeff, register)``.
    Anything else is a ProgramError with code 1910."""
    def bad():
        return ctx.error(DFL_UB_MESSAGE + " (expected c + coeff * register, got %s)"
                         % _show(value), code=DFL_UB_CODE)
    if not isinstance(value, dict) or value.get("kind", "AffExprKind") != "AffExprKind":
        raise bad()
    terms = value.get("terms")
    if not isinstance(terms, list) or len(terms) != 1 or not isinstance(terms[0], dict):
        raise bad()
    term = terms[0]
    idx = term.get("idx")
    if not isinstance(idx, dict) or idx.get("kind") != "IntRuntimeValueKind":
        raise bad()
    tctx = ctx.key("terms", 0)
    coeff = get(term, ("coeff", "coef"), tctx, as_int, 1)
    reg = scope.reg(get(idx, "regref", tctx.key("idx"), as_name), tctx.key("idx", "regref"))
    c = get(value, "c", ctx, as_int, 0)
    return c, coeff, reg


def _show(value):
    if isinstance(value, dict) and "kind" in value:
        return "an expression of kind %s" % describe(value["kind"])
    return describe(value)


def _gen(v, ctx, scope, code):
    if isinstance(v, bool) or not isinstance(v, (int, float, dict)):
        raise ctx.error("expected an affine expression (an integer or an object), got %s"
                        % describe(v))
    if not isinstance(v, dict):
        code += (X_CONST, as_int(v, ctx))
        return
    kind = v.get("kind")
    if kind is None:
        if "terms" in v or "c" in v:
            kind = "AffExprKind"
        elif "axis" in v:
            kind = "AffIVKind"
        elif "regref" in v:
            kind = "IntRuntimeValueKind"
        else:
            raise ctx.error("expression object has no 'kind' (and is not a version-1 "
                            "{terms, c} expression)")
    kind = as_str(kind, ctx.key("kind"))
    if kind == "AffExprKind":
        _gen_affine(v, ctx, scope, code)
    elif kind == "AffIVKind":
        code += (X_IV, scope.axis(get(v, "axis", ctx, as_name, what="AffIVKind"),
                                  ctx.key("axis")))
    elif kind == "IntRuntimeValueKind":
        code += (X_REG, scope.reg(get(v, "regref", ctx, as_name, what=kind),
                                  ctx.key("regref")))
    elif kind == "ShardIDKind":
        code += (X_SHARD, 0)
    elif kind == "SumKind":
        terms = as_list(get(v, "terms", ctx, what=kind), ctx.key("terms"))
        if not terms:
            code += (X_CONST, 0)
        for i, t in enumerate(terms):
            _gen(t, ctx.key("terms", i), scope, code)
            if i:
                code += (X_ADD, 0)
    elif kind == "MultKind":
        _gen(get(v, "var", ctx, what=kind), ctx.key("var"), scope, code)
        code += (X_MUL, get(v, "scale", ctx, as_int, what=kind))
    elif kind in ("FloorDivKind", "ModuloKind"):
        _gen(get(v, "numer", ctx, what=kind), ctx.key("numer"), scope, code)
        denom = get(v, "denom", ctx, as_int, what=kind)
        if denom <= 0:
            raise ctx.key("denom").error("%s denominator must be > 0, got %d" % (kind, denom))
        code += (X_FLOORDIV if kind == "FloorDivKind" else X_MOD, denom)
    else:
        raise ctx.key("kind").error("unknown expression kind %s; accepted: %s"
                                    % (describe(kind), ", ".join(_KINDS)))


def _gen_affine(v, ctx, scope, code):
    terms = as_list(v.get("terms") or [], ctx.key("terms"))
    c = get(v, "c", ctx, as_int, 0)
    for i, t in enumerate(terms):
        tctx = ctx.key("terms", i)
        as_dict(t, tctx)
        if t.get("idx") is not None:
            _gen(t["idx"], tctx.key("idx"), scope, code)
        elif t.get("axis") is not None:                     # version 1
            code += (X_IV, scope.axis(as_name(t["axis"], tctx.key("axis")), tctx.key("axis")))
        else:
            raise tctx.error("missing required key 'idx' (version 2) or 'axis' "
                             "(version 1) of an affine term")
        coeff = get(t, ("coeff", "coef"), tctx, as_int, 1)
        if coeff != 1:
            code += (X_MUL, coeff)
        if i:
            code += (X_ADD, 0)
    if not terms:
        code += (X_CONST, c)
    elif c:
        code += (X_CONST, c, X_ADD, 0)
