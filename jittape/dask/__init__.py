"""``jt.dask``: data-parallel gradients over Dask (``pip install 'jittape[dask]'``).

```python
vg = jt.dask.value_and_grad(loss, argnums=0, reduce="mean", regularizer=None)
value, grads = vg(params, X, y)      # X, y: dask arrays chunked along their first axis
```

The differentiated arguments are NumPy parameters (pytrees as ``jt.value_and_grad``
takes them); the data arguments are ``dask.array``s chunked along their first axis only,
all with the same row chunks. ``loss`` is evaluated on each chunk by the compiled kernel,
on the worker that holds the chunk, and the partial values and gradients are added up:
``reduce="sum"`` for a loss that is a sum over rows, ``"mean"`` for a mean over rows
(the partial results are weighted by their rows). ``regularizer(*params)`` is added once,
on the client, not once per chunk.

How a step runs (docs/dask.md says more):

* The first call with a chunking traces ``loss`` on the client (a probe of zeros with the
  data's dtypes and trailing shapes) and serializes the optimized graph
  (``serialize.dumps``: ops by registry name). The graph goes to each worker once: a
  ``WorkerPlugin`` on a distributed cluster (so a worker that joins or restarts gets it
  too), the process's own table with the threaded and synchronous schedulers, the task
  itself with the process scheduler (whose workers live for one ``compute``). A worker
  generates the kernel's module from the graph and builds it through the disk cache
  (``JITTAPE_CACHE_DIR``, with its ownership and hash checks): where the workers share
  one, the first to compile writes it and the others load it; a worker without one
  compiles once and keeps the kernel for the life of its process.
* Each step ships the parameters (the kernel's inputs other than the data) once to each
  worker that needs them. On a distributed cluster with the data persisted, one call per
  worker, to the runner the plugin adds to it (no task for the scheduler), runs that
  worker's chunks where they are and returns each chunk's partial result; where a runner
  cannot answer (the worker lost, a chunk not where it was), one task per worker does;
  elsewhere (chunks whose worker is not known, other schedulers) one task per chunk.
  The partial results are added by a pairwise tree over the chunks whose shape depends
  on the number of chunks only: for a fixed chunking the result is bitwise the same
  whatever the number of workers, and in whatever order they finish.
* The kernel is traced with the data's first axis of a size other than 1, so one kernel
  serves every chunk: sizes are read at run time, and a ragged last chunk takes the same
  kernel. A chunk of one row is run as that row twice (the kernel's signature says the
  axis is not 1, and broadcasting along it would be wrong), and its result halved for
  ``"sum"``: the sum of two equal terms is exactly twice either, so this is the one-row
  result whenever the loss is a sum (or a mean) over rows, which is what chunking asks
  of it anyway. A loss that reads a size while tracing (``X.shape[0]``) is traced at
  every chunk size the data has; where those graphs are one graph (the size went
  nowhere the kernel sees), that one kernel serves them all; else the sizes whose
  graphs agree share one kernel, and a size whose graph is its own gets a kernel keyed
  on that size, compiled only by the workers that hold such a chunk.
* Workers run serial kernels (no prange, ``parallel=False``): the chunks are the
  parallelism; serial kernels start no Numba thread pool in the task, which the
  threaded scheduler would enter from several threads at once (Numba's ``workqueue``
  layer aborts on that) and which a forked process could inherit half-started (GNU
  OpenMP). Sums are in a fixed order either way.
"""

import collections
import dis
import hashlib
import inspect
import json
import threading
import types
import uuid
from typing import Any, Callable, Optional

import numpy as np

from .. import serialize, tree
from ..compiler.cache import _inputs
from ..compiler.capture import _capture_checks, _checks_hold, _implicit_inputs
from ..compiler.compiled import Compiled
from ..errors import ShapeError, UnsupportedError, at_user_line, user_frame
from ..tensor import Tensor
from ..trace import RandomDraw, Tracer
from . import worker

INSTALL = "pip install 'jittape[dask]'"
_REDUCE = ("sum", "mean")
INLINE_BYTES = 64 * 1024      # parameters up to this size are sent with each chunk's task
                              # (where a step is one task per chunk)
PLANS = 8                     # chunkings (and argument kinds) whose plans a gradient keeps
RUNNERS = True                # a step on a distributed cluster calls each worker's runner
                              # (False: always tasks; see DaskGradient._on_runners)


