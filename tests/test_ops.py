"""Registry-driven op tests: every registered op, with the examples it declares.

Nobody writes a test per op: adding an op with its examples adds it here.
"""

import ast
import builtins
import math
import pathlib
import re
import zlib

import numpy as np
import pytest

import jittape as jt
from jittape import control
from jittape.codegen import cpu, cuda
from jittape.custom import CustomRule
from jittape.ops.core import KINDS, REGISTRY, Aval, Primitive, aval_of
from jittape.tensor import FUNCTION_TABLE, UFUNC_TABLE

from opcheck import all_ops, apply, cases, make_inputs, numeric_grad, projected, tape_grads

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

PRIMITIVE_CASES = [c for c in cases() if isinstance(all_ops()[c[0]], Primitive)]
DIFFERENTIABLE = cases(differentiable_only=True)


def _rng(name, i):
    # (crc32, not hash(): a string's hash changes with each process, and so would the
    # inputs; a failure must come back when the test runs again)
    return np.random.default_rng(zlib.crc32(f"{name}/{i}".encode()))


def test_every_op_declares_examples_and_differentiable_ops_declare_vjps():
    missing_vjp = [n for n, op in all_ops().items()
                   if isinstance(op, Primitive) and op.differentiable and op.vjp is None]
    missing_examples = [n for n, op in all_ops().items() if not op.examples]
    assert not missing_vjp, f"differentiable ops without a VJP rule: {missing_vjp}"
    assert not missing_examples, f"ops without test examples: {missing_examples}"
    # each example of a differentiable op must have at least one differentiable input
    for name, op in all_ops().items():
        if op.differentiable:
            for ex in op.examples:
                assert any(isinstance(s, tuple) for s in ex.inputs), (name, ex)


def _header_names(header):
    tree = ast.parse(header.replace("{", "").replace("}", ""))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return found


def _records():
    """Every op record a graph can hold: the primitives, the loop parts, custom rules."""
    records = [op for op in REGISTRY.values()]
    records += list(control.RECORDS)
    records.append(CustomRule(None, 1, "f", traced=True))
    return records


def _scalar_calls(template):
    """(module, function) of each call in a scalar expression template."""
    expr = template.replace("{f}", "f64").replace("{dtype}", "float64")
    expr = re.sub(r"\{(\w+)\}", r"_\1", expr)
    calls = set()
    for node in ast.walk(ast.parse(expr, mode="eval")):
        if isinstance(node, ast.Call):
            f = node.func
            calls.add((f.value.id, f.attr) if isinstance(f, ast.Attribute) else (None, f.id))
    return calls


@pytest.mark.parametrize("backend", ["cpu", "cuda"])
def test_every_op_lowers_to_each_backend_it_claims(backend):
    """A missing lowering (a CUDA one above all) is caught here, without a GPU: an
    elementwise op's scalar expression may call only what the backend's generated module
    has (on CUDA, after ``device_code``: math's functions, the runtime's, NumPy's
    ``DEVICE_NUMPY``)."""
    header = _header_names(cpu.IMPORTS if backend == "cpu" else cuda.HEADER)
    missing = []
    for op in _records():
        assert op.kind in KINDS, op
        if backend not in op.backends:
            continue
        if op.kind == "elementwise":
            template = op.lowerings.get("scalar")
            if template is None:
                missing.append(f"{op.name}: no scalar lowering")
                continue
            if callable(template):
                continue                      # made per node; the compiled tests run it
            code = cuda.device_code(template) if backend == "cuda" else template
            for module, fn in _scalar_calls(code):
                ok = (fn in header or hasattr(builtins, fn) if module is None else
                      hasattr(math, fn) if module == "math" else
                      module == "np" and (isinstance(getattr(np, fn, None), type)
                                          or backend == "cpu" and hasattr(np, fn)
                                          or getattr(np, fn, None) in cuda.DEVICE_NUMPY))
                if not ok:
                    missing.append(f"{op.name}: {backend} has no {module or ''}"
                                   f"{'.' if module else ''}{fn} ({template})")
        elif op.kind == "reduction":
            if "reduce" not in op.lowerings or backend not in op.lowerings:
                missing.append(f"{op.name}: no reduce step or no {backend} lowering")
        elif backend not in op.lowerings:
            missing.append(f"{op.name}: no {backend} lowering")
    assert not missing, "\n".join(missing)


