"""The instruction examples of docs/instructions.md as programs: each is evaluated (``B`` =
birsim.build, the operand names of ``opcodes.EXAMPLE_OPERANDS``) and wrapped in a minimal
program that defines what it names (``opcodes.EXAMPLE_CONTEXT``). tests/house/test_house_layers.py loads
every printed one; bench/bench_load.py's ``all`` mix repeats them."""

import os
import re

from birsim import build as B
from birsim._load.opcodes import EXAMPLE_OPERANDS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_EXAMPLE = re.compile(r"^### (\w+)\n(?:(?!^### ).*\n)*?- example:\n\n  ```python\n  (.*)\n  ```",
                      re.M)


def printed_examples(path=None):
    """[(opcode, source of its example)] of docs/instructions.md, in its order."""
    with open(path or os.path.join(ROOT, "docs", "instructions.md")) as f:
        return _EXAMPLE.findall(f.read())


def _tensors():
    return {n: B.tensor(n, "Internal", d, s, m) for n, (m, d, s) in EXAMPLE_OPERANDS.items()}


def instruction(src, name):
    """The instruction dict an example's source builds, named ``name``."""
    env = {"B": B}
    env.update({n: B.whole(t) for n, t in _tensors().items()})
    obj = eval(src, env)                # noqa: S307 -- the docs' own example text
    obj["name"] = name
    return obj


def program(objs):
    """A program running the instructions ``objs`` in function ``main``'s block ``body``:
    the example tensors, a register ``r``, a block ``done``, a function ``callee``, an NKI
    function ``nki_kern``, a DMA
    queue ``q0`` whose block ``blk0`` the DMATrigger examples start (a DMABlock example is
    that block; a Break runs in a loop)."""
    allocs = list(_tensors().values())
    allocs.append(B.register("r", "int32"))
    body, blocks, queue = [], [], False
    for obj in objs:
        if obj["opcode"] == "DMABlock":
            blocks.append(dict(obj, name="blk%d" % len(blocks), dma_trigger="ex_trig"))
            continue
        queue |= obj["opcode"] in ("DMATrigger", "SwitchQueueInstance", "ResetQueueInstance")
        if obj["opcode"] == "Break":
            obj = B.loop("i", 1, [obj], name=obj["name"] + "_loop")
        body.append(obj)
    if blocks:
        body.append(B.dma_trigger("q0", [b["name"] for b in blocks], name="ex_trig"))
    elif queue:
        trig = [o for o in body if o["opcode"] == "DMATrigger"]
        blocks.append(B.dma_block("blk0", B.dma_descriptor(B.whole(_tensors()["src"]),
                                                           B.whole(_tensors()["dst"])),
                                  trigger=trig[0]["name"] if trig else None))
        if not trig:
            body.append(B.dma_trigger("q0", ["blk0"], name="ex_trig"))
            blocks[0]["dma_trigger"] = "ex_trig"
    funcs = [B.function("main", allocs, [B.block("body", *body), B.block("done")]),
             B.function("callee", [], [B.block("b0")])]
    return B.module(funcs, dma_queues=[B.dma_queue("q0", blocks)] if blocks else None,
                    nki_functions=[B.function("nki_kern", [], [B.block("b0")])])
