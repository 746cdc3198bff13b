"""A graph fuzzer: random programs built from the op registry, each checked four ways.

Every program is a small loss function written with jittape's public API (printed as
Python source when it fails, so a failure can be pasted into a file and rerun). It
mixes broadcasting, size-1 and zero-size dimensions, float32/float64 and integer
inputs, views (slices, transposes, reshapes, new axes, int and int-array indexing),
reductions over random axes, matmul/dot/einsum, a Python ``if`` on a traced value (a
guard), ``jt.custom_gradient``, a Python loop (rolled into a loop region when traced),
and one of five uses:

- ``grad``: the eager tape's value and gradients = the generated Python run without
  Numba (``lower(...).python``) = the graph run on NumPy as tiered calls run it
  (``lower(...).numpy``) = central finite differences (float64 programs);
- ``hessian``: a nested tape's Hessian-vector product = ``jt.hessian``'s generated
  Python = its graph on NumPy = finite differences of the eager gradient;
- ``function``: a ``jt.function`` step with a tape and ``Variable.assign_sub``, eager =
  generated Python = the graph on NumPy = a step along the finite-difference gradient;
- ``jvp``: the eager forward accumulator's tangent = a compiled function with an
  accumulator inside (its generated Python, its graph on NumPy) = central finite
  differences along the direction.
- ``vmap``: the value and gradients mapped over a batch of values of the first floating
  argument (``jt.vmap`` of ``jt.value_and_grad``: its generated Python, its graph on
  NumPy) = the eager tape's, example by example.

One program in ``COMPILE_EVERY`` is also compiled with Numba, and one of those in
``CUDA_EVERY`` runs on ``target="cuda"`` (Numba's simulator under the tests) where
every op of its graph has a CUDA lowering.

The op table is derived from the registry: an elementwise op (one with a scalar
lowering), a reduction (``axis``/``keepdims``) and an op applied along an axis joins
the fuzzer by being registered, with the domain it declares. Ops of other shapes
(views, contractions, joins, ...) have a generator in ``STRUCTURED``; an op that is
neither must be named in ``NOT_FUZZED`` with the reason (a test keeps the three lists
complete).

How many programs: ``JITTAPE_FUZZ_GRAPHS`` (default 300). The examples are
derandomized (the same programs on every run); ``JITTAPE_FUZZ_SEED=<int>`` draws
another set. ``JITTAPE_FUZZ_COMPILE_EVERY`` / ``JITTAPE_FUZZ_CUDA_EVERY`` (default 20
each) set how often programs are compiled and run on CUDA (1: every one). A long run:
``JITTAPE_FUZZ_GRAPHS=10000 python -m pytest -n 0 tests/test_fuzz.py``.
"""

import dataclasses
import operator
import os
from typing import Callable, Tuple

import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, seed, settings, strategies as st

import jittape as jt
from jittape.ops.core import Aval, Primitive
from jittape.tensor import UFUNC_TABLE

from opcheck import all_ops, apply, make_inputs

pytestmark = [pytest.mark.filterwarnings("ignore::RuntimeWarning"),
              pytest.mark.filterwarnings("ignore::numba.NumbaPerformanceWarning")]

GRAPHS = int(os.environ.get("JITTAPE_FUZZ_GRAPHS", "300"))
SEED = os.environ.get("JITTAPE_FUZZ_SEED")
# one program in COMPILE_EVERY is also compiled with Numba (about a second each), and
# one compiled program in CUDA_EVERY also runs on target="cuda"
COMPILE_EVERY = int(os.environ.get("JITTAPE_FUZZ_COMPILE_EVERY", "20"))
CUDA_EVERY = int(os.environ.get("JITTAPE_FUZZ_CUDA_EVERY", "20"))

FREE = (-6.0, 6.0)          # an op that declares no domain: keep |values| moderate so
                            # that finite differences stay well conditioned
AWAY = 1e-3                 # how far from a kink, tie or jump an argument must be

# -- the op table ----------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class OpSpec:
    """An op as the generator uses it: ``call(*operands, **params)`` is the public
    function, ``domain`` one (lo, hi) per operand, ``kind`` how it is generated."""
    name: str
    kind: str            # unary | binary | predicate1 | predicate2 | reduce | axiswise
    domain: Tuple[Tuple[float, float], ...]
    differentiable: bool
    call: Callable

    def spelled(self, *args, **params):
        extra = "".join(f", {k}={v!r}" for k, v in params.items())
        return f"jt.{self.name}({', '.join(args)}{extra})"

    def spellings(self):
        """(source, function) of each way a user may write the op on operands {0}, {1}:
        jittape's function, the NumPy ufunc it answers to, the Python operator."""
        n = 2 if self.kind in ("binary", "predicate2") else 1
        names = ", ".join(f"{{{i}}}" for i in range(n))
        out = [(f"jt.{self.name}({names})", self.call)]
        ufunc = NUMPY_NAMES.get(self.name)
        if ufunc is not None:
            out.append((f"np.{ufunc.__name__}({names})", ufunc))
        if self.name in OPERATORS:
            symbol, fn = OPERATORS[self.name]
            out.append((f"{{0}} {symbol} {{1}}" if n == 2 else f"{symbol}{{0}}", fn))
        return out


def _domains(op, arity):
    dom = op.domain
    doms = dom if isinstance(dom[0], tuple) else (dom,) * arity
    # (-2, 2) is the registry's default: the op declares no restriction
    return tuple(FREE if d == (-2.0, 2.0) else tuple(d) for d in doms)


def _callable(name, op):
    public = getattr(jt, name, None)
    if public is not None:
        return public
    return op.bind if isinstance(op, Primitive) else op.fn


def _kind(name, op):
    """How the generator can use an op, from its registry record alone (None: it needs
    a generator of its own)."""
    examples = op.examples
    if not examples:
        return None
    arrays = [all(isinstance(s, tuple) for s in e.inputs) for e in examples]
    keys = set().union(*(e.params for e in examples))
    if isinstance(op, Primitive) and op.kind == "elementwise" and not keys:
        n = len(examples[0].inputs)
        out = op.abstract(*[Aval(shape, np.float64) for shape in examples[0].inputs])
        if out.dtype == bool:
            return f"predicate{n}"             # comparisons and logic: conditions of where
        return {1: "unary", 2: "binary"}.get(n)
    if all(arrays) and all(len(e.inputs) == 1 for e in examples) and keys <= {"axis", "keepdims"}:
        rng = np.random.default_rng(0)
        same = []
        for e in examples:
            values, _ = make_inputs(op, e, rng)
            same.append(np.shape(apply(op, values, e.params)) == np.shape(values[0]))
        if all(same):
            return "axiswise" if keys == {"axis"} else None
        return "reduce" if "keepdims" in keys else None
    return None


# the NumPy ufunc each registered op answers to (``np.exp(t)`` dispatches to jt.exp)
NUMPY_NAMES = {prim.name: ufunc for ufunc, prim in UFUNC_TABLE.items()
               if isinstance(prim, Primitive)}
OPERATORS = {"add": ("+", operator.add), "subtract": ("-", operator.sub),
             "multiply": ("*", operator.mul), "divide": ("/", operator.truediv),
             "power": ("**", operator.pow), "mod": ("%", operator.mod),
             "floor_divide": ("//", operator.floordiv), "negative": ("-", operator.neg),
             "greater": (">", operator.gt), "less_equal": ("<=", operator.le)}


def derived_ops():
    table = {}
    for name, op in sorted(all_ops().items()):
        if name in STRUCTURED or name in NOT_FUZZED:
            continue
        kind = _kind(name, op)
        if kind is None:
            continue
        arity = 2 if kind in ("binary", "predicate2") else 1
        table[name] = OpSpec(name, kind, _domains(op, arity), op.differentiable,
                             _callable(name, op))
    return table


# ops with a kink, a tie or a jump inside their domain: the argument must keep AWAY from
# it, or central differences straddle it. A new op with one is added here.
def _away(v, point=0.0):
    return np.all(np.abs(np.asarray(v, np.float64) - point) > AWAY)


def _off_integers(v):
    v = np.asarray(v, np.float64)
    return bool(np.all(np.abs(v - np.round(v)) > AWAY))


