"""Error types and the helper that names the user's source line.

Every error jittape raises about the user's program says which operation failed,
with which shapes or dtypes, and where in the user's code (file:line).
"""

import contextlib
import functools
import linecache
import os
import sys
import sysconfig
import warnings

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


class JittapeError(Exception):
    """Base class of jittape's own errors."""

    def __str__(self):
        if self.args and type(self.args[0]) is int:      # raised by a kernel: see located
            return (f"check {self.args[0]} of the kernel failed"
                    + (f" (values {', '.join(map(str, self.args[1:]))})" if len(self.args) > 1 else "")
                    + "; a call of the compiled function says which op and line")
        return super().__str__()


class TracerError(JittapeError, TypeError):
    """A traced value was used where a concrete Python value is needed."""


class ShapeError(JittapeError, ValueError):
    """Operand shapes that an op cannot combine."""


class UnsupportedError(JittapeError, TypeError):
    """A NumPy function or argument type that jittape does not support."""


class NumericsError(JittapeError, FloatingPointError):
    """A NaN or inf produced while ``jt.config.check_numerics`` is on."""


class SizeMismatch(JittapeError, ValueError):
    """Sizes that a compiled function's ops need equal (broadcasting, matrix products)
    differ in this call. A kernel checks them all at once and its message lists them, one
    a line under a short first line; a compiled function says which failed, with the op,
    the sizes and the line."""


class OutOfRange(JittapeError, IndexError):
    """An index (an int, an element of an index array, a label) outside the axis it
    indexes, found by compiled code. Generated code raises it with a message template
    and the values of this call (``OutOfRange(template, index, size)``): Numba passes
    run-time values only as arguments, and the message is formatted here."""

    def __str__(self):
        args = self.args
        if len(args) > 1 and isinstance(args[0], str):
            return args[0].format(*args[1:])
        if len(args) == 3 and type(args[0]) is int:       # from a kernel called directly
            return (f"index {args[1]} is out of range for an axis of size {args[2]} (check "
                    f"{args[0]} of the kernel; a call of the compiled function names the op "
                    "and the line)")
        return super().__str__()


class KernelValueError(JittapeError, ValueError):
    """A value error a kernel found (a reduction without identity over an empty axis),
    raised as its message's number (see ``located``); a compiled call raises it as the
    ``ValueError`` of that message."""


class SignatureMismatch(JittapeError, ValueError):
    """Arguments whose size-1 axes (or, for a size-specialized graph, sizes) differ from
    those a compiled kernel was generated for. Compiled functions catch it and compile
    the right variant; a kernel called directly (``f.kernel()``) raises it."""


class GradientLostError(JittapeError):
    """With ``jt.config.strict``: a tensor a recording tape watches (or computed from one)
    was converted to a NumPy array implicitly, which would have lost its gradient."""


class GradientLostWarning(UserWarning):
    """A tensor a recording tape watches (or computed from one) was converted to a NumPy
    array implicitly (``np.asarray``, ``ndarray.dot``, ``np.array([...])``, a SciPy
    function, ...): the tape cannot see through NumPy, so the gradient through that
    value is lost. Shown once per call site; ``jt.config.strict = True`` raises
    ``GradientLostError`` instead."""


class RecompileWarning(UserWarning):
    """A compiled function traced and compiled more often than
    ``jt.config.recompile_warning``: its calls keep changing the signature (dtypes,
    ranks, size-1 dimensions, static values) or the path through its Python branches."""


def user_frame():
    """The user's line calling into jittape (``caller_frames``), as 'file:line', or None."""
    frame = caller_frames(sys._getframe(1))[0]
    return f"{frame.f_code.co_filename}:{frame.f_lineno}" if frame is not None else None


def at_user_line(message):
    """Append ' (at file:line)' naming the user's line, when one can be found."""
    return at_line(message, user_frame())


def at_line(message, where):
    """Append ' (at file:line)' naming ``where`` ('file:line', found earlier: on a Dask
    client for a worker's task), when it is known."""
    if not where or message.endswith(f"(at {where})"):   # (said once, when re-raised)
        return message
    return f"{message} (at {where})"


@functools.lru_cache(maxsize=None)
def _library_dirs():
    """Where installed libraries and the standard library live: frames there (NumPy,
    SciPy, ...) are not the user's, though NumPy or SciPy may be what converted a value."""
    dirs = set()
    for name in ("stdlib", "platstdlib", "purelib", "platlib"):
        path = sysconfig.get_paths().get(name)
        if path:
            dirs.add(os.path.abspath(path) + os.sep)
    return tuple(sorted(dirs))


_JITTAPE, _LIBRARY, _USER = 0, 1, 2
_KINDS = {}          # filename -> its kind, judged once per file: every traced op asks


def _kind(filename):
    kind = _KINDS.get(filename)
    if kind is None:
        path = os.path.abspath(filename)
        if filename.startswith("<jittape") or path.startswith(_PACKAGE_DIR + os.sep):
            kind = _JITTAPE
        elif filename.startswith("<frozen") or path.startswith(_library_dirs()):
            kind = _LIBRARY
        else:
            kind = _USER
        _KINDS[filename] = kind
    return kind


