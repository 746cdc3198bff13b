"""``Compiled``, a compiled function, and the public constructors ``function``,
``grad``, ``value_and_grad``, ``jacobian``, ``hessian``.

``Compiled`` is made of the parts in the modules beside this one: its signature keys
(``signature.Signatures``), its variant cache (``cache.Variants``), the tracing and
differentiation of its mode (``modes.Modes``); its ``__call__`` is the fast path
(``fastpath.dispatch``, replaced by the newest signature's generated caller), and
wrappers of one function are one object (``sharing``).
"""

import collections
import functools
import threading
from typing import Any, Callable, Optional, Protocol, Tuple, Union, overload

import numpy as np

from .. import config
from ..errors import at_user_line, kernel_messages
from ..codegen import build, interpret
from .cache import Variants
from .capture import Wrapper, _implicit_inputs, _kernel_inputs_text
from .fastpath import _fast_leaf, _fast_tree, caller, dispatch, generate
from .modes import _NJIT_OPTIONS, Modes
from .sharing import _SHARED, _SHARED_LOCK, _keep, _share_key
from .signature import Signatures, options

Lowered = collections.namedtuple("Lowered", "graph source python caller ir numpy",
                                 defaults=(None,))
Lowered.__doc__ = """What ``lower()`` returns: ``graph`` (the optimized op list as text),
``source`` (the generated module), ``python`` (the generated function run as plain
Python, without Numba: the flattened arguments in (the values read from outside them are
read at each call, as the compiled call reads them), kernel results out; for debugging)
and ``caller`` (the source of the generated Python that a call with these arguments
runs around the kernel, the fast path; None where such calls take the full path: static
arguments, or leaves that are not NumPy arrays and scalars); ``ir``, the optimized
``ir.Graph`` itself (``serialize.dumps`` ships it to another process); ``numpy``, the
graph run node by node with the ops' NumPy implementations, as calls run it while the
kernel compiles (``codegen.interpret``; as ``python`` takes and returns values), or None
where it cannot run that way."""

_MODES = ("grad", "value_and_grad", "jacobian", "hessian", "function")


