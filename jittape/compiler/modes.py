"""The modes: what a compiled function computes (``grad``, ``value_and_grad``,
``jacobian``, ``hessian``, ``function``) and how its results are packed.

On a miss a call traces the function (``trace``), differentiates the graph
(``autodiff``, ``control.jacobian_rows``), optimizes it (``passes``), generates a Numba
function (``codegen.cpu`` or ``codegen.cuda``) and builds it through the disk cache
(``codegen.build``). The kernel returns flat outputs; a packer makes them the user's
results (a gradient per ``argnums``, in the structure of its argument; aux; a
``function``'s result structure), written as one expression where it can be, which the
fast path inlines (``fastpath.caller``).

``function`` compiles a function as it is. Tapes opened in it record into the trace
(``tape.record_traced``) and their ``gradient``/``jacobian`` run the autodiff pass over
the nodes they recorded. Variables it reads from its enclosing scope become inputs (the
compiled function holds them, as ``tf.function`` does), Variables passed as arguments
too; ``assign``/``assign_add``/``assign_sub`` make the new values outputs, written back
to the variables after the call, so a training step is one native call.
"""

import os
import sys

import numpy as np

from .. import autodiff, control, ops, passes, rolling, tree
from .._version import __version__
from ..codegen import build, cpu
from ..errors import UnsupportedError, at_user_line
from ..tensor import Tensor
from ..trace import Trace, Tracer, _numpy_random_mark, leaf_names
from .cache import _Entry
from .capture import (_capture_checks, _capture_text, _captured_values, _global_random_state,
                      _warn_global_random)
from .fastpath import generate
from .signature import _is_device_array

# no_cfunc_wrapper: kernels are called from Python and from njit code, never as
# first-class function values, so Numba need not make (and compile) their C wrapper
_NJIT_OPTIONS = {"error_model": "numpy", "nogil": True, "no_cfunc_wrapper": True}


