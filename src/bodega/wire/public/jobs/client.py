"""A typed client of the broker's ``/sched`` API (the CLI, benchmarks and tests use it).

It rides on any ``JsonClient`` of the public API (a ``MachinesClient``): the
same token, connections and error mapping (a 429 is ``TooManyRequests``, a 409
``Conflict``). Bodies are the request models of ``wire/public/jobs/api.py``; answers its
answer models.
"""

from __future__ import annotations

import functools
from urllib.parse import quote

from pydantic import TypeAdapter, ValidationError

from bodega.model.errors import Indeterminate
from bodega.wire.public.jobs.api import (
    Cancellation,
    ClaimAnswer,
    ClaimBody,
    JobStatus,
    RegisterBody,
    Registration,
    ReleaseAnswer,
    ReleaseBody,
    RenewAnswer,
    RenewBody,
    SchedRequest,
    SubmitBody,
    SubmitOutcome,
)
from bodega.wire.transport.json_client import JsonClient, Params


def _body(request: SchedRequest) -> bytes:
    return request.model_dump_json(exclude_none=True).encode()


class JobsApi:
    def __init__(self, client: JsonClient) -> None:
        self.client = client

    def _named(self, action: str, name: str) -> str:
        return f"/sched/{action}/{quote(name, safe='')}"

    @staticmethod
    def _app(app: str | None, **more: object) -> Params:
        return {"app": app, **more}

    # -- users --------------------------------------------------------------------------------
    async def submit(self, body: SubmitBody, app: str | None = None) -> JobStatus:
        return await self.client.answer(JobStatus, "POST", "/sched/submit", encoded=_body(body),
                                        params=self._app(app))

    async def submit_list(self, bodies: list[SubmitBody],
                          app: str | None = None) -> list[SubmitOutcome]:
        """Each body a job of its own, in one request: one outcome per body, in order (the
        job's status, or its refusal)."""
        data = await self.client.exchange(
            "POST", "/sched/submit", params=self._app(app),
            encoded=b"[" + b",".join(_body(body) for body in bodies) + b"]")
        try:
            return _outcomes().validate_json(data or b"null")
        except ValidationError as exc:
            raise Indeterminate("the broker answered a list submit with what is not one "
                                f"outcome per job: {exc.errors()[0].get('msg', 'invalid')}") \
                from None

    async def status(self, name: str, app: str | None = None,
                     lines: int | None = None) -> JobStatus:
        """``lines``: the last lines of each task's output to show (None: the broker's
        default; 0: none, as a poll that follows the job's state asks)."""
        return await self.client.answer(JobStatus, "GET", self._named("status", name),
                                        params=self._app(app, lines=lines))

    async def cancel(self, name: str, app: str | None = None) -> JobStatus:
        return await self.client.answer(JobStatus, "POST", self._named("cancel", name),
                                        params=self._app(app))

    async def jobs(self, app: str | None = None, pool: str | None = None,
                   state: str = "unclaimed", limit: int | None = None) -> list[JobStatus]:
        """Jobs with tasks waiting (``unclaimed``, a random order), ``any``, or in a state."""
        return await self.client.answers(JobStatus, "GET", "/sched/jobs", params=self._app(
            app, pool=pool, state=state, limit=limit))

    async def logs(self, name: str, task: int = 0, app: str | None = None) -> bytes:
        return await self.client.exchange("GET", self._named("logs", name),
                                          params=self._app(app, task=task)) or b""

    # -- claim mode ---------------------------------------------------------------------------
    async def claim(self, name: str, worker: str, task: int | None = None,
                    app: str | None = None) -> ClaimAnswer:
        return await self.client.answer(ClaimAnswer, "POST", self._named("claim", name),
                                        encoded=_body(ClaimBody(worker=worker, task=task)),
                                        params=self._app(app))

    async def renew(self, name: str, worker: str, task: int | None = None,
                    app: str | None = None) -> RenewAnswer:
        return await self.client.answer(RenewAnswer, "POST", self._named("renew", name),
                                        encoded=_body(RenewBody(worker=worker, task=task)),
                                        params=self._app(app))

    async def release(self, name: str, worker: str, exit_code: int | None,
                      task: int | None = None, app: str | None = None) -> ReleaseAnswer:
        body = ReleaseBody(worker=worker, task=task, exit_code=exit_code)
        return await self.client.answer(ReleaseAnswer, "POST", self._named("release", name),
                                        encoded=_body(body), params=self._app(app))

    async def cancellations(self, worker: str, app: str | None = None) -> list[Cancellation]:
        return await self.client.answers(Cancellation, "GET", "/sched/cancellations",
                                         params=self._app(app, worker=worker))

    # -- assignment mode ----------------------------------------------------------------------
    async def register(self, body: RegisterBody, app: str | None = None) -> Registration:
        return await self.client.answer(Registration, "POST", "/sched/register",
                                        encoded=_body(body), params=self._app(app))

    async def assigned(self, worker: str, app: str | None = None) -> list[ClaimAnswer]:
        return await self.client.answers(ClaimAnswer, "GET", "/sched/assigned",
                                         params=self._app(app, worker=worker))

    async def started(self, name: str, worker: str, task: int | None = None,
                      app: str | None = None) -> RenewAnswer:
        return await self.client.answer(RenewAnswer, "POST", self._named("started", name),
                                        encoded=_body(RenewBody(worker=worker, task=task)),
                                        params=self._app(app))

    async def stopped(self, name: str, worker: str, exit_code: int | None,
                      task: int | None = None, app: str | None = None) -> ReleaseAnswer:
        body = ReleaseBody(worker=worker, task=task, exit_code=exit_code)
        return await self.client.answer(ReleaseAnswer, "POST", self._named("stopped", name),
                                        encoded=_body(body), params=self._app(app))


@functools.cache
def _outcomes() -> TypeAdapter[list[SubmitOutcome]]:
    return TypeAdapter(list[SubmitOutcome])
