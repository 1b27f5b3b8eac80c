"""Waiting for one machine: started, then a smoke check, then its health checks passing.

- started: its state is ``started`` (on the instance the update made, when one is
  named) within the wait timeout; ``failed``, ``stopped`` or ``destroyed`` fail it.
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
from typing import Any

from pydantic import BaseModel, ConfigDict

from bodega.deploy import calls
from bodega.deploy.machine_spec import has_checks
from bodega.wire.machines_client import MachinesClient

POLL = 0.25
UNREPORTED = 5.0  # seconds to wait for a configured check's first result to appear
SETTLE = 3.0  # seconds a machine may rest between the stop and the start of an update
DOWN = ("failed", "stopped", "destroyed", "suspended")


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

    def seen(self, machine: dict[str, Any]) -> None:
        for check in machine.get("checks") or []:
            name, status = str(check.get("name")), str(check.get("status"))
            old = self.statuses.get(name, "warning")  # not yet probed in this run
            self.statuses[name] = status
            if status != old:
                self.on_check(CheckChange(name=name, old=old, new=status,
                                          output=str(check.get("output") or "")))


class MachineFailed(Exception):
    def __init__(self, step: str, why: str) -> None:
        super().__init__(f"{step}: {why}")
        self.step = step
        self.why = why


def exit_status(event: dict[str, Any]) -> dict[str, Any]:
    """An ``exit`` event's ``exit_event`` (code, signal, requested_stop...); {} if none."""
    return dict((event.get("request") or {}).get("exit_event") or {})


def _exit_detail(event: dict[str, Any]) -> str:
    exit_event = exit_status(event)
    if exit_event:
        return f"exit code {exit_event.get('exit_code')}" + (
            f", signal {exit_event['signal']}" if exit_event.get("signal") else "")
    return str((event.get("request") or {}).get("error") or event.get("status") or "exited")


def exits_after(events: list[dict[str, Any]], since_ms: int) -> list[dict[str, Any]]:
    return [e for e in events if e.get("type") == "exit" and int(e.get("timestamp", 0)) > since_ms]


def failing_checks(machine: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in machine.get("checks") or [] if c.get("status") != "passing"]


async def wait_healthy(client: MachinesClient, app: str, machine_id: str, instance: str,
                       *, timeout: float, smoke: float,
                       on_check: Callable[[CheckChange], None] = lambda _c: None) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    watch = CheckWatch(on_check)
    machine = await _started(client, app, machine_id, instance, deadline)
    watch.seen(machine)
    events = list(await client.read(app, machine_id, "events", limit=50))
    since = max((int(e.get("timestamp", 0)) for e in events if e.get("type") == "start"),
                default=0)
    smoke_end = loop.time() + smoke
    while loop.time() < smoke_end:
        await asyncio.sleep(POLL * 2)
        events, machine = await asyncio.gather(client.read(app, machine_id, "events", limit=50),
                                               client.machine(app, machine_id))
        watch.seen(machine)
        if exited := exits_after(events, since):
            lines = await calls.last_log_lines(client, app, machine_id)
            tail = (" | last log lines: " + " / ".join(lines)) if lines else ""
            raise MachineFailed("smoke check", f"exited within {smoke:.0f}s of starting "
                                f"({_exit_detail(exited[0])}){tail}")
    unreported_until = loop.time() + UNREPORTED
    while True:
        machine = await client.machine(app, machine_id)
        watch.seen(machine)
        if machine["state"] in DOWN:
            raise MachineFailed("health checks", f"machine is {machine['state']}")
        failing = failing_checks(machine)
        # Checks configured but no results yet: the first may still be on its way; a
        # server that runs no checks never reports any, and its machine counts once started.
        waiting = (has_checks(machine.get("config") or {}) and not machine.get("checks")
                   and loop.time() < unreported_until)
        if not failing and not waiting:
            return
        if loop.time() > deadline:
            why = "; ".join(f"{c.get('name')} is {c.get('status')}"
                            + (f" ({str(c.get('output'))[:200]})" if c.get("output") else "")
                            for c in failing)
            raise MachineFailed("health checks", f"not passing after {timeout:.0f}s: {why}")
        await asyncio.sleep(POLL * 2)


async def _started(client: MachinesClient, app: str, machine_id: str, instance: str,
                   deadline: float) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    down_since: float | None = None
    while True:
        machine = await client.machine(app, machine_id)
        current = not instance or machine.get("instance_id") == instance
        if current and machine["state"] == "started":
            return machine
        # An update passes through stopped on its way to started: only staying down fails.
        down = current and machine["state"] in DOWN
        down_since = (down_since or loop.time()) if down else None
        if down_since is not None and (machine["state"] in ("failed", "destroyed")
                                       or loop.time() - down_since > SETTLE):
            found = [e for e in machine.get("events") or [] if e.get("type") == "exit"]
            detail = f" ({_exit_detail(found[0])})" if found else ""
            lines = await calls.last_log_lines(client, app, machine_id)
            tail = (" | last log lines: " + " / ".join(lines)) if lines else ""
            raise MachineFailed("start", f"machine is {machine['state']}{detail}{tail}")
        if loop.time() > deadline:
            raise MachineFailed("start", f"not started in time (state {machine['state']})")
        await asyncio.sleep(POLL)
