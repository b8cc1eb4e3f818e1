"""Rich HTML for Jupyter: ``Module._repr_html_``, ``Simulator._repr_html_``,
``Trace._repr_html_``. Everything is built from the same data as the text forms (the
listing, ``sim.stats``, ``sim.warnings``, ...), so the two never disagree."""

from __future__ import annotations

import html
import re
from typing import Iterable, List

import numpy as np

__all__ = ["module_html", "simulator_html", "trace_html", "table"]

_ENGINE_COLOURS = {"DMA": "#4c78a8", "PE": "#e45756", "Activation": "#f58518",
                   "DVE": "#54a24b", "Pool": "#b279a2", "SP": "#9d755d",
                   "Unassigned": "#888888", "ALL": "#888888"}
_STYLE = ("<style>.birsim details{margin-left:1.2em}.birsim summary{cursor:pointer}"
          ".birsim pre{margin:0;font-size:90%}.birsim .eng{font-weight:bold}"
          ".birsim table{border-collapse:collapse;font-size:90%}"
          ".birsim td,.birsim th{padding:1px 8px;text-align:left}</style>")
_INSN = re.compile(r"^(\[\d+\] [^:]+: )(\S+)( .*)$")
_FOLD = re.compile(r"^(block \S+:|function \S+.*|\[\d+\] [^:]+: \S+ "
                   r"(Loop|DynamicForLoop|DoWhile|Call|NKIKernel|DMATrigger)\b.*)$")


def _e(x) -> str:
    return html.escape(str(x))


def table(header: Iterable[str], rows: Iterable[Iterable]) -> str:
    """A small HTML table (cells escaped)."""
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _line_html(text: str) -> str:
    m = _INSN.match(text)
    if not m:
        return _e(text)
    eng = m.group(2)
    colour = _ENGINE_COLOURS.get(eng, "#333")
    return (_e(m.group(1)) + f'<span class="eng" style="color:{colour}">{_e(eng)}</span>'
            + _e(m.group(3)))


def _fold(lines: List[str], start: int, indent: int, out: List[str], depth: int) -> int:
    """Render lines[start:] at ``indent`` or deeper; returns the first line not taken."""
    i = start
    while i < len(lines):
        line = lines[i]
        ind = len(line) - len(line.lstrip(" "))
        if ind < indent or not line.strip():
            if not line.strip():
                i += 1
                continue
            return i
        text = line.strip()
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        deeper = nxt.strip() and len(nxt) - len(nxt.lstrip(" ")) > ind
        if deeper and _FOLD.match(text):
            opened = " open" if depth == 0 else ""
            out.append(f"<details{opened}><summary><code>{_line_html(text)}</code>"
                       "</summary>")
            i = _fold(lines, i + 1, ind + 1, out, depth + 1)
            out.append("</details>")
        else:
            out.append(f"<pre>{_line_html(text)}</pre>")
            i += 1
    return i


def listing_html(text: str) -> str:
    """The text listing with each function open, and blocks and loop/call bodies folded
    (click to open); engines coloured."""
    lines = text.splitlines()
    out: List[str] = []
    head = []
    i = 0
    while i < len(lines) and not lines[i].startswith("function "):
        if lines[i].strip():
            head.append(lines[i])
        i += 1
    if head:
        out.append("<pre>" + _e("\n".join(head)) + "</pre>")
    _fold(lines, i, 0, out, 0)
    return "".join(out)


def _io_rows(module, kind):
    rows = []
    for t in getattr(module, kind):
        rows.append((t.name, "x".join(map(str, t.shape)) or "scalar", t.dtype))
    return rows


def module_html(module) -> str:
    """A Module: summary, inputs/outputs, and the folded listing."""
    parts = [_STYLE, '<div class="birsim">',
             f"<b>birsim.Module</b> entry <code>{_e(module.entry)}</code>, "
             f"arch {_e(module.arch)}, {len(module.functions)} function(s)"]
    ins, outs = _io_rows(module, "inputs"), _io_rows(module, "outputs")
    if ins or outs:
        parts.append(table(("", "tensor", "shape", "dtype"),
                           [("in",) + r for r in ins] + [("out",) + r for r in outs]))
    parts.append(listing_html(str(module)))
    parts.append("</div>")
    return "".join(parts)


