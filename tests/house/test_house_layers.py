"""The house's shape: the import graph of birsim has no loop; every opcode the core runs has
one key row; every example docs/instructions.md prints loads."""

import ast
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
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


# ---- issue 24: the engine accumulator's keys load on the fast path -------------------

_ACC_OPS = {"Activation": 1, "TensorTensor": 2, "TensorScalar": 1, "TensorReduce": 1,
            "Exponential": 1}        # opcode -> its tensor inputs
_ACC_KEYS = {"Activation": {"func": "Exp"}, "TensorTensor": {"op": "add"},
             "TensorScalar": {"op0": "mult", "const0": 2.0}, "TensorReduce": {"op": "add"},
             "Exponential": {}}


def _acc_program(op, extra, nin=None):
    import bir
    import test_load_fastload as F
    ins = [F._ap("a"), F._ap("b")][:_ACC_OPS[op]]
    while nin is not None and len(ins) < nin:         # up to the LoadAccumulate start
        ins.append({"kind": "imm_value", "dtype": "float32", "value": 1.0})
    obj = dict({"name": "x", "opcode": op, "engine": "Activation" if op == "Activation"
                else "DVE", "ins": ins, "outs": [F._ap("c")]}, **_ACC_KEYS[op], **extra)
    return bir.module([{"name": "main", "allocations": [F._tensor("a"), F._tensor("b"),
                                                        F._tensor("c")],
                        "blocks": [{"name": "b0", "instructions": [obj]}]}])


_ACC_TAKEN = [
    {"acc": "ZeroAccumulate"}, {"acc": "Accumulate", "reduce_op": "max"},
    {"reduce_cmd": "reset_reduce", "reduce_op": "maximum"},
    {"accumulator_cmd": "Zero", "reduce_op": "abs_max", "reduce_init": 2},
    {"acc": "Idle"}, {"acc": "Idle", "reduce_op": "bypass"}, {"acc": None},
    {"reduce_op": "min"}, {"reduce_init": -1.5},
    {"acc": "LoadAccumulate", "reduce_init": 0.5}, {"acc": "AddAccumulate"},
    {"acc": None, "reduce_cmd": "ZeroAccumulate", "reduce_op": "multiply"},
]
_ACC_DECLINED = [
    {"acc": "LoadAccumulate"},                          # no start value: an error
    {"acc": "Accumulate", "reduce_op": "bypass"},       # not a fold op: an error
    {"acc": "Sideways"}, {"acc": 2}, {"reduce_op": "no_such"}, {"reduce_init": "1"},
    {"reduce_init": True},
]


@pytest.mark.parametrize("op", sorted(_ACC_OPS))
@pytest.mark.parametrize("extra", _ACC_TAKEN)
def test_the_walker_takes_the_engine_accumulators_keys(op, extra, monkeypatch):
    import test_load_fastload as F
    prog = _acc_program(op, extra)
    assert F.same(prog, monkeypatch)[0][0] == "ok"
    assert F._taken(prog, monkeypatch) == 1


@pytest.mark.parametrize("op", sorted(_ACC_OPS))
@pytest.mark.parametrize("extra", _ACC_DECLINED)
def test_bad_accumulator_keys_decline_to_the_python_path_and_fail_there(op, extra,
                                                                       monkeypatch):
    import test_load_fastload as F
    prog = _acc_program(op, extra)
    assert F.same(prog, monkeypatch)[0][0] == "error"
    assert F._taken(prog, monkeypatch) == 0


@pytest.mark.parametrize("op, start", [("Activation", 4), ("TensorTensor", 2),
                                       ("TensorScalar", 3), ("TensorReduce", 1),
                                       ("Exponential", 2)])
def test_load_accumulate_takes_its_start_from_ins_on_the_fast_path(op, start, monkeypatch):
    import test_load_fastload as F
    prog = _acc_program(op, {"acc": "LoadAccumulate"}, nin=start + 1)
    assert F.same(prog, monkeypatch)[0][0] == "ok"
    assert F._taken(prog, monkeypatch) == 1


def test_an_activation_only_program_with_acc_keys_loads_on_the_fast_path(monkeypatch):
    import bench_load
    import test_load_fastload as F
    for spelling in ("birsim", "compiler"):
        prog = bench_load.make_program(400, spelling, "acc")
        F.same(prog, monkeypatch)
        assert F._taken(prog, monkeypatch) == 400


# ---- every printed example loads ------------------------------------------------------

def test_every_opcode_row_prints_an_example():
    import _examples
    from birsim._load.opcodes import OPS
    printed = dict(_examples.printed_examples())
    assert set(printed) == set(OPS), set(printed) ^ set(OPS)
    assert not [op for op, src in printed.items() if "..." in src]


@pytest.mark.parametrize("op, src", __import__("_examples").printed_examples())
def test_every_printed_example_loads(op, src):
    import _examples
    import birsim
    obj = _examples.instruction(src, "ex")
    assert obj["opcode"] == op
    m = birsim.load(_examples.program([obj]))
    assert any(True for _ in m.tables["insns"])


# ---- every opcode the core runs has a row; a misspelled key is reported on each -------

def _core_opcodes():
    """Every opcode of bs_ops.def the core can be given (all but the abstract family)."""
    from birsim import _birsim
    return sorted(op for op, (_, _, fam) in _birsim.opcodes.items() if fam != "abstract")


def test_every_opcode_the_core_runs_has_a_row_and_only_those():
    from birsim import _birsim
    from birsim._load.opcodes import OPS
    assert set(_core_opcodes()) == set(OPS)
    for op in OPS:
        slots = _birsim.params[op]
        for slot, _, _, _ in OPS[op].params:        # a declared row names a real slot
            if slot is not None:
                assert slot in slots, (op, slot)


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "python"])
@pytest.mark.parametrize("op", _core_opcodes())
def test_a_misspelled_key_on_each_opcodes_example_warns_and_it_still_loads(op, fast,
                                                                         monkeypatch):
    """The nine-opcode hole: a misspelled key of any opcode warns with the suggestion (on
    both load paths) instead of being ignored in silence."""
    import warnings
    import _examples
    import birsim
    import birsim._load.passes as L
    from test_load_verdicts import _misspelt
    key, bad = _misspelt(op)
    src = dict(_examples.printed_examples())[op]
    obj = dict(_examples.instruction(src, "ex"), **{bad: 1})
    monkeypatch.setattr(L, "FAST_PATH", fast)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        birsim.load(_examples.program([obj]))
    msgs = [str(x.message) for x in w if issubclass(x.category, birsim.BirsimWarning)]
    assert any("unknown key '%s'" % bad in m and "did you mean '%s'" % key in m
               for m in msgs), msgs
