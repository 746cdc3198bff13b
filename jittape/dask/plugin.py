"""The distributed ``WorkerPlugin`` that carries ``jt.dask``'s graphs to the workers.

Registered once per client and set of graphs, it runs ``setup`` on every worker of the
cluster, and the scheduler runs it again on each worker that joins later (a restarted
one too): the graphs travel once per worker, never with a step's tasks.
"""

from distributed.diagnostics.plugin import WorkerPlugin

from .worker import install


class Graphs(WorkerPlugin):
    """The records of a plan (``jittape.dask.worker``), installed in each worker."""

    def __init__(self, records):
        self.records = list(records)

    def setup(self, worker):
        for record in self.records:
            install(record)
