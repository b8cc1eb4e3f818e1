"""Packaging: the declared Python floor matches the C API the binding uses, the license
file, the version from metadata, the extension stub matches the extension, the public API
is annotated, and the sdist holds what its tests need (they run from the unpacked sdist)."""

import ast
import importlib.metadata
import inspect
import os
import pathlib
import re
import subprocess
import sys
import tarfile

import numpy as np
import pytest

import birsim
from birsim import _birsim

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent

# C-API names by the CPython version that introduced them.
_API_SINCE = {"Py_NewRef": (3, 10), "Py_XNewRef": (3, 10), "PyModule_AddObjectRef": (3, 10),
              "Py_TPFLAGS_IMMUTABLETYPE": (3, 10), "Py_IsNone": (3, 10),
              "PyType_GetModuleByDef": (3, 11), "PyErr_GetRaisedException": (3, 12)}


def _pyproject():
    return (ROOT / "pyproject.toml").read_text()


def test_requires_python_matches_the_c_api_used():
    m = re.search(r'requires-python\s*=\s*">=(\d+)\.(\d+)"', _pyproject())
    assert m, "requires-python must be a '>=X.Y' floor"
    floor = (int(m.group(1)), int(m.group(2)))
    src = "".join(p.read_text() for p in (ROOT / "csrc" / "py").glob("*.[ch]"))
    used = {name: v for name, v in _API_SINCE.items() if re.search(rf"\b{name}\b", src)}
    assert used, "expected the binding to use some version-specific C API"
    assert floor == max(used.values()), (floor, used)
    assert sys.version_info[:2] >= floor


def test_license_and_version():
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert 'license = "Apache-2.0"' in _pyproject()
    assert birsim.__version__ == importlib.metadata.version("birsim")
    assert re.search(r'^version = "%s"' % re.escape(birsim.__version__), _pyproject(), re.M)


def _stub():
    tree = ast.parse((ROOT / "birsim" / "_birsim.pyi").read_text())
    names, classes = set(), {}
    for node in tree.body:
        if isinstance(node, ast.AnnAssign):
            names.add(node.target.id)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets)
        elif isinstance(node, ast.FunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.ClassDef):
            names.add(node.name)
            classes[node.name] = {n.name: n for n in node.body if isinstance(n, ast.FunctionDef)}
    return names, classes


def test_extension_stub_is_current():
    names, classes = _stub()
    runtime = {n for n in dir(_birsim) if not n.startswith("__")}
    assert runtime <= names, f"missing from _birsim.pyi: {sorted(runtime - names)}"
    assert (names - {"_HostKernel"}) <= runtime, sorted(names - runtime)
    for cls in ("Sim", "Program"):
        methods = {n for n in dir(getattr(_birsim, cls)) if not n.startswith("_")}
        stubbed = {n for n in classes[cls] if not n.startswith("_")}
        assert methods == stubbed, (cls, sorted(methods ^ stubbed))
    # the keyword arguments of Sim(...) as the C constructor takes them
    init = classes["Sim"]["__new__"]
    stub_kw = [a.arg for a in init.args.args[1:]]
    src = (ROOT / "csrc" / "py" / "objects.c").read_text()
    kwlist = re.search(r'Sim_new\([^)]*\)\s*\{\s*static char \*kwlist\[\] = \{([^}]*)\}', src)
    c_kw = re.findall(r'"(\w+)"', kwlist.group(1))
    assert stub_kw == c_kw, (stub_kw, c_kw)


def _public_functions():
    import birsim.build
    import birsim.plot
    import birsim.testing
    import birsim.trace
    for mod in (birsim.build, birsim.testing, birsim.trace, birsim.plot):
        for name in mod.__all__:
            obj = getattr(mod, name)
            if inspect.isfunction(obj):
                yield f"{mod.__name__}.{name}", obj
    for name in ("run", "read", "register", "breakpoint", "clear_breakpoints", "start",
                 "step", "resume", "registers", "semaphores", "events", "queue_heads"):
        yield f"Simulator.{name}", getattr(birsim.Simulator, name)
    for name in ("export", "busy", "events", "plot"):
        yield f"Trace.{name}", getattr(birsim.trace.Trace, name)
    yield "birsim.run", birsim.run


