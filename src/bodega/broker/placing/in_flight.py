"""What one placement holds on the broker's candidates while its asks are out.

While a create is in flight, its claim is counted on the worker asked (and, for a
machine, the app's machine on it), so that the creates racing it rank that worker as
it will be and spread instead of herding. A placement takes those holds through one
``InFlight`` and nowhere else: each is given back when its ask ends, but for the one
the placement keeps (the winner, whose room the worker's own figures count from then
on, or a worker that may have made the machine without answering); whatever is still
held when the placement ends, however it ends, is given back by ``settle``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from bodega.broker.view.candidates import Candidates
from bodega.model.capacity import Ask
from bodega.placement import Candidate


class InFlight:
    def __init__(self, candidates: Candidates, app: str, claim: Ask) -> None:
        """``claim``: what a worker that takes the create gives up (a volume's: disk only)."""
        self.candidates = candidates
        self.app = app
        self.claim = claim
        # A machine of the app (not a volume, which claims only disk) counts among the app's
        # machines on the worker while it is asked, for the spread across hosts.
        self.machine = 1 if claim.cpus or claim.memory_mb else 0
        self._held: dict[str, Ask] = {}  # worker -> the claim counted on it now

    def hold(self, worker: Candidate, *, pin: bool = True) -> None:
        """Count the claim on ``worker``; ``pin`` ties its cpus and GPUs to the worker's
        kinds as its room stands (a reservation's claim, counted as it was asked, is not)."""
        claim = self.claim.pinned(worker.totals, worker.used) if pin else self.claim
        self.give_back(worker.name)  # never two holds on one worker
        self.candidates.claimed(worker.name, claim)
        self._held[worker.name] = claim

    def holds(self, worker: str) -> bool:
        return worker in self._held

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
