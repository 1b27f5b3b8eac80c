"""A submit of a JSON list: the article's own config, each element a job of its own.

``POST /sched/submit`` with ``[{"Name": "frick", "Command": "sleep 1"}, ...]``
submits every element as if it came alone (same fields, same checks, same home), one
after another, and answers 200 with one item per element in the list's order: the job's
status, or the element's refusal in the error shape with its ``index`` (and ``name``,
when it gave one). One element refused refuses no other: each is its own job, committed
at its home before its item says so. The list as a whole is refused (400) only when it
is empty or longer than ``MAX_JOBS``.

One element at a time, not several in flight: the homes then place each job's probes
while the slots still have room, as for submits one by one. With four in flight, jobs
queued faster than their probes found room, and every job cost about four times the CPU
(``bench.jobs.queues --phases list``: 72 ms a job against 16 ms, 300 and 3,000 jobs).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from pydantic import ValidationError

from bodega.model.errors import BadRequest, BodegaError, validation_message
from bodega.wire.public.jobs.api import JobStatus, SubmitBody, SubmitOutcome, SubmitRefused

MAX_JOBS = 10_000  # elements of one list submit (the body's own size bound comes first)


class Submitter(Protocol):
    async def submit(self, app: str, body: SubmitBody) -> JobStatus: ...


def check_list(elements: list[object]) -> None:
    if not elements:
        raise BadRequest("an empty list submits nothing: give one job or more")
    if len(elements) > MAX_JOBS:
        raise BadRequest(f"at most {MAX_JOBS} jobs in one submit, not {len(elements)}")


def given_name(element: object) -> str | None:
    """The name an element gave (either spelling), for its refusal."""
    if isinstance(element, dict):
        name = element.get("Name", element.get("name"))
        if isinstance(name, str):
            return name
    return None


async def submit_each(desk: Submitter, elements: list[object],
                      app_of: Callable[[SubmitBody], str]) -> list[SubmitOutcome]:
    """Each element submitted as a job of its own; ``app_of`` names (and checks the caller
    may use) the app of an element, raising as a single submit would."""
    check_list(elements)
    outcomes: list[SubmitOutcome] = []
    for index, element in enumerate(elements):
        try:
            if not isinstance(element, dict):
                raise BadRequest(f"element {index} is not a JSON object")
            try:
                body = SubmitBody.model_validate(element)
            except ValidationError as exc:
                raise BadRequest(validation_message(exc)) from None
            outcomes.append(await desk.submit(app_of(body), body))
        except BodegaError as exc:
            outcomes.append(SubmitRefused(index=index, name=given_name(element),
                                          error=exc.message, status=exc.status))
    return outcomes
