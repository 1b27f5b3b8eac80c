"""A submit of a JSON list: the article's own config, each element a job of its own.

``POST /sched/submit`` with ``[{"Name": "frick", "Command": "sleep 1"}, ...]``
submits every element as if it came alone (same fields, same checks, same home),
``SUBMITS_AT_ONCE`` of them in flight at a time, and answers 200 with one item per
element in the list's order: the job's status, or the element's refusal in the error
shape with its ``index`` (and ``name``, when it gave one). One element refused
refuses no other: each is its own job, committed at its home before its item says so.
The list as a whole is refused (400) only when it is empty or longer than ``MAX_JOBS``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

from pydantic import ValidationError

from bodega.model.errors import BadRequest, BodegaError, validation_message
from bodega.wire.public.jobs.api import JobStatus, SubmitBody, SubmitOutcome, SubmitRefused

MAX_JOBS = 10_000  # elements of one list submit (the body's own size bound comes first)
SUBMITS_AT_ONCE = 16  # elements in flight to their homes at a time


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
    gate = asyncio.Semaphore(SUBMITS_AT_ONCE)

    async def one(index: int, element: object) -> SubmitOutcome:
        try:
            if not isinstance(element, dict):
                raise BadRequest(f"element {index} is not a JSON object")
            try:
                body = SubmitBody.model_validate(element)
            except ValidationError as exc:
                raise BadRequest(validation_message(exc)) from None
            async with gate:
                return await desk.submit(app_of(body), body)
        except BodegaError as exc:
            return SubmitRefused(index=index, name=given_name(element), error=exc.message,
                                 status=exc.status)

    return list(await asyncio.gather(*(one(i, e) for i, e in enumerate(elements))))
