"""Matrix products for generated CPU code: a packed GEMM on a register-blocked tile.

``np.dot`` in Numba calls the BLAS that SciPy ships, with a thread pool of its own
beside NumPy's (on a few cores the two pools slow each other: ``benchmarks/compiled.py``),
and its blocking and threads decide the order of each sum. This module's product gives
the same bits on every call and any number of threads, shares its tiles among Numba's
threads, and keeps up with OpenBLAS and XLA on the products of a loss, for float32 and
float64 matrices of any strides (``benchmarks/gemm.py`` measures it; the figures that
decided its design are in ``docs/performance-notes.md``).

The method is the one of GotoBLAS and BLIS:

- the product is cut into blocks of at most ``KC`` steps of the inner dimension (blocks
  of equal length), ``MC`` rows of ``a`` and ``NC`` columns of ``b``, sized so that a
  block of ``a`` stays in the L2 cache and a panel of ``b`` in L1;
- each block of ``b`` is copied ("packed") into contiguous panels of ``NR`` columns
  stored row by row, padded with zeros (by vector copies, ``panel_ir``, where its rows
  are contiguous); ``a`` is read in place, ``MR`` rows at a time (its last rows, when
  fewer than ``MR``, from a copy padded with zeros);
- on one thread, a block of ``MC`` rows of ``a`` meets every panel in turn, so it is
  read from the L2 cache once per panel; on several, each thread takes whole panels
  (``SEVERAL_THREADS``);
- one micro-kernel computes an ``MR`` x ``NR`` tile of the result: ``MR * NR / LANES``
  accumulators that stay in vector registers for the whole inner loop, each step one
  broadcast of an element of ``a`` per row and one fused multiply-add per register.
  With 256-bit registers that is 6 x 16 float32 (6 x 8 float64): twelve accumulators,
  two panel registers and a broadcast, fifteen of the sixteen registers; with AVX-512's
  512-bit ones, 6 x 32 (6 x 16), the same fifteen registers of thirty-two.

A small product (the inner dimension one block, ``b`` of at most ``IN_PLACE`` elements:
a small layer, an RNN's step) would spend as long packing ``b`` as multiplying:
``_gemm_small`` reads ``b`` in place, and the last rows of ``a`` are a tile of their own
size (the micro-kernel is made for 1 to MR rows), with the rows in tiles of even size.

The micro-kernel is written in LLVM IR (``tile_ir``), and so is the copy of a panel
(``panel_ir``): they are where the shape of the generated machine code matters. Written
in Python, LLVM's vectorizers would not keep a tile of accumulators in registers across
the inner loop (Numba arrays may alias, so the tile would be loaded and stored at every
step), nor vectorize a copy of 16 elements. The rest of the packing and the loops
around it are Numba code (``_gemm``), compiled once and kept in Numba's disk cache like
the other runtime helpers.

Each element of the result is a sum over the inner dimension in increasing order (in
blocks of ``KC``, each added to the result), the same order on every call: results do
not change from run to run.
"""

import types as types_module

import numba
import numpy as np
from llvmlite import binding
from llvmlite import ir as llvm
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, overload

from .linkage import external
from .mathlib import HAS_AVX512, HAS_FMA

