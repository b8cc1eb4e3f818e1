"""The loader's room: BIR-JSON in, the C core's tables out (docs/DESIGN.md, "Loader").

- :mod:`.spell`    the contract's names and aliases (a leaf)
- :mod:`.schema`   value readers (``as_int``, ``get``, ``Ctx``: JSON paths in errors)
- :mod:`.opcodes`  ONE row per opcode: its keys, kinds, defaults, operand counts,
  ignored and unmodelled keys, printed example; every reader below derives from it
- :mod:`.keys`     key checks (unknown / near-miss / unmodelled keys) from the rows
- :mod:`.exprs`, :mod:`.operands`  expressions and operands
- :mod:`.insns`    pass 2: each instruction's slots (the Python reader)
- :mod:`.fastload` the C walker's configuration (the C reader), from the same rows
- :mod:`.tables`   the records and their NumPy arrays
- :mod:`.passes`   ``load``: pass 1 (structure) and the drivers
- :mod:`.module`   :class:`Module`, the loaded program
- :mod:`.dumpdir`  where a program is in a compiler work directory

Imports only go down this list (tests/house/test_house_layers.py checks birsim has no import loop).
"""
