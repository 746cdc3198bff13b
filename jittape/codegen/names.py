"""Every naming rule of generated code, in one place.

Inputs are ``a0, a1, ...`` (the flattened arguments in order), their sizes
``s<input>_<axis>`` (read once, on entry: ``input_sizes``), constants ``c<id>``, graph
values ``v<id>`` (the graph's ``%<id>``), loop indices ``i0, i1, ...``, loop sizes
``n<group>_<axis>`` and scalars live in one loop iteration ``t<id>``. Once a module is
generated, ``readable`` gives the inputs and their sizes the user's names (``x``,
``params_w``, ``x_n``), with a trailing ``_`` where a name is the code's own.
"""

import keyword
import re

import numpy as np

from ..ir import Dim, render_expr


def input_name(k):
    return f"a{k}"


def input_size(k, axis):
    return f"s{k}_{axis}"


def input_sizes(graph):
    """Lines reading every array input's sizes into ``input_size`` names (each
    ``a.shape[k]`` in a kernel costs Numba compile time; an unpacking of the shape
    once per input, less)."""
    lines = []
    for k, v in enumerate(graph.inputs):
        if v.ndim:
            targets = ", ".join(input_size(k, a) for a in range(v.ndim))
            lines.append(f"{targets}{',' if v.ndim == 1 else ''} = {input_name(k)}.shape")
    return lines


def const_name(var):
    return f"c{var.id}"


def value_name(var):
    return f"v{var.id}"


def temp_name(var):
    return f"t{var.id}"


def index_name(axis):
    return f"i{axis}"


def size_name(group, axis):
    return f"n{group}_{axis}"


def size_code(dim):
    """Python source computing a size (an int or an ir.Dim) from the inputs' sizes."""
    return expr_code(dim.expr if hasattr(dim, "expr") else int(dim))


def expr_code(expr):
    """Python source computing a size expression (``ir.Dim.expr``, or an int)."""
    return render_expr(expr, input_name, input_size)


def shape_code(shape):
    items = [size_code(d) for d in shape]
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


def dtype_code(dtype):
    return f"np.{np.dtype(dtype).name}"


def helper_suffix(dtype):
    return "f32" if np.dtype(dtype) in (np.float16, np.float32) else "f64"


def literal_code(value, dtype):
    """A Python scalar as a typed constant of ``dtype`` (float32 code stays float32)."""
    dtype = np.dtype(dtype)
    if hasattr(value, "expr"):                       # a size known at run time
        return f"{dtype_code(dtype)}({size_code(value)})"
    if dtype == np.bool_:
        return "True" if value else "False"
    if dtype.kind == "f":
        v = float(value)
        text = "np.nan" if v != v else ("np.inf" if v == np.inf else ("-np.inf" if v == -np.inf
                                                                          else repr(v)))
        return f"{dtype_code(dtype)}({text})"
    if dtype.kind in "iu":
        return f"{dtype_code(dtype)}({int(value)})"
    if dtype.kind == "c":
        # complex(re, im) of two float literals: a repr such as (nan+1j) is no Python
        v = complex(value)
        parts = ", ".join(literal_code(p, np.float64) for p in (v.real, v.imag))
        return f"{dtype_code(dtype)}(complex({parts}))"
    return repr(value)


# a generated module's strings and comments (left as they are), and its identifiers
_TOKENS = re.compile(
    r'("""[\s\S]*?"""' r"|'''[\s\S]*?'''"                # docstrings
    r"""|'[^'\\\n]*(?:\\.[^'\\\n]*)*'"""                # strings
    r'''|"[^"\\\n]*(?:\\.[^"\\\n]*)*"'''
    r"|#[^\n]*)"                                        # comments
    r"|([^\W\d]\w*)")                                   # identifiers


def readable(source, graph):
    """``source`` (a generated module) with the placeholder names of ``graph``'s named
    inputs replaced: ``a<k>`` by the input's name (``x``, ``params_w``) and its sizes
    ``s<k>_<axis>`` by the input's name and the size's symbol in the graph text (``x_n``
    where the legend says ``n = x.shape[0]``; a size-1 or fixed axis by its number,
    ``b_0``). A name the module uses for something else (a temporary ``v12``, ``np``,
    ``range``) gets a trailing ``_`` until it is free, so the user's names never clash
    with the code's. Strings and comments are left as they are."""
    wanted = {}
    symbol = graph.sizes.symbol
    for k, v in enumerate(graph.inputs):
        if not v.name:
            continue
        wanted[input_name(k)] = v.name
        for axis, d in enumerate(v.shape):
            sym = symbol.get(("in", k, axis)) if isinstance(d, Dim) else None
            wanted[input_size(k, axis)] = f"{v.name}_{sym or axis}"
    if not wanted:
        return source
    taken = {name for _, name in _TOKENS.findall(source)}
    taken = (taken - wanted.keys()) | set(keyword.kwlist)
    rename = {}
    for old, new in wanted.items():
        while new in taken:
            new += "_"
        taken.add(new)
        rename[old] = new

    def sub(m):
        name = m.group(2)
        return m.group(0) if name is None else rename.get(name, name)
    return _TOKENS.sub(sub, source)


def code_only(source):
    """``source`` (a generated module) without its comments and blank lines: the code
    Numba compiles and the disk cache keys, free of the user's lines and names (the
    strings left are the code's own)."""
    def sub(m):
        text = m.group(1)
        return "" if text is not None and text.startswith("#") else m.group(0)
    lines = (line.rstrip() for line in _TOKENS.sub(sub, source).splitlines())
    return "\n".join(line for line in lines if line) + "\n"
