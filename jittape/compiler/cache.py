"""The variant cache in memory: per compiled function, signature key -> variants.

A call looks up its signature key (``signature``) in a dict. On a miss it traces and
compiles a variant (``modes``), built through the disk cache (``codegen.build``, which
also keeps one kernel per generated module for the whole process).

Python control flow on a traced value (``if jt.sum(x) > 0:``) takes the branch that the
value has in the call being traced (computed with the primitives' NumPy
implementations) and records a guard: the condition is an output of the kernel, and a
call where it comes out otherwise traces and compiles that variant, kept beside the
first (``config.max_variants``). A ``while`` loop is unrolled per trip count
(``config.max_guards``). Captured values that another variant was traced for are
guards too (``capture._capture_checks``).

A signature whose kernel finds sizes it cannot serve (a size computed from the
arguments' was 1 when it was traced, or code was generated for the sizes seen) gets a
variant traced for this call's sizes, kept beside the first (``_size_variant``); when
that trace fails, its error names the op and the shapes. Only a variant that cannot
serve the sizes it was traced with makes the function keyed on exact sizes
(``_retrace_exact``).
"""

import collections
import os
import sys
import time

import numpy as np

from .. import config, ir
from ..codegen import build, interpret, python_tier
from ..errors import (warn_at_user, JittapeError, OutOfRange, RecompileWarning, ShapeError, SignatureMismatch,
                      SizeMismatch, at_user_line, caller_frames, kernel_messages)
from ..recording import TRACES, current_trace
from . import fastpath
from .capture import _checks_hold, _implicit_inputs, _reuse
from .fastpath import _classes, _fast_leaf, _fast_tree, generate
from .signature import _signature_change

CacheInfo = collections.namedtuple("CacheInfo",
                                   "traces compiles hits disk_hits misses python_calls")

_ndarray = np.ndarray
# what the generated module raises in its opening checks, alike as Python and compiled
_CHECKS = (SignatureMismatch, SizeMismatch, OutOfRange)
# the share of the time since a kernel's compile began that calls may run the generated
# module as Python (``Variants._python_turn``); calls that run the graph on NumPy are not
# held back
PYTHON_SHARE = 0.25
# arguments of more elements than this wait for the kernel: their first call as Python
# (a statement per element and op) would take about as long as the compile
PYTHON_ELEMENTS = 2 ** 18
PYTHON_WORK = 2 ** 20
# on one core, a compile in the background starts once the calls of its kernel have run
# this long on NumPy (``_start_compile``)
ONE_CORE_HOT = 0.25


def _one_core():
    """Whether this process may run on one core only (its CPU affinity: ``taskset``, a
    container's cpuset), where a compile in the background shares the callers' core."""
    affinity = getattr(os, "sched_getaffinity", None)
    if affinity is None:
        return False
    try:
        return len(affinity(0)) == 1
    except OSError:
        return False


def _start_compile(entry):
    """Whether a call that ran ``entry``'s graph on NumPy (tiered) starts its kernel's
    compile in the background now. Where the process has a core to spare, at once. On
    one core the compile takes half of it from the calls while it runs (the GIL and the
    core shared): a kernel that compiles for seconds would make a run of a fraction of a
    second on NumPy take twice as long, and the process wait for it at exit. There it
    starts once the calls have run ONE_CORE_HOT seconds on NumPy (a run that needs the
    kernel), so that a short run ends at NumPy's speed and a long one starts its compile
    at most that much later. jt.minimize's Adam, 1000 steps on a Rosenbrock function in
    10^4 dimensions, pinned to one core: 0.48 s to the answer from a cold start,
    0.17-0.24 s with this (JAX: 0.25-0.32 s)."""
    return entry.python_time >= ONE_CORE_HOT or not _one_core()


def _python_work(nodes, trips=1):
    """How many elements the generated code computes, loops' bodies once per step (a
    while loop's: 16 steps): about what its plain Python costs."""
    total = 0
    for node in nodes:
        size = 1
        for d in node.out.shape:
            size *= int(d)
        total += trips * size
        for name in node.prim.regions:
            total += _python_work(node.params[name].nodes,
                                  trips * int(node.params.get("length", 16)))
    return total


