"""docs/: the generated parts are current, and every opcode, field and key the code knows
has an entry (docs/gen_docs.py reads the same tables the code uses)."""

import os
import re
import sys

import pytest

import birsim
from birsim import _birsim

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOCS = os.path.join(ROOT, "docs")
sys.path.insert(0, DOCS)
import gen_docs  # noqa: E402


def _read(name):
    with open(os.path.join(DOCS, name)) as f:
        return f.read()


def _sections(text):
    parts = re.split(r"^### (\w+)$", text, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


def test_generated_reference_is_current():
    out = gen_docs.outputs()
    for path in ("instructions.md", "program-format.md"):
        assert out[os.path.join(DOCS, path)] == _read(path), \
            f"docs/{path} is stale: run python docs/gen_docs.py"


def test_every_opcode_has_a_section_with_its_fields_and_an_example():
    sections = _sections(_read("instructions.md"))
    assert set(sections) == set(_birsim.opcodes)
    for op, params in _birsim.params.items():
        for field in params:
            assert f"`{field}`" in sections[op], (op, field)
    for op, keys in gen_docs.handler_keys().items():
        for group, _ in keys:
            if group[0] in ("name", "ins", "outs", "engine", "opcode", "sync_info"):
                continue
            for k in group:
                assert f"`{k}`" in sections[op], (op, k)
    for op in _birsim.opcodes:
        cls, fam = _birsim.opcodes[op][1], _birsim.opcodes[op][2]
        if fam != "abstract":
            assert f'B.insn("{op}"' in sections[op], op
    # the status column agrees with what the simulator does
    assert "status: rejected" in sections["Generic"]
    assert "status: runs" in sections["TensorTensor"]
    assert "status: stub" in sections["GenericRelu"]


def test_every_key_the_loader_reads_is_described():
    hand = _read("program-format.md").split(gen_docs.MARK)[0] + _read("instructions.md")
    keys = gen_docs.loader_keys()
    assert {"functions", "queues", "memorylocations", "tensor_shape", "offset",
            "memsetref", "regref"} <= set(keys)
    missing = [k for k in keys if f"`{k}`" not in hand and f"{k}`" not in hand
               and not re.search(rf"\b{re.escape(k)}\b", hand)]
    assert not missing, missing


def test_examples_in_the_reference_build():
    """The example of each opcode is valid builder code (it builds the instruction)."""
    from birsim import build as B
    names = {"src": B.ap("t", [[1, 1]]), "dst": B.ap("t", [[1, 1]]), "a": B.ap("t", [[1, 1]]),
             "b": B.ap("t", [[1, 1]]), "pred": B.ap("t", [[1, 1]]), "B": B}
    from birsim._load.opcodes import EXAMPLE_OPERANDS
    names.update({k: B.ap("t", [[1, 1]]) for k in EXAMPLE_OPERANDS})
    for op, text in _sections(_read("instructions.md")).items():
        m = re.search(r"```python\n\s*(B\.insn\(.*\))\n", text)
        if m:
            d = eval(m.group(1).replace("B.block(...)", 'B.block("b")'), {}, names)
            assert d["opcode"] == op


def test_cli_and_api_pages_cover_the_commands_and_the_api():
    cli = _read("cli.md")
    for cmd in ("listing", "run", "check"):
        assert f"## birsim {cmd}" in cli
    assert "--random-inputs" in cli
    api = _read("python-api.md")
    for name in ("birsim.build", "breakpoint", "step()", "resume()", "trace.export",
                 "assert_sim_close", "pytest-xdist", "remote workers", "_repr_html_",
                 "progress"):
        assert name in api, name
    from birsim import build, dumps
    for fn in build.__all__:
        assert f"B.{fn}" in api, fn
    for fn in dumps.__all__:
        assert fn == "ITEM" or f"D.{fn}" in api, fn


def test_the_readmes_python_examples_run_as_written(tmp_path):
    """Every ```python block of the README runs as written, from a directory holding the
    examples it names (so its files land in a temporary directory)."""
    import re
    import shutil
    import subprocess
    import sys
    readme = open(os.path.join(ROOT, "README.md")).read()
    blocks = re.findall(r"^```python\n(.*?)^```$", readme, re.S | re.M)
    assert blocks
    shutil.copytree(os.path.join(ROOT, "examples"), tmp_path / "examples")
    for k, code in enumerate(blocks):
        (tmp_path / ("readme_%d.py" % k)).write_text(code)
        r = subprocess.run([sys.executable, "readme_%d.py" % k], cwd=tmp_path, text=True,
                           capture_output=True, timeout=300)
        assert r.returncode == 0, "README python block %d:\n%s\n%s" % (k, code, r.stderr)
