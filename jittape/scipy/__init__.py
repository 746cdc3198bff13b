"""jittape's gradients for SciPy: ``objective(loss)`` gives ``scipy.optimize.minimize``
what it asks for, in float64.

```python
import scipy.optimize
res = scipy.optimize.minimize(x0=x0, method="Newton-CG", **jt.scipy.objective(loss))
```

SciPy's optimizers work in float64 and some of them fail on anything else (L-BFGS-B
stops with ``ABNORMAL`` on a float32 gradient). jittape follows TensorFlow's dtype rule,
where a Python float is float32; through ``objective`` the point SciPy passes is cast to
the kernel's dtype (float64 unless asked) and the value and gradient SciPy gets back
are always a Python float and a float64 vector, whatever ``loss`` computes in.
"""

from typing import Any, Callable, Dict, Optional

import numpy as np

from .. import tree
from ..compiler import value_and_grad
from ..errors import at_user_line
from ..transforms import hvp
from . import special, stats  # noqa: F401  (jt.scipy.special, jt.scipy.stats)

# SciPy's methods that use a Hessian-vector product (the others warn when given one)
_USES_HESSP = frozenset(["newton-cg", "trust-ncg", "trust-krylov", "trust-constr"])


def objective(loss: Callable[..., Any], like: Any = None, dtype: Any = np.float64,
              method: Optional[str] = None, hessp: Optional[bool] = None) -> Dict[str, Any]:
    """``{"fun", "jac", "hessp"}`` for ``scipy.optimize.minimize``: ``fun(x, *args)``
    returns the value and the gradient together (``jac=True``: one compiled call),
    ``hessp(x, p, *args)`` the Hessian of ``loss`` at ``x`` times ``p``
    (forward-over-reverse, ``jt.hvp``). ``args`` are SciPy's extra arguments, passed
    to ``loss`` after the parameters (run-time inputs of the compiled code).

    ``like``: the parameters' structure when ``loss`` takes a pytree (a dict, a dataclass
    of arrays...) rather than a vector: SciPy's vector is unflattened into it
    (``jt.tree.ravel(like)`` gives the matching ``x0``). ``dtype``: what the kernels
    compute in (``np.float32`` for float32 kernels); SciPy always gets float64.
    ``hessp``: include the Hessian-vector product (default: yes, unless ``method`` is
    given and does not use one, so SciPy does not warn)."""
    if not callable(loss):
        raise TypeError(at_user_line(f"objective: expected a function, got {type(loss).__name__}"))
    dtype = np.dtype(dtype)
    if dtype.kind != "f":
        raise TypeError(at_user_line(f"objective: dtype must be a floating type, got {dtype}"))
    unravel = _unraveller(like, dtype)
    vg = value_and_grad(loss)
    out: Dict[str, Any] = {"jac": True}

    def fun(x, *args):
        value, grad = vg(unravel(x), *args)
        return float(value), _flat64(grad)
    fun.__name__ = f"value_and_grad_{getattr(loss, '__name__', 'loss')}"
    out["fun"] = fun

    if hessp is None:
        hessp = method is None or method.lower() in _USES_HESSP
    if hessp:
        product = hvp(loss)

        def hessp_fn(x, p, *args):
            return _flat64(product(unravel(x), *args, unravel(p)))
        hessp_fn.__name__ = f"hvp_{getattr(loss, '__name__', 'loss')}"
        out["hessp"] = hessp_fn
    return out


def _flat64(x):
    leaves = tree.leaves(x)
    if len(leaves) == 1:
        return np.asarray(leaves[0], np.float64).reshape(-1)
    return np.concatenate([np.asarray(a, np.float64).reshape(-1) for a in leaves])


def _unraveller(like, dtype):
    """SciPy's 1-D float64 vector as the parameters ``loss`` takes, in ``dtype``."""
    if like is None:
        return lambda x: np.asarray(x, dtype)
    leaves, treedef = tree.flatten(like)
    shapes = [np.shape(a) for a in leaves]
    sizes = [int(np.prod(s, dtype=np.int64)) for s in shapes]

    def cast(x):
        # straight into ``dtype``: through the leaves' own dtypes, a float32 leaf would
        # round SciPy's point and an integer one truncate it
        x = np.asarray(x, dtype)
        if x.shape != (sum(sizes),):
            raise ValueError(at_user_line(
                f"objective: SciPy's vector has shape {x.shape}; `like` holds {sum(sizes)} "
                "values"))
        parts, start = [], 0
        for shape, size in zip(shapes, sizes):
            parts.append(x[start:start + size].reshape(shape))
            start += size
        return tree.unflatten(treedef, parts)
    return cast
