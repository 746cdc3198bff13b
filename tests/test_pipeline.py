"""Numba's pipeline for generated kernels (``codegen/pipeline.py``): the passes it
leaves out, and the code library a kernel is lowered into."""

import warnings

import numba
import numpy as np
import pytest
from numba.core import typed_passes
from numba.core.registry import cpu_target

from jittape.codegen import pipeline
from jittape.codegen.pipeline import KernelCompiler, KernelLibrary


def _body(x, y):
    out = np.empty_like(x)
    for i in numba.prange(x.shape[0]):
        out[i] = np.exp(x[i]) * y + i
    return out


@pytest.mark.parametrize("parallel", [False, True], ids=["plain", "parallel"])
def test_a_kernel_is_lowered_into_a_kernel_library_and_computes_the_same(parallel, monkeypatch):
    codegen = cpu_target.target_context.codegen()
    levels = []
    make = codegen._function_pass_manager

    def spy(**kwargs):
        levels.append(kwargs.get("opt"))
        return make(**kwargs)

    monkeypatch.setattr(codegen, "_function_pass_manager", spy, raising=False)
    kernel = numba.njit(pipeline_class=KernelCompiler, parallel=parallel)(_body)
    x = np.linspace(-3, 3, 101)
    np.testing.assert_allclose(kernel(x, 2.0), np.exp(x) * 2.0 + np.arange(101), rtol=1e-15)
    (overload,) = kernel.overloads.values()
    assert type(overload.library).__name__.startswith("Kernel")
    # the kernel's functions (and its Python wrapper) at FUNCTION_OPT; a parallel
    # kernel's gufunc, compiled by Numba in a library of its own, at Numba's level
    assert levels.count(pipeline.FUNCTION_OPT) >= 2


def test_the_lean_pipeline_leaves_out_the_unused_passes_and_makes_the_library_first():
    kernel = numba.njit(pipeline_class=KernelCompiler)(lambda x: x + 1)
    assert kernel(1.5) == 2.5
    state_pipelines = []

    class Spy(KernelCompiler):
        def define_pipelines(self):
            pms = KernelCompiler.define_pipelines(self)
            state_pipelines.extend(pms)
            return pms

    numba.njit(pipeline_class=Spy)(lambda x: x * 2)(3.0)
    (pm,) = state_pipelines
    passes = [cls for cls, _ in pm.passes]
    assert not set(passes) & set(pipeline.UNUSED)
    at = passes.index(KernelLibrary)
    assert passes[at + 1] is typed_passes.NativeLowering


def test_a_code_generator_without_the_new_pass_builder_gets_numbas_own_library():
    made = []

    class OldCodegen:
        def create_library(self, name):
            made.append(name)
            return ("numba's library", name)

    assert pipeline.kernel_library(OldCodegen(), "k") == ("numba's library", "k")
    assert made == ["k"]


def test_a_parallel_kernel_with_nothing_to_parallelize_says_nothing():
    # Numba's remark (with the generated source) reached the user's prompt from the
    # parallel twins of an optimiser's loop; the kernel's own pipeline leaves it out,
    # and Numba's stays as it is for the user's own functions
    def first(x):
        return x[0] + 1.0
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert numba.njit(parallel=True, pipeline_class=KernelCompiler)(first)(np.ones(3)) == 2.0
    assert not [w for w in seen if issubclass(w.category, numba.NumbaPerformanceWarning)]
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        numba.njit(parallel=True)(first)(np.ones(3))
    assert [w for w in seen if issubclass(w.category, numba.NumbaPerformanceWarning)]
    assert not typed_passes.config.DISABLE_PERFORMANCE_WARNINGS
