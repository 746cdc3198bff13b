"""The schedule: what the generated code runs, in which order, in which buffers, and
which of it is a function of its own. Made once, before any code is printed; each
backend's printer (``codegen.cpu``, ``codegen.cuda``) renders it and asks nothing of
fusion or buffer planning itself.

- A ``Block`` is nodes scheduled for one backend: ``items`` in the order they run
  (``fuse.Group``: fused loops; ``fuse.Nest``: groups sharing their loop over rows; a
  node alone: its primitive's lowering; a region node: a loop or a branch, which reads
  its inputs and writes the outputs ``Program.used`` names), ``reuse`` (``memory.plan_buffers``: the dead
  arrays whose memory a value takes), ``live_out`` (the ids of its values read after
  it) and ``pieces``: None, or the blocks it is cut into, each a function the printer
  makes of its own (a graph or a loop body too large for one compile, ``chunks``).
- A region's bodies (a scan's, a while loop's test, body and backward body, a switch's
  branches) are blocks of their own: ``Program.body(node, name)``. What each must leave
  for the loop around it is the region's to say (``LoopPart.live_out``).
- A graph with a jacobian's loop of reverse sweeps (``control.jacobian_rows``) is
  three blocks: ``before`` the loop, the loop's ``body`` (``JacobianLoop``: its index,
  trip count and the rows it stacks) and ``after``.

A ``Policy`` says what a backend can do: which groups share a loop over rows
(``joinable``, None: no nests), which nodes need no array of their own (``shared``), and
the most nodes of one function (``part_nodes``, None: no pieces).

Every step is linear in the graph's size: a block in pieces schedules each piece with
the values of its own that later pieces read, not everything read later.
"""

import collections

from .control import region_of
from .ir import traced_size
from .passes import projections, repeats
from .passes.fuse import follow, item_nodes, nest, schedule  # noqa: F401 (item_nodes: for printers)
from .passes.memory import materialized, output_ids, plan_buffers, view_roots  # noqa: F401


class Policy:
    """What a backend's code can do (see the module's docstring)."""

    def __init__(self, backend, joinable=None, shared=lambda prim: False, part_nodes=None,
                 placements=False, shifts=False):
        self.backend = backend
        self.placements = placements      # placements join groups (passes/fuse.py)
        self.shifts = shifts              # a group may run in an earlier one's loop (fuse.shifted)
        self.joinable = joinable          # joinable(graph) -> None or (group, nest) -> bool
        self.shared = shared
        self.part_nodes = part_nodes


class Block:
    """Nodes scheduled (see the module's docstring)."""

    __slots__ = ("items", "reuse", "live_out", "pieces")

    def __init__(self, items, reuse, live_out, pieces=None):
        self.items, self.reuse, self.live_out, self.pieces = items, reuse, live_out, pieces

    def __repr__(self):
        if self.pieces is not None:
            return f"Block(pieces={self.pieces!r})"
        return f"Block({self.items!r})"


class JacobianLoop:
    """A jacobian's loop of reverse sweeps: ``index`` (the body's Var of the sweep's
    element), ``count`` (its trip count), ``body`` (a Block) and ``stacks`` ((output
    node, the body's row it stacks) pairs)."""

    def __init__(self, index, count, body, stacks):
        self.index, self.count, self.body, self.stacks = index, count, body, stacks


