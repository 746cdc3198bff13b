"""The bottom floor: what this thread is recording into (tapes, traces).

Tapes and traces belong to the thread that opened them, as TensorFlow's tapes do.
``ACTIVE_TAPES`` and ``TRACES`` hold those of every thread: the eager hot path tests
them (a list's truth value is the cheapest test) and only when one is non-empty asks
for this thread's own (``thread_tapes()``, ``current_trace()``).

This module imports nothing of jittape, so every other module may import it.
"""

import threading

ACTIVE_TAPES = []
TRACES = []
_local = threading.local()


def _thread_list(name):
    found = getattr(_local, name, None)
    if found is None:
        found = []
        setattr(_local, name, found)
    return found


def thread_tapes():
    """The tapes recording in this thread, innermost last (a list the caller may change)."""
    try:                              # (each op on a tape asks: one frame, no getattr)
        return _local.tapes
    except AttributeError:
        return _thread_list("tapes")


def thread_traces():
    """The traces of this thread, innermost last."""
    return _thread_list("traces")


def current_trace():
    """The trace this thread is recording into, or None."""
    stack = getattr(_local, "traces", None)
    return stack[-1] if stack else None
