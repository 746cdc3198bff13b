"""The primitive registry: what an op is, and how it is applied.

A primitive is declared once (DESIGN.md rule 1) with
- its NumPy implementation (``impl``), used by the eager path;
- its shape/dtype rule (``abstract``), used by tracing and by error messages;
- one VJP rule per input, written with jittape ops so that the eager tape and the
  autodiff pass share it and higher derivatives come for free;
- what the backward pass must keep (``save``), so that a tape holds no more;
- the NumPy names it answers to, for ``__array_ufunc__``/``__array_function__``;
- test examples that the registry-driven tests run;
- a slot per backend for its lowering (filled by ``codegen``).

Ops that are compositions of primitives are registered with ``composite`` so that
the same registry-driven tests check them.
"""

import functools
import types
from typing import Any, Mapping

import numpy as np

from ..errors import NumericsError, ShapeError, UnsupportedError, at_user_line
from .. import config as _config, tensor as tensor_module
from ..tensor import (Tensor, Variable, UFUNC_TABLE, FUNCTION_TABLE, OperandHoldsTensors,
                      coerce_operand, complex_error, holds_tensor, to_array)
from ..ir import Var
from ..recording import ACTIVE_TAPES, TRACES, _local, current_trace, thread_tapes

_TENSOR_CLASSES = frozenset([Tensor, Variable])
# operands taken as they are (an ndarray too); an op that does not take complex values
# looks at its operands' dtypes (``_complex_operand``)
_PASS_THROUGH = frozenset([int, float, bool, np.float32, np.float64, np.int32,
                           np.int64, np.bool_])
_REAL_SCALARS = _PASS_THROUGH
_ndarray = np.ndarray
_PYTHON_SCALARS = frozenset([int, float, bool])
_new = object.__new__
_next_id = tensor_module._ids.__next__

REGISTRY = {}      # name -> Primitive
COMPOSITES = {}    # name -> Composite


class Aval:
    """An abstract array: shape and dtype, no values.

    The tape keeps an ``Aval`` instead of a tensor that a VJP rule only needs the
    shape of; tracing computes ``Aval`` results with each primitive's shape rule.
    """

    __slots__ = ("shape", "dtype")

    def __init__(self, shape, dtype):
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)

    @classmethod
    def of(cls, value):
        """The abstract value of a NumPy value (no conversions: the tape's fast path)."""
        a = _new(cls)
        a.shape = value.shape
        a.dtype = value.dtype
        return a

    @property
    def ndim(self):
        return len(self.shape)

    def __repr__(self):
        return f"Aval(shape={self.shape}, dtype={self.dtype.name})"

    def __eq__(self, other):
        return isinstance(other, Aval) and self.shape == other.shape and self.dtype == other.dtype

    __hash__ = None


def aval_of(x):
    """The abstract value of a tensor, array or Python scalar (scalars stay weakly typed)."""
    if isinstance(x, (Aval, Tensor)):
        return Aval(x.shape, x.dtype)
    if isinstance(x, (bool, int, float)):
        return x
    x = np.asarray(x)
    return Aval(x.shape, x.dtype)


def pack(value):
    """A list or tuple that holds tensors (at any depth) as one tensor, their stack
    (``np.array([x, y])``'s value, with the gradients to ``x`` and ``y``), so that an op
    given ``[x, x + 2]`` follows them; any other value as it is."""
    if value.__class__ not in (list, tuple) or not holds_tensor(value):
        return value
    parts = [(pack(v) if holds_tensor(v) else to_array(v)) if v.__class__ in (list, tuple)
             else v for v in value]
    # a Python number is an array of the join's dtype (weak: a float32 tensor stays float32)
    dtype = np.result_type(*[getattr(p, "dtype", p) for p in parts])
    parts = [np.asarray(p, dtype) if isinstance(p, (bool, int, float, complex)) else p
             for p in parts]
    # (the join family builds on this module: its stack is found in the registry)
    return REGISTRY["stack"].bind(*parts, axis=0)


