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
``link(matmul2d, "float32")`` (lowerings ask for it with ``Context.link``), and the
symbol is defined before the module's machine code loads or is handed to the user's
code (``link_module``). The
symbols' names do not depend on the helper's code: a kernel kept on disk calls the
helper of the installation it runs in, through the same fixed signature.
"""

import ctypes
import inspect
import os
import sys
import threading
import time

import numba
from llvmlite import binding
from numba import types
from numba.core import cgutils
from numba.core.compiler_lock import global_compiler_lock
from numba.extending import lower_builtin, type_callable


# {(label, key): seconds} that linking each helper took in this process (a compile, or a
# load from the cache): what a first run cost (the demo says it)
TIMES = {}


class External:
    """A helper's fixed signatures and the symbols their machine code is known by."""

    def __init__(self, dispatcher, name, signatures, key, requires=(), label=None):
        self.dispatcher = dispatcher
        self.requires = requires               # helpers its own code calls by symbol
        self.name = name
        self.label = label or name             # what a long compile says it compiles
        self.signatures = dict(signatures)     # key -> numba signature (argument types)
        self.key = key                         # argument types -> key, or None
        self._linked = set()                   # keys whose symbol this process defined

    def symbol(self, key):
        return f"jittape.extern.{self.name}.{key}"

    def link(self, key, announce=None):
        """Compile (or load from Numba's cache) the machine code for ``key`` and define
        its symbol in this process; the symbol's name. A compile that takes more than
        a second on the main thread says so on stderr (``Progress``; ``announce``: say
        it at once)."""
        symbol = self.symbol(key)
        if key in self._linked:
            return symbol
        with global_compiler_lock:             # (a kernel's compile may call this)
            if key not in self._linked:
                start = time.perf_counter()
                with Progress.of(f"{self.label} for {key}", 1 + len(self.requires),
                                 announce) as progress:
                    for helper in self.requires:   # defined before code that calls them
                        helper.external.link(key)
                        progress.step()
                    self._define(key, symbol)
                    progress.step()
                if isinstance(progress, Progress):    # (the outermost: the whole cost)
                    TIMES[(self.label, key)] = time.perf_counter() - start
        return symbol

    def _define(self, key, symbol):
        sig = self.signatures[key]
        # helpers may hold parallel loops: Numba's thread pool up before their machine
        # code is loaded from its cache (else a crash, a jump to an address the pool's
        # start would have defined)
        numba.get_num_threads()
        _lean_cache_loads(self.dispatcher)
        self.dispatcher.compile(sig)
        cres = self.dispatcher.overloads[tuple(sig)]
        address = cres.library.get_pointer_to_function(cres.fndesc.llvm_func_name)
        binding.add_symbol(symbol, address)
        self._linked.add(key)

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


class Progress:
    """What a long compile of jittape's helpers tells the user, on stderr: nothing if it
    ends within ``AFTER`` seconds (a load from the cache, or a quick compile), else a
    line saying what compiles, and where it is kept, then a bar of its steps (tqdm, when
    installed) or a line when it is done. Only a compile the user waits for says so: one
    on the main thread, or one in the background once the main thread waits for it (a
    compile in the background while calls run on NumPy is silent). Nested compiles are
    steps of the outermost."""

    AFTER = 1.0
    _current = None

    def __init__(self, what, total, announce):
        self.what, self.total, self.done = what, total, 0
        self.start = time.perf_counter()
        self.shown = False
        self.bar = None
        self.lock = threading.Lock()
        self.timer = None
        if announce:
            self._show()
        elif threading.current_thread() is threading.main_thread():
            self.timer = threading.Timer(self.AFTER, self._show)
            self.timer.daemon = True
            self.timer.start()
        else:
            # in the background: said only once the main thread waits for it
            self.timer = threading.Thread(target=self._watch_main, daemon=True)
            self.timer.start()

    def _watch_main(self):
        time.sleep(self.AFTER)
        while self.timer and not self.shown:
            if _main_waits():
                self._show()
                return
            time.sleep(0.1)

    @classmethod
    def of(cls, what, total, announce=None):
        """The outermost compile's progress (a new one), or, nested, a step of it."""
        if cls._current is not None:
            return _Nested()
        cls._current = cls(what, total, announce)
        return cls._current

    def _show(self):
        with self.lock:
            if self.shown or self.timer is False:
                return
            self.shown = True
            from .helpers_cache import helpers_dir
            head = (f"jittape: compiling its runtime helpers ({self.what}), once for this "
                    f"machine (kept in {helpers_dir()}; `python -m jittape warmup` does it "
                    "ahead)")
            try:
                from tqdm import tqdm
            except ImportError:
                print(head + " ...", file=sys.stderr, flush=True)
                return
            self.bar = tqdm(total=self.total, initial=self.done, desc=head, unit="step",
                            file=sys.stderr, leave=True)

    def step(self):
        with self.lock:
            self.done += 1
            if self.bar is not None:
                self.bar.update(1)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        with self.lock:
            if isinstance(self.timer, threading.Timer):
                self.timer.cancel()
            self.timer = False
            if self.bar is not None:
                self.bar.close()
            elif self.shown:
                seconds = time.perf_counter() - self.start
                state = "done" if exc[0] is None else "failed"
                print(f"jittape: runtime helpers ({self.what}) {state} in {seconds:.1f} s",
                      file=sys.stderr, flush=True)
        Progress._current = None
        return False