def _quotient_off_integers(x, y):
    """``x / y`` away from the integers where ``mod`` and ``floor_divide`` jump, by
    ``AWAY`` times how fast the quotient moves with its operands (``1/|y|`` and
    ``|x|/y**2``): near a small divisor a step of the finite differences moves it far
    (a quotient 0.004 from 208, with a divisor of 0.02, crossed it)."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    with np.errstate(all="ignore"):
        q = x / y
        speed = np.maximum(1.0, np.maximum(1 / np.abs(y), np.abs(x) / (y * y)))
        return bool(np.all(np.abs(q - np.round(q)) > AWAY * speed))


WELL_POSED = {
    "abs": lambda x: _away(x),
    "relu": lambda x: _away(x),
    "sign": lambda x: _away(x),
    "maximum": lambda x, y: _away(np.subtract(x, y)),
    "minimum": lambda x, y: _away(np.subtract(x, y)),
    "mod": _quotient_off_integers,
    "floor_divide": _quotient_off_integers,
    "fabs": lambda x: _away(x),
    "fmax": lambda x, y: _away(np.subtract(x, y)),
    "fmin": lambda x, y: _away(np.subtract(x, y)),
    "copysign": lambda x, y: _away(x) and _away(y),
    "hypot": lambda x, y: _away(np.hypot(x, y)),
    "floor": lambda x: _off_integers(x),
    "ceil": lambda x: _off_integers(x),
    "trunc": lambda x: _off_integers(x),
    "rint": lambda x: _off_integers(np.add(x, 0.5)),      # jumps at the halves
}

# Registered ops used with a generator of their own (their parameters are not axes).
# Filled below, next to the generators.
STRUCTURED = {}

NOT_FUZZED = {
    **{name: "a bool result or a choice built of where, which the fuzzer draws: the "
             "registry's checks cover it"
       for name in ("isclose", "allclose", "reduce_all", "reduce_any", "select")},
    "cross": "products and differences of components (getitem, stack): the registry's checks",
    "dsplit": "split along axis 2, the fuzzer's split generator covers split",
    "argmax": "an integer position, no gradient: the registry's checks cover it",
    "argmin": "an integer position, no gradient: the registry's checks cover it",
    "take_along_axis": "getitem with index arrays, which the fuzzer draws (gen_view)",
    **{name: "a complex part of a real value (the value, zeros, a step): the registry's "
             "checks cover it" for name in ("real", "imag", "conjugate", "angle")},
    **{name: "a part of a complex value (the fuzzer draws real values): test_complex covers "
             "it" for name in ("real_part", "imag_part", "conj")},
    "index_add": "the gradient of indexing: reached through getitem's VJP, not a user op",
    "check_labels": "the label check inside sparse_softmax_cross_entropy: reached through it",
    **{name: "needs well-conditioned matrices: covered by the registry tests (test_ops, "
             "test_linalg)" for name in ("solve", "inv", "det", "slogdet_sign", "logabsdet",
                                         "cholesky", "norm")},
    **{name: "a decomposition whose gradient needs distinct eigenvalues or singular values "
             "and full rank (random programs draw ties and near-singular matrices): the "
             "registry's checks and test_decompositions cover it"
       for name in ("eigvalsh", "eigh", "eigvals", "eig", "svdvals", "svd", "svd_vh", "qr",
                    "qr_r", "pinv")},
    **{name: "a composition of matmul (and inv), which the fuzzer draws (gen_contract): the "
             "registry's checks cover it" for name in ("matrix_power", "multi_dot")},
    "triangle": "a part of cholesky's gradient: reached through it",
    "round": "its decimals parameter; rint, round's case of no decimals, is fuzzed",
    "real_if_close": "a real tensor itself (the fuzzer draws real values); the registry's "
                     "checks cover it",
    "gradient": "differences of slices joined (getitem, concatenate), which the fuzzer "
                "draws: the registry's checks and test_numpy_shape cover it",
}


# -- a program under construction ------------------------------------------------------


@dataclasses.dataclass
class Value:
    name: str
    value: np.ndarray        # the value at the program's arguments (computed eagerly)
    kind: str                # float | int | bool


@dataclasses.dataclass
class Step:
    out: int
    text: str                # the right-hand side, Python source
    fn: Callable             # fn(*operands) -> tensor
    ins: Tuple[int, ...]
    frozen: bool = False     # stop_gradient: a constant for finite differences


class Builder:
    """Builds a program step by step, computing each value eagerly as it goes, so that
    the generator can keep arguments inside domains and away from kinks."""

    def __init__(self, dtype, rng):
        self.dtype = np.dtype(dtype)
        self.rng = rng
        self.values = []
        self.inputs = []         # indices into values, in argument order
        self.steps = []
        self.used = set()        # op names, for the report of a failure
        self.cuda = False        # whether the program will also run on target="cuda"

    # values
    def floats(self):
        return [i for i, v in enumerate(self.values) if v.kind == "float"]

    def input(self, shape, kind="float", high=None, dtype=None):
        if kind == "float":
            arr = self.rng.uniform(-2.0, 2.0, shape).astype(dtype or self.dtype)
            name = f"x{len(self.inputs)}"
        else:
            arr = self.rng.integers(0, high, shape).astype(self.rng.choice([np.int64, np.int32]))
            name = f"k{len(self.inputs)}"
        self.values.append(Value(name, arr, kind))
        self.inputs.append(len(self.values) - 1)
        return len(self.values) - 1

    def add(self, text, fn, ins, op=None, frozen=False):
        """Append ``v = fn(*ins)``; returns its index. ``text`` uses {0}, {1}, ... for
        the operands' names."""
        args = [jt.constant(self.values[i].value) for i in ins]
        out = np.asarray(fn(*args))
        kind = "bool" if out.dtype == bool else ("int" if out.dtype.kind in "iu" else "float")
        out_index = len(self.values)
        self.values.append(Value(f"v{out_index}", out, kind))
        names = [self.values[i].name for i in ins]
        self.steps.append(Step(out_index, text.format(*names), fn, tuple(ins), frozen))
        if op:
            self.used.add(op)
        return out_index

    def into(self, i, domain):
        """Value i, mapped smoothly into ``domain`` (lo, hi) if it leaves it."""
        lo, hi = domain
        v = self.values[i].value
        margin = 0.02 * (hi - lo)
        if v.size == 0 or (v.min() > lo + margin and v.max() < hi - margin):
            return i
        return self.add(f"{lo!r} + {hi - lo!r} * jt.sigmoid({{0}})",
                        lambda x: lo + (hi - lo) * jt.sigmoid(x), (i,))

    def program(self, outputs, mode, compiled, cuda):
        weights = [self.rng.normal(size=self.values[o].value.shape).astype(
            self.values[o].value.dtype) for o in outputs]
        return Program(self.values, self.inputs, self.steps, outputs, weights, mode,
                       compiled, cuda, self.dtype, sorted(self.used))


def _array_text(a):
    if a.size == 0:
        return f"np.zeros({a.shape}, dtype=np.{a.dtype.name})"
    return f"np.array({a.tolist()!r}, dtype=np.{a.dtype.name})"


class Program:
    """A generated program: printed as the Python source that reproduces it."""

    def __init__(self, values, inputs, steps, outputs, weights, mode, compiled, cuda, dtype,
                 used):
        self.values, self.inputs, self.steps = values, inputs, steps
        self.outputs, self.weights, self.mode = outputs, weights, mode
        self.compiled, self.cuda, self.dtype, self.used = compiled, cuda, dtype, used

    @property
    def args(self):
        return [self.values[i].value for i in self.inputs]

    @property
    def diff(self):
        """Positions of the floating arguments (the differentiated ones)."""
        return tuple(k for k, i in enumerate(self.inputs) if self.values[i].kind == "float")

    def loss(self, *args, frozen=None, any_shape=False):
        """The program applied to ``args``; with ``frozen``, stop_gradient results are
        the constants of the unperturbed program (what a derivative sees). The outputs
        are weighted by arrays of their shapes, or with ``any_shape`` summed through a
        sine (a scalar of outputs of any size)."""
        env = dict(zip(self.inputs, args))
        for step in self.steps:
            if frozen is not None and step.frozen:
                env[step.out] = jt.constant(self.values[step.out].value)
            else:
                env[step.out] = step.fn(*[env[i] for i in step.ins])
        total = None
        for o, w in zip(self.outputs, self.weights):
            term = jt.sum(jt.sin(env[o] * 1.3 + 0.2)) if any_shape else jt.sum(env[o] * w)
            total = term if total is None else total + term
        return total

    def function(self, any_shape=False):
        def loss(*args):
            return self.loss(*args, any_shape=any_shape)
        return loss

    def grown_args(self):
        """New arguments with every size above 1 one larger (the size-1 pattern, and so
        the signature, kept): a compiled program must run them without retracing or
        retrace, never fail. Integer arguments keep their range (they index)."""
        rng = np.random.default_rng(2)
        out = []
        for a in self.args:
            shape = tuple(d + 1 if d > 1 else d for d in a.shape)
            if a.dtype.kind in "iu":
                out.append(rng.integers(0, int(a.max(initial=0)) + 1, shape).astype(a.dtype))
            else:
                out.append(rng.uniform(-2.0, 2.0, shape).astype(a.dtype))
        return out

    def __repr__(self):
        params = ", ".join(self.values[i].name for i in self.inputs)
        lines = [f"# mode={self.mode} dtype={self.dtype.name} compiled={self.compiled} "
                 f"cuda={self.cuda}; helpers: from test_fuzz import softsign, scaled_exp, python_loop"]
        for i in self.inputs:
            v = self.values[i]
            lines.append(f"{v.name} = {_array_text(v.value)}")
        lines.append(f"def loss({params}):")
        for s in self.steps:
            lines.append(f"    v{s.out} = {s.text}")
        terms = [f"jt.sum({self.values[o].name} * {_array_text(w)})"
                 for o, w in zip(self.outputs, self.weights)]
        lines.append("    return " + " + ".join(terms))
        return "\n".join(lines)

    def _repr_pretty_(self, p, cycle):       # how Hypothesis prints a failing example
        p.text(repr(self))


# -- the generators ----------------------------------------------------------------------

SIZES = [2, 3, 1, 2, 3, 1, 4, 2, 3, 1, 0]   # a zero-size dimension one time in eleven


def shapes():
    return st.sampled_from([0, 1, 2, 2, 3]).flatmap(
        lambda rank: st.tuples(*[st.sampled_from(SIZES)] * rank))


def _pick(draw, b, candidates):
    # Hypothesis favours some choices (the first, the ones it drew before): an offset
    # from the program's own generator spreads the picks evenly, reproducibly
    k = draw(st.integers(0, len(candidates) - 1)) + int(b.rng.integers(len(candidates)))
    return candidates[k % len(candidates)]


def _broadcast_partner(draw, shape):
    """A shape that broadcasts with ``shape``: a suffix of it with some sizes made 1."""
    keep = draw(st.integers(0, len(shape)))
    out = list(shape[len(shape) - keep:])
    for j in range(len(out)):
        if draw(st.booleans()) and draw(st.booleans()):
            out[j] = 1
    if keep == len(shape) and draw(st.integers(0, 5)) == 0:   # a leading axis of its own
        out = [draw(st.sampled_from([2, 1]))] + out
    return tuple(out)


