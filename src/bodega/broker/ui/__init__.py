"""The broker's web dashboard at ``/ui``: topology, apps, machines, placements, members.

Server-rendered (Jinja2 templates under ``templates/``), live through one
Server-Sent Events stream per page fed by the registry's subscriptions, with
htmx 2 and its SSE extension served from ``static/vendor/`` (no CDN, no build
step). Every action goes through the public API with the visitor's token.
The pure parts in ``core/`` (rows, bars, topology, refusals, apps, machines,
members, session rules) decide what is drawn; the rest reads the view and serves.
"""

from bodega.broker.ui.dashboard import PATH, Dashboard

__all__ = [
    "PATH",
    "Dashboard",
]
