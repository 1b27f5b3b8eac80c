"""``bodega jobs``: submit batch jobs, watch them, cancel them, read what they printed.

A job runs its command (never through a shell: give the words after ``--``)
``--count`` times, each task as a machine on bodega's own workers (pool
``bodega``), or on external workers of another ``--pool``. ``--wait`` follows
it to its end with one progress line and exits 1 unless it succeeded.
"""

from __future__ import annotations

import asyncio
import sys
from typing import TYPE_CHECKING, Annotated

import typer

from bodega.cli.commands.tasks_file import submit_file
from bodega.cli.session.api import (
    ApiUrl,
    App,
    ContextName,
    Json,
    Token,
    call,
    env_pairs,
    show_json,
    table,
)
from bodega.cli.session.app_choice import DEFAULT_CONFIG, AppOption, ConfigPath, app_name
from bodega.cli.session.errors import friendly, worded_in_flags
from bodega.jobs.periodic import Overlap
from bodega.wire.public.jobs.api import SubmitBody

if TYPE_CHECKING:
    from bodega.wire.public.jobs.api import JobStatus
    from bodega.wire.public.machines_client import MachinesClient

jobs = typer.Typer(help="Run batch jobs: submit, status, list, cancel, logs.",
                   no_args_is_help=True)

Name = Annotated[str, typer.Argument(help="The job's name")]
Wait = Annotated[bool, typer.Option("--wait", help="Follow it to its end (exit 1 unless it "
                                                   "succeeded)")]
FINISHED = ("succeeded", "failed", "cancelled")
# The API asks for a job's app as ?app= when its name is ambiguous or unknown; here, -a.
APP_FLAG = {"?app=": "-a APP"}
POLL = 0.5


def progress(job: JobStatus) -> str:
    """One line: the state, what it waits for, and its tasks queued, running, done (succeeded)
    and failed (cancelled ones too, when there are)."""
    if job.periodic is not None:
        last = f", last run {job.periodic.last_run} {job.periodic.last_run_state}" \
            if job.periodic.last_run else ""
        return f"{job.name}: {job.state} (next run {job.periodic.next_run_at}{last})"
    n = job.counts
    done, total = n.get("succeeded", 0), job.count
    state = f"waiting for {', '.join(job.waiting_for)}" if job.waiting_for else job.state
    cancelled = f", {n['cancelled']} cancelled" if n.get("cancelled") else ""
    return (f"{job.name}: {state} ({n.get('queued', 0)} queued, {n.get('running', 0)} running, "
            f"{done} done, {n.get('failed', 0)} failed{cancelled}; {done}/{total})")


async def follow(client: MachinesClient, job: JobStatus, app: str, quiet: bool) -> JobStatus:
    """Poll until the job finishes, rewriting one progress line (a line per change when not
    on a terminal)."""
    from bodega.wire.public.jobs.client import JobsApi

    api = JobsApi(client)
    tty = sys.stderr.isatty() and not quiet
    last = ""
    while True:
        line = progress(job)
        if line != last and not quiet:
            typer.echo(("\r\033[K" if tty else "") + line, err=True, nl=not tty)
            last = line
        if job.state in FINISHED:
            if tty:
                typer.echo("", err=True)
            return job
        await asyncio.sleep(POLL)
        job = await api.status(job.name, app, lines=0)