class Program:
    """A graph's schedule: ``main`` (a Block), or for a graph with a jacobian's loop
    ``before``, ``loop`` (a JacobianLoop) and ``after``; the blocks of its regions'
    bodies (``body``); ``projections`` (``passes.projections``)."""

    def __init__(self, graph, policy):
        self.graph = graph
        self.policy = policy
        self.projections = projections(graph)
        self.bodies = {}                  # (region var id, body name) -> Block
        self.main = self.before = self.loop = self.after = None
        self._outputs = output_ids(graph)
        joinable = policy.joinable(graph) if policy.joinable else None
        self._joinable = joinable

    def body(self, node, name):
        """The Block of region ``node``'s body ``name``."""
        return self.bodies[(node.out.id, name)]

    def used(self, node):
        """The indices of region ``node``'s outputs that the graph reads."""
        return self.projections.get(node.out.id, set())

    def block(self, nodes, live_out, reuse_buffers, split=True, body=False):
        """``nodes`` scheduled, in pieces where they are many (and ``split``; a region's
        ``body``, and nodes with a region among them, by ``body_limit``), and the bodies
        of the regions among them."""
        nodes = list(nodes)
        base = self.policy.part_nodes
        # (a function running a loop over small arrays too: each call of it pays its
        # parts' Python, about 3 us a part, where L-BFGS's solve at n = 10 takes 40)
        loops = body or any(n.prim.regions for n in nodes)
        limit = body_limit(nodes, base) if loops else base
        if split and limit is not None:
            cut = chunks(nodes, limit, base)
            if len(cut) > 1:
                return Block(None, {}, set(live_out),
                             [self.block(chunk, live, reuse_buffers, split=False)
                              for chunk, live in zip(cut, _lives(cut, live_out))])
        order = schedule(nodes, live_out, self.policy.placements)
        if self.policy.shifts and not self.graph.check_numerics:
            order = follow(order)       # (under check_numerics: its checks in their order)
        if self._joinable is not None:
            order = nest(order, self._joinable, live_out)
        reuse = {}
        if reuse_buffers:
            reuse = plan_buffers(self.graph, order, materialized(order, self.policy.shared),
                                 self.policy.backend, live=live_out, outputs=self._outputs)
        for item in order:
            for name in getattr(getattr(item, "prim", None), "regions", ()):
                body = item.params[name]
                self.bodies[(item.out.id, name)] = self.block(
                    body.nodes, item.prim.live_out(item, name, self.used(item)), False,
                    body=True)
        return Block(order, reuse, set(live_out))


def plan(graph, policy):
    """The ``Program`` of an optimized graph for a backend's ``policy``."""
    program = Program(graph, policy)
    outputs = output_ids(graph)
    if region_of(graph) is None:
        program.main = program.block(graph.nodes, outputs, reuse_buffers=True)
        return program
    before, region, stacked, after = region_of(graph)
    body = region.params["body"]
    stacks = [(n, body.outputs[n.params["index"]]) for n in stacked]
    rows = {row.id for _, row in stacks if hasattr(row, "id")}
    later = _reads(body.nodes + after) | rows
    program.before = program.block(before, outputs | later, reuse_buffers=False, split=False)
    loop_body = program.block(body.nodes, rows | _reads(after), reuse_buffers=False,
                              split=False)
    program.loop = JacobianLoop(body.inputs[0], region.params["count"], loop_body, stacks)
    program.after = program.block(after, outputs, reuse_buffers=False, split=False)
    return program


def _reads(nodes):
    return {v.id for n in nodes for v in n.var_inputs()}


def _lives(cut, live_out):
    """For each run of ``cut`` (in order), the ids of its own values that later runs or
    ``live_out`` read: one pass back."""
    lives, later = [], set(live_out)
    for chunk in reversed(cut):
        lives.append({n.out.id for n in chunk if n.out.id in later})
        later |= _reads(chunk)
    return lives[::-1]


# candidate periods tried at each node when looking for repeated runs (chunks)
_PERIODS = 4


# what the call of a loop body's piece weighs in the function that makes it (its
# arguments and results, the pool's buffers it is handed): the code of a few nodes
PIECE_CALL = 8


# A loop body whose arrays all had at most SMALL_BODY elements when traced, and the
# function that runs the loop, may have SMALL_BODY_FACTOR times the nodes of one
# function before they are cut. A call of a body's piece counts a reference up and down
# for each array it is handed and returns (atomic instructions): about 0.5 us for each
# of L-BFGS's three pieces, where a step over ten elements takes about 1 us; a part of
# the function around is a Python call. In one kernel, jt.minimize's L-BFGS on
# Rosenbrock took 36 us a solve at n = 10 and 97 us at n = 100, against 62 and 152 in
# pieces and parts; the kernel compiled in 10.3 s on one core instead of 8.8 (in the
# background: the first solves run on NumPy). Over large arrays the time is in the
# loops, and the pieces' shorter compiles win.
SMALL_BODY = 4096
SMALL_BODY_FACTOR = 3


