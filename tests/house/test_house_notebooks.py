"""Every notebook in notebooks/ runs top to bottom without an error.

Each notebook is executed with nbclient on the ``python3`` kernel, in the notebook's own
folder. A fresh virtual environment with ``pip install -e .[test]`` has nbclient,
nbformat and ipykernel; if no ``python3`` kernelspec is visible there, the test installs
ipykernel's into this interpreter's prefix first (the kernel then runs this interpreter,
so it imports the birsim under test). A failing cell fails the test with the cell's
traceback (nbclient's CellExecutionError); each notebook must also have shown HTML reprs
and a plot.
"""

import pathlib
import sys

import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel
from nbclient import NotebookClient

NOTEBOOKS = sorted((pathlib.Path(__file__).resolve().parent.parent.parent / "notebooks")
                   .glob("*.ipynb"))
KERNEL = "python3"


def ensure_kernel():
    """Make sure a ``python3`` kernelspec exists; install ipykernel's for this
    interpreter (into sys.prefix, no user files) when it does not."""
    try:
        KernelSpecManager().get_kernel_spec(KERNEL)
        return
    except NoSuchKernel:
        pass
    from ipykernel.kernelspec import install
    install(kernel_name=KERNEL, prefix=sys.prefix)
    KernelSpecManager().get_kernel_spec(KERNEL)


def test_there_are_notebooks():
    assert NOTEBOOKS, "notebooks/ holds no .ipynb file"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path):
    ensure_kernel()
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, kernel_name=KERNEL, timeout=300,
                            resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors, errors
    # every notebook shows rich reprs (Module / Simulator / Trace HTML) and a plot
    kinds = {k for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
             for k in o.get("data", {})}
    assert {"text/html", "image/png"} <= kinds, kinds
