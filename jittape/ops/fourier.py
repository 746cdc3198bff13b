"""Discrete Fourier transforms of ``np.fft``: fft, ifft, rfft, irfft, their 2-D and n-D
forms (fft2, ifft2, fftn, ifftn, rfft2, irfft2, rfftn, irfftn), hfft and ihfft, and
fftshift and ifftshift.

Four primitives do the work, each along one axis with NumPy's ``norm`` ('backward',
'ortho' or 'forward'): ``fft`` and ``ifft`` (complex to complex; a real operand is taken
as complex), ``rfft`` (real to the ``n // 2 + 1`` bins of a Hermitian spectrum) and
``irfft`` (those bins back to ``n`` real values). ``n`` and ``s`` (a length per axis)
pad with zeros or truncate the input first (``pad`` and slicing, so their gradients
are theirs); the 2-D and n-D transforms are NumPy's sequences of 1-D ones; ``fftshift``
and ``ifftshift`` are ``roll``. A length changes the graph's structure: a compiled
function that pads, truncates or takes a real transform is keyed on the exact sizes.

Gradients follow the convention of API.md (of a real loss in ``z = x + iy``,
``dL/dx + i dL/dy``). The transforms are linear, so a cotangent goes back through the
adjoint: for ``fft`` that is ``ifft`` with the other scaling (``norm`` 'backward' and
'forward' swapped, 'ortho' its own adjoint), the real part for a real operand. ``rfft``
keeps half of a real signal's spectrum: its adjoint is ``irfft`` of the cotangent with
the interior bins halved (``irfft`` counts each of them twice, for itself and its
mirror image; the zero-frequency bin, and the Nyquist bin of an even length, once).
``irfft`` reads only the real part of those two bins: its adjoint is ``rfft`` of the
cotangent with the interior bins doubled, and gives them no imaginary gradient.

Compiled, on the CPU only (``target='cuda'`` raises ``UnsupportedError`` naming the
op): the generated code calls ``np.fft``, which Numba compiles with the optional package
rocket-fft (``pip install rocket-fft``, or ``jittape[fft]``). Without it the eager tape
works and compiling a graph that holds a transform raises ``UnsupportedError`` saying
so. ``fftshift`` and ``ifftshift`` need no extra package, and run on CUDA too.
"""

import operator
import types

import numpy as np

from ..errors import ShapeError, UnsupportedError, at_user_line
from . import elementwise as _ew
from . import indexing as _ix
from . import shape as _sh
from .core import Aval, Primitive, composite, ex, numpy_dispatch, pack, same_size, shape_of

CPU_ONLY = ("cpu",)
_NORMS = ("backward", "ortho", "forward")
# the scaling of a transform's adjoint: the inverse transform's with 'backward' and
# 'forward' swapped (1/n on the other side), 'ortho' its own
_DUAL = {"backward": "forward", "ortho": "ortho", "forward": "backward"}
_COMPLEX_OF = {np.dtype(np.float32): np.dtype(np.complex64),
               np.dtype(np.complex64): np.dtype(np.complex64),
               np.dtype(np.float64): np.dtype(np.complex128),
               np.dtype(np.complex128): np.dtype(np.complex128)}


# -- shape and dtype rules -------------------------------------------------------------------

def _shown(shape):
    return tuple(int(d) for d in shape)


def _working_dtype(op, dtype, shape):
    """The complex dtype a transform computes in (NumPy 2's: complex64 for float32 and
    complex64 operands, complex128 for float64 and complex128)."""
    dtype = np.dtype(dtype)
    if dtype not in _COMPLEX_OF:
        raise TypeError(at_user_line(
            f"{op}: unsupported dtype {dtype} (shape {_shown(shape)}); the transforms take "
            "float32, float64, complex64 and complex128 values"))
    return _COMPLEX_OF[dtype]


def _real_of(dtype):
    return np.empty(0, dtype).real.dtype


def _transform_axis(op, axis, shape):
    if not (isinstance(axis, int) and 0 <= axis < len(shape)):
        raise ShapeError(at_user_line(f"{op}: axis {axis!r} is out of bounds for shape "
                                      f"{_shown(shape)}"))
    if int(shape[axis]) < 1:
        raise ShapeError(at_user_line(
            f"{op}: Invalid number of FFT data points (0) specified (shape {_shown(shape)}, "
            f"axis {axis})"))


