"""The public names of the ops, written from the registry: ``python -m jittape.ops.names``.

Writes ``jittape/ops/api.py`` (the ``jt.*`` ops), ``jittape/ops/numpy_api.py`` (the
ops under NumPy's names, for ``jittape.numpy``) and the op list of ``docs/api.md``, as
static files that type checkers and editors read. ``tests/test_names.py`` fails when
they differ from what the registry gives, so a new op is exported by running this.

A name is public when it is, in one of the family modules:
- a primitive named as the module's attribute (``exp = elementwise("exp", ...)``), or
- a function that NumPy dispatches to, a composite, or one marked ``core.public``
  (aliases such as ``reduce_sum = sum`` included).
Under NumPy's names are the NumPy functions that dispatch to an op, and the functions
marked ``public(numpy=True)``.
"""

import argparse
import inspect
import importlib
import pathlib
import sys
import textwrap
import warnings

import numpy as np

from . import core
from ..tensor import FUNCTION_TABLE, UFUNC_TABLE

FAMILIES = {                 # module -> its heading in the docs (modules by their full
    importlib.import_module(f"{__package__}.{name}"): heading       # names: the package
    for name, heading in (("elementwise", "elementwise"), ("reduce", "reductions"),   # has
                          ("linalg", "linear algebra"), ("shape", "shape"),
                          ("indexing", "indexing and joining"),
                          ("lapack", "linear algebra (np.linalg)"),
                          ("special", "scipy.special"), ("sorting", "sorting"),
                          ("fourier", "discrete Fourier transforms (np.fft)"),
                          ("nn", "nn"), ("creation", "creation"))}    # a function `shape`
ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS_BEGIN = "<!-- op list: written by python -m jittape.ops.names -->"
DOCS_END = "<!-- end of the op list -->"
HEADER = '''"""{what}: written by ``python -m jittape.ops.names`` from the registry.

Do not edit: declare an op in its family module (``jittape/ops/``) and run that command.
"""

'''


def _dispatched():
    return {id(op) for op in (*UFUNC_TABLE.values(), *FUNCTION_TABLE.values())}


def _is_public(module, attr, value, dispatched, composites):
    if attr.startswith("_"):
        return False
    if isinstance(value, core.Primitive):
        return value.public and value.name == attr
    if not callable(value) or getattr(value, "__module__", None) != module.__name__:
        return False
    marked = getattr(value, "jt_public", None)
    if marked is not None:
        return marked
    return id(value) in dispatched or id(value) in composites


def jt_names():
    """{family module: sorted public attribute names}."""
    dispatched = _dispatched()
    composites = {id(c.fn) for c in core.COMPOSITES.values()}
    return {module: sorted(attr for attr, value in vars(module).items()
                           if _is_public(module, attr, value, dispatched, composites))
            for module in FAMILIES}


def numpy_names():
    """{NumPy name: (family module, attribute)} of the ops under NumPy's names."""
    where = {}
    for module in FAMILIES:
        for attr, value in vars(module).items():
            if not attr.startswith("_"):
                where.setdefault(id(value), (module, attr))
    found = {}
    for name in dir(np):
        if name.startswith("_"):
            continue
        fn = getattr(np, name)
        try:
            op = UFUNC_TABLE.get(fn) or FUNCTION_TABLE.get(fn)
        except TypeError:               # unhashable NumPy attributes
            continue
        if op is not None and id(op) in where:
            found[name] = where[id(op)]
    for module in FAMILIES:
        for attr, value in vars(module).items():
            if getattr(value, "numpy_public", False) and hasattr(np, attr):
                found.setdefault(attr, (module, attr))
    return dict(sorted(found.items()))


def jt_namespace():
    """{name: op} as ``api.py`` exports them."""
    return {a: getattr(m, a) for m, attrs in jt_names().items() for a in attrs}


def numpy_namespace():
    """{name: op} as ``numpy_api.py`` exports them."""
    return {name: getattr(m, a) for name, (m, a) in numpy_names().items()}