def _focus(draw, b, ops, name, kind):
    """The op ``name`` when the step was drawn for it, else any op of ``kind``."""
    if name in ops:
        return ops[name]
    return _pick(draw, b, [s for s in ops.values() if s.kind == kind])


def gen_unary(draw, b, ops, name=None):
    spec = _focus(draw, b, ops, name, "unary")
    x = b.into(_pick(draw, b, b.floats()), spec.domain[0])
    check = WELL_POSED.get(spec.name)
    if check and not check(b.values[x].value):
        return
    frozen = spec.name == "stop_gradient"
    text, fn = _pick(draw, b, spec.spellings())
    b.add(text, fn, (x,), spec.name, frozen)


def gen_binary(draw, b, ops, name=None):
    spec = _focus(draw, b, ops, name, "binary")
    x = _pick(draw, b, b.floats())
    shape = b.values[x].value.shape
    how = draw(st.sampled_from(["input", "value", "scalar", "array", "int"]))
    if how in ("scalar", "array"):           # a Python float (weakly typed), or a NumPy array
        lo, hi = spec.domain[1]
        size = () if how == "scalar" else _broadcast_partner(draw, shape)
        c = np.round(b.rng.uniform(lo + 0.1 * (hi - lo), hi - 0.1 * (hi - lo), size), 3)
        c = float(c) if how == "scalar" else c.astype(b.dtype)
        c_text = repr(c) if how == "scalar" else _array_text(c)
        x = b.into(x, spec.domain[0])
        check = WELL_POSED.get(spec.name)
        if check and not check(b.values[x].value, c):
            return
        text, fn = _pick(draw, b, spec.spellings())
        if draw(st.booleans()):
            b.add(text.format("{0}", c_text), lambda a: fn(a, c), (x,), spec.name)
        else:                                   # the constant on the left
            lo0, hi0 = spec.domain[0]
            if not (np.all(lo0 < c) and np.all(c < hi0)):
                return
            y = b.into(x, spec.domain[1])
            if check and not check(c, b.values[y].value):
                return
            b.add(text.format(c_text, "{0}"), lambda a: fn(c, a), (y,), spec.name)
        return
    if how == "int" and spec.name in ("add", "subtract", "multiply"):
        # an integer array operand (its dtype promotes the result)
        ints = [i for i, v in enumerate(b.values) if v.kind == "int"
                and _broadcasts(v.value.shape, shape)]
        y = ints[0] if ints and draw(st.booleans()) else b.input(_broadcast_partner(draw, shape),
                                                               "int", 3)
    elif how == "value":
        partners = [i for i in b.floats() if _broadcasts(b.values[i].value.shape, shape)]
        y = _pick(draw, b, partners)
    else:
        # a float32 program may take a float64 argument (the result widens); a float64
        # program stays float64 (finite differences of a float32 argument are noise)
        y = b.input(_broadcast_partner(draw, shape),
                    dtype=draw(st.sampled_from([b.dtype, b.dtype, np.float64])))
    if b.values[y].kind == "float":
        y = b.into(y, spec.domain[1])
    x = b.into(x, spec.domain[0])
    check = WELL_POSED.get(spec.name)
    if check and not _broadcasts(b.values[x].value.shape, b.values[y].value.shape):
        return
    if check and not check(b.values[x].value, b.values[y].value):
        return
    text, fn = _pick(draw, b, spec.spellings())
    b.add(text, fn, (x, y), spec.name)


def _broadcasts(s, t):
    try:
        np.broadcast_shapes(s, t)
        return True
    except ValueError:
        return False


def _axes(draw, ndim):
    """An axis argument: None, an int (maybe negative) or a tuple."""
    if ndim == 0:
        return draw(st.sampled_from([None, 0, -1, ()]))
    form = draw(st.sampled_from(["none", "int", "tuple"]))
    if form == "none":
        return None
    if form == "int":
        return draw(st.integers(-ndim, ndim - 1))
    chosen = draw(st.lists(st.integers(0, ndim - 1), unique=True, max_size=ndim))
    return tuple(a - ndim if draw(st.booleans()) else a for a in chosen)


def _reduced(shape, axis):
    if axis is None:
        return tuple(range(len(shape)))
    axes = (axis,) if isinstance(axis, int) else axis
    return tuple(a % len(shape) for a in axes) if shape else ()


def _no_ties(v, axes):
    """Whether the largest and smallest values along ``axes`` are unique (no tie for
    max/min to split between)."""
    if v.size == 0 or not axes:
        return True
    rest = [a for a in range(v.ndim) if a not in axes]
    flat = np.transpose(v, rest + list(axes)).reshape(int(np.prod([v.shape[a] for a in rest])), -1)
    s = np.sort(flat.astype(np.float64), axis=1)
    return s.shape[1] < 2 or (np.all(s[:, -1] - s[:, -2] > AWAY) and np.all(s[:, 1] - s[:, 0] > AWAY))


def gen_reduce(draw, b, ops, name=None):
    spec = _focus(draw, b, ops, name, "reduce")
    x = b.into(_pick(draw, b, b.floats()), spec.domain[0])
    v = b.values[x].value
    axis = _axes(draw, v.ndim)
    keepdims = draw(st.booleans())
    axes = _reduced(v.shape, axis)
    empty = any(v.shape[a] == 0 for a in axes) or (v.size == 0 and not axes)
    if empty and spec.name not in ("sum", "prod"):
        # max/min of an empty axis raise (as NumPy does); mean/logsumexp of one are
        # nan/-inf: no derivative to compare
        return
    if spec.name in ("max", "min", "ptp") and not _no_ties(v, axes):
        return
    if spec.name == "mean" and v.ndim == 0 and isinstance(axis, int):
        return          # NumPy's mean rejects axis 0 and -1 on a 0-d value (its sum takes them)
    b.add(spec.spelled("{0}", axis=axis, keepdims=keepdims),
          lambda a: spec.call(a, axis=axis, keepdims=keepdims), (x,), spec.name)


def gen_axiswise(draw, b, ops, name=None):
    spec = _focus(draw, b, ops, name, "axiswise")
    cands = [i for i in b.floats() if b.values[i].value.ndim > 0]
    if not cands:
        return
    x = b.into(_pick(draw, b, cands), spec.domain[0])
    v = b.values[x].value
    axis = draw(st.integers(-v.ndim, v.ndim - 1))
    if v.shape[axis] == 0:                   # a max over an empty axis: NumPy raises
        return
    b.add(spec.spelled("{0}", axis=axis), lambda a: spec.call(a, axis=axis), (x,), spec.name)


def gen_where(draw, b, ops, name=None):
    logical = [s for s in ops.values() if s.kind == "predicate2" and s.name.startswith("logical")]
    pred = _pick(draw, b, [s for s in ops.values() if s.kind == "predicate2" and s not in logical]
                 if name not in ops or ops[name].kind != "predicate2" or ops[name] in logical
                 else [ops[name]])
    c = _pick(draw, b, b.floats())
    t = round(float(np.median(b.values[c].value))) if b.values[c].value.size else 0.0
    t = float(t) + 0.25
    if not _away(b.values[c].value, t):
        return
    cond = b.add(pred.spelled("{0}", repr(t)), lambda a: pred.call(a, t), (c,), pred.name)
    one = name in ops and ops[name].kind == "predicate1"
    if one or (name in ops and ops[name] in logical) or draw(st.booleans()):
        # combined with a one-operand predicate
        p1 = ops[name] if one else _focus(draw, b, ops, None, "predicate1")
        logic = ops[name] if name in ops and ops[name] in logical else _pick(draw, b, logical)
        other = b.add(p1.spelled("{0}"), p1.call, (c,), p1.name)
        cond = b.add(logic.spelled("{0}", "{1}"), logic.call, (cond, other), logic.name)
    shape = b.values[cond].value.shape
    x = _pick(draw, b, [i for i in b.floats() if _broadcasts(b.values[i].value.shape, shape)])
    if draw(st.booleans()):
        y = b.input(_broadcast_partner(draw, np.broadcast_shapes(shape, b.values[x].value.shape)))
        b.add("jt.where({0}, {1}, {2})", jt.where, (cond, x, y), "where")
    else:
        c2 = round(float(b.rng.uniform(-1, 1)), 3)
        b.add(f"jt.where({{0}}, {{1}}, {c2!r})", lambda p, a: jt.where(p, a, c2), (cond, x), "where")


VIEWS = {"getitem": ["slice", "int", "new", "array", "data_index"], "reshape": ["reshape"],
         "transpose": ["transpose"], "take": ["array"], "expand_dims": ["expand_squeeze"],
         "squeeze": ["expand_squeeze"], "broadcast_to": ["broadcast_to"]}