def _c2c_abstract(op):
    def abstract(x, axis, norm):
        shape = shape_of(x)
        _transform_axis(op, axis, shape)
        return Aval(shape, _working_dtype(op, x.dtype, shape))
    return abstract


def _only_real(op, dtype, shape):
    if np.dtype(dtype).kind == "c":
        raise TypeError(at_user_line(
            f"{op}: the operand is complex ({np.dtype(dtype).name}, shape {_shown(shape)}); "
            "the real transforms take real values: use fft"))


def _rfft_abstract(x, axis, norm):
    shape = shape_of(x)
    _transform_axis("rfft", axis, shape)
    _only_real("rfft", x.dtype, shape)
    dtype = _working_dtype("rfft", x.dtype, shape)
    out = list(shape)
    out[axis] = shape[axis] // 2 + 1
    return Aval(out, dtype)


def _irfft_abstract(x, axis, n, norm):
    shape = shape_of(x)
    _transform_axis("irfft", axis, shape)
    dtype = _real_of(_working_dtype("irfft", x.dtype, shape))
    bins = n // 2 + 1
    if int(shape[axis]) != bins:
        raise ShapeError(at_user_line(
            f"irfft: {n} points need {bins} bins along axis {axis}, the operand has "
            f"{int(shape[axis])} (shape {_shown(shape)})"))
    same_size("irfft", shape[axis], bins, "the bins do not match the number of points")
    out = list(shape)
    out[axis] = n
    return Aval(out, dtype)


# -- gradients ------------------------------------------------------------------------------

def _bin_weights(n, axis, ndim, dtype, interior):
    """Weights of the ``n // 2 + 1`` bins of a real signal of ``n`` points, shaped to
    broadcast along ``axis``: ``interior`` for the bins that stand for a pair of
    frequencies, 1 for the zero-frequency bin and the Nyquist bin of an even ``n``."""
    bins = n // 2 + 1
    w = np.full(bins, interior, _real_of(dtype))
    w[0] = 1
    if n % 2 == 0:
        w[-1] = 1
    shape = [1] * ndim
    shape[axis] = bins
    return w.reshape(shape)


def _real_for(x, ct):
    """A cotangent for operand ``x``: its real part when ``x`` is real."""
    return ct if np.dtype(x.dtype).kind == "c" else _ew.real(ct)


def _rfft_vjp(g, out, x, axis, norm):
    n = int(x.shape[axis])
    half = _ew.multiply(g, _bin_weights(n, axis, len(x.shape), g.dtype, 0.5))
    return _irfft.bind(half, axis=axis, n=n, norm=_DUAL[norm])


def _irfft_vjp(g, out, x, axis, n, norm):
    spectrum = _rfft.bind(g, axis=axis, norm=_DUAL[norm])
    doubled = _ew.multiply(spectrum, _bin_weights(n, axis, len(x.shape), spectrum.dtype, 2.0))
    return _real_for(x, doubled)


def _along_axis_rule(prim):
    """The batching rule of a transform along one axis: the same, the axis one further."""
    def rule(args, batched, out, axis, **params):
        return prim.bind(*args, axis=axis + 1, **params)
    return rule


_C2C_EXAMPLES = [ex((4,), axis=0, norm="backward"), ex((2, 3), axis=1, norm="ortho"),
                 ex((3, 2), axis=0, norm="forward")]

def _complex_transform(name, dual):
    """fft or ifft along one axis: linear, so its JVP is itself on the tangent; its VJP
    is the other transform (``dual``) with the dual normalization."""
    def vjp(g, out, x, axis, norm):
        return _real_for(x, _TRANSFORMS[dual].bind(g, axis=axis, norm=_DUAL[norm]))

    prim = Primitive(
        name, lambda x, axis, norm: getattr(np.fft, name)(x, axis=axis, norm=norm),
        abstract=_c2c_abstract(name), vjp=[vjp],
        jvp=[lambda t, out, x, axis, norm: prim.bind(t, axis=axis, norm=norm)],
        save=(False, False), examples=_C2C_EXAMPLES, kind="opaque", backends=CPU_ONLY,
        complex=True)
    _TRANSFORMS[name] = prim
    return prim


_TRANSFORMS = {}
_fft = _complex_transform("fft", "ifft")
_ifft = _complex_transform("ifft", "fft")