def capsule_symbol(symbol, capsule, expected=None):
    """Define ``symbol`` in this process as the C function of a Cython ``capsule`` (an
    entry of a module's ``__pyx_capi__``: scipy.special's or scipy.linalg's), checking
    its C signature against ``expected`` where given. Compiled code calls the symbol by
    name: Numba keeps no function that embeds an address in its disk cache, and a
    kernel loaded from it resolves the name in the new process (its module imports the
    one that defines it first)."""
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype, get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object,
                                                                  ctypes.c_char_p]
    name = get_name(capsule)
    if expected is not None and name.decode() != expected:     # pragma: no cover
        raise ImportError(f"{symbol}: the C function has the signature {name.decode()!r}, "
                          f"not {expected!r}")
    binding.add_symbol(symbol, get_pointer(capsule, name))


def _main_waits():
    """Whether the main thread is blocked on a compile another thread runs: waiting for
    Numba's compiler lock, or for a kernel that thread compiles (``build.first_call``)."""
    frame = sys._current_frames().get(threading.main_thread().ident)
    if frame is None:
        return False
    code = frame.f_code
    return (code.co_filename.endswith(os.path.join("numba", "core", "compiler_lock.py"))
            or (code.co_name == "first_call" and code.co_filename.endswith(
                os.path.join("codegen", "build.py"))))


class _Nested:
    """A nested compile: its steps are the outermost progress's."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def step(self):
        pass


def external(dispatcher, name, signatures, key, requires=(), label=None):
    """A function named ``name`` calling ``dispatcher``; compiled calls that match
    ``signatures`` (a dict key -> tuple of Numba types; ``key(*argument types)`` picks
    one) go through the symbol of that signature's machine code, others call the
    dispatcher (see the module's docstring). ``requires``: the helpers made by
    ``external`` that the dispatcher's own code calls (for the same keys), linked
    first; ``label``: what a long compile of it says it compiles (``Progress``). Typed and lowered directly
    (``type_callable``, ``lower_builtin``): an ``overload`` would compile a function
    for each layout of the arguments."""
    if not hasattr(dispatcher, "py_func"):     # NUMBA_DISABLE_JIT: a plain function
        return dispatcher
    ext = External(dispatcher, name, signatures, key,
                   tuple(h for h in requires if hasattr(h, "external")), label)
    if ext.requires:
        # code of the dispatcher's kept in Numba's cache calls them by symbol: whoever
        # loads it (a call from Python of another signature too) links them first
        _before_loads(dispatcher, lambda sig: _link_required(ext, sig))

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


def _start_runtime(target_context):
    """Numba refreshes its target context before it loads machine code from its cache:
    in a new process that imports and registers every implementation Numba has (NumPy's
    functions, linear algebra, SciPy's BLAS, typed containers, ...), most of a first
    call from the disk cache, and none of it needed to run code that is compiled
    already. Loads of a module found on disk start Numba's runtime only
    (allocation and boxing, which the code calls); a compile, of this dispatcher or any
    other, refreshes the context in full as it always does. (Numba's cache object is
    private API: where it is not as expected, loads stay as they are.)"""
    from numba.core.runtime import nrt
    nrt.rtsys.initialize(target_context)


def _lean_cache_loads(disp):
    """Make ``disp``'s loads from Numba's cache lean (see ``_start_runtime``): for the
    runtime helpers, cached with the installation (``linkage.External.link``)."""
    cache = getattr(disp, "_cache", None)
    load = getattr(cache, "_load_overload", None)
    guard = getattr(cache, "_guard_against_spurious_io_errors", None)
    if load is None or guard is None:
        return

    before = getattr(disp, "_jittape_before_load", None)   # (_before_loads)

    def load_overload(sig, target_context):
        if before is not None:
            before(sig)
        _start_runtime(target_context)
        with guard():
            return load(sig, target_context)
        return None                        # (the guard swallowed an I/O error)

    cache.load_overload = load_overload


def _link_required(ext, sig):
    """Link the helpers ``ext``'s code calls, for the key of signature ``sig``."""
    key = ext.key(*getattr(sig, "args", sig))
    for helper in ext.requires:
        if key in helper.external.signatures:
            helper.external.link(key)


def _before_loads(dispatcher, before):
    """Run ``before(signature)`` before ``dispatcher`` loads machine code from Numba's
    cache (``_lean_cache_loads`` keeps it when it replaces the load)."""
    cache = getattr(dispatcher, "_cache", None)
    load = getattr(cache, "load_overload", None)
    if load is None:
        return
    dispatcher._jittape_before_load = before

    def load_overload(sig, target_context):
        before(sig)
        return load(sig, target_context)

    cache.load_overload = load_overload


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
    """Say that a generated module's kernel calls ``helper``'s machine code for ``key``
    (modules call it at import): the module keeps the request (``LINKS`` in its
    namespace) and its symbol is defined before machine code of the module is loaded
    from a cache, or handed to the user's code (``link_module``), not now. A first call
    that runs on NumPy while the kernel compiles in the background (tiered) then does
    not wait for the helper's compile, about 10 s on a first run on a machine."""
    ext = getattr(helper, "external", None)
    if ext is None:
        return None
    namespace = sys._getframe(1).f_globals        # the generated module's
    namespace.setdefault("LINKS", []).append((ext, key))
    return ext.symbol(key)


def link_module(namespace):
    """Define the symbols a generated module asked for (``link``; ``namespace``: its
    globals). Each stays asked for until its link succeeds: an interrupted compile of
    a helper is done again by the next load, never skipped."""
    for ext, key in namespace.get("LINKS", ()):
        if key not in ext._linked:
            ext.link(key)