def gen_view(draw, b, ops, name=None):
    x = _pick(draw, b, b.floats() + [i for i, v in enumerate(b.values) if v.kind == "int"
                                     and v.value.ndim and draw(st.booleans())])
    v = b.values[x].value
    how = draw(st.sampled_from(VIEWS.get(name, sorted(set(sum(VIEWS.values(), []))))))
    if how in ("slice", "int", "new"):
        index = []
        for n in v.shape:
            if how == "int" and n > 0 and draw(st.booleans()):
                index.append(draw(st.integers(-n, n - 1)))
            elif draw(st.booleans()):
                start = draw(st.one_of(st.none(), st.integers(-n - 1, n + 1)))
                stop = draw(st.one_of(st.none(), st.integers(-n - 1, n + 1)))
                step = draw(st.sampled_from([None, 1, 2, -1, -2, 3]))
                index.append(slice(start, stop, step))
            else:
                index.append(slice(None))
        if how == "new":
            for _ in range(draw(st.integers(1, 2))):
                index.insert(draw(st.integers(0, len(index))), None)
        if draw(st.booleans()) and index and how != "new":
            index = index[:draw(st.integers(1, len(index)))]   # trailing axes implied
            if draw(st.booleans()):
                index = [Ellipsis] + index[1:] if len(index) > 1 else index
        index = tuple(index)
        b.add(f"{{0}}[{_index_text(index)}]", lambda a: a[index], (x,), "getitem")
    elif how == "transpose" and v.ndim >= 1:
        axes = tuple(draw(st.permutations(range(v.ndim))))
        if draw(st.booleans()):
            b.add(f"jt.transpose({{0}}, {axes!r})", lambda a: jt.transpose(a, axes), (x,), "transpose")
        else:
            b.add("{0}.T", lambda a: a.T, (x,), "transpose")
    elif how == "reshape":
        shape = _new_shape(draw, v.shape)
        b.add(f"jt.reshape({{0}}, {shape!r})", lambda a: jt.reshape(a, shape), (x,), "reshape")
    elif how == "array" and v.ndim >= 1 and v.shape[0] > 0:
        axis = draw(st.integers(0, v.ndim - 1))
        n = v.shape[axis]
        if n == 0:
            return
        idx = b.rng.integers(-n, n, draw(st.sampled_from([(3,), (2, 2), (1,), ()])))
        prefix = (slice(None),) * axis
        if name == "getitem" or (name != "take" and draw(st.booleans())):
            b.add(f"{{0}}[{'' .join(':, ' for _ in prefix)}np.array({idx.tolist()!r})]",
                  lambda a: a[prefix + (idx,)], (x,), "getitem")
        else:
            b.add(f"jt.take({{0}}, np.array({idx.tolist()!r}), axis={axis})",
                  lambda a: jt.take(a, idx, axis=axis), (x,), "take")
    elif how == "data_index" and v.ndim >= 1 and v.shape[0] > 0:
        # an index array passed as an argument: read at run time
        k = b.input(draw(st.sampled_from([(2,), (3,), (1,)])), "int", v.shape[0])
        b.add("{0}[{1}]", lambda a, i: a[i], (x, k), "getitem")
    elif how == "expand_squeeze":
        axis = draw(st.integers(-v.ndim - 1, v.ndim))
        e = b.add(f"jt.expand_dims({{0}}, {axis})", lambda a: jt.expand_dims(a, axis), (x,),
                  "expand_dims")
        if name == "squeeze" or draw(st.booleans()):
            b.add(f"jt.squeeze({{0}}, {axis})", lambda a: jt.squeeze(a, axis), (e,), "squeeze")
    elif how == "broadcast_to":
        shape = tuple(draw(st.sampled_from([2, 3])) if d == 1 and draw(st.booleans()) else d
                      for d in v.shape)
        if draw(st.booleans()):
            shape = (2,) + shape
        b.add(f"jt.broadcast_to({{0}}, {shape!r})", lambda a: jt.broadcast_to(a, shape), (x,),
              "broadcast_to")


def _index_text(index):
    parts = []
    for i in index:
        if i is None:
            parts.append("None")
        elif i is Ellipsis:
            parts.append("...")
        elif isinstance(i, slice):
            parts.append(("" if i.start is None else str(i.start)) + ":"
                         + ("" if i.stop is None else str(i.stop))
                         + ("" if i.step is None else f":{i.step}"))
        else:
            parts.append(str(i))
    return ", ".join(parts)


def _new_shape(draw, shape):
    """Another shape of the same size: merged neighbours, an inserted 1, reversed
    sizes, or flattened (with -1 where the size is not zero)."""
    how = draw(st.sampled_from(["merge", "one", "reverse", "flat"]))
    size = int(np.prod(shape))
    if how == "merge" and len(shape) >= 2:
        j = draw(st.integers(0, len(shape) - 2))
        return shape[:j] + (shape[j] * shape[j + 1],) + shape[j + 2:]
    if how == "one":
        j = draw(st.integers(0, len(shape)))
        return shape[:j] + (1,) + shape[j:]
    if how == "reverse":
        return shape[::-1]
    return (-1,) if size and draw(st.booleans()) else (size,)


def gen_contract(draw, b, ops, name=None):
    x = _pick(draw, b, b.floats())
    v = b.values[x].value
    k = draw(st.sampled_from([2, 3, 1]))
    how = draw(st.sampled_from({"matmul": ["matmul", "vector"], "dot": ["dot"],
                                "einsum": ["einsum"], "outer": ["outer"]}.get(
        name, ["matmul", "dot", "einsum", "outer", "vector"])))
    if v.ndim == 0:
        y = b.input((k,))
        b.add("jt.outer({0}, {1})" if how == "outer" else "{0} * {1}",
              (lambda a, c: jt.outer(a, c)) if how == "outer" else (lambda a, c: a * c),
              (x, y), "outer" if how == "outer" else "multiply")
        return
    n = v.shape[-1]
    if how == "outer":
        y = b.input((k,))
        b.add("jt.outer({0}, {1})", jt.outer, (x, y), "outer")
    elif how == "vector":
        y = b.input((n,))
        b.add("{0} @ {1}", lambda a, c: a @ c, (x, y), "matmul")
    elif how == "dot":
        y = b.input((n, k) if v.ndim <= 2 else (n,))
        b.add("jt.dot({0}, {1})", jt.dot, (x, y), "dot")
    elif how == "einsum" and v.ndim == 2:
        y = b.input((n, k))
        b.add("jt.einsum('ij,jk->ik', {0}, {1})", lambda a, c: jt.einsum("ij,jk->ik", a, c),
              (x, y), "einsum")
    elif draw(st.booleans()):                  # a matrix (or a batch of them) on the right
        batch = v.shape[:-2] if v.ndim > 2 and draw(st.booleans()) else ()
        y = b.input(batch + (n, k))
        b.add("{0} @ {1}", lambda a, c: a @ c, (x, y), "matmul")
    else:                                       # a matrix on the left
        y = b.input((k, v.shape[-2]) if v.ndim >= 2 else (k, n))
        b.add("{1} @ {0}", lambda a, c: c @ a, (x, y), "matmul")


def gen_update(draw, b, ops, name=None):
    """``x.at[i].set(v)`` and ``.add(v)`` at one row along the first axis (``set_row``):
    ``i`` a Python int or an integer argument read at run time, ``v`` a value of the
    program of the row's shape or a new input."""
    rows = [i for i in b.floats() if b.values[i].value.ndim and b.values[i].value.shape[0]]
    x = _pick(draw, b, rows) if rows else b.input((draw(st.integers(1, 4)), 2))
    v = b.values[x].value
    n = v.shape[0]
    same = [i for i in b.floats() if b.values[i].value.shape == v.shape[1:]]
    y = _pick(draw, b, same) if same and draw(st.booleans()) else b.input(v.shape[1:])
    how = draw(st.sampled_from(["set", "add"]))
    if draw(st.booleans()):
        k = draw(st.integers(-n, n - 1))
        b.add(f"{{0}}.at[{k}].{how}({{1}})", lambda p, q: getattr(p.at[k], how)(q), (x, y),
              "set_row")
    else:
        i = b.input((), "int", n)
        b.add(f"{{0}}.at[{{2}}].{how}({{1}})", lambda p, q, j: getattr(p.at[j], how)(q),
              (x, y, i), "set_row")


def gen_join(draw, b, ops, name=None):
    x = _pick(draw, b, b.floats())
    v = b.values[x].value
    if name == "stack" or v.ndim == 0 or (name != "concatenate" and draw(st.booleans())):
        axis = draw(st.integers(-v.ndim - 1, v.ndim))
        same = [i for i in b.floats() if b.values[i].value.shape == v.shape]
        y = _pick(draw, b, same) if draw(st.booleans()) else b.input(v.shape)
        b.add(f"jt.stack([{{0}}, {{1}}], axis={axis})", lambda p, q: jt.stack([p, q], axis=axis),
              (x, y), "stack")
    else:
        axis = draw(st.integers(-v.ndim, v.ndim - 1))
        shape = list(v.shape)
        shape[axis] = draw(st.sampled_from([1, 2, 0]))
        y = b.input(tuple(shape))
        b.add(f"jt.concatenate([{{0}}, {{1}}, {{0}}], axis={axis})",
              lambda p, q: jt.concatenate([p, q, p], axis=axis), (x, y), "concatenate")


def gen_nn(draw, b, ops, name=None):
    cands = [i for i in b.floats() if b.values[i].value.ndim >= 1 and b.values[i].value.shape[-1] > 0]
    if not cands:
        return
    x = b.into(_pick(draw, b, cands), (-3.0, 3.0))
    v = b.values[x].value
    if name == "sparse_softmax_cross_entropy" or (name is None and draw(st.booleans())):
        labels = b.rng.integers(0, v.shape[-1], v.shape[:-1])
        b.add(f"jt.sparse_softmax_cross_entropy(np.array({labels.tolist()!r}), {{0}})",
              lambda a: jt.sparse_softmax_cross_entropy(labels, a), (x,),
              "sparse_softmax_cross_entropy")
    else:
        p = b.rng.dirichlet(np.ones(v.shape[-1]), v.shape[:-1]).astype(v.dtype)
        b.add(f"jt.softmax_cross_entropy(np.array({p.tolist()!r}), {{0}})",
              lambda a: jt.softmax_cross_entropy(p, a), (x,), "softmax_cross_entropy")


