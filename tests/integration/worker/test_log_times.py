"""Every line of a machine's log carries the time it was written, across rotation, a
worker restart and the machine's next start.

The files are real and the keeper is the worker's own; the test writes the log itself
and sets its modification time, as a machine writing at those moments would, so the
times asserted are exact.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path

from bodega.worker.api.log_routes import read_history
from bodega.worker.drivers.process import ProcessDriver
from bodega.worker.drivers.process.logfiles import LogJanitor, log_path
from bodega.worker.drivers.process.logtimes import read_checkpoints, times_path
from tests.poll_kit import until

from .test_process_driver import spec


def write(path: Path, text: str, at: float) -> None:
    with path.open("a") as handle:
        handle.write(text)
    os.utime(path, (at, at))


def machine_log(tmp_path: Path) -> tuple[Path, Path]:
    machines = tmp_path / "machines"
    path = log_path(machines / "m1")
    path.parent.mkdir(parents=True)
    return machines, path


def test_each_line_carries_when_it_was_written_not_when_its_file_last_was(
        tmp_path: Path) -> None:
    machines, path = machine_log(tmp_path)
    keeper = LogJanitor(max_bytes=1 << 20)
    write(path, "tick 0\n", 1000.0)
    keeper.stamp_all(machines)
    write(path, "tick 1\ntick 2\n", 1030.0)
    keeper.stamp_all(machines)
    keeper.stamp_all(machines)  # nothing new: no checkpoint
    write(path, "tick 3\npartial", 1060.0)  # not yet seen by the keeper
    history, size = read_history(path)
    assert history == [(1000.0, "tick 0"), (1030.0, "tick 1"), (1030.0, "tick 2"),
                       (1060.0, "tick 3"), (1060.0, "partial")]
    assert size == path.stat().st_size


def test_rotation_keeps_the_times_with_the_lines(tmp_path: Path) -> None:
    machines, path = machine_log(tmp_path)
    keeper = LogJanitor(max_bytes=20)
    write(path, "old line one\n", 1000.0)
    keeper.stamp_all(machines)
    write(path, "old line two\n", 1010.0)
    assert keeper.sweep(machines) == 1  # over 20 bytes: moved to machine.log.1
    write(path, "new line\n", 1020.0)
    keeper.stamp_all(machines)
    history, _ = read_history(path)
    assert history == [(1000.0, "old line one"), (1010.0, "old line two"),
                       (1020.0, "new line")]


def test_a_restarted_worker_dates_what_was_written_while_it_was_down(tmp_path: Path) -> None:
    machines, path = machine_log(tmp_path)
    write(path, "before\n", 1000.0)
    LogJanitor(max_bytes=1 << 20).stamp_all(machines)
    write(path, "while down\n", 1500.0)  # the worker is down; the machine writes on
    LogJanitor(max_bytes=1 << 20).stamp_all(machines)  # a new worker's first look
    write(path, "after\n", 1600.0)
    history, _ = read_history(path)
    assert history == [(1000.0, "before"), (1500.0, "while down"), (1600.0, "after")]


async def test_the_keeper_dates_the_logs_as_it_starts_and_as_it_stops(tmp_path: Path) -> None:
    """A worker's stop dates what its machines printed as they stopped, apart from what
    comes after (a machine left running writes on while the worker is down)."""
    machines, path = machine_log(tmp_path)
    write(path, "before the worker\n", 1000.0)
    keeper = LogJanitor(max_bytes=1 << 20, stamp_interval=3600.0)  # only the first and last
    task = asyncio.create_task(keeper.run(machines))
    await until(lambda: read_checkpoints(times_path(path)), what="the first look")
    write(path, "stopping\n", 1010.0)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    write(path, "while down\n", 1020.0)
    history, _ = read_history(path)
    assert history == [(1000.0, "before the worker"), (1010.0, "stopping"),
                       (1020.0, "while down")]


async def test_a_start_dates_the_earlier_runs_lines_before_its_own(tmp_path: Path) -> None:
    """Two runs of a machine on the process driver, the second started before the keeper
    looked (it runs in no worker here): the first run's lines keep the time of their
    writing, not the second run's."""
    driver = ProcessDriver(cgroups=None)
    first = spec(tmp_path, "print('stopping', flush=True)", seq=1)
    await asyncio.wait_for(driver.wait(await driver.start(first)), 10)
    path = log_path(first.machine_dir)
    os.utime(path, (1000.0, 1000.0))  # when the first run wrote, as a clock would have it
    second = spec(tmp_path, "print('listening', flush=True)", seq=2,
                  machine_id=first.machine_id)
    await asyncio.wait_for(driver.wait(await driver.start(second)), 10)
    history, _ = read_history(path)
    assert [line for _, line in history] == ["stopping", "listening"]
    assert history[0][0] == 1000.0, history
    assert history[1][0] > 1000.0, history
