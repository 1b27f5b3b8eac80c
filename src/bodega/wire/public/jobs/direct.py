"""Submits straight to each job's home, through the workers' jobs doors (``docs/jobs.md``).

The discussion's direct-to-worker client: it asks a broker once for a jobs pass
and the live workers' doors (``POST /sched/pass``), then sends each job to the
first of the rendezvous order of its app and name over those workers
(``jobs/homes.py``, the order every broker computes), one round trip with no
broker in it. The answer is the job's status, as a broker's submit answers.

What the door refuses it cannot decide goes where it can be decided: a 421
naming another home (this client's doors were older than that worker's view)
goes there once; one naming none (a job that runs after others) goes to the
broker; a door that refuses the connection (its worker gone: it never saw the
submit) has the doors asked for again, and the job goes to the broker. A 401
(the pass expired) gets a new pass once. A submit that reached a door but got no
answer is ``Indeterminate``, as from a broker: asked again with the same
idempotency key, it finds the job it made, if it made one.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from bodega.jobs.homes import job_key, rendezvous
from bodega.model.errors import Misdirected, Unauthorized, Unreachable
from bodega.model.refusals import OtherHome
from bodega.wire.public.jobs.api import JobPassAnswer, JobStatus, SubmitBody
from bodega.wire.public.jobs.client import JobsApi
from bodega.wire.transport.json_client import JsonClient
from bodega.wire.transport.stream_http import StreamHttp

RENEW_BEFORE = 60.0  # seconds before its expiry a pass is replaced


class DirectSubmits:
    def __init__(self, broker: JsonClient, app: str | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        """``broker``: a client of a broker's public API with the caller's token; ``app``:
        the jobs' app (None: the token's own, or the admin token's default app)."""
        self.broker = broker
        self.api = JobsApi(broker)
        self.app = app
        self.clock = clock
        self.granted: JobPassAnswer | None = None
        self._doors: dict[str, JsonClient] = {}
        # The doors' calls travel on asyncio's own streams, kept alive: one small submit
        # after another, at less than half aiohttp's CPU a call (``stream_http``).
        self._door_calls = StreamHttp()
        self.sent_direct = self.sent_to_broker = 0  # where the submits went

    async def renew(self) -> JobPassAnswer:
        """A new pass and the doors as the broker sees them now."""
        self.granted = await self.broker.answer(JobPassAnswer, "POST", "/sched/pass",
                                                params={"app": self.app})
        self._doors = {door.worker: JsonClient(door.url, self.granted.token,
                                               transport=self._door_calls, what="jobs door")
                       for door in self.granted.homes}
        return self.granted

    def home_of(self, name: str) -> str | None:
        """The worker whose door a job called ``name`` goes to (None: no door known)."""
        if self.granted is None or not self._doors:
            return None
        return rendezvous(job_key(self.granted.app, name), self._doors)[0]

    async def submit(self, body: SubmitBody) -> JobStatus:
        """The job committed at its home, as ``POST /sched/submit`` would answer it."""
        if body.name is None:  # the name picks the home: made here, as a broker makes it
            body = body.model_copy(update={"name": body.job_name()})
        if self.granted is None or self.granted.expires_at - self.clock() < RENEW_BEFORE:
            await self.renew()
        name = body.job_name()
        home = self.home_of(name)
        for attempt in range(3):
            door = self._doors.get(home or "")
            if door is None:
                break
            try:
                status = await door.answer(JobStatus, "POST", "/sched/submit",
                                           encoded=_encoded(body))
            except Misdirected as exc:
                if not isinstance(exc.details, OtherHome) or attempt:
                    break
                home = exc.details.home
                continue
            except Unauthorized:
                if attempt:
                    raise
                await self.renew()
                continue
            except Unreachable:
                await self.renew()
                break
            self.sent_direct += 1
            return status
        self.sent_to_broker += 1
        return await self.api.submit(body, self.app)

    async def aclose(self) -> None:
        await self._door_calls.aclose()


def _encoded(body: SubmitBody) -> bytes:
    return body.model_dump_json(exclude_none=True, by_alias=False).encode()