def _summary(arr):
    a = np.asarray(arr)
    shape = "x".join(map(str, a.shape)) or "scalar"
    try:
        f = a.astype(np.float64)
    except (TypeError, ValueError):
        return (shape, str(a.dtype), "", "", "")
    if f.size == 0:
        return (shape, str(a.dtype), "", "", 0)
    nans = int(np.isnan(f).sum())
    fin = f[~np.isnan(f)]
    lo, hi = (f"{fin.min():.6g}", f"{fin.max():.6g}") if fin.size else ("nan", "nan")
    return (shape, str(a.dtype), lo, hi, nans)


def simulator_html(sim) -> str:
    """A Simulator: state, outputs (shape, dtype, min, max, NaN count), warnings,
    notes, findings and stats."""
    parts = [_STYLE, '<div class="birsim">',
             f"<b>birsim.Simulator</b> entry <code>{_e(sim.module.entry)}</code>, "
             f"{sim.cores} core(s), schedule {_e(sim.schedule)}"
             + (f" seed {sim.seed}" if sim.schedule == "random" else "")]
    if getattr(sim, "paused", False):
        s = sim.stopped
        where = (f" after <code>{_e(s.instruction)}</code> ({_e(s.opcode)} on {_e(s.engine)}, "
                 f"core {s.core}, block {_e(s.block)} [{s.position}], step {s.step})"
                 if s is not None else " before the first instruction")
        parts.append(f"<p><b>paused</b>{where}</p>")
    elif not getattr(sim, "_ran", False):
        parts.append("<p>not run yet</p>")
    outputs = getattr(sim, "outputs", None)
    if outputs:
        parts.append("<p><b>outputs</b></p>")
        parts.append(table(("tensor", "shape", "dtype", "min", "max", "NaN"),
                           [(k,) + _summary(v) for k, v in outputs.items()]))
    if sim.warnings:
        parts.append(f"<p><b>warnings</b> ({len(sim.warnings)})</p><ul>"
                     + "".join(f"<li><code>{_e(w)}</code></li>" for w in sim.warnings[:50])
                     + "</ul>")
    if sim.notes:
        parts.append(f"<p><b>notes</b>: <code>{_e(' '.join(sim.notes))}</code></p>")
    findings = getattr(sim, "findings", None)
    if findings:
        parts.append(f"<p><b>findings</b> ({len(findings)})</p><ul>"
                     + "".join(f"<li><code>{_e(f)}</code></li>" for f in list(findings)[:50])
                     + "</ul>")
    st = sim.stats
    if st:
        parts.append(f"<p><b>stats</b>: {st.get('steps', 0):,} steps, "
                     f"{st.get('instructions', 0):,} instructions"
                     + (", exited" if sim.exited else "") + "</p>")
        parts.append(table(("engine", "instructions"), sorted(st.get("engines", {}).items())))
        parts.append("<details><summary>per opcode</summary>"
                     + table(("opcode", "count"), sorted(st.get("opcodes", {}).items()))
                     + "</details>")
    trace = getattr(sim, "trace", None)
    if trace:
        parts.append(f"<p><b>trace</b>: {len(trace):,} records, "
                     f"{trace.total_time / 1000:.3g} µs on the timing model "
                     "(<code>sim.trace.plot()</code>, <code>sim.trace.export(path)</code>)</p>")
    parts.append("</div>")
    return "".join(parts)


def trace_html(trace) -> str:
    """A Trace: record count, total time and busy time per engine."""
    busy = trace.busy()
    total = trace.total_time or 1.0
    rows = [(f"core {c}", e, f"{t / 1000:.3g}", f"{100 * t / total:.0f}%")
            for (c, e), t in sorted(busy.items())]
    return (_STYLE + '<div class="birsim">'
            + f"<b>birsim trace</b>: {len(trace):,} records, {total / 1000:.3g} µs"
            + (f" ({trace.dropped:,} not recorded)" if trace.dropped else "")
            + table(("core", "engine", "busy µs", "busy"), rows) + "</div>")
