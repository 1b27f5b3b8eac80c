"""The broker's view of the cluster, read from its registry node: the catalog (and its
in-memory fake), app rows, how fresh a row is, whether a host answers, the machine index,
each region's candidates, the workers and how to reach them, and whether the broker is
ready to answer. It imports nothing else of the broker: every room reads through it.
Its modules are its surface: each is imported by its own name.
"""

__all__: list[str] = []