def gen_misc(draw, b, ops, name=None):
    """clip, cast (of an integer argument, or to the same dtype), full_like, identity."""
    x = _pick(draw, b, b.floats())
    v = b.values[x].value
    how = name if name in ("clip", "cast", "full_like") else draw(
        st.sampled_from(["clip", "cast", "full_like"]))
    if how == "clip":
        lo, hi = sorted(round(float(t), 2) for t in b.rng.uniform(-1.5, 1.5, 2))
        if hi - lo < 0.1 or not (_away(v, lo) and _away(v, hi)):
            return
        b.add(f"jt.clip({{0}}, {lo!r}, {hi!r})", lambda a: jt.clip(a, lo, hi), (x,), "clip")
    elif how == "cast":
        dt = b.dtype
        if draw(st.booleans()):
            k = b.input(_broadcast_partner(draw, v.shape), "int", 4)
            c = b.add(f"jt.cast({{0}}, np.{dt.name})", lambda a: jt.cast(a, dt), (k,), "cast")
            b.add("{0} * {1}", lambda p, q: p * q, (x, c), "multiply")
        else:
            b.add(f"jt.cast({{0}}, np.{v.dtype.name})", lambda a: jt.cast(a, v.dtype), (x,), "cast")
    else:
        f = b.add("jt.full_like({0}, 0.5)", lambda a: jt.full_like(a, 0.5), (x,), "full_like")
        b.add("{0} * {1}", lambda p, q: p * q, (x, f), "multiply")


SPECIAL = ("xlogy", "xlog1py", "logit", "polygamma", "gammainc", "gammaincc", "multigammaln",
           "beta", "betaln", "rel_entr", "kl_div", "boxcox", "entr", "erfcinv", "log_expit",
           "ndtr", "jv", "yn", "iv", "ive", "stdtr", "betainc")
# the ops with an order or shape parameter first (a constant: no gradient in it): the
# domain of x, and the constants drawn
_SPECIAL_ORDERED = {"jv": ((0.5, 6.0), (0.0, 1.0, 2.5)), "yn": ((0.5, 6.0), (0, 1, 2)),
                    "iv": ((0.5, 4.0), (0.0, 1.5, 3.0)), "ive": ((0.5, 4.0), (0.0, 1.5, 3.0)),
                    "stdtr": ((-3.0, 3.0), (1.0, 2.5, 7.0)),
                    "betainc": ((0.1, 0.9), ((0.5, 2.0), (1.5, 0.7), (3.0, 1.2)))}
# the domains of the unary composites
_SPECIAL_UNARY = {"logit": (0.1, 0.9), "entr": (0.1, 2.0), "erfcinv": (0.1, 1.9),
                  "log_expit": (-6.0, 6.0), "ndtr": (-3.0, 3.0)}
# the domains of the binary ones (first operand, second)
_SPECIAL_PAIRS = {"xlogy": ((0.2, 2.0), (0.5, 2.0)), "xlog1py": ((0.2, 2.0), (-0.5, 2.0)),
                  "beta": ((0.5, 3.0), (0.5, 3.0)), "betaln": ((0.5, 3.0), (0.5, 3.0)),
                  "rel_entr": ((0.2, 2.0), (0.2, 2.0)), "kl_div": ((0.2, 2.0), (0.2, 2.0)),
                  "boxcox": ((0.2, 3.0), (-1.0, 1.0))}


def gen_special(draw, b, ops, name=None):
    """scipy.special's composites and the ops with a parameter, on values mapped into
    their domains: the binary composites (xlogy, beta, kl_div, ...), logit, polygamma of
    order 1 or 2, multigammaln of dimension 1 to 3, and gammainc, gammaincc, the Bessel
    functions of an order (jv, yn, iv, ive), stdtr and betainc in x (the order or shape
    parameters constants: they have no gradient in them)."""
    how = name if name in SPECIAL else draw(st.sampled_from(SPECIAL))
    x = _pick(draw, b, b.floats())
    if how in _SPECIAL_UNARY:
        x = b.into(x, _SPECIAL_UNARY[how])
        b.add(f"jt.{how}({{0}})", getattr(jt, how), (x,), how)
    elif how == "polygamma":
        x = b.into(x, (0.5, 3.0))
        n = draw(st.integers(1, 2))
        b.add(f"jt.polygamma({n}, {{0}})", lambda a: jt.polygamma(n, a), (x,), "polygamma")
    elif how == "multigammaln":
        x = b.into(x, (1.5, 4.0))
        d = draw(st.integers(1, 3))
        b.add(f"jt.multigammaln({{0}}, {d})", lambda a: jt.multigammaln(a, d), (x,), how)
    elif how in _SPECIAL_ORDERED:
        domain, constants = _SPECIAL_ORDERED[how]
        x = b.into(x, domain)
        v = draw(st.sampled_from(constants))
        f = getattr(jt, how)
        if how == "betainc":
            b.add(f"jt.betainc({v[0]}, {v[1]}, {{0}})", lambda t: f(v[0], v[1], t), (x,), how)
        else:
            b.add(f"jt.{how}({v}, {{0}})", lambda t: f(v, t), (x,), how)
    elif how in ("gammainc", "gammaincc"):
        x = b.into(x, (0.1, 4.0))
        a = draw(st.sampled_from((0.5, 1.0, 2.5)))
        f = getattr(jt, how)
        b.add(f"jt.{how}({a}, {{0}})", lambda v: f(a, v), (x,), how)
    else:
        y = _pick(draw, b, b.floats())
        try:
            np.broadcast_shapes(b.values[x].value.shape, b.values[y].value.shape)
        except ValueError:
            return
        first, second = _SPECIAL_PAIRS[how]
        x = b.into(x, first)
        y = b.into(y, second)
        b.add(f"jt.{how}({{0}}, {{1}})", getattr(jt, how), (x, y), how)


SORTING = ("sort", "partition", "median", "quantile", "percentile", "nanmedian",
           "nanquantile", "nanpercentile")


def _apart(v, axes):
    """Whether the elements along ``axes`` are AWAY apart: a sort's gradient follows the
    order, and central differences must not swap two of them."""
    if v.size == 0 or not axes:
        return True
    rest = [a for a in range(v.ndim) if a not in axes]
    flat = np.transpose(v, rest + list(axes)).reshape(int(np.prod([v.shape[a] for a in rest])), -1)
    return bool(np.all(np.diff(np.sort(flat.astype(np.float64), axis=1), axis=1) > AWAY))


def gen_sorting(draw, b, ops, name=None):
    """np.sort and np.partition along an axis, the order statistics over axes (levels as
    numbers: a list of them would make a float32 program's result float64, NumPy's rule)."""
    how = name if name in SORTING else draw(st.sampled_from(SORTING))
    x = _pick(draw, b, b.floats())
    v = b.values[x].value
    if how in ("sort", "partition"):
        if v.ndim == 0:
            return
        axis = draw(st.integers(-v.ndim, v.ndim - 1))
        if v.shape[axis] == 0 or not _apart(v, (axis % v.ndim,)):
            return
        if how == "sort":
            b.add(f"np.sort({{0}}, axis={axis})", lambda a: np.sort(a, axis=axis), (x,), how)
        else:
            k = draw(st.integers(-v.shape[axis], v.shape[axis] - 1))
            b.add(f"np.partition({{0}}, {k}, axis={axis})",
                  lambda a: np.partition(a, k, axis=axis), (x,), how)
        return
    axis = draw(st.one_of(st.none(), st.integers(-v.ndim, v.ndim - 1))) if v.ndim else None
    if axis is not None and draw(st.booleans()):
        axis = tuple(sorted({axis % v.ndim, draw(st.integers(0, v.ndim - 1))}))
    axes = _reduced(v.shape, axis)
    if any(v.shape[a] == 0 for a in axes) or v.size == 0 or not _apart(v, axes):
        return
    keepdims = draw(st.booleans())
    f = getattr(np, how)
    if how in ("median", "nanmedian"):
        b.add(f"np.{how}({{0}}, axis={axis!r}, keepdims={keepdims})",
              lambda a: f(a, axis=axis, keepdims=keepdims), (x,), how)
        return
    q = draw(st.sampled_from([0.0, 0.3, 0.5, 0.85, 1.0])) * (100 if "percentile" in how else 1)
    method = draw(st.sampled_from(["linear", "linear", "hazen"] if how.startswith("nan") else
                                  ["linear", "linear", "midpoint", "nearest", "weibull"]))
    b.add(f"np.{how}({{0}}, {q!r}, axis={axis!r}, keepdims={keepdims}, method={method!r})",
          lambda a: f(a, q, axis=axis, keepdims=keepdims, method=method), (x,), how)