def caller_frames(start):
    """(user frame, the library frame it calls or None) above ``start``: jittape's own frames
    are skipped, and so are those of installed libraries and the standard library that
    called into them (SciPy's ``logsumexp`` converting a tensor, ``contextlib`` entering a
    tape's context): the user frame is the line the user wrote. When every frame is a
    library's, the innermost one outside jittape is the user frame."""
    frame, library, fallback = start, None, None
    while frame is not None:
        kind = _kind(frame.f_code.co_filename)
        if kind == _USER:
            return frame, library
        if kind == _LIBRARY:
            if fallback is None:
                fallback = frame
            library = frame           # the outermost: the library function the user called
        frame = frame.f_back
    return fallback, None


def warn_at_user(message, category, frame=None):
    """Issue a warning at the user's line (``caller_frames``, or ``frame``) with that
    module's registry: shown once per call site under Python's default filter, an error
    under ``-W error``, and so on. A warning issued inside jittape would name jittape's
    file, and the default filter would show it once whatever the user's line."""
    if frame is None:
        frame = caller_frames(sys._getframe(1))[0]
    if frame is None:
        warnings.warn(message, category, stacklevel=2)
        return
    g = frame.f_globals
    warnings.warn_explicit(message, category, frame.f_code.co_filename, frame.f_lineno,
                           module=g.get("__name__", "__main__"),
                           registry=g.setdefault("__warningregistry__", {}))


def _report_floating_point(kind, flag):
    """NumPy's floating-point error callback while jittape computes (``NumpyErrors``):
    NumPy's own warning, but at the user's line, naming the jittape op (or the user's
    own NumPy call, by its source text: NumPy does not tell a callback its ufunc)."""
    frame, op = sys._getframe(1), None
    while frame is not None and op is None:
        if frame.f_code.co_name == "bind" and _kind(frame.f_code.co_filename) == _JITTAPE:
            op = getattr(frame.f_locals.get("self"), "name", None)
        frame = frame.f_back
    if op is None:
        user = caller_frames(sys._getframe(1))[0]
        text = call_text(user) if user is not None else None
        where = f" in `{text}`" if text else ""
    else:
        where = f" in {op}"
    warn_at_user(f"{kind} encountered{where}", RuntimeWarning)


try:         # NumPy's error settings are this context variable's value (NumPy >= 2)
    from numpy._core._multiarray_umath import _extobj_contextvar as _NUMPY_ERRORS
except ImportError:                         # pragma: no cover - other NumPy layouts
    _NUMPY_ERRORS = None
_OURS = {}         # the user's settings (NumPy's object) -> the same with "warn" reported here


class NumpyErrors:
    """While a tape (or forward accumulator) records and computes gradients, NumPy's
    floating-point warnings (``np.seterr``'s ``"warn"``) name the user's line and the
    op, not jittape's file (where Python's default filter would show one warning
    whatever the user's line). The user's other settings (``"ignore"``, ``"raise"``,
    their own ``"call"``) stay as they are.

    ``enter`` puts the settings with ``"warn"`` reported here in place and ``exit``
    puts the user's back only if they are still those: a setting the user made inside
    the block stays, and blocks exited out of order (another thread, a generator
    suspended inside the block) leave NumPy warning as before, at the user's line. Two
    reads and a write of NumPy's context variable: a fraction of a microsecond."""

    __slots__ = ("before", "ours")

    def enter(self):
        self.before, self.ours = numpy_errors_enter() or (None, None)

    def exit(self):
        if self.ours is not None:
            numpy_errors_exit(self.before, self.ours)
        self.before = self.ours = None

    def __enter__(self):
        self.enter()
        return self

    def __exit__(self, *exc):
        self.exit()
        return False


def numpy_errors_enter():
    """Put the settings that report "warn" here in place: ``(before, ours)`` for
    ``numpy_errors_exit``, or None where nothing changed (no "warn" to report, the
    reporting in place already, a NumPy without the context variable)."""
    if _NUMPY_ERRORS is None:
        return None
    before = _NUMPY_ERRORS.get()
    ours = _OURS.get(before) or reporting_settings(before)
    if ours is before:
        return None
    _NUMPY_ERRORS.set(ours)
    return before, ours


def numpy_errors_exit(before, ours):
    """The user's settings back, if they are still the block's (``NumpyErrors.exit``)."""
    now = _NUMPY_ERRORS.get()
    if now is ours:
        _NUMPY_ERRORS.set(before)
    else:                     # the user's change inside the block stays, with "warn" back
        _NUMPY_ERRORS.set(_unreporting(now))


def reporting_settings(settings):
    """``settings`` with "warn" reported here (``_reporting``), made once per settings."""
    ours = _OURS.get(settings)
    if ours is None:
        ours = _OURS[settings] = _reporting(settings)
    return ours


