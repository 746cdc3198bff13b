"""What ``jt.dask`` puts on a distributed cluster's workers: the ``WorkerPlugin`` that
carries the graphs and adds the handler that runs a worker's chunks of a step.

The plugin is registered once per client and set of graphs; it runs ``setup`` on every
worker of the cluster, and the scheduler runs it again on each worker that joins later
(a restarted one too): the graphs travel once per worker, never with a step's tasks.

The handler (``HANDLER``, the worker's own name for it) is what a step calls when it
can: the client calls it on the worker directly (or through the scheduler's proxy, as
``DaskGradient._on_runners`` says), with no task for the scheduler to place, track and
release, which was most of a step's fixed cost. It reads the chunks from the worker's
own store by key; a chunk that is not there (moved, lost) makes it answer
``"missing"``, and the client runs the step as tasks instead. A handler, not an actor:
a worker that holds an actor cannot be retired gracefully (its data would not be moved
elsewhere when a cluster scales down).
"""

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

from distributed.diagnostics.plugin import WorkerPlugin
from distributed.protocol import to_serialize

from . import worker
from .worker import install

HANDLER = "jittape_partials"
_POOL = []                      # this process's runner thread (one: a worker's chunks
_POOL_LOCK = threading.Lock()   # run one after the other, as in its task)


class Graphs(WorkerPlugin):
    """The records of a plan (``jittape.dask.worker``), installed in each worker, and
    the worker's handler for the steps' calls."""

    def __init__(self, records):
        self.records = list(records)

    def setup(self, worker):
        for record in self.records:
            install(record)
        dask_worker = worker

        # (a function of its own: the worker's server logs its handlers' __name__)
        async def jittape_partials(step=None, jobs=None, keys=None):
            return await run(dask_worker, step, jobs, keys)
        worker.handlers[HANDLER] = jittape_partials


def _pool():
    with _POOL_LOCK:
        if not _POOL:
            _POOL.append(ThreadPoolExecutor(1, thread_name_prefix="jittape-runner"))
        return _POOL[0]


async def run(dask_worker, step, jobs, keys):
    """``worker.partials(step, jobs, *chunks)`` on the chunks stored under ``keys``
    (each chunk's data arrays, chunk after chunk) in this worker, as a reply:
    ``{"status": "OK", "result": ...}``, ``{"status": "missing"}`` where a chunk is
    not in the worker's store, ``{"status": "error", "exception": ...}`` for an error
    of the loss (raised on the client as its task would raise it). The store is read
    here, on the worker's event loop (the thread that writes it); the kernels run on
    the runner thread, releasing the GIL, so the event loop goes on meanwhile."""
    data = dask_worker.data
    try:
        arrays = [data[k] for k in keys]
    except KeyError:
        return {"status": "missing"}
    loop = asyncio.get_running_loop()
    try:
        # (worker.partials looked up at each call: the module's, as a task finds it)
        result = await loop.run_in_executor(_pool(), lambda: worker.partials(
            step, jobs, *arrays))
    except Exception as err:
        return {"status": "error", "exception": to_serialize(err)}
    return {"status": "OK", "result": to_serialize(result)}