class _Entry:
    """One compiled variant of a signature: the kernel and how to call it.

    Kernel inputs: the flattened arguments, the values read from outside them
    (``implicit``, in the order of the graph's inputs: the variables the function reads
    from its enclosing scope, ``captures``; its captured arrays and floats; its
    ``jt.random`` draws), the array constants. Kernel outputs: the user's results
    (``pack`` makes them the user's structure), the new values of assigned variables
    (``writes``: output index, flattened argument position or the captured Variable),
    the branch conditions (``guards``: output index, the value the variant was traced
    with). ``checks``: what the captured values must be for this variant (see
    ``capture._capture_checks``).
    """

    def __init__(self, graph, source, built, consts, pack, writes, guards):
        self.graph = graph
        self.source = source
        self.built = built
        self.kernel = built.dispatcher
        self.consts = consts
        self.pack = pack
        self.captures = []
        self.writes = list(writes)
        self.guards = list(guards)
        self.called = False
        # what runs while the kernel compiles in the background (tiered calls): the graph
        # on NumPy (interpret.Run) or the generated module as Python; None until the
        # first call decides, False where it waits
        self.python = None
        self.requested = False        # its first call asked for that compile
        self.started = False          # and started it
        self.python_time = 0.0        # seconds its calls ran so
        self.user_kernel = None       # what kernel() returns, made on demand
        self.caller = None            # the generated fast-path call (fastpath.caller)
        self.implicit = []
        self.checks = []
        self.capture_text = ""


class _Miss:
    def __repr__(self):
        return "<a guard did not hold>"


_MISS = _Miss()


