"""Runtime helpers that generated kernels call through a symbol, not compile into themselves.

Numba compiles a call from one jitted function to another by linking the callee's LLVM
IR into the caller's module, and the caller's compile then optimizes the callee and
makes machine code of it once more. For the packed matrix product (``gemm``: the
driver, its parallel twin and Numba's threading around it) that made the cold compile
of every kernel that multiplies matrices compile the product again, for code that never
changes from kernel to kernel.

``external(dispatcher, name, signatures, key)`` makes a helper that generated code calls
like the dispatcher. In compiled code, a call whose argument types convert to one of the
fixed ``signatures`` (arrays of any layout become layout ``A``) is a call of that
signature's machine code through a process-wide symbol (``jittape.extern.<name>.<key>``):
the helper is compiled once (kept in Numba's disk cache with the installation, like the
other runtime helpers), and a kernel's compile only declares the symbol. Other argument
types call the dispatcher as Numba always does. From Python, a call is the dispatcher's.

The symbol must be defined in a process before machine code that refers to it is
loaded. A compile defines it (the call's lowering links the helper); a kernel loaded
from the disk cache compiles nothing, so its module says what it calls, at import:
``link(matmul2d, "float32")`` (lowerings ask for it with ``Context.link``). The
symbols' names do not depend on the helper's code: a kernel kept on disk calls the
helper of the installation it runs in, through the same fixed signature.
"""

import inspect

import numba
from llvmlite import binding
from numba import types
from numba.core import cgutils
from numba.core.compiler_lock import global_compiler_lock
from numba.extending import lower_builtin, type_callable


class External:
    """A helper's fixed signatures and the symbols their machine code is known by."""

    def __init__(self, dispatcher, name, signatures, key):
        self.dispatcher = dispatcher
        self.name = name
        self.signatures = dict(signatures)     # key -> numba signature (argument types)
        self.key = key                         # argument types -> key, or None
        self._linked = set()                   # keys whose symbol this process defined

    def symbol(self, key):
        return f"jittape.extern.{self.name}.{key}"

    def link(self, key):
        """Compile (or load from Numba's cache) the machine code for ``key`` and define
        its symbol in this process; the symbol's name."""
        symbol = self.symbol(key)
        if key in self._linked:
            return symbol
        with global_compiler_lock:             # (a kernel's compile may call this)
            if key not in self._linked:
                sig = self.signatures[key]
                # helpers may hold parallel loops: Numba's thread pool up before their
                # machine code is loaded from its cache (else a crash, a jump to an
                # address the pool's start would have defined)
                numba.get_num_threads()
                from .build import _lean_cache_loads
                _lean_cache_loads(self.dispatcher)
                self.dispatcher.compile(sig)
                cres = self.dispatcher.overloads[tuple(sig)]
                address = cres.library.get_pointer_to_function(cres.fndesc.llvm_func_name)
                binding.add_symbol(symbol, address)
                self._linked.add(key)
        return symbol

    def match(self, argtypes):
        """The key of the signature that ``argtypes`` convert to, or None."""
        key = self.key(*argtypes)
        sig = self.signatures.get(key)
        if sig is None or len(sig) != len(argtypes):
            return None
        for given, wanted in zip(argtypes, sig):
            if isinstance(wanted, types.Array):
                if not (isinstance(given, types.Array) and given.dtype == wanted.dtype
                        and given.ndim == wanted.ndim):
                    return None
            elif types.unliteral(given) != wanted:
                return None
        return key

    def return_type(self, key):
        self.link(key)
        return self.dispatcher.overloads[tuple(self.signatures[key])].signature.return_type


def external(dispatcher, name, signatures, key):
    """A function named ``name`` calling ``dispatcher``; compiled calls that match
    ``signatures`` (a dict key -> tuple of Numba types; ``key(*argument types)`` picks
    one) go through the symbol of that signature's machine code, others call the
    dispatcher (see the module's docstring). Typed and lowered directly
    (``type_callable``, ``lower_builtin``): an ``overload`` would compile a function
    for each layout of the arguments."""
    if not hasattr(dispatcher, "py_func"):     # NUMBA_DISABLE_JIT: a plain function
        return dispatcher
    ext = External(dispatcher, name, signatures, key)

    def helper(*args):
        numba.get_num_threads()            # see External.link: the pool before the code
        return dispatcher(*args)

    helper.__name__ = helper.__qualname__ = name
    helper.__doc__ = dispatcher.py_func.__doc__
    helper.__module__ = dispatcher.py_func.__module__
    helper.external = ext

    def resolve(context, argtypes):
        key = ext.match(argtypes)
        if key is not None:
            return ext.return_type(key)
        return types.Dispatcher(dispatcher).get_call_type(context, argtypes, {}).return_type

    # Numba binds a call to the typer's parameters, which may not be *args: the
    # dispatcher's, every one of them given in compiled code (no defaults there)
    names = ", ".join(inspect.signature(dispatcher.py_func).parameters)
    scope = {"resolve": resolve}
    exec(f"def typer(context):\n"
         f"    def call({names}):\n"
         f"        return resolve(context, ({names},))\n"
         f"    return call\n", scope)
    type_callable(helper)(scope["typer"])
    lower_builtin(helper, *[types.Any] * len(names.split(", ")))(_lowering(ext, dispatcher))
    return helper


def _lowering(ext, dispatcher):
    def lower(context, builder, signature, args):
        key = ext.match(signature.args)
        if key is None:                                 # as Numba calls a dispatcher
            fnty = types.Dispatcher(dispatcher)
            sig = fnty.get_call_type(context.typing_context, signature.args, {})
            return context.get_function(fnty, sig)(builder, args)
        wanted = tuple(ext.signatures[key])
        restype = signature.return_type
        values = [context.cast(builder, v, given, want)
                  for v, given, want in zip(args, signature.args, wanted)]
        fnty = context.call_conv.get_function_type(restype, wanted)
        fn = cgutils.get_or_insert_function(builder.module, fnty, ext.link(key))
        status, result = context.call_conv.call_function(builder, fn, restype, wanted, values)
        with cgutils.if_unlikely(builder, status.is_error):
            context.call_conv.return_status_propagate(builder, status)
        return result

    return lower


def link(helper, key):
    """Define the symbol of ``helper``'s machine code for ``key`` in this process
    (generated modules call it at import, for what their kernel calls)."""
    ext = getattr(helper, "external", None)
    return ext.link(key) if ext is not None else None
