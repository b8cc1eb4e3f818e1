"""``birsim.module``: a loaded program (:class:`Module`, defined in :mod:`birsim._load.module`)."""

from ._load.module import IOTensor, Module, Tensor

__all__ = ["Module", "Tensor", "IOTensor"]
