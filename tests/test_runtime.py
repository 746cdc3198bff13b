"""The array helpers generated CPU code calls (``codegen/runtime.py``), in compiled code
and as plain Python (``f.lower(...).python``)."""

import numba
import numpy as np
import pytest

from jittape.codegen.runtime import reshape


@numba.njit(cache=False)
def _reshape_rows(a, n):
    return reshape(a, (n, 1))


@numba.njit(cache=False)
def _reshape_2x3(a):
    return reshape(a, (2, 3))


def test_reshape_of_a_c_ordered_array_is_a_view():
    a = np.arange(6.0)
    out = _reshape_rows(a, 6)
    assert out.shape == (6, 1) and out.strides == (8, 8)
    assert _reshape_rows.nopython_signatures[0].return_type.layout == "C"
    out[2, 0] = -1.0
    assert a[2] == -1.0                        # the same memory
    two = _reshape_2x3(np.arange(6, dtype=np.float32))
    np.testing.assert_array_equal(two, np.arange(6, dtype=np.float32).reshape(2, 3))
    assert two.strides == (12, 4)


def test_reshape_of_other_layouts_copies_when_it_must():
    a = np.arange(12.0)
    every_other = a[::2]                       # layout A, not contiguous
    out = _reshape_2x3(every_other)
    np.testing.assert_array_equal(out, every_other.reshape(2, 3))
    out[0, 0] = 99.0
    assert a[0] == 0.0                         # a copy
    fortran = np.asfortranarray(np.arange(6.0).reshape(3, 2))
    np.testing.assert_array_equal(_reshape_2x3(fortran), fortran.reshape(2, 3))


def test_reshape_to_another_size_raises():
    with pytest.raises(ValueError, match="size"):
        _reshape_rows(np.arange(6.0), 5)


def test_reshape_in_plain_python_is_numpy_s():
    a = np.arange(6.0)
    out = reshape(a, (6, 1))
    assert out.base is a
    np.testing.assert_array_equal(reshape(a[::2], (3, 1)), a[::2].reshape(3, 1))
