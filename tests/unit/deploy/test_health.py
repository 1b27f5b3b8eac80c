"""The deploy's wait for one machine, fed the answers of a machine that crash-loops."""

from __future__ import annotations

import asyncio

import pytest

from bodega.deploy import health
from bodega.deploy.health import MachineFailed, wait_healthy
from bodega.model.machine import Machine, MachineEvent


class CrashLoop:
    """A machine restarted after each exit: "starting" whenever it is looked at, one more
    exit (code 3) in its events at each look, as a worker's backoff makes it."""

    def __init__(self) -> None:
        self.looks = 0
        self.events_seen: list[MachineEvent] = []

    async def machine(self, app: str, machine_id: str) -> Machine:
        self.looks += 1
        return Machine(id=machine_id, state="starting", instance_id="i2")

    async def events(self, app: str, machine_id: str, limit: int | None = None
                     ) -> list[MachineEvent]:
        self.events_seen.insert(0, MachineEvent(
            type="exit", status="stopped", timestamp=1000 + self.looks,
            request={"exit_event": {"exit_code": 3, "oom_killed": False,
                                    "requested_stop": False, "signal": 0}}))
        return list(self.events_seen)

    async def log_lines(self, app: str, machine_id: str, lines: int = 10) -> list[str]:
        return ["boom"]


async def test_a_program_that_exits_as_it_starts_fails_the_wait_with_its_exit_code(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(health, "POLL", 0.01)
    with pytest.raises(MachineFailed) as failed:
        await asyncio.wait_for(wait_healthy(
            CrashLoop(), "app", "m1", "i2", timeout=3600, smoke=1), 30)  # type: ignore[arg-type]
    assert failed.value.step == "start"
    assert "exit code 3" in failed.value.why
    assert "last log lines: boom" in failed.value.why


async def test_exits_from_before_the_first_look_are_not_this_runs() -> None:
    """The first look only marks where this run's events begin: a wait that sees no exit
    after it times out as not started, rather than blaming an earlier run's exit."""

    class Quiet(CrashLoop):
        async def events(self, app: str, machine_id: str, limit: int | None = None
                         ) -> list[MachineEvent]:
            return [MachineEvent(type="exit", timestamp=999,
                                 request={"exit_event": {"exit_code": 3}})]

    with pytest.raises(MachineFailed) as failed:
        await wait_healthy(Quiet(), "app", "m1", "i2", timeout=0.6,  # type: ignore[arg-type]
                           smoke=1)
    assert failed.value.why == "not started in time (state starting)"


async def test_a_machine_whose_program_is_not_found_fails_the_wait_naming_the_cause() -> None:
    """A step that failed (the program not found) leaves the machine ``failed`` with the
    step's error as its newest event: the wait says that error, not "machine is failed"."""
    error = "exec: nosuchprogram: not found in PATH /usr/bin:/bin"

    class NotFound(CrashLoop):
        async def machine(self, app: str, machine_id: str) -> Machine:
            return Machine(id=machine_id, state="failed", instance_id="i2", events=[
                MachineEvent(type="launch", status="failed", timestamp=2000,
                             request={"error": error, "step": "prepare"}),
                MachineEvent(type="launch", status="created", timestamp=1000)])

    with pytest.raises(MachineFailed) as failed:
        await wait_healthy(NotFound(), "app", "m1", "i2", timeout=5,  # type: ignore[arg-type]
                           smoke=0)
    assert (failed.value.step, failed.value.why) == ("start", error)