class Variants:
    """The part of ``compiled.Compiled`` that finds, makes and runs the variants of a
    call's signature. It keeps ``_cache`` (signature key -> variants, the one used last
    first), ``_fast`` (argument classes -> generated caller), ``_stats``, ``_hits``,
    ``_size_keyed``, ``_lock``; it traces and compiles through ``_compile`` (``modes``)."""

    def _call(self, args):
        """The full path: flatten the arguments, find their signature's variant whose
        guards hold (tracing and compiling one if none does), run it."""
        if TRACES and current_trace() is not None:   # called while tracing
            return self._inline(args)
        try:
            return self._lookup(args)
        except SizeMismatch:
            if self._size_keyed:
                raise
            return self._retrace_exact(args)

    def _retrace_exact(self, args):
        """A variant traced for this call's sizes does not serve them (see
        ``_size_variant``): from now on the function is keyed on exact sizes, as when
        tracing reads a size, and this call traces for its own sizes. When that trace
        fails too, the arguments do not fit the function: its error names the op and the
        shapes."""
        with self._lock:
            saved = self._cache, self._size_keyed, dict(self._stats)
            self._cache, self._size_keyed = {}, True
            self._forget_callers()
            try:
                return self._lookup(args)
            except BaseException as err:       # nothing of the failed trace is kept
                self._cache, self._size_keyed = saved[:2]
                self._stats.update(saved[2])
                self._forget_callers()
                if isinstance(err, ShapeError):
                    raise SizeMismatch(str(err)) from None
                raise

    def _lookup(self, args):
        key, leaves = self._key(args)
        entry, out, mismatch = None, _MISS, False
        for entry in self._cache.get(key, ()):
            called = entry.called
            try:
                out = self._run(entry, leaves, key[1])
            except SizeMismatch:         # traced for other sizes: another variant may fit
                mismatch = True
                continue
            if out is not _MISS:
                self._took(entry, called)
                break
        if out is _MISS:
            if mismatch:
                entry, out = self._size_variant(key, args, leaves)
            else:
                entry, out = self._new_variant(key, args, leaves)
            key, leaves = self._key(args)
        variants = self._cache[key]
        if variants[0] is not entry:          # the variant used last is tried first
            variants.remove(entry)
            variants.insert(0, entry)
            self._forget_callers()
        result = entry.pack(out)
        # the fast path calls the kernel: not while it compiles in the background
        if (entry.called and not self.static_argnums
                and all(_fast_leaf(a) or _fast_tree(a) for a in args)):
            caller = entry.caller
            if caller is None:
                caller = entry.caller = fastpath.caller(entry, args, f"{self.mode}({self.name})")
            type(self).__call__ = caller          # the latest signature: the fastest path
            self._fast[_classes(args)] = caller
        return result

    def _run(self, entry, leaves, kinds, trust_guards=False):
        """Run one compiled variant: its outputs, or _MISS when a guard does not hold.
        Assigned variables are written back only when the guards hold."""
        if entry.checks and not trust_guards and not _checks_hold(entry.checks):
            return _MISS                  # captured values this variant was not traced for
        inputs = _inputs(leaves, kinds)
        if entry.implicit:
            inputs += _implicit_inputs(entry.implicit)
        packing = entry.graph.packing
        if packing is not None:           # inputs the kernel takes stacked
            inputs = packing.pack(inputs)
        try:
            with kernel_messages(entry.graph.messages):     # raised by their numbers
                out = self._call_kernel(entry, inputs)
        except SizeMismatch as err:       # the kernel checks its sizes at once: which one
            message = ir.failed_check(entry.graph, lambda k: np.shape(inputs[k]))
            raise SizeMismatch(message or str(err)) from None
        if packing is not None:
            out = packing.unpack(out)
        if not trust_guards:
            for k, expected in entry.guards:
                if bool(out[k]) is not expected:
                    return _MISS
        for k, target in entry.writes:
            variable = leaves[target] if target.__class__ is int else target
            value = out[k]
            variable._value = value if value.__class__ is _ndarray else variable.dtype.type(value)
        return out

    def _call_kernel(self, entry, inputs):
        """The kernel's outputs; its first call compiles it (or loads it from the disk).
        Tiered (``config.tiered``): while it compiles in the background, calls run the
        graph on NumPy (or the generated module as Python); the first call after the
        compile takes the kernel. The first call runs before the compile starts: its
        result does not wait for the GIL that Numba's compiler holds."""
        if entry.called:
            return _execute(entry, inputs)
        if config.tiered and (entry.python or entry.python is None and self._tier(entry, inputs)):
            if not entry.requested:
                out = self._call_python(entry, inputs)
                if out is not _MISS:           # (else this call compiles, as without tiers)
                    if _start_compile(entry):
                        with self._lock:
                            if not entry.requested:
                                entry.requested = True
                                entry.started = build.compile_in_background(
                                    entry.built, inputs + list(entry.consts))
                    return out
            elif self._python_turn(entry):
                out = self._call_python(entry, inputs)
                if out is not _MISS:
                    return out
        with self._lock:               # the first call compiles (or loads) the kernel
            if entry.called:           # another thread did it while this one waited
                self._hits += 1
                return _execute(entry, inputs)
            # (a compile in the background: waits for it; one that failed: compiles
            # again here, and raises what it raises)
            out, compiled = build.first_call(entry.built, inputs + list(entry.consts))
            entry.kernel = entry.built.dispatcher
            if self.target == "cpu":
                if hasattr(entry.kernel, "disable_compile"):   # (a kernel in parts: Python)
                    entry.kernel.disable_compile()     # other types: other signatures
                compiled = compiled or (entry.started and entry.built.kernel.background_compiled)
            else:       # the kernels compile at their first launch, from Numba's
                compiled = compiled and not entry.built.from_disk   # cache if it has them
            entry.called = True
            if compiled:
                self._stats["compiles"] += 1
            elif entry.built.from_disk:
                self._stats["disk_hits"] += 1
            return out

    def _tier(self, entry, inputs):
        """At the first call of ``entry``'s kernel: whether calls run its graph on NumPy
        while the kernel compiles in the background (``_call_kernel`` starts it). Not for CUDA, nor
        for a kernel that has run in the process or that the disk cache holds (loading
        is quick). The graph runs node by node with the ops' NumPy implementations
        (``codegen.interpret``) unless its run would be long; a graph with records that
        have none runs the generated module as plain Python, unless its arguments hold
        more than ``PYTHON_ELEMENTS`` elements or its values more than ``PYTHON_WORK``,
        its loops' steps counted (a long loop in Python takes longer than its compile)."""
        with self._lock:
            if entry.python is None:
                entry.python = False
                if self.target != "cpu" or build.loadable(entry.built):
                    return False
                python = interpret.runner(entry.graph)
                if (python is None and sum(np.size(a) for a in inputs) <= PYTHON_ELEMENTS
                        and _python_work(entry.graph.nodes) <= PYTHON_WORK):
                    try:
                        python = generate(entry.source, f"python of {self.mode}({self.name})",
                                          python_tier.python_globals(), "kernel")
                    except Exception:         # (then the kernel's compile says what)
                        return False
                if python is not None:       # (the compile starts after its first run)
                    entry.python = python
            return bool(entry.python)

    def _python_turn(self, entry):
        """Whether this call runs as Python, its kernel compiling. A run of the graph on
        NumPy is a step of the caller's loop at NumPy's speed: it runs, sharing the GIL
        with Numba's compiler (on one core, about half the time each). A run of the
        generated module as Python is a hundred times slower and holds the GIL that the
        compiler needs: such calls run for at most ``PYTHON_SHARE`` of the time since the
        compile began, and a call beyond it waits (without the GIL) until it is within
        it, or until the kernel is ready."""
        built = entry.built
        if not isinstance(entry.python, interpret.Run):
            wait = entry.python_time / PYTHON_SHARE - (time.perf_counter() - built.kernel.started)
            if wait > 0:
                build.wait(built, wait)
        return build.compiling(built)

    def _call_python(self, entry, inputs):
        """The outputs of ``entry``'s module run as Python; ``_MISS`` where it raised other
        than the checks of the arguments' shapes, sizes and indices that open the module
        (the kernel raises those alike): that call waits for the kernel, and the kernel
        decides what it returns or raises."""
        start = time.perf_counter()
        try:
            with np.errstate(all="ignore"):        # the kernel's floats: no warnings
                out = entry.python(*inputs, *entry.consts)
        except _CHECKS:
            raise
        except Exception:
            return _MISS
        finally:
            entry.python_time += time.perf_counter() - start
        return out

    def _size_variant(self, key, args, leaves):
        """No variant of the signature serves these sizes, though the signature is the
        same: a size computed from the arguments' sizes was 1 when they were traced and is
        not now, or code generation chose for the sizes it saw (a row held in registers).
        A variant traced for these sizes is kept beside them. When that trace fails, the
        arguments do not fit the function: its error names the op and the shapes, and
        nothing of it is kept."""
        with self._lock:
            stats = dict(self._stats)
            try:
                return self._new_variant(key, args, leaves, sizes=True)
            except ShapeError as err:
                self._stats.update(stats)
                raise SizeMismatch(str(err)) from None

    def _new_variant(self, key, args, leaves, sizes=False):
        """Trace and compile the variant these arguments take, and run it (under the
        lock: a thread that waited for another's compile first tries what that one
        made)."""
        with self._lock:
            for entry in self._cache.get(key, ()):
                called = entry.called
                try:
                    out = self._run(entry, leaves, key[1])
                except SizeMismatch:
                    continue
                if out is not _MISS:          # another thread compiled it meanwhile
                    self._took(entry, called)
                    return entry, out
            entry, key, leaves = self._add_variant(args, leaves, key, sizes)
            out = self._run(entry, leaves, key[1], trust_guards=True)
            self._took(entry, False)
            return entry, out

    def _took(self, entry, called):
        """Count a call that took ``entry``: a hit where its kernel had run before
        (``called``), a call on the Python tier where the kernel has not run yet."""
        if called:
            self._hits += 1
        elif not entry.called:
            self._stats["python_calls"] += 1

    def _add_variant(self, args, leaves, key, sizes):
        """Trace and compile the variant these arguments take, and keep it first among
        its signature's (under the lock). Returns (entry, key, leaves): the key is on
        exact sizes if tracing read one."""
        entry = self._compile(args, leaves, key)
        key, leaves = self._key(args)
        variants = self._cache.setdefault(key, [])
        same = [e for e in variants if e.source == entry.source]
        if same:
            # captured values changed that do not change the graph; or the kernel
            # computes a branch condition differently from NumPy while tracing
            # (rounding at the threshold): the variant traced for these values is
            # the right one, whatever its guards say
            entry = _reuse(same[0], entry)
            if entry is not same[0]:
                variants[variants.index(same[0])] = entry
            self._forget_callers()
        else:
            if len(variants) >= config.max_variants:    # drop the variants traced for
                variants[:] = [e for e in variants       # captured values now gone
                               if not e.checks or _checks_hold(e.checks)]
            if len(variants) >= config.max_variants:
                raise JittapeError(at_user_line(
                    f"{self.mode}({self.name}): more than {config.max_variants} variants "
                    "of one signature: each different path through Python branches on "
                    "traced values (if/while) compiles a variant, and so do sizes that "
                    "the variants traced before cannot serve. Compute the choice "
                    "with jt.where, or raise jt.config.max_variants"))
            variants.insert(0, entry)
        self._note_compile(key, sizes)
        return entry, key, leaves

    def _entry_for(self, args):
        """The variant these arguments take, compiled but not run. Without guards a
        signature has one; with guards, tracing with these values tells which."""
        key, leaves = self._key(args)
        variants = self._cache.get(key)
        if (variants and len(variants) == 1 and not variants[0].guards
                and (not variants[0].checks or _checks_hold(variants[0].checks))):
            return variants[0]
        with self._lock:
            return self._add_variant(args, leaves, key, False)[0]

    def _note_compile(self, key, sizes):
        """Warn once when the function has compiled more than
        ``config.recompile_warning`` variants, naming what changed in the last."""
        last, self._last_key = self._last_key, key
        limit = config.recompile_warning
        if self._warned or limit is None or self._stats["misses"] <= limit:
            return
        self._warned = True
        frame = caller_frames(sys._getframe(1))[0]
        message = (f"{self.mode}({self.name}) has traced and compiled "
                   f"{self._stats['misses']} times (more than jt.config.recompile_warning = "
                   f"{limit}); the last time {_signature_change(last, key, sizes)}. Pass "
                   "values that change as NumPy arrays or scalars (run-time inputs), keep "
                   "dtypes and ranks fixed, or compute branches with jt.where")
        warn_at_user(message, RecompileWarning, frame)

    def _forget_callers(self):
        self._fast.clear()
        if "__call__" in type(self).__dict__:
            del type(self).__call__

    def _background_compiles(self):
        """The variants' kernels compiling in the background now (tiered calls run their
        graphs meanwhile): what ``jt.minimize`` sizes its chunks by, and may wait for."""
        if not build.running():        # (the usual case, twice per jt.minimize chunk)
            return []
        with self._lock:
            entries = [e for variants in self._cache.values() for e in variants]
        return [e.built for e in entries
                if e.started and not e.called and build.compiling(e.built)]

    def cache_info(self):
        """How often the function traced, compiled, loaded its kernels from the disk
        cache, took a compiled variant (``hits``), and took a variant run on NumPy (or as
        Python) while its kernel compiled (``python_calls``, ``config.tiered``)."""
        return CacheInfo(**dict(self._stats, hits=self._hits))

    def cache_clear(self):
        """Forget the compiled signatures (the disk cache stays), and whether the
        function is keyed on exact sizes."""
        with self._lock:
            self._cache.clear()
            self._size_keyed = False
            self._forget_callers()


def _execute(entry, inputs):
    """Call an entry's kernel on arguments of its signature; Numba compiles a new
    specialization only for a new memory layout (non-contiguous arrays)."""
    return build.call_shared(entry.kernel, list(inputs) + list(entry.consts),
                             entry.built.kernel.parts)


def _inputs(leaves, kinds):
    out = []
    for leaf, kind in zip(leaves, kinds):
        if kind == "array":
            out.append(leaf if leaf.ndim else leaf[()])
        elif kind == "variable":
            out.append(leaf._value)
        elif kind != "static":                  # a NumPy scalar, a Python float, a GPU array
            out.append(leaf)
    return out
