"""birsim.dumps (the compiler-spelling builders) is the one helper behind the suite's
hand-made dumps and examples/build_workdir.py: the checked-in example work directory is
exactly what the example script writes, byte for byte."""

import importlib.util
import json
import pathlib

import numpy as np

import birsim
from birsim import dumps as D

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent


def _example():
    spec = importlib.util.spec_from_file_location("build_workdir",
                                                  ROOT / "examples" / "build_workdir.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_example_work_directory_is_what_the_builder_writes():
    ex = _example()
    for core in range(2):
        path = pathlib.Path(ex.OUT) / ("nc%02d" % core) / "sg00" / ex.DUMP
        assert path.read_text() == json.dumps(ex.core_dump(core), indent=1) + "\n", path
        path = pathlib.Path(ex.KV_OUT) / ("nc%02d" % core) / "sg00" / "bir.json"
        assert path.read_text() == json.dumps(ex.kv_dump(core), indent=1) + "\n", path


def test_builders_write_the_compiler_spelling_and_load():
    prog = D.module(
        [D.dram("x", "ExternalInput", [16, 8]), D.dram("y", "ExternalOutput", [16, 8]),
         D.tile("t", 16, 32), D.register("r")],
        [("entry", [D.insn("ld", "DMACopy", "SP", ins=[D.full("x", 1, 128)],
                           outs=[D.full("t", 16, 8)]),
                    D.insn("mv", "RegisterMove", "Pool", ins=[D.imm(3)],
                           outs=[D.reg_access("r")]),
                    D.insn("st", "DMACopy", "SP", ins=[D.full("t", 16, 8)],
                           outs=[D.full("y", 1, 128)])])])
    a = prog["functions"][0]["allocations"]
    assert "Skind" not in a[0] and a[0]["memorylocations"][0]["dims"] == [1, 512]
    assert a[0]["debug"] == {"tensor_name": "x", "shape": [16, 8]}
    assert prog["queues"] == []
    x = np.arange(128, dtype=np.float32).reshape(16, 8)
    out = birsim.Simulator(birsim.load(prog)).run({"x": x})
    np.testing.assert_array_equal(out["y"], x)