@jobs.command("submit", context_settings={"allow_interspersed_args": False})
@friendly
def submit(
    command: Annotated[list[str] | None, typer.Argument(
        help="Program and arguments (after --)", show_default=False)] = None,
    file: Annotated[str | None, typer.Option(
        "--file", "-f", help="Submit the jobs of a JSON file (- reads standard input): a "
                             "list of jobs, each {\"Name\", \"Command\", ...} as POST "
                             "/sched/submit takes one, or one job")] = None,
    app: AppOption = None, config: ConfigPath = DEFAULT_CONFIG,
    name: Annotated[str | None, typer.Option(help="The job's name (default: made up)")]
    = None,
    count: Annotated[int, typer.Option(min=1, max=10_000, help="Tasks: runs of the command")]
    = 1,
    cpus: Annotated[int | None, typer.Option(help="vCPUs per task")] = None,
    memory: Annotated[int | None, typer.Option(help="Memory per task, MB (multiple of 128)")]
    = None,
    pool: Annotated[str, typer.Option(help="bodega (its own workers), or an external pool")]
    = "bodega",
    max_attempts: Annotated[int | None, typer.Option(
        help="Attempts per task (0: until the deadline; default 3)")] = None,
    deadline: Annotated[float | None, typer.Option(help="Seconds from now it must end in")]
    = None,
    idempotency_key: Annotated[str | None, typer.Option(
        help="Submitting again with the same key gives the same job")] = None,
    env: Annotated[list[str] | None, typer.Option("--env", "-e", help="NAME=VALUE")] = None,
    region: Annotated[str | None, typer.Option(help="Regions its tasks may run in")] = None,
    after: Annotated[list[str] | None, typer.Option(
        "--after", help="Run once this job (of the app) succeeded; fail if it fails "
                        "(repeat for several)")] = None,
    cron: Annotated[str | None, typer.Option(
        help="Periodic: launch a run at each fire of this cron expression ('0 3 * * *', "
             "'@hourly')")] = None,
    time_zone: Annotated[str, typer.Option(
        help="Periodic: the IANA time zone --cron is read in")] = "UTC",
    overlap: Annotated[Overlap, typer.Option(
        help="Periodic: a fire while the last run goes skips, queues, or cancels it")]
    = Overlap.SKIP,
    wait: Wait = False, api_url: ApiUrl = None, token: Token = None,
    context: ContextName = None, json: Json = False,
) -> None:
    """Submit a job: COMMAND runs --count times, each a machine (never through a shell); or
    the jobs of a JSON file with -f."""
    app = app_name(app, config)
    if file is not None:
        if command:
            raise typer.BadParameter("give a command after -- or a file of jobs, not both",
                                     param_hint="--file")
        submit_file(file, app, api_url, token, context, json)
        return
    if not command:
        raise typer.BadParameter("give the command to run after -- (bodega jobs submit -a APP "
                                 "-- CMD ARGS...), or a file of jobs with -f")
    if cron is not None and wait:
        raise typer.BadParameter("a periodic job never ends: follow its runs with "
                                 "`bodega jobs list` instead", param_hint="--wait")
    body = SubmitBody.model_validate({
        "name": name, "command": command, "count": count, "cpus": cpus,
        "memory_mb": memory, "pool": pool, "max_attempts": max_attempts,
        "deadline": deadline, "idempotency_key": idempotency_key,
        "env": env_pairs(env) if env else None, "region": region, "after": after or None,
        "periodic": None if cron is None else {"cron": cron, "time_zone": time_zone,
                                               "overlap": overlap.value}})

    async def work(client: MachinesClient) -> JobStatus:
        from bodega.wire.public.jobs.client import JobsApi

        job = await JobsApi(client).submit(body, app)
        if not wait:
            return job
        if not json:
            typer.echo(f"Job {job.name}: {job.count} task(s) submitted, home {job.home}",
                       err=True)
        return await follow(client, job, app, quiet=json)

    job = call(api_url, token, work, context=context)
    if json:
        show_json(job)
    elif job.periodic is not None:
        typer.echo(f"Job {job.name}: scheduled ({job.periodic.cron} in "
                   f"{job.periodic.time_zone}), first run at {job.periodic.next_run_at} "
                   f"(home {job.home}); `bodega jobs status {job.name} -a {app}`")
    elif not wait:
        waits = f", after {', '.join(job.waiting_for)}" if job.waiting_for else ""
        typer.echo(f"Job {job.name}: {job.count} task(s) queued in pool {job.pool}{waits} "
                   f"(home {job.home}); `bodega jobs status {job.name} -a {app}`")
    if wait and job.state != "succeeded":
        raise typer.Exit(1)


@jobs.command("status")
@friendly
def status(name: Name, app: App = "", wait: Wait = False,
           lines: Annotated[int, typer.Option(
               "--lines", "-n", min=0, max=100,
               help="The last lines each task printed to show (0: none)")] = 10,
           api_url: ApiUrl = None, token: Token = None, context: ContextName = None,
           json: Json = False) -> None:
    """A job's state, and where each task runs or ran, its attempts, exit codes, start and
    end, and the last lines it printed."""

    async def work(client: MachinesClient) -> JobStatus:
        from bodega.wire.public.jobs.client import JobsApi

        api = JobsApi(client)
        job = await api.status(name, app or None, lines=0 if wait else lines)
        if not wait:
            return job
        job = await follow(client, job, app, quiet=json)
        return await api.status(name, app or None, lines=lines)  # its last lines, at its end

    with worded_in_flags(APP_FLAG):
        job = call(api_url, token, work, context=context)
    if json:
        show_json(job)
    else:
        show_status(job)
    if wait and job.state != "succeeded":
        raise typer.Exit(1)


