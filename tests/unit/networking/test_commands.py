"""The private network's host commands: their output and errors, and never the loop's fork."""

from __future__ import annotations

import asyncio
from typing import Any, NoReturn

import pytest

from bodega.networking.commands import CommandFailed, run


@pytest.fixture
async def no_loop_spawns(monkeypatch: pytest.MonkeyPatch) -> None:
    """The running loop refuses to spawn a process itself (its ``fork`` holds the loop)."""
    loop = asyncio.get_running_loop()

    async def refused(*_args: Any, **_kwargs: Any) -> NoReturn:
        raise AssertionError("a command spawned through the event loop")

    monkeypatch.setattr(loop, "subprocess_exec", refused)


async def test_a_command_gives_its_output_without_the_loop_spawning_it(
        no_loop_spawns: None) -> None:
    assert await run("sh", "-c", "cat; echo done", stdin=b"batch\n") == "batch\ndone\n"


async def test_a_failed_command_names_itself_and_its_error(no_loop_spawns: None) -> None:
    with pytest.raises(CommandFailed, match="sh -c echo nope >&2; exit 2 failed: nope"):
        await run("sh", "-c", "echo nope >&2; exit 2")
    assert await run("sh", "-c", "exit 2", check=False) == ""


async def test_a_command_that_does_not_answer_in_time_is_killed_and_named(
        no_loop_spawns: None) -> None:
    with pytest.raises(CommandFailed, match=r"sleep 30 did not answer within 0\.2 s"):
        await run("sleep", "30", timeout=0.2)
