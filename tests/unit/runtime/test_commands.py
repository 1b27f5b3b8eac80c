"""Commands run from the loop: their exit code, output and input, and what cannot run."""

from __future__ import annotations

import asyncio

import pytest

from bodega.runtime.commands import run_command


async def test_a_command_gets_its_input_and_gives_its_output_and_code() -> None:
    done = await run_command("sh", "-c", "cat; echo oops >&2; exit 3", stdin=b"hello\n")
    assert (done.returncode, done.stdout, done.stderr) == (3, b"hello\n", b"oops\n")


async def test_output_not_asked_for_is_not_kept() -> None:
    done = await run_command("echo", "hi", stdout=False)
    assert (done.returncode, done.stdout) == (0, b"")


async def test_the_loop_runs_while_a_command_runs() -> None:
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    ticker = asyncio.create_task(tick())
    await run_command("sh", "-c", "read line", stdin=b"go\n")
    ticker.cancel()
    assert ticks > 0


async def test_a_command_that_does_not_exist_raises() -> None:
    with pytest.raises(FileNotFoundError):
        await run_command("/nonexistent/bodega-command")
