"""``bodega jobs submit -f FILE``: the jobs of a JSON file, in one request.

The file is the article's config as written: a list of jobs (``[{"Name": "frick",
"Command": "sleep 1", "Restart": true}, ...]``), or one job. Every element is read as
``POST /sched/submit`` reads one before anything is sent, so a file with a mistake
submits nothing and names the element; the broker then commits each element as a job
of its own and says, element by element, what became of it (``PER_REQUEST`` elements
a request). A line per job; exit 1 if
the broker refused any.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from pydantic import ValidationError

from bodega.cli.session.api import call, show_json
from bodega.model.errors import validation_message
from bodega.wire.public.jobs.api import JobStatus, SubmitBody

# Jobs per request: the broker commits a list's jobs one after another (about 10 ms each
# here), so a request of this many is answered well within the client's timeout.
PER_REQUEST = 500

if TYPE_CHECKING:
    from bodega.wire.public.jobs.api import SubmitOutcome
    from bodega.wire.public.machines_client import MachinesClient


def read_jobs(file: str) -> list[SubmitBody]:
    """The file's jobs, each checked as the API checks one; ValueError names the element (the
    command prints it in one line)."""
    where = "standard input" if file == "-" else file
    try:
        text = sys.stdin.read() if file == "-" else Path(file).read_text()
    except OSError as exc:
        raise ValueError(f"cannot read {where}: {exc.strerror}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{where} is not JSON: {exc.msg} at line {exc.lineno}") from None
    elements = data if isinstance(data, list) else [data]
    if not elements:
        raise ValueError(f"{where} lists no job")
    jobs = []
    for index, element in enumerate(elements):
        if not isinstance(element, dict):
            raise ValueError(f"{where}: element {index} is not a job (a JSON object)")
        try:
            jobs.append(SubmitBody.model_validate(element))
        except ValidationError as exc:
            raise ValueError(f"{where}: element {index}: {validation_message(exc)}") from None
    return jobs


def submit_file(file: str, app: str, api_url: str | None, token: str | None,
                context: str | None, as_json: bool) -> None:
    jobs = read_jobs(file)

    async def work(client: MachinesClient) -> list[SubmitOutcome]:
        from bodega.wire.public.jobs.client import JobsApi

        api, outcomes = JobsApi(client), []
        for first in range(0, len(jobs), PER_REQUEST):
            part = await api.submit_list(jobs[first:first + PER_REQUEST], app)
            outcomes += [o if isinstance(o, JobStatus)
                         else o.model_copy(update={"index": o.index + first}) for o in part]
        return outcomes

    outcomes = call(api_url, token, work, context=context)
    refused = 0
    if as_json:
        show_json(outcomes)
    for outcome in outcomes:
        if isinstance(outcome, JobStatus):
            if not as_json:
                typer.echo(f"Job {outcome.name}: {outcome.count} task(s) queued in pool "
                           f"{outcome.pool} (home {outcome.home})")
            continue
        refused += 1
        if not as_json:
            named = f" ({outcome.name})" if outcome.name else ""
            typer.echo(f"Error: job {outcome.index}{named} refused: {outcome.error}", err=True)
    if refused:
        if not as_json:
            typer.echo(f"{refused} of {len(outcomes)} jobs refused", err=True)
        raise typer.Exit(1)
    if not as_json:
        typer.echo(f"{len(outcomes)} jobs submitted; `bodega jobs list -a {app}`", err=True)