class Compiled(Variants, Modes, Signatures, Wrapper):
    """A function compiled to a gradient (or value and gradient, jacobian, hessian)."""

    def __new__(cls, fn=None, mode=None, argnums=0, has_aux=False, target="cpu",
                static_argnums=()):
        # Wrappers of one function (same code, closure cells, globals, defaults) with the
        # same options are one object: ``jt.grad(loss)(w)`` written in a loop finds the
        # compiled signatures of the previous step (a lookup, no trace, no new class).
        key = _share_key(fn, mode, argnums, has_aux, target, static_argnums) \
            if cls is Compiled else None
        if key is not None:
            with _SHARED_LOCK:
                found = _SHARED.get(key)
                if found is not None:
                    _keep(key, found)
                    return found
        # A class of its own for each compiled function, so that ``_lookup`` can make the
        # newest signature's generated caller this object's ``__call__``: a call then
        # costs one Python frame around the native kernel.
        own = type(cls.__name__, (cls,), {"__module__": cls.__module__,
                                          "__qualname__": cls.__qualname__})
        self = object.__new__(own)
        self._share = key
        return self

    def __init__(self, fn, mode, argnums=0, has_aux=False, target="cpu", static_argnums=()):
        if "_stats" in self.__dict__:     # an existing wrapper of the same function (__new__)
            return
        if mode not in _MODES:
            raise ValueError(at_user_line(f"unknown mode {mode!r}"))
        if target not in ("cpu", "cuda"):
            raise ValueError(at_user_line(f"target={target!r}: use target='cpu' or target='cuda'"))
        if target == "cuda":
            from ..codegen import cuda_runtime
            cuda_runtime.available()
        if not callable(fn):
            raise TypeError(at_user_line(f"{mode}: expected a function, got {type(fn).__name__}"))
        self.fn = fn
        self.mode = mode
        self.single, self.argnums, self.static_argnums = options(mode, argnums, static_argnums)
        self._resolved = {}                   # positional argument count -> argnums
        self.has_aux = bool(has_aux)
        self.target = target
        self.name = getattr(fn, "__name__", "f")
        self._cache = {}
        self._fast = {}                   # argument classes -> generated caller
        self._hits = 0
        self._size_keyed = False
        self._lock = threading.RLock()
        self._warned = False              # the recompile warning is given once
        self._last_key = None
        # the wrapped function's name and docstring, not its __dict__: a compiled
        # function's (fn, mode, _cache) would overwrite this one's (jt.grad(jt.grad(f))
        # computed the inner gradient)
        functools.update_wrapper(self, fn, updated=())
        self._stats = dict(traces=0, compiles=0, hits=0, disk_hits=0, misses=0,
                           python_calls=0)
        config._COMPILED.add(self)
        if self._share is not None:
            with _SHARED_LOCK:
                _SHARED[self._share] = self
                _keep(self._share, self)

    # the fast path for NumPy arrays and scalars: the generated caller of the signature
    # last used with these argument classes, else the full path (``_call``)
    __call__ = dispatch

    def lower(self, *args):
        """The optimized graph and the generated source for these arguments;
        ``python``, the generated function run as plain Python: it takes the flattened
        arguments (0-d values as NumPy scalars) and, as a call of the compiled function
        does, reads the values from outside them (captured arrays and floats, variables
        of the enclosing scope, ``jt.random`` draws) at each call. It checks no guard and
        writes no variable back: it returns the kernel's results. ``caller``: the source
        of the generated fast path of such calls (see ``Lowered``)."""
        entry = self._entry_for(args)
        text = entry.graph.text()
        if entry.capture_text:               # what is read at each call, guarded, frozen
            text = text.rstrip("\n") + "\n" + entry.capture_text + "\n"
        if entry.implicit:                   # what kernel() takes after the arguments
            text = text.rstrip("\n") + "\n" + _kernel_inputs_text(entry)
        if self.target == "cuda":            # the driver is Python already
            run = entry.built.dispatcher
        else:                                # the generated module, run as plain Python
            run = generate(entry.source, f"python of {self.mode}({self.name})", {}, "kernel")
        fast = None
        if not self.static_argnums and all(_fast_leaf(a) or _fast_tree(a) for a in args):
            if entry.caller is None:
                entry.caller = caller(entry, args, f"{self.mode}({self.name})")
            fast = entry.caller.source
        consts, implicit, packing = tuple(entry.consts), entry.implicit, entry.graph.packing

        messages = entry.graph.messages

        def flat(run):
            def call(*args):
                inputs = list(args) + (_implicit_inputs(implicit) if implicit else [])
                if packing is not None:
                    inputs = packing.pack(inputs)
                with kernel_messages(messages):   # raised by its message's number
                    out = run(*inputs, *consts)
                return out if packing is None else packing.unpack(out)
            return call
        on_numpy = interpret.runner(entry.graph) if self.target == "cpu" else None
        return Lowered(text, entry.source, flat(run), fast, entry.graph,
                       on_numpy and flat(on_numpy))

    def kernel(self, *args):
        """The Numba dispatcher for these arguments' signature, callable from njit code
        (a compile of it in the background, ``config.tiered``, is waited for).

        It takes the flattened array (and Python float) arguments in order (0-d values
        as NumPy scalars), then the values read from outside them, which the caller
        passes: the current values of the variables the function reads from its
        enclosing scope, its captured arrays and floats, and arrays standing for its
        ``jt.random`` draws, in the order the ``# kernel inputs after the arguments``
        line of ``lower(*args).graph`` names them (none when it has no such line).
        ``lower(*args).python`` takes the arguments alone and reads the rest itself. It
        returns a tuple: ``(value, grad_0, ...)`` for value_and_grad, ``(grad_0, ...)``
        for grad, the flattened results for function; then the new values of assigned
        variables and the branch conditions (see ``lower().graph``). Graph constants that
        are arrays are bound into it. A graph large enough to be compiled in parts (its
        module says ``PARTS``) gives a Python function of the same convention instead,
        which calls the parts' dispatchers: not callable from njit code.
        """
        entry = self._entry_for(args)
        build.wait(entry.built)            # a compile in the background: its result
        if self.target == "cuda":          # the host driver that launches the kernels
            return entry.built.dispatcher
        if entry.user_kernel is None:      # (the caller's code may load without us)
            build.link_helpers(entry.built)
        if entry.built.kernel.parts:       # Python calling the parts
            if entry.user_kernel is None:
                entry.user_kernel = _in_parts(entry)
            return entry.user_kernel
        if entry.user_kernel is None:
            # a dispatcher of its own, free to compile for the caller's array layouts
            inner = build.new_dispatcher(entry.built)
            if entry.consts or entry.graph.packing is not None:
                inner = _flat_kernel(entry, inner)
            entry.user_kernel = inner
        return entry.user_kernel

    def __repr__(self):
        return f"<jittape compiled {self.mode} of {self.name}>"