def _numpy_shape_step(draw, v, name):
    """(source, function) of NumPy's shape function ``name`` on a value like ``v``
    (itself twice for the joins and products), or None where it does not apply."""
    n, shape = v.ndim, v.shape
    f = getattr(jt, name)

    def axis():
        return draw(st.integers(-n, n - 1))

    if name in ("ravel", "atleast_1d", "atleast_2d", "atleast_3d"):
        return f"jt.{name}({{0}})", f
    if name in ("var", "std", "nanmean", "average"):
        ax = draw(st.one_of(st.none(), st.integers(-n, n - 1))) if n else None
        count = v.size if ax is None else shape[ax]
        ddof = draw(st.sampled_from([0, 1])) if name in ("var", "std") else 0
        if count <= ddof:
            return None                  # nan or inf: no derivative to compare
        if name == "std" and not np.all(np.var(v, axis=ax, ddof=ddof) > 1e-2):
            return None                  # the square root's kink at zero variance
        extra = f", ddof={ddof}" if name in ("var", "std") else ""
        return (f"jt.{name}({{0}}, axis={ax}{extra})",
                lambda x: f(x, axis=ax, ddof=ddof) if extra else f(x, axis=ax))
    if n == 0:
        return None
    if name in ("swapaxes", "moveaxis"):
        a, c = axis(), axis()
        return f"jt.{name}({{0}}, {a}, {c})", lambda x: f(x, a, c)
    if name == "rollaxis":
        a, start = axis(), draw(st.integers(0, n))
        return f"jt.rollaxis({{0}}, {a}, {start})", lambda x: f(x, a, start)
    if name in ("flipud", "tril", "triu", "diff", "roll", "repeat", "diag", "hsplit",
                "hstack", "append", "column_stack", "inner", "tile", "pad", "array_split"):
        a, k = axis(), draw(st.integers(-2, 2))
        forms = {
            "flipud": ("jt.flipud({0})", lambda x: f(x)),
            "tril": (f"jt.tril({{0}}, {k})", lambda x: f(x, k)),
            "triu": (f"jt.triu({{0}}, {k})", lambda x: f(x, k)),
            "diff": (f"jt.diff({{0}}, axis={a})", lambda x: f(x, axis=a)),
            "roll": (f"jt.roll({{0}}, {k}, axis={a})", lambda x: f(x, k, axis=a)),
            "repeat": (f"jt.repeat({{0}}, {abs(k)}, axis={a})", lambda x: f(x, abs(k), axis=a)),
            "diag": ("jt.diag({0})", lambda x: f(x)) if n <= 2 else None,
            "hsplit": ("jt.hsplit({0}, [1])[1]", lambda x: f(x, [1])[1]),
            "array_split": (f"jt.array_split({{0}}, 2, axis={a})[0]",
                            lambda x: f(x, 2, axis=a)[0]),
            "hstack": ("jt.hstack([{0}, {0}])", lambda x: f([x, x])),
            "append": (f"jt.append({{0}}, {{0}}, axis={a})", lambda x: f(x, x, axis=a)),
            "column_stack": ("jt.column_stack([{0}, {0}])", lambda x: f([x, x])) if n <= 2 else None,
            "inner": ("jt.inner({0}, {0})", lambda x: f(x, x)) if v.size <= 12 else None,
            "tile": ("jt.tile({0}, (2, 1))", lambda x: f(x, (2, 1))),
            "pad": (f"jt.pad({{0}}, ((1, 0),) + ((0, 2),) * {n - 1}, constant_values=0.5)",
                    lambda x: f(x, ((1, 0),) + ((0, 2),) * (n - 1), constant_values=0.5)),
        }
        return forms[name]
    if name in ("vstack", "vsplit", "split"):
        if name == "vstack":
            return "jt.vstack([{0}, {0}])", lambda x: f([x, x])
        if n < 2 and name == "vsplit":
            return None
        a = 0 if name == "vsplit" else axis()
        if shape[a] % 2:
            return None
        text = "jt.vsplit({0}, 2)[1]" if name == "vsplit" else f"jt.split({{0}}, 2, axis={a})[1]"
        return text, (lambda x: f(x, 2)[1]) if name == "vsplit" else (lambda x: f(x, 2, axis=a)[1])
    if name in ("kron", "tensordot"):
        if v.size > 6:
            return None
        if name == "kron":
            return "jt.kron({0}, {0})", lambda x: f(x, x)
        a = axis()
        return (f"jt.tensordot({{0}}, {{0}}, axes=([{a}], [{a}]))",
                lambda x: f(x, x, axes=([a], [a])))
    if n < 2:
        return None
    a, c = draw(st.sampled_from([(0, 1), (-1, 0), (1, -2)]))
    if a % n == c % n:
        return None
    if name == "fliplr":
        return "jt.fliplr({0})", f
    if name == "rot90":
        k = draw(st.integers(-1, 2))
        return f"jt.rot90({{0}}, {k}, axes=({a}, {c}))", lambda x: f(x, k, axes=(a, c))
    if name in ("diagonal", "trace"):
        k = draw(st.integers(-1, 1))
        return (f"jt.{name}({{0}}, {k}, {a}, {c})", lambda x: f(x, k, a, c))
    return None


NUMPY_SHAPE = ("ravel", "atleast_1d", "atleast_2d", "atleast_3d", "var", "std", "nanmean",
               "average", "swapaxes", "moveaxis", "rollaxis", "flipud", "fliplr", "rot90",
               "roll", "tile", "repeat", "pad", "diff", "tril", "triu", "diag", "diagonal",
               "trace", "vstack", "hstack", "column_stack", "append", "split", "array_split",
               "vsplit", "hsplit", "inner", "tensordot", "kron")


def gen_numpy_shape(draw, b, ops, name=None):
    """NumPy's shape functions, statistics, joins, splits, diagonals and products."""
    x = _pick(draw, b, b.floats())
    v = b.values[x].value
    how = name if name in NUMPY_SHAPE else draw(st.sampled_from(NUMPY_SHAPE))
    step = _numpy_shape_step(draw, v, how)
    if step is not None:
        b.add(step[0], step[1], (x,), how)


# custom gradients, written as a user would. The rules are jittape ops of the inputs
# (what ``f`` computes is not recorded, as in TensorFlow), so second derivatives see them.
@jt.custom_gradient
def softsign(x):
    def grad(dy):
        return dy / jt.square(1 + jt.abs(x))
    return x / (1 + jt.abs(x)), grad


@jt.custom_gradient
def scaled_exp(x, y):
    def grad(dy):
        return dy * jt.exp(x) * y, dy * jt.exp(x)
    return jt.exp(x) * y, grad


def gen_custom(draw, b, ops, name=None):
    x = _pick(draw, b, b.floats())
    if draw(st.booleans()):
        if not _away(b.values[x].value):
            return
        b.add("softsign({0})", softsign, (x,), "custom_gradient")
    else:
        x = b.into(x, (-2.0, 2.0))
        y = b.input(b.values[x].value.shape)
        b.add("scaled_exp({0}, {1})", scaled_exp, (x, y), "custom_gradient")


def gen_guard(draw, b, ops, name=None):
    """``A(x) if jt.sum(c) > 0 else B(x)``: a Python branch on a traced value."""
    c = _pick(draw, b, b.floats())
    total = float(np.sum(b.values[c].value, dtype=np.float64))
    if abs(total) < 10 * AWAY:
        return
    x = _pick(draw, b, b.floats())
    smooth = [s for s in ops.values() if s.kind == "unary" and s.name not in WELL_POSED
              and s.domain[0] == FREE and s.differentiable and s.name != "stop_gradient"]
    f, g = _pick(draw, b, smooth), _pick(draw, b, smooth)
    b.add(f"{f.spelled('{1}')} if jt.sum({{0}}) > 0 else {g.spelled('{1}')}",
          lambda p, q: f.call(q) if jt.sum(p) > 0 else g.call(q), (c, x), "guard")


def python_loop(step, c, x, n, indexed):
    """``for t in range(n): c = step(c, x[t] if indexed else x)``: a plain Python loop,
    which a compiled function rolls into a loop region (jittape/rolling.py)."""
    for t in range(n):
        c = step(c, x[t] if indexed else x)
    return c


def gen_loop(draw, b, ops, name=None):
    """A Python loop of 6 to 8 steps over a carry, reading a value from before it (or
    its ``x[t]``) at each step: rolled when traced, step by step on the tape."""
    c = _pick(draw, b, b.floats())
    x = _pick(draw, b, b.floats())
    shape, xshape = b.values[c].value.shape, b.values[x].value.shape
    n = draw(st.integers(6, 8))
    indexed = len(xshape) > 0 and xshape[0] >= n and draw(st.booleans())
    part = xshape[1:] if indexed else xshape
    if len(part) > len(shape) or not all(a in (1, d) for a, d in zip(part[::-1], shape[::-1])):
        return                               # (its steps' values would change the carry's shape)
    smooth = [s for s in ops.values() if s.kind == "unary" and s.name not in WELL_POSED
              and s.domain[0] == FREE and s.differentiable and s.name != "stop_gradient"]
    f, g = _pick(draw, b, smooth), _pick(draw, b, smooth)
    b.add(f"python_loop(lambda c, x: jt.tanh({f.spelled('c')} * 0.5 + {g.spelled('x')} * 0.3), "
          f"{{0}}, {{1}}, {n}, {indexed})",
          lambda p, q: python_loop(lambda cc, xx: jt.tanh(f.call(cc) * 0.5 + g.call(xx) * 0.3),
                                   p, q, n, indexed), (c, x), "loop")


# the generator of each kind of op the table derives from the registry
GENERATORS = {"unary": gen_unary, "binary": gen_binary, "reduce": gen_reduce,
              "axiswise": gen_axiswise, "predicate1": gen_where, "predicate2": gen_where}
STRUCTURED.update({
    "getitem": gen_view, "reshape": gen_view, "transpose": gen_view, "take": gen_view,
    "expand_dims": gen_view, "squeeze": gen_view, "broadcast_to": gen_view,
    "matmul": gen_contract, "dot": gen_contract, "einsum": gen_contract, "outer": gen_contract,
    "concatenate": gen_join, "stack": gen_join, "where": gen_where, "set_row": gen_update,
    "sparse_softmax_cross_entropy": gen_nn, "softmax_cross_entropy": gen_nn,
    "clip": gen_misc, "cast": gen_misc, "full_like": gen_misc,
    **{name: gen_special for name in SPECIAL},
})
STRUCTURED.update({name: gen_numpy_shape for name in NUMPY_SHAPE})
STRUCTURED.update({name: gen_sorting for name in SORTING})
NOT_FUZZED.update({
    **{name: "an integer result, no gradient: the registry's checks and test_sorting cover it"
       for name in ("argsort", "argpartition", "searchsorted")},
    **{name: "sort's gather and its gradient's scatter: reached through gen_sorting's ops"
       for name in ("gather_along", "scatter_along")},
})
NOT_FUZZED.update({
    **{name: "np.fft's transforms: complex results (the fuzzer draws real programs) compiled "
             "with rocket-fft on the CPU only: test_fft and the registry's checks cover them"
       for name in ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "fftn",
                    "ifftn", "rfft2", "irfft2", "rfftn", "irfftn")},
    **{name: "a roll by half of each size, which the fuzzer draws (gen_numpy_shape: roll)"
       for name in ("fftshift", "ifftshift")},
})
OPS = derived_ops()
# What a step applies, drawn uniformly: each op of the table (so that a rare kind of op
# is drawn as often as one elementwise op), and two features that are not ops.
FEATURES = {"custom_gradient": gen_custom, "guard": gen_guard, "loop": gen_loop}
STEPS = {**{name: GENERATORS[spec.kind] for name, spec in OPS.items()}, **STRUCTURED, **FEATURES}