def _reporting(settings):
    """NumPy's settings object of ``settings`` with each ``"warn"`` reported by
    ``_report_floating_point``; ``settings`` itself when there is none, or when the user
    has a callback of their own."""
    import numpy as np
    token = _NUMPY_ERRORS.set(settings)
    try:
        modes = np.geterr()
        if "warn" not in modes.values() or (
                "call" in modes.values() and np.geterrcall() is not _report_floating_point):
            return settings
        with np.errstate(call=_report_floating_point,
                         **{k: "call" if v == "warn" else v for k, v in modes.items()}):
            return _NUMPY_ERRORS.get()
    finally:
        _NUMPY_ERRORS.reset(token)


def _unreporting(settings):
    """``settings`` with the "call"s that report here back to "warn" (what a user's
    ``np.seterr`` inside a block made of the block's settings); others as they are."""
    import numpy as np
    token = _NUMPY_ERRORS.set(settings)
    try:
        if np.geterrcall() is not _report_floating_point:
            return settings
        modes = np.geterr()
        with np.errstate(call=None, **{k: "warn" if v == "call" else v
                                       for k, v in modes.items()}):
            return _NUMPY_ERRORS.get()
    finally:
        _NUMPY_ERRORS.reset(token)


def numpy_warnings_at_user(impl):
    """``impl`` with NumPy's floating-point warnings reported at the user's line while it
    runs (``numpy_errors_enter``/``numpy_errors_exit``, inlined: a tape runs this for
    every op that can warn and for every gradient). It wraps the ops that warn on
    ordinary finite operands (a zero divisor, a log of zero, an overflowing exp), so
    they report outside tapes too, and the tape's gradient methods. Tapes switch the
    settings once for their whole block, where this costs two reads; an op outside them
    pays the switch itself (about 0.5 us), which is why only those ops wear this and not
    every op (an overflowing product outside a tape still warns in jittape's file)."""
    if _NUMPY_ERRORS is None:                  # pragma: no cover - other NumPy layouts
        return impl

    settings, ours_of = _NUMPY_ERRORS, _OURS

    @functools.wraps(impl)
    def reporting(*args, **params):
        before = settings.get()
        ours = ours_of.get(before) or reporting_settings(before)
        if ours is before:                     # in a tape's block, or nothing to report
            return impl(*args, **params)
        settings.set(ours)
        try:
            return impl(*args, **params)
        finally:
            if settings.get() is ours:
                settings.set(before)
            else:            # (a gradient's custom rule changed them: numpy_errors_exit)
                settings.set(_unreporting(settings.get()))
    return reporting


def numpy_errors():
    """A ``NumpyErrors`` context (entered with ``with``)."""
    return NumpyErrors()


def call_text(frame):
    """The source text of the call ``frame`` is executing (``X.dot(w)``,
    ``np.asarray(x)``), from the positions of its current instruction; the stripped line
    when they are not known; None without source."""
    lines = linecache.getlines(frame.f_code.co_filename, frame.f_globals)
    try:
        pos = list(frame.f_code.co_positions())[frame.f_lasti // 2]
    except (AttributeError, IndexError):
        pos = (None,) * 4
    line, end_line, col, end_col = pos
    if None in pos or not lines or end_line > len(lines):
        line = frame.f_lineno
        return lines[line - 1].strip() if lines and 0 < line <= len(lines) else None
    # positions are offsets in UTF-8 bytes
    chunk = [lines[k - 1].encode() for k in range(line, end_line + 1)]
    if len(chunk) == 1:
        chunk[0] = chunk[0][col:end_col]
    else:
        chunk[0] = chunk[0][col:]
        chunk[-1] = chunk[-1][:end_col]
    text = " ".join(c.decode(errors="replace").strip() for c in chunk)
    return text or None


# What a generated kernel raises carries no text of the user's program: the message's
# number (``codegen.cpu.Context.message``) and the values of the call, so that programs
# of equal graphs share one compiled module whatever their files, lines and names
# (``codegen/build.py`` keys modules by their code). The compiled function turns it back
# into the error of that message.
KERNEL_ERRORS = (IndexError, ValueError, FloatingPointError)


@contextlib.contextmanager
def kernel_messages(messages):
    """Raise a kernel's coded error (``KERNEL_ERRORS``) as the error of its message
    (``located``); other errors pass as they are."""
    try:
        yield
    except KERNEL_ERRORS as err:
        found = located(err, messages)
        if found is err:
            raise
        raise found from None


def renumbered(err, numbers):
    """A kernel's coded ``err`` raised by a part with the part's own number, as the
    kernel's: ``numbers[k - 1]`` for the part's ``-k`` (``codegen.cpu._parts``); the
    kernel's own numbers (0 and up, from the functions of loop bodies it calls) pass."""
    args = err.args
    if not args or type(args[0]) is not int or not -len(numbers) <= args[0] < 0:
        return err
    return type(err)(numbers[-args[0] - 1], *args[1:])


def located(err, messages):
    """The error a kernel's coded ``err`` stands for, its message from ``messages`` (the
    kernel's, in order); ``err`` itself where it is not coded."""
    args = err.args
    if not args or type(args[0]) is not int or not 0 <= args[0] < len(messages):
        return err
    message = messages[args[0]]
    if isinstance(err, OutOfRange):
        return OutOfRange(message, *args[1:])
    if isinstance(err, KernelValueError):
        return ValueError(message)
    return type(err)(message)
