"""Commands run in a machine's context (exec), on both event loops the worker may use."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
import uvloop

from bodega.worker.drivers.base import ExecResult
from bodega.worker.drivers.process.control import run_bounded

LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}


def on(loop: str, work: Coroutine[Any, Any, list[ExecResult]]) -> list[ExecResult]:
    with asyncio.Runner(loop_factory=LOOPS[loop]) as runner:
        return runner.run(work)


@pytest.mark.parametrize("loop", LOOPS)
def test_a_command_that_ends_before_reading_its_stdin_is_answered(loop: str) -> None:
    # `echo` is often gone before its stdin is written: that must not fail the exec.
    async def many() -> list[ExecResult]:
        return [await run_bounded(["/bin/echo", "hi"], stdin, 10)
                for _ in range(40) for stdin in (b"", b"unread input\n")]
    for result in on(loop, many()):
        assert (result.exit_code, result.stdout, result.exit_signal) == (0, "hi\n", None)


@pytest.mark.parametrize("loop", LOOPS)
def test_stdin_is_fed_and_both_outputs_are_kept(loop: str) -> None:
    async def one() -> list[ExecResult]:
        script = "read a; echo out $a; echo err $a >&2; exit 3"
        return [await run_bounded(["/bin/sh", "-c", script], b"x\n", 10),
                await run_bounded(["/bin/sh", "-c", script], None, 10)]
    fed, empty = on(loop, one())
    assert (fed.exit_code, fed.stdout, fed.stderr) == (3, "out x\n", "err x\n")
    assert (empty.exit_code, empty.stdout, empty.stderr) == (3, "out\n", "err\n")


@pytest.mark.parametrize("loop", LOOPS)
def test_a_command_past_its_timeout_is_killed_with_its_session(loop: str) -> None:
    async def one() -> list[ExecResult]:
        return [await run_bounded(["/bin/sh", "-c", "echo begun; sleep 60 & wait"], None, 1),
                await run_bounded(["/nonexistent/program"], None, 1)]
    slow, missing = on(loop, one())
    assert (slow.exit_code, slow.exit_signal) == (124, signal.SIGKILL)
    assert slow.stdout == "begun\n"
    assert slow.stderr.endswith("exec: timed out\n")
    assert missing.exit_code == 127
