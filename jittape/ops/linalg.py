"""Linear algebra: matmul (NumPy's rules, batched), dot, outer, einsum, and on them
inner, tensordot and kron.

``einsum`` takes one or two operands with explicit or implicit output; each index
appears at most once per operand (no diagonals) and ``...`` is not supported.
"""

import numpy as np

from ..errors import ShapeError, UnsupportedError, at_user_line
from ..ir import is_static
from . import elementwise as _ew
from . import shape as _sh
from .core import (Aval, PerInput, Primitive, broadcast_shapes, composite, ex, numpy_dispatch,
                   same_size, shape_of)


def _matmul_abstract(x, y):
    a, b = shape_of(x), shape_of(y)
    if len(a) == 0 or len(b) == 0:
        raise ShapeError(at_user_line(
            f"matmul: operands must have at least one axis, got shapes {a} and {b}"))
    k1 = a[-1]
    k2 = b[-2] if len(b) > 1 else b[0]
    if k1 != k2:
        raise ShapeError(at_user_line(
            f"matmul: shapes {a} and {b} are not aligned: {k1} (last axis of the first) != "
            f"{k2} ({'second-to-last' if len(b) > 1 else 'only'} axis of the second)"))
    same_size("matmul", k1, k2, "the inner sizes of the product differ")
    batch = broadcast_shapes("matmul", a[:-2], b[:-2])
    shape = batch + (a[-2:-1] if len(a) > 1 else ()) + (b[-1:] if len(b) > 1 else ())
    return Aval(shape, np.result_type(x.dtype, y.dtype))


def _as_matrices(g, x, y):
    """The cotangent with the axes that 1-D operands dropped put back."""
    if x.ndim == 1:
        g = _sh.expand_dims(g, g.ndim - (0 if y.ndim == 1 else 1))
    if y.ndim == 1:
        g = _sh.expand_dims(g, g.ndim)
    return g


def _matrix_t(a):
    """``a`` with its last two axes swapped (the transpose primitive, without the
    checks of ``swapaxes``: a rule's operands are valid; the eager tape runs this
    for each matrix product)."""
    n = a.ndim
    return _sh._transpose.bind(a, axes=(*range(n - 2), n - 1, n - 2))


def _matmul_vjp_x(g, out, x, y):
    g = _as_matrices(g, x, y)
    y2 = y if y.ndim > 1 else _sh.reshape(y, (1, y.shape[0]))
    gx = matmul(g, _matrix_t(y2) if y.ndim > 1 else y2)
    if x.ndim == 1:
        return _sh.reshape(_ew.unbroadcast(gx, (1, x.shape[0])), x.shape)
    return _ew.unbroadcast(gx, x.shape)


def _matmul_vjp_y(g, out, x, y):
    g = _as_matrices(g, x, y)
    x2 = x if x.ndim > 1 else _sh.reshape(x, (x.shape[0], 1))
    gy = matmul(_matrix_t(x2) if x.ndim > 1 else x2, g)
    if y.ndim == 1:
        return _sh.reshape(_ew.unbroadcast(gy, (y.shape[0], 1)), y.shape)
    return _ew.unbroadcast(gy, y.shape)


matmul = Primitive("matmul", np.matmul, abstract=_matmul_abstract,
                   vjp=[_matmul_vjp_x, _matmul_vjp_y], holomorphic=True,
                   jvp=[lambda t, out, x, y: matmul(t, y), lambda t, out, x, y: matmul(x, t)],
                   save=(True, False),
                   examples=[ex((2, 3), (3, 4)), ex((3,), (3, 2)), ex((2, 3), (3,)), ex((3,), (3,)),
                             ex((2, 2, 3), (3, 4)), ex((2, 1, 2, 3), (3, 3, 2)),
                             ex((1, 3), (3, 1))],
                   numpy=(np.matmul,), ufunc=True, kind="contraction", complex=True)


@numpy_dispatch(np.dot)
def dot(a, b):
    """NumPy's ``dot``: a product of matrices (and vectors), and for more axes the sum
    over ``a``'s last and ``b``'s second to last (a 1-D/2-D ``b``: over its first)."""
    na, nb = np.ndim(a) if not hasattr(a, "ndim") else a.ndim, np.ndim(b) if not hasattr(b, "ndim") else b.ndim
    if na == 0 or nb == 0:
        return _ew.multiply(a, b)
    if nb > 2:
        # NumPy's dot: a's last axis with b's second to last, a's other axes then b's
        return tensordot(a, b, axes=([na - 1], [nb - 2]))
    return matmul(a, b)