def _require_dask():
    """``dask`` and ``dask.array``, or an ImportError saying how to install them."""
    try:
        import dask
        import dask.array  # noqa: F401
    except ImportError as err:
        raise ImportError(f"jt.dask needs Dask: {INSTALL} (dask[distributed] for a "
                          f"cluster); importing it failed: {err}") from err
    return dask


def value_and_grad(loss: Callable[..., Any], argnums: Any = 0, reduce: str = "sum",
                   regularizer: Optional[Callable[..., Any]] = None) -> "DaskGradient":
    """``loss``'s value and gradient with respect to the arguments ``argnums`` (NumPy
    parameters), summed (``reduce="sum"``) or averaged by rows (``"mean"``) over the row
    chunks of its ``dask.array`` arguments, each chunk computed by the compiled kernel
    on the worker that holds it.

    Args:
      loss: a scalar function of the parameters and the data, whose value on all the
        rows is the sum (``"sum"``) or the mean (``"mean"``) of its values on the chunks.
      argnums: the differentiated arguments (an int or a tuple), as ``jt.value_and_grad``.
      reduce: ``"sum"`` or ``"mean"`` (weighted by each chunk's rows).
      regularizer: ``regularizer(*params)`` (the differentiated arguments in ``argnums``
        order), added once to the value, its gradient to the gradient.

    Returns:
      A callable ``vg(*args) -> (value, grads)`` in NumPy, grads in the structure of the
      differentiated arguments; bitwise the same for a fixed chunking whatever the
      number of workers. ``vg.objective()`` gives SciPy's ``fun``/``jac`` in float64.
    """
    _require_dask()
    return DaskGradient(loss, argnums, reduce, regularizer, True)


def grad(loss: Callable[..., Any], argnums: Any = 0, reduce: str = "sum",
         regularizer: Optional[Callable[..., Any]] = None) -> "DaskGradient":
    """As ``value_and_grad``, returning the gradient alone."""
    _require_dask()
    return DaskGradient(loss, argnums, reduce, regularizer, False)


class _Tracing(Compiled):
    """A compiled value_and_grad of the loss that only traces (the workers build the
    kernels): a class of its own, so it is not shared with the user's ``jt.grad``
    wrappers of the same function (the probes would make theirs keyed on sizes)."""

    context = None          # (what, rows of the chunk traced, the data), while tracing

    def _differentiate(self, trace, result, diff_inputs, key):
        shape = tuple(int(d) for d in getattr(result, "shape", ()))
        if shape and self.context is not None:
            # the traced value's shape is a chunk's; the user thinks of the whole data
            what, rows, data = self.context
            raise TypeError(at_user_line(
                f"{what}: the loss must return a scalar (a sum or a mean over the rows, "
                f"which the chunks' values add up to), got a value of shape {shape} when "
                f"traced on a chunk of {rows} rows of the data ({data})"))
        return super()._differentiate(trace, result, diff_inputs, key)


