"""Graphs as bytes: ops by their registry names, parameters as tagged JSON values.

A graph serialized here can be shipped to another process (a Dask worker) and rebuilt
there against that process's registry, and its bytes key it by content. Ops holding
Python code of the user's (custom rules) have no name another process could look up:
serializing a graph that still holds one raises ``UnsupportedError`` (the passes drop
them after autodiff, so optimized graphs serialize).
"""

import base64
import hashlib
import json

import numpy as np

from . import control, ir
from .errors import at_user_line, UnsupportedError
from .ops.core import REGISTRY

FORMAT = 1


def records():
    """Every op a serialized graph may name: the primitives and the loop parts."""
    found = dict(REGISTRY)
    for part in control.RECORDS:
        found[part.name] = part
    return found


def _encode(x):
    if x is None or isinstance(x, (bool, str)):
        return x
    if isinstance(x, ir.Dim):
        return {"dim": int(x), "expr": _encode(x.expr)}
    if isinstance(x, int):
        return int(x)
    if isinstance(x, float):
        return {"float": repr(x)}           # nan and inf too
    if isinstance(x, tuple):
        return {"tuple": [_encode(v) for v in x]}
    if isinstance(x, list):
        return [_encode(v) for v in x]
    if isinstance(x, dict):
        return {"dict": [[_encode(k), _encode(v)] for k, v in x.items()]}
    if isinstance(x, slice):
        return {"slice": [_encode(x.start), _encode(x.stop), _encode(x.step)]}
    if x is Ellipsis:
        return {"ellipsis": True}
    if isinstance(x, np.dtype):
        return {"dtype": x.str}
    if isinstance(x, type) and issubclass(x, np.generic):
        return {"scalar_type": np.dtype(x).str}
    if isinstance(x, np.generic):
        return {"scalar": _encode(np.asarray(x))}
    if isinstance(x, np.ndarray):
        data = np.array(x, order="C")       # (ascontiguousarray makes a 0-d array 1-d)
        return {"array": base64.b64encode(data.tobytes()).decode(), "dtype": data.dtype.str,
                "shape": list(data.shape)}
    if isinstance(x, ir.Var):
        return {"var": x.id}
    if isinstance(x, ir.Graph):                   # a region's body
        return {"graph": _graph_data(x)}
    raise UnsupportedError(at_user_line(f"serialize: a parameter of type {type(x).__name__} ({x!r:.60})"))


def _decode(x, vars_):
    if x is None or isinstance(x, (bool, int, str)):
        return x
    if isinstance(x, list):
        return [_decode(v, vars_) for v in x]
    (tag, value), = [(k, v) for k, v in x.items() if k not in ("dtype", "shape", "expr")] or \
        [("dtype", x["dtype"])]
    if tag == "dim":
        return ir.Dim(value, _decode(x["expr"], vars_))
    if tag == "float":
        return float(value)
    if tag == "tuple":
        return tuple(_decode(v, vars_) for v in value)
    if tag == "dict":
        return {_decode(k, vars_): _decode(v, vars_) for k, v in value}
    if tag == "slice":
        return slice(*(_decode(v, vars_) for v in value))
    if tag == "ellipsis":
        return Ellipsis
    if tag == "dtype":
        return np.dtype(value)
    if tag == "scalar_type":
        return np.dtype(value).type
    if tag == "scalar":
        return _decode(value, vars_)[()]
    if tag == "array":
        return np.frombuffer(base64.b64decode(value), np.dtype(x["dtype"])).reshape(
            x["shape"]).copy()
    if tag == "var":
        return vars_[value]
    if tag == "graph":
        return _graph_from(value, vars_)
    raise ValueError(at_user_line(f"serialize: unknown tag {tag!r}"))


def _var(v):
    return {"id": v.id, "shape": _encode(tuple(v.shape)), "dtype": v.dtype.str,
            "name": getattr(v, "name", None)}


