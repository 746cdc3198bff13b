"""Error types and the helper that names the user's source line.

Every error jittape raises about the user's program says which operation failed,
with which shapes or dtypes, and where in the user's code (file:line).
"""

import os
import sys

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


class JittapeError(Exception):
    """Base class of jittape's own errors."""


class ShapeError(JittapeError, ValueError):
    """Operand shapes that an op cannot combine."""


class UnsupportedError(JittapeError, TypeError):
    """A NumPy function or argument type that jittape does not support."""


class NumericsError(JittapeError, FloatingPointError):
    """A NaN or inf produced while ``jt.config.check_numerics`` is on."""


class SizeMismatch(JittapeError, ValueError):
    """Sizes that a compiled function's ops need equal (broadcasting, matrix products)
    differ in this call. A kernel checks them all at once and its message lists them; a
    compiled function says which failed, with the op and the line."""


class SignatureMismatch(JittapeError, ValueError):
    """Arguments whose size-1 axes (or, for a size-specialized graph, sizes) differ from
    those a compiled kernel was generated for. Compiled functions catch it and compile
    the right variant; a kernel called directly (``f.kernel()``) raises it."""


def user_frame():
    """The innermost stack frame outside the jittape package, as 'file:line', or None."""
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not (filename.startswith("<jittape") or
                os.path.abspath(filename).startswith(_PACKAGE_DIR + os.sep)):
            return f"{filename}:{frame.f_lineno}"
        frame = frame.f_back
    return None


def at_user_line(message):
    """Append ' (at file:line)' naming the user's line, when one can be found."""
    where = user_frame()
    return f"{message} (at {where})" if where else message