class Modes:
    """The part of ``compiled.Compiled`` that traces, differentiates and builds a
    variant (``_compile``), and inlines a compiled function called while another is
    traced (``_inline``)."""

    def _inline(self, args):
        """A compiled function called while another function is traced: its function
        (differentiated with a tape for the gradient modes) becomes part of that trace."""
        from ..tape import GradientTape, UnconnectedGradients
        if self.mode == "function":
            return self.fn(*args)
        if self.mode not in ("grad", "value_and_grad", "jacobian"):
            raise UnsupportedError(at_user_line(
                f"{self.mode}({self.name}) called inside a compiled function: only "
                "grad, value_and_grad, jacobian and function compose; use a GradientTape "
                "there"))
        args = list(args)
        diff = self._diff(len(args))
        for i in diff:
            # each differentiated leaf a value of its own (as a compiled call's inputs
            # are): the same traced value passed twice, or also read from the closure,
            # would otherwise be one source of the tape (d(a*x)/da at a = x is x, not 2x)
            args[i] = tree.map_leaves(lambda x: ops.identity(_as_tensor(x)), args[i])
        if self.mode == "jacobian":           # (jacfwd(jacrev(f)): a Hessian)
            from ..recording import thread_tapes
            # under a forward accumulator the rows are gradients one by one: it follows
            # ops, and the Jacobian's loop over rows is a region it has no rule for
            by_rows = any(t._forward for t in thread_tapes())
            with GradientTape(persistent=True) as tape:
                tape.watch([args[i] for i in diff])
                result = self.fn(*args)
                value, aux = result if self.has_aux else (result, None)
                value = _as_tensor(value)
                if by_rows:                    # (the elements, recorded by the tape)
                    flat = ops.reshape(value, (-1,))
                    elements = [flat[k] for k in range(int(np.prod(value.shape, dtype=np.int64)))]
            jacs = [_inline_jacobian(tape, value, args[i], elements if by_rows else None)
                    for i in diff]
            jacs = jacs[0] if self.single else tuple(jacs)
            return (jacs, aux) if self.has_aux else jacs
        with GradientTape() as tape:
            tape.watch([args[i] for i in diff])
            result = self.fn(*args)
        value, aux = result if self.has_aux else (result, None)
        grads = tape.gradient(value, [args[i] for i in diff],
                              unconnected_gradients=UnconnectedGradients.ZERO)
        grads = grads[0] if self.single else tuple(grads)
        if self.mode == "grad":
            return (grads, aux) if self.has_aux else grads
        return ((value, aux), grads) if self.has_aux else (value, grads)

    def _compile(self, args, leaves, key):
        self._stats["misses"] += 1
        graph, pack, trace = self._trace(args, leaves, key)
        if trace.reads_sizes and not self._size_keyed:
            self._size_keyed = True
            self._cache.clear()
            self._forget_callers()
        entry = self._build(graph, pack)
        entry.captures = [st.variable for st in trace.variables.values() if st.argument is None]
        entry.implicit = list(trace.implicit)
        entry.checks = _capture_checks(trace)
        entry.capture_text = _capture_text(trace, entry.checks)
        return entry

    def _build(self, graph, pack):
        if self.target == "cuda":
            from ..codegen import cuda
            source, func = cuda.generate(graph, f"{self.mode} of {self.name}", __version__)
            # the module holds the messages with the user's lines: keyed with the graph's
            # text, lines included
            code, messages, key, parts = source, (), graph.text() + source, ()
        else:
            source, func, code, messages, parts = cpu.generate(
                graph, f"{self.mode} of {self.name}", __version__)
            key = code        # the code alone: programs of equal graphs share the module
        debug = os.environ.get("JITTAPE_DEBUG", "")
        if debug in ("1", "2"):                # DESIGN.md rule 8: show the IR (and the code)
            print(graph.text(), file=sys.stderr)
            if debug == "2":
                print(source, file=sys.stderr)
        consts = [c.value for c in graph.consts if c.value.ndim > 0]
        graph.messages = messages
        built = build.build(code, func, build.digest(key, self.target),
                            _NJIT_OPTIONS if self.target == "cpu" else None, parts)
        writes, guards = graph.writes, graph.guards
        if graph.packing is not None:      # the entry's indices: of the flattened outputs
            flat = graph.packing.flat_of
            writes = [(flat[k], target) for k, target in writes]
            guards = [(flat[k], value) for k, value in guards]
        return _Entry(graph, source, built, consts, pack, writes, guards)

    def _trace(self, args, leaves, key):
        self._stats["traces"] += 1
        kinds = key[1]
        trace = Trace(self.name)
        trace.target = self.target
        trace.reads_sizes = self._size_keyed        # keyed on exact sizes: valid for those only
        diff_inputs = []                   # (argnum, tracer) of differentiated leaves
        diff = self._diff(len(args)) if self.argnums else ()
        with trace:
            traced_args, k, pos = [], 0, 0
            labels = leaf_names(self.fn, args, key[0])     # the inputs' names
            for i, a in enumerate(args):
                td = key[0][i]
                sub = [a] if td is None else tree.flatten(a)[0]
                new = []
                for leaf in sub:
                    kind = kinds[pos]
                    value = leaves[pos]
                    pos += 1
                    if kind == "static":
                        if i in diff:
                            raise TypeError(at_user_line(
                                f"{self.mode}({self.name}): argument {i} is a Python "
                                f"{type(value).__name__}; only floating-point arguments can be "
                                f"differentiated (argnums={self._argnums_text()})"))
                        new.append(value)
                        continue
                    if kind == "variable":
                        if value._id in trace.variables:
                            raise UnsupportedError(at_user_line(
                                f"{self.mode}({self.name}): variable {value.name!r} is passed "
                                "twice; pass each variable once"))
                        state = trace.variable_input(value, argument=pos - 1)
                        k += 1
                        new.append(value)
                        if i in diff:
                            diff_inputs.append((i, Tracer._of(state.input, trace)))
                        continue
                    if kind == "device":           # its values, for guards while tracing
                        from ..codegen import cuda_runtime
                        array = cuda_runtime.copy_to_host(value)
                    else:
                        array = (np.float64(value) if kind == "pyfloat" else np.complex128(value)
                                 if kind == "pycomplex" else np.asarray(value))
                    self._check_dtype(array.dtype, i)
                    t = trace.add_input(array, k, name=labels[pos - 1])
                    if kind in ("pyfloat", "pycomplex"):   # never widens a float32 tensor
                        trace.weak.add(t._var.id)
                    k += 1
                    new.append(t)
                    if i in diff:
                        if array.dtype.kind not in "fc":
                            raise TypeError(at_user_line(
                                f"{self.mode}({self.name}): argument {i} has dtype "
                                f"{array.dtype.name}; only floating-point arguments can be "
                                f"differentiated (argnums={self._argnums_text()})"))
                        diff_inputs.append((i, t))
                traced_args.append(new[0] if td is None else tree.unflatten(td, new))
            # gradients come in the order of argnums (a stable sort: leaves in order)
            diff_inputs.sort(key=lambda pair: diff.index(pair[0]))
            trace.captured = _captured_values(self.fn)
            drawn = _global_random_state()
            trace.random_mark = _numpy_random_mark()
            result = self.fn(*traced_args)
            trace.random_mark = None
            if key[5]:
                sub = rolling.roll(trace, [x._var for x in tree.flatten(result)[0]
                                           if isinstance(x, Tracer)])
                if sub:
                    result = rolling.substitute(trace, result, sub)
            if drawn != _global_random_state():
                _warn_global_random(self.fn, self.mode, self.name, trace.random_where)
            if self.mode == "function":
                outputs, pack = _function_outputs(trace, result, self.name, self.target)
            else:
                outputs, pack = self._differentiate(trace, result, diff_inputs, key)
            writes, guards = [], []
            for state in trace.variables.values():
                if state.assigned:
                    target = state.variable if state.argument is None else state.argument
                    writes.append((len(outputs), target))
                    outputs.append(state.value)
            for var, value in trace.guards:
                guards.append((len(outputs), value))
                outputs.append(var)
        graph = passes.optimize(trace.graph(outputs), check_numerics=key[3])
        graph.writes, graph.guards, graph.check_numerics = writes, guards, key[3]
        graph.parallel = key[4]
        if self.target == "cpu":           # stacked inputs passed stacked (not on devices)
            graph = passes.pack_arguments(graph)
        return graph, pack, trace

    def _differentiate(self, trace, result, diff_inputs, key):
        if self.has_aux:
            if not (isinstance(result, (tuple, list)) and len(result) == 2):
                raise TypeError(at_user_line(
                    f"{self.mode}({self.name}) with has_aux=True: the function must return "
                    f"a pair (value, aux), got {type(result).__name__}"))
            result, aux = result
        else:
            aux = None
        value = _as_tracer(trace, result, self.mode, self.name)
        if self.mode in ("grad", "value_and_grad") and value._var.ndim != 0:
            raise TypeError(at_user_line(
                f"{self.mode}({self.name}): the function must return a scalar, got a value of "
                f"shape {tuple(int(d) for d in value._var.shape)} (use jt.jacobian for "
                "non-scalar outputs)"))
        if value.dtype.kind not in "fc":
            raise TypeError(at_user_line(
                f"{self.mode}({self.name}): the function's output has dtype "
                f"{value.dtype.name}; only floating-point outputs can be differentiated"))
        if self.mode == "jacobian":
            return _jacobian_outputs(self, trace, value, diff_inputs, aux)
        if self.mode == "hessian":
            return _hessian_outputs(self, trace, value, diff_inputs, aux)
        seed = Tracer._of(trace.const(np.ones((), value.dtype)), trace)   # d value / d value
        cts = autodiff.backward(trace, [(value._var, seed)], [t._var for _, t in diff_inputs])
        grads = [_grad_or_zeros(ct, t) for ct, (_, t) in zip(cts, diff_inputs)]
        # the gradient of a Python float has the value's dtype (a float32 loss: float32),
        # as a watched Python float on the tape would
        # (of a Python complex: the complex dtype of the value's precision)
        grads = [ops.cast(g, _weak_grad_dtype(value.dtype, t.dtype))
                 if t._var.id in trace.weak and value.dtype.kind == "f"
                 and g.dtype != _weak_grad_dtype(value.dtype, t.dtype) else g
                 for g, (_, t) in zip(grads, diff_inputs)]
        aux_leaves, aux_def = tree.flatten(aux)
        aux_vars = [_as_tracer(trace, a, self.mode, self.name)._var for a in aux_leaves]
        outputs = ([value._var] if self.mode == "value_and_grad" else []) + aux_vars + \
            [g._var for g in grads]
        dtypes = [v.dtype for v in outputs]
        grad_defs = self._grad_structure(key)
        mode, has_aux, single = self.mode, self.has_aux, self.single
        n_aux = len(aux_vars)
        ranks = [v.ndim for v in outputs]
        if not has_aux and all(td is None or _expressible(td, n) for td, n in grad_defs):
            return outputs, _flat_packer(mode, single, dtypes, ranks, self.target, grad_defs)

        def pack(out):
            out = [_numpy(x, dt) for x, dt in zip(out, dtypes)]
            pos = 1 if mode == "value_and_grad" else 0
            aux_value = tree.unflatten(aux_def, out[pos:pos + n_aux])
            grads = _unflatten_grads(grad_defs, out[pos + n_aux:], single)
            if mode == "value_and_grad":
                return ((out[0], aux_value), grads) if has_aux else (out[0], grads)
            return (grads, aux_value) if has_aux else grads

        return outputs, pack


