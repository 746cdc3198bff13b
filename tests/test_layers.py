"""The package's modules import one another downwards only: no import cycles.

Every ``import`` counts, at module level or inside a function: an import put inside a
function to break a cycle is still a cycle of the design. The graph is read from the
source with ``ast``; ``from .pkg import name`` counts as importing ``pkg.name`` where
that is a module, else ``pkg``. The root package ``jittape`` (its ``__init__`` only
re-exports) is left out.
"""

import ast
import pathlib

import jittape

ROOT = pathlib.Path(jittape.__file__).parent


def _modules():
    found = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _resolve(module, is_package, level, name):
    base = module.split(".") if is_package else module.split(".")[:-1]
    if level > 1:
        base = base[:len(base) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def import_graph():
    modules = _modules()
    graph = {}
    for module, path in modules.items():
        is_package = path.name == "__init__.py"
        edges = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = (_resolve(module, is_package, node.level, node.module)
                        if node.level else node.module or "")
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                           for alias in node.names]
            else:
                continue
            edges.update(t for t in targets if t in modules and t not in ("jittape", module))
        graph[module] = edges
    return graph


def cycles(graph):
    """The strongly connected components with more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_graph_is_read():
    graph = import_graph()
    assert "jittape.recording" in graph["jittape.ops.core"]
    assert "jittape.ops.core" in graph["jittape.tape"]


def test_no_import_cycles():
    assert cycles(import_graph()) == []


def test_recording_is_the_bottom_floor():
    graph = import_graph()
    assert graph["jittape.recording"] == set()
    assert "jittape.vjp" in graph["jittape.tape"] and "jittape.vjp" in graph["jittape.autodiff"]
    assert not graph["jittape.vjp"] & {"jittape.tape", "jittape.autodiff"}