def show_status(job: JobStatus) -> None:
    for label, value in (("name", job.name), ("app", job.app), ("state", job.state),
                         ("pool", job.pool), ("home", job.home),
                         ("command", " ".join(job.command)), ("created", job.created_at),
                         ("finished", job.finished_at or ""), *details(job)):
        typer.echo(f"{label:<9} {value}")
    if job.periodic is not None:
        return
    table(["TASK", "STATE", "ATTEMPTS", "EXIT CODES", "WORKER", "MACHINE", "STARTED", "ENDED",
           "REASON"],
          [(t.index, t.state, t.attempts,
            ",".join("-" if c is None else str(c) for c in t.exit_codes), t.worker,
            t.machine_id, t.started_at, t.ended_at, t.reason) for t in job.tasks or []])
    for task in job.tasks or []:
        if task.output:
            typer.echo(f"\ntask {task.index}, its last lines:")
            for line in task.output:
                typer.echo(f"  {line}")


def details(job: JobStatus) -> list[tuple[str, str]]:
    """The lines a job shows only when it has them: what it runs after, its schedule."""
    lines = []
    if job.after:
        lines.append(("after", ", ".join(job.after)
                      + (f" (waiting for {', '.join(job.waiting_for)})" if job.waiting_for
                         else "")))
    if job.parent:
        lines.append(("run of", f"{job.parent}, for {job.fire_at}"))
    if (every := job.periodic) is not None:
        lines += [("schedule", f"{every.cron} in {every.time_zone}, overlap {every.overlap}"),
                  ("next run", every.next_run_at),
                  ("runs", f"{every.launched} launched, {every.skipped} skipped"
                           + (f", {every.pending} queued" if every.pending else "")),
                  ("last run", f"{every.last_run} {every.last_run_state}" if every.last_run
                   else "none yet")]
    return lines


@jobs.command("list")
@friendly
def list_jobs(app: App = "", state: Annotated[str, typer.Option(
        help="any, unclaimed (tasks waiting), or a state: queued, running, succeeded...")]
        = "any",
        pool: Annotated[str | None, typer.Option(help="Only this pool's")] = None,
        api_url: ApiUrl = None, token: Token = None, context: ContextName = None,
        json: Json = False) -> None:
    """An app's jobs, newest first (as the cluster's view has them)."""

    async def work(client: MachinesClient) -> list[JobStatus]:
        from bodega.wire.public.jobs.client import JobsApi

        return await JobsApi(client).jobs(app or None, pool, state)

    found = call(api_url, token, work, context=context)
    if json:
        show_json(found)
        return
    table(["NAME", "STATE", "TASKS", "POOL", "HOME", "COMMAND", "CREATED"],
          [(j.name, j.state, " ".join(f"{n} {s}" for s, n in j.counts.items() if n), j.pool,
            j.home, " ".join(j.command)[:60], j.created_at) for j in found])


@jobs.command("cancel")
@friendly
def cancel(name: Name, app: App = "", api_url: ApiUrl = None, token: Token = None,
           context: ContextName = None, json: Json = False) -> None:
    """Cancel a job: queued tasks are dropped, running ones stopped (SIGTERM, then SIGKILL)."""

    async def work(client: MachinesClient) -> JobStatus:
        from bodega.wire.public.jobs.client import JobsApi

        return await JobsApi(client).cancel(name, app or None)

    with worded_in_flags(APP_FLAG):
        job = call(api_url, token, work, context=context)
    if json:
        show_json(job)
    else:
        typer.echo(f"Job {job.name}: cancel requested ({progress(job)})")


@jobs.command("logs")
@friendly
def logs(name: Name, app: App = "", task: Annotated[int, typer.Option(
        min=0, help="Which task")] = 0, api_url: ApiUrl = None, token: Token = None,
         context: ContextName = None) -> None:
    """What a task printed (its last attempt), stdout and stderr together."""

    async def work(client: MachinesClient) -> bytes:
        from bodega.wire.public.jobs.client import JobsApi

        return await JobsApi(client).logs(name, task, app or None)

    with worded_in_flags(APP_FLAG):
        output = call(api_url, token, work, context=context)
    sys.stdout.write(output.decode(errors="replace"))