def _inline_jacobian(tape, value, source, elements):
    """``tape.jacobian`` of an inlined ``jt.jacobian``, or, given the value's
    ``elements``, its rows as their gradients one by one."""
    from ..tape import UnconnectedGradients
    zero = UnconnectedGradients.ZERO
    if elements is None:
        return tape.jacobian(value, source, unconnected_gradients=zero)
    rows = [tape.gradient(e, source, unconnected_gradients=zero) for e in elements]
    stacked = (ops.stack(rows) if rows
               else ops.zeros((0,) + tuple(source.shape), source.dtype))
    return ops.reshape(stacked, tuple(value.shape) + tuple(source.shape))


def _as_tracer(trace, x, mode, name):
    if isinstance(x, Tracer):
        return x
    if isinstance(x, (Tensor, np.ndarray, np.generic, bool, int, float)):
        value = x._value if isinstance(x, Tensor) else np.asarray(x)
        if isinstance(x, float):
            value = np.float32(x)
        return Tracer._of(trace.const(np.asarray(value)), trace)
    raise TypeError(at_user_line(
        f"{mode}({name}): the function returned a value of type {type(x).__name__}; it must "
        "return a jittape tensor (or a NumPy value)"))


def _as_tensor(x):
    """A leaf of a differentiated argument, as a tensor a tape can watch. A Python float
    is what it is as an argument of a compiled function called on its own: a float64
    value typed weakly (it does not widen a float32 tensor), in the trace inlining it."""
    if isinstance(x, Tensor):
        return x
    if isinstance(x, float):
        from ..recording import current_trace
        trace = current_trace()
        if trace is None:                                   # pragma: no cover - traced only
            return Tensor(np.float64(x))
        t = trace.tracer(np.float64(x))
        trace.weak.add(t._var.id)
        return t
    return Tensor(x)