def stale(filename, error, namespace):
    """A written namespace that no longer imports (an op it names is gone): warn, and
    give the registry's names so that the package still loads and this module runs."""
    warnings.warn(f"jittape/ops/{filename} is out of date with the registry ({error}); "
                  "run `python -m jittape.ops.names`", stacklevel=3)
    return namespace


def _imports(pairs):
    """``from .module import (name as alias, ...)`` lines for (module, attr, alias)."""
    lines = []
    by_module = {}
    for module, attr, alias in pairs:
        by_module.setdefault(module.__name__.rsplit(".", 1)[1], []).append(
            attr if attr == alias else f"{attr} as {alias}")
    for module in sorted(by_module):
        lines.append(f"from .{module} import (  # noqa: F401")
        lines.extend(f"    {item}," for item in sorted(by_module[module]))
        lines.append(")")
    return lines


def _all(names):
    return ["", "__all__ = ["] + [f"    {n!r}," for n in sorted(names)] + ["]", ""]


def api_source():
    pairs = [(m, a, a) for m, attrs in jt_names().items() for a in attrs]
    return HEADER.format(what="The ops of ``jittape``") + "\n".join(
        _imports(pairs) + _all(a for _, a, _ in pairs))


# ops whose result is not always one tensor: a pytree given back, a tuple of indices
_ANY_RESULT = frozenset({"stop_gradient", "where"})   # (where(c) alone: a tuple)


def _stub_parameters(fn):
    """The parameters of ``fn`` for a stub: each ``Any``, defaults as ``...``."""
    items, keyword_only = [], False
    for p in inspect.signature(fn).parameters.values():
        if p.kind is p.VAR_POSITIONAL:
            items.append(f"*{p.name}: Any")
            keyword_only = True
        elif p.kind is p.VAR_KEYWORD:
            items.append(f"**{p.name}: Any")
        else:
            if p.kind is p.KEYWORD_ONLY and not keyword_only:
                items.append("*")
                keyword_only = True
            items.append(f"{p.name}: Any" + (" = ..." if p.default is not p.empty else ""))
    return ", ".join(items)


def api_stub():
    """``api.pyi``: the ops' signatures for type checkers (arguments of any type; a
    tensor back)."""
    lines = ['"""Types of the ops of ``jittape``: written by ``python -m jittape.ops.names`` from',
             "the registry. Do not edit.", '"""', "", "from typing import Any", "",
             "from ..tensor import Tensor", ""]
    for module, attrs in jt_names().items():
        for a in attrs:
            result = "Any" if a in _ANY_RESULT else "Tensor"
            lines.append(f"def {a}({_stub_parameters(getattr(module, a))}) -> {result}: ...")
    names = [a for attrs in jt_names().values() for a in attrs]
    return "\n".join(lines + _all(names))


def numpy_source():
    pairs = [(m, a, name) for name, (m, a) in numpy_names().items()]
    return HEADER.format(what="The ops under NumPy's names, for ``jittape.numpy``") + "\n".join(
        _imports(pairs) + _all(name for _, _, name in pairs))


def docs_block():
    lines = [DOCS_BEGIN]
    for module, attrs in jt_names().items():
        lines.extend(textwrap.wrap(f"- {FAMILIES[module]}: `{' '.join(attrs)}`", width=88,
                                   subsequent_indent="  ", break_on_hyphens=False))
    lines.append(DOCS_END)
    return "\n".join(lines)


def docs_text(text):
    begin, end = text.index(DOCS_BEGIN), text.index(DOCS_END) + len(DOCS_END)
    return text[:begin] + docs_block() + text[end:]


SUPPORT_HEADER = """# NumPy and SciPy on jittape tensors

Written by `python -m jittape.ops.names` from the op registry (do not edit). Each row is
a NumPy or SciPy function that, called on jittape tensors, reaches a jittape op: it is
recorded by tapes (eager) and traced into compiled functions (`jt.grad`, `jt.function`,
...), and `jt.vmap` batches it. *Gradient*: whether it passes gradients (no: an integer
result, a comparison, a rounding). *CUDA*: whether `target="cuda"` compiles it (no: it
raises `UnsupportedError` naming the op). A function not listed raises
`UnsupportedError` naming itself. See [api.md](api.md) for each op's notes.

| function | jittape op | eager | compiled | gradient | CUDA |
|---|---|---|---|---|---|
"""