def _in_parts(entry):
    """``kernel()`` of a kernel in parts: Python taking the flattened inputs (stacked
    where the kernel takes them so) and returning the flattened outputs, calling
    dispatchers of its own (free to compile for the caller's types and layouts, as a
    kernel's own ``kernel()`` is: the compiled function's parts compile nothing new)."""
    inner, consts, packing = build.new_dispatcher(entry.built), list(entry.consts), entry.graph.packing

    def call(*args):
        inputs = list(args) if packing is None else packing.pack(list(args))
        out = inner(*inputs, *consts)
        return out if packing is None else packing.unpack(out)
    return call


def _flat_kernel(entry, inner):
    """The kernel as ``kernel()`` gives it: the flattened inputs in, the flattened
    outputs out, the array constants bound (Numba freezes them into the code). Inputs the
    kernel takes stacked (``passes.packing``) are stacked here, and its stacked outputs
    split into their rows; Numba compiles this at its first call."""
    import numba
    packing = entry.graph.packing
    consts = [f"c{k}" for k in range(len(entry.consts))]
    namespace = dict(zip(consts, entry.consts), inner=inner, np=np)
    if packing is None:
        count = len(entry.graph.inputs)
        inputs = [f"a{k}" for k in range(count)]
        result = "out"
    else:
        count = sum(1 if i.__class__ is int else len(i) for i in packing.inputs)
        inputs = []
        for i, v in zip(packing.inputs, entry.graph.inputs):
            if i.__class__ is int:
                inputs.append(f"a{i}")
            else:
                parts = ", ".join(f"a{j}" for j in i)
                inputs.append(f"np.stack(({parts},))" if v.ndim > 1 else f"np.array(({parts},))")
        rows = [f"out[{j}]" if row is None else f"out[{j}][{row}]" for j, row in packing.outputs]
        result = "(" + ", ".join(rows) + ("," if len(rows) == 1 else "") + ")"
    args = [f"a{k}" for k in range(count)]
    source = (f"def flat({', '.join(args)}):\n"
              f"    out = inner({', '.join(inputs + consts)})\n"
              f"    return {result}\n")
    return numba.njit(**_NJIT_OPTIONS)(generate(source, "kernel of the flattened inputs",
                                                namespace, "flat"))


# -- the public constructors ---------------------------------------------------------------

Argnums = Union[int, Tuple[int, ...]]
_F = Callable[..., Any]


def _decorator(mode: str) -> Callable[..., Any]:
    def make(fn: Optional[_F] = None, argnums: Argnums = 0, has_aux: bool = False,
             target: str = "cpu", static_argnums: Argnums = ()) -> Any:
        if fn is None:
            return lambda f: Compiled(f, mode, argnums, has_aux, target, static_argnums)
        return Compiled(fn, mode, argnums, has_aux, target, static_argnums)
    make.__name__ = mode
    make.__doc__ = (f"Compile ``fn`` to its {mode.replace('_', ' ')} (see docs/api.md). The "
                    "arguments named in ``static_argnums`` are constants of the compiled "
                    "code (part of its signature, hashable) rather than run-time inputs.")
    return make


@overload
def function(fn: _F, target: str = ..., static_argnums: Argnums = ...) -> "Compiled": ...
@overload
def function(fn: None = ..., target: str = ...,
             static_argnums: Argnums = ...) -> Callable[[_F], "Compiled"]: ...


def function(fn: Optional[_F] = None, target: str = "cpu",
             static_argnums: Argnums = ()) -> Union["Compiled", Callable[[_F], "Compiled"]]:
    """Compile ``fn`` as it is: tapes, gradients and ``Variable.assign*`` inside it run
    in the compiled code, and variables it reads from its enclosing scope become inputs
    (their assignments are written back after each call). The arguments named in
    ``static_argnums`` are constants of the compiled code (part of its signature,
    hashable) rather than run-time inputs. See docs/api.md."""
    if fn is None:
        return lambda f: Compiled(f, "function", target=target, static_argnums=static_argnums)
    return Compiled(fn, "function", target=target, static_argnums=static_argnums)


class _Transform(Protocol):
    """What ``grad``, ``value_and_grad``, ``jacobian`` and ``hessian`` are: called on a
    function, a compiled function; called with options only, a decorator."""

    @overload
    def __call__(self, fn: _F, argnums: Argnums = ..., has_aux: bool = ...,
                 target: str = ..., static_argnums: Argnums = ...) -> "Compiled": ...
    @overload
    def __call__(self, fn: None = ..., argnums: Argnums = ..., has_aux: bool = ...,
                 target: str = ...,
                 static_argnums: Argnums = ...) -> Callable[[_F], "Compiled"]: ...


grad: _Transform = _decorator("grad")
value_and_grad: _Transform = _decorator("value_and_grad")
jacobian: _Transform = _decorator("jacobian")
hessian: _Transform = _decorator("hessian")