def _weak_grad_dtype(value_dtype, input_dtype):
    return np.result_type(value_dtype, np.complex64) if input_dtype.kind == "c" else value_dtype


def _grad_or_zeros(ct, t):
    if ct is None:                      # a symbolic zero, materialized at the boundary
        return ops.zeros_like(t)
    if ct.dtype != t.dtype:
        ct = ops.cast(ct, t.dtype)
    return ct


def _function_outputs(trace, result, name, target):
    """Outputs and a packer for ``function``: the result's structure with its tensors
    (and NumPy values) as kernel outputs; other leaves (Python values) are kept as they
    were while tracing."""
    leaves, treedef = tree.flatten(result)
    outputs, slots, statics = [], [], {}
    for k, leaf in enumerate(leaves):
        if isinstance(leaf, (Tensor, np.ndarray, np.generic)):
            var = trace.var_of(leaf)
            slots.append(len(outputs))
            outputs.append(var)
        elif isinstance(leaf, (bool, int, float, str, bytes)) or leaf is None:
            slots.append(None)
            statics[k] = leaf
        else:
            raise TypeError(at_user_line(
                f"function({name}): the function returned a value of type "
                f"{type(leaf).__name__}; results must be tensors, NumPy values, Python "
                "numbers or strings, or lists/tuples/dicts of them"))
    dtypes = [v.dtype for v in outputs]
    ranks = [v.ndim for v in outputs]
    if treedef.kind == "leaf" and not statics:
        names = {}
        body = "out[0]" if ranks[0] else _scalar_code("out[0]", dtypes[0], names, target)
        return outputs, _expr_packer(body, names)

    if _displayable(treedef):     # one expression, as for a single result (it runs every call)
        names = {}
        items = []
        for k, slot in enumerate(slots):
            if slot is None:
                items.append(f"STATIC{k}")
                names[items[-1]] = statics[k]
            else:
                items.append(f"out[{slot}]" if ranks[slot]
                             else _scalar_code(f"out[{slot}]", dtypes[slot], names, target))
        return outputs, _expr_packer(_tree_code(treedef, items, names), names)

    def pack(out):
        values = [statics[k] if slot is None else _numpy(out[slot], dtypes[slot])
                  for k, slot in enumerate(slots)]
        return tree.unflatten(treedef, values)

    return outputs, pack


