"""The chaos suite: a cluster across network namespaces, faults, and invariant checks.

``cluster`` builds the hosts and daemons, ``faults`` injects what goes wrong,
``workload`` drives the public API as a client would, ``observe`` reads the
state from the outside and ``invariants`` (pure) judges it. ``python -m
tests.cluster.chaos`` (``make chaos``) runs every scenario and prints a table.
"""
