"""Size canonicalization: sizes that the kernel checks equal at entry get one expression.

Tracing records a check for each pair of run-time sizes an op needs equal (``x @ w``
needs ``x.shape[1] == w.shape[0]``; ``y + b`` needs the trailing sizes equal). The
generated kernel tests those checks before anything else, so past them the two
expressions are interchangeable. Writing every size with one representative per class
lets the later passes see what is really the same: fusion puts loops over the same
domain together, CSE merges nodes that differ only in how a size was spelled, and the
buffer planner hands a dead buffer to a value of the same shape.

The representative of a class is its simplest member: a literal size (a check that an
input's axis equals a constant's, ``10 == labels.shape[1]``, or is 1), then an input's
own axis (``("in", k, axis)``, the lowest ``k`` first), then a derived size. A size known
to be a literal is written as that int, so that loops over it are loops of a known
length and domains that are the same at run time are the same to the passes.
"""

from ..ir import Dim, Graph, Node, Var, is_bound


def _rank(expr):
    """Sort key: literal sizes first, inputs' axes (by input, then axis), then larger
    expressions."""
    if isinstance(expr, int):
        return (-1, expr)
    if isinstance(expr, tuple) and expr[0] == "in":
        return (0, expr[1], expr[2])
    return (1, len(repr(expr)), repr(expr))


class _Classes:
    """Union-find over size expressions."""

    def __init__(self):
        self.parent = {}

    def find(self, e):
        parent = self.parent
        root = e
        while root in parent:
            root = parent[root]
        while e in parent and parent[e] != root:     # path compression
            parent[e], e = root, parent[e]
        return root

    def union(self, a, b):
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return
        if _rank(rb) < _rank(ra):
            ra, rb = rb, ra
        self.parent[rb] = ra


def implied_bounds_dropped(graph):
    """The graph without the bound checks a stronger one implies: ``t < n`` for each
    ``x[t]`` of a loop over ``x`` is one check, ``T - 1 < n`` (each is a test and a
    raise in the kernel, compile time for nothing)."""
    strongest = {}                         # (hi, error) -> (lo as a "<=" bound, key)
    for key, message in graph.checks.items():
        if is_bound(key) and isinstance(key[1], int) and not isinstance(key[2], int):
            kind, lo, hi = key
            need = lo + 1 if kind == "<" else lo
            found = strongest.get((hi, message[0]))
            if found is None or need > found[0]:
                strongest[hi, message[0]] = (need, key)
    keep = {key for _, key in strongest.values()}
    checks = {key: m for key, m in graph.checks.items()
              if not (is_bound(key) and isinstance(key[1], int) and not isinstance(key[2], int))
              or key in keep}
    if len(checks) == len(graph.checks):
        return graph
    return Graph(graph.inputs, graph.consts, graph.nodes, graph.outputs, graph.name, checks,
                 graph.exact_sizes)


def canonical_sizes(graph):
    """The graph with every run-time size written as its class's representative."""
    classes = _Classes()
    for key in graph.checks:
        if is_bound(key):            # an inequality: nothing to merge
            continue
        a, b = key
        if isinstance(a, tuple) or isinstance(b, tuple):
            classes.union(a, b)
    if not classes.parent:
        return graph
    memo = {}

    def expr(e):
        if not isinstance(e, tuple):
            return e
        found = memo.get(e)
        if found is None:
            root = classes.find(e)
            if root != e:
                found = expr(root)
            elif e[0] == "in":
                found = e
            else:
                found = (e[0],) + tuple(expr(x) for x in e[1:])
            memo[e] = found
        return found

    def size(d, literal=True):
        if isinstance(d, Dim):
            e = expr(d.expr)
            if isinstance(e, int):           # a literal: checked equal on entry
                return e if literal else d
            return d if e == d.expr else Dim(int(d), e)
        return d

    # the inputs' sizes stay their own: the kernel's signature (any size but 1) is
    # checked before the sizes' equalities
    return rewrite_sizes(graph, size, graph.inputs, graph.checks)


def rewrite_sizes(graph, size, inputs, checks):
    """``graph`` with every size ``d`` (an int or a Dim) written ``size(d)`` (``size(d,
    literal=False)`` for the shapes of ``inputs``, which become its inputs), in its
    regions' bodies too, and ``checks`` its checks. Vars' shapes change in place."""
    def sized(d, literal=True):
        if isinstance(d, tuple):
            return tuple(sized(x, literal) for x in d)
        return size(d, literal)

    seen = set()

    def fix(var, literal=True):
        if var.id not in seen:
            seen.add(var.id)
            var.shape = sized(var.shape, literal)

    for v in inputs:
        fix(v, literal=False)
    for c in graph.consts:
        fix(c.var)

    def rebuild(nodes):
        new_nodes = []
        for node in nodes:
            fix(node.out)
            inputs = [v if isinstance(v, Var) else sized(v) for v in node.inputs]
            params = {k: sized(v) for k, v in node.params.items()}
            for name in node.prim.regions:          # a body's sizes are the graph's
                body = params[name]
                for v in body.inputs:
                    fix(v)
                params[name] = Graph(body.inputs, body.consts, rebuild(body.nodes),
                                     [v if isinstance(v, Var) else sized(v) for v in body.outputs],
                                     body.name, body.checks, body.exact_sizes)
            new = Node(node.prim, inputs, params, node.out, node.where)
            node.out.node = new
            new_nodes.append(new)
        return new_nodes

    nodes = rebuild(graph.nodes)
    outputs = [v if isinstance(v, Var) else sized(v) for v in graph.outputs]
    return Graph(inputs, graph.consts, nodes, outputs, graph.name, checks, graph.exact_sizes)
