"""The package's shape: no import circle among its modules, the Linux backend apart
from the simulator's engine (both import the policy interface below them), no source
file over 1,200 lines, and one version."""
import ast
from importlib.metadata import version
from pathlib import Path

import tierlab
from tierlab.provenance import __version__

PKG = Path(tierlab.__file__).resolve().parent


def modules() -> dict:
    out = {}
    for p in PKG.rglob("*.py"):
        parts = list(p.relative_to(PKG.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def import_graph() -> dict:
    """module -> the package's modules it imports, anywhere in its source (a lazy import
    inside a function is a dependency too); `from pkg import name` counts the submodule
    where `name` is one, else the package."""
    mods = modules()
    graph = {}
    for m, p in mods.items():
        base = m.split(".") if p.name == "__init__.py" else m.split(".")[:-1]
        deps = set()
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ImportFrom):
                target = ".".join(base[:len(base) - node.level + 1] +
                                  ([node.module] if node.module else [])) \
                    if node.level else node.module
                subs = [f"{target}.{a.name}" for a in node.names
                        if f"{target}.{a.name}" in mods]
                found = subs + ([target] if len(subs) < len(node.names) else [])
            elif isinstance(node, ast.Import):
                found = [a.name for a in node.names]
            else:
                continue
            deps |= {d for d in found if d in mods and d != m}
        graph[m] = deps
    return graph


def circles(graph: dict) -> list:
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
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


def test_no_import_circle():
    assert circles(import_graph()) == []


def test_the_circle_finder_finds_one():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_linux_imports_nothing_of_the_engine():
    graph = import_graph()
    bad = {m: sorted(d for d in deps if d.startswith("tierlab.engine"))
           for m, deps in graph.items() if m.startswith("tierlab.linux")}
    assert {m: d for m, d in bad.items() if d} == {}
    assert "tierlab.interface" in graph["tierlab.linux.backend"]
    assert "tierlab.interface" in graph["tierlab.engine.engine"]


def test_no_source_file_over_1200_lines():
    long = {str(p.relative_to(PKG)): n for p in PKG.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > 1200}
    assert long == {}


def test_one_version():
    assert tierlab.__version__ == __version__ == version("tierlab")
