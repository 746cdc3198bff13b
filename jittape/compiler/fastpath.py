"""The fast path: generated Python that calls a compiled kernel in one frame.

A compiled function's second call with NumPy arrays and scalars runs no jittape Python
but ``dispatch`` (``Compiled.__call__``) and the generated caller of its signature
(``caller``): the caller checks the argument classes and structure and the captured
values, calls the kernel, checks the branch guards, writes assigned variables back and
packs the results. The newest signature's caller is the class's ``__call__`` itself,
so a call costs one Python frame around the native kernel.

Every piece of Python that jittape generates at run time (callers, result packers, the
kernel with its constants bound, ``lower().python``) is compiled by ``generate``, which
keeps its source in ``linecache`` under a pseudo-filename named by its content
(``<jittape caller of grad(loss) 1f0c...>``): a traceback through it shows the line, and
``lower(*args).caller`` shows the whole caller. The name starts with ``<jittape`` so
that error messages pass over these frames to the user's line.
"""

import hashlib
import linecache

import numba
import numpy as np

from .. import tree
from ..tensor import Variable
from ..trace import RandomDraw

_ndarray = np.ndarray
_FAST_SCALARS = frozenset([np.float32, np.float64, np.float16, np.int8, np.int16, np.int32,
                           np.int64, np.uint8, np.bool_, float])


def generate(source, what, namespace, name):
    """Compile generated ``source`` in ``namespace`` and return what it defines as
    ``name``. The source is kept in ``linecache`` (memory only) under
    ``<jittape {what} {digest of the source}>``: tracebacks show its lines, and equal
    sources share one entry, so making the same code again keeps no more."""
    digest = hashlib.blake2b(source.encode(), digest_size=8).hexdigest()
    filename = f"<jittape {what} {digest}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), namespace)
    return namespace[name]


def dispatch(self, *args):
    """``Compiled.__call__``: the generated caller of the signature last used with these
    argument classes, else the full path (``Compiled._call``)."""
    n = len(args)
    if n == 2:
        classes = (args[0].__class__, args[1].__class__)
    elif n == 3:
        classes = (args[0].__class__, args[1].__class__, args[2].__class__)
    else:
        classes = tuple(map(type, args))
    caller = self._fast.get(classes)
    if caller is not None:
        return caller(self, *args)
    return self._call(args)


def _classes(args):
    """The fast path's key (as ``dispatch`` spells it out for two and three arguments)."""
    return tuple(map(type, args)) if len(args) not in (2, 3) else tuple(a.__class__ for a in args)


def _fast_leaf(a):
    """Whether the fast path takes ``a`` as a kernel argument by its class alone (a
    Python float is a float64 input)."""
    return a.__class__ in _FAST_SCALARS or (a.__class__ is _ndarray and a.ndim > 0)


def _fast_tree(a):
    """Whether ``a`` is a dict, list, tuple or dataclass (nested) of such leaves only."""
    if a.__class__ is dict:
        return bool(a) and all(_fast_leaf(v) or _fast_tree(v) for v in a.values())
    if a.__class__ in (list, tuple):
        return bool(a) and all(_fast_leaf(v) or _fast_tree(v) for v in a)
    fields = tree.dataclass_fields(a.__class__)
    return bool(fields) and all(_fast_leaf(v) or _fast_tree(v)
                                for v in [getattr(a, name) for name in fields])


def _access(source, value, names, guard, leaves):
    """Guard conditions and leaf expressions reading ``value`` (found at ``source`` in
    the caller's arguments) as the fast path does: the structure checked on the way, the
    leaves in ``tree.flatten``'s order."""
    cls = value.__class__
    if cls is dict:
        keys = sorted(value, key=tree._sort_key)
        names[f"K{len(names)}"] = frozenset(keys)
        guard.append(f"{source}.__class__ is dict and {source}.keys() == K{len(names) - 1}")
        for k in keys:                    # keys by name: any hashable, whatever its repr
            key = f"K{len(names)}"
            names[key] = k
            _access(f"{source}[{key}]", value[k], names, guard, leaves)
    elif cls in (list, tuple):
        guard.append(f"{source}.__class__ is {cls.__name__} and len({source}) == {len(value)}")
        for j, item in enumerate(value):
            _access(f"{source}[{j}]", item, names, guard, leaves)
    elif tree.dataclass_fields(cls):      # its fields by name, in tree.flatten's order
        name = f"C{len(names)}"
        names[name] = cls
        guard.append(f"{source}.__class__ is {name}")
        for field in tree.dataclass_fields(cls):
            _access(f"{source}.{field}", getattr(value, field), names, guard, leaves)
    else:
        name = f"C{len(names)}"
        names[name] = cls
        guard.append(f"{source}.__class__ is {name}")
        if cls is _ndarray and numba.config.DISABLE_JIT:
            # (Numba checks a kernel's dtypes and ranks; run as Python, nothing would:
            # a complex array reached the float64 variant's kernel)
            names[f"D{name}"] = value.dtype
            guard.append(f"{source}.dtype == D{name} and {source}.ndim == {value.ndim}")
        leaves.append(source)


class _Missing:
    def __repr__(self):
        return "<no argument>"


_MISSING = _Missing()