def _displayable(td):
    """Whether structure ``td`` is leaves in dicts, lists, tuples and dataclasses, which
    ``_tree_code`` writes as one expression."""
    return td.kind == "leaf" or (td.kind in ("dict", "list", "tuple", "dataclass")
                                 and all(_displayable(c) for c in td.children))


def _jacobian_outputs(compiled, trace, value, diff_inputs, aux):
    """Outputs d value / d x_j, each of shape value.shape + x_j.shape: by reverse mode
    (a loop over the value's elements), or by forward mode (a loop over each input's
    elements) when the value has more axes than the inputs together (the shape says the
    value is the larger; its sizes are not read, so one variant serves every size) and
    the graph has no loop (a region has no JVP rule over the graph)."""
    wrt = [t for _, t in diff_inputs]
    out_shape = tuple(value._var.shape)
    if _forward_is_cheaper(trace, value, wrt):
        jacs = []
        nodes = list(trace.nodes)        # (the function's: not the loops made here)
        for t in wrt:
            cols = control.jacobian_columns(trace, value, t, nodes)   # (t.size,) + out
            n = len(out_shape)
            moved = ops.transpose(cols, tuple(range(1, n + 1)) + (0,)) if n else cols
            jacs.append(ops.reshape(moved, out_shape + tuple(t._var.shape)))
    else:
        rows = control.jacobian_rows(trace, value, wrt)
        jacs = [ops.reshape(r, out_shape + tuple(t._var.shape)) for r, t in zip(rows, wrt)]
    return _structured_outputs(compiled, trace, jacs, aux, [len(jacs)])


def _forward_is_cheaper(trace, value, wrt):
    if any(node.prim.kind == "loop" for node in trace.nodes):
        return False
    return value._var.ndim > sum(t._var.ndim for t in wrt)


def _hessian_outputs(compiled, trace, value, diff_inputs, aux):
    """Outputs d2 value / d x_i d x_j (nested like JAX: H[i][j] for tuple argnums)."""
    if value._var.ndim != 0:
        raise TypeError(at_user_line(
            f"hessian({compiled.name}): the function must return a scalar, got shape "
            f"{tuple(int(d) for d in value._var.shape)}"))
    wrt = [t for _, t in diff_inputs]
    seed = Tracer._of(trace.const(np.ones((), value.dtype)), trace)
    grads = [_grad_or_zeros(ct, t) for ct, t in zip(
        autodiff.backward(trace, [(value._var, seed)], [t._var for t in wrt]), wrt)]
    flat = ops.concatenate([ops.reshape(g, (-1,)) for g in grads]) if len(grads) > 1 \
        else ops.reshape(grads[0], (-1,))
    rows = control.jacobian_rows(trace, flat, wrt)
    blocks, start = [], 0
    for g in grads:
        size = 1
        for d in g._var.shape:
            size = size * d
        stop = start + size
        for r, t in zip(rows, wrt):
            part = r if len(grads) == 1 else r[start:stop]
            blocks.append(ops.reshape(part, tuple(g._var.shape) + tuple(t._var.shape)))
        start = stop
    return _structured_outputs(compiled, trace, blocks, aux, [len(wrt)] * len(grads))


def _structured_outputs(compiled, trace, results, aux, groups):
    """Outputs and a packer for jacobian/hessian results (one level per argnums tuple)."""
    aux_leaves, aux_def = tree.flatten(aux)
    aux_vars = [_as_tracer(trace, a, compiled.mode, compiled.name)._var for a in aux_leaves]
    outputs = [r._var for r in results] + aux_vars
    dtypes = [v.dtype for v in outputs]
    n = len(results)
    single, has_aux, nested = compiled.single, compiled.has_aux, compiled.mode == "hessian"

    def pack(out):
        out = [_numpy(x, dt) for x, dt in zip(out, dtypes)]
        res = out[:n]
        if nested:                       # H[i][j]
            width = groups[0]
            res = [tuple(res[i * width:(i + 1) * width]) for i in range(len(groups))]
            res = res[0][0] if single else tuple(res)
        else:
            res = res[0] if single else tuple(res)
        if has_aux:
            return res, tree.unflatten(aux_def, out[n:])
        return res

    return outputs, pack