def _compared_names(tree, names):
    """Op names that a comparison tests against (``prim.name == "sum"``, ``in (...)``)."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        for side in [node.left, *node.comparators]:
            if isinstance(side, ast.Attribute) and side.attr == "name":
                found.append((node.lineno, ast.unparse(side)))
            for leaf in ast.walk(side):
                if isinstance(leaf, ast.Constant) and leaf.value in names:
                    found.append((node.lineno, leaf.value))
    return found


def test_passes_and_backends_ask_records_not_names():
    """Passes and backends never test an op's name: they ask its record's traits."""
    names = {op.name for op in _records()}
    root = pathlib.Path(jt.__file__).parent
    found = [f"{path.relative_to(root)}:{line}: {what}"
             for path in sorted([*root.glob("passes/*.py"), *root.glob("codegen/*.py")])
             for line, what in _compared_names(ast.parse(path.read_text()), names)]
    assert not found, found


@pytest.mark.parametrize("name,i", PRIMITIVE_CASES)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_shape_rule_matches_numpy(name, i, dtype):
    op = all_ops()[name]
    ex = op.examples[i]
    values, _ = make_inputs(op, ex, _rng(name, i), dtype)
    out = op.impl(*values, **ex.params)
    predicted = op.abstract(*[aval_of(v) for v in values], **ex.params)
    assert predicted == Aval(np.shape(out), np.asarray(out).dtype)


@pytest.mark.parametrize("name,i", DIFFERENTIABLE)
def test_vjp_matches_finite_differences(name, i):
    op = all_ops()[name]
    ex = op.examples[i]
    rng = _rng(name, i)
    values, diff = make_inputs(op, ex, rng)
    out = apply(op, values, ex.params)
    v = rng.normal(size=np.shape(out))
    out, grads = tape_grads(op, values, diff, ex.params, v)
    f = projected(op, ex.params, v)
    low = out.dtype == np.float32           # an op that rounds to float32 (cast) needs wider steps
    eps, rtol = (1e-3, 2e-3) if low else (1e-6, 1e-5)
    for k, g in zip(diff, grads):
        expected = numeric_grad(f, values, k, eps)
        if g is None:
            assert np.allclose(expected, 0, atol=1e-7), f"{name}: gradient of input {k} is None"
            continue
        assert g.shape == values[k].shape and g.dtype == np.float64
        np.testing.assert_allclose(g.numpy(), expected, rtol=rtol, atol=1e-7,
                                   err_msg=f"{name} input {k}")


def test_every_differentiable_primitive_declares_jvp_rules():
    """Forward mode has a rule of its own on each record (the transposed VJP is only the
    fallback of custom rules): a rule per differentiable input, or one for all."""
    missing = []
    for name, op in REGISTRY.items():
        if not op.differentiable:
            continue
        if op.jvp is None:
            missing.append(name)
        elif not callable(op.jvp):
            for ex in op.examples:
                for k, spec in enumerate(ex.inputs):
                    if isinstance(spec, tuple) and op.vjp[k] is not None and op.jvp[k] is None:
                        missing.append(f"{name} input {k}")
    assert not missing, f"differentiable primitives without JVP rules: {missing}"


def _directional(op, params, values, diff, dirs, eps=1e-6):
    """Central differences of op(*values) along ``dirs`` (one per differentiable input)."""
    def at(sign):
        moved = list(values)
        for k, d in zip(diff, dirs):
            moved[k] = values[k] + sign * eps * d
        return np.asarray(apply(op, [jt.constant(a) if isinstance(a, np.ndarray) else a
                                     for a in moved], params), np.float64)
    return (at(1) - at(-1)) / (2 * eps)


@pytest.mark.parametrize("name,i", DIFFERENTIABLE)
def test_jvp_matches_finite_differences(name, i):
    op = all_ops()[name]
    ex = op.examples[i]
    rng = _rng(name, i)
    values, diff = make_inputs(op, ex, rng)
    dirs = [rng.normal(size=values[k].shape) for k in diff]
    args = [jt.constant(a) if isinstance(a, np.ndarray) else a for a in values]
    with jt.ForwardAccumulator([args[k] for k in diff], dirs) as acc:
        out = apply(op, args, ex.params)
    t = acc.jvp(out)
    low = out.dtype == np.float32
    eps, rtol = (1e-3, 2e-3) if low else (1e-6, 1e-5)
    expected = _directional(op, ex.params, values, diff, dirs, eps)
    if t is None:
        assert np.allclose(expected, 0, atol=1e-7), f"{name}: tangent is None"
        return
    assert t.shape == out.shape and t.dtype == out.dtype, (name, t.shape, t.dtype)
    # a float32 result rounds each side of the difference by half an ulp of its size:
    # about 6e-8 |out| / eps in the quotient, which a small derivative's rtol does not
    # cover (cast to float32 of a slope-1 input, found with a random seed)
    atol = 1e-7 if not low else 1e-4 * max(1.0, float(np.max(np.abs(out.numpy()), initial=0)))
    np.testing.assert_allclose(t.numpy(), expected, rtol=rtol, atol=atol, err_msg=name)


@pytest.mark.parametrize("name,i", [c for c in DIFFERENTIABLE if c[1] == 0])
def test_jvp_rules_and_the_transposed_vjp_agree(name, i):
    """The fallback (a VJP rule transposed by a tape) gives what the op's own JVP rule
    gives: the construction custom rules rely on, checked on every primitive."""
    op = all_ops()[name]
    if not isinstance(op, Primitive):
        return
    from jittape.forward import transposed_vjp as _transposed_vjp
    from jittape.jvp import output_tangent
    ex = op.examples[i]
    rng = _rng(name, i)
    values, diff = make_inputs(op, ex, rng)
    args = [jt.constant(a) if isinstance(a, np.ndarray) else a for a in values]
    out = op.bind(*args, **ex.params)
    tangents = [jt.constant(rng.normal(size=values[k].shape)) if k in diff else None
                for k in range(len(args))]
    own = output_tangent(op, tangents, out, args, ex.params)
    fallback = _transposed_vjp(op, tangents, diff, out, args, ex.params)
    fallback = np.broadcast_to(np.asarray(fallback), out.shape) if fallback is not None else 0
    np.testing.assert_allclose(np.asarray(own), fallback, rtol=1e-10, atol=1e-12, err_msg=name)


@pytest.mark.parametrize("name,i", DIFFERENTIABLE)
def test_float32_stays_float32(name, i):
    op = all_ops()[name]
    ex = op.examples[i]
    rng = _rng(name, i)
    values, diff = make_inputs(op, ex, rng, np.float32)
    out = apply(op, values, ex.params)
    if out.dtype.kind != "f" or "dtype" in ex.params:
        return
    assert out.dtype == np.float32, name
    v = np.ones(np.shape(out), np.float32)
    _, grads = tape_grads(op, values, diff, ex.params, v)
    for k, g in zip(diff, grads):
        if g is not None:
            assert g.dtype == np.float32, (name, k)
    if isinstance(op, Primitive):            # each VJP rule itself keeps float32 (no hidden widening)
        args = [jt.constant(a) if isinstance(a, np.ndarray) else a for a in values]
        out = op.bind(*args, **ex.params)
        g = jt.constant(np.ones(out.shape, out.dtype))     # (a complex result: complex64)
        for k in diff:
            ct = op.vjp[k](g, out, *args, **ex.params)
            assert ct is None or ct.dtype == np.float32, (name, k, ct.dtype)


@pytest.mark.parametrize("name,i", [c for c in DIFFERENTIABLE if c[1] == 0])
def test_second_derivatives_match_finite_differences(name, i):
    """VJP rules are written with jittape ops, so nested tapes differentiate them again."""
    op = all_ops()[name]
    ex = op.examples[i]
    rng = _rng(name, i)
    values, diff = make_inputs(op, ex, rng)
    k = diff[0]
    v = rng.normal(size=np.shape(apply(op, values, ex.params)))
    u = rng.normal(size=values[k].shape)

    def inner(vals):                       # <grad_k f, u> as a function of the inputs
        _, grads = tape_grads(op, vals, [k], ex.params, v)
        return 0.0 if grads[0] is None else float(np.sum(grads[0].numpy() * u))

    args = [jt.constant(a) if isinstance(a, np.ndarray) else a for a in values]
    with jt.GradientTape() as outer:
        outer.watch(args[k])
        with jt.GradientTape() as tape:
            tape.watch(args[k])
            loss = jt.sum(apply(op, args, ex.params) * v)
        g = tape.gradient(loss, args[k])
        gu = jt.sum(g * u) if g is not None else None
    h = outer.gradient(gu, args[k]) if gu is not None else None
    expected = numeric_grad(inner, values, k)
    got = np.zeros_like(expected) if h is None else h.numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-6, err_msg=name)


def test_numpy_dispatch_reaches_jittape_ops():
    x = jt.constant(np.array([[1.0, -2.0, 3.0], [0.5, 2.0, -1.0]]))
    assert isinstance(np.exp(x), jt.Tensor)
    assert isinstance(np.sum(x, axis=1), jt.Tensor)
    assert isinstance(np.maximum(x, 0), jt.Tensor)
    assert isinstance(np.where(x > 0, x, 0.0), jt.Tensor)
    assert isinstance(np.concatenate([x, x], axis=0), jt.Tensor)
    np.testing.assert_allclose(np.sum(x, axis=1).numpy(), [2.0, 1.5])
    assert len(UFUNC_TABLE) >= 30 and len(FUNCTION_TABLE) >= 20


def test_unsupported_numpy_function_names_itself():
    x = jt.constant([1.0, 2.0])
    with pytest.raises(jt.UnsupportedError, match="numpy.unique"):
        np.unique(x)
    with pytest.raises(jt.UnsupportedError, match="numpy.spacing"):
        np.spacing(x)
    with pytest.raises(jt.UnsupportedError, match="numpy.add.reduce"):
        np.add.reduce(x)


# -- compiled: every op through trace, autodiff, codegen and Numba ---------------------

def _op_program(name):
    """All examples of an op, in float64 and in float32, as one loss over flat arrays.

    Returns (loss, arrays, argnums): loss(*arrays) returns (total, (total64, total32))
    where total<d> = sum over the examples in dtype d of sum(op(*inputs) * v); it is
    differentiated in every floating input. One compile covers both dtypes: all the
    examples in float64, the first two in float32 (Numba's compile time grows with
    every loop, and the float32 code differs only in its types).
    """
    op = all_ops()[name]
    arrays, argnums, layout = [], [], []
    for dtype in (np.float64, np.float32):
        rng = _rng(name, "compiled")
        for ex in op.examples[:None if dtype == np.float64 else 2]:
            values, diff = make_inputs(op, ex, rng, dtype)
            slots = []
            for k, value in enumerate(values):
                if isinstance(value, np.ndarray):
                    if k in diff:
                        argnums.append(len(arrays))
                    slots.append(("arg", len(arrays)))
                    arrays.append(value)
                else:
                    slots.append(("static", value))
            out = apply(op, values, ex.params)
            v = rng.normal(size=np.shape(out)).astype(dtype)
            dirs = [rng.normal(size=values[k].shape).astype(dtype) for k in diff]
            layout.append((dtype, slots, ex.params, v, diff, dirs))

    def loss(*args):
        # sum(op(*inputs) * v) per dtype, and sum(tangent * v) for the directions ``dirs``
        # (a forward accumulator in the same program: its JVP rules compiled with it)
        totals = {np.float64: 0.0, np.float32: 0.0}
        tangents = {np.float64: 0.0, np.float32: 0.0}
        for dtype, slots, params, v, diff, dirs in layout:
            inputs = [args[s[1]] if s[0] == "arg" else s[1] for s in slots]
            with jt.ForwardAccumulator([inputs[k] for k in diff], dirs) as acc:
                out = apply(op, inputs, params)
            totals[dtype] = totals[dtype] + jt.sum(out * v)
            t = acc.jvp(out) if diff else None
            if t is not None:
                tangents[dtype] = tangents[dtype] + jt.sum(t * v)
        t64, t32 = totals[np.float64], totals[np.float32]
        return t64 + jt.cast(t32, np.float64), (t64, t32, tangents[np.float64],
                                                tangents[np.float32])

    return loss, arrays, tuple(argnums)


def _eager(loss, arrays, argnums):
    args = [jt.constant(a) for a in arrays]
    with jt.GradientTape() as tape:
        for k in argnums:
            tape.watch(args[k])
        value, parts = loss(*args)
    grads = tape.gradient(value, [args[k] for k in argnums])
    return [np.asarray(p) for p in parts], [None if g is None else g.numpy() for g in grads]


def _close(got, want, dtype, what):
    if np.dtype(dtype) == np.float64:
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12, err_msg=what)
    else:                                     # float32: to rounding (sums reassociate)
        scale = max(float(np.max(np.abs(want), initial=0.0)), 1.0)
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6 * scale, err_msg=what)


@pytest.mark.parametrize("name", sorted(all_ops()))
def test_compiled_op_matches_eager(name):
    """Eager tape, the generated Python run without JIT, and Numba: one answer."""
    loss, arrays, argnums = _op_program(name)
    parts, grads = _eager(loss, arrays, argnums)
    if argnums:
        f = jt.value_and_grad(loss, argnums=argnums, has_aux=True)
        (_, got_parts), got_grads = f(*arrays)
    else:                                    # no floating input (e.g. only index arrays)
        f = jt.value_and_grad(lambda s, *a: loss(*a)[0] + s, argnums=0)
        got_parts = None
        got_grads = []
        value, _ = f(np.float64(0.0), *arrays)
        _close(value, parts[0] + parts[1], np.float32, name)
    if got_parts is not None:
        _close(got_parts[0], parts[0], np.float64, f"{name} float64 value")
        _close(got_parts[1], parts[1], np.float32, f"{name} float32 value")
        assert np.asarray(got_parts[1]).dtype in (np.float32, np.float64)
        _close(got_parts[2], parts[2], np.float64, f"{name} float64 tangent")
        _close(got_parts[3], parts[3], np.float32, f"{name} float32 tangent")
    for k, g, want in zip(argnums, got_grads, grads):
        want = np.zeros_like(arrays[k]) if want is None else want
        assert g.shape == arrays[k].shape and g.dtype == arrays[k].dtype, (name, k)
        _close(g, want, arrays[k].dtype, f"{name} input {k} ({arrays[k].dtype})")
    if argnums:                              # the generated code as plain Python, no Numba
        out = f.lower(*arrays).python(*[a if a.ndim else a[()] for a in arrays])
        # outputs: the total, the aux parts, then the gradients
        _close(out[1], parts[0], np.float64, f"{name} (no JIT) float64 value")
        _close(out[3], parts[2], np.float64, f"{name} (no JIT) float64 tangent")
        for k, g, want in zip(argnums, out[5:], grads):
            if want is not None:
                _close(g, want, arrays[k].dtype, f"{name} (no JIT) input {k}")


def test_booleans_are_counted_as_numpy_counts_them():
    # sum and prod kept bool, so a sum was a logical or: sum([True, True, False]) was
    # True and its mean 1/3, eagerly and compiled
    b = np.array([True, True, False])
    assert jt.sum(jt.constant(b)).numpy() == 2 and jt.sum(jt.constant(b)).dtype == np.int64
    assert float(jt.mean(jt.constant(b))) == pytest.approx(2 / 3)
    assert jt.prod(jt.constant(np.array([True, True]))).numpy() == 1
    assert jt.function(lambda a: jt.sum(a > 0))(np.ones(5)) == 5
    assert jt.function(lambda a: jt.mean(a > 0.5))(np.arange(4.0)) == pytest.approx(0.75)
