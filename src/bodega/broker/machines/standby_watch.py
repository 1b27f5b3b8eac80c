"""The broker's thin loop around ``standby.standbys_to_start`` and ``standbys_to_stop``.

The broker already follows membership and the machines table (``daemon._follow``)
and already talks to every worker, so it is where a standby is started when
its primary's worker dies, and stopped again when that worker is back and the
primary runs there. It uses the worker's ordinary start and stop calls,
without a lease nonce: a machine a deploy holds a lease on refuses, and the
watch tries again later. A start of a started machine, or a stop of a stopped
one, changes nothing, so two brokers taking the same decision act once.

The watch keeps the standby pairs (standby id -> the primaries it names) as
machine rows change, so a look reads only those rows, not the whole table.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from bodega.broker.machines.core.standby import (
    GONE,
    RUNNING,
    AliveSince,
    GiveBack,
    Takeover,
    primaries_of,
    standbys_to_start,
    standbys_to_stop,
)
from bodega.broker.view.catalog import Catalog
from bodega.model.errors import BodegaError, Conflict, PreconditionFailed
from bodega.model.machine import Machine
from bodega.runtime.waits import within

log = logging.getLogger("bodega.broker.machines.standby")

RETRY_SECONDS = 5.0  # while a takeover is pending (leased, or its worker did not answer)
SWEEP_SECONDS = 30.0  # a full look even when nothing in membership changed
# How long a primary's worker must stay alive (one SWIM record: no suspicion refuted,
# no rejoin) before its standby is stopped: a worker flapping between alive and
# suspect never gets its primary's place back, and never sees its standby stop.
SETTLE_SECONDS = 10.0
# Start or stop machine ``id`` on ``worker`` (the broker's WorkerClient, no lease nonce).
MachineCall = Callable[[str, str], Awaitable[Any]]

# Once started (or stopped), a standby is not asked again for this long: the view takes
# a moment to show it, and asking again would only repeat the log line.
QUIET = 60.0


class StandbyWatch:
    def __init__(self, catalog: Catalog, start: MachineCall, stop: MachineCall,
                 retry: float = RETRY_SECONDS, sweep: float = SWEEP_SECONDS,
                 settle: float = SETTLE_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.catalog = catalog
        self._start = start
        self._stop = stop
        self.retry = retry
        self.sweep = sweep
        self.clock = clock
        self.alive = AliveSince(settle)
        self._nudge = asyncio.Event()
        self._pairs: dict[str, tuple[str, ...]] = {}
        self._started: dict[str, float] = {}
        self._stopped: dict[str, float] = {}
        self.load()

    # -- following the view ------------------------------------------------------------
    def load(self) -> None:
        """Find every standby in the view (at start, and after losing the change feed)."""
        self._pairs = {}
        for machine in self.catalog.rows(Machine):
            self.on_machine(machine.id, machine)

    def on_machine(self, machine_id: str, machine: Machine | None) -> None:
        """The view's row for a machine changed (``None``: it is gone)."""
        primaries = primaries_of(machine) if machine and machine.state not in GONE else ()
        if primaries:
            self._pairs[machine_id] = primaries
        else:
            self._pairs.pop(machine_id, None)

    def on_member(self) -> None:
        """Membership changed: a primary's worker may just have died, or come back."""
        self._nudge.set()

    def pairs(self) -> list[Machine]:
        """The view's rows of every standby and of every primary one names."""
        ids = set(self._pairs).union(*self._pairs.values())
        rows = (self.catalog.get(Machine, machine_id) for machine_id in sorted(ids))
        return [row for row in rows if row is not None]

    # -- the loop ----------------------------------------------------------------------
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
                log.exception("deciding which standbys to start or stop failed")
                pending = True
            wait = self.retry if pending else self.sweep
            settles = self.alive.until_settled(self.clock())
            if pending and settles is not None:
                wait = min(wait, settles)
            with contextlib.suppress(TimeoutError):
                await within(self._nudge.wait(), wait)

    async def once(self) -> bool:
        """Start and stop every standby the view calls for; True if some change is still
        to come (refused for now, or waiting for a primary's worker to settle)."""
        now = self.clock()
        self.alive.observe(self.catalog.members(), now)
        self._started = {k: at for k, at in self._started.items() if now - at < QUIET}
        self._stopped = {k: at for k, at in self._stopped.items() if now - at < QUIET}
        if not self._pairs:
            return False
        machines = self.pairs()
        pending = False
        for takeover in standbys_to_start(machines, self.catalog.member_status):
            if takeover.standby in self._started:
                continue
            if await self.start(takeover):
                self._started[takeover.standby] = now
                self._stopped.pop(takeover.standby, None)
            else:
                pending = True
        for give_back in self.give_backs(now, machines):
            if give_back.standby in self._stopped:
                continue
            if await self.stop(give_back):
                self._stopped[give_back.standby] = now
                self._started.pop(give_back.standby, None)
            else:
                pending = True
        # A standby runs and some worker is still settling: a give-back may become due.
        if self.alive.settling(now) and any(
                m.state in RUNNING and primaries_of(m) for m in machines):
            pending = True
        return pending

    def give_backs(self, now: float,
                   machines: list[Machine] | None = None) -> list[GiveBack]:
        """The standbys to stop as of the last look at membership."""
        return standbys_to_stop(self.pairs() if machines is None else machines,
                                self.catalog.member_status,
                                lambda worker: self.alive.settled(worker, now))

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

    async def stop(self, give_back: GiveBack) -> bool:
        try:
            await self._stop(give_back.worker, give_back.standby)
        except (Conflict, PreconditionFailed) as exc:  # leased, or mid-operation
            log.info("standby %s of app %s waits to be stopped (%s): %s", give_back.standby,
                     give_back.app, give_back.reason, exc)
            return False
        except BodegaError as exc:
            log.warning("standby %s of app %s could not be stopped (%s): %s",
                        give_back.standby, give_back.app, give_back.reason, exc)
            return False
        log.warning("standby %s of app %s on %s stopped: %s", give_back.standby,
                    give_back.app, give_back.worker, give_back.reason)
        return True
