"""Which standbys to start, and which to stop again: pure decisions over the cluster view.

A standby is a machine whose ``config.standbys`` names the primaries it stands
by for. It rests stopped (or created, never started) on another worker, and is
started only when a primary's worker is unavailable: membership says that
worker is ``dead`` or has ``left``. A worker that is only ``suspect`` may still
answer, so nothing happens until suspicion ends.

Per primary at most one standby is started, the first by id that rests on a
worker membership holds ``alive``; a primary that already has a started (or
starting) standby needs nothing more, which keeps the decision stable when it is
taken again, by the same broker on the next change or by another broker.

When the primary's worker comes back, the primary wins: a started standby is
stopped once every primary it names is running again (``started`` or
``restarting``) on a worker that has stayed ``alive`` for a settle time
(``AliveSince``), which puts the deploy's layout back (primary on one worker,
standby resting on another) so that a later failure is covered again. A
primary that is not running when its host returns (the host rebooted and
it did not come back, or it was destroyed or replaced) keeps its standby
running: the standby is then the only copy.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from bodega.model.machine import Machine
from bodega.wire.public.platform import Member

UNAVAILABLE = ("dead", "left")
RESTING = ("created", "stopped")
RUNNING = ("starting", "started")
GONE = ("destroying", "destroyed")
# A primary in these states runs its program (or is about to again, under its own
# restart policy): its standby is a second copy.
PRIMARY_RUNNING = ("started", "restarting")


@dataclass(frozen=True)
class Takeover:
    """Start ``standby`` (on ``worker``): ``primary``'s worker is ``primary_worker``,
    which membership says is ``status``."""

    app: str
    standby: str
    worker: str
    primary: str
    primary_worker: str
    status: str

    @property
    def reason(self) -> str:
        return f"worker {self.primary_worker} is {self.status}"


@dataclass(frozen=True)
class GiveBack:
    """Stop ``standby`` (on ``worker``): each of its ``primaries`` runs again on the
    worker at the same index of ``primary_workers``."""

    app: str
    standby: str
    worker: str
    primaries: tuple[str, ...]
    primary_workers: tuple[str, ...]

    @property
    def reason(self) -> str:
        if len(self.primaries) == 1:
            return (f"its primary {self.primaries[0]} on worker {self.primary_workers[0]} "
                    "is running again")
        each = ", ".join(f"{p} on worker {w}"
                         for p, w in zip(self.primaries, self.primary_workers, strict=True))
        return f"its primaries {each} are running again"


def primaries_of(machine: Machine) -> tuple[str, ...]:
    """The machines ``machine`` stands by for (none for a machine that is no standby)."""
    return tuple(machine.config.standbys or ()) if machine.config is not None else ()


def standbys_to_start(machines: Sequence[Machine],
                      status_of: Callable[[str], str | None]) -> list[Takeover]:
    """The standbys to start now, given the machine rows of the view (every standby and
    its primaries) and each member's SWIM status (``None`` for a name membership does
    not know)."""
    by_id = {m.id: m for m in machines}
    standbys_of: dict[str, list[Machine]] = {}
    for machine in sorted(machines, key=lambda m: m.id):
        for named in primaries_of(machine):
            standbys_of.setdefault(named, []).append(machine)
    takeovers: list[Takeover] = []
    for primary_id, standbys in sorted(standbys_of.items()):
        primary = by_id.get(primary_id)
        if primary is None or primary.state in GONE:
            continue  # a primary destroyed on purpose needs no standby
        primary_worker = primary.worker or ""
        status = status_of(primary_worker) if primary_worker else None
        if status not in UNAVAILABLE:
            continue
        mine = [s for s in standbys if s.app == primary.app]
        if any(s.state in RUNNING for s in mine):
            continue  # taken over already
        for standby in mine:
            worker = standby.worker or ""
            if standby.state in RESTING and worker and status_of(worker) == "alive":
                takeovers.append(Takeover(
                    app=str(standby.app), standby=standby.id, worker=worker,
                    primary=primary_id, primary_worker=primary_worker, status=str(status)))
                break
    return takeovers


def standbys_to_stop(machines: Sequence[Machine],
                     status_of: Callable[[str], str | None],
                     settled: Callable[[str], bool]) -> list[GiveBack]:
    """The started standbys to stop now: every primary each names runs again, on a
    worker membership holds ``alive`` and has for the settle time (``settled``).

    A standby only ``starting`` is left until it has started (a stop would be refused
    there); one on a worker that is not ``alive`` could not be asked. A primary missing
    from the view, of another app, not running, or on a worker that is not settled
    keeps the standby running."""
    by_id = {m.id: m for m in machines}
    stops: list[GiveBack] = []
    for standby in sorted(machines, key=lambda m: m.id):
        primaries = primaries_of(standby)
        worker = standby.worker or ""
        if not primaries or standby.state != "started" or not worker \
                or status_of(worker) != "alive":
            continue
        workers: list[str] = []
        for primary_id in primaries:
            primary = by_id.get(primary_id)
            if primary is None or primary.app != standby.app \
                    or primary.state not in PRIMARY_RUNNING:
                break
            host = primary.worker or ""
            if not host or status_of(host) != "alive" or not settled(host):
                break
            workers.append(host)
        else:
            stops.append(GiveBack(app=str(standby.app), standby=standby.id,
                                  worker=worker, primaries=primaries,
                                  primary_workers=tuple(workers)))
    return stops


class AliveSince:
    """Since when each member has been ``alive`` as one unbroken record: the hysteresis
    that keeps a flapping worker from taking its primary's place back.

    A member's record is its status with its incarnation and generation. A member that
    was suspected and refuted it, or was declared dead and rejoined, comes back with a
    higher incarnation or a new generation, so a blip between two looks still restarts
    its clock even when no look saw it anything but alive. ``now`` is any monotonic
    clock's reading, given by the caller."""

    def __init__(self, settle: float) -> None:
        self.settle = settle
        self._since: dict[str, tuple[tuple[int, int], float]] = {}

    def observe(self, members: Iterable[Member], now: float) -> None:
        seen: dict[str, tuple[tuple[int, int], float]] = {}
        for member in members:
            if member.status != "alive":
                continue
            name = member.name
            record = (member.incarnation, member.generation)
            known = self._since.get(name)
            seen[name] = known if known is not None and known[0] == record else (record, now)
        self._since = seen

    def settled(self, name: str, now: float) -> bool:
        """True once ``name`` has been alive, as one record, for the settle time."""
        known = self._since.get(name)
        return known is not None and now - known[1] >= self.settle

    def settling(self, now: float) -> bool:
        """True while some alive member has not been alive for the settle time yet."""
        return self.until_settled(now) is not None

    def until_settled(self, now: float) -> float | None:
        """Seconds until the next alive member settles; None if every one has."""
        waits = [since + self.settle - now for _, since in self._since.values()
                 if now - since < self.settle]
        return min(waits) if waits else None
