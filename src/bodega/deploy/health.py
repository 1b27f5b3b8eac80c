"""Waiting for one machine: started, then a smoke check, then its health checks passing.

- started: its state is ``started`` (on the instance the update made, when one is
  named) within the wait timeout; ``failed``, ``stopped`` or ``destroyed`` fail it,
  and so does an exit while it is starting (a crash loop restarting it with backoff
  spends nearly all its time ``starting``: its exits say why at once).
- smoke: for ``smoke`` seconds after it started it must not exit (a program that
  crashes and is restarted fails here), and the failure carries its last log lines.
- checks: when the machine reports check results (``checks: [{name, status}]``),
  every one passing before the wait timeout (one not yet probed shows ``warning``).
  A machine whose config has checks but that reports no result for 5 s, or that has
  none, is healthy once started (a server that runs no checks reports none).

Every change of a check's status seen while waiting (from the smoke check on) is
passed to ``on_check`` as it is seen, so a deploy says a check went critical the
moment it does rather than when the wait times out. A check starts as ``warning``
(not yet probed in this run).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from pydantic import BaseModel, ConfigDict

from bodega.deploy.core.machine_spec import has_checks
from bodega.model.machine import CheckStatus, ExitEvent, Machine, MachineEvent
from bodega.wire.public.machines_client import MachinesClient

POLL = 0.25
UNREPORTED = 5.0  # seconds to wait for a configured check's first result to appear
SETTLE = 3.0  # seconds a machine may rest between the stop and the start of an update
DOWN = ("failed", "stopped", "destroyed", "suspended")
RESTARTING = ("starting", "restarting")


class CheckChange(BaseModel):
    """A health check of a machine changed status while a deploy waited on it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    old: str
    new: str
    output: str = ""

    def describe(self) -> str:
        snippet = " ".join(self.output.split())[:120]
        return f"check {self.name} {self.old} -> {self.new}" + (f": {snippet}" if snippet
                                                                 else "")


class CheckWatch:
    """The statuses seen so far; ``seen`` reports each change once, in the order seen."""

    def __init__(self, on_check: Callable[[CheckChange], None]) -> None:
        self.on_check = on_check
        self.statuses: dict[str, str] = {}

    def seen(self, machine: Machine) -> None:
        for check in machine.checks or []:
            old = self.statuses.get(check.name, "warning")  # not yet probed in this run
            self.statuses[check.name] = check.status
            if check.status != old:
                self.on_check(CheckChange(name=check.name, old=old, new=check.status,
                                          output=check.output))


class MachineFailed(Exception):
    def __init__(self, step: str, why: str) -> None:
        super().__init__(f"{step}: {why}")
        self.step = step
        self.why = why


def _exit_detail(event: MachineEvent) -> str:
    exit_event = event.exit_event()
    if exit_event is not None:
        return exit_event.describe()
    return event.error() or event.status or "exited"


def exit_code(event: MachineEvent) -> int | None:
    """An ``exit`` event's code (None for an event that says none)."""
    exit_event: ExitEvent | None = event.exit_event()
    return None if exit_event is None else exit_event.exit_code


async def _log_tail(client: MachinesClient, app: str, machine_id: str) -> str:
    lines = await client.log_lines(app, machine_id)
    return (" | last log lines: " + " / ".join(lines)) if lines else ""


def exits_after(events: list[MachineEvent], since_ms: int) -> list[MachineEvent]:
    return [e for e in events if e.type == "exit" and e.timestamp > since_ms]


def failing_checks(machine: Machine) -> list[CheckStatus]:
    return [c for c in machine.checks or [] if c.status != "passing"]


async def wait_healthy(client: MachinesClient, app: str, machine_id: str, instance: str,
                       *, timeout: float, smoke: float,
                       on_check: Callable[[CheckChange], None] = lambda _c: None) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    watch = CheckWatch(on_check)
    machine = await _started(client, app, machine_id, instance, deadline)
    watch.seen(machine)
    events = await client.events(app, machine_id, limit=50)
    since = max((e.timestamp for e in events if e.type == "start"), default=0)
    smoke_end = loop.time() + smoke
    while loop.time() < smoke_end:
        await asyncio.sleep(POLL * 2)
        events, machine = await asyncio.gather(client.events(app, machine_id, limit=50),
                                               client.machine(app, machine_id))
        watch.seen(machine)
        if exited := exits_after(events, since):
            raise MachineFailed("smoke check", f"exited within {smoke:.0f}s of starting "
                                f"({_exit_detail(exited[0])})"
                                + await _log_tail(client, app, machine_id))
    unreported_until = loop.time() + UNREPORTED
    while True:
        machine = await client.machine(app, machine_id)
        watch.seen(machine)
        if machine.state in DOWN:
            raise MachineFailed("health checks", f"machine is {machine.state}")
        failing = failing_checks(machine)
        # Checks configured but no results yet: the first may still be on its way; a
        # server that runs no checks never reports any, and its machine counts once started.
        waiting = (machine.config is not None and has_checks(machine.config)
                   and not machine.checks and loop.time() < unreported_until)
        if not failing and not waiting:
            return
        if loop.time() > deadline:
            why = "; ".join(f"{c.name} is {c.status}"
                            + (f" ({c.output[:200]})" if c.output else "")
                            for c in failing)
            raise MachineFailed("health checks", f"not passing after {timeout:.0f}s: {why}")
        await asyncio.sleep(POLL * 2)


async def _started(client: MachinesClient, app: str, machine_id: str, instance: str,
                   deadline: float) -> Machine:
    loop = asyncio.get_running_loop()
    down_since: float | None = None
    seen_until: int | None = None  # the newest event of the first look at the current run
    while True:
        machine = await client.machine(app, machine_id)
        current = not instance or machine.instance_id == instance
        if current and machine.state == "started":
            return machine
        if current and machine.state in RESTARTING:
            # A program that exits as it starts is restarted after a growing pause, and
            # spends its time "starting": its exits say why long before the wait times out.
            events = await client.events(app, machine_id, limit=50)
            if seen_until is None:
                seen_until = max((e.timestamp for e in events), default=0)
            elif exited := exits_after(events, seen_until):
                raise MachineFailed("start", f"exits as it starts ({_exit_detail(exited[0])})"
                                    + await _log_tail(client, app, machine_id))
        # An update passes through stopped on its way to started: only staying down fails.
        down = current and machine.state in DOWN
        down_since = (down_since or loop.time()) if down else None
        if down_since is not None and (machine.state in ("failed", "destroyed")
                                       or loop.time() - down_since > SETTLE):
            # The newest event says why (a program not found, a failed run); the state
            # alone ("machine is failed") sends the user digging through events.
            trouble = machine.trouble()
            if machine.state == "failed" and trouble:
                raise MachineFailed("start", trouble)  # a step failed: its program never ran
            raise MachineFailed("start", f"machine is {machine.state}"
                                + (f" ({trouble})" if trouble else "")
                                + await _log_tail(client, app, machine_id))
        if loop.time() > deadline:
            raise MachineFailed("start", f"not started in time (state {machine.state})")
        await asyncio.sleep(POLL)
