"""The house plan, enforced: imports point one way, and the fast paths stay light."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "ncdoc"


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
    return out


def _modules(sub: str) -> list[Path]:
    base = PKG / sub
    if base.is_file():
        return [base]
    return sorted(base.rglob("*.py")) if base.is_dir() else []


# Rules are pure functions over facts: they never touch the machine nor the tuner.
PURE = ["engine/rules.py", "engine/conditions.py", "engine/job_facts.py", "findings.py", "snapshot.py", "startup", "topology.py",
        "checks", "nccl/parse.py", "nccl/values.py", "nccl/devices.py", "nccl/bandwidth.py"]
FORBIDDEN_IN_PURE = ("ncdoc.tuner", "ncdoc.probes", "ncdoc.cli", "subprocess", "ray", "optuna",
                     "pynvml", "pyverbs", "socket")


@pytest.mark.parametrize("path", [p for sub in PURE for p in _modules(sub)], ids=lambda p: p.name)
def test_pure_layers_do_not_reach_out(path):
    bad = {m for m in _imports(path) if m.split(".")[0] in {f.split(".")[0] for f in FORBIDDEN_IN_PURE}
           and any(m == f or m.startswith(f + ".") for f in FORBIDDEN_IN_PURE)}
    assert not bad, f"{path.relative_to(PKG.parent)} imports {sorted(bad)}"


# The report reads a finished study through Optuna's API (read only), in one adapter module.
OPTUNA_READERS = ("report/tune_input.py",)


def test_only_the_tuner_imports_ray_and_optuna():
    # ncdoc.cluster runs things on every node through Ray too (ray_nodes.py): Ray, never Optuna
    for path in PKG.rglob("*.py"):
        rel = path.relative_to(PKG)
        heavy = {m for m in _imports(path) if m.split(".")[0] in ("ray", "optuna")}
        if heavy and rel.as_posix() in OPTUNA_READERS:
            heavy = {m for m in heavy if m.split(".")[0] == "ray"}
        if heavy:
            allowed = rel.parts[0] == "tuner" or (rel.parts[0] == "cluster" and
                                                   all(m.split(".")[0] == "ray" for m in heavy))
            assert allowed, f"{rel} imports {sorted(heavy)}"


def test_the_check_path_never_reaches_the_cluster_launchers():
    """Nothing `ncdoc check` imports may import Ray; the cross-node rules read only pure modules."""
    graph = import_graph()
    seen, todo = set(), ["ncdoc.cli.commands.check", "ncdoc.checks.cluster"]
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        todo.extend(graph.get(m, ()))
    assert "ncdoc.cluster.ray_nodes" not in seen and not {m for m in seen if m.startswith("ncdoc.tuner")}


@pytest.mark.parametrize("argv", [
    ["check", "--example", "dgx-h100"],
    ["snapshot", "--example", "dgx-h100"],
    ["topo", "--example", "dgx-h100"],
])
def test_fast_paths_never_import_ray_or_optuna(argv):
    # nor the report's Jinja2 and matplotlib, which load only when a page, an SVG or a chart is drawn
    code = ("import sys; from ncdoc.cli.main import main; rc = main(%r); "
            "heavy = [m for m in ('ray', 'optuna', 'jinja2', 'matplotlib') if m in sys.modules]; "
            "print('HEAVY', heavy); sys.exit(0 if not heavy and rc in (0, 1) else 3)" % (argv,))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout[-500:] + p.stderr[-1500:]


def test_commands_do_not_import_each_other():
    # what two commands share is an option helper (cli/rule_options.py) or a use case outside cli/
    for path in sorted((PKG / "cli" / "commands").glob("*.py")):
        others = {m for m in _imports(path) if m.startswith("ncdoc.cli.commands.")}
        assert not others, f"{path.name} imports {sorted(others)}"


def _module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def import_graph() -> dict[str, set[str]]:
    """ncdoc module -> the ncdoc modules it imports, deferred (in-function) imports included.
    `from ncdoc.x import y` counts as importing ncdoc.x.y when y is a module, else ncdoc.x."""
    mods = {_module_name(p): p for p in PKG.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        out: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                out.update(a.name for a in node.names if a.name in mods)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and node.module in mods:
                subs = {f"{node.module}.{a.name}" for a in node.names} & set(mods)
                out.update(subs)
                if len(subs) < len(node.names):
                    out.add(node.module)
        out.discard(name)
        graph[name] = out
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_cycle_finder_finds_a_cycle():
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


# Cycles being cut (the house issue); each entry goes when its facade's data types move into a
# model module that the facade and its helpers both import. No new entry may be added.
BEING_CUT: list[list[str]] = []


def test_no_import_cycles():
    cycles = [c for c in import_cycles(import_graph()) if c not in BEING_CUT]
    assert not cycles, "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)
