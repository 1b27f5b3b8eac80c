"""The broker's side of the jobs: where a job lives, and handing every call to its home.

The broker keeps nothing. A submit goes to the job's home: the first live
worker in rendezvous order for ``app/name`` (``jobs.homes``; the home of a
job the view already has under the submit's key or name), which answers only
once the job is committed there; a home that cannot be reached (the
connection refused: it never saw the submit) gives way to the next, unless
the submit carries an idempotency key, whose check only that home can make
(then 503 with ``Retry-After``). For a bodega-pool job the broker also ranks
the workers (its placement policy, as for a machine) and hands the home where
to place the job's ``ratio``·count probes.

Every other call finds the job's home (the view's row, else the rendezvous
order, asking the homes directly) and is decided there; a home that does not
answer is a 503 with ``Retry-After``: claims wait for it, nothing is lost.
"""

from __future__ import annotations

import asyncio
import random
import time

from bodega.broker.jobs.core.index import JobIndex
from bodega.broker.placing.placer import Placer
from bodega.broker.view.apps import Apps
from bodega.broker.view.candidates import Candidates
from bodega.broker.view.catalog import Catalog
from bodega.broker.view.workers import Workers
from bodega.jobs.binding import interleave, probe_order, probes_for, spread
from bodega.jobs.homes import job_key, rendezvous
from bodega.jobs.spec import BODEGA_POOL, JobSpec
from bodega.model.answer import from_doc
from bodega.model.capacity import Usage, fits
from bodega.model.errors import BadRequest, BodegaError, Indeterminate, NotFound, Unavailable
from bodega.placement import PlacementRequest
from bodega.placement.regions import parse as parse_regions
from bodega.runtime.waits import within
from bodega.wire.internal.jobs.calls import HomeSubmit
from bodega.wire.internal.jobs.worker_client import JobClient
from bodega.wire.public.jobs.api import JobDoorInfo, JobStatus, SubmitBody

HOMES_TRIED = 3  # homes a lookup asks directly when the view does not know the job yet
LISTING_WAIT = 2.0  # seconds a listing waits for each home's own list
# Where a job that names no app goes (the article's task shape has no app): an app of the
# default org, made on first use.
JOBS_APP = "jobs"
JOBS_ORG = "personal"


def home_down(home: str, exc: BodegaError) -> Unavailable:
    err = Unavailable(f"the job's home {home} does not answer ({exc.message}); nothing is "
                      "lost: retry shortly", status="home_unavailable")
    err.retry_after = 1.0
    return err