def body_limit(nodes, limit):
    """The most nodes of one function for a region's body of ``nodes`` (see
    ``SMALL_BODY``); None where there are no pieces."""
    if limit is None:
        return None
    stack = list(nodes)
    while stack:
        node = stack.pop()
        if traced_size(getattr(node.out, "shape", ())) > SMALL_BODY:
            return limit
        for name in node.prim.regions:
            stack.extend(node.params[name].nodes)
    return limit * SMALL_BODY_FACTOR


def weight(node, limit=None):
    """A node's size for ``chunks``: one, and what its regions' bodies put in the
    function that runs it. A body that weighs more than ``limit`` is itself in pieces,
    each compiled on its own (``codegen.cpu.Context.block``), which that function only
    calls: ``PIECE_CALL`` a piece. (Counted whole, a loop whose body is in pieces made
    the function around it Python calling parts, about 20 us a call for L-BFGS's
    chunk in ``jt.minimize`` before its first iteration.)"""
    total = 1
    for name in node.prim.regions:
        nodes = node.params[name].nodes
        inner = sum(weight(n, limit) for n in nodes)
        most = body_limit(nodes, limit)
        total += inner if most is None or inner <= most else PIECE_CALL * -(-inner // most)
    return total


def chunks(nodes, limit, base=None):
    """``nodes`` in runs of at most about ``limit`` nodes (one run when they are fewer),
    cut where the graph repeats itself: a run of nodes that recurs back to back (the
    layers of a network, forward and backward, at any sizes) is cut into chunks of whole
    repeats, the same number in each, so that the chunks generate the same code and
    compile once (``codegen.cpu._parts``: parts are named by their code). Worth it where
    the repeated run is a quarter of a part's worth of nodes or more (a part's own
    module costs about as much to compile as 40 nodes); the rest is cut by size.
    ``base``: the limit the nodes' own bodies are weighed by (``weight``), where
    ``limit`` is a body's larger one (``body_limit``)."""
    nodes = list(nodes)
    weights = [weight(n, limit if base is None else base) for n in nodes]
    if sum(weights) <= limit:
        return [nodes]
    tokens = repeats.tokens(nodes)
    windows = repeats.Windows(tokens)
    out, straight, total = [], [], 0

    def flush():
        nonlocal straight, total
        if straight:
            out.append(straight)
        straight, total = [], 0

    nexts = collections.defaultdict(list)        # token -> later positions, nearest last
    for i in range(len(tokens) - 1, -1, -1):
        nexts[tokens[i]].append(i)
    i = 0
    while i < len(nodes):
        later = nexts[tokens[i]]
        later.pop()                              # (i itself)
        best = (0, 0)                            # (nodes covered, period)
        for j in later[-1:-_PERIODS - 1:-1]:
            period = j - i
            if period > limit:
                break
            times = 1
            while (i + (times + 1) * period <= len(nodes)
                   and windows.equal(i, i + times * period, period)):
                times += 1
            if times >= 2 and times * period > best[0]:
                best = (times * period, period)
        covered, period = best
        if covered and sum(weights[i:i + covered]) >= limit // 4:
            # the run cut where its least rotation starts, not where it was found (which
            # the nodes before it decide): another program with these repeats after
            # other nodes (another loss, more layers) cuts them the same way
            shift = min(range(period), key=lambda r: tokens[i + r:i + r + period])
            times = 1
            while (i + shift + (times + 1) * period <= len(nodes)
                   and windows.equal(i + shift, i + shift + times * period, period)):
                times += 1
            if times >= 2:
                for k in range(shift):
                    if straight and total + weights[i + k] > limit:
                        flush()
                    straight.append(nodes[i + k])
                    total += weights[i + k]
                flush()
                start = i + shift
                run = max(1, sum(weights[start:start + period]))
                # repeats per chunk by the run's size alone (so the same in a deeper
                # model): chunks of about a quarter of a part, quick to compile
                per = max(1, limit // 4 // run)
                for first in range(0, times, per):
                    last = min(first + per, times)
                    out.append(nodes[start + first * period:start + last * period])
                end = start + times * period
                for k in range(i + 1, end):      # (positions passed over)
                    nexts[tokens[k]].pop()
                i = end
                continue
        if straight and total + weights[i] > limit:
            flush()
        straight.append(nodes[i])
        total += weights[i]
        i += 1
    flush()
    return out
