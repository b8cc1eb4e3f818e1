"""A run's profile in the profiler's terms: ``Simulator(..., timing=True)`` -> ``sim.profile``.

The numbers come from birsim's timing model (``csrc/vm/timing.c``, docs/timing.md), computed
while the program runs; they are a model of the hardware, not a measurement.

- ``total_ns``: the modelled time from the first instruction's start to the last end.
- ``engines``: ``{engine: {"active_ns", "utilization"}}`` -- busy time summed over cores and
  its share of ``total_ns`` x cores. ``"DMA"`` is the core's DMA engines' mean busy time.
- ``opcode_counts``: executed instructions per opcode.
- ``dma_bytes`` and ``dma_histogram``: bytes moved by DMA instructions, and the transfers by
  bytes per partition (``"<256B"``, ``"<2KiB"``, ``"<4KiB"``, ``">=4KiB"``).
- ``hfu`` (hardware FLOPs utilisation): 2 x multiply-accumulates / (peak bf16 FLOP/s x
  time x cores); ``mbu`` (memory bandwidth utilisation): bytes moved to or from DRAM /
  (peak HBM bandwidth x time x cores) -- the NKI driver's definitions, with the target's
  peaks (``peak_tflops``, ``peak_hbm_gbps``).
- ``bounds``: ``memory_bound_ns`` (DRAM bytes at peak bandwidth) and ``compute_bound_ns``
  (the FLOPs at peak), lower bounds on ``total_ns`` for one core.
- ``critical_path``: with ``trace=True``, the chain of records (steps) that sets
  ``total_ns``, from the first to the last, each started by the one before it (its
  engine's previous instruction or the update it waited for); ``[]`` without a trace.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Union

from . import _birsim

__all__ = ["Profile"]

_ENGINE_NAMES = {v: k for k, v in _birsim.enums["ENGINE"].items()}
_TRN = {"sunda": "trn1", "gen3": "trn2", "core_v4": "trn3"}
_HIST_KEYS = ("<256B", "<2KiB", "<4KiB", ">=4KiB")


class Profile:
    """The modelled profile of one run (see the module docstring for each field)."""

    def __init__(self, **fields: Any) -> None:
        self.arch: str = fields.get("arch", "")
        self.cores: int = fields.get("cores", 1)
        self.total_ns: float = fields.get("total_ns", 0.0)
        self.engines: Dict[str, Dict[str, float]] = fields.get("engines", {})
        self.opcode_counts: Dict[str, int] = fields.get("opcode_counts", {})
        self.dma_bytes: int = fields.get("dma_bytes", 0)
        self.hbm_bytes: int = fields.get("hbm_bytes", 0)
        self.dma_histogram: Dict[str, int] = fields.get("dma_histogram", {})
        self.macs: int = fields.get("macs", 0)
        self.peak_tflops: float = fields.get("peak_tflops", 0.0)
        self.peak_hbm_gbps: float = fields.get("peak_hbm_gbps", 0.0)
        self.hfu: float = fields.get("hfu", 0.0)
        self.mbu: float = fields.get("mbu", 0.0)
        self.bounds: Dict[str, float] = fields.get("bounds", {})
        self.critical_path: List[int] = fields.get("critical_path", [])

    @classmethod
    def _from_core(cls, tm: Dict[str, Any], sim: Any) -> "Profile":
        total = float(tm["total_ns"])
        cores = int(sim.cores)
        span = total * cores
        engines: Dict[str, Dict[str, float]] = {}
        for e, ns in enumerate(tm["active_ns"]):
            name = _ENGINE_NAMES.get(e, str(e))
            if ns > 0 and name not in ("DMA", "Unassigned", "ALL"):
                engines[name] = {"active_ns": float(ns),
                                 "utilization": float(ns) / span if span else 0.0}
        if tm["dma_bytes"]:
            ns = tm["dma_engines_ns"] / max(1, tm["dma_engines"])
            engines["DMA"] = {"active_ns": float(ns),
                              "utilization": float(ns) / span if span else 0.0}
        flops = 2.0 * tm["macs"]
        peak = tm["pe_tflops_bf16"]
        hbm = tm["hbm_gbps"]
        secs = total * 1e-9
        crit: List[int] = []
        arch = str(getattr(sim, "_arch", None) or getattr(sim.module, "arch", ""))
        if getattr(sim, "_trace", False) and len(sim.trace):
            crit = _critical_path(sim.trace)
        return cls(
            arch=_TRN.get(arch, arch), cores=cores, total_ns=total,
            engines=engines,
            opcode_counts=dict(sim.stats.get("opcodes", {})),
            dma_bytes=int(tm["dma_bytes"]), hbm_bytes=int(tm["hbm_bytes"]),
            dma_histogram=dict(zip(_HIST_KEYS, (int(v) for v in tm["dma_hist"]))),
            macs=int(tm["macs"]), peak_tflops=peak, peak_hbm_gbps=hbm,
            hfu=flops / (peak * 1e12 * secs * cores) if secs else 0.0,
            mbu=tm["hbm_bytes"] / (hbm * 1e9 * secs * cores) if secs else 0.0,
            bounds={"memory_bound_ns": tm["hbm_bytes"] / hbm if hbm else 0.0,
                    "compute_bound_ns": flops / (peak * 1e3) if peak else 0.0},
            critical_path=crit)

    def as_dict(self) -> Dict[str, Any]:
        return {k: getattr(self, k) for k in (
            "arch", "cores", "total_ns", "engines", "opcode_counts", "dma_bytes", "hbm_bytes",
            "dma_histogram", "macs", "peak_tflops", "peak_hbm_gbps", "hfu", "mbu", "bounds",
            "critical_path")}

    def to_json(self, path: Union[str, "os.PathLike[str]"]) -> None:
        """Write the profile as a JSON object (the fields above)."""
        with open(path, "w") as f:
            json.dump(self.as_dict(), f, indent=1)

    def __repr__(self) -> str:
        return (f"<birsim Profile: {self.total_ns / 1000:.4g} µs, hfu {100 * self.hfu:.1f}%, "
                f"mbu {100 * self.mbu:.1f}%>")

    def _repr_html_(self) -> str:
        from ._html import _STYLE, table
        bars = "".join(
            f'<tr><td>{e}</td><td style="width:16em"><div style="background:#4a90d9;'
            f'height:0.9em;width:{min(100.0, 100 * v["utilization"]):.1f}%"></div></td>'
            f'<td>{v["active_ns"] / 1000:.4g} µs</td><td>{100 * v["utilization"]:.1f}%</td></tr>'
            for e, v in sorted(self.engines.items()))
        return (_STYLE + '<div class="birsim"><b>birsim profile</b> (modelled, docs/timing.md): '
                f"{self.total_ns / 1000:.4g} µs, HFU {100 * self.hfu:.2f}%, "
                f"MBU {100 * self.mbu:.2f}%"
                "<table><tr><th>engine</th><th>utilization</th><th>active</th><th></th></tr>"
                + bars + "</table>"
                + table(("DMA transfers (bytes/partition)", "count"),
                        list(self.dma_histogram.items()))
                + "</div>")


def _critical_path(trace: Any) -> List[int]:
    """Steps of the chain that ends at the last end: from the last record, step back to
    what let it start (an update it waited for ending at or after the engine's previous
    instruction, else that previous instruction) until a record that started at 0."""
    recs = list(trace)
    prev: Dict[int, int] = {}
    last_on: Dict[tuple, int] = {}
    for r in recs:
        key = (r.core, r.engine)
        if key in last_on:
            prev[r.step] = last_on[key]
        last_on[key] = r.step
    k = max(range(len(recs)), key=lambda j: recs[j].end)
    path = [k]
    while recs[k].start > 0:
        r = recs[k]
        cands = [s for s in r.waits_on]
        if k in prev:
            cands.append(prev[k])
        if not cands:
            break
        k = max(cands, key=lambda j: recs[j].end)
        path.append(k)
    return path[::-1]
