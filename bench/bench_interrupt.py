"""Ctrl-C during the load of a large program: how long until KeyboardInterrupt reaches the
caller.

    python bench/bench_interrupt.py                    # 1,000,000 instructions (~240 MB)
    python bench/bench_interrupt.py --insns 300000 --delays 0.2,0.5,1

A program of ``--insns`` TensorCopy instructions is written to a temporary file; for each
delay a fresh process starts ``birsim.load`` of it, receives SIGINT ``delay`` seconds in,
and reports when its ``except KeyboardInterrupt`` ran. Two loaders alternate per delay:
birsim's (the interrupted load's objects freed by a thread, ``birsim/_free.py``) and the
same loader freeing them where the exception passes (what it did before; the peer). The
table gives each latency and, per delay, their ratio; the summary the medians and the
spread.
"""

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

CHILD = r'''
import signal, sys, time, traceback
# Ctrl-C is KeyboardInterrupt even when this was started with SIGINT ignored (a child of
# a background job inherits that, and Python then leaves it ignored)
signal.signal(signal.SIGINT, signal.default_int_handler)
import birsim
from birsim._load import passes as loader
if sys.argv[2] == "sync":                  # the peer: free where the exception passes
    loader._drop_frames = lambda e: traceback.clear_frames(e.__traceback__)
print("loading", flush=True)
try:
    birsim.load(sys.argv[1])
    print("loaded", time.monotonic(), flush=True)
except KeyboardInterrupt:
    print("interrupted", time.monotonic(), flush=True)
'''


def write_program(path, n):
    one = {"name": "c0", "opcode": "TensorCopy", "engine": "DVE",
           "ins": [{"kind": "physical_ap", "memref": "a", "dtype": "float32",
                    "ap": [[8, 4], [1, 8]]}],
           "outs": [{"kind": "physical_ap", "memref": "b", "dtype": "float32",
                     "ap": [[8, 4], [1, 8]]}]}
    head = {"version": 2, "arch": "gen3", "functions": [{
        "name": "main", "allocations": [
            {"Skind": "memory_location_set", "name": t, "kind": "Internal",
             "dtype": "float32", "tensor_shape": [4, 8],
             "memorylocations": [{"name": t, "type": "SB"}]} for t in "ab"],
        "blocks": [{"name": "b0", "instructions": "@"}]}]}
    pre, post = json.dumps(head).split('"@"')
    text = json.dumps(one)
    with open(path, "w") as f:
        f.write(pre + "[")
        f.write(",".join(text.replace('"c0"', '"c%d"' % i) for i in range(n)))
        f.write("]" + post)


def latency(path, mode, delay):
    p = subprocess.Popen([sys.executable, "-c", CHILD, path, mode], stdout=subprocess.PIPE,
                         text=True)
    try:
        assert p.stdout.readline().strip() == "loading"
        time.sleep(delay)
        sent = time.monotonic()
        p.send_signal(signal.SIGINT)
        what, when = p.stdout.readline().split()
        return (float(when) - sent) if what == "interrupted" else None
    finally:
        p.kill()
        p.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--insns", type=int, default=1_000_000)
    ap.add_argument("--delays", default="0.5,1,1.5,2,2.5,3,3.5,4")
    args = ap.parse_args()
    delays = [float(d) for d in args.delays.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "big.json")
        write_program(path, args.insns)
        print("program: %d instructions, %.0f MB" % (args.insns, os.path.getsize(path) / 1e6))
        print("%8s %14s %14s %8s" % ("delay s", "birsim ms", "sync free ms", "ratio"))
        ours, peer, ratios = [], [], []
        for d in delays:
            a, b = latency(path, "defer", d), latency(path, "sync", d)
            if a is None or b is None:
                print("%8.2f  (the load finished first)" % d)
                continue
            ours.append(a)
            peer.append(b)
            ratios.append(a / b)
            print("%8.2f %14.1f %14.1f %8.3f" % (d, a * 1e3, b * 1e3, a / b))
        if ratios:
            print("median latency: birsim %.1f ms (max %.1f), freeing in place %.1f ms "
                  "(max %.1f); ratio %.3f (%.3f-%.3f)"
                  % (statistics.median(ours) * 1e3, max(ours) * 1e3,
                     statistics.median(peer) * 1e3, max(peer) * 1e3,
                     statistics.median(ratios), min(ratios), max(ratios)))


if __name__ == "__main__":
    main()
