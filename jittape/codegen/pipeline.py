"""Numba's compile pipeline for generated CPU kernels.

Numba's nopython pipeline runs passes for Python features that generated code never
uses: ``with`` blocks, closures and functions made at run time, ``literally`` and
``literal_unroll``, branches on constants, overloads inlined at the IR level, array
expressions to fuse into loops. Each walks the whole function, and a kernel is hundreds
of lines: together they were half a second of the MLP's cold compile (4.2 s). A
kernel without parallel loops compiles with the pipeline less those passes; one with
``prange`` loops compiles with Numba's own (its parfor passes rely on the others).
Callees (runtime helpers, NumPy's functions) compile with Numba's pipeline as always.
"""

from numba.core import typed_passes, untyped_passes
from numba.core.compiler import CompilerBase, DefaultPassBuilder
from numba.core.compiler_machinery import PassManager

UNUSED = (untyped_passes.WithLifting, untyped_passes.InlineClosureLikes,
          untyped_passes.MakeFunctionToJitFunction, untyped_passes.InlineInlinables,
          untyped_passes.FindLiterallyCalls, untyped_passes.LiteralUnroll,
          untyped_passes.LiteralPropagationSubPipelinePass, untyped_passes.DeadBranchPrune,
          typed_passes.InlineOverloads, typed_passes.NopythonRewrites,
          typed_passes.DumpParforDiagnostics)


class KernelCompiler(CompilerBase):
    """Numba's nopython pipeline without the passes in ``UNUSED`` (``njit(pipeline_class=...)``)."""

    def define_pipelines(self):
        full = DefaultPassBuilder.define_nopython_pipeline(self.state)
        if self.state.flags.auto_parallel.enabled:
            return [full]
        lean = PassManager("jittape kernel")
        for cls, what in full.passes:
            if cls not in UNUSED:
                lean.add_pass(cls, what)
        lean.finalize()
        return [lean]
