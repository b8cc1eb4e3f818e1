"""A fake external kernel_sim for tests/vm/test_vm_custom_ops.py (it does not import birsim).

Test executables are tiny scripts that call ``main(mode, log)``. Every call appends one
JSON line to ``log`` describing what the executable saw (argv, cwd, the directory's files,
config.json, the dtype and shape of each input .npy), then acts by ``mode``:

  double      out[0] := 2 * in[0] (fp32)
  flipsign    out[k] := in[k] with the sign bit flipped, done on the raw bits (the inputs
              must arrive as unsigned-integer raw bits: bf16 -> uint16, fp8 -> uint8)
  f64         out[0] := in[0] + 0.5 written as float64 (birsim casts)
  fail        write a long stderr ending in a marker line, exit 3
  sleep       start a grandchild `sleep 60` (its pid goes to the log), then sleep 60 s
  nothing     write no output
  garbage     write bytes that are not a .npy file
  pickle      write an object array (.npy that needs pickle)
  npz         write a .npz archive where the .npy should be
  wrongshape  out[0] := in[0].T
"""

import json
import os
import subprocess
import sys
import time

import numpy as np


def main(mode, log):
    cfg_path = sys.argv[1]
    with open(cfg_path) as f:
        cfg = json.load(f)
    ins = [np.load(m["path"]) for m in cfg["inputs"]]
    rec = {"argv": sys.argv, "cwd": os.getcwd(), "files": sorted(os.listdir(os.getcwd())),
           "config": cfg, "in_dtypes": [str(a.dtype) for a in ins],
           "in_shapes": [list(a.shape) for a in ins]}
    if mode == "sleep":
        child = subprocess.Popen(["sleep", "60"])
        rec["grandchild"] = child.pid
    with open(log, "a") as f:
        f.write(json.dumps(rec) + "\n")
    outs = [m["path"] for m in cfg["outputs"]]
    if mode == "double":
        np.save(outs[0], (ins[0] * 2).astype(np.float32))
    elif mode == "flipsign":
        for a, p in zip(ins, outs):
            assert a.dtype.kind == "u", a.dtype
            np.save(p, a ^ a.dtype.type(1 << (8 * a.dtype.itemsize - 1)))
    elif mode == "f64":
        np.save(outs[0], ins[0].astype(np.float64) + 0.5)
    elif mode == "fail":
        sys.stderr.write("noise " * 2000 + "\nFAKE-KERNEL-SIM-FAILED: bad things\n")
        return 3
    elif mode == "sleep":
        time.sleep(60)
    elif mode == "nothing":
        pass
    elif mode == "garbage":
        with open(outs[0], "wb") as f:
            f.write(b"this is not a npy file")
    elif mode == "pickle":
        np.save(outs[0], np.array([{"a": 1}], dtype=object), allow_pickle=True)
    elif mode == "npz":
        with open(outs[0], "wb") as f:
            np.savez(f, a=ins[0])
    elif mode == "wrongshape":
        np.save(outs[0], ins[0].T.copy())
    else:
        raise SystemExit(f"unknown mode {mode}")
    return 0