_rfft = Primitive(
    "rfft", lambda x, axis, norm: np.fft.rfft(x, axis=axis, norm=norm),
    abstract=_rfft_abstract, vjp=[_rfft_vjp],
    jvp=[lambda t, out, x, axis, norm: _rfft.bind(t, axis=axis, norm=norm)],
    save=(False, False),
    examples=[ex((5,), axis=0, norm="backward"), ex((2, 4), axis=1, norm="ortho"),
              ex((4, 3), axis=0, norm="forward"), ex((2,), axis=0, norm="backward")],
    kind="opaque", backends=CPU_ONLY, complex=True)

_irfft = Primitive(
    "irfft", lambda x, axis, n, norm: np.fft.irfft(x, n, axis=axis, norm=norm),
    abstract=_irfft_abstract, vjp=[_irfft_vjp],
    jvp=[lambda t, out, x, axis, n, norm: _irfft.bind(t, axis=axis, n=n, norm=norm)],
    save=(False, False),
    examples=[ex((3,), axis=0, n=4, norm="backward"), ex((2, 3), axis=1, n=5, norm="ortho"),
              ex((3, 2), axis=0, n=4, norm="forward"), ex((1,), axis=0, n=1, norm="backward")],
    kind="opaque", backends=CPU_ONLY, complex=True)

for _prim in (_fft, _ifft, _rfft, _irfft):
    _prim.batch = _along_axis_rule(_prim)
del _prim


# -- the arguments of NumPy's functions -------------------------------------------------------

def _no_out(op, out, a):
    if out is not None:
        raise UnsupportedError(at_user_line(
            f"{op}: out= is not supported (tensors are not written in place; operand shape "
            f"{_shown(_sh._shape(a))}); use the returned value"))


def _norm(op, norm, a):
    if norm is None:
        return "backward"
    if norm not in _NORMS:
        raise ValueError(at_user_line(
            f"{op}: Invalid norm value {norm!r}; should be 'backward', 'ortho' or 'forward' "
            f"(operand shape {_shown(_sh._shape(a))})"))
    return norm


def _operand(op, a):
    """``a`` as a value of a dtype the transforms compute in: integers and booleans as
    float64, float16 as float32 (NumPy's results)."""
    a = pack(a)
    if not hasattr(a, "dtype"):
        a = np.asarray(a)
    dtype = np.dtype(a.dtype)
    if dtype in _COMPLEX_OF:
        return a
    if dtype.kind in "biu":
        return _ew.cast(a, np.float64)
    if dtype == np.float16:
        return _ew.cast(a, np.float32)
    _working_dtype(op, dtype, _sh._shape(a))        # (raises, naming the dtype)
    return a


def _points(op, n, a, axis):
    """A number of points (``n``, or an element of ``s``) as a positive int."""
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(at_user_line(
            f"{op}: the number of points must be an integer, got {n!r} (operand shape "
            f"{_shown(_sh._shape(a))})")) from None
    if n < 1:
        raise ShapeError(at_user_line(
            f"{op}: Invalid number of FFT data points ({n}) specified (operand shape "
            f"{_shown(_sh._shape(a))}, axis {axis})"))
    return n


def _resize(a, axis, n):
    """``a`` truncated to ``n`` elements along ``axis``, or padded with zeros to ``n``."""
    _sh.exact_sizes()                     # where the cut falls, how many zeros: the sizes
    shape = _sh._shape(a)
    size = int(shape[axis])
    if n < size:
        return _ix.slice_axis(a, axis, 0, n)
    if n > size:
        widths = [(0, 0)] * len(shape)
        widths[axis] = (0, n - size)
        return _ix.pad(a, widths)
    return a


def _prepare(op, a, axis, norm, out):
    """(operand, non-negative axis, norm) of a 1-D transform, checked."""
    _no_out(op, out, a)
    norm = _norm(op, norm, a)
    a = _operand(op, a)
    axis = _sh.axis_index(op, axis, _sh._shape(a))
    return a, axis, norm


def _c2c(op, prim, a, n, axis, norm, out):
    a, axis, norm = _prepare(op, a, axis, norm, out)
    if n is not None:
        a = _resize(a, axis, _points(op, n, a, axis))
    return prim.bind(a, axis=axis, norm=norm)


# -- the 1-D transforms ---------------------------------------------------------------------

