"""``birsim.loader``: the public names of the loader (its room is :mod:`birsim._load`;
docs/DESIGN.md, "Loader")."""

from ._load.passes import (ARCH_ALIASES, ENGINE_ALIASES, OPCODE_KEYS, Module, default_catalog,
                           load, program_group)

__all__ = ["load", "program_group", "Module", "ENGINE_ALIASES", "ARCH_ALIASES", "OPCODE_KEYS",
           "default_catalog"]
