"""Numba's compile pipeline for generated CPU kernels.

Numba's nopython pipeline runs passes for Python features that generated code never
uses: ``with`` blocks, closures and functions made at run time, ``literally`` and
``literal_unroll``, branches on constants, overloads inlined at the IR level, array
expressions to fuse into loops. Each walks the whole function, and a kernel is hundreds
of lines: together they were a noticeable part of a kernel's cold compile, for nothing. A
kernel without parallel loops compiles with the pipeline less those passes; one with
``prange`` loops compiles with Numba's own (its parfor passes rely on the others).
Callees (runtime helpers, NumPy's functions) compile with Numba's pipeline as always.

LLVM, too, runs twice over a kernel as Numba builds it: its full optimization pipeline
for each function of the module on its own, to prepare the IR for the module's
pipeline, and then the module's, which inlines, optimizes and vectorizes again. The
first of these is a good part of LLVM's time and leaves nothing that the second would
not do: a kernel's library (``kernel_library``) runs LLVM's level 1 for the functions
(SROA, combining, CSE: what the module's pipeline and Numba's reference count pruning
need) and keeps Numba's level for the module. The kernels' machine code runs as fast
either way, and LLVM's time is shorter (``docs/performance-notes.md``).
"""

from numba.core import config, typed_passes, untyped_passes
from numba.core.compiler import CompilerBase, DefaultPassBuilder
from numba.core.compiler_machinery import LoweringPass, PassManager, register_pass

FUNCTION_OPT = 1                       # LLVM's level for each function before the module's
_LOWERING = getattr(typed_passes, "BaseNativeLowering", typed_passes.NativeLowering)

UNUSED = (untyped_passes.WithLifting, untyped_passes.InlineClosureLikes,
          untyped_passes.MakeFunctionToJitFunction, untyped_passes.InlineInlinables,
          untyped_passes.FindLiterallyCalls, untyped_passes.LiteralUnroll,
          untyped_passes.LiteralPropagationSubPipelinePass, untyped_passes.DeadBranchPrune,
          typed_passes.InlineOverloads, typed_passes.NopythonRewrites,
          typed_passes.DumpParforDiagnostics)


_LIBRARY_CLASSES = {}


def kernel_library(codegen, name):
    """A code library of ``codegen`` for a kernel: Numba's, whose functions LLVM
    optimizes at level ``FUNCTION_OPT`` before the module's pipeline. Numba's own where
    its code generator builds passes some other way (Numba before LLVM's new pass
    manager)."""
    base = getattr(codegen, "_library_class", None)
    if base is None or not hasattr(codegen, "_pass_builder"):
        return codegen.create_library(name)
    cls = _LIBRARY_CLASSES.get(base)
    if cls is None:
        cls = _LIBRARY_CLASSES[base] = type("Kernel" + base.__name__, (base,),
                                            {"_optimize_functions": _optimize_functions})
    return cls(codegen, name)


def _optimize_functions(self, ll_module):
    """``CPUCodeLibrary._optimize_functions`` at level ``FUNCTION_OPT`` (or Numba's
    ``NUMBA_OPT``, where lower)."""
    ll_module.data_layout = self._codegen._data_layout
    for func in ll_module.functions:
        fpm, pb = self._codegen._function_pass_manager(opt=min(FUNCTION_OPT, int(config.OPT)))
        with self._recorded_timings.record(f"Function passes on {func.name!r}", pb):
            fpm.run(func, pb)


@register_pass(mutates_CFG=False, analysis_only=False)
class KernelLibrary(LoweringPass):
    """Give the compile a ``kernel_library`` before Numba's lowering makes its own."""

    _name = "jittape_kernel_library"

    def __init__(self):
        LoweringPass.__init__(self)

    def run_pass(self, state):
        if state.library is None:
            state.library = kernel_library(state.targetctx.codegen(),
                                           state.func_id.func_qualname)
            state.library.enable_object_caching()      # as Numba's lowering does
        return False


@register_pass(mutates_CFG=True, analysis_only=False)
class QuietParforPass(typed_passes.ParforPass):
    """Numba's parfor pass without its remark that ``parallel=True`` found nothing to run
    on threads (the twin of a loop too small for them): a remark about jittape's code,
    which printed the generated source at the user's prompt. The compile holds Numba's
    compiler lock, so no other compile sees the switch."""

    _name = "jittape_parfor_pass"

    def run_pass(self, state):
        before = config.DISABLE_PERFORMANCE_WARNINGS
        config.DISABLE_PERFORMANCE_WARNINGS = 1
        try:
            return typed_passes.ParforPass.run_pass(self, state)
        finally:
            config.DISABLE_PERFORMANCE_WARNINGS = before


class KernelCompiler(CompilerBase):
    """Numba's nopython pipeline without the passes in ``UNUSED`` (``njit(pipeline_class=...)``),
    lowered into a ``kernel_library``."""

    def define_pipelines(self):
        full = DefaultPassBuilder.define_nopython_pipeline(self.state)
        if self.state.flags.auto_parallel.enabled:
            return [_with_library(full, "jittape parallel kernel", ())]
        return [_with_library(full, "jittape kernel", UNUSED)]


def _with_library(full, name, unused):
    """``full``'s passes less ``unused``, with ``KernelLibrary`` before the lowering."""
    pm = PassManager(name)
    for cls, what in full.passes:
        if cls in unused:
            continue
        if cls is typed_passes.ParforPass:
            cls = QuietParforPass
        if isinstance(cls, type) and issubclass(cls, _LOWERING):
            pm.add_pass(KernelLibrary, "a kernel's code library")
        pm.add_pass(cls, what)
    pm.finalize()
    return pm