@composite(examples=[ex((3,), (4,)), ex((2, 2), (3,))], numpy=(np.outer,))
def outer(a, b):
    """Outer product of the flattened operands."""
    return _ew.multiply(_sh.reshape(a, (-1, 1)), _sh.reshape(b, (1, -1)))


# -- einsum ------------------------------------------------------------------------------

def parse_einsum(spec, n_operands):
    """'ij,jk->ik' -> (['ij', 'jk'], 'ik'), checked; implicit outputs made explicit."""
    spec = spec.replace(" ", "")           # (``einsum`` wrote each '...' as letters)
    if "->" in spec:
        lhs, out = spec.split("->")
    else:
        lhs = spec
        letters = lhs.replace(",", "")
        out = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    ins = lhs.split(",")
    if len(ins) != n_operands or n_operands not in (1, 2):
        raise UnsupportedError(at_user_line(
            f"einsum: spec {spec!r} with {n_operands} operands: one or two operands are supported"))
    for s in ins + [out]:
        if len(set(s)) != len(s) or not s.isalpha() and s:
            raise UnsupportedError(at_user_line(
                f"einsum: repeated index in {s!r} of {spec!r} (diagonals are not supported)"))
    missing = set(out) - set("".join(ins))
    if missing:
        raise ShapeError(at_user_line(f"einsum: output index {sorted(missing)} of {spec!r} "
                                      "appears in no operand"))
    return ins, out


def _einsum_abstract(*operands, spec):
    ins, out = parse_einsum(spec, len(operands))
    sizes = {}
    for s, op in zip(ins, operands):
        shape = shape_of(op)
        if len(shape) != len(s):
            raise ShapeError(at_user_line(
                f"einsum: operand {s!r} of {spec!r} has {len(s)} indices but shape {shape} "
                f"(rank {len(shape)})"))
        for c, d in zip(s, shape):
            same_size("einsum", sizes.setdefault(c, d), d, f"the sizes of index {c!r} differ")
            if sizes[c] != d:
                raise ShapeError(at_user_line(
                    f"einsum: index {c!r} of {spec!r} has sizes {sizes[c]} and {d} "
                    f"(shapes {', '.join(str(shape_of(o)) for o in operands)})"))
    return Aval(tuple(sizes[c] for c in out), np.result_type(*[o.dtype for o in operands]))


def _einsum_vjp(k, g, out, *operands, spec):
    ins, o = parse_einsum(spec, len(operands))
    target = ins[k]
    others = [(s, op) for j, (s, op) in enumerate(zip(ins, operands)) if j != k]
    available = set(o).union(*[set(s) for s, _ in others])
    kept = "".join(c for c in target if c in available)
    sub = ",".join([o] + [s for s, _ in others]) + "->" + kept
    grad = einsum(sub, g, *[op for _, op in others])
    if kept != target:                    # indices summed away by the op alone: broadcast back
        shape = tuple(operands[k].shape[i] if c in kept else 1 for i, c in enumerate(target))
        grad = _sh.broadcast_to(_sh.reshape(grad, shape), operands[k].shape)
    return grad


_einsum = Primitive("einsum", lambda *ops, spec: np.einsum(spec, *ops), abstract=_einsum_abstract,
                    vjp=PerInput(_einsum_vjp), jvp=PerInput(
                        lambda k, t, out, *ops, spec: _einsum.bind(
                            *ops[:k], t, *ops[k + 1:], spec=spec)), save=None,
                    examples=[ex((2, 3), (3, 4), spec="ij,jk->ik"), ex((2, 3), (2, 3), spec="ij,ij->i"),
                              ex((2, 3, 4), (2, 4, 5), spec="bij,bjk->bik"),
                              ex((3,), (4,), spec="i,j->ij"), ex((2, 3), spec="ij->ji"),
                              ex((2, 3), (3,), spec="ij,k->i"), ex((2, 3), spec="ij->")], kind="contraction",
                    complex=True, holomorphic=True)