class DaskGradient:
    """What ``jt.dask.value_and_grad`` and ``jt.dask.grad`` return (see there)."""

    def __init__(self, loss, argnums, reduce, regularizer, with_value):
        what = "value_and_grad" if with_value else "grad"
        name = getattr(loss, "__name__", "loss")
        self._what = f"jt.dask.{what}({name})"
        if not callable(loss):
            raise TypeError(at_user_line(f"jt.dask.{what}: expected a function, got "
                                         f"{type(loss).__name__}"))
        if reduce not in _REDUCE:
            raise ValueError(at_user_line(f"{self._what}: reduce={reduce!r}; use 'sum' or 'mean'"))
        if regularizer is not None and not callable(regularizer):
            raise TypeError(at_user_line(f"{self._what}: regularizer must be a function of the "
                                         f"parameters, got {type(regularizer).__name__}"))
        self.loss, self.reduce, self.with_value = loss, reduce, with_value
        self.regularizer = regularizer
        self.name = name
        self._tracer = _Tracing(loss, "value_and_grad", argnums)
        self.single, self.argnums = self._tracer.single, self._tracer.argnums
        self._reg = None
        if regularizer is not None:
            from ..compiler import value_and_grad as _vg
            self._reg = _vg(regularizer, argnums=0 if self.single else
                            tuple(range(len(self.argnums))))
        self._plans = collections.OrderedDict()     # the last PLANS keys, newest last
        self._lock = threading.Lock()
        self._registered = set()          # (client id, digest) the workers were given
        self._where = collections.OrderedDict()   # (client id, chunk keys) -> {worker:
                                                  # its chunks}, as the runners found them
        try:
            self._labels = list(inspect.signature(loss).parameters)
        except (TypeError, ValueError):
            self._labels = []
        self.__name__ = f"dask_{what}_{name}"

    def __repr__(self):
        return f"<{self._what}, reduce={self.reduce!r}>"

    def _label(self, i):
        name = self._labels[i] if i < len(self._labels) else None
        return f"argument {i}" + (f" ({name})" if name else "")

    # -- the call ------------------------------------------------------------------------
    def __call__(self, *args):
        dask = _require_dask()
        import dask.array as da
        import dask.local
        import dask.threaded
        where = user_frame()
        data = [i for i, a in enumerate(args) if isinstance(a, da.Array)]
        diff = self._tracer._diff(len(args))
        args = self._numpy_arguments(args, data, da.Array)
        plan, inputs = self._plan(args, data, diff)
        step = (inputs, plan.implicit_values(), where)
        scheduler = dask.base.get_scheduler() or dask.threaded.get
        client = getattr(scheduler, "__self__", None)
        if _is_client(client):              # the workers got the graphs from a plugin
            self._register(client, plan)
            ship = False
        elif scheduler in (dask.threaded.get, dask.local.get_sync):
            for record in plan.records.values():      # (this process is the worker)
                worker.install(record)
            ship = False
        else:                  # the process scheduler's workers live for one compute
            ship = True
        arrays = [args[i] for i in data]
        rows = sum(int(r) for r in arrays[0].chunks[0])
        parts = self._by_worker(client, plan, step, arrays) if not ship and \
            _is_client(client) else None
        if parts is None:                   # (where the chunks are is not known)
            parts = self._graph(plan, step, arrays, ship)
            if ship is False and client is not None:
                parts = client.compute(parts, sync=True)
            else:
                parts = dask.compute(parts, scheduler=scheduler)[0]
        value, grads = _tree_sum(parts)
        if self.reduce == "mean":
            dtype = np.result_type(value)
            value = value / dtype.type(rows)
            grads = [g / np.result_type(g).type(rows) for g in grads]
        value = plan.value_dtype.type(value)
        grads = [_as_result(g, dt) for g, dt in zip(grads, plan.grad_dtypes)]
        if self._reg is not None:
            params = [args[i] for i in diff]
            r_value, r_grads = self._reg(*params)
            value = plan.value_dtype.type(value + r_value)
            r_leaves = tree.leaves(r_grads if not self.single else (r_grads,))
            grads = [_as_result(g + np.asarray(r), dt)
                     for g, r, dt in zip(grads, r_leaves, plan.grad_dtypes)]
        out, pos = [], 0
        for td, n in plan.grad_defs:
            part = grads[pos:pos + n]
            pos += n
            out.append(part[0] if td is None else tree.unflatten(td, part))
        grads = out[0] if self.single else tuple(out)
        return (value, grads) if self.with_value else grads

    def objective(self, like=None):
        """``{"fun", "jac"}`` for ``scipy.optimize.minimize``: ``fun(x, *args)`` returns
        the value as a Python float and the gradient as a float64 vector (SciPy's
        L-BFGS-B needs float64), ``x`` unflattened into ``like``'s structure (None: the
        parameter is one float64 vector, SciPy's own). For a loss differentiated with
        respect to its first argument only."""
        if not self.single or self.argnums[0] != 0:
            raise ValueError(at_user_line(f"{self._what}: objective() needs argnums=0 (SciPy's "
                                          "point is the first argument)"))
        leaves, treedef = tree.flatten(like) if like is not None else (None, None)

        def unravel(x):
            if like is None:
                return np.asarray(x, np.float64)
            out, start = [], 0
            for leaf in leaves:
                a = np.asarray(leaf)
                out.append(np.asarray(x[start:start + a.size], a.dtype).reshape(a.shape))
                start += a.size
            return tree.unflatten(treedef, out)

        vg = self if self.with_value else DaskGradient(
            self.loss, 0, self.reduce, self.regularizer, True)

        def fun(x, *args):
            value, grads = vg(unravel(x), *args)
            flat = [np.asarray(g, np.float64).reshape(-1) for g in tree.leaves(grads)]
            return float(value), flat[0] if len(flat) == 1 else np.concatenate(flat)
        fun.__name__ = f"value_and_grad_{self.name}"
        return {"fun": fun, "jac": True}

    def _numpy_arguments(self, args, data, dask_array):
        """``args`` with jittape tensors among the leaves of the other arguments as
        NumPy values (``jt.minimize``'s L-BFGS hands its point as tensors); an error for
        a dask array that is not an argument of its own, which tracing would download
        whole to the client."""
        out = list(args)
        for i, a in enumerate(args):
            if i in data:
                continue
            leaves, treedef = tree.flatten(a)
            if not any(isinstance(x, (Tensor, dask_array)) for x in leaves):
                continue
            new = []
            for k, x in enumerate(leaves):
                at = "" if x is a else f" at {_leaf_path(a, k)}"
                if isinstance(x, dask_array):
                    raise TypeError(at_user_line(
                        f"{self._what}: {self._label(i)} holds a dask array of shape "
                        f"{x.shape}{at}; data must be top-level arguments of the loss, each "
                        "a dask array chunked by rows (pass it as an argument of its own)"))
                if isinstance(x, Tracer):
                    raise UnsupportedError(at_user_line(
                        f"{self._what}: {self._label(i)} holds a traced tensor of shape "
                        f"{x.shape}{at} (a value of a compiled function); jt.dask's gradient "
                        "runs outside compiled functions, on NumPy values"))
                # (a jt.Variable stays: the check of the arguments' kinds names it)
                new.append(x.numpy() if x.__class__ is Tensor else x)
            out[i] = tree.unflatten(treedef, new)
        return tuple(out)

    def _check_row_aligned(self, args, data, diff, rows):
        """An error for a NumPy argument with as many rows as the data: it is not
        chunked, so every chunk would be paired with all of it."""
        total = sum(rows)
        for i, a in enumerate(args):
            if i in data or i in diff:
                continue
            for k, x in enumerate(tree.leaves(a)):
                if isinstance(x, np.ndarray) and x.ndim and x.shape[0] == total:
                    first = data[0]
                    name = self._labels[first] if first < len(self._labels) else "X"
                    raise ShapeError(at_user_line(
                        f"{self._what}: {self._label(i)} is a NumPy array of shape "
                        f"{x.shape}{'' if x is a else ' at ' + _leaf_path(a, k)}, as many "
                        f"rows as the data ({self._label(first)} of shape "
                        f"{args[first].shape}); it should be a dask array chunked like the "
                        f"data (da.from_array(a).rechunk({{0: {name}.chunks[0]}})): as it "
                        "is, every chunk would be paired with all of it"))

    # -- the plan: traced graphs, what is shipped, how chunks map to kernels ------------
    def _plan(self, args, data, diff):
        if not data:
            raise TypeError(at_user_line(
                f"{self._what}: no argument is a dask.array; pass the data as dask arrays "
                "chunked along their first axis (jt.value_and_grad for NumPy data)"))
        for i in diff:
            if i in data:
                raise TypeError(at_user_line(
                    f"{self._what}: {self._label(i)} is a dask.array but is differentiated "
                    f"(argnums={self.argnums if not self.single else self.argnums[0]}); "
                    "the parameters must be NumPy values, the data dask arrays"))
        rows = self._check_chunks(args, data)
        self._check_row_aligned(args, data, diff, rows)
        probe = list(args)
        for i in data:
            probe[i] = _zeros(args[i], 2)
        key, leaves = self._tracer._key(tuple(probe))
        if any(k in ("variable", "device") for k in key[1]):
            raise UnsupportedError(at_user_line(
                f"{self._what}: arguments must be NumPy arrays and scalars (a jt.Variable or "
                "a GPU array cannot be shipped to the workers)"))
        shapes = tuple(np.shape(x) for x in leaves)
        chunking = tuple((args[i].dtype.str, args[i].shape[1:]) for i in data)
        plan_key = (key, shapes, tuple(data), rows, chunking)
        with self._lock:
            plans = self._plans.setdefault(plan_key, [])
            self._plans.move_to_end(plan_key)
            while len(self._plans) > PLANS:    # (a loop over many chunkings)
                self._plans.popitem(last=False)
            plan = next((p for p in plans if not p.checks or _checks_hold(p.checks)), None)
            if plan is None:
                plan = self._new_plan(args, data, rows, key)
                plans.insert(0, plan)
                del plans[4:]
        inputs = _inputs(leaves, key[1])
        for slot in plan.slots:
            inputs[slot] = None                 # (the chunks go there, on the workers)
        return plan, inputs

    def _check_chunks(self, args, data):
        first = None
        for i in data:
            a = args[i]
            if a.ndim == 0:
                raise ShapeError(at_user_line(f"{self._what}: {self._label(i)} is a 0-d dask "
                                              "array; data arguments have rows (a first axis)"))
            split = [ax for ax in range(1, a.ndim) if len(a.chunks[ax]) != 1]
            if split:
                raise ShapeError(at_user_line(
                    f"{self._what}: {self._label(i)} of shape {a.shape} has chunks {a.chunks}: "
                    f"it is chunked along axis {split[0]}; chunk it along its first axis "
                    f"only (x.rechunk({{{', '.join(f'{ax}: -1' for ax in split)}}}))"))
            if any(np.isnan(c) for c in a.chunks[0]):
                raise ShapeError(at_user_line(
                    f"{self._what}: {self._label(i)} has chunks of unknown size {a.chunks[0]}; "
                    "call compute_chunk_sizes() on it first"))
            if first is None:
                first = (i, a.chunks[0])
            elif a.chunks[0] != first[1]:
                raise ShapeError(at_user_line(
                    f"{self._what}: {self._label(i)} has row chunks {a.chunks[0]} but "
                    f"{self._label(first[0])} has {first[1]}; data arguments need the same "
                    "row chunks (rechunk one to the other's: a.rechunk({0: b.chunks[0]}))"))
        rows = tuple(int(r) for r in first[1])
        if sum(rows) == 0:
            raise ShapeError(at_user_line(f"{self._what}: the data have no rows"))
        return rows

    def _new_plan(self, args, data, rows, key):
        captured = _captured_dask(self.loss)
        if captured is not None:
            name, value = captured
            raise TypeError(at_user_line(
                f"{self._what}: the loss reads the dask array {name} of shape {value.shape} "
                "from outside its arguments; tracing would compute it whole on the client. "
                "Data must be top-level arguments of the loss, each a dask array chunked by "
                "rows like the others (pass it as an argument)"))
        sizes = sorted({_effective(r) for r in rows if r})
        first = _effective(next(r for r in rows if r))
        traced = {first: self._trace(args, data, first)}
        graph, trace = traced[first]
        self._check_trace(graph, trace)
        if graph.exact_sizes:        # it read a size: trace each size, group equal graphs
            for s in sizes:
                if s not in traced:
                    traced[s] = self._trace(args, data, s)
                    self._check_trace(*traced[s])
            # sizes whose graphs agree but for the traced sizes share one kernel (it reads
            # them at run time); a size whose graph is its own gets one for that size alone
            groups = {}
            for s in sizes:
                groups.setdefault(_without_sizes(serialize.dumps(traced[s][0])), []).append(s)
            graphs = {}
            for group in groups.values():
                exact = len(group) == 1 and len(groups) > 1
                for s in group:
                    graphs[s] = (traced[group[0]][0], exact)
        else:
            graphs = {s: (graph, False) for s in sizes}
        slots = _data_slots(args, key, data)
        spec = {"what": self._what, "labels": [self._label(i) for i in data],
                "dtypes": [args[i].dtype.str for i in data],
                "trailing": [tuple(int(d) for d in args[i].shape[1:]) for i in data],
                "slots": slots}
        records, by_size = {}, {}
        for s, (g, exact) in graphs.items():
            record = _record(g, exact, spec)
            records[record[0]] = record
            by_size[s] = record[0]
        packing = graph.packing     # (the flattened outputs: rows of stacked ones too)
        dtypes = [v.dtype for v in graph.outputs] if packing is None else \
            [graph.outputs[j].dtype for j, _ in packing.outputs]
        return _Plan(records, by_size, slots, trace, _capture_checks(trace), dtypes[0],
                     dtypes[1:], self._tracer._grad_structure(key))

    def _check_trace(self, graph, trace):
        """Errors for what a chunk's trace may not hold (each size's trace: a loss that
        reads the size may branch at one size only)."""
        if graph.guards:
            raise UnsupportedError(at_user_line(
                f"{self._what}: the loss branches in Python on a traced value (if/while on "
                "an array): each chunk may take another branch; compute the choice with "
                "jt.where, or loop with jt.while_loop"))
        if any(isinstance(src, RandomDraw) for src in trace.implicit):
            raise UnsupportedError(at_user_line(
                f"{self._what}: the loss draws jt.random numbers; pass the draws as data "
                "(a dask array chunked with the rows) or as an argument"))

    def _trace(self, args, data, size):
        probe = list(args)
        for i in data:
            probe[i] = _zeros(args[i], size)
        key, leaves = self._tracer._key(tuple(probe))
        shapes = ", ".join(f"{self._label(i)} of shape {args[i].shape}" for i in data)
        self._tracer.context = (self._what, size, shapes)
        try:
            graph, _, trace = self._tracer._trace(tuple(probe), leaves, key)
        finally:
            self._tracer.context = None
        return graph, trace

    # -- one step's task graph -------------------------------------------------------------
    def _graph(self, plan, step, arrays, ship):
        """The step's task graph: the step's inputs (one key: each worker fetches them
        once), a task per chunk that has rows, and the pairwise tree adding them."""
        from dask import delayed
        token = uuid.uuid4().hex[:12]
        # small parameters ride in each chunk's task (no fetch between workers: a hop of
        # latency); large ones are one key, which each worker fetches once
        size = sum(getattr(x, "nbytes", 8) for x in step[0] + step[1])
        step_d = step if size <= INLINE_BYTES else delayed(
            step, name=f"jittape-step-{token}", traverse=False, pure=False)
        # each step asks the arrays for their chunks: persist() keeps an array's name but
        # gives it another graph (the computed chunks), which a cache by name would miss
        chunks = [list(a.to_delayed(optimize_graph=False).ravel()) for a in arrays]
        rows = arrays[0].chunks[0]
        parts = []
        for index, r in enumerate(rows):
            if not r:
                continue
            size = _effective(r)
            digest = plan.by_size[size]
            weight = float(r) if self.reduce == "mean" else r / size
            parts.append(delayed(worker.partial, pure=False)(
                digest, plan.records[digest] if ship else None, step_d, index, int(r),
                weight, *[c[index] for c in chunks],
                dask_key_name=f"jittape-partial-{token}-{index}"))
        return parts

    def _by_worker(self, client, plan, step, arrays):
        """The step on a distributed cluster as one call or task per worker that holds
        chunks: each runs its chunks in chunk order and returns their partial results
        one by one (the client's tree over the chunks is the same, so is the sum), and
        carries the parameters once. A call goes to the worker's runner (a handler of
        the worker: ``_on_runners``); where one cannot answer, the step is tasks: the
        chunks are the tasks' dependencies and the tasks ask for the worker that holds
        them, so no data moves; another worker may take a task whose worker is lost.
        None where a chunk is not a persisted block whose worker the scheduler knows
        (the step is then one task per chunk).

        Where the chunks are is asked of the scheduler once and kept for the steps that
        follow (with the runners, a step then needs no word with the scheduler): a
        chunk no longer there makes its runner answer "missing", and the step asks
        again."""
        from dask.core import flatten
        from distributed import futures_of
        held = {}
        for a in arrays:
            held.update((f.key, f) for f in futures_of(a))
        chunks = [[held.get(k) for k in flatten(a.__dask_keys__())] for a in arrays]
        if any(f is None for c in chunks for f in c):
            return None
        rows = arrays[0].chunks[0]
        live = [i for i, r in enumerate(rows) if r]
        # a chunk goes where its largest block is (the others follow it if elsewhere)
        big = max(range(len(arrays)), key=lambda j: arrays[j].dtype.itemsize * int(
            np.prod(arrays[j].shape[1:])))
        where_key = (client.id, tuple(chunks[big][i].key for i in live))
        with self._lock:
            groups = self._where.get(where_key) if RUNNERS else None
        cached = groups is not None
        if groups is None:
            who = client.who_has([c[i] for c in chunks for i in live])
            groups = {}
            for i in live:
                where = who.get(chunks[big][i].key)
                if not where:
                    return None
                # a worker that holds every block of the chunk, where one does (its
                # runner can run it); else the largest block's (the chunk's task
                # fetches the others there, for this step and those that follow)
                every = set(where).intersection(*[who.get(c[i].key) or () for c in chunks])
                groups.setdefault(sorted(every or where)[0], []).append(i)
        order = sorted(groups.items())
        jobs = []
        for _, group in order:
            jobs.append([])
            for i in group:
                size = _effective(rows[i])
                weight = float(rows[i]) if self.reduce == "mean" else rows[i] / size
                jobs[-1].append((plan.by_size[size], i, int(rows[i]), weight))
        results = self._on_runners(client, step, order, jobs, chunks) if RUNNERS else None
        with self._lock:
            if results is not None:
                self._where[where_key] = groups
                self._where.move_to_end(where_key)
                while len(self._where) > PLANS:
                    self._where.popitem(last=False)
            else:
                self._where.pop(where_key, None)
        if results is None and cached:          # (where the chunks are now, first)
            return self._by_worker(client, plan, step, arrays)
        if results is None:
            token = uuid.uuid4().hex[:12]
            futures = [client.submit(
                worker.partials, step, job, *[c[i] for i in group for c in chunks],
                workers=[addr], allow_other_workers=True, pure=False,
                key=f"jittape-partials-{token}-{n}")
                for n, ((addr, group), job) in enumerate(zip(order, jobs))]
            results = client.gather(futures)
        parts = {}
        for (_, group), result in zip(order, results):
            parts.update(zip(group, result))
        return [parts[i] for i in live]

    def _on_runners(self, client, step, order, jobs, chunks):
        """The step's partial results as ``_by_worker``'s tasks would give them, each
        worker's from a call of its runner (the handler ``plugin.Graphs`` adds to the
        worker): the client asks the worker itself, which runs the chunks it holds,
        with no task for the scheduler to place and release (a step's fixed cost falls
        from that of two task round trips to that of one call). The call goes straight
        to the worker where the client's ``direct_to_workers`` says so, or, unset, where
        the cluster is a ``LocalCluster`` of this process (its workers are reachable);
        else through the scheduler's proxy, as distributed's actors do.

        None where the step must go as tasks: a call failed (the worker lost, or one
        without the handler), or a chunk is no longer where it was said to be (moved,
        lost). Tasks then run the step, Dask retrying what a lost worker held, and add
        up to the same bits: each chunk's part is the same kernel on the same rows
        whichever way it was asked for. An error of the loss on a worker is raised as
        its task would raise it."""
        import asyncio
        from distributed.protocol import to_serialize
        from .plugin import HANDLER
        direct = client.direct_to_workers
        if direct is None:      # (a cluster of this machine's processes: reachable)
            from distributed import LocalCluster
            direct = isinstance(getattr(client, "cluster", None), LocalCluster)
        step_s = to_serialize(step)

        async def call(addr, job, group):
            # (pickled: the keys are tuples, which msgpack would make lists)
            args = {"step": step_s, "jobs": to_serialize(job),
                    "keys": to_serialize([c[i].key for i in group for c in chunks])}
            if direct:
                return await getattr(client.rpc(addr), HANDLER)(**args)
            return await client.scheduler.proxy(msg=dict(args, op=HANDLER), worker=addr)

        async def calls():
            return await asyncio.gather(*[call(addr, job, group) for (addr, group), job
                                          in zip(order, jobs)], return_exceptions=True)

        replies = client.sync(calls)
        for r in replies:
            if isinstance(r, dict) and r.get("status") == "error":
                raise r["exception"]
        if all(isinstance(r, dict) and r.get("status") == "OK" for r in replies):
            return [r["result"] for r in replies]
        return None

    def _register(self, client, plan):
        """Give the plan's graphs to the cluster's workers, once per client: as a worker
        plugin, which the scheduler also gives to workers that join (or restart) later."""
        with self._lock:     # (steps from several threads: registered once)
            new = [d for d in plan.records if (client.id, d) not in self._registered]
            if not new:
                return
            from .plugin import Graphs
            client.register_plugin(
                Graphs([plan.records[d] for d in new]),
                name="jittape-" + hashlib.sha256("".join(new).encode()).hexdigest()[:16])
            self._registered.update((client.id, d) for d in new)