class JobDesk:
    def __init__(self, catalog: Catalog, candidates: Candidates, workers: Workers,
                 placer: Placer, apps: Apps, probe_ratio: float = 2.0,
                 rng: random.Random | None = None) -> None:
        self.catalog = catalog
        self.candidates = candidates
        self.workers = workers
        self.placer = placer
        self.apps = apps
        self.probe_ratio = probe_ratio
        self.rng = rng or random.Random()
        self.index = JobIndex()

    # -- the view -------------------------------------------------------------------------------
    def load(self) -> None:
        for doc in self.catalog.rows("jobs"):
            if (job := from_doc(JobStatus, doc)) is not None:
                self.index.note(job)

    def on_job(self, job_id: str) -> None:
        job = from_doc(JobStatus, self.catalog.get("jobs", job_id))
        if job is None:
            self.index.forget(job_id)
        else:
            self.index.note(job)

    def live_workers(self) -> list[str]:
        return [c.name for c in self.candidates.all() if c.status == "alive"]

    def doors(self) -> list[JobDoorInfo]:
        """The jobs doors of the live workers that have one (``worker/jobs/door.py``)."""
        doors = []
        for candidate in self.candidates.all():
            row = self.catalog.get("workers", candidate.name) \
                if candidate.status == "alive" else None
            if row is not None and (url := row.get("jobs_url")):
                doors.append(JobDoorInfo(worker=candidate.name, url=str(url),
                                         region=candidate.region))
        return doors

    def home(self, worker: str) -> JobClient:
        return self.workers.job_client(worker)

    # -- submit -------------------------------------------------------------------------------
    def jobs_app(self) -> str:
        """The app of jobs that name none, made if it is not there yet."""
        if self.catalog.get("apps", JOBS_APP) is None:
            self.apps.create(JOBS_APP, JOBS_ORG, None)
        return JOBS_APP

    async def submit(self, app: str, body: SubmitBody) -> JobStatus:
        self.apps.require(app)
        try:
            spec = body.spec(app, time.time())
        except ValueError as exc:
            raise BadRequest(f"invalid_argument: {exc}") from None
        for before in spec.after:
            try:
                found = await self.locate(app, before)
            except NotFound:
                raise BadRequest(f"invalid_argument: after: no job named {before} in app "
                                 f"{app}") from None
            if found.periodic is not None:  # it never succeeds: its runs do
                raise BadRequest(f"invalid_argument: after: job {before} is periodic: name "
                                 f"one of its runs ({before}-<the UTC minute it fired for>)")
        # A one-task job that names no region is started by its home in a warm slot of its
        # own when one is free (``jobs/seats.py``); when none is, the home places its probes
        # itself on the workers with most room in its view, as for a task back in the
        # queue: this broker ranks no workers for it.
        probes = self.probe_targets(spec) if spec.pool == BODEGA_POOL and not spec.after \
            and not spec.periodic and (spec.count > 1 or spec.region) else {}
        order = self.index.submit_homes(app, spec.name, spec.idempotency_key,
                                        self.live_workers())
        if not order:
            raise home_down("(none)", Unavailable("no live worker in the view"))
        last: BodegaError = Unavailable("no home tried")
        for home in order[:HOMES_TRIED]:
            try:
                status = await self.home(home).submit_job(HomeSubmit(spec=spec, probes=probes))
            except Indeterminate as exc:
                raise Unavailable(f"the submit reached {home} but no answer came back: it may "
                                  "be committed there; retry with the same idempotency_key",
                                  status="indeterminate") from exc
            except Unavailable as exc:
                if spec.idempotency_key:  # only that home can say whether it has the key
                    raise home_down(home, exc) from exc
                last = exc
                continue
            self.index.note(status)
            return status
        raise home_down(order[0], last)

    def probe_targets(self, spec: JobSpec) -> dict[str, int]:
        """Where the job's probes go: the workers in this broker's ranking for one task, region
        by region interleaved, then the live ones whose room is held now (``probe_order``),
        walked again while probes are left."""
        known = self.candidates.regions()
        try:
            regions = parse_regions(spec.region, known) if spec.region else tuple(known)
        except ValueError as exc:
            raise BadRequest(f"invalid_argument: region: {exc}") from None
        request = PlacementRequest(app=spec.app, ask=spec.ask(), regions=regions)
        ranked = interleave([s.candidate.name for s in self.placer.rank(request, r).attempts()]
                            for r in regions)
        live = [(c.name, fits(c.totals, Usage(), request.ask)) for c in self.candidates.all()
                if c.status == "alive" and c.region in regions and not c.cordoned]
        return spread(probe_order(ranked, live), probes_for(spec.count, self.probe_ratio))

    # -- finding a job ------------------------------------------------------------------------
    async def locate(self, app: str, name: str) -> JobStatus:
        """The job as the view (or, failing that, its home) knows it; NotFound if nowhere."""
        known = self.index.named(app, name)
        if known is not None:
            return known
        silent: list[str] = []
        # A periodic job's run lives on that job's home, whatever its own name hashes to.
        parent = self.index.named(app, name.rpartition("-")[0])
        homes = [parent.home] if parent is not None and parent.periodic is not None else []
        homes += rendezvous(job_key(app, name), self.live_workers())[:HOMES_TRIED]
        for home in dict.fromkeys(homes):
            try:
                found = await self.home(home).find_job(app, name)
            except NotFound:
                continue
            except Unavailable:
                silent.append(home)
                continue
            self.index.note(found)
            return found
        if silent:
            raise home_down(silent[0], Unavailable("no answer"))
        raise NotFound(f"job not found: {name} in app {app}")

    def app_of(self, name: str, apps: list[str] | None) -> str:
        """The one app (of ``apps``: those a token may see) with a job called ``name``."""
        named = self.index.apps_naming(name, apps)
        if len(named) == 1:
            return named[0]
        if not named:
            raise NotFound(f"job not found: {name} (name its app with ?app=)")
        raise BadRequest(f"invalid_argument: jobs named {name} exist in apps "
                         f"{', '.join(named)}: name the app with ?app=")

    async def status(self, app: str, name: str) -> JobStatus:
        """From the job's home; while it does not answer, the view's last copy."""
        job = await self.locate(app, name)
        try:
            fresh = await self.home(job.home).job(job.id)
        except NotFound:
            self.index.forget(job.id)
            raise NotFound(f"job not found: {name} in app {app}") from None
        except Unavailable:
            return job
        self.index.note(fresh.model_copy(update={"tasks": None}))
        return fresh

    async def cancel(self, app: str, name: str) -> JobStatus:
        job = await self.locate(app, name)
        try:
            status = await self.home(job.home).cancel_job(job.id)
        except NotFound:
            raise
        except Unavailable as exc:
            raise home_down(job.home, exc) from exc
        self.index.note(status.model_copy(update={"tasks": None}))
        return status

    async def listed(self, app: str | None, pool: str | None,
                     state: str | None) -> list[JobStatus]:
        """Every job of ``app`` (None: of every app) in ``state`` (None: any): the view's, and
        those only their homes keep (a job that ended before its home's first publish:
        ``worker/jobs/publish.py``), asked of each live home; a home that does not answer
        within ``LISTING_WAIT`` adds none."""
        found = {job.id: job for job in self.index.listing(app=app, pool=pool, state=state)}
        kept = await asyncio.gather(*(self._kept_on(w, app) for w in self.live_workers()))
        for job in (job for jobs in kept for job in jobs):
            if job.id not in found and (pool is None or job.pool == pool) \
                    and (state is None or job.state == state):
                found[job.id] = job
        return list(found.values())

    async def _kept_on(self, worker: str, app: str | None) -> list[JobStatus]:
        try:
            return await within(self.home(worker).list_jobs(app), LISTING_WAIT)
        except (BodegaError, TimeoutError):
            return []

    def shuffled(self, jobs: list[JobStatus]) -> list[JobStatus]:
        """Each caller gets its own order: claimants spread over the jobs, not stampede."""
        self.rng.shuffle(jobs)
        return jobs
