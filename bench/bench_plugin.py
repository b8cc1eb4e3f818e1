"""What installing birsim costs every pytest run: the plugin's start-up, and ``import birsim``.

    python bench/bench_plugin.py                # 15 paired rounds
    python bench/bench_plugin.py --rounds 30

pytest imports every installed ``pytest11`` plugin at start-up (in every xdist worker
too), so the plugin must not import birsim's extension, NumPy or ``ml_dtypes`` until a
fixture is used (docs/DESIGN.md "The pytest plugin"). ``paired`` rounds (bench/_common.py)
time a pytest session of a one-test project (``python -m pytest -q``, a fresh process
each time) with the plugin and with ``-p no:birsim`` alternately, and report the median
session times, the median of the per-round ratios and their spread. Target (issue 26):
ratio <= 1.1.

Then ``import birsim`` in a fresh process, the same way: as installed (``ml_dtypes``
imported on the first bf16/fp8 dtype) against ``import birsim`` preceded by ``import
ml_dtypes`` (what it cost when birsim imported ml_dtypes up front), with ``python -X
importtime``'s cumulative figures for the largest imports of one run.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

from _common import fmt_time, paired


def _session(project, *extra):
    def run():
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                            *extra, project], capture_output=True, text=True)
        t = time.perf_counter() - t0
        if r.returncode != 0:
            raise SystemExit("pytest failed:\n" + r.stdout[-2000:] + r.stderr[-2000:])
        return t
    return run


def _python(code):
    def run():
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        return time.perf_counter() - t0
    return run


def _importtime(code, top=6):
    r = subprocess.run([sys.executable, "-X", "importtime", "-c", code],
                       capture_output=True, text=True, check=True)
    rows = []
    for line in r.stderr.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            rows.append((int(parts[1]), parts[2].rstrip()))
    return sorted(rows, reverse=True)[:top]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "test_one.py"), "w") as f:
            f.write("def test_one():\n    assert True\n")
        p = paired(_session(d), _session(d, "-p", "no:birsim"), args.rounds)
    print(f"pytest session, one-test project ({args.rounds} paired rounds)")
    print(f"  with the birsim plugin  {fmt_time(p.t_sim):>10}")
    print(f"  -p no:birsim            {fmt_time(p.t_ref):>10}")
    print(f"  ratio {p.ratio:.2f} (spread {p.spread()}; target <= 1.1)")

    q = paired(_python("import birsim"), _python("import ml_dtypes, birsim"), args.rounds)
    base = paired(_python("pass"), _python("pass"), 3).t_sim
    print(f"\nimport birsim in a fresh process ({args.rounds} paired rounds; the "
          f"interpreter alone: {fmt_time(base)})")
    print(f"  import birsim (ml_dtypes lazy)   {fmt_time(q.t_sim):>10}")
    print(f"  import ml_dtypes, birsim         {fmt_time(q.t_ref):>10}")
    print(f"  ratio {q.ratio:.2f} (spread {q.spread()})")
    print("\npython -X importtime -c 'import birsim': largest cumulative imports")
    for us, name in _importtime("import birsim"):
        print(f"  {fmt_time(us * 1e-6):>10}  {name.strip()}")
    print("python -X importtime -c 'import ml_dtypes': largest cumulative imports")
    for us, name in _importtime("import ml_dtypes", top=3):
        print(f"  {fmt_time(us * 1e-6):>10}  {name.strip()}")


if __name__ == "__main__":
    main()