class Example:
    """One test case of an op: its inputs and parameters.

    ``inputs`` holds, per positional input, a shape tuple (a random floating input
    that the gradient checks differentiate), a Python scalar, or ``Fixed(array)``
    (a non-differentiable input such as indices or a condition).
    """

    __slots__ = ("inputs", "params", "domain")

    def __init__(self, inputs, params, domain=None):
        self.inputs = inputs
        self.params = params
        self.domain = domain

    def __repr__(self):
        return f"Example({self.inputs}, {self.params})"


class Fixed:
    """A non-differentiable example input with a given value."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __repr__(self):
        return f"Fixed({np.asarray(self.value).tolist()})"


def ex(*inputs, domain=None, **params):
    return Example(inputs, params, domain)


KINDS = ("elementwise", "reduction", "view", "contraction", "opaque", "loop")
BACKENDS = ("cpu", "cuda")
CHEAP = 1          # cost of an op per element: about one instruction
COSTLY = 8         # a math function (exp, log, tanh, ...): tens of cycles an element


class OpRecord:
    """What an op of a graph or of a tape entry declares about itself.

    Passes and backends ask an op's record, never its name:

    - ``kind``: ``elementwise`` (one scalar expression per element, fusable: its
      ``lowerings["scalar"]``), ``reduction`` (a fold along axes: ``lowerings["reduce"]``
      is ``(init(dtype), step)``), ``view`` (a new shape over the same elements),
      ``contraction`` (matrix products), ``opaque`` (its own loop or kernel:
      ``lowerings[backend]``) or ``loop`` (a part of a generated loop, see
      ``control.py``);
    - ``accumulator(dtype)``: the dtype a reduction accumulates a result of ``dtype`` in;
    - ``cost``: ``CHEAP`` or ``COSTLY`` per element (threads pay off for costly loops);
    - ``backends``: the backends it lowers to (a test checks each has its lowering);
    - ``aliases``: the backends where its result may share its first input's memory
      rather than own an array (passes.memory);
    - ``keeps_order``: a view whose elements are its input's in the same (row-major)
      order, only the shape differs (a reshape);
    - ``foldable``: computed while tracing when no input is traced (not loop parts);
    - ``stacks``: its result is its inputs stacked along a new axis ``params["axis"]``
      (a kernel may take such a stack of its inputs packed: ``passes.packing``);
    - ``places``: its result is zeros of ``params["shape"]`` with its first input added
      at ``params["index"]`` (the gradient of indexing; ``passes.fuse`` reads such an op
      with ints and slices as a loop's element);
    - ``updates``: its result is its first input with part of it overwritten (the rest
      copied): a loop body may write it into that input's buffer where nothing reads the
      input after it (``codegen.cpu.Pool``).

    Slots for the transformations: ``vjp`` (one rule per input) or ``joint`` with
    ``joint_vjp`` (all inputs' cotangents at once), with ``holomorphic`` (the rules are
    written for real cotangents; the VJP step conjugates around them for a complex one)
    and ``broadcasts`` (the VJP step sums each rule's result back to its input's shape);
    ``jvp`` (forward mode) and ``batch``
    (vectorizing map) rules; ``regions``, the names of parameters that hold a body
    sub-graph (control-flow ops); ``simplify(node, producer)``, an algebraic rewrite
    (``passes.simplify``); ``row_of(node)``, for a view that can be one row of its first
    input along the first axis: that row's index, or None (``passes.packing``).
    """

    name = "op"
    kind = "opaque"
    cost = CHEAP
    backends = BACKENDS
    aliases = frozenset()
    keeps_order = False
    differentiable = True
    foldable = True
    stacks = False
    places = False
    updates = False
    row_of = None
    joint = False
    holomorphic = False
    broadcasts = False
    impl = None
    vjp = None
    jvp = None
    batch = None
    regions = ()
    simplify = None
    keep_inputs = True
    keep_out = True
    # records that lower set their own dict
    lowerings: Mapping[str, Any] = types.MappingProxyType({})

    def accumulator(self, dtype):
        return np.dtype(dtype)

    def __repr__(self):
        return f"<jittape op {self.name}>"


class Primitive(OpRecord):
    """An op of the registry; calling it applies it to tensors."""

    def __init__(self, name, impl, *, abstract, vjp=None, jvp=None, save=None, examples=(),
                 domain=(-2.0, 2.0), differentiable=True, numpy=(), ufunc=False,
                 kind="opaque", cost=CHEAP, aliases=(), keeps_order=False, accumulate=None,
                 backends=BACKENDS, public=True, complex=False, holomorphic=False, broadcasts=False):
        if name in REGISTRY:
            raise ValueError(f"primitive {name!r} is declared twice")
        if kind not in KINDS:
            raise ValueError(f"primitive {name!r}: kind {kind!r} is not one of {KINDS}")
        self.name = name
        self.impl = impl
        self.abstract = abstract
        self.vjp = tuple(vjp) if isinstance(vjp, list) else vjp
        # jvp: one forward-mode rule per input, ``rule(t, out, *args, **params)``, the
        # input's part of the output's tangent (``jvp.py``; None: the VJP transposed)
        self.jvp = tuple(jvp) if isinstance(jvp, list) else jvp
        # save: (which inputs the VJP rules read, whether they read the output); None: all.
        # The inputs part is a bool for all inputs or a tuple of bools (inputs past its
        # end, such as index arrays, are kept).
        self.keep_inputs, self.keep_out = (True, True) if save is None else save
        self.examples = list(examples)
        self.domain = domain
        self.differentiable = differentiable
        self.kind = kind
        self.cost = cost
        self.aliases = frozenset(aliases)
        self.keeps_order = keeps_order
        self.public = public         # jt.<name> when its module names it so (ops/names.py)
        # complex: the op takes complex operands and its rules follow the convention of
        # API.md (the gradient of a real loss in z = x + iy is dL/dx + i dL/dy); any
        # other op refuses a complex operand or result (UnsupportedError), never a number;
        # "eager": on the tape only, a traced complex operand refused
        self.complex = complex
        # holomorphic: the VJP rules are written for a real cotangent and the op is
        # holomorphic in each input, so a complex cotangent g goes back as
        # conj(rule(conj(g))) (vjp.input_cotangents does that once for all rules: the
        # rules themselves pay nothing for complex numbers on the eager tape)
        self.holomorphic = holomorphic
        # broadcasts: the inputs broadcast against each other and each VJP rule gives
        # its input's cotangent at the output's shape; the VJP step sums it back to the
        # input's shape (unbroadcast), so the rules are the op's diagonal JVP rules
        self.broadcasts = broadcasts
        self.backends = tuple(backends)
        if accumulate is not None:
            self.accumulator = accumulate
        self.lowerings = {}          # "scalar", "reduce" or a backend's name -> lowering
        # batch: the batching rule of jt.vmap, declared by batching.declare_rules (the
        # rule of the op's kind, or one of its own)
        self.batch = None
        REGISTRY[name] = self
        table = UFUNC_TABLE if ufunc else FUNCTION_TABLE
        for np_func in numpy:
            table[np_func] = self

    def __repr__(self):
        return f"<jittape primitive {self.name}>"

    def bind(self, *args, **params):
        """Apply the op: eagerly on NumPy values, recording on active tapes."""
        try:
            if TRACES:                  # some thread traces: this one?
                trace = current_trace()
                if trace is not None:
                    _check_traced_complex(self, args, trace)
                    out = trace.bind(self, args, params)
                    if getattr(out, "dtype", None) is not None and out.dtype.kind == "c":
                        _refuse_traced_complex(self, out.dtype, trace)
                    return out
            # The eager hot path, spelled out for one and two operands (no comprehension
            # frame): an op on small tensors costs about as much as this function.
            n = len(args)
            if n == 2:
                a, b = args
                cls = a.__class__
                a = a._value if cls in _TENSOR_CLASSES else (
                    a if cls is _ndarray or cls in _PASS_THROUGH else coerce_operand(a, self.name))
                cls = b.__class__
                b = b._value if cls in _TENSOR_CLASSES else (
                    b if cls is _ndarray or cls in _PASS_THROUGH else coerce_operand(b, self.name))
                values = (a, b)
                if not self.complex and (
                        (a.__class__ not in _REAL_SCALARS and _complex_operand(a))
                        or (b.__class__ not in _REAL_SCALARS and _complex_operand(b))):
                    raise complex_error(self.name, _complex_dtype(values))
            elif n == 1:
                a = args[0]
                cls = a.__class__
                values = (a._value if cls in _TENSOR_CLASSES else (
                    a if cls is _ndarray or cls in _PASS_THROUGH else coerce_operand(a, self.name)),)
                a = values[0]
                if not self.complex and a.__class__ not in _REAL_SCALARS and _complex_operand(a):
                    raise complex_error(self.name, _complex_dtype(values))
            else:
                values = [a._value if a.__class__ in _TENSOR_CLASSES else
                          (a if a.__class__ in _PASS_THROUGH or a.__class__ is _ndarray
                           else coerce_operand(a, self.name))
                          for a in args]
                if not self.complex and any(v.__class__ not in _REAL_SCALARS and _complex_operand(v)
                                            for v in values):
                    raise complex_error(self.name, _complex_dtype(values))
            try:
                out = self.impl(*values, **params) if params else self.impl(*values)
            except (ValueError, TypeError, IndexError) as err:
                raise self.explain(args, params, err) from None
            cls = out.__class__
            if cls is _ndarray:
                if out.ndim == 0:
                    out = out[()]
            elif cls in _PYTHON_SCALARS:          # an operator applied to Python numbers only
                out = np.asarray(out)[()]
            # real operands give a complex result only when a complex dtype is asked for
            if not self.complex and out.dtype.kind == "c":
                raise complex_error(self.name, out.dtype)
            result = _new(Tensor)              # Tensor._wrap, inlined: this runs for every op
            result._value = out
            result._id = _next_id()
            if _config._check_numerics:
                check_finite(self.name, out, values)
            if ACTIVE_TAPES:
                record(self, args, params, result)
            return result
        except OperandHoldsTensors:
            # a list or tuple of tensors (np.mean([x, y])): their stack, which the tapes
            # and the trace follow, rather than a NumPy array that drops their gradients
            return self.bind(*[pack(a) for a in args], **params)

    __call__ = bind

    def explain(self, args, params, err):
        """Turn a NumPy failure into an error naming the op, the shapes and the user's line."""
        avals = [aval_of(a) for a in args]
        try:
            self.abstract(*avals, **params)
        except ShapeError as shape_err:
            return shape_err
        except Exception:  # the rule itself could not judge; report NumPy's words
            pass
        shapes = ", ".join(f"{a.dtype} {a.shape}" if isinstance(a, Aval) else repr(a)
                           for a in avals)
        kind = ShapeError if isinstance(err, ValueError) else type(err)
        return kind(at_user_line(f"{self.name}: {err} (operands: {shapes})"))


# ---------------------------------------------------------------------------
# what tapes record of an op application (tapes: ``tape.GradientTape``)

def record(prim, args, params, result):
    """Called by ``Primitive.bind`` for each op applied while tapes record."""
    # Integer and bool values, and non-differentiable ops, carry no gradient; reading a
    # trainable variable still makes a tape watch it, as in TensorFlow.
    differentiable = prim.differentiable and result._value.dtype.kind in "fc"
    entry = None
    try:                               # (thread_tapes, inlined: this runs for every op)
        tapes = _local.tapes
    except AttributeError:
        tapes = thread_tapes()
    for tape in tapes:
        if tape._forward:                  # a ForwardAccumulator: the tangent, now
            if differentiable:
                tape._record(prim, args, params, result)
            continue
        watched = tape._watched
        hit = False
        for a in args:
            cls = a.__class__
            if cls is Tensor:
                if a._id in watched:
                    hit = True
            elif cls is Variable:
                if a._id in watched:
                    hit = True
                elif a._trainable and tape._watch_accessed:
                    tape._watch_variable(a)
                    hit = True
        if hit and differentiable:
            if entry is None:
                entry = _make_entry(prim, args, params, result)
            tape._entries.append(entry)
            watched.add(result._id)


def record_traced(prim, args, inputs, out, trace):
    """``record`` for an op applied in a traced function (``inputs`` are the node's Vars
    and literals, ``out`` its Var): tapes opened in the traced function keep the graph
    nodes that read what they watch. They watch Vars, and Variables by their id; a Var
    that is a read of a Variable counts as that Variable (the VJP rules of an inner
    tape's gradient see the read, not the Variable). A constant Tensor is watched by
    its id too: the trace may give each use of it a Var of its own (a NumPy scalar is
    a new constant at each use) and give two Tensors of one array the same Var, so the
    tape keeps the Vars of the watched Tensor's uses (``tape._constants``); another
    constant of the same array in a recorded op raises, as the tape cannot tell the
    two apart."""
    # a loop is kept too: differentiating through one raises (autodiff), not a zero
    differentiable = prim.differentiable and out.dtype.kind in "fc" or prim.kind == "loop"
    owners = trace.read_owner
    for tape in thread_tapes():
        if tape._forward:                  # a ForwardAccumulator: the tangent, now
            if differentiable:
                tape._record_traced(prim, args, inputs, out, trace)
            continue
        watched = tape._watched
        hit = False
        alias = None
        for a, v in zip(args, inputs):
            owner = a if isinstance(a, Variable) else (
                owners.get(v.id) if v.__class__ is Var else None)
            if owner is not None:
                if owner._id in watched:
                    hit = True
                elif owner._trainable and tape._watch_accessed:
                    tape._watch_variable(owner)
                    hit = True
            elif v.__class__ is Var and isinstance(a, Tensor) and a._value is not None:
                if a._id in watched:
                    reads = tape._constants.setdefault(a._id, [])
                    if v not in reads:
                        reads.append(v)
                    watched.add(v)        # the constant's Var, as the VJP rules see it
                    hit = True
                elif v in watched:
                    alias = a
            elif v.__class__ is Var and v in watched:
                hit = True
                if not isinstance(a, Tensor):
                    alias = a
        if hit and differentiable:
            if alias is not None:
                array = np.asarray(alias._value if isinstance(alias, Tensor) else alias)
                raise UnsupportedError(at_user_line(
                    f"GradientTape: {prim.name} reads a NumPy array ({array.dtype}"
                    f"{list(array.shape)}) that a tensor the tape watches holds too "
                    "(jt.constant does not copy); in a compiled function the two are one "
                    "value and their gradients would mix: use a copy (np.array(...)) for one "
                    "of them"))
            tape._entries.append(out.node)
            watched.add(out)


def _make_entry(prim, args, params, result):
    """(primitive, params, what its VJP rules need, output or None, (position, id) of each
    tensor input, output id)."""
    keep = prim.keep_inputs
    saved = args                  # copied only when an input is replaced
    inputs = []
    k = -1
    for a in args:
        k += 1
        cls = a.__class__
        if cls is Tensor:
            inputs.append((k, a._id))
            if keep is True:                         # (the common case: kept as it is)
                continue
        elif cls is Variable or isinstance(a, Tensor):
            inputs.append((k, a._id))
        else:
            continue
        if not (keep if keep.__class__ is bool else (keep[k] if k < len(keep) else True)):
            replacement = _new(Aval)                 # the VJP needs only its shape and dtype
            replacement.shape = a._value.shape
            replacement.dtype = a._value.dtype
        elif cls is Variable:
            replacement = _new(Tensor)                # the value read now, under the variable's id
            replacement._value = a._value
            replacement._id = a._id
        else:
            continue
        if saved is args:
            saved = list(args)
        saved[k] = replacement
    return (prim, params, saved, result if prim.keep_out else None, inputs, result._id)


def _complex_operand(v):
    """Whether an op's operand (a NumPy value, a Python number, a list) is complex."""
    if v.__class__ is complex:
        return True
    dtype = getattr(v, "dtype", None)
    if dtype is None:
        return isinstance(v, (list, tuple)) and np.iscomplexobj(v)
    return getattr(dtype, "kind", None) == "c"


def _complex_dtype(values):
    """The dtype of the first complex operand."""
    return next(np.asarray(v).dtype for v in values if _complex_operand(v))


def _check_traced_complex(prim, args, trace):
    """Complex operands of an op in a traced function (trace time only)."""
    for a in args:
        if isinstance(a, Tensor) or hasattr(a, "_var"):       # (a tracer's dtype, too)
            # (a constant folded while tracing may hold a Python number)
            value = getattr(a, "_value", None)
            dtype = np.asarray(value).dtype if isinstance(value, (int, float, complex)) \
                else a.dtype
        elif isinstance(a, complex):
            dtype = np.dtype(np.complex128)
        elif isinstance(a, (np.ndarray, np.generic)):
            dtype = a.dtype
        else:
            continue
        if dtype.kind == "c":
            _refuse_traced_complex(prim, dtype, trace)


def _refuse_traced_complex(prim, dtype, trace):
    if not prim.complex:
        raise complex_error(prim.name, dtype)
    if prim.complex == "eager":
        raise UnsupportedError(at_user_line(
            f"{prim.name}: complex values (dtype {np.dtype(dtype).name}) are supported on the "
            "eager tape only; compiled code has no complex implementation of it yet"))
    if trace.target == "cuda":
        raise UnsupportedError(at_user_line(
            f"{prim.name}: complex values (dtype {np.dtype(dtype).name}) are not supported "
            "with target='cuda' yet; compile for the CPU, or pass the real and imaginary "
            "parts as two real arrays"))


def check_finite(op, out, inputs=()):
    """``jt.config.check_numerics``: raise NumericsError if a floating-point result holds
    NaN or inf, naming the op and the user's line."""
    if out.dtype.kind not in "fc" or np.isfinite(out).all():
        return
    what = "NaN" if np.isnan(out).any() else "inf"
    inherited = any(isinstance(v, (np.ndarray, np.generic)) and v.dtype.kind in "fc"
                    and not np.isfinite(v).all() for v in inputs)
    raise NumericsError(at_user_line(
        f"check_numerics: {op} produced {what}"
        + (" (an input already held NaN or inf)" if inherited else "")))


class PerInput:
    """The VJP rules of a variadic op: ``rule(k, g, out, *inputs, **params)`` for input k."""

    def __init__(self, rule):
        self.rule = rule

    def __getitem__(self, k):
        return functools.partial(self.rule, k)


class Composite:
    """An op written as a composition of primitives, registered for the op tests."""

    def __init__(self, name, fn, examples, domain, call=None):
        if name in COMPOSITES or name in REGISTRY:
            raise ValueError(f"op {name!r} is declared twice")
        self.name = name
        self.fn = fn
        self.call = call or fn          # how the tests apply it to an example's inputs
        self.examples = list(examples)
        self.domain = domain
        self.differentiable = True
        COMPOSITES[name] = self


def composite(name=None, *, examples=(), domain=(-2.0, 2.0), numpy=(), call=None):
    """Register a composite op (and the NumPy functions it answers to)."""
    def register(fn):
        Composite(name or fn.__name__, fn, examples, domain, call)
        return numpy_dispatch(*numpy)(fn)
    return register


def public(fn=None, *, jt=True, numpy=False):
    """Declare a function a public op: ``jt.<name>`` (unless ``jt=False``), and
    ``jittape.numpy.<name>`` with ``numpy=True`` (a NumPy function of that name that
    takes no tensor, so it cannot dispatch: ``ones``, ``arange``). Primitives named as
    their module's attribute, and functions NumPy dispatches to, are public without it
    (``ops/names.py`` writes the namespaces)."""
    def mark(f):
        f.jt_public = jt
        f.numpy_public = numpy
        return f
    return mark if fn is None else mark(fn)


def numpy_dispatch(*np_funcs):
    """Decorator: on jittape tensors, these NumPy functions call the decorated function."""
    def register(fn):
        for np_func in np_funcs:
            FUNCTION_TABLE[np_func] = fn
        return fn
    return register


# ---------------------------------------------------------------------------
# shape and dtype rules shared by several op families

def broadcast_shapes(op, *shapes):
    """NumPy broadcasting of shapes; a ShapeError naming the op and the shapes otherwise."""
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for axis in range(-ndim, 0):
        size = 1
        for s in shapes:
            if len(s) >= -axis:
                d = s[axis]
                if d != 1:
                    if size != 1 and d != size:
                        shown = " and ".join(str(tuple(s)) for s in shapes)
                        raise ShapeError(at_user_line(
                            f"{op}: shapes {shown} cannot be broadcast together "
                            f"(axis {axis}: {size} vs {d})"))
                    if size != 1:
                        same_size(op, size, d)
                    size = d
        out.append(size)
    return tuple(out)


def same_size(op, a, b, why="operand shapes cannot be broadcast together"):
    """Sizes an op needs equal: equal now, and checked at run time if they may differ then.

    While tracing, two sizes known only at run time (``ir.Dim``s from different inputs)
    become a check in the generated code, so a later call with other sizes raises
    instead of reading out of bounds; ``why`` says what the sizes are to the op (the
    message: ``"<op>: <why>: sizes <a> != <b> in this call"``).
    """
    if TRACES and (hasattr(a, "expr") or hasattr(b, "expr")) and current_trace() is not None:
        current_trace().require_equal(op, a, b, why)


_DTYPE_CACHE = {}


def ufunc_dtype(op, ufunc, operands):
    """The dtype NumPy gives ``ufunc`` applied to these operands (weak Python scalars kept)."""
    key = (ufunc, tuple(type(o) if not isinstance(o, Aval) else o.dtype for o in operands))
    dtype = _DTYPE_CACHE.get(key)
    if dtype is None:
        probes = [np.empty(0, o.dtype) if isinstance(o, Aval) else o for o in operands]
        try:
            dtype = np.asarray(ufunc(*probes)).dtype
        except TypeError as err:
            kinds = ", ".join(str(o.dtype) if isinstance(o, Aval) else type(o).__name__
                              for o in operands)
            raise TypeError(at_user_line(f"{op}: unsupported operand dtypes ({kinds}): {err}"))
        _DTYPE_CACHE[key] = dtype
    return dtype


def shape_of(x):
    return x.shape if isinstance(x, (Aval, Tensor, np.ndarray, np.generic)) else ()


def normalize_axes(op, axis, ndim):
    """Axis argument -> sorted tuple of non-negative ints (None means all axes)."""
    if axis is None:
        return tuple(range(ndim))
    if ndim == 0 and isinstance(axis, (int, np.integer)) and axis in (0, -1):
        # NumPy's reductions (and squeeze) take a lone integer axis 0 or -1 on a 0-d
        # value as no axes at all; the tuples (0,) and (-1,) are out of bounds there
        return ()
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    out = []
    for a in axes:
        a = int(a)
        if not -ndim <= a < ndim:
            raise ShapeError(at_user_line(f"{op}: axis {a} is out of bounds for rank {ndim}"))
        out.append(a % ndim)
    if len(set(out)) != len(out):
        raise ShapeError(at_user_line(f"{op}: repeated axis in {axis}"))
    return tuple(sorted(out))

