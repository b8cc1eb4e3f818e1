"""python -m birsim: listing and run, as a real subprocess."""

import pathlib
import subprocess
import sys

import numpy as np

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent.parent / "examples"


def cli(*args):
    return subprocess.run([sys.executable, "-m", "birsim", *map(str, args)],
                          capture_output=True, text=True, timeout=120)


def test_listing_prints_the_program():
    r = cli("listing", EXAMPLES / "tiled_matmul.json")
    assert r.returncode == 0, r.stderr
    assert "function main" in r.stdout and "Matmult" in r.stdout and "Loop" in r.stdout


def test_run_with_input_files_writes_outputs(tmp_path):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((512, 128), dtype=np.float32)
    w = rng.standard_normal((512, 512), dtype=np.float32)
    b = rng.standard_normal((128, 1), dtype=np.float32)
    np.savez(tmp_path / "in.npz", x=x, w=w)
    np.save(tmp_path / "bias.npy", b)
    r = cli("run", EXAMPLES / "tiled_matmul.json", "--inputs", tmp_path / "in.npz",
            "--input", f"bias={tmp_path / 'bias.npy'}", "--out", tmp_path / "out.npz")
    assert r.returncode == 0, r.stderr
    assert "out: shape [128, 512] float32" in r.stdout
    with np.load(tmp_path / "out.npz") as z:
        np.testing.assert_allclose(z["out"], np.maximum(x.T @ w + b, 0), rtol=1e-5, atol=1e-4)


def test_errors_exit_1_with_the_message():
    r = cli("run", EXAMPLES / "tiled_matmul.json")           # no inputs given
    assert r.returncode == 1 and "ProgramError" in r.stderr and "missing input" in r.stderr


def test_installed_birsim_command_runs_from_the_source_tree(tmp_path):
    """The `birsim` console script (pyproject [project.scripts]) works from the repo root,
    where `python -m birsim` after a non-editable install would import the source tree."""
    import os
    script = pathlib.Path(sys.executable).with_name("birsim")
    assert script.exists(), "pip install did not put the birsim command beside python"
    r = subprocess.run([str(script), "listing", EXAMPLES / "tiled_matmul.json"],
                       capture_output=True, text=True, timeout=120, cwd=EXAMPLES.parent,
                       env=dict(os.environ))
    assert r.returncode == 0, r.stderr
    assert "Matmult" in r.stdout