def caller(entry, args, title):
    """The generated fast path of one signature whose arguments are all NumPy arrays and
    scalars: a ``__call__`` that checks the argument classes, calls the kernel on them,
    the captured variables' values and the entry's array constants, checks the guards,
    writes assigned variables back and packs the results, in one Python frame. Its
    source is its ``source`` attribute; ``title`` names it (``grad(loss)``).

    Numba checks dtypes and ranks (it compiles nothing new for a kernel: a mismatch is a
    TypeError; under NUMBA_DISABLE_JIT, where the kernel is Python, the guard checks them) and the kernel checks the rest of its signature (SignatureMismatch) and
    its sizes (SizeMismatch); any of them, or a guard that does not hold, sends the call
    down the full path (``_call``), which raises what applies. So does any other error
    of the kernel (an index out of range, a NaN under ``check_numerics``): it raises its
    message's number, and the full path names the op and the line
    (``errors.located``). Other argument classes go to ``dispatch``, which finds their
    own caller.
    """
    n = len(args)
    names = [f"a{k}" for k in range(n)]
    consts = [f"c{k}" for k in range(len(entry.consts))]
    namespace = dict(zip(consts, entry.consts), kernel=entry.kernel, pack=entry.pack,
                     generic=dispatch)
    namespace.update((f"V{k}", v) for k, v in enumerate(entry.captures))
    guard, leaves, checks = [], [], {}
    for k, a in enumerate(args):
        _access(f"a{k}", a, checks, guard, leaves)
    namespace.update(checks)
    captured, held = _implicit_code(entry, namespace)
    guard += held
    inputs = leaves + captured
    call = "kernel({})"
    if entry.graph.packing is not None:        # inputs and outputs the kernel stacks
        inputs = entry.graph.packing.code(inputs, namespace)
        namespace["unpack"] = entry.graph.packing.unpack
        call = "unpack(kernel({}))"
    expr = getattr(entry.pack, "expr", None)
    if expr is None:
        expr = "pack(out)"
    else:
        namespace.update(entry.pack.names)
    # Positional parameters with a default that fails the guard: an exact-arity call
    # builds no argument tuple.
    params = "".join(f"{a}=_MISSING, " for a in names)
    given = f"[a for a in ({', '.join(names)}{',' if n == 1 else ''}) if a is not _MISSING] + list(rest)"
    namespace["_MISSING"] = _MISSING
    tuple_args = f"({', '.join(names)}{',' if n == 1 else ''})"
    lines = [f"def __call__(self, {params}*rest):",
             f"    if {' and '.join(guard + ['not rest'])}:",
             "        try:",
             f"            out = {call.format(', '.join(inputs + consts))}",
             "        except (TypeError, ValueError, IndexError, FloatingPointError):",
             f"            return self._call({tuple_args})"]
    if entry.guards:
        held = " and ".join(f"out[{k}]" if value else f"not out[{k}]"
                            for k, value in entry.guards)
        lines += [f"        if not ({held}):      # another branch: another variant",
                  f"            return self._call({tuple_args})"]
    for k, variable in entry.writes:            # captured variables only
        name = f"V{[c is variable for c in entry.captures].index(True)}"   # (arguments are
        # not NumPy arrays: a call with a Variable argument has no fast path)
        if variable.ndim:
            lines.append(f"        {name}._value = out[{k}]")
        else:
            namespace[f"T{k}"] = variable.dtype.type
            lines.append(f"        {name}._value = T{k}(out[{k}])")
    top = " and ".join([f"a{k}.__class__ is A{k}" for k in range(n)] + ["True"])
    namespace.update((f"A{k}", a.__class__) for k, a in enumerate(args))
    lines += ["        self._hits += 1",
              f"        return {expr}",
              f"    if {top} and not rest:        # the same classes, another structure inside",
              f"        return self._call({tuple_args})",
              f"    return generic(self, *({given}))"]
    source = "\n".join(lines) + "\n"
    call = generate(source, f"caller of {title}", namespace, "__call__")
    call.source = source
    return call


def _implicit_code(entry, namespace):
    """For ``caller``: the kernel arguments that read the values from outside the
    arguments (captured variables, arrays and floats, random draws) and the conditions
    the captured values must meet (``capture._checks_hold``, spelled out: a load, a class
    test, a set lookup or an identity test each). Names go into ``namespace``."""
    conditions, reads = [], {}
    for j, (c, how, what) in enumerate(entry.checks):
        namespace[f"Q{j}"] = c.where
        read = f"Q{j}.cell_contents" if c.key is None else f"Q{j}[{c.key!r}]"
        if how == "array":                 # its dtype: Numba checks it
            # the array it was traced with (the entry held it as a constant before)
            # passes on one identity test; another one of an accepted shape on more
            namespace[f"QK{j}"], namespace["ndarray"] = c.value, _ndarray
            namespace[f"QS{j}"] = what[1]       # (a set that grows: see _merge_checks)
            conditions.append(f"((q{j} := {read}) is QK{j} or (q{j}.__class__ is ndarray "
                              f"and q{j}.shape in QS{j}))")
            reads[id(c)] = f"q{j}" + ("" if c.value.ndim else "[()]")
        elif how == "same":
            namespace[f"QV{j}"] = what
            conditions.append(f"{read} is QV{j}")
        else:
            if how == "value":                # the traced object: one identity test
                namespace[f"QK{j}"], namespace[f"QC{j}"] = c.value, what[0]
                namespace[f"QS{j}"] = what[1]       # (a set that grows: see _merge_checks)
                conditions.append(f"((q{j} := {read}) is QK{j} or (q{j}.__class__ is QC{j} "
                                  f"and q{j} in QS{j}))")
            else:
                namespace[f"QC{j}"] = what
                conditions.append(f"(q{j} := {read}).__class__ is QC{j}")
            reads[id(c)] = f"q{j}"
    exprs = []
    for src in entry.implicit:
        if isinstance(src, Variable):
            exprs.append(f"V{[v is src for v in entry.captures].index(True)}._value")
        elif isinstance(src, RandomDraw):
            namespace[f"R{len(exprs)}"] = src.read
            exprs.append(f"R{len(exprs)}()")
        else:
            exprs.append(reads[id(src)])
    return exprs, conditions