class _Plan:
    """One chunking's traced graphs and how a step uses them."""

    def __init__(self, records, by_size, slots, trace, checks, value_dtype, grad_dtypes,
                 grad_defs):
        self.records = records          # digest -> record (what a worker builds from)
        self.by_size = by_size          # a chunk's effective rows -> digest
        self.slots = slots
        self.implicit = list(trace.implicit)
        self.checks = checks
        self.value_dtype = np.dtype(value_dtype)
        self.grad_dtypes = [np.dtype(d) for d in grad_dtypes]
        self.grad_defs = grad_defs

    def implicit_values(self):
        return _implicit_inputs(self.implicit) if self.implicit else []


def _tree_sum(parts):
    """The partial results added by a pairwise tree over the chunks in order: its shape
    depends on their number only, so the sum is bitwise the same whoever computed the
    parts and whenever they arrived."""
    while len(parts) > 1:
        pairs = [worker.add(parts[k], parts[k + 1]) for k in range(0, len(parts) - 1, 2)]
        parts = pairs + ([parts[-1]] if len(parts) % 2 else [])
    return parts[0]


def _is_client(obj):
    try:
        from distributed import Client
    except ImportError:
        return False
    return isinstance(obj, Client)


def _zeros(a, rows):
    return np.zeros((rows,) + tuple(int(d) for d in a.shape[1:]), a.dtype)


