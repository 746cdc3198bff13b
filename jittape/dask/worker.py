"""The workers' side of ``jt.dask``: graphs installed once per process, built into
kernels at their first chunk, and the tasks that run one chunk or a worker's chunks.

A record is ``(digest, graph bytes, packing, spec)``: the serialized graph
(``serialize.dumps``), how the kernel's inputs stack (``passes.packing``, as plain data),
and what the chunks must be (each data argument's kernel input slot, label, dtype and
trailing shape). ``_PROGRAMS`` keeps one ``Program`` per digest for the life of the
process, so a worker builds each kernel once: from the disk cache where another process
compiled it already (``JITTAPE_CACHE_DIR``, checked as ``codegen.build`` checks it),
else by compiling it. This module imports nothing of Dask.
"""

import threading

import numpy as np

from .. import serialize
from .._version import __version__
from ..codegen import build, cpu
from ..compiler.modes import _NJIT_OPTIONS
from ..errors import (KERNEL_ERRORS, ShapeError, SignatureMismatch, SizeMismatch, at_line,
                      kernel_messages)
from ..passes.packing import Packing

PROGRAMS = {}                   # digest -> Program, in this process (the digest keys the
                                # sizes of a kernel traced for exact sizes: see _record)
_LOCK = threading.Lock()


def install(record):
    """Keep ``record``'s program in this process (built at its first chunk)."""
    with _LOCK:
        if record[0] not in PROGRAMS:
            PROGRAMS[record[0]] = Program(record)


class Program:
    """A record's kernel in this process, built at its first chunk."""

    def __init__(self, record):
        self.digest, self.blob, self.packing, self.spec = record
        self.lock = threading.Lock()
        self.built = None
        self.graph = self.consts = self.messages = None

    def _build(self):
        graph = serialize.loads(self.blob)
        if self.packing is not None:
            inputs, dtypes, outputs, names = self.packing
            graph.packing = Packing([i if i.__class__ is int else tuple(i) for i in inputs],
                                    [None if d is None else np.dtype(d) for d in dtypes],
                                    [tuple(o) for o in outputs], names)
        # the module the client's own compile of this graph would generate (the same
        # code: the same entry of the disk cache)
        _, func, code, messages, parts = cpu.generate(
            graph, f"value_and_grad of {self.spec['what']}", __version__)
        built = build.build(code, func, build.digest(code, "cpu"), _NJIT_OPTIONS, parts)
        self.consts = [c.value for c in graph.consts if c.value.ndim > 0]
        self.messages = messages
        self.graph = graph
        return built

    def ensure_built(self):
        if self.built is None:
            with self.lock:
                if self.built is None:
                    self.built = self._build()
        return self.built

    def run(self, inputs, index, rows, arrays, where):
        """The kernel's flattened outputs on chunk ``index`` (``rows`` rows) of the data
        ``arrays``; ``inputs``: the other kernel inputs, None in the data's slots."""
        spec = self.spec
        inputs = list(inputs)
        for slot, label, dtype, trailing, a in zip(spec["slots"], spec["labels"],
                                                  spec["dtypes"], spec["trailing"], arrays):
            a = check_chunk(a, spec["what"], label, index, rows, np.dtype(dtype),
                            tuple(trailing), where)
            # one row runs as two equal rows: the kernel's axis is not 1 (see jt.dask)
            inputs[slot] = np.concatenate([a, a]) if rows == 1 else a
        built = self.ensure_built()
        packing = self.graph.packing
        if packing is not None:
            inputs = packing.pack(inputs)
        inputs += self.consts
        kernel = built.kernel
        try:
            with kernel_messages(self.messages):
                if kernel.called:
                    out = build.call_shared(kernel.dispatcher, inputs, kernel.parts)
                else:
                    out, _ = build.first_call(built, inputs)
        except SizeMismatch as err:
            # the chunk's rows against a size of another argument (a NumPy array whose
            # rows belong with the data's: every row-aligned argument must be a dask array)
            ran = "1 row, run as 2 equal rows" if rows == 1 else f"{rows} rows"
            raise ShapeError(at_line(
                f"{spec['what']}: on chunk {index} ({ran}) of the data, sizes of "
                f"the loss's ops disagree; an argument that is not a dask array is the same "
                f"on every chunk, so its sizes cannot follow the chunk's rows (make it a dask "
                f"array chunked like the data): {err}", where)) from None
        except SignatureMismatch as err:
            raise ShapeError(at_line(
                f"{spec['what']}: the kernel for chunk {index} ({rows} rows) was traced for "
                f"other shapes of its inputs: {err}", where)) from None
        except KERNEL_ERRORS as err:
            raise _located(err, f"{spec['what']}: chunk {index}: {err}", where) from None
        if packing is not None:
            out = packing.unpack(out)
        return out


def _located(err, message, where):
    """``err`` again, as its own type, with ``message`` naming the user's line; a type
    whose constructor takes other arguments keeps its own message (with a note naming
    the chunk and the line, which the traceback shows)."""
    message = at_line(message, where)
    try:
        return type(err)(message)
    except Exception:
        if hasattr(err, "add_note"):
            err.add_note(message)
            return err
        return RuntimeError(message)


def check_chunk(a, what, label, index, rows, dtype, trailing, where):
    """The chunk as the kernel takes it (a contiguous NumPy array), or an error naming
    the chunk, the argument and the shapes or dtypes."""
    if not isinstance(a, np.ndarray):
        if not hasattr(a, "__array__"):
            raise TypeError(at_line(f"{what}: chunk {index} of {label} is a {type(a).__name__}, "
                               "not an array", where))
        a = np.asarray(a)
    if a.dtype != dtype:
        raise TypeError(at_line(f"{what}: chunk {index} of {label} has dtype {a.dtype}, shape "
                           f"{a.shape}; the dask array says dtype {dtype} (its meta does not "
                           "match what its chunks compute)", where))
    if a.shape != (rows,) + trailing:
        raise ShapeError(at_line(f"{what}: chunk {index} of {label} has shape {a.shape}; the dask "
                            f"array's chunks say {(rows,) + trailing}", where))
    return np.ascontiguousarray(a)


def partial(digest, record, step, index, rows, weight, *arrays):
    """Task: one chunk's ``(value, [gradient leaves])`` on this worker, times
    ``weight``. ``record`` is None where the worker was given it before (a plugin, or
    this very process)."""
    program = PROGRAMS.get(digest)
    if program is None:
        if record is None:
            raise RuntimeError(f"jt.dask: this worker has no graph {digest}: the plugin that "
                               "carries it was not installed here")
        install(record)
        program = PROGRAMS[digest]
    inputs, implicit, where = step
    out = program.run(list(inputs) + list(implicit), index, rows, arrays, where)
    value, grads = out[0], list(out[1:])
    if weight != 1.0:
        value = value * np.result_type(value).type(weight)
        grads = [g * np.result_type(g).type(weight) for g in grads]
    return value, grads


def partials(step, jobs, *arrays):
    """Task: the partial results of one worker's chunks, each as ``partial`` gives it,
    in the order of ``jobs`` (``(digest, index, rows, weight)`` each, in chunk order);
    ``arrays``: each chunk's data arrays, chunk after chunk."""
    n = len(arrays) // len(jobs)
    return [partial(digest, None, step, index, rows, weight, *arrays[k * n:(k + 1) * n])
            for k, (digest, index, rows, weight) in enumerate(jobs)]


def add(a, b):
    """Two partial results added: a node of the fixed pairwise tree, which the client
    adds once the chunks' results are back."""
    return a[0] + b[0], [x + y for x, y in zip(a[1], b[1])]
