"""Plots for notebooks (needs matplotlib: ``pip install 'birsim[plot]'``).

    birsim.plot.timeline(sim)          # per-engine timeline of a traced run
    birsim.plot.tensor(out["y"])       # a 2-D heat map (higher ranks: the free dims flattened)
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from .trace import plot_timeline

__all__ = ["timeline", "tensor"]


def _plt():
    try:
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError("birsim.plot needs matplotlib: pip install 'birsim[plot]'") from None
    return plt


def timeline(trace_or_sim: Any, ax=None, **kw: Any) -> Any:
    """The per-engine timeline of ``sim.trace`` (a Simulator made with ``trace=True``, or
    its trace); returns the Axes."""
    trace = getattr(trace_or_sim, "trace", trace_or_sim)
    if not trace:
        raise ValueError("timeline: no trace records (make the Simulator with trace=True "
                         "and run it)")
    _plt()
    return plot_timeline(trace, ax=ax, **kw)


def tensor(arr: Any, ax=None, *, title: Optional[str] = None, cmap: str = "viridis") -> Any:
    """A heat map of ``arr`` as [partition, free] (free dims flattened; bf16/fp8 shown as
    fp32; NaNs left blank), with a colour bar; returns the Axes."""
    plt = _plt()
    a = np.asarray(arr)
    try:
        f = a.astype(np.float32)
    except (TypeError, ValueError):
        raise TypeError(f"tensor: cannot show dtype {a.dtype}") from None
    if f.ndim == 0:
        f = f.reshape(1, 1)
    elif f.ndim == 1:
        f = f.reshape(1, -1)
    else:
        f = f.reshape(f.shape[0], -1)
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4))
    im = ax.imshow(np.ma.masked_invalid(f), aspect="auto", interpolation="nearest", cmap=cmap)
    ax.figure.colorbar(im, ax=ax)
    ax.set_ylabel("partition")
    ax.set_xlabel("free index")
    ax.set_title(title if title is not None else f"{list(a.shape)} {a.dtype}")
    return ax
