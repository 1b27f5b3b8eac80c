"""Which time a log line gets, from where it ends and the checkpoints beside its log."""

from __future__ import annotations

from bodega.worker.drivers.process.logtimes import stamp

CHECKPOINTS = [(10, 100.0), (25, 101.5), (40, 107.0)]


def test_a_line_gets_the_first_checkpoint_at_or_past_its_end() -> None:
    assert stamp([4, 10, 11, 25, 30, 40], CHECKPOINTS, 200.0) == [
        100.0, 100.0, 101.5, 101.5, 107.0, 107.0]


def test_lines_past_the_last_checkpoint_get_the_logs_own_time() -> None:
    assert stamp([41, 60], CHECKPOINTS, 200.0) == [200.0, 200.0]


def test_a_log_without_checkpoints_dates_every_line_by_the_log() -> None:
    assert stamp([5, 9], [], 200.0) == [200.0, 200.0]
