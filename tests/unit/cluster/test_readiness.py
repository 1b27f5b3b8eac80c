"""When `bodega up` may say it is up: the broker ready, every worker seen alive."""

from __future__ import annotations

from pathlib import Path

from bodega.cluster.readiness import BrokerHealth, Observed, judge

BROKER_LOG = Path("logs/broker.log")
WORKERS = {"ams-1": Path("logs/ams-1.log"), "ams-2": Path("logs/ams-2.log")}
BOTH = frozenset(WORKERS)


def _health(body: object) -> BrokerHealth:
    return BrokerHealth.read(body)


def test_ready_broker_and_every_worker_alive_is_up() -> None:
    seen = Observed(200, _health({"ok": True, "ready": True}), BOTH)
    assert judge(seen, WORKERS, BROKER_LOG) is None


def test_a_broker_from_before_the_ready_key_counts_as_ready() -> None:
    assert judge(Observed(200, _health({"ok": True, "name": "broker"}), BOTH), WORKERS,
                 BROKER_LOG) is None


def test_a_503_is_not_up_and_points_at_the_broker_log() -> None:
    seen = Observed(503, _health({"ok": False, "ready": False, "error": "no workers alive yet",
                                  "status": "unavailable"}), frozenset())
    verdict = judge(seen, WORKERS, BROKER_LOG)
    assert verdict is not None
    assert verdict.line() == "the broker is not ready: no workers alive yet (log: logs/broker.log)"


def test_a_200_saying_not_ready_is_not_up() -> None:
    seen = Observed(200, _health({"ok": True, "ready": False}), BOTH)
    verdict = judge(seen, WORKERS, BROKER_LOG)
    assert verdict is not None
    assert verdict.log_file == BROKER_LOG


def test_a_silent_broker_is_not_up() -> None:
    seen = Observed(None, _health({}), frozenset(), "ClientConnectorError refused")
    verdict = judge(seen, WORKERS, BROKER_LOG)
    assert verdict is not None
    assert "does not answer (ClientConnectorError refused)" in verdict.what


def test_a_missing_worker_is_named_with_its_log() -> None:
    seen = Observed(200, _health({"ok": True, "ready": True}), frozenset({"ams-1"}))
    verdict = judge(seen, WORKERS, BROKER_LOG)
    assert verdict is not None
    assert verdict.line() == ("the broker sees 1 of 2 workers alive; not yet ams-2 "
                              "(log: logs/ams-2.log)")


def test_a_ready_that_is_not_true_itself_is_not_up() -> None:
    for body in ({"ok": True, "ready": "yes"}, {"ok": 1, "ready": True}, ["ready"], None):
        verdict = judge(Observed(200, _health(body), BOTH), WORKERS, BROKER_LOG)
        assert verdict is not None, body
        assert verdict.what == "the broker is not ready: HTTP 200"
