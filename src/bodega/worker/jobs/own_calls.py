"""The jobs calls a worker makes to itself, made in its own process.

A home places probes on its own runner too, and a runner takes tasks from, renews
leases with and reports ends to the home of each job, which is often itself (with N
workers, one call in N). Those calls need no HTTP: ``OwnCalls`` answers them as the
worker's routes would (``routes.py`` calls the same methods), with the same models
and the same errors, without encoding, a socket or a handshake. What each does to
the store is the same, so what a crash can lose is too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from bodega.model.errors import BodegaError
from bodega.wire.internal.jobs.calls import (
    HomeClaim,
    HomeClaimAnswer,
    HomeReleases,
    HomeReleasesAnswer,
    HomeRenew,
    HomeRenewAnswer,
    ProbeBatch,
    ProbeBody,
    Probed,
    ProbesHeld,
    RunStop,
)
from bodega.wire.public.jobs.api import JobStatus, Ok

if TYPE_CHECKING:
    from bodega.worker.jobs.home import JobHome
    from bodega.worker.jobs.runs import JobRunner


class OwnCalls:
    """What ``JobPeers.client`` gives for the worker itself (the calls it makes to peers)."""

    def __init__(self, home: JobHome, runner: JobRunner) -> None:
        self.home = home
        self.runner = runner

    async def find_job(self, app: str, name: str, tasks: bool = False) -> JobStatus:
        return _own(lambda: self.home.status(self.home.find(app, name), tasks=tasks))

    async def claim_task(self, job_id: str, body: HomeClaim) -> HomeClaimAnswer:
        return _own(lambda: self.home.claim(job_id, body))

    async def renew_leases(self, body: HomeRenew) -> HomeRenewAnswer:
        return _own(lambda: self.home.renew(body))

    async def release_tasks(self, body: HomeReleases) -> HomeReleasesAnswer:
        return _own(lambda: self.home.release_many(body))

    async def probe(self, body: ProbeBody) -> Probed:
        return _own(lambda: self.runner.accept(body))

    async def probe_batch(self, body: ProbeBatch) -> ProbesHeld:
        return _own(lambda: self.runner.accept_batch(body))

    async def drop_probes(self, job_id: str) -> Ok:
        return Ok(ok=_own(lambda: self.runner.drop(job_id)))

    async def stop_run(self, body: RunStop) -> Ok:
        try:
            stopped = await self.runner.watch.stop(body.job, body.task, body.grace, "cancelled")
        except BodegaError:
            raise
        except Exception as exc:  # as the route's 500 would reach a caller over HTTP
            raise BodegaError(f"stopping task {body.task} of job {body.job}: {exc}") from exc
        return Ok(ok=stopped)


T = TypeVar("T")


def _own(call: Callable[[], T]) -> T:
    """The call's answer; an error that is not bodega's reaches the caller as the route's
    500 would over HTTP (a ``BodegaError``), never as another kind."""
    try:
        return call()
    except BodegaError:
        raise
    except Exception as exc:
        raise BodegaError(f"internal error: {exc}") from exc
