"""Whether the broker has heard from the cluster, and so may answer from its view.

A broker starts with an empty (or stale) view. Until it has heard from the
cluster, "no worker serves ams" would be a lie: it has not asked yet. So a
broker with seeds is not ready until one anti-entropy pull from a peer has
succeeded and every worker that membership shows alive has its row in the
view; until then it answers 503 with ``Retry-After`` (never a 412), and
``GET /v1/health`` says why. A broker with no seeds has nobody to hear from
and is ready at once. Readiness is latched: once ready, the view is
followed as it changes, and later answers about capacity are honest.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from bodega.broker.view.catalog import Catalog

log = logging.getLogger("bodega.broker.view.readiness")

POLL = 0.1
RETRY_AFTER = "1"  # seconds, in the Retry-After header of a not-ready answer
NAMES_SHOWN = 5


@dataclass(frozen=True)
class Readiness:
    ready: bool
    why: str = ""


READY = Readiness(True)


def judge(*, seeded: bool, synced: bool, alive_workers: Iterable[str],
          worker_rows: Iterable[str]) -> Readiness:
    """Ready once the view holds what the cluster told it (pure: the shell gathers facts)."""
    if not seeded:
        return READY
    if not synced:
        return Readiness(False, "not ready: this broker has not yet synced its view of the "
                                "cluster with any peer")
    missing = sorted(set(alive_workers) - set(worker_rows))
    if missing:
        shown = ", ".join(missing[:NAMES_SHOWN]) + (" ..." if len(missing) > NAMES_SHOWN else "")
        return Readiness(False, f"not ready: this broker has not yet heard the rows of "
                                f"{len(missing)} alive worker(s): {shown}")
    return READY


class Gate:
    """The broker's readiness: ``state`` for answers, ``ready`` to wait on."""

    def __init__(self, seeded: bool) -> None:
        self.state = judge(seeded=seeded, synced=False, alive_workers=(), worker_rows=())
        self.ready = asyncio.Event()
        if self.state.ready:
            self.ready.set()

    async def watch(self, catalog: Catalog, pull: Callable[[], Awaitable[int]],
                    on_ready: Callable[[], None]) -> None:
        """Pull from peers until ``judge`` says ready; then ``on_ready`` and open the gate.

        ``pull`` is one anti-entropy round (how many pulls succeeded); it is repeated
        while not ready, so rows that arrive after the first pull are not waited for
        until the registry's own next round.
        """
        synced = False
        logged = ""
        while not self.ready.is_set():
            try:
                synced = await pull() > 0 or synced
            except Exception:  # a pull that blew up must not leave the broker never ready
                log.exception("pulling from peers failed; trying again")
            alive = [m.name for m in catalog.members()
                     if m.role == "worker" and m.status == "alive"]
            state = judge(seeded=True, synced=synced, alive_workers=alive,
                          worker_rows=(str(r["name"]) for r in catalog.rows("workers")))
            if state.ready:
                on_ready()
                self.state = state
                self.ready.set()
                log.info("ready: heard from the cluster (%d alive workers)", len(alive))
                return
            self.state = state
            if state.why != logged:
                log.info("%s", state.why)
                logged = state.why
            await asyncio.sleep(POLL)
