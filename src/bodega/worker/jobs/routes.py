"""The worker's job routes: as a job's home (``/v1/jobs...``) and as a runner of tasks.

Home: commit a submit, find a job, claim (claim mode, assignment mode or a
late-binding take), renew leases, release, cancel. Runner: hold probes
(``/v1/job-probe-batches``; ``/v1/job-probes`` one job at a time, as homes of the version
before sent them), stop a task it runs, serve a task's output. Bodies are
the strict models of ``wire/internal/jobs/calls.py``; answers those of ``wire/public/jobs/api.py``.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from bodega.jobs.tail import last_bytes
from bodega.model.errors import BadRequest
from bodega.wire.internal.jobs.calls import (
    HomeClaim,
    HomeRelease,
    HomeReleases,
    HomeRenew,
    HomeSubmit,
    ProbeBatch,
    ProbeBody,
    RunStop,
)
from bodega.wire.public.jobs.api import VIEW_TASKS, Ok
from bodega.wire.transport.http import answer_response, query_bool, read_model
from bodega.worker.api.machine_routes import RouteSpec
from bodega.worker.jobs.home import JobHome
from bodega.worker.jobs.runs import JobRunner


class JobRoutes:
    def __init__(self, *, home: JobHome, runner: JobRunner) -> None:
        self.home = home
        self.runner = runner

    def routes(self) -> list[RouteSpec]:
        return [
            ("/v1/jobs", "POST", self.submit),
            ("/v1/jobs", "GET", self.list_jobs),
            ("/v1/jobs/by-name", "GET", self.by_name),
            ("/v1/jobs/{id}", "GET", self.show),
            ("/v1/jobs/{id}/claim", "POST", self.claim),
            ("/v1/jobs/{id}/release", "POST", self.release),
            ("/v1/jobs/{id}/cancel", "POST", self.cancel),
            ("/v1/job-leases", "POST", self.renew),
            ("/v1/job-releases", "POST", self.release_many),
            ("/v1/job-probes", "POST", self.probe),
            ("/v1/job-probes/{job}", "DELETE", self.drop_probes),
            ("/v1/job-probe-batches", "POST", self.probe_batch),
            ("/v1/job-runs/stop", "POST", self.stop_run),
            ("/v1/job-logs/{job}/{task}", "GET", self.task_logs),
        ]

    # -- home ---------------------------------------------------------------------------------
    async def submit(self, request: Request) -> Response:
        job = self.home.submit(await read_model(request, HomeSubmit))
        return answer_response(self.home.status(job, tasks=job.spec.count <= VIEW_TASKS))

    async def list_jobs(self, request: Request) -> Response:
        app = request.query_params.get("app")
        return answer_response([self.home.status(job, tasks=False)
                                for job in self.home.store.jobs(app)])

    async def by_name(self, request: Request) -> Response:
        app, name = request.query_params.get("app"), request.query_params.get("name")
        if not app or not name:
            raise BadRequest("invalid_argument: app and name are required")
        job = self.home.find(app, name)
        return answer_response(self.home.status(job, tasks=query_bool(request, "tasks")))

    async def show(self, request: Request) -> Response:
        job = self.home.get(request.path_params["id"])
        return answer_response(self.home.status(job, tasks=query_bool(request, "tasks")))

    async def claim(self, request: Request) -> Response:
        body = await read_model(request, HomeClaim)
        return answer_response(self.home.claim(request.path_params["id"], body))

    async def release(self, request: Request) -> Response:
        body = await read_model(request, HomeRelease)
        return answer_response(self.home.release(request.path_params["id"], body))

    async def release_many(self, request: Request) -> Response:
        return answer_response(self.home.release_many(await read_model(request, HomeReleases)))

    async def cancel(self, request: Request) -> Response:
        job = self.home.cancel(request.path_params["id"])
        return answer_response(self.home.status(job, tasks=job.spec.count <= VIEW_TASKS))

    async def renew(self, request: Request) -> Response:
        return answer_response(self.home.renew(await read_model(request, HomeRenew)))

    # -- runner -------------------------------------------------------------------------------
    async def probe(self, request: Request) -> Response:
        return answer_response(self.runner.accept(await read_model(request, ProbeBody)))

    async def drop_probes(self, request: Request) -> Response:
        return answer_response(Ok(ok=self.runner.drop(request.path_params["job"])))

    async def probe_batch(self, request: Request) -> Response:
        return answer_response(self.runner.accept_batch(await read_model(request, ProbeBatch)))

    async def stop_run(self, request: Request) -> Response:
        body = await read_model(request, RunStop)
        stopped = await self.runner.watch.stop(body.job, body.task, body.grace, "cancelled")
        return answer_response(Ok(ok=stopped))

    async def task_logs(self, request: Request) -> Response:
        try:
            task = int(request.path_params["task"])
        except ValueError:
            raise BadRequest("invalid_argument: task must be a number") from None
        data = self.runner.watch.logs(request.path_params["job"], task)
        if "tail" in request.query_params:  # a status's last lines: the output's end only
            data = last_bytes(data)
        return Response(data, media_type="text/plain; charset=utf-8")