def _effective(rows):
    """The rows a chunk's kernel runs on: one row is run twice (see the module's text)."""
    return 2 if rows == 1 else int(rows)


def _data_slots(args, key, data):
    """The kernel input position of each data argument (a leaf of its own)."""
    kinds = key[1]
    slots, pos, k = [], 0, 0
    for i, a in enumerate(args):
        td = key[0][i]
        count = 1 if td is None else td.num_leaves
        for _ in range(count):
            if kinds[pos] != "static":
                if i in data:
                    slots.append(k)
                k += 1
            pos += 1
    return slots


def _leaf_path(arg, k):
    """Where leaf ``k`` of an argument is, as indexing writes it (``["y"]``, ``[1]``),
    through dicts, lists and tuples (in the order of ``tree.flatten``)."""
    path = []

    def walk(x, k):                     # (found, leaves of x)
        if isinstance(x, dict):
            items = [(key, x[key]) for key in sorted(x, key=tree._sort_key)]
        elif isinstance(x, (list, tuple)) and not hasattr(x, "_fields"):
            items = list(enumerate(x))
        else:
            n = len(tree.leaves(x))
            return k < n, n
        count = 0
        for key, v in items:
            path.append(key)
            found, n = walk(v, k - count)
            if found:
                return True, None
            path.pop()
            count += n
        return False, count
    walk(arg, k)
    return "".join(f"[{p!r}]" for p in path) or "the argument itself"


