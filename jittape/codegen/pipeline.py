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

import re

import llvmlite.binding as ll
from numba.core import cgutils, config, typed_passes, untyped_passes
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
                                            {"_optimize_functions": _optimize_functions,
                                             "add_ir_module": _add_ir_module})
    return cls(codegen, name)


def _add_ir_module(self, ir_module):
    """``CPUCodeLibrary.add_ir_module`` with the module's loops interleaved once
    (``interleave_once``)."""
    self._raise_if_finalized()
    ll_module = ll.parse_assembly(interleave_once(cgutils.normalize_ir_text(str(ir_module))))
    ll_module.name = ir_module.name
    ll_module.verify()
    self.add_llvm_module(ll_module)


_LABEL = re.compile(r'^([-\w$.]+|"[^"]+"):')
_TARGET = re.compile(r'label %([-\w$.]+|"[^"]+")')


def interleave_once(text):
    """LLVM IR ``text`` with each loop's back edge marked ``llvm.loop.interleave.count``
    1: LLVM vectorizes a kernel's loops but does not also interleave two vectors per
    iteration. An interleaved loop of 8-wide vectors runs its vector code from 16
    elements up, so that a loop over 10 or 15 ran one element at a time: in Adam's step
    on a 10-dimensional Rosenbrock, the gradient's loop over 9 elements (its kernel:
    44 -> 32 us per 1000 steps; 73 -> 65 at n = 30, within 3% either way from 100 to
    10^4). A back edge is an edge to a block on the path that reached it, depth first
    from a function's entry: the loops of generated code are Python's, reducible."""
    lines = text.split("\n")
    marks = {}                   # line of a latch's branch -> (its function's line, header)
    start = 0
    while True:
        start = next((k for k in range(start, len(lines)) if lines[k].startswith("define ")),
                     None)
        if start is None:
            break
        end = next((k for k in range(start, len(lines)) if lines[k] == "}"), len(lines))
        _back_edges(lines, start, end, marks)
        start = end
    if not marks:
        return text
    used = [int(m) for m in re.findall(r"!(\d+)", text)]
    option = max(used, default=-1) + 1
    ids, extra = {}, [f'!{option} = !{{!"llvm.loop.interleave.count", i32 1}}']
    for k, header in marks.items():
        if header not in ids:
            ids[header] = option + 1 + len(ids)
            extra.append(f"!{ids[header]} = distinct !{{!{ids[header]}, !{option}}}")
        lines[k] += f", !llvm.loop !{ids[header]}"
    return "\n".join(lines + extra) + "\n"


def _back_edges(lines, start, end, marks):
    """Record in ``marks`` the branch lines of the function in ``lines[start:end]`` that
    go back to a block on the depth-first path from its entry (line -> the function's
    line and the block's label: a loop's header, unique within the module)."""
    blocks, order, current, first = {}, [], None, True
    for k in range(start + 1, end):
        line = lines[k]
        if line == "{":                    # (the body's brace, on a line of its own)
            continue
        found = _LABEL.match(line)
        if found or (first and line.strip()):
            current = found.group(1).strip('"') if found else "<entry>"
            blocks[current] = {"succ": [], "branch": None}
            order.append(current)
            first = False
            if found:
                continue
        if current is None or not line.strip():
            continue
        targets = [t.strip('"') for t in _TARGET.findall(line)]
        if targets:
            blocks[current]["succ"] += targets
            if line.lstrip().startswith("br "):
                blocks[current]["branch"] = k
    if not order:
        return
    state = {order[0]: 1}                  # 1 on the path, 2 done
    stack = [(order[0], iter(blocks[order[0]]["succ"]))]
    while stack:
        block, succ = stack[-1]
        nxt = next(succ, None)
        if nxt is None:
            state[block] = 2
            stack.pop()
            continue
        if nxt not in blocks:
            continue
        seen = state.get(nxt)
        if seen == 1 and blocks[block]["branch"] is not None \
                and "!llvm.loop" not in lines[blocks[block]["branch"]]:
            marks[blocks[block]["branch"]] = (start, nxt)
        elif seen is None:
            state[nxt] = 1
            stack.append((nxt, iter(blocks[nxt]["succ"])))


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