MR = 6                                 # rows of a tile
# the tile is laid out for the host's vector registers: 512-bit ones with AVX-512 (the
# products of the benchmarks' MLP 1.9x faster on a Zen 4 core than in 256-bit ones, as
# fast as XLA's; benchmarks/results/gemm.json), else 256-bit (AVX2). Each element of the
# result sums in the same order either way: the same bits.
REGISTER_BYTES = 64 if HAS_AVX512 else 32
LANES = {bits: 8 * REGISTER_BYTES // bits for bits in (32, 64)}   # elements a register holds
KC = 256                               # inner-dimension steps per packed block
MC = 96                                # rows of a per packed block (a multiple of MR)
NC = 4096                              # columns of b per packed block
SMALL = 2048                           # products of fewer multiply-adds: a plain loop
IN_PLACE = 16384                       # b of at most this many elements: read unpacked
PARALLEL = 1 << 20                     # products of more multiply-adds: on Numba's threads


def tile_ir(bits, fma=HAS_FMA, rows=None):
    """LLVM IR of the micro-kernel.

    Without ``rows``: ``void jittape_gemm_tile_f<bits>(i64 k, ptr a, i64 lda, i64 step,
    ptr b, ptr c, i64 ldc, i64 fresh)``, ``c[r * ldc + j] = (0 if fresh else
    c[r * ldc + j]) + sum(a[r * lda + p * step] * b[p * NR + j] for p < k)`` for
    r < MR, j < NR (strides in elements; ``b`` a packed panel). ``fresh`` for the first
    block of the inner dimension: the result is written, not read (no pass over memory
    to zero it first).

    With ``rows`` (1 to MR): ``jittape_gemm_tile_f<bits>_r<rows>``, the same for
    ``rows`` rows of ``b`` read in place, its rows ``ldb`` elements apart (an argument
    after ``b``): the small products' (``_gemm_small``). The packed product keeps its own
    kernel, whose panel stride is a constant: called through ``_matmul2d``, where both
    are linked, the large products ran 10% slower on the kernel of a variable stride."""
    packed = rows is None
    rows = MR if packed else rows
    lanes = LANES[bits]
    halves = 2
    ft = {32: "float", 64: "double"}[bits]
    vec = f"<{lanes} x {ft}>"
    fma_name = f"llvm.fma.v{lanes}f{bits}"
    align = bits // 8
    tiles = [(r, h) for r in range(rows) for h in range(halves)]

    def phis(name, first, first_block, then, then_block):
        """%name<r>_<h> for each register of the tile: ``first`` (a value's name, or a
        constant) coming from ``first_block``, else %then<r>_<h> from ``then_block``."""
        return [f"  %{name}{r}_{h} = phi {vec} [{first.format(r=r, h=h)}, %{first_block}], "
                f"[%{then}{r}_{h}, %{then_block}]" for r, h in tiles]

    stride = "" if packed else "i64 %ldb, "
    out = [f"define void @{tile_symbol(bits, None if packed else rows)}(i64 %k, "
           f"ptr noalias readonly %a, i64 %lda, i64 %step, ptr noalias readonly %b, "
           f"{stride}ptr noalias %c, i64 %ldc, i64 %fresh) {{",
           "entry:"]
    out += [f"  %arow{r} = mul i64 %lda, {r}" for r in range(rows)]
    for r, h in tiles:                                 # where the tile of c is
        out += [f"  %row{r}_{h} = mul i64 %ldc, {r}",
                f"  %at{r}_{h} = add i64 %row{r}_{h}, {h * lanes}",
                f"  %cp{r}_{h} = getelementptr {ft}, ptr %c, i64 %at{r}_{h}"]
    out += ["  %zero = icmp ne i64 %fresh, 0",
            "  br i1 %zero, label %start, label %read",
            "read:"]                                   # its values, unless fresh
    out += [f"  %old{r}_{h} = load {vec}, ptr %cp{r}_{h}, align {align}" for r, h in tiles]
    out += ["  br label %start",
            "start:"]
    out += phis("c", "zeroinitializer", "entry", "old", "read")
    out += ["  %none = icmp sle i64 %k, 0",
            "  br i1 %none, label %done, label %loop",
            "loop:",
            "  %p = phi i64 [0, %start], [%next, %loop]"]
    out += phis("s", "%c{r}_{h}", "start", "n", "loop")
    out.append(f"  %bat = mul i64 %p, {lanes * halves if packed else '%ldb'}")
    for h in range(halves):                            # a row of the b panel
        out += [f"  %bat{h} = add i64 %bat, {h * lanes}",
                f"  %bp{h} = getelementptr {ft}, ptr %b, i64 %bat{h}",
                f"  %b{h} = load {vec}, ptr %bp{h}, align {align}"]
    out.append("  %aat = mul i64 %p, %step")
    for r in range(rows):                              # a column of the rows of a
        out += [f"  %aat{r} = add i64 %aat, %arow{r}",
                f"  %ap{r} = getelementptr {ft}, ptr %a, i64 %aat{r}",
                f"  %a{r} = load {ft}, ptr %ap{r}, align {align}",
                f"  %ai{r} = insertelement {vec} poison, {ft} %a{r}, i32 0",
                f"  %as{r} = shufflevector {vec} %ai{r}, {vec} poison, <{lanes} x i32> zeroinitializer"]
        for h in range(halves):
            if fma:
                out.append(f"  %n{r}_{h} = call {vec} @{fma_name}({vec} %as{r}, {vec} %b{h}, {vec} %s{r}_{h})")
            else:
                out += [f"  %m{r}_{h} = fmul {vec} %as{r}, %b{h}",
                        f"  %n{r}_{h} = fadd {vec} %m{r}_{h}, %s{r}_{h}"]
    out += ["  %next = add i64 %p, 1",
            "  %more = icmp slt i64 %next, %k",
            "  br i1 %more, label %loop, label %done",
            "done:"]
    out += phis("f", "%c{r}_{h}", "start", "n", "loop")
    out += [f"  store {vec} %f{r}_{h}, ptr %cp{r}_{h}, align {align}" for r, h in tiles]
    out += ["  ret void", "}", f"declare {vec} @{fma_name}({vec}, {vec}, {vec})"]
    return "\n".join(out) + "\n"


def tile_symbol(bits, rows=None):
    """The packed micro-kernel's symbol; with ``rows``, the in-place one of that many."""
    return f"jittape_gemm_tile_f{bits}" + ("" if rows is None else f"_r{rows}")


def tiles_ir(bits):
    """LLVM IR of ``void jittape_gemm_tiles_f<bits>(i64 rows, ...)``: the in-place
    micro-kernel of ``rows`` (1 to MR) rows, the others' arguments following."""
    args = "i64 %k, ptr %a, i64 %lda, i64 %step, ptr %b, i64 %ldb, ptr %c, i64 %ldc, i64 %fresh"
    out = [f"define void @{tiles_symbol(bits)}(i64 %rows, {args}) {{",
           "entry:",
           f"  switch i64 %rows, label %r{MR} ["
           + " ".join(f"i64 {r}, label %r{r}" for r in range(1, MR)) + "]"]
    for r in range(1, MR + 1):
        out += [f"r{r}:",
                f"  call void @{tile_symbol(bits, r)}({args})",
                "  ret void"]
    out.append("}")
    types = "i64, ptr, i64, i64, ptr, i64, ptr, i64, i64"
    out += [f"declare void @{tile_symbol(bits, r)}({types})" for r in range(1, MR + 1)]
    return "\n".join(out) + "\n"


def tiles_symbol(bits):
    return f"jittape_gemm_tiles_f{bits}"


def panel_ir(bits):
    """LLVM IR of ``void jittape_gemm_panel_f<bits>(i64 k, ptr b, i64 ldb, ptr dst)``:
    ``dst[p * NR + j] = b[p * ldb + j]`` for p < k, j < NR: a whole panel of ``b``
    whose rows are contiguous (``ldb`` elements apart), packed by two vector loads and
    stores a row. Written in Numba, a loop of NR steps is too short for LLVM's
    vectorizer (its vector loop takes more at once) and stays scalar, a copy slow
    enough to show beside the micro-kernel's work."""
    lanes = LANES[bits]
    ft = {32: "float", 64: "double"}[bits]
    vec = f"<{lanes} x {ft}>"
    align = 1                                  # (b may be a view of any buffer)
    out = [f"define void @{panel_symbol(bits)}(i64 %k, ptr noalias readonly %b, i64 %ldb, "
           "ptr noalias %dst) {",
           "entry:",
           "  %none = icmp sle i64 %k, 0",
           "  br i1 %none, label %done, label %loop",
           "loop:",
           "  %p = phi i64 [0, %entry], [%next, %loop]",
           "  %from = mul i64 %p, %ldb",
           f"  %to = mul i64 %p, {2 * lanes}"]
    for h in range(2):
        out += [f"  %src{h}at = add i64 %from, {h * lanes}",
                f"  %src{h} = getelementptr {ft}, ptr %b, i64 %src{h}at",
                f"  %v{h} = load {vec}, ptr %src{h}, align {align}",
                f"  %dst{h}at = add i64 %to, {h * lanes}",
                f"  %dst{h} = getelementptr {ft}, ptr %dst, i64 %dst{h}at",
                f"  store {vec} %v{h}, ptr %dst{h}, align {align}"]
    out += ["  %next = add i64 %p, 1",
            "  %more = icmp slt i64 %next, %k",
            "  br i1 %more, label %loop, label %done",
            "done:",
            "  ret void",
            "}"]
    return "\n".join(out) + "\n"


def panel_symbol(bits):
    return f"jittape_gemm_panel_f{bits}"


_LIBRARIES = {}                        # (bits, id of the target context) -> code library


def _library(context, bits):
    """The code library holding the micro-kernel for ``bits``, made once per process."""
    key = (bits, id(context))
    library = _LIBRARIES.get(key)
    if library is None:
        library = context.codegen().create_library(f"jittape.gemm.f{bits}")
        texts = [tile_ir(bits)] + [tile_ir(bits, rows=rows) for rows in range(1, MR + 1)]
        for text in (*texts, tiles_ir(bits), panel_ir(bits)):
            module = binding.parse_assembly(text)
            module.verify()
            library.add_llvm_module(module)
        library.finalize()
        _LIBRARIES[key] = library
    return library


@intrinsic
def tile(typingctx, k, a, a_start, lda, step, b, b_start, c, c_start, ldc, fresh):
    """Run the packed micro-kernel on the MR rows of ``a`` from element ``a_start`` of
    its data (rows ``lda`` elements apart, columns ``step``), the packed panel of ``b``
    from ``b_start``, into the tile of ``c`` from ``c_start`` (``b`` and ``c`` 1-d; one
    float dtype); ``fresh``: write the tile, not add to it."""
    if not (_floats(a, b, c) and b.ndim == c.ndim == 1):
        return None

    def codegen(context, builder, signature, args):
        steps, a_, a_at, lda_, step_, b_, b_at, c_, c_at, ldc_, fresh_ = args
        _call_ir(context, builder, a.dtype.bitwidth, tile_symbol(a.dtype.bitwidth),
                 [steps, (a, a_, a_at), lda_, step_, (b, b_, b_at), (c, c_, c_at), ldc_, fresh_])
        return context.get_dummy_value()

    return (types.void(types.intp, a, types.intp, types.intp, types.intp, b, types.intp,
                       c, types.intp, types.intp, types.intp), codegen)


@intrinsic
def tile_rows(typingctx, rows, k, a, a_start, lda, step, b, b_start, ldb, c, c_start, ldc,
              fresh):
    """The in-place micro-kernel on ``rows`` (1 to MR) rows of ``a`` (as ``tile``) and NR
    columns of ``b`` from element ``b_start`` of its data, its rows ``ldb`` elements
    apart, into ``c`` (arrays of any dimensions)."""
    if not _floats(a, b, c):
        return None

    def codegen(context, builder, signature, args):
        rows_, steps, a_, a_at, lda_, step_, b_, b_at, ldb_, c_, c_at, ldc_, fresh_ = args
        _call_ir(context, builder, a.dtype.bitwidth, tiles_symbol(a.dtype.bitwidth),
                 [rows_, steps, (a, a_, a_at), lda_, step_, (b, b_, b_at), ldb_,
                  (c, c_, c_at), ldc_, fresh_])
        return context.get_dummy_value()

    return (types.void(types.intp, types.intp, a, types.intp, types.intp, types.intp, b,
                       types.intp, types.intp, c, types.intp, types.intp, types.intp),
            codegen)


def _floats(*arrays):
    """Whether ``arrays`` (Numba types) are arrays of one float dtype, float32 or 64."""
    first = arrays[0]
    return (all(isinstance(t, types.Array) and t.dtype == first.dtype for t in arrays)
            and first.dtype in (types.float32, types.float64))


def _call_ir(context, builder, bits, symbol, items):
    """Call ``symbol`` of the micro-kernels' library (linked in) with ``items``: i64
    values, and (array type, array, start) for a pointer to an array's element."""
    context.active_code_library.add_linking_library(_library(context, bits))
    i64, ptr = llvm.IntType(64), llvm.PointerType()
    values = [_element(context, builder, *item) if isinstance(item, tuple) else item
              for item in items]
    fnty = llvm.FunctionType(llvm.VoidType(),
                             [ptr if isinstance(item, tuple) else i64 for item in items])
    builder.call(cgutils.get_or_insert_function(builder.module, fnty, symbol), values)


def _element(context, builder, ty, value, start):
    """A pointer to element ``start`` of an array's data (counted in elements)."""
    return builder.gep(context.make_array(ty)(context, builder, value).data, [start])


@intrinsic
def pack_panel(typingctx, k, b, b_start, ldb, dst, dst_start):
    """Pack ``k`` rows of NR contiguous elements of ``b``'s data from element
    ``b_start`` (rows ``ldb`` elements apart) into ``dst`` (1-d) from ``dst_start``."""
    if not (_floats(b, dst) and dst.ndim == 1):
        return None

    def codegen(context, builder, signature, args):
        steps, b_, b_at, ldb_, dst_, dst_at = args
        _call_ir(context, builder, b.dtype.bitwidth, panel_symbol(b.dtype.bitwidth),
                 [steps, (b, b_, b_at), ldb_, (dst, dst_, dst_at)])
        return context.get_dummy_value()

    return types.void(types.intp, b, types.intp, types.intp, dst, types.intp), codegen


def _gemm_body(a, b):
    """a @ b for 2-d float32 or float64 arrays of one dtype and any strides.

    Compiled twice: as ``_gemm`` (``prange`` is ``range``) and as ``_gemm_parallel``
    (``parallel=True``), where the packing of ``b``'s panels and the (row block,
    panel) tasks of each block of the inner dimension are shared among Numba's threads.
    Each element of the result is computed by one task, in the same order either way:
    the results are the same, whatever the number of threads.
    """
    m, depth = a.shape
    n = b.shape[1]
    if m == 0 or n == 0 or depth == 0:
        return np.zeros((m, n), a.dtype)
    out = np.empty((m, n), a.dtype)                    # the first block writes every element
    size = a.itemsize
    if a.strides[0] % size or a.strides[1] % size:     # rows read in place: whole elements
        a = np.ascontiguousarray(a)
    lda = a.strides[0] // size
    step = a.strides[1] // size
    nr = 2 * (REGISTER_BYTES // size)                  # NR: two registers of lanes
    # rows of b packed by vector copies where they are contiguous runs of whole elements
    rows_in_place = b.strides[1] == size and b.strides[0] % size == 0
    ldb = b.strides[0] // size
    flat = out.reshape(m * n)
    kc_max = (depth + (depth + KC - 1) // KC - 1) // ((depth + KC - 1) // KC)  # even blocks
    b_pack = np.empty(kc_max * min(NC, (n + nr - 1) // nr * nr), a.dtype)
    edge = np.zeros((MR, kc_max), a.dtype)             # the last rows of a, when fewer than MR
    full = m - m % MR
    blocks = (m + MC - 1) // MC
    panels_first = SEVERAL_THREADS()
    for jc in range(0, n, NC):
        nc = min(NC, n - jc)
        panels = (nc + nr - 1) // nr
        for pc in range(0, depth, kc_max):
            kc = min(kc_max, depth - pc)
            for panel in numba.prange(panels):         # b[pc:, jc:] by panels of nr columns
                jr = panel * nr
                base = jr * kc
                width = min(nr, nc - jr)
                if rows_in_place and width == nr:
                    pack_panel(kc, b, pc * ldb + jc + jr, ldb, b_pack, base)
                else:
                    for p in range(kc):
                        row = base + p * nr
                        for j in range(width):
                            b_pack[row + j] = b[pc + p, jc + jr + j]
                        for j in range(width, nr):
                            b_pack[row + j] = 0.0
            if full < m:
                for r in range(m - full):
                    for p in range(kc):
                        edge[r, p] = a[full + r, pc + p]
            for task in numba.prange(blocks * panels):
                if panels_first:                       # a thread's tasks: whole panels
                    ic = task % blocks * MC
                    jr = task // blocks * nr
                else:                                  # a row block meets every panel
                    ic = task // panels * MC
                    jr = task % panels * nr
                width = min(nr, nc - jr)
                spare = np.empty(MR * nr, a.dtype)     # a tile at the edges of the result
                for i in range(ic, min(ic + MC, m), MR):
                    if i < full:
                        source = a
                        at = i * lda + pc * step
                        rows, cols = lda, step
                    else:
                        source = edge
                        at, rows, cols = 0, kc_max, 1
                    fresh = 1 if pc == 0 else 0
                    if i < full and width == nr:
                        tile(kc, source, at, rows, cols, b_pack, jr * kc,
                             flat, i * n + jc + jr, n, fresh)
                    else:
                        tile(kc, source, at, rows, cols, b_pack, jr * kc, spare, 0, nr, 1)
                        for r in range(min(MR, m - i)):
                            for j in range(width):
                                if fresh:
                                    out[i + r, jc + jr + j] = spare[r * nr + j]
                                else:
                                    out[i + r, jc + jr + j] += spare[r * nr + j]
    return out


@numba.njit(error_model="numpy", cache=True)
def _gemm_small(a, b):
    """a @ b for 2-d float32 or float64 arrays of one dtype and any strides, where the
    inner dimension is one block (at most KC) and ``b`` stays in the L1 or L2 cache
    (``IN_PLACE`` elements at most): the products of a small layer or of an RNN's step.
    Packing would cost as much as the product there, so ``b`` is read in place (a copy
    of it first where its rows are not contiguous), the last rows of ``a`` are a tile
    of fewer rows, and only the last, partial panel of columns is packed. Each element
    is the same sum in the same order as in ``_gemm``: the results are the same bits."""
    m, depth = a.shape
    n = b.shape[1]
    out = np.empty((m, n), a.dtype)
    if m == 0 or n == 0:
        return out
    if depth == 0:
        out[:, :] = 0.0
        return out
    size = a.itemsize
    if a.strides[0] % size or a.strides[1] % size:
        a = np.ascontiguousarray(a)
    lda = a.strides[0] // size
    step = a.strides[1] // size
    if b.strides[1] != size or b.strides[0] % size:
        b = np.ascontiguousarray(b)
    ldb = b.strides[0] // size
    nr = 2 * (REGISTER_BYTES // size)
    whole = n - n % nr
    width = n - whole
    panel = np.zeros(depth * nr if width else 0, a.dtype)   # the last columns, padded
    for p in range(depth if width else 0):
        for j in range(width):
            panel[p * nr + j] = b[p, whole + j]
    spare = np.empty(MR * nr, a.dtype)
    # the rows in tiles of as even a size as MR allows (8 rows: 4 + 4, not 6 + 2): a
    # step of a tile of r rows takes max(r, FMA latency) cycles, 4 and 4 fewer than 6 and 2
    tiles = (m + MR - 1) // MR
    for t in range(tiles):
        i = t * (m // tiles) + min(t, m % tiles)
        rows = m // tiles + (1 if t < m % tiles else 0)
        for j in range(0, whole, nr):
            tile_rows(rows, depth, a, i * lda, lda, step, b, j, ldb, out, i * n + j, n, 1)
        if width:
            tile_rows(rows, depth, a, i * lda, lda, step, panel, 0, nr, spare, 0, nr, 1)
            for r in range(rows):
                for j in range(width):
                    out[i + r, whole + j] = spare[r * nr + j]
    return out


def _named(fn, name, **constants):
    """A copy of ``fn`` under another name, seeing ``constants`` as globals (the module's
    others as they are when it is made): Numba names a function's disk cache by its
    qualified name and does not tell a ``parallel=True`` compile from a plain one, so
    two compiles of one function would share (and overwrite) one cache."""
    copy = types_module.FunctionType(fn.__code__, dict(fn.__globals__, **constants), name,
                                      fn.__defaults__, fn.__closure__)
    copy.__qualname__ = name
    copy.__doc__ = fn.__doc__
    return copy


def _start_threads():
    numba.get_num_threads()                 # starts Numba's thread pool, once


@intrinsic
def _thread_count(typingctx):
    """``numba.get_num_threads()`` (the calling thread's count) through the threading
    layer's symbol: Numba's own function reads it through a ctypes pointer, and a
    function holding one is not kept in Numba's disk cache."""
    _start_threads()                        # the pool defines the symbol

    def codegen(context, builder, signature, args):
        # and must be up before machine code that calls it is loaded from Numba's cache
        # (else a crash): Numba runs a library's reload hooks before it loads the code
        context.active_code_library._reload_init.add(_start_threads)
        fnty = llvm.FunctionType(llvm.IntType(32), [])     # C int get_num_threads(void)
        fn = cgutils.get_or_insert_function(builder.module, fnty, "get_num_threads")
        return builder.sext(builder.call(fn, []), context.get_value_type(types.intp))

    return types.intp(), codegen


@numba.njit(cache=True)
def _several_threads():
    return _thread_count() > 1


@numba.njit(cache=True)
def _one_thread():
    return False


# The order of the tasks of a block of the inner dimension (``SEVERAL_THREADS()``). On
# one thread, a row block of a meets every panel in turn, so that it is read from the
# L2 cache (all of a against one panel, then the next, would read a from farther away
# once per panel). On several, each thread takes whole panels against every row, as even
# a share as the panels make (by consecutive row blocks, one thread could hold the last,
# smaller block and then wait for the others). The plain compile runs on one thread; the
# parallel one asks how many it has (``numba.set_num_threads`` may have made it one).
SEVERAL_THREADS = _one_thread
_gemm = numba.njit(error_model="numpy", cache=True)(_named(_gemm_body, "_gemm"))
_gemm_parallel = numba.njit(error_model="numpy", cache=True, parallel=True)(
    _named(_gemm_body, "_gemm_parallel", SEVERAL_THREADS=_several_threads))


# _matmul2d calls the packed products through symbols too: linked in, their code was
# optimized and made into machine code a second time in _matmul2d's own compile (8 of
# the 18 s of a first compile of the float32 product)
def _dtype_key(a, *rest):
    return str(a.dtype) if isinstance(a, types.Array) else None


_MATRICES = {str(dtype): (types.Array(dtype, 2, "A"), types.Array(dtype, 2, "A"))
             for dtype in (types.float32, types.float64)}
gemm_small = external(_gemm_small, "gemm_small", _MATRICES, _dtype_key)
gemm = external(_gemm, "gemm", _MATRICES, _dtype_key)
gemm_parallel = external(_gemm_parallel, "gemm_parallel", _MATRICES, _dtype_key)


def product(a, b, threads=True):
    """a @ b for matrices: for float32 and float64 where the result has half a tile's
    columns, ``_gemm_small`` where ``b`` is small and the inner dimension one block (any
    rows), ``_gemm`` where there are MR rows or more; ``blas_product`` for the rest: a
    result of one column (a matrix times a vector, shaped as a matrix) is ``matvec``'s,
    one of a few columns BLAS's (it would fill a fraction of each tile). With
    ``threads``, products of PARALLEL multiply-adds or more run on Numba's threads (as many as
    ``numba.set_num_threads`` says), where the cost of starting them is small beside
    the product's. (Asking ``numba.get_num_threads()`` here would make
    every function that calls this one impossible to keep in Numba's disk cache.)"""
    return np.dot(a, b)


@overload(product)
def _product(a, b, threads=True):
    if a.dtype == b.dtype and a.dtype in (types.float32, types.float64):
        half = LANES[a.dtype.bitwidth]

        def impl(a, b, threads=True):
            m, depth, n = a.shape[0], a.shape[1], b.shape[1]
            small = depth <= KC and depth * n <= IN_PLACE
            if n < half or (m < MR and not small):
                return blas_product(a, b)
            # as arrays of any layout ([:, :]): one compile per dtype, not per layout pair
            if threads and m * n * depth >= PARALLEL:
                return gemm_parallel(a[:, :], b[:, :])
            if small:
                return gemm_small(a[:, :], b[:, :])
            return gemm(a[:, :], b[:, :])
        return impl
    return lambda a, b, threads=True: blas_product(a, b)


@intrinsic
def _as_layout(typingctx, a, layout):
    """``a`` (an array of layout A) typed as of ``layout`` ('C' or 'F'), the same array:
    for a caller that has checked the strides at run time."""
    if not (isinstance(a, types.Array) and isinstance(layout, types.StringLiteral)):
        return None
    result = a.copy(layout=layout.literal_value)

    def codegen(context, builder, signature, args):
        context.nrt.incref(builder, a, args[0])       # a new reference to the same array
        return args[0]

    return result(a, layout), codegen


def blas_product(a, b):
    """np.dot(a, b) for matrices and vectors of any layout: a matrix times a vector (or
    one column) by ``matvec``, other float products by BLAS, C or Fortran ordered
    operands passed as they are."""
    return np.dot(a, b)


@numba.njit(error_model="numpy", cache=True)
def matvec_columns(a, x, out):
    """out = a @ x for a matrix whose columns are contiguous (the transpose of a
    row-major one, as in the gradient of ``X @ w``): ``out += a[:, i] * x[i]`` column
    after column, one pass over ``a`` with ``out`` in cache."""
    n, k = a.shape
    out[:] = 0
    whole = k - k % 4
    for i in range(0, whole, 4):
        # four columns a pass over ``out``, added one after the other (the bits of one
        # column a pass; out loaded and stored a quarter as often). The columns typed
        # contiguous, as the caller checked: indexed through a's strides, the loop stays
        # scalar, 4x slower on a 10^4 x 100 float32 matrix
        c0 = _as_layout(a[:, i], "C")
        c1 = _as_layout(a[:, i + 1], "C")
        c2 = _as_layout(a[:, i + 2], "C")
        c3 = _as_layout(a[:, i + 3], "C")
        x0, x1, x2, x3 = x[i], x[i + 1], x[i + 2], x[i + 3]
        for j in range(n):
            out[j] = (((out[j] + c0[j] * x0) + c1[j] * x1) + c2[j] * x2) + c3[j] * x3
    for i in range(whole, k):
        column = _as_layout(a[:, i], "C")
        xi = x[i]
        for j in range(n):
            out[j] += column[j] * xi
    return out


def matvec(a, x):
    """a @ x for a matrix and a vector."""
    return np.dot(a, x)


@overload(matvec)
def _matvec(a, x):
    # A matrix whose columns are contiguous (x.T in the gradient of x @ w) by the loop
    # of matvec_columns: one pass over the matrix in a fixed order, as fast as OpenBLAS
    # where the cache holds it and 1.5x faster where it does not (10^5 x 100 float64).
    # Rows by OpenBLAS's gemv: each output element is one row's dot product (the same
    # bits on 1 and 2 BLAS threads), 1.5-2.5x faster than vectorized dot products of
    # LLVM IR written here, which were tried (benchmarks/results/gemm.json's X@w and
    # X.T@r rows; docs/performance-notes.md)
    size = a.dtype.bitwidth // 8

    def impl(a, x):
        n, k = a.shape
        if a.strides[0] == size and a.strides[1] != size and n > 1:
            return matvec_columns(a[:, :], x[:], np.empty(n, a.dtype))
        return _layout_product(a, x)
    return impl


@overload(blas_product)
def _blas_product(a, b):
    if (a.ndim == 2 and a.dtype == b.dtype and a.dtype in (types.float32, types.float64)
            and b.ndim in (1, 2)):
        if b.ndim == 1:
            return lambda a, b: matvec(a, b)

        def impl(a, b):
            if b.shape[1] == 1:       # a matrix times a column: the vector product
                return matvec(a, b[:, 0]).reshape((a.shape[0], 1))
            return _layout_product(a, b)
        return impl
    return lambda a, b: _layout_product(a, b)


def _layout_product(a, b):
    return np.dot(a, b)


@overload(_layout_product)
def _layout_product_impl(a, b):
    if a.layout in "CF" and b.layout in "CF":
        return lambda a, b: np.dot(a, b)

    def impl(a, b):
        # Numba's np.dot copies every operand of layout A (a copy of x.T in the
        # gradient of x @ w, at every step): here they keep their order, known from
        # their strides
        a_c, a_f = a.flags.c_contiguous, a.flags.f_contiguous
        b_c, b_f = b.flags.c_contiguous, b.flags.f_contiguous
        if a_c and b_c:
            return np.dot(_as_layout(a, "C"), _as_layout(b, "C"))
        if a_c and b_f:
            return np.dot(_as_layout(a, "C"), _as_layout(b, "F"))
        if a_f and b_c:
            return np.dot(_as_layout(a, "F"), _as_layout(b, "C"))
        if a_f and b_f:
            return np.dot(_as_layout(a, "F"), _as_layout(b, "F"))
        return np.dot(np.ascontiguousarray(a), np.ascontiguousarray(b))
    return impl


# dot and matmul2d live here, beside what they call, because Numba keys a function's
# disk cache on its own file only: in another module it would keep old code of this one.
@numba.njit(cache=True)
def dot(a, b):
    """np.dot for generated code (a matrix or a vector times a vector, the matrices of a
    batched product times a vector): ``blas_product``, so that operands of layout A
    (slices of a batch) are not copied when they are C or Fortran ordered."""
    return blas_product(a, b)


@numba.njit(cache=True)
def _matmul2d(a, b, threads=True):
    """a @ b for matrices (generated code's matmul; ``threads``: large products may use
    Numba's threads, ``jt.config.parallel``): ``product``, or a plain loop when the
    product is too small for packing or BLAS to pay off (the seed examples' 1x4 @ 4x3).
    What does the work takes arrays of any layout (``[:, :]``), so that it compiles
    once per dtype, not once per pair of layouts (each a long compile on a first run); BLAS
    gets the operands as they are (its wrapper transposes, where another layout
    would have it copy)."""
    n, k = a.shape
    m = b.shape[1]
    if b.shape[0] != k:
        raise ValueError("matmul: operand shapes are not aligned")
    if n * k * m > SMALL:
        return product(a, b, threads)
    return _small_product(a[:, :], b[:, :])


# generated kernels call the float products' machine code through a symbol: linking
# this module's code into each kernel made Numba compile it again every time (linkage)
matmul2d = external(_matmul2d, "matmul2d", {
    str(dtype): (types.Array(dtype, 2, "A"), types.Array(dtype, 2, "A"), types.boolean)
    for dtype in (types.float32, types.float64)}, _dtype_key,
    requires=(gemm_small, gemm, gemm_parallel), label="matrix products")


@numba.njit(cache=True)
def _small_product(a, b):
    n, k = a.shape
    m = b.shape[1]
    out = np.zeros((n, m), a.dtype)
    for i in range(n):
        for p in range(k):
            aip = a[i, p]
            for j in range(m):
                out[i, j] += aip * b[p, j]
    return out