def _captured_dask(fn, depth=3, seen=None):
    """(name, array) of a dask array that ``fn`` reads from its closure or the globals
    its code names, or that a Python function it reads that way does (``depth``
    calls down); None if there is none."""
    from dask.array import Array
    seen = set() if seen is None else seen
    while hasattr(fn, "fn") and not isinstance(fn, types.FunctionType):
        fn = fn.fn                                      # a compiled function's own
    fn = getattr(fn, "__func__", fn)
    code = getattr(fn, "__code__", None)
    if not isinstance(code, types.CodeType) or id(fn) in seen:
        return None
    seen.add(id(fn))
    found = []
    for name, cell in zip(code.co_freevars, getattr(fn, "__closure__", None) or ()):
        try:
            found.append((f"{name} (closure)", cell.cell_contents))
        except ValueError:                              # a cell not bound yet
            pass
    scope = getattr(fn, "__globals__", None) or {}
    codes, stack = [], [code]
    while stack:
        c = stack.pop()
        codes.append(c)
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    names = {i.argval for c in codes for i in dis.get_instructions(c)
             if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")}
    for name in sorted(names):
        if name in scope:
            found.append((f"{name} (global)", scope[name]))
    for name, value in found:
        if isinstance(value, Array):
            return name, value
    if depth:
        for _, value in found:
            if isinstance(value, types.FunctionType) and not (value.__module__ or "").startswith(
                    ("jittape", "numpy", "scipy", "dask")):
                inner = _captured_dask(value, depth - 1, seen)
                if inner is not None:
                    return inner
    return None


def _without_sizes(blob):
    """A serialized graph with the traced values of its sizes left out (their run-time
    expressions kept): two traces at different sizes that agree here are one graph."""
    def strip(x):
        if isinstance(x, dict):
            return {k: strip(v) for k, v in x.items() if not (k == "dim" and "expr" in x)}
        if isinstance(x, list):
            return [strip(v) for v in x]
        return x
    return json.dumps(strip(json.loads(blob)), sort_keys=True)


def _record(graph, exact, spec):
    """(digest, graph bytes, packing, spec): what a worker builds a kernel from. The
    workers' kernels are serial (``parallel`` off: see the module's text); a graph traced
    at one size that serves others is not keyed on exact sizes. The digest is what the
    plan and the workers' tables key the kernel on: a kernel for exact sizes keys its
    sizes too (two sizes' graphs may be one text but for them)."""
    saved = graph.parallel, graph.exact_sizes
    graph.parallel, graph.exact_sizes = False, exact
    try:
        blob = serialize.dumps(graph)
    finally:
        graph.parallel, graph.exact_sizes = saved
    p = graph.packing
    packing = None if p is None else (
        [i if i.__class__ is int else list(i) for i in p.inputs],
        [None if d is None else np.dtype(d).str for d in p.dtypes],
        [list(o) for o in p.outputs], p.names)
    # keyed without the traced sizes where the kernel reads them at run time: plans of
    # other chunkings share the workers' kernel
    text = (blob.decode() if exact else _without_sizes(blob)) + json.dumps(
        [packing, spec], sort_keys=True, default=str)
    return (hashlib.sha256(text.encode()).hexdigest()[:24], blob, packing, spec)


def _as_result(x, dtype):
    return x if isinstance(x, np.ndarray) and x.ndim else dtype.type(x)