@numpy_dispatch(np.fft.fft)
def fft(a, n=None, axis=-1, norm=None, out=None):
    """NumPy's ``np.fft.fft``: the discrete Fourier transform along ``axis``, of ``a``
    padded with zeros or truncated to ``n`` points if given. complex64 for float32 and
    complex64 values, complex128 otherwise."""
    return _c2c("fft", _fft, a, n, axis, norm, out)


@numpy_dispatch(np.fft.ifft)
def ifft(a, n=None, axis=-1, norm=None, out=None):
    """NumPy's ``np.fft.ifft``: the inverse discrete Fourier transform along ``axis``
    (``n``: as ``fft``'s)."""
    return _c2c("ifft", _ifft, a, n, axis, norm, out)


@numpy_dispatch(np.fft.rfft)
def rfft(a, n=None, axis=-1, norm=None, out=None):
    """NumPy's ``np.fft.rfft``: the ``n // 2 + 1`` non-negative frequency bins of the
    transform of real ``a`` along ``axis`` (a complex ``a`` raises TypeError, as NumPy)."""
    a, axis, norm = _prepare("rfft", a, axis, norm, out)
    _only_real("rfft", a.dtype, _sh._shape(a))
    _sh.exact_sizes()                     # (its gradient weighs the bins of this length)
    if n is not None:
        a = _resize(a, axis, _points("rfft", n, a, axis))
    return _rfft.bind(a, axis=axis, norm=norm)