@numpy_dispatch(np.einsum)
def einsum(spec, *operands, optimize=False, **options):
    """Einstein summation, e.g. ``einsum('bij,bjk->bik', a, b)``: ``...`` for the axes
    the letters do not name, any number of operands (contracted two at a time, left to
    right, whatever ``optimize`` says); an index repeated within an operand takes its
    diagonal (``einsum('ii->i', a)``)."""
    if options:
        raise UnsupportedError(at_user_line(
            f"einsum: {', '.join(sorted(options))}= not supported (tensors are immutable "
            "and keep their dtype: cast the operands first)"))
    if not isinstance(spec, str):         # NumPy's other form: op, [axes], op, [axes], [out]
        spec, operands = _interleaved(spec, operands)
    spec = spec.replace(" ", "")
    if "." in spec:
        spec = _explicit_ellipses(spec, operands)
    lhs, arrow, out = spec.partition("->")
    ins = lhs.split(",")
    if len(ins) == len(operands) and any(len(set(s)) != len(s) for s in ins):
        if not arrow:               # (NumPy's implicit output: the indices named once)
            letters = "".join(ins)
            arrow, out = "->", "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
        ins, operands = _diagonals(ins, list(operands), spec)
        spec = ",".join(ins) + arrow + out
    if len(ins) > 2 and len(ins) == len(operands):
        return _pairwise(ins, out if arrow else None, list(operands), spec)
    ins, out = parse_einsum(spec, len(operands))
    return _einsum.bind(*operands, spec=",".join(ins) + "->" + out)


def _diagonals(ins, operands, spec):
    """An index repeated within one operand (``'iij'``) takes that operand's diagonal
    first, as NumPy does: the two axes become one, the diagonal's, placed last."""
    from .indexing import diagonal       # (indexing builds on this module's family)
    ins = list(ins)
    for k, letters in enumerate(ins):
        while len(set(letters)) != len(letters):
            c = next(c for c in letters if letters.count(c) > 1)
            first = letters.index(c)
            second = letters.index(c, first + 1)
            sizes = _sh._shape(operands[k])
            if len(sizes) != len(letters):
                raise ShapeError(at_user_line(
                    f"einsum: operand {letters!r} of {spec!r} names {len(letters)} axes, its "
                    f"shape {tuple(sizes)} has {len(sizes)}"))
            if is_static(sizes[first]) and is_static(sizes[second]) and \
                    int(sizes[first]) != int(sizes[second]):
                raise ShapeError(at_user_line(
                    f"einsum: index {c!r} of {letters!r} in {spec!r} is repeated over axes of "
                    f"sizes {sizes[first]} and {sizes[second]}"))
            operands[k] = diagonal(operands[k], 0, first, second)
            letters = letters[:first] + letters[first + 1:second] + letters[second + 1:] + c
        ins[k] = letters
    return ins, operands


