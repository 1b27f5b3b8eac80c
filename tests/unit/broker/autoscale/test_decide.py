"""The autoscaler's decisions, fed stimuli: no I/O, no sleeps, times given."""

from __future__ import annotations

from bodega.broker.autoscale.core.decide import (
    DRAIN_LIMIT,
    MAX_STEP,
    OUT_COOLDOWN,
    UNSEEN_DRAIN,
    Seen,
    Stimulus,
    decide,
)
from bodega.model.rows import AutoscaleRow, Memory

CONC = AutoscaleRow(app="a", min=1, max=3, concurrency=2, scale_in_after=30)
EXPR = AutoscaleRow(app="a", min=0, max=10, expr="sum(queue_depth) / 5")


def m(mid: str, state: str = "started", sessions: float | None = 0.0, release: int = 1,
      created: str = "2026-01-01T00:00:00Z", cordoned: bool = False) -> Seen:
    return Seen(id=mid, state=state, sessions=sessions, release=release, created_at=created,
                cordoned=cordoned)


def stim(*machines: Seen, figure: float | None, memory: Memory | None = None,
         now: float = 1000.0, setting: AutoscaleRow = CONC) -> Stimulus:
    return Stimulus(setting=setting, machines=machines, figure=figure,
                    memory=memory or Memory(), now=now, unknown="store down")


def test_a_load_over_the_target_starts_stopped_machines_newest_release_first() -> None:
    decision, memory = decide(stim(m("m1", sessions=8), m("old", "stopped", release=1),
                                   m("new", "stopped", release=2), figure=8))
    assert decision.wanted == 3  # 8 / 2 = 4, clamped to max 3
    assert decision.start == ("new", "old")
    assert decision.create == 0
    assert "clamped" in decision.figure
    assert "scale out from 1 to 3" in decision.reason
    assert memory.last_out == 1000.0


def test_clones_are_created_when_no_stopped_machine_is_left() -> None:
    decision, _ = decide(stim(m("m1", sessions=5), m("s1", "stopped"), figure=5))
    assert (decision.wanted, decision.start, decision.create) == (3, ("s1",), 1)
    assert "1 clone created" in decision.reason


def test_a_second_scale_out_waits_for_the_cooldown() -> None:
    memory = Memory(last_out=1000.0 - OUT_COOLDOWN / 2)
    decision, kept = decide(stim(m("m1", sessions=8), m("s1", "stopped"), figure=8,
                                 memory=memory))
    assert decision.start == ()
    assert decision.create == 0
    assert "cooldown" in decision.reason
    assert kept.last_out == memory.last_out


def test_scale_in_waits_for_the_window_then_cordons_the_idlest_keeping_the_peak() -> None:
    busy, idle, quiet = m("busy", sessions=2), m("idle", sessions=0), m("quiet", sessions=1)
    first, memory = decide(stim(busy, idle, quiet, figure=3, now=1000.0))  # wants 2 of 3
    assert first.cordon == ()
    assert first.wanted == 2
    assert memory.below_since == 1000.0
    assert memory.peak_since == 2
    second, memory = decide(stim(busy, idle, quiet, figure=0, now=1010.0, memory=memory))
    assert second.cordon == ()
    assert memory.peak_since == 2
    third, memory = decide(stim(busy, idle, quiet, figure=0, now=1031.0, memory=memory))
    assert third.cordon == ("idle",)  # 3 serving, 2 the window's peak: one goes, the idlest
    assert memory.draining == {"idle": 1031.0}
    assert memory.below_since is None
    assert "scale in from 3 to 2" in third.reason


def test_a_rise_during_the_window_resets_it() -> None:
    _, memory = decide(stim(m("a1"), m("a2"), figure=0, now=1000.0))
    assert memory.below_since == 1000.0
    _, memory = decide(stim(m("a1"), m("a2"), figure=4, now=1020.0, memory=memory))
    assert memory.below_since is None
    decision, memory = decide(stim(m("a1"), m("a2"), figure=0, now=1040.0, memory=memory))
    assert decision.cordon == ()
    assert memory.below_since == 1040.0


def test_a_cordoned_machine_is_stopped_once_its_sessions_are_gone_or_after_the_limit() -> None:
    memory = Memory(draining={"d1": 1000.0, "d2": 1000.0})
    busy = m("d1", sessions=1, cordoned=True)
    gone = m("d2", sessions=0, cordoned=True)
    decision, memory = decide(stim(m("s"), busy, gone, figure=1, now=1005.0, memory=memory))
    assert decision.stop == ("d2",)
    assert memory.draining == {"d1": 1000.0}
    later, memory = decide(stim(m("s"), busy, figure=1, now=1000.0 + DRAIN_LIMIT,
                                memory=memory))
    assert later.stop == ("d1",)
    assert memory.draining == {}


def test_uncounted_sessions_keep_a_machine_draining_for_the_unseen_drain() -> None:
    memory = Memory(draining={"d": 1000.0})
    unseen = m("d", sessions=None, cordoned=True)
    early, _ = decide(stim(m("s"), unseen, figure=0, now=1000.0 + UNSEEN_DRAIN - 1,
                           memory=memory))
    assert early.stop == ()
    later, _ = decide(stim(m("s"), unseen, figure=0, now=1000.0 + UNSEEN_DRAIN,
                           memory=memory))
    assert later.stop == ("d",)


def test_a_scale_out_takes_draining_machines_back_before_starting_any() -> None:
    memory = Memory(draining={"d": 1000.0})
    decision, memory = decide(stim(m("s", sessions=4), m("d", cordoned=True),
                                   m("x", "stopped"), figure=4, now=1001.0, memory=memory))
    assert decision.uncordon == ("d",)
    assert decision.start == ()
    assert decision.stop == ()
    assert memory.draining == {}


def test_without_a_figure_only_the_bounds_are_kept() -> None:
    decision, _ = decide(stim(m("s1", "stopped"), figure=None))
    assert decision.wanted == 1
    assert decision.start == ("s1",)
    assert "no figure (store down)" in decision.figure
    steady, _ = decide(stim(m("a"), m("b"), figure=None))
    assert steady.wanted == 2
    assert steady.cordon == ()
    assert "steady at 2" in steady.reason


def test_never_below_min_nor_above_max() -> None:
    decision, _memory = decide(stim(m("a"), figure=0, now=1000.0))
    assert decision.wanted == 1
    assert decision.cordon == ()
    big, _ = decide(stim(m("a", sessions=100), figure=100))
    assert big.wanted == 3
    assert big.create == 2


def test_a_big_step_is_taken_a_bounded_number_at_a_time() -> None:
    wide = AutoscaleRow(app="a", min=1, max=500, expr="vector(400)")
    decision, _ = decide(stim(m("a"), figure=400, setting=wide))
    assert decision.wanted == 400
    assert decision.create == MAX_STEP
    assert f"({MAX_STEP} at a time)" in decision.reason


def test_an_expression_gives_the_wanted_count_rounded_up() -> None:
    decision, _ = decide(stim(m("a"), m("s", "stopped"), figure=1.2, setting=EXPR))
    assert decision.wanted == 2
    assert decision.start == ("s",)
    assert decision.figure == "expression = 1.2"


def test_a_user_cordoned_machine_is_neither_serving_nor_started() -> None:
    decision, _ = decide(stim(m("a", sessions=4), m("c", cordoned=True),
                              m("cs", "stopped", cordoned=True), figure=4))
    assert decision.serving == 1
    assert decision.uncordon == ()
    assert decision.start == ()
    assert decision.create == 1
