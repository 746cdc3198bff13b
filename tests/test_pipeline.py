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


IR = '''define i32 @"f"(i64 %"n")
{
entry:
  br label %"B0"
B0:
  %"i" = phi i64 [0, %"entry"], [%"i1", %"B0.body"], [%"i1", %"B0.skip"]
  br i1 %".1", label %"B0.body", label %"B9", !prof !0
B9:
  ret i32 0
B0.body:
  switch i64 %"i", label %"B0.skip" [i64 3, label %"B9"]
B0.skip:
  %"i1" = add i64 %"i", 1
  br i1 %".2", label %"B0", label %"B0.back"
B0.back:
  br label %"B0"
}

define i32 @"g"()
{
  br label %"again"
again:
  br label %"again"
}

!0 = !{ !"branch_weights", i32 1, i32 99 }
!7 = !{ i1 1 }'''


def test_each_loop_is_marked_to_be_interleaved_once():
    # a back edge is a branch to a block on the depth-first path from the entry (two
    # latches of one loop share its mark); forward edges, switches and the blocks laid
    # out after their targets are left alone; the marks number past the module's own
    out = pipeline.interleave_once(IR).split("\n")
    marked = [line.strip() for line in out if "!llvm.loop" in line]
    assert marked == ['br i1 %".2", label %"B0", label %"B0.back", !llvm.loop !9',
                      'br label %"B0", !llvm.loop !9',
                      'br label %"again", !llvm.loop !10']
    assert '!8 = !{!"llvm.loop.interleave.count", i32 1}' in out
    assert "!9 = distinct !{!9, !8}" in out and "!10 = distinct !{!10, !8}" in out
    assert pipeline.interleave_once("define void @h()\n{\n  ret void\n}\n") == \
        "define void @h()\n{\n  ret void\n}\n"


def test_a_kernels_module_reaches_llvm_with_its_loops_marked(monkeypatch):
    # the kernel library's module (not its helpers') goes through interleave_once
    seen = []
    real = pipeline.interleave_once
    monkeypatch.setattr(pipeline, "interleave_once", lambda text: seen.append(real(text)) or seen[-1])

    def scale(x, y):
        for i in range(x.shape[0]):
            y[i] = np.sqrt(x[i]) * 2.0 + y[i]
        return y
    kernel = numba.njit(pipeline_class=KernelCompiler, error_model="numpy")(scale)
    x = np.linspace(0.0, 4.0, 9)
    np.testing.assert_array_equal(kernel(x, np.ones(9)), np.sqrt(x) * 2.0 + 1.0)
    assert any("scale" in text and "!llvm.loop" in text for text in seen)