def _graph_data(graph):
    table = records()
    nodes = []
    for node in graph.nodes:
        if table.get(node.prim.name) is not node.prim:
            raise UnsupportedError(
                at_user_line(f"serialize: {node.prim.name} is not a registry op (a rule of the user's "
                f"own holds Python code); serialize the graph after the passes drop it"))
        nodes.append({"op": node.prim.name, "inputs": [_encode(v) for v in node.inputs],
                      "params": _encode(dict(node.params)), "out": _var(node.out),
                      "where": None if node.where is None else str(node.where),
                      "grad_of": getattr(node.where, "op", None)})
    writes = []
    for k, target in graph.writes:
        if not isinstance(target, int):
            raise UnsupportedError(at_user_line("serialize: a graph that writes to jt.Variables holds them; "
                                   "pass their values as arguments instead"))
        writes.append([k, target])
    return {
        "name": graph.name,
        "inputs": [_var(v) for v in graph.inputs],
        "consts": [{"var": _var(c.var), "value": _encode(np.asarray(c.value))}
                   for c in graph.consts],
        "nodes": nodes,
        "outputs": [_encode(v) for v in graph.outputs],
        "checks": [[_encode(k), _encode(v)] for k, v in graph.checks.items()],
        "exact_sizes": graph.exact_sizes, "writes": writes,
        "guards": [[k, _encode(v)] for k, v in graph.guards],
        "check_numerics": graph.check_numerics, "parallel": graph.parallel,
    }


def dumps(graph):
    """The graph as bytes (JSON)."""
    data = dict(_graph_data(graph), format=FORMAT)
    return json.dumps(data, sort_keys=True, separators=(",", ":")).encode()


def digest(graph):
    """A key of the graph's content (its ops, parameters, constants and structure)."""
    return hashlib.sha256(dumps(graph)).hexdigest()


def loads(blob):
    """The graph ``dumps`` wrote, its ops looked up in this process's registry."""
    data = json.loads(blob)
    if data.get("format") != FORMAT:
        raise ValueError(at_user_line(f"serialize: format {data.get('format')!r}, expected {FORMAT}"))
    return _graph_from(data, {})


def _graph_from(data, vars_):
    """A graph from ``_graph_data``'s dict; ``vars_`` (id -> Var) holds the Vars defined
    so far (a region's body reads those of the graph around it)."""
    table = records()

    def var(d, node=None):
        v = vars_.get(d["id"])
        if v is None:                   # a body's input may be a Var defined around it
            v = ir.Var(d["id"], _decode(d["shape"], vars_), d["dtype"], node)
            if d.get("name") is not None:
                v.name = d["name"]
            vars_[v.id] = v
        return v

    inputs = [var(d) for d in data["inputs"]]
    consts = [ir.Const(_decode(c["value"], vars_), var(c["var"])) for c in data["consts"]]
    nodes = []
    for d in data["nodes"]:
        prim = table.get(d["op"])
        if prim is None:
            raise UnsupportedError(at_user_line(f"serialize: this process has no op {d['op']!r}"))
        out = var(d["out"])
        where = d["where"]
        if d.get("grad_of") is not None:          # a backward node: what it differentiates
            where = ir.GradWhere(where, d["grad_of"])
        node = ir.Node(prim, [_decode(v, vars_) for v in d["inputs"]],
                       _decode(d["params"], vars_), out, where)
        out.node = node
        nodes.append(node)
    graph = ir.Graph(inputs, consts, nodes, [_decode(v, vars_) for v in data["outputs"]],
                     data["name"], {_decode(k, vars_): _decode(v, vars_)
                                    for k, v in data["checks"]}, data["exact_sizes"])
    graph.writes = [tuple(w) for w in data["writes"]]
    graph.guards = [(k, _decode(v, vars_)) for k, v in data["guards"]]
    graph.check_numerics = data["check_numerics"]
    graph.parallel = data["parallel"]
    return graph
