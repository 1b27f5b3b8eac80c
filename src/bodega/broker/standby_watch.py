"""The broker's thin loop around ``standby.standbys_to_start``.

The broker already follows membership and the machines table (``daemon._follow``)
and already talks to every worker, so it is where a standby is started when
its primary's worker dies. It starts through the worker's ordinary start call,
without a lease nonce: a machine a deploy holds a lease on refuses, and the
watch tries again later. A start of a started machine changes nothing, so two
brokers taking the same decision start the standby once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from bodega.broker.catalog import Catalog
from bodega.broker.standby import UNAVAILABLE, Takeover, standbys_to_start
from bodega.model.errors import BodegaError, Conflict

log = logging.getLogger("bodega.broker.standby")

RETRY_SECONDS = 5.0  # while a takeover is pending (leased, or its worker did not answer)
SWEEP_SECONDS = 30.0  # a full look even when nothing in membership changed
# Start machine ``id`` on ``worker`` (the broker's WorkerClient start, no lease nonce).
StartMachine = Callable[[str, str], Awaitable[Any]]

# Once started, a standby is not asked again for this long: the view takes a moment to
# show it started, and asking again would only repeat the log line.
STARTED_QUIET = 60.0


class StandbyWatch:
    def __init__(self, catalog: Catalog, start: StartMachine,
                 retry: float = RETRY_SECONDS, sweep: float = SWEEP_SECONDS) -> None:
        self.catalog = catalog
        self._start = start
        self.retry = retry
        self.sweep = sweep
        self._nudge = asyncio.Event()
        self._started: dict[str, float] = {}

    def on_member(self) -> None:
        """Membership changed: a primary's worker may just have died."""
        self._nudge.set()

    def decide(self) -> list[Takeover]:
        # Reading every machine row is the costly part: skip it while no member is down.
        if not any(m.get("status") in UNAVAILABLE for m in self.catalog.members()):
            return []
        return standbys_to_start(self.catalog.rows("machines"), self.catalog.member_status)

    async def run(self) -> None:
        while True:
            pending = False
            # Cleared before the look, not after: a member change during it wakes the next.
            self._nudge.clear()
            try:
                pending = await self.once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("deciding which standbys to start failed")
                pending = True
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._nudge.wait(),
                                       self.retry if pending else self.sweep)

    async def once(self) -> bool:
        """Start every standby the view calls for; True if some could not start yet."""
        pending = False
        now = time.monotonic()
        self._started = {k: at for k, at in self._started.items() if now - at < STARTED_QUIET}
        for takeover in self.decide():
            if takeover.standby in self._started:
                continue
            if await self.start(takeover):
                self._started[takeover.standby] = now
            else:
                pending = True
        return pending

    async def start(self, takeover: Takeover) -> bool:
        try:
            await self._start(takeover.worker, takeover.standby)
        except Conflict as exc:
            log.info("standby %s of app %s waits to take over for %s: %s", takeover.standby,
                     takeover.app, takeover.primary, exc)
            return False
        except BodegaError as exc:
            log.warning("standby %s of app %s could not take over for %s: %s",
                        takeover.standby, takeover.app, takeover.primary, exc)
            return False
        log.warning("standby %s on %s took over for machine %s of app %s: %s",
                    takeover.standby, takeover.worker, takeover.primary, takeover.app,
                    takeover.reason)
        return True
