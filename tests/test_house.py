"""The house's shape: the import graph of birsim has no loop; every opcode the core runs has
one key row; every example docs/instructions.md prints loads."""

import ast
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PKG = os.path.join(ROOT, "birsim")


def _modules():
    """{dotted name: path} of birsim/*.py and birsim/_load/*.py."""
    mods = {}
    for sub in ("", "_load"):
        d = os.path.join(PKG, sub)
        for f in sorted(os.listdir(d)):
            if f.endswith(".py"):
                name = "birsim" + ("." + sub if sub else "")
                if f != "__init__.py":
                    name += "." + f[:-3]
                mods[name] = os.path.join(d, f)
    return mods


def _package(name, path):
    return name if path.endswith("__init__.py") else name.rsplit(".", 1)[0]


def import_graph():
    """{module: {birsim modules it imports}}: every import statement at any depth
    (module level, in functions, under ``if TYPE_CHECKING``), relative or absolute; ``from
    X import y`` counts X.y when that is a module, else X. Edges to the package itself
    (``from . import _birsim``: the extension is no .py) are left out: every submodule
    would otherwise loop through ``birsim/__init__.py``."""
    mods = _modules()
    graph = {}
    for name, path in mods.items():
        with open(path) as f:
            tree = ast.parse(f.read(), path)
        pkg = _package(name, path)
        deps = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = pkg.rsplit(".", node.level - 1)[0] if node.level > 1 else pkg
                    base = base + ("." + node.module if node.module else "")
                else:
                    base = node.module or ""
                targets = [base + "." + a.name if base + "." + a.name in mods else base
                           for a in node.names]
            else:
                continue
            for t in targets:
                while t and t not in mods and "." in t:
                    t = t.rsplit(".", 1)[0]
                if t in mods and t != name and t != "birsim":
                    deps.add(t)
        graph[name] = deps
    return graph


def _cycle(graph):
    """One import loop as a list of modules, or None."""
    state, stack = {}, []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(graph[n]):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state:
            found = visit(n)
            if found:
                return found
    return None


def test_import_graph_has_no_loop():
    graph = import_graph()
    assert "birsim._load.passes" in graph and graph["birsim._load.passes"]
    loop = _cycle(graph)
    assert loop is None, "import loop: " + " -> ".join(loop)


def test_the_loop_finder_finds_a_loop():
    """The checker itself: a graph with a loop is reported (so the test above can fail)."""
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}
    assert _cycle(g) == ["a", "b", "c", "a"]
    graph = import_graph()
    graph["birsim._load.spell"] = graph["birsim._load.spell"] | {"birsim._load.passes"}
    assert _cycle(graph) is not None
