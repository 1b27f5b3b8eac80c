"""What every screen, form and stream of the dashboard is built from, in one value."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from bodega.broker.ui.calls import VisitorClients
from bodega.broker.ui.core.refusals import RecentRefusals
from bodega.broker.ui.gatekeeper import Gatekeeper
from bodega.broker.ui.render import Templates
from bodega.broker.ui.sources import ClusterView


def always_ready() -> str | None:
    return None


@dataclass
class Parts:
    view: ClusterView  # the broker's view, read in-process
    api: VisitorClients  # the public API's typed client, with the visitor's token
    gate: Gatekeeper
    refusals: RecentRefusals
    templates: Templates = field(default_factory=Templates)
    # Why the broker is not ready to answer from its view yet; None once it is.
    not_ready: Callable[[], str | None] = always_ready
    closing: asyncio.Event = field(default_factory=asyncio.Event)  # ends every stream
