"""bodega.registry.api: read-only SQL queries and live subscriptions on the host's replica.

Corrosion's user API (``/v1/queries``, ``/v1/subscriptions``) for the registry
agent to serve: ``RegistryQueries`` is built from the replica's file, a state
directory and ``QueryLimits``; the agent mounts its ``routes()``, starts and
stops it, and calls ``changed(tables)`` as it applies changes. Its parts:
``catalog`` (the public tables and their views), ``policy`` (the authorizer's
judgement), ``reader`` (one statement on a read-only connection, bounded),
``changes`` (a result's differences), ``interest`` and ``window`` (which
subscriptions re-run; resuming from a change), ``store`` (the subscriptions'
file), ``subscriptions`` (keeping them current) and ``api`` (the HTTP routes).
"""

from bodega.registry.api.core.limits import QueryLimits
from bodega.registry.api.routes import RegistryQueries

__all__ = ["QueryLimits", "RegistryQueries"]
