"""The jobs door: a worker's own listener where a job is submitted straight to its home.

The discussion's direct-to-worker design, for the article's one-task submits: a
client that holds a jobs pass for an app (``jobs/passes.py``, from a
broker's ``POST /sched/pass``, with the doors of the live workers) picks a job's
home itself, the first of the rendezvous order of the job's app and name over
those workers (``jobs/homes.py``, as every broker does), and sends the submit
there: one round trip, no broker in it. The door takes the body a broker's
``POST /sched/submit`` takes for one job, and commits it as the broker's call to
the home would (``JobHome.submit``): the same transaction, the same durability,
the same answer.

It refuses, each in the error shape:

- 401 without a pass of this cluster's, or with one past its expiry;
- 403 for a job of another app than its pass's;
- 421 ``misdirected`` when this worker is not the job's home as its own view has
  it (the view names another home for the job's name, or another live worker comes
  first in the rendezvous order), with that home in ``details.home``; and for what
  only a broker does (a list, a job that runs ``after`` others), without one. The
  client then asks that home, or a broker.

A job named in the view on another home is that home's (409 ``name_taken`` there, or
the job its key made). A retry that keeps the idempotency key but changes the name is
routed by the name here: only a broker's view finds a key under another name.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from typing import Protocol

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from bodega.jobs.homes import job_key, rendezvous
from bodega.jobs.passes import JobPasses
from bodega.model.errors import BadRequest, Forbidden, Misdirected, Unauthorized
from bodega.model.refusals import OtherHome
from bodega.wire.internal.jobs.calls import HomeSubmit
from bodega.wire.public.jobs.api import VIEW_TASKS, SubmitBody
from bodega.wire.transport.http import (
    answer_response,
    bearer_token,
    handle_errors,
    not_found_app_handler,
    parse_model,
    read_json,
)
from bodega.worker.jobs.home import JobHome

SUBMIT = "/sched/submit"
# Seconds a door uses the live workers it read for a submit again: reading them (every
# worker's row, every member's status) cost as much as the submit's own commit, and what a
# door knows of them is its view's, itself a gossip round or more behind.
LIVE_FRESH = 0.25


class DoorView(Protocol):
    def home_named(self, app: str, name: str) -> str | None:
        """The home the view has for the job ``name`` of ``app``, if it has one."""

    def live_workers(self) -> Iterable[str]: ...


def door_home(me: str, key: str, named: str | None, live: Iterable[str]) -> str:
    """Where a submit of the job ``key`` (``job_key(app, name)``) belongs: the home the view
    names for it, else the first of the rendezvous order over the live workers and this
    one (a worker its own view has not seen live yet still counts itself)."""
    return named or rendezvous(key, {*live, me})[0]


class JobDoor:
    def __init__(self, home: JobHome, passes: JobPasses, view: DoorView,
                 clock: Callable[[], float] = time.time,
                 ticks: Callable[[], float] = time.monotonic) -> None:
        """``clock``: what passes' expiries are checked against; ``ticks``: what the
        freshness of the live workers read is measured with."""
        self.home = home
        self.passes = passes
        self.view = view
        self.clock = clock
        self.ticks = ticks
        self._live: tuple[float, list[str]] = (-math.inf, [])  # when read, and what

    def live_workers(self) -> list[str]:
        """The live workers as the view had them at most ``LIVE_FRESH`` ago."""
        now = self.ticks()
        if now - self._live[0] >= LIVE_FRESH:
            self._live = (now, list(self.view.live_workers()))
        return self._live[1]

    def app(self) -> ASGIApp:
        """The door's one route as a bare ASGI app: a submit is all a door does, and a
        router's and its middleware's layers cost it about as much as the pass's check.
        Anything else gets the error shape: 404 for another path, 405 for another method."""
        async def door(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "http":  # a WebSocket upgrade: no such route here
                await send({"type": "websocket.close", "code": 1000})
                return
            request = Request(scope, receive)
            if scope["path"] != SUBMIT or scope["method"] != "POST":
                response = not_found_app_handler(request, HTTPException(
                    404 if scope["path"] != SUBMIT else 405))
            else:
                response = await handle_errors(request, self.submit)
            await response(scope, receive, send)

        return door

    async def submit(self, request: Request) -> Response:
        now = self.clock()
        grant = self.passes.check(bearer_token(request) or "", now)
        if grant is None:
            raise Unauthorized("unauthenticated: the jobs door takes a jobs pass (POST "
                               "/sched/pass on a broker); this one is missing, not this "
                               "cluster's, or expired")
        data = await read_json(request)
        if not isinstance(data, dict):
            raise Misdirected("a list of jobs is submitted through a broker "
                              "(POST /sched/submit)")
        body = parse_model(data, SubmitBody)
        if body.app is not None and body.app != grant.app:
            raise Forbidden(f"permission_denied: the pass is for app {grant.app}, not "
                            f"{body.app}")
        try:
            spec = body.spec(grant.app, now)
        except ValueError as exc:
            raise BadRequest(f"invalid_argument: {exc}") from None
        if spec.after:
            raise Misdirected("a job that runs after others is submitted through a broker "
                              "(POST /sched/submit): it checks those jobs")
        home = door_home(self.home.name, job_key(spec.app, spec.name),
                         self.view.home_named(spec.app, spec.name), self.live_workers())
        if home != self.home.name:
            raise Misdirected(f"misdirected: the home of job {spec.name} is {home}, not "
                              f"{self.home.name}", details=OtherHome(home=home))
        job = self.home.submit(HomeSubmit(spec=spec))
        return answer_response(self.home.status(job, tasks=job.spec.count <= VIEW_TASKS))