# -- packers: kernel outputs -> the user's results ---------------------------------------

def _numpy(x, dtype):
    """A kernel result for the user: arrays (host or device) as they are, scalars typed."""
    if isinstance(x, np.ndarray) or _is_device_array(x):
        return x
    return dtype.type(x)


def _unflatten_grads(grad_defs, flat, single):
    out, pos = [], 0
    for td, n in grad_defs:
        part = flat[pos:pos + n]
        pos += n
        out.append(part[0] if td is None else tree.unflatten(td, part))
    return out[0] if single else tuple(out)


def _expressible(td, count):
    """Whether gradients of this structure can be built by one expression (dicts, lists,
    tuples, dataclasses and leaves, every leaf differentiable)."""
    if td.kind == "leaf":
        return True
    return (td.kind in ("dict", "list", "tuple", "dataclass") and td.num_leaves == count
            and all(_expressible(c, c.num_leaves) for c in td.children))


def _tree_code(td, items, names):
    """Source building the structure ``td`` from the item sources (consumed in order);
    dict keys are bound in ``names``."""
    if td.kind == "leaf":
        return items.pop(0)
    parts = [_tree_code(c, items, names) for c in td.children]
    if td.kind == "dict":
        keys = []
        for k in td.meta:
            keys.append(f"KEY{len(names)}")
            names[keys[-1]] = k
        return "{" + ", ".join(f"{k}: {p}" for k, p in zip(keys, parts)) + "}"
    if td.kind == "dataclass":           # its class called with the fields as keywords
        cls, fields = td.meta
        name = f"CLASS{len(names)}"
        names[name] = cls
        return f"{name}(" + ", ".join(f"{f}={p}" for f, p in zip(fields, parts)) + ")"
    if td.kind == "list":
        return "[" + ", ".join(parts) + "]"
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


def _flat_packer(mode, single, dtypes, ranks, target, grad_defs):
    """A packer written out as one expression (it runs every call): results as they
    are, 0-d ones as NumPy scalars, gradients of nested arguments (``grad_defs``) rebuilt
    as dict, list and tuple displays.

    The expression is kept (``pack.expr``, over ``out``, with the names in
    ``pack.names``) so that ``fastpath.caller`` can inline it after the kernel call.
    """
    names = {}
    items = []
    for k, (dt, rank) in enumerate(zip(dtypes, ranks)):
        items.append(f"out[{k}]" if rank else _scalar_code(f"out[{k}]", dt, names, target))
    if mode == "value_and_grad":
        value, grads = items[0], items[1:]
    else:
        value, grads = None, items
    if any(td is not None for td, _ in grad_defs):
        grads = [_tree_code(td, grads, names) if td is not None else grads.pop(0)
                 for td, _ in grad_defs]
    grads_code = grads[0] if single else "(" + ", ".join(grads) + ("," if len(grads) == 1 else "") + ")"
    body = f"({value}, {grads_code})" if value is not None else grads_code
    return _expr_packer(body, names)


def _expr_packer(body, names):
    """A packer returning the expression ``body`` over ``out`` (with ``names``)."""
    pack = generate(f"def pack(out):\n    return {body}\n", "packer", names, "pack")
    del names["pack"]
    names.pop("__builtins__", None)
    pack.expr, pack.names = body, names
    return pack


def _scalar_code(x, dtype, names, target):
    """Source turning a Numba result (a Python number for a 0-d value) into a NumPy scalar
    of ``dtype``. For floats, a product with a typed 1: NumPy keeps the typed operand's
    dtype (a Python float is weak), the value is exact (it came from that dtype), and it
    is cheaper than a call of ``np.float32(x)``. On the CUDA target a 0-d result computed
    on device arguments is a device array, and stays one."""
    dtype = np.dtype(dtype)
    if target == "cuda":
        names["numpy_result"], names[f"DTYPE_{dtype.name}"] = _numpy, dtype
        return f"numpy_result({x}, DTYPE_{dtype.name})"
    if dtype.kind == "f":
        names[f"ONE_{dtype.name}"] = dtype.type(1)
        return f"ONE_{dtype.name} * {x}"
    names[f"T_{dtype.name}"] = dtype.type
    return f"T_{dtype.name}({x})"