@numpy_dispatch(np.fft.irfft)
def irfft(a, n=None, axis=-1, norm=None, out=None):
    """NumPy's ``np.fft.irfft``: ``n`` real values (``2 * (m - 1)`` for ``m`` bins unless
    given) whose ``rfft`` is ``a``; the bins are padded with zeros or truncated to
    ``n // 2 + 1``, and the imaginary parts of the zero-frequency bin (and of the Nyquist
    bin of an even ``n``) are ignored, as NumPy's."""
    a, axis, norm = _prepare("irfft", a, axis, norm, out)
    _sh.exact_sizes()
    if n is None:
        n = 2 * (int(_sh._shape(a)[axis]) - 1)
    n = _points("irfft", n, a, axis)
    return _irfft.bind(_resize(a, axis, n // 2 + 1), axis=axis, n=n, norm=norm)


def _hfft_call(a, **params):
    return hfft(a, **params)


@composite(examples=[ex((3,)), ex((2, 3), n=5, axis=1, norm="ortho")], call=_hfft_call,
           numpy=(np.fft.hfft,))
def hfft(a, n=None, axis=-1, norm=None, out=None):
    """NumPy's ``np.fft.hfft``: the real transform of a Hermitian signal given by its first
    half, ``irfft`` of the conjugate with the other scaling."""
    _no_out("hfft", out, a)
    a = _operand("hfft", a)
    return irfft(_ew.conj_of(a), n, axis, _DUAL[_norm("hfft", norm, a)])


def _ihfft_call(a, **params):
    return ihfft(a, **params)


@composite(examples=[ex((4,)), ex((2, 5), n=4, axis=1, norm="forward")], call=_ihfft_call,
           numpy=(np.fft.ihfft,))
def ihfft(a, n=None, axis=-1, norm=None, out=None):
    """NumPy's ``np.fft.ihfft``: the inverse of ``hfft``, the conjugate of ``rfft`` with
    the other scaling."""
    _no_out("ihfft", out, a)
    return _ew.conj_of(rfft(a, n, axis, _DUAL[_norm("ihfft", norm, a)]))


# -- the n-D transforms: NumPy's sequences of 1-D ones -----------------------------------------

def _cook(op, a, s, axes):
    """NumPy's ``_cook_nd_args``: (lengths, axes) of an n-D transform, a length None where
    the 1-D transform takes its default (no ``s``; an element -1 or None of ``s``)."""
    shape = _sh._shape(a)
    if s is None:
        axes = list(range(len(shape))) if axes is None else _listed(axes)
        s = [None] * len(axes)
    else:
        s = _listed(s)
        axes = list(range(-len(s), 0)) if axes is None else _listed(axes)
    if len(s) != len(axes):
        raise ValueError(at_user_line(
            f"{op}: Shape and axes have different lengths (s {s}, axes {axes}, operand shape "
            f"{_shown(shape)})"))
    axes = [_sh.axis_index(op, ax, shape) for ax in axes]
    return [None if n is None or n == -1 else n for n in s], axes


def _listed(v):
    return [v] if isinstance(v, (int, np.integer)) else list(v)


def _nd(op, one_d, a, s, axes, norm, out):
    _no_out(op, out, a)
    norm = _norm(op, norm, a)
    a = _operand(op, a)
    s, axes = _cook(op, a, s, axes)
    for n, axis in reversed(list(zip(s, axes))):
        a = one_d(a, n, axis, norm)
    return a


def _nd_call(fn):
    def call(a, **params):
        return fn(a, **params)
    return call


_ND_EXAMPLES = [ex((2, 3, 2)), ex((3, 4), axes=(1,), norm="ortho"),
                ex((2, 3, 2), s=(3, 2), axes=(0, 2), norm="forward")]
_2D_EXAMPLES = [ex((2, 3)), ex((2, 3, 2), s=(4, 1), axes=(0, 2), norm="ortho")]


@composite(examples=_2D_EXAMPLES, numpy=(np.fft.fft2,))
def fft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    """NumPy's ``np.fft.fft2``: ``fftn`` over two axes (the last two by default)."""
    return _nd("fft2", fft, a, s, axes, norm, out)


@composite(examples=_2D_EXAMPLES, numpy=(np.fft.ifft2,))
def ifft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    """NumPy's ``np.fft.ifft2``: ``ifftn`` over two axes (the last two by default)."""
    return _nd("ifft2", ifft, a, s, axes, norm, out)


@composite(examples=_ND_EXAMPLES, numpy=(np.fft.fftn,))
def fftn(a, s=None, axes=None, norm=None, out=None):
    """NumPy's ``np.fft.fftn``: ``fft`` along each of ``axes`` (all by default), the
    last first, each padded or truncated to its length in ``s``."""
    return _nd("fftn", fft, a, s, axes, norm, out)


@composite(examples=_ND_EXAMPLES, numpy=(np.fft.ifftn,))
def ifftn(a, s=None, axes=None, norm=None, out=None):
    """NumPy's ``np.fft.ifftn``: ``ifft`` along each of ``axes`` (as ``fftn``)."""
    return _nd("ifftn", ifft, a, s, axes, norm, out)


def _rfftn(op, a, s, axes, norm, out):
    _no_out(op, out, a)
    norm = _norm(op, norm, a)
    a = _operand(op, a)
    s, axes = _cook(op, a, s, axes)
    if not axes:
        raise ShapeError(at_user_line(f"{op}: no axis to transform (operand shape "
                                      f"{_shown(_sh._shape(a))})"))
    a = rfft(a, s[-1], axes[-1], norm)
    for n, axis in reversed(list(zip(s[:-1], axes[:-1]))):
        a = fft(a, n, axis, norm)
    return a


def _irfftn(op, a, s, axes, norm, out):
    _no_out(op, out, a)
    norm = _norm(op, norm, a)
    a = _operand(op, a)
    s, axes = _cook(op, a, s, axes)
    if not axes:
        raise ShapeError(at_user_line(f"{op}: no axis to transform (operand shape "
                                      f"{_shown(_sh._shape(a))})"))
    for n, axis in zip(s[:-1], axes[:-1]):
        a = ifft(a, n, axis, norm)
    return irfft(a, s[-1], axes[-1], norm)


@composite(examples=_2D_EXAMPLES, numpy=(np.fft.rfft2,))
def rfft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    """NumPy's ``np.fft.rfft2``: ``rfftn`` over two axes (the last two by default)."""
    return _rfftn("rfft2", a, s, axes, norm, out)


@composite(examples=[ex((2, 3)), ex((2, 3, 2), s=(4, 3), axes=(0, 2), norm="ortho")],
           numpy=(np.fft.irfft2,))
def irfft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    """NumPy's ``np.fft.irfft2``: ``irfftn`` over two axes (the last two by default)."""
    return _irfftn("irfft2", a, s, axes, norm, out)


@composite(examples=_ND_EXAMPLES, numpy=(np.fft.rfftn,))
def rfftn(a, s=None, axes=None, norm=None, out=None):
    """NumPy's ``np.fft.rfftn``: ``rfft`` along the last of ``axes``, then ``fft`` along
    the others."""
    return _rfftn("rfftn", a, s, axes, norm, out)


@composite(examples=[ex((2, 3, 2)), ex((3, 4), axes=(1,), norm="ortho"),
                     ex((2, 3, 2), s=(3, 3), axes=(0, 2), norm="forward")],
           numpy=(np.fft.irfftn,))
def irfftn(a, s=None, axes=None, norm=None, out=None):
    """NumPy's ``np.fft.irfftn``: ``ifft`` along all but the last of ``axes``, then
    ``irfft`` along the last (``2 * (m - 1)`` points unless ``s`` says)."""
    return _irfftn("irfftn", a, s, axes, norm, out)


# -- shifts -----------------------------------------------------------------------------------

def _shift(op, x, axes, sign):
    x = pack(x)
    if not hasattr(x, "dtype"):
        x = np.asarray(x)
    shape = _sh._shape(x)
    _sh.exact_sizes()                     # (the shift is half of each size)
    if axes is None:
        axes = tuple(range(len(shape)))
    for ax in _listed(axes):
        _sh.axis_index(op, ax, shape)
    shift = [sign * (int(shape[ax]) // 2) for ax in _listed(axes)]
    return _ix.roll(x, shift, list(_listed(axes))) if shift else x


@composite(examples=[ex((3, 4)), ex((5,), axes=0), ex((2, 3, 5), axes=(0, 2))],
           numpy=(np.fft.fftshift,))
def fftshift(x, axes=None):
    """NumPy's ``np.fft.fftshift``: the zero frequency moved to the middle of each of
    ``axes`` (all by default), a ``roll`` by half of each length; real or complex."""
    return _shift("fftshift", x, axes, 1)


@composite(examples=[ex((3, 4)), ex((5,), axes=0), ex((2, 3, 5), axes=(0, 2))],
           numpy=(np.fft.ifftshift,))
def ifftshift(x, axes=None):
    """NumPy's ``np.fft.ifftshift``: the inverse of ``fftshift`` (they differ for odd
    lengths)."""
    return _shift("ifftshift", x, axes, -1)


# the compositions of transforms lower as the transforms do: on the CPU only (the docs' table)
for _fn in (hfft, ihfft, fft2, ifft2, fftn, ifftn, rfft2, irfft2, rfftn, irfftn):
    _fn.backends = CPU_ONLY
del _fn


def numpy_namespace(name):
    """The module ``jittape.numpy.fft``: NumPy's ``np.fft`` names of the ops above, and
    NumPy's own ``fftfreq`` and ``rfftfreq`` (which take no tensor)."""
    module = types.ModuleType(name, "The discrete Fourier transforms of ``np.fft`` on jittape "
                                    "tensors (``jittape.ops.fourier``).")
    for attr in ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "fftn",
                 "ifftn", "rfft2", "irfft2", "rfftn", "irfftn", "fftshift", "ifftshift"):
        setattr(module, attr, globals()[attr])
    module.fftfreq = np.fft.fftfreq
    module.rfftfreq = np.fft.rfftfreq
    module.__all__ = sorted(a for a in vars(module) if not a.startswith("_"))
    return module


# -- lowerings: NumPy's np.fft, which Numba compiles with rocket-fft --------------------------

def _need_rocket_fft(node):
    try:
        import rocket_fft  # noqa: F401  (registers Numba's implementations of np.fft)
    except ImportError:
        where = f" (at {node.where})" if node.where else ""
        shape = _shown(node.inputs[0].shape)
        raise UnsupportedError(
            f"{node.prim.name}: compiled code computes np.fft with the package rocket-fft, "
            "which is not installed: pip install rocket-fft (or jittape[fft]); eager tapes "
            f"need no extra package (operand shape {shape}){where}") from None


def _lower(fn, with_n):
    def lower(ctx, node):
        _need_rocket_fft(node)
        (x,) = node.inputs
        p = node.params
        n = p["n"] if with_n else None
        return [f"{ctx.name(node.out)} = np.fft.{fn}({ctx.name(x)}, {n!r}, {p['axis']}, "
                f"{p['norm']!r})"]
    return lower


_fft.lowerings["cpu"] = _lower("fft", False)
_ifft.lowerings["cpu"] = _lower("ifft", False)
_rfft.lowerings["cpu"] = _lower("rfft", False)
_irfft.lowerings["cpu"] = _lower("irfft", True)