def _record_of(op):
    """The registry record (primitive or composite) a dispatched function stands for."""
    if isinstance(op, core.Primitive):
        return op
    for c in core.COMPOSITES.values():
        if c.fn is op:
            return c
    name = getattr(op, "__name__", "")
    return core.REGISTRY.get(name) or core.COMPOSITES.get(name)


def _passes_gradients(record):
    if isinstance(record, core.Primitive):
        return record.differentiable
    for example in record.examples[:1]:          # a composite: its result's dtype
        args = [np.full(spec, 0.5) if isinstance(spec, tuple) else
                getattr(spec, "value", spec) for spec in example.inputs]
        try:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out = record.call(*args, **example.params)
        except Exception:                          # (an example that needs its domain)
            return True
        leaves = out if isinstance(out, tuple) else (out,)
        return any(np.dtype(getattr(v, "dtype", np.float64)).kind in "fc" for v in leaves)
    return True


def _on_cuda(record):
    if isinstance(record, core.Primitive):
        if "cuda" not in record.backends:
            return "no"
        return getattr(record, "cuda_note", "yes")
    if getattr(record.fn, "backends", None) is not None:     # a composite that says (np.fft)
        return "yes" if "cuda" in record.fn.backends else "no"
    return "no" if record.fn.__module__.endswith(".lapack") else "yes"


def support_table():
    """The text of ``docs/numpy.md``: every NumPy/SciPy function dispatching to an op."""
    from ..tensor import _qualified, _ufunc_home
    jt_name = {}
    for a, v in sorted(jt_namespace().items(), key=lambda item: (len(item[0]), item[0])):
        jt_name.setdefault(id(v), a)         # (the shortest of an op's names: max, not reduce_max)
    rows = {}
    for table, home in ((UFUNC_TABLE, _ufunc_home), (FUNCTION_TABLE, None)):
        for fn, op in table.items():
            name = f"{home(fn)}.{fn.__name__}" if home else _qualified(fn)
            name = name.replace("numpy._core.", "numpy.").replace("scipy.special._", "scipy.special.")
            record = _record_of(op)
            if record is None:
                continue
            ours = jt_name.get(id(op)) or jt_name.get(id(record)) or record.name
            rows[name] = (f"`jt.{ours}`" if hasattr(sys.modules["jittape"], ours)
                          else f"`{record.name}`",
                          "yes" if _passes_gradients(record) else "no", _on_cuda(record))
    lines = [SUPPORT_HEADER.rstrip("\n")]
    for name in sorted(rows):
        op, grad, cuda = rows[name]
        lines.append(f"| `{name}` | {op} | yes | yes | {grad} | {cuda} |")
    return "\n".join(lines) + "\n"


def outputs():
    """{path: the text the registry gives}."""
    docs = ROOT.parent / "docs" / "api.md"
    found = {ROOT / "ops" / "api.py": api_source(),
             ROOT / "ops" / "api.pyi": api_stub(),
             ROOT / "ops" / "numpy_api.py": numpy_source()}
    if docs.exists():                  # an installed package has no docs
        found[docs] = docs_text(docs.read_text())
        found[docs.parent / "numpy.md"] = support_table()
    return found


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m jittape.ops.names", description=__doc__)
    parser.add_argument("--check", action="store_true",
                        help="only say which files differ (exit status 1 if any)")
    args = parser.parse_args(argv)
    stale = [path for path, text in outputs().items()
             if not path.exists() or path.read_text() != text]
    if args.check:
        for path in stale:
            print(f"{path} differs from the registry")
        return 1 if stale else 0
    for path in stale:
        path.write_text(outputs()[path])
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