def _interleaved(first, rest):
    """(spec, operands) of ``einsum(a, [0, 1], b, [1, 2], [0, 2])``: each operand followed
    by its axes as ints (or ``...``), then optionally the output's."""
    items = (first,) + tuple(rest)
    pairs, out = items[:len(items) // 2 * 2], items[len(items) // 2 * 2:]

    def letters(axes, what):
        if not isinstance(axes, (list, tuple)):
            raise TypeError(at_user_line(
                f"einsum: {what} must be a list of axes (ints or ...), got {type(axes).__name__}"))
        text = ""
        for a in axes:
            if a is Ellipsis:
                text += "..."
            elif isinstance(a, (int, np.integer)) and 0 <= a < len(_LETTERS):
                text += _LETTERS[int(a)]
            else:
                raise ValueError(at_user_line(
                    f"einsum: {what} holds {a!r}; axes are ints from 0 to {len(_LETTERS) - 1} "
                    "or ..."))
        return text

    operands = pairs[0::2]
    ins = [letters(axes, f"the axes after operand {k}") for k, axes in enumerate(pairs[1::2])]
    spec = ",".join(ins) + ("->" + letters(out[0], "the output's axes") if out else "")
    return spec, operands


def _explicit_ellipses(spec, operands):
    """``spec`` with each ``...`` written as letters of its own: an operand's ellipsis
    stands for its axes the letters do not name, the last of the widest ellipsis's letters
    (NumPy aligns them from the right); an implicit output starts with them."""
    lhs, arrow, out = spec.partition("->")
    ins = lhs.split(",")
    if len(ins) != len(operands):
        raise UnsupportedError(at_user_line(
            f"einsum: spec {spec!r} names {len(ins)} operands, {len(operands)} given"))
    widths = []
    for s, op in zip(ins, operands):
        named = len(s.replace("...", ""))
        widths.append(len(shape_of(op)) - named if "..." in s else 0)
        if widths[-1] < 0:
            raise ShapeError(at_user_line(
                f"einsum: operand {s!r} of {spec!r} names more axes than its shape "
                f"{tuple(shape_of(op))} has"))
    free = [c for c in _LETTERS if c not in spec]
    wide = free[:max(widths)]
    ins = [s.replace("...", "".join(wide[len(wide) - w:])) for s, w in zip(ins, widths)]
    if arrow:
        out = out.replace("...", "".join(wide))
    else:
        letters = "".join(ins)
        out = "".join(wide) + "".join(sorted(c for c in set(letters)
                                             if letters.count(c) == 1 and c not in wide))
    return ",".join(ins) + "->" + out


def _pairwise(ins, out, operands, spec):
    """An einsum of three or more operands as two-operand einsums, left to right: each
    keeps the indices that a later operand or the output still names."""
    if out is None:                                  # NumPy's implicit output
        letters = "".join(ins)
        out = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    current, value = ins[0], operands[0]
    for k in range(1, len(ins)):
        later = set(out) | set("".join(ins[k + 1:]))
        keep = "".join(dict.fromkeys(c for c in current + ins[k] if c in later))
        step_out = out if k == len(ins) - 1 else keep
        value = einsum(f"{current},{ins[k]}->{step_out}", value, operands[k])
        current = step_out
    return value


# -- contractions on einsum and broadcasting -----------------------------------------------

_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _contracted_axes(axes):
    """NumPy's ``axes`` argument of tensordot as two lists (a's axes, b's axes)."""
    if isinstance(axes, (int, np.integer)):
        n = int(axes)
        return list(range(-n, 0)) if n else [], list(range(n))
    axes_a, axes_b = axes
    as_list = (lambda v: [int(v)] if isinstance(v, (int, np.integer)) else [int(i) for i in v])
    return as_list(axes_a), as_list(axes_b)


@composite(examples=[ex((2, 3, 4), (3, 4, 2)), ex((2, 3), (4, 2), axes=([0], [1]))],
           numpy=(np.tensordot,))
def tensordot(a, b, axes=2):
    """Sum of products over ``axes`` of ``a`` and ``b`` (an int: the last ``axes`` of
    ``a`` with the first of ``b``; or two lists of axes): ``a``'s other axes, then ``b``'s."""
    sa, sb = _sh._shape(a), _sh._shape(b)
    axes_a, axes_b = _contracted_axes(axes)
    if len(axes_a) != len(axes_b):
        raise ShapeError(at_user_line(
            f"tensordot: shape-mismatch for sum (axes {axes_a} of {sa} and {axes_b} of {sb})"))
    axes_a = [_sh.axis_index("tensordot", k, sa) for k in axes_a]
    axes_b = [_sh.axis_index("tensordot", k, sb) for k in axes_b]
    if any(sa[i] != sb[j] for i, j in zip(axes_a, axes_b)):
        raise ShapeError(at_user_line(
            f"tensordot: shape-mismatch for sum (axes {axes_a} of {sa} and {axes_b} of {sb})"))
    if not sa or not sb:
        return _ew.multiply(a, b)
    if len(sa) + len(sb) - len(axes_a) > len(_LETTERS):
        raise UnsupportedError(at_user_line(
            f"tensordot: too many axes ({sa} and {sb}; at most {len(_LETTERS)} in all)"))
    letters = iter(_LETTERS)
    ia = [next(letters) for _ in sa]
    ib = [next(letters) for _ in sb]
    for i, j in zip(axes_a, axes_b):
        ib[j] = ia[i]
    out = [c for k, c in enumerate(ia) if k not in axes_a] + [
        c for k, c in enumerate(ib) if k not in axes_b]
    return einsum(f"{''.join(ia)},{''.join(ib)}->{''.join(out)}", a, b)


@composite(examples=[ex((3,), (3,)), ex((2, 3), (4, 3)), ex((2,), ())], numpy=(np.inner,))
def inner(a, b):
    """Sum of products over the last axes of ``a`` and ``b`` (a product with a 0-d one)."""
    sa, sb = _sh._shape(a), _sh._shape(b)
    if not sa or not sb:
        return _ew.multiply(a, b)
    if sa[-1] != sb[-1]:
        raise ShapeError(at_user_line(
            f"inner: shapes {sa} and {sb} not aligned: {sa[-1]} (dim {len(sa) - 1}) != "
            f"{sb[-1]} (dim {len(sb) - 1})"))
    return tensordot(a, b, ([-1], [-1]))


@composite(examples=[ex((2, 2), (1, 3)), ex((2,), (2, 2))], numpy=(np.kron,))
def kron(a, b):
    """Kronecker product: blocks of ``b`` scaled by each element of ``a``."""
    sa, sb = _sh._shape(a), _sh._shape(b)
    if not sa or not sb:
        return _ew.multiply(a, b)
    nd = max(len(sa), len(sb))
    sa = (1,) * (nd - len(sa)) + tuple(sa)
    sb = (1,) * (nd - len(sb)) + tuple(sb)
    # a as (a0, 1, a1, 1, ...) times b as (1, b0, 1, b1, ...): each pair of axes one axis
    a = _sh.reshape(a, tuple(v for n in sa for v in (n, 1)))
    b = _sh.reshape(b, tuple(v for n in sb for v in (1, n)))
    return _sh.reshape(_ew.multiply(a, b), tuple(m * n for m, n in zip(sa, sb)))


# -- lowerings ---------------------------------------------------------------------------

def _lower_matmul(ctx, node):
    """runtime.matmul2d per matrix (np.dot where an operand is a vector); a loop over
    the broadcast batch axes."""
    x, y = node.inputs
    out = node.out
    dt = ctx.dtype(out.dtype)
    float_out = out.dtype.kind in "fc"
    work = dt if float_out else "np.float64"
    lines = []
    names = []
    for v in (x, y):
        name = ctx.name(v)
        if v.dtype != (out.dtype if float_out else np.float64):
            tmp = ctx.tmp()
            lines.append(f"{tmp} = {name}.astype({work})")
            name = tmp
        names.append(name)
    xn, yn = names
    o = ctx.name(out)
    batch = out.ndim - (x.ndim > 1) - (y.ndim > 1)
    operands = np.dtype(out.dtype if float_out else np.float64).name
    if x.ndim > 1 and y.ndim > 1 and operands in ("float32", "float64"):
        ctx.link("matmul2d", operands)   # the product's machine code, not compiled in
    if batch == 0:
        expr = (f"matmul2d({xn}, {yn}, {ctx.parallel})" if x.ndim == 2 and y.ndim == 2
                else f"dot({xn}, {yn})")
        lines.append(f"{o} = {expr}" if float_out else f"{o} = {expr}.astype({dt})")
        return lines
    lines.append(f"{o} = empty({ctx.shape(out.shape)}, {dt})")
    idx = [f"b{k}" for k in range(batch)]
    for k in range(batch):
        lines.append("    " * k + f"for b{k} in range({ctx.size(out.shape[k])}):")
    inner = "    " * batch

    def operand(v, name):
        if v.ndim == 1:
            return name
        lead = v.ndim - 2
        items = []
        for a in range(lead):
            d = v.shape[a]
            items.append("0" if d == 1 else idx[batch - lead + a])
        return f"{name}[{', '.join(items + [':', ':'])}]"

    if x.ndim > 1 and y.ndim > 1:
        res = f"matmul2d({operand(x, xn)}, {operand(y, yn)}, {ctx.parallel})"
    else:
        res = f"dot({operand(x, xn)}, {operand(y, yn)})"
    lines.append(f"{inner}{o}[{', '.join(idx)}] = {res}")
    return lines


matmul.lowerings["cpu"] = _lower_matmul


def _einsum_letters(ctx, node):
    """(input specs, output spec, letter -> source of its size) of an einsum node."""
    ins, out_spec = node.params["spec"].split("->")
    ins = ins.split(",")
    sizes = {}
    for s, v in zip(ins, node.inputs):
        for a, c in enumerate(s):
            sizes.setdefault(c, f"{ctx.name(v)}.shape[{a}]")
    return ins, out_spec, sizes


def _lower_einsum(ctx, node):
    """A loop over every index, accumulating the product into the output."""
    ins, out_spec, sizes = _einsum_letters(ctx, node)
    out = node.out
    o = ctx.name(out)
    letters = list(out_spec) + [c for c in sorted(sizes) if c not in out_spec]
    acc_dt = ctx.dtype(out.dtype)
    lines = []
    if out.ndim == 0:
        acc = ctx.tmp("acc")
        lines.append(f"{acc} = {ctx.literal(0, out.dtype)}")
    else:
        lines.append(f"{o} = zeros({ctx.shape(out.shape)}, {acc_dt})")
    for k, c in enumerate(letters):
        lines.append("    " * k + f"for j_{c} in range({sizes[c]}):")
    inner = "    " * len(letters)
    factors = [f"{ctx.name(v)}[{', '.join('j_' + c for c in s)}]" if v.ndim else ctx.name(v)
               for s, v in zip(ins, node.inputs)]
    term = " * ".join(factors)
    if out.ndim == 0:
        lines.append(f"{inner}{acc} += {term}")
        lines.append(f"{o} = {acc_dt}({acc})")
    else:
        lines.append(f"{inner}{o}[{', '.join('j_' + c for c in out_spec)}] += {term}")
    return lines


_einsum.lowerings["cpu"] = _lower_einsum


# -- CUDA lowerings (ctx: codegen.cuda.CudaContext) -----------------------------------------

def _cuda_matmul(ctx, node):
    """cuda_runtime.matmul2d per matrix (cuBLAS through CuPy, or a tiled kernel); a
    driver loop over the broadcast batch axes."""
    from .. import ir
    x, y = node.inputs
    out = node.out
    if not (x.dtype == y.dtype == out.dtype and out.dtype.kind == "f"):
        raise UnsupportedError(at_user_line(f"target='cuda': matmul of {x.dtype} and {y.dtype} is not "
                               "supported on CUDA (floating-point operands of one dtype)"))
    o = ctx.name(out)
    lines = [ctx.buffer(out)]
    batch = out.ndim - (x.ndim > 1) - (y.ndim > 1)
    idx = [f"b{k}" for k in range(batch)]
    for k in range(batch):
        lines.append("    " * k + f"for b{k} in range({o}.shape[{k}]):")

    def view(v):                      # the matrix of v at the batch index (broadcast: 0)
        lead = v.ndim - 2
        items = ["0" if v.shape[a] == 1 and not isinstance(v.shape[a], ir.Dim)
                 else idx[batch - lead + a] for a in range(max(lead, 0))]
        return f"{ctx.name(v)}[{', '.join(items)}]" if items else ctx.name(v)

    xv, yv = view(x), view(y)
    ov = f"{o}[{', '.join(idx)}]" if batch else o
    xs = xv if x.ndim > 1 else f"{xv}.reshape((1, {xv}.shape[0]))"
    ys = yv if y.ndim > 1 else f"{yv}.reshape(({yv}.shape[0], 1))"
    os_ = ov if (x.ndim > 1 and y.ndim > 1) else f"{ov}.reshape(({xs}.shape[0], {ys}.shape[1]))"
    if out.ndim == 0:
        ctx.device_scalars.add(out.id)
        os_ = f"{o}.reshape((1, 1))"
    lines.append("    " * batch + f"matmul2d({xs}, {ys}, {os_})")
    return lines


def _cuda_einsum(ctx, node):
    """One thread per output element, looping over the summed letters."""
    ins, out_spec, sizes = _einsum_letters(ctx, node)
    out = node.out
    o = ctx.name(out)
    summed = [c for c in sorted(sizes) if c not in out_spec]
    index = {c: f"i{k}" for k, c in enumerate(out_spec)}
    index.update({c: f"j_{c}" for c in summed})
    body = [f"acc = {ctx.dtype(out.dtype)}(0)"]
    for depth, c in enumerate(summed):
        body.append("    " * depth + f"for j_{c} in range({sizes[c]}):")
    factors = [f"{ctx.name(v)}[{', '.join(index[c] for c in spec)}]" if v.ndim else ctx.read(v, 0)
               for spec, v in zip(ins, node.inputs)]
    body.append("    " * len(summed) + f"acc += {' * '.join(factors)}")
    body.append(f"{o}[{', '.join(index[c] for c in out_spec) or '0'}] = acc")
    return [ctx.buffer(out)] + ctx.per_element([f"{o}.shape[{a}]" for a in range(out.ndim)],
                                               body, node)


matmul.lowerings["cuda"] = _cuda_matmul
_einsum.lowerings["cuda"] = _cuda_einsum
