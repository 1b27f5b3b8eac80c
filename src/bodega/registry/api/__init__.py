"""bodega.registry.api: read-only SQL queries and subscriptions on a replica.

Corrosion's user API (``/v1/queries``, ``/v1/subscriptions``) for the registry
agent to serve: ``RegistryQueries`` is built from the replica's file, a state
directory and ``QueryLimits``; the agent mounts its ``routes()``, starts and
stops it, and calls ``changed(tables)`` as it applies changes. Beside it, the members'
row subscriptions (``/v1/registry/subscriptions``), which every node serves. Its parts:
``core/`` (pure: ``catalog``, the public tables and their views; ``policy``, the
authorizer's judgement; ``changes``, a result's differences; ``interest`` and ``window``,
which subscriptions re-run and resuming from a change; ``limits``, the bounds),
``reader`` (one statement on a read-only connection, bounded), ``store`` (the
subscriptions' file), ``subscriptions`` (both kinds, kept current) and ``routes`` (both
subscription route families, and the queries').
"""

from bodega.registry.api.core.limits import QueryLimits
from bodega.registry.api.routes import RegistryQueries

__all__ = ["QueryLimits", "RegistryQueries"]