def _begin(draw, grads, inputs):
    """(builder with its inputs, mode, compiled) of a new program: ``grads`` of the
    modes' draws are "grad", ``inputs`` the choices of how many inputs."""
    dtype = draw(st.sampled_from([np.float64, np.float64, np.float32]))
    mode = draw(st.sampled_from(["grad"] * grads + ["hessian", "function", "jvp", "vmap"]))
    if mode == "hessian":
        dtype = np.float64
    b = Builder(dtype, np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1))))
    # from the program's generator: Hypothesis favours simple draws, and a one-in-twenty
    # choice must not come up one time in five
    luck = np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1))).random(2)
    compiled = luck[0] < 1 / COMPILE_EVERY
    b.cuda = compiled and luck[1] < 1 / CUDA_EVERY
    for _ in range(draw(st.sampled_from(inputs))):
        b.input(draw(shapes()))
    return b, mode, compiled


@st.composite
def programs(draw):
    b, mode, compiled = _begin(draw, 6, [1, 2, 2])
    for _ in range(draw(st.sampled_from(range(2, 10)))):
        name = _pick(draw, b, sorted(STEPS))
        STEPS[name](draw, b, OPS, name)
        if len(b.values) > 40:
            break
    # every value that no later step reads is an output: each op reaches the gradient
    read = {i for step in b.steps for i in step.ins}
    floats = b.floats()
    outputs = [i for i in floats if i not in read] or floats[-1:]
    return b.program(outputs, mode, compiled, b.cuda)


# -- the checks ---------------------------------------------------------------------------


def _scalars(args):
    """Arguments as the generated kernel takes them (0-d arrays as NumPy scalars)."""
    return [a if a.ndim else a[()] for a in args]


def _scale(want):
    """The size the absolute tolerance is relative to: the largest finite value (a NaN
    where both sides agree on it, e.g. arguments grown out of an op's domain, must not
    make the tolerance NaN), at least 1."""
    want = np.abs(np.asarray(want, np.float64))
    return max(float(np.max(want, where=np.isfinite(want), initial=0.0)), 1.0)


def close(got, want, dtype, what):
    got = np.asarray(got, np.float64)
    want = np.asarray(want, np.float64)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    scale = _scale(want)
    if np.dtype(dtype) == np.float32:
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * scale, err_msg=what)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-8, atol=1e-10 * scale, err_msg=what)


def close_fd(got, want, what):
    scale = _scale(want)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6 * scale, err_msg=what)


def eager_value_and_grads(program, args, any_shape=False):
    tensors = [jt.constant(a) for a in args]
    with jt.GradientTape() as tape:
        for k in program.diff:
            tape.watch(tensors[k])
        loss = program.loss(*tensors, any_shape=any_shape)
    grads = tape.gradient(loss, [tensors[k] for k in program.diff])
    grads = [np.zeros_like(args[k]) if g is None else g.numpy() for k, g in zip(program.diff, grads)]
    return float(loss), grads


def numeric_loss(program, args):
    return float(program.loss(*[jt.constant(a) for a in args], frozen=True))


def fd_grad(fn, args, k, eps=1e-6):
    """Central differences of the scalar fn(args) w.r.t. args[k]."""
    x = args[k]
    out = np.zeros(x.shape)
    for i in range(x.size):
        plus = [a.copy() for a in args]
        minus = [a.copy() for a in args]
        plus[k].reshape(-1)[i] += eps
        minus[k].reshape(-1)[i] -= eps
        out.reshape(-1)[i] = (fn(plus) - fn(minus)) / (2 * eps)
    return out


def check_grad(program, args):
    value, grads = eager_value_and_grads(program, args)
    vg = jt.value_and_grad(program.function(), argnums=program.diff)
    lowered = vg.lower(*args)
    out = lowered.python(*_scalars(args))
    close(out[0], value, program.dtype, "value: generated Python vs eager tape")
    for k, g, want in zip(program.diff, out[1:], grads):
        close(g, want, program.dtype, f"gradient of argument {k}: generated Python vs eager tape")
    if lowered.numpy is not None:           # the graph on NumPy, as tiered calls run it
        out = lowered.numpy(*_scalars(args))
        close(out[0], value, program.dtype, "value: graph on NumPy vs eager tape")
        for k, g, want in zip(program.diff, out[1:], grads):
            close(g, want, program.dtype, f"gradient of argument {k}: graph on NumPy vs eager tape")
    if program.dtype == np.float64:
        for k, want in zip(program.diff, grads):
            close_fd(want, fd_grad(lambda a: numeric_loss(program, a), args, k),
                     f"gradient of argument {k}: eager tape vs finite differences")
    if program.compiled:
        got_value, got = vg(*args)
        close(got_value, value, program.dtype, "value: compiled vs eager tape")
        for k, g, want in zip(program.diff, got, grads):
            assert g.dtype == args[k].dtype, f"gradient {k} has dtype {g.dtype}"
            close(g, want, program.dtype, f"gradient of argument {k}: compiled vs eager tape")
    if program.compiled:
        check_grown(program, args)
    if program.cuda:
        cuda_vg = jt.value_and_grad(program.function(), argnums=program.diff, target="cuda")
        try:
            got_value, got = cuda_vg(*args)
        except jt.UnsupportedError as err:      # an op without a CUDA lowering: said so
            note(f"CUDA: {err}")
            return
        close(got_value, value, program.dtype, "value: CUDA vs eager tape")
        for k, g, want in zip(program.diff, got, grads):
            close(g, want, program.dtype, f"gradient of argument {k}: CUDA vs eager tape")


def check_grown(program, args):
    """Compiled at the arguments' shapes, then called with larger ones."""
    vg = jt.value_and_grad(program.function(any_shape=True), argnums=program.diff)
    vg(*args)
    grown = program.grown_args()
    try:
        value, grads = eager_value_and_grads(program, grown, any_shape=True)
    except (jt.ShapeError, IndexError):      # sizes the program's constants do not fit
        return
    got_value, got = vg(*grown)
    close(got_value, value, program.dtype, "larger arguments: value, compiled vs eager tape")
    for k, g, want in zip(program.diff, got, grads):
        close(g, want, program.dtype,
              f"larger arguments: gradient of argument {k}, compiled vs eager tape")


def check_hessian(program, args):
    k = program.diff[0]
    u = np.random.default_rng(1).normal(size=args[k].shape)
    tensors = [jt.constant(a) for a in args]
    with jt.GradientTape() as outer:
        outer.watch(tensors[k])
        with jt.GradientTape() as inner:
            inner.watch(tensors[k])
            loss = program.loss(*tensors)
        g = inner.gradient(loss, tensors[k])
        gu = None if g is None else jt.sum(g * u)
    hu = None if gu is None else outer.gradient(gu, tensors[k])
    hu = np.zeros(args[k].shape) if hu is None else hu.numpy()

    def grad_at(a):
        _, grads = eager_value_and_grads(program, a)
        return grads[program.diff.index(k)]

    eps = 1e-5
    plus = [a.copy() for a in args]
    minus = [a.copy() for a in args]
    plus[k] = plus[k] + eps * u
    minus[k] = minus[k] - eps * u
    fd = (grad_at(plus) - grad_at(minus)) / (2 * eps)
    scale = max(float(np.max(np.abs(fd), initial=0.0)), 1.0)
    np.testing.assert_allclose(hu, fd, rtol=1e-4, atol=1e-5 * scale,
                               err_msg="Hessian-vector product: nested tapes vs finite differences")
    h = jt.hessian(program.function(), argnums=k)
    lowered = h.lower(*args)
    n = args[k].size
    for run, what in ((lowered.python, "generated Python"), (lowered.numpy, "graph on NumPy")):
        if run is None:
            continue
        got = run(*_scalars(args))[0]     # (then the guards' conditions)
        got_hu = (np.reshape(got, (n, n)) @ u.reshape(-1)).reshape(args[k].shape)
        close(got_hu, hu, np.float64, f"Hessian-vector product: {what} vs nested tapes")
    if program.compiled:
        got = h(*args)
        got_hu = (np.reshape(got, (n, n)) @ u.reshape(-1)).reshape(args[k].shape)
        close(got_hu, hu, np.float64, "Hessian-vector product: compiled vs nested tapes")


def check_function(program, args):
    """A training step: tape inside, the first floating argument a Variable."""
    k = program.diff[0]
    rate = 0.25              # spelled as a literal in step: a captured float is an input

    assigned = []

    def step(*a):
        v = a[k]
        with jt.GradientTape() as tape:
            loss = program.loss(*a)
        g = tape.gradient(loss, v)
        if g is not None:
            v.assign_sub(0.25 * g)
        assigned.append(g is not None)
        return loss

    def with_variable(v):
        return [v if j == k else a for j, a in enumerate(args)]

    v = jt.Variable(args[k].copy())
    eager_loss = float(step(*with_variable(v)))
    eager_new = v.numpy()
    f = jt.function(step)
    lowered = f.lower(*with_variable(jt.Variable(args[k].copy())))
    for run, what in ((lowered.python, "generated Python"), (lowered.numpy, "graph on NumPy")):
        if run is None:
            continue
        out = run(*_scalars(args))
        close(out[0], eager_loss, program.dtype, f"function: loss, {what} vs eager")
        # outputs: the loss, the assigned variable's new value, then guard conditions
        new = out[1] if assigned[0] else args[k]
        close(new, eager_new, program.dtype, f"function: updated variable, {what} vs eager")
    if program.dtype == np.float64:
        want = args[k] - rate * fd_grad(lambda a: numeric_loss(program, a), args, k)
        close_fd(eager_new, want, "function: updated variable vs finite differences")
    if program.compiled:
        vc = jt.Variable(args[k].copy())
        got = f(*with_variable(vc))
        close(got, eager_loss, program.dtype, "function: loss, compiled vs eager")
        close(vc.numpy(), eager_new, program.dtype, "function: updated variable, compiled vs eager")


