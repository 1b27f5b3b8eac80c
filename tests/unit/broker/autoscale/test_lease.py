"""Which broker evaluates an app: the lease in the view's run row, judged on each broker's
own clock."""

from __future__ import annotations

from bodega.broker.autoscale.core.lease import Sighting, Verdict, judge
from bodega.model.rows import AutoscaleRunRow


def run(holder: str, beat: int) -> AutoscaleRunRow:
    return AutoscaleRunRow(app="a", holder=holder, beat=beat, ttl=10.0)


def test_no_row_is_taken_and_an_own_row_held() -> None:
    assert judge(None, "b1", None, 0.0)[0] is Verdict.TAKE
    assert judge(run("b1", 4), "b1", None, 0.0)[0] is Verdict.HOLD


def test_another_holder_is_waited_on_while_its_beat_rises() -> None:
    verdict, seen, _ = judge(run("b1", 1), "b2", None, 100.0)
    assert verdict is Verdict.WAIT
    assert seen == Sighting("b1", 1, 100.0)
    verdict, seen, _ = judge(run("b1", 2), "b2", seen, 109.0)
    assert verdict is Verdict.WAIT
    assert seen == Sighting("b1", 2, 109.0)
    verdict, seen, _ = judge(run("b1", 2), "b2", seen, 118.9)
    assert verdict is Verdict.WAIT
    assert seen == Sighting("b1", 2, 109.0)


def test_a_beat_quiet_for_the_ttl_is_taken_over() -> None:
    seen = Sighting("b1", 7, 100.0)
    verdict, kept, why = judge(run("b1", 7), "b2", seen, 110.0)
    assert verdict is Verdict.TAKE
    assert kept is None
    assert "stayed at 7" in why


def test_a_broker_seeing_the_row_first_waits_a_whole_ttl() -> None:
    verdict, seen, _ = judge(run("b1", 7), "b3", None, 500.0)  # just started: no history
    assert verdict is Verdict.WAIT
    assert judge(run("b1", 7), "b3", seen, 509.0)[0] is Verdict.WAIT
    assert judge(run("b1", 7), "b3", seen, 510.0)[0] is Verdict.TAKE
