"""The worker's part in batch jobs: a job's home (its store and schema, claims, leases,
upkeep, renders), the runs of its tasks on this worker, peers asking each other for tasks,
the routes on the worker's internal API, and the rows it publishes. Wired by ``wiring``,
which only the worker's daemon imports; it imports the worker's wings below it (api, ops,
store, host, core).
Its modules are its surface: each is imported by its own name.
"""

__all__: list[str] = []
