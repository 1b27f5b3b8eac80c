"""Immediate-or-cancel placement: rank, ask the best worker, on a no ask the next.

    regions in order ─▶ rank region ─▶ ask #1 ─yes─▶ done (machine created)
                                          │no/unreachable
                                          ▼
                                        ask #2 ... ─▶ next region ─▶ ... ─▶ 412 no capacity

A worker's answer is final and atomic (its ledger checks and claims in one
transaction), so brokers that race for the same room never over-commit a
host: the loser just hears no and moves on. Asking is a create carrying the
whole machine (one round trip: the worker reserves and creates together);
with hedging, the broker reserves on the two best at once, keeps the first
yes, creates there with that reservation and releases the other. There is
no queue and no pending state: when the deadline passes or the candidates
run out, the request fails at once and says what was asked, how many
workers were considered and what the best of them had free.

The plan is the ranking's (``RegionRanking.rounds``: a function of the candidates and
the ask); ``place`` is the one loop that walks it, and what it holds on the candidates
while a create is in flight goes through its ``InFlight`` (below) and is settled when it
ends.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

from bodega.broker.metrics import BrokerMetrics
from bodega.broker.placing.core.record import Attempt, Record
from bodega.broker.placing.core.shadow import Shadow
from bodega.broker.placing.no_room import no_room
from bodega.broker.view.candidates import Candidates
from bodega.broker.view.workers import Workers
from bodega.model.capacity import Ask
from bodega.model.errors import BodegaError, Indeterminate, InsufficientCapacity, Unavailable
from bodega.model.refusals import NoRoom
from bodega.placement import PlacementRequest, Policy, RegionRanking, Scored
from bodega.placement import rank_region as rank

log = logging.getLogger("bodega.broker.placing.placer")

# What a worker answers when it has no room: the broker moves on to the next candidate.
NO_ROOM = frozenset({"insufficient_capacity", "cordoned", "volume_placement_capacity"})


@dataclass(frozen=True)
class PlacerConfig:
    deadline: float = 5.0  # seconds for the whole placement, attempts included
    hedge: bool = False  # reserve on two workers at once, keep the first yes
    reservation_ttl: float = 10.0


# Asks one worker to create: what it created (a machine, a volume), or raises; ``reservation``
# is set when hedging.
Created = TypeVar("Created")
AskWorker = Callable[[str, str | None], Awaitable[Created]]


class InFlight:
    """What one placement holds on the broker's candidates while its asks are out.

    While a create is in flight, its claim is counted on the worker asked (and, for a
    machine, the app's machine on it), so that the creates racing it rank that worker as
    it will be and spread instead of herding. The placement takes those holds through its
    ``InFlight`` and nowhere else: each is given back when its ask ends, but for the one
    it keeps (the winner, whose room the worker's own figures count from then on, or a
    worker that may have made the machine without answering); whatever is still held
    when the placement ends, however it ends, is given back by ``settle``.
    """

    def __init__(self, candidates: Candidates, app: str, claim: Ask) -> None:
        """``claim``: what a worker that takes the create gives up (a volume's: disk only)."""
        self.candidates = candidates
        self.app = app
        self.claim = claim
        # A machine of the app (not a volume, which claims only disk) counts among the app's
        # machines on the worker while it is asked, for the spread across hosts.
        self.machine = 1 if claim.cpus or claim.memory_mb else 0
        self._held: dict[str, Ask] = {}  # worker -> the claim counted on it now

    def hold(self, scored: Scored, *, pin: bool = True) -> None:
        """Count the claim on the worker ``scored`` names; ``pin`` ties its cpus and GPUs to
        the worker's kinds as its room stands (a reservation's claim, counted as it was
        asked, is not)."""
        worker = scored.candidate
        claim = self.claim.pinned(worker.totals, worker.used) if pin else self.claim
        self.give_back(worker.name)  # never two holds on one worker
        self.candidates.claimed(worker.name, claim)
        self._held[worker.name] = claim

    def give_back(self, worker: str) -> None:
        """The worker said no, failed, or its reservation was let go: its room is free."""
        claim = self._held.pop(worker, None)
        if claim is not None:
            self.candidates.claimed(worker, claim, undo=True)

    def keep(self, worker: str) -> None:
        """The worker made the create (or may have): its hold stays counted until its own
        figures arrive."""
        self._held.pop(worker, None)

    @contextmanager
    def asking(self, worker: str) -> Iterator[None]:
        """The app's machine counted on ``worker`` for as long as the create is asked of
        it; after, the machine index counts it (or there is none)."""
        self.candidates.count(self.app, worker, self.machine)
        try:
            yield
        finally:
            self.candidates.count(self.app, worker, -self.machine)

    def settle(self) -> None:
        """The placement ended: every hold it did not keep is given back."""
        for worker in list(self._held):
            self.give_back(worker)


class Placer:
    def __init__(self, candidates: Candidates, workers: Workers, policy: Policy,
                 config: PlacerConfig, metrics: BrokerMetrics, broker: str,
                 rng: random.Random | None = None, shadow: Shadow | None = None) -> None:
        self.candidates = candidates
        self.workers = workers
        self.policy = policy
        self.config = config
        self.metrics = metrics
        self.broker = broker
        self.rng = rng or random.Random()
        self.shadow = shadow  # a second policy, ranked and logged for a sample of creates
        # Told of every placement that found no room (the dashboard keeps the recent ones).
        self.refused: Callable[[str, Record, str], None] | None = None

    def rank(self, request: PlacementRequest, region: str) -> RegionRanking:
        started = time.perf_counter()
        ranking = rank(request, self.candidates.table(region), self.policy, self.rng)
        self.metrics.rank_seconds.observe(time.perf_counter() - started)
        for kind, count in ranking.refused_by_kind.items():
            self.metrics.rejections.labels(kind).inc(count)
        return ranking

    def record(self, request: PlacementRequest) -> Record:
        return Record(self.policy.name, request.ask, request.regions, self.broker)

    async def place(self, request: PlacementRequest, ask: AskWorker[Created], record: Record,
                    claim: Ask | None = None,
                    hedge: bool | None = None) -> tuple[Created, Record]:
        """Create on the first worker that takes it, or raise InsufficientCapacity.

        ``claim`` is what the winner gives up (default: the request's ask); a
        volume claims only disk though its request also filters on compute,
        and is never hedged (a reservation would count its disk twice).
        """
        # A machine's own create (not a volume's, which claims only disk) joins the recent
        # mix of shapes its regions are asked for, which the fragmentation term weighs against.
        noted = claim is None
        in_flight = InFlight(self.candidates, request.app,
                             request.ask if claim is None else claim)
        hedged = self.config.hedge if hedge is None else hedge
        started = time.perf_counter()
        deadline = started + self.config.deadline
        outcome = "insufficient_capacity"
        shadow = self.shadow if self.shadow is not None and self.shadow.wanted() else None
        shadowed: list[RegionRanking] = []
        try:
            for region in request.regions:
                if noted:
                    self.candidates.table(region).shapes.note(request.ask)
                ranking = self.rank(request, region)
                record.regions.append(ranking)
                if shadow is not None:
                    shadowed.append(shadow.rank(request, self.candidates.table(region), ranking))
                machine = await self._try_region(request, ranking, ask, record, deadline,
                                                 in_flight, hedged)
                if machine is not None:
                    outcome = "placed"
                    return machine, record
                if noted:  # the region turned it away: the fragmentation term eases off
                    self.candidates.table(region).shapes.missed()
                if time.perf_counter() > deadline:
                    break
            raise no_room(request, record, self.candidates)
        except BodegaError as exc:
            if outcome != "placed" and not isinstance(exc, InsufficientCapacity):
                outcome = "error"
            elif isinstance(exc, InsufficientCapacity) and self.refused is not None:
                record.seconds = time.perf_counter() - started
                self.refused(request.app, record, exc.message)
            raise
        finally:
            in_flight.settle()
            record.seconds = time.perf_counter() - started
            self.metrics.placement_seconds.labels(outcome).observe(record.seconds)
            self.metrics.attempts.observe(len(record.attempts))
            if shadow is not None:
                placed = record.winner.candidate.name if outcome == "placed" and record.winner \
                    else None
                shadow.report(request, self.policy.name, record.regions, shadowed, placed)

    async def _try_region(self, request: PlacementRequest, ranking: RegionRanking,
                          ask: AskWorker[Created], record: Record, deadline: float,
                          in_flight: InFlight, hedged: bool) -> Created | None:
        for batch in ranking.rounds(2 if hedged else 1):
            # The deadline stops new attempts, never one in flight: a create cut off mid-way
            # might still be committed on its worker, and the client would never hear of it.
            # An attempt is bounded by the worker client's own timeout instead.
            if time.perf_counter() >= deadline:
                return None
            if len(batch) == 2:
                machine = await self._hedged(request, batch, ask, record, in_flight)
            else:
                machine = await self._ask(batch[0], ask, None, record, in_flight)
            if machine is not None:
                return machine
        return None

    async def _ask(self, scored: Scored, ask: AskWorker[Created], reservation: str | None,
                   record: Record, in_flight: InFlight) -> Created | None:
        worker = scored.candidate
        began = time.perf_counter()
        # The record the worker keeps is taken now: it names this attempt as the winner.
        attempt = Attempt(worker.name, worker.region, "accepted")
        record.attempts.append(attempt)
        record.winner = scored
        if reservation is None:  # a reservation's room is held since it was taken
            in_flight.hold(scored)
        try:
            with in_flight.asking(worker.name):
                machine = await self._ask_surely(ask, worker.name, reservation)
        except BaseException as exc:
            if isinstance(exc, Indeterminate):
                in_flight.keep(worker.name)  # it may hold the machine: its room stays counted
                raise  # the machine may exist there: asking another worker could double it
            in_flight.give_back(worker.name)
            record.winner = None
            record.attempts.remove(attempt)
            if isinstance(exc, Unavailable):
                self._refused(record, scored, "unreachable", exc, began)
                return None
            if not isinstance(exc, BodegaError) or exc.status not in NO_ROOM:
                raise  # a real problem (bad config, name taken, ...): the client must hear it
            self._refused(record, scored, "rejected", exc, began)
            no_room = exc.details if isinstance(exc.details, NoRoom) else NoRoom()
            full = exc.status == "cordoned" or no_room.full is True
            self.candidates.refused(worker.name, no_room.free, full=full)
            return None
        in_flight.keep(worker.name)  # its machine (or volume) is there now
        attempt.ms = (time.perf_counter() - began) * 1000
        return machine

    async def _ask_surely(self, ask: AskWorker[Created], worker: str,
                          reservation: str | None) -> Created:
        """Ask; if the create went out but no answer came back, ask the same worker again.

        The create carries an idempotency key, so the second ask returns the
        machine if the first one made it, or makes it now. Moving on to another
        worker instead could leave a machine the client never hears of, or two.
        """
        try:
            return await ask(worker, reservation)
        except Indeterminate as exc:
            log.warning("%s did not answer a create (%s); asking it again", worker, exc.message)
        try:
            return await ask(worker, reservation)
        except Unavailable as exc:  # no answer again, or no connection: the first may have made it
            raise Indeterminate(
                f"worker {worker} did not answer the create, twice ({exc.message}); the "
                "machine may exist there: list the app's machines (a retry with the same "
                "Idempotency-Key header returns it if it does)", status="indeterminate") from exc

    def _refused(self, record: Record, scored: Scored, outcome: str, exc: BodegaError,
                 began: float) -> None:
        worker = scored.candidate
        label = "unreachable" if outcome == "unreachable" else f"worker_{exc.status}"
        self.metrics.rejections.labels(label).inc()
        record.attempts.append(Attempt(worker.name, worker.region, outcome, exc.message,
                                       (time.perf_counter() - began) * 1000))
        log.info("%s said no to %s: %s", worker.name, record.asked, exc.message)

    async def _hedged(self, request: PlacementRequest, pair: tuple[Scored, ...],
                      ask: AskWorker[Created], record: Record,
                      in_flight: InFlight) -> Created | None:
        """Reserve on both; create on the first that said yes; release the other."""
        async def reserve(scored: Scored) -> None:
            began = time.perf_counter()
            try:
                answer = await self.workers.client(scored.candidate.name).reserve(
                    request.app, in_flight.claim, self.config.reservation_ttl)
            except BodegaError as exc:
                unreachable = isinstance(exc, Unavailable)
                if not unreachable and exc.status not in NO_ROOM:
                    raise
                self._refused(record, scored, "unreachable" if unreachable else "rejected", exc,
                              began)
                return
            in_flight.hold(scored, pin=False)
            held.append((scored, answer.id))  # in the order the yeses came

        held: list[tuple[Scored, str]] = []
        results = await asyncio.gather(*(reserve(s) for s in pair), return_exceptions=True)
        failures = [r for r in results if isinstance(r, BaseException)]
        if failures:  # a real error on either side: give back what the other reserved
            for scored, reservation in held:
                await self._release(scored.candidate.name, reservation, in_flight)
            raise failures[0]
        if not held:
            return None
        (scored, reservation), losers = held[0], held[1:]
        for loser, loser_reservation in losers:
            await self._release(loser.candidate.name, loser_reservation, in_flight)
        machine: Created | None = None
        may_exist = False
        try:
            machine = await self._ask(scored, ask, reservation, record, in_flight)
        except Indeterminate:
            may_exist = True  # keep its room held and counted
            raise
        finally:
            if machine is None and not may_exist:  # the create failed: give the room back
                await self._release(scored.candidate.name, reservation, in_flight)
        return machine

    async def _release(self, worker: str, reservation: str, in_flight: InFlight) -> None:
        in_flight.give_back(worker)
        try:
            await self.workers.client(worker).release(reservation)
        except BodegaError as exc:  # it expires by itself; nothing leaks
            log.info("could not release %s on %s (it will expire): %s", reservation, worker, exc)

