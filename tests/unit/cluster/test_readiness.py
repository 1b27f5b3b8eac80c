"""When `bodega up` may say it is up: the broker ready, every worker seen alive."""

from __future__ import annotations

from pathlib import Path

from bodega.cluster.readiness import Observed, judge

BROKER_LOG = Path("logs/broker.log")
WORKERS = {"ams-1": Path("logs/ams-1.log"), "ams-2": Path("logs/ams-2.log")}
BOTH = frozenset(WORKERS)


def test_ready_broker_and_every_worker_alive_is_up() -> None:
    assert judge(Observed(200, {"ok": True, "ready": True}, BOTH), WORKERS, BROKER_LOG) is None


def test_a_broker_from_before_the_ready_key_counts_as_ready() -> None:
    assert judge(Observed(200, {"ok": True, "name": "broker"}, BOTH), WORKERS,
                 BROKER_LOG) is None


def test_a_503_is_not_up_and_points_at_the_broker_log() -> None:
    seen = Observed(503, {"ok": False, "ready": False, "error": "no workers alive yet",
                          "status": "unavailable"}, frozenset())
    verdict = judge(seen, WORKERS, BROKER_LOG)
    assert verdict is not None
    assert verdict.line() == "the broker is not ready: no workers alive yet (log: logs/broker.log)"


def test_a_200_saying_not_ready_is_not_up() -> None:
    verdict = judge(Observed(200, {"ok": True, "ready": False}, BOTH), WORKERS, BROKER_LOG)
    assert verdict is not None
    assert verdict.log_file == BROKER_LOG


def test_a_silent_broker_is_not_up() -> None:
    verdict = judge(Observed(None, {}, frozenset(), "ClientConnectorError refused"), WORKERS,
                    BROKER_LOG)
    assert verdict is not None
    assert "does not answer (ClientConnectorError refused)" in verdict.what


def test_a_missing_worker_is_named_with_its_log() -> None:
    verdict = judge(Observed(200, {"ok": True, "ready": True}, frozenset({"ams-1"})), WORKERS,
                    BROKER_LOG)
    assert verdict is not None
    assert verdict.line() == ("the broker sees 1 of 2 workers alive; not yet ams-2 "
                              "(log: logs/ams-2.log)")
