"""A worker's cgroup warm-up on a real v1 hierarchy: its thread moves into the cgroup it is
already in, for a while after each call, and turns itself off where the kernel refuses."""

from __future__ import annotations

import logging
import threading
import time
from functools import partial
from pathlib import Path

import pytest

from bodega.worker.drivers.process.warmup import Warmup
from tests.poll_kit import until_sync

from ..cgroup_kit import ROOT, warmable

pytestmark = pytest.mark.skipif(not warmable(), reason="needs root and its own cgroup in a "
                                "v1 memory hierarchy under /sys/fs/cgroup")


until = partial(until_sync, timeout=10.0, every=0.01)


def settled(warmup: Warmup, timeout: float = 10.0) -> int:
    """The warm-up's moves once it has stopped making them (its hold long over)."""
    deadline = time.monotonic() + timeout
    while True:
        seen = warmup.moves
        time.sleep(warmup.hold * 4)
        if warmup.moves == seen:
            return seen
        assert time.monotonic() < deadline, "the warm-up never stopped moving"


def thread_cgroups(thread: threading.Thread) -> str:
    return Path(f"/proc/self/task/{thread.native_id}/cgroup").read_text()


def test_a_warm_up_moves_for_a_while_after_each_call_and_its_thread_stays_where_it_was(
) -> None:
    warmup = Warmup(ROOT, hold=0.05, every=0.003)
    here = Path("/proc/thread-self/cgroup").read_text()
    warmup.warm()
    until(lambda: warmup.moves >= 1, "the warm-up never moved")
    first = settled(warmup)
    assert first >= 2  # a burst: it moves again every 3 ms through its 50 ms hold
    assert not warmup.off
    assert not warmup.moving
    assert warmup._thread is not None
    assert warmup._thread.is_alive()
    assert thread_cgroups(warmup._thread) == here  # moved into its own cgroup: no change

    warmup.warm()
    until(lambda: warmup.moves > first, "a second call made no move")
    assert settled(warmup) > first


def test_a_move_the_kernel_refuses_turns_the_warm_up_off_once(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    warmup = Warmup(tmp_path)  # no hierarchy there: the move cannot be made
    with caplog.at_level(logging.INFO, logger="bodega.worker.cgroups"):
        warmup.warm()
        assert warmup._thread is not None
        warmup._thread.join(10)
        warmup.warm()  # off: nothing more
    assert warmup.off
    assert warmup.moves == 0
    assert not warmup._thread.is_alive()
    offs = [r.getMessage() for r in caplog.records if "warm-up off" in r.getMessage()]
    assert len(offs) == 1, offs
    assert "No such file" in offs[0]


def test_work_ahead_runs_in_the_thread_before_its_next_move() -> None:
    warmup = Warmup(ROOT, hold=0.05, every=0.003)
    ran: list[tuple[str, int]] = []
    warmup.warm(lambda: ran.append((threading.current_thread().name, warmup.moves)))
    until(lambda: warmup.moves >= 1, "the warm-up never moved")
    first = settled(warmup)
    assert ran == [("cgroup-warmup", 0)]  # before the burst's first move, not in the caller
    warmup.warm(lambda: ran.append(("again", warmup.moves)))
    settled(warmup)
    assert ran[1] == ("again", first)  # a later burst's, before that burst's first move


def test_work_ahead_that_fails_is_logged_and_the_warm_up_goes_on(
        caplog: pytest.LogCaptureFixture) -> None:
    warmup = Warmup(ROOT, hold=0.02, every=0.003)

    def fails() -> None:
        raise OSError("no room for a cgroup")

    with caplog.at_level(logging.WARNING, logger="bodega.worker.cgroups"):
        warmup.warm(fails)
        until(lambda: warmup.moves >= 1, "the warm-up never moved")
    assert not warmup.off
    assert any("no room for a cgroup" in r.getMessage() for r in caplog.records)