def check_jvp(program, args):
    """Forward mode: the eager accumulator's tangent = the generated Python and the graph
    on NumPy of a compiled function with an accumulator inside (= Numba when compiled)
    = central finite differences along the direction (float64 programs)."""
    k = program.diff[0]
    u = np.random.default_rng(3).normal(size=args[k].shape).astype(args[k].dtype)
    tensors = [jt.constant(a) for a in args]
    with jt.ForwardAccumulator(tensors[k], u) as acc:
        loss = program.loss(*tensors)
    t = acc.jvp(loss)
    want = 0.0 if t is None else float(t)
    if program.dtype == np.float64:
        eps = 1e-6
        plus = [a.copy() for a in args]
        minus = [a.copy() for a in args]
        plus[k] = plus[k] + eps * u
        minus[k] = minus[k] - eps * u
        fd = (numeric_loss(program, plus) - numeric_loss(program, minus)) / (2 * eps)
        close_fd(want, fd, "tangent: eager accumulator vs finite differences")
    f = program.function()

    def with_tangent(*a):
        with jt.ForwardAccumulator(a[k], u) as acc:
            y = f(*a)
        tangent = acc.jvp(y)
        return y, (jt.zeros_like(y) if tangent is None else tangent)

    compiled = jt.function(with_tangent)
    lowered = compiled.lower(*args)
    for run, what in ((lowered.python, "generated Python"), (lowered.numpy, "graph on NumPy")):
        if run is None:
            continue
        out = run(*_scalars(args))             # (the value, the tangent, then guards)
        close(out[1], want, program.dtype, f"tangent: {what} vs eager accumulator")
    if program.compiled:
        _, got = compiled(*args)
        close(got, want, program.dtype, "tangent: compiled vs eager accumulator")


def check_vmap(program, args):
    """vmap: the program's value and gradients mapped over a batch of three values of
    its first floating argument (the others shared) = the eager tape's, example by
    example, through the generated Python and the graph on NumPy (= Numba when
    compiled). A Python branch on a mapped value must say so (TracerError)."""
    k = program.diff[0]
    rng = np.random.default_rng(4)
    rows = [(args[k] + 1e-3 * j * rng.normal(size=args[k].shape)).astype(args[k].dtype)
            for j in range(3)]
    want_values, want_grads = [], []
    for row in rows:
        value, grads = eager_value_and_grads(program, [row if j == k else a
                                                       for j, a in enumerate(args)])
        want_values.append(value)
        want_grads.append(grads)
    batched = [np.stack(rows) if j == k else a for j, a in enumerate(args)]
    mapped = jt.vmap(jt.value_and_grad(program.function(), argnums=program.diff),
                     in_axes=tuple(0 if j == k else None for j in range(len(args))))
    try:
        lowered = mapped.compiled.lower(*batched)
    except jt.errors.TracerError as err:
        assert "guard" in program.used and "vmap" in str(err), err
        return
    runs = [(lowered.python, "generated Python"), (lowered.numpy, "graph on NumPy")]
    if program.compiled:
        runs.append((lambda *a: _flat(mapped(*batched)), "compiled"))
    for run, what in runs:
        if run is None:
            continue
        out = run(*_scalars(batched))           # (the values, then the gradients)
        close(out[0], np.stack(want_values), program.dtype, f"vmap: values, {what} vs eager")
        for j, d in enumerate(program.diff):
            close(out[1 + j], np.stack([g[j] for g in want_grads]), program.dtype,
                  f"vmap: gradients of argument {d}, {what} vs eager")


def _flat(result):
    value, grads = result
    return (value,) + tuple(grads)


CHECKS = {"grad": check_grad, "hessian": check_hessian, "function": check_function,
          "jvp": check_jvp, "vmap": check_vmap}

_fuzz_settings = settings(
    max_examples=GRAPHS, deadline=None, derandomize=SEED is None, database=None,
    print_blob=True, suppress_health_check=list(HealthCheck))


@_fuzz_settings
@given(programs())
def test_random_program(program):
    note(f"ops: {', '.join(program.used)}")
    CHECKS[program.mode](program, program.args)


if SEED is not None:
    test_random_program = seed(int(SEED))(test_random_program)


@st.composite
def sorting_programs(draw):
    """``programs``' programs with two sorting steps (a sort, a partition or an order
    statistic) among the others: after one of the inputs, and after the other steps."""
    b, mode, compiled = _begin(draw, 5, [1, 2])
    gen_sorting(draw, b, OPS, draw(st.sampled_from(SORTING)))
    for _ in range(draw(st.sampled_from(range(1, 5)))):
        name = _pick(draw, b, sorted(STEPS))
        STEPS[name](draw, b, OPS, name)
    gen_sorting(draw, b, OPS, draw(st.sampled_from(SORTING)))
    read = {i for step in b.steps for i in step.ins}
    floats = b.floats()
    outputs = [i for i in floats if i not in read] or floats[-1:]
    return b.program(outputs, mode, compiled, b.cuda)


@settings(max_examples=max(GRAPHS // 10, 10), deadline=None, derandomize=SEED is None,
          database=None, suppress_health_check=list(HealthCheck))
@given(sorting_programs())
def test_random_program_with_sorting_or_median_or_quantile_or_percentile(program):
    note(f"ops: {', '.join(program.used)}")
    CHECKS[program.mode](program, program.args)


# -- the fuzzer's own coverage ------------------------------------------------------------


def test_every_registered_op_is_fuzzed_or_excused():
    """A new op joins the fuzzer by being registered: derived from its record, given a
    generator in STRUCTURED, or named in NOT_FUZZED with the reason."""
    names = set(all_ops())
    covered = set(OPS) | set(STRUCTURED) | set(NOT_FUZZED)
    assert names <= covered, f"ops the fuzzer does not know how to use: {sorted(names - covered)}"
    assert not (set(OPS) & set(STRUCTURED))


def test_op_table_derives_kinds_from_the_registry():
    kinds = {name: spec.kind for name, spec in OPS.items()}
    assert kinds["exp"] == "unary" and kinds["power"] == "binary"
    assert kinds["sum"] == "reduce" and kinds["logsumexp"] == "reduce"
    assert kinds["softmax"] == "axiswise" and kinds["greater"] == "predicate2"
    assert OPS["log"].domain[0][0] > 0 and OPS["sqrt"].domain[0][0] > 0


# -- what the fuzzer found ---------------------------------------------------------------


@pytest.mark.parametrize("shape", [(), (3,), (2, 3)])
def test_hessian_of_a_function_linear_in_the_argument_is_zero(shape):
    """A zero block of a Hessian (the gradient does not depend on the argument) was a
    stacked row with no loop: NameError in the generated code."""
    def loss(x, y):
        return jt.sum(x * 0.3) + jt.sum(jt.exp(y))

    x = np.linspace(0.1, 0.9, int(np.prod(shape))).reshape(shape)
    h = jt.hessian(loss)
    args = [x, x]
    np.testing.assert_array_equal(h.lower(*args).python(*_scalars(args))[0],
                                  np.zeros(shape + shape))
    np.testing.assert_array_equal(h(*args), np.zeros(shape + shape))
    blocks = jt.hessian(loss, argnums=(0, 1))(*args)
    np.testing.assert_array_equal(blocks[0][1], np.zeros(shape + shape))
    n = x.size
    np.testing.assert_allclose(np.reshape(blocks[1][1], (n, n)), np.diag(np.exp(x).reshape(-1)))


def test_hessian_zero_block_on_cuda():
    def loss(x, y):
        return jt.sum(x * 0.3) + jt.sum(jt.exp(y))

    x = np.array([0.1, 0.5, 0.9])
    blocks = jt.hessian(loss, argnums=(0, 1), target="cuda")(x, x)
    np.testing.assert_array_equal(blocks[0][0], np.zeros((3, 3)))
    np.testing.assert_allclose(blocks[1][1], np.diag(np.exp(x)))


@pytest.mark.parametrize("reduce", ["sum", "max", "prod", "logsumexp"])
def test_reduction_axis_minus_one_on_0d_value(reduce):
    x = np.float64(0.7)
    op = getattr(jt, reduce)
    # NumPy reduces a 0-d array over axis 0 or -1 to its one element
    np.testing.assert_allclose(op(jt.constant(x), axis=-1).numpy(), np.sum(x, axis=-1))
    np.testing.assert_allclose(jt.grad(lambda t: op(t, axis=-1))(x), 1.0)


@pytest.mark.parametrize("reduce", ["max", "prod", "sum"])
def test_cuda_reduction_over_no_axes(reduce):
    x = np.array([0.85, 1.25])
    g = jt.grad(lambda t: jt.sum(jt.sin(getattr(jt, reduce)(t, axis=())) * 2.0), target="cuda")
    np.testing.assert_allclose(g(x), 2.0 * np.cos(x))


def test_tolerance_ignores_nans_both_sides_agree_on():
    # a program called with grown arguments left an op's domain: NaN in eager and
    # compiled alike, which must not turn the absolute tolerance into NaN
    want = np.array([np.nan, np.nan, -0.02556108195938073])
    close(want + [0.0, 0.0, 2.8e-17], want, np.float64, "grown arguments")
    with pytest.raises(AssertionError):
        close(np.array([np.nan, 1.0, -0.025]), want, np.float64, "a NaN only one side has")