def test_public_api_is_annotated():
    missing = []
    for qual, fn in _public_functions():
        sig = inspect.signature(fn)
        if sig.return_annotation is inspect.Signature.empty:
            missing.append(f"{qual} -> ?")
        for p in sig.parameters.values():
            if p.name not in ("self", "ax") and p.annotation is inspect.Parameter.empty:
                missing.append(f"{qual}({p.name})")
    assert not missing, missing


@pytest.fixture(scope="module")
def sdist(tmp_path_factory):
    out = tmp_path_factory.mktemp("sdist")
    r = subprocess.run([sys.executable, "-c", "import sys; from setuptools import build_meta;"
                        " print(build_meta.build_sdist(sys.argv[1]))", str(out)],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    path = out / r.stdout.strip().splitlines()[-1]
    with tarfile.open(path) as tar:
        tar.extractall(out, filter="data")
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    return out / path.name[:-len(".tar.gz")], names


def test_sdist_holds_sources_tests_helpers_and_data(sdist):
    _, names = sdist
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
    if tracked.returncode == 0 and tracked.stdout:
        want = {n for n in tracked.stdout.split() if not n.startswith(".git")}
        assert want <= names, sorted(want - names)[:20]
    for need in ("LICENSE", "tests/bir.py", "csrc/birsim.h", "csrc/bs_ops.def",
                 "examples/sync_pipeline.json", "notebooks/quickstart.ipynb",
                 "birsim/_birsim.pyi", "birsim/py.typed"):
        assert need in names, need
    assert not any(n.endswith((".so", ".o", ".pyc")) for n in names)


def test_tests_run_from_the_unpacked_sdist(sdist):
    tree, _ = sdist
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "tests/api/test_api_build.py", "tests/timing/test_timing_trace.py"],
                       cwd=tree, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:]
    assert re.search(r"\d+ passed", r.stdout)


def _tree(dst, with_extension):
    """A copy of the birsim package at ``dst/birsim``: the sources only (a checkout or an
    unpacked sdist) or with the built extension (an installed copy)."""
    import shutil
    src = pathlib.Path(birsim.__file__).parent
    shutil.copytree(src, dst / "birsim", ignore=shutil.ignore_patterns(
        "__pycache__", *(() if with_extension else ("_birsim*.so", "_birsim*.pyd"))))
    return dst


def test_a_source_tree_first_on_the_path_becomes_the_installed_package(tmp_path):
    """``python -m pytest`` / ``python -m birsim`` in a checkout after a plain ``pip
    install .`` put the unbuilt sources first on sys.path: the package redirects itself to
    the installed copy (extension, modules and ``__main__`` alike) instead of failing."""
    src = _tree(tmp_path / "src", False)
    site = _tree(tmp_path / "site", True)
    # -S: no site module, so no editable-install finder; NumPy's directory by hand
    deps = os.path.dirname(os.path.dirname(np.__file__))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), deps]))
    code = ("import birsim, birsim.loader, birsim.workdir\n"
            "print(birsim.__file__); print(birsim._birsim.__file__)\n"
            "print(birsim.loader.__file__); print(birsim.workdir.__file__)\n"
            "print(birsim.load('examples/tiled_matmul.json'.replace('examples', %r)).entry)"
            % str(ROOT / "examples"))
    r = subprocess.run([sys.executable, "-S", "-c", code], cwd=src, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.splitlines()
    assert all(line.startswith(str(site / "birsim")) for line in lines[:4]), lines
    r = subprocess.run([sys.executable, "-S", "-m", "birsim", "--version"], cwd=src, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.startswith("birsim "), r.stderr[-2000:]
    # nothing installed anywhere: the error says what to do
    r = subprocess.run([sys.executable, "-S", "-c", "import birsim"], cwd=src,
                       env=dict(env, PYTHONPATH=deps), capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "no installed birsim was found" in r.stderr, r.stderr[-2000:]
