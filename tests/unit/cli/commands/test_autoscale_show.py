"""What ``bodega autoscale show`` prints from the API's answer."""

from __future__ import annotations

from bodega.cli.commands.autoscale import describe
from bodega.model.rows import Decision
from bodega.wire.public.autoscale import Autoscale, AutoscaleSetting


def test_the_last_decision_is_shown_with_its_figure_reason_and_actions() -> None:
    found = Autoscale(
        app="web", setting=AutoscaleSetting(min=1, max=3, concurrency=2, scale_in_after=5),
        evaluator="broker", draining=["m3"], error="start m2: lease held",
        decision=Decision(wanted=3, serving=1, figure="8 sessions over 1 machine",
                          reason="scale out from 1 to 3: 1 stopped machine started",
                          start=("m2",), create=1))
    assert describe(found) == [
        "App:       web",
        "Setting:   1 to 3 machines on 2 sessions a machine, scale in after 5 s",
        "Evaluator: broker",
        "Wanted:    3 (1 serving)",
        "Figure:    8 sessions over 1 machine",
        "Why:       scale out from 1 to 3: 1 stopped machine started",
        "Did:       start m2; create 1",
        "Draining:  m3",
        "Error:     start m2: lease held",
    ]


def test_an_app_not_yet_evaluated_says_so() -> None:
    found = Autoscale(app="web", setting=AutoscaleSetting(min=0, max=4, expr="vector(1)"))
    assert describe(found)[1:] == [
        "Setting:   0 to 4 machines on expression vector(1), scale in after 30 s",
        "Evaluator: (none yet)",
        "Decision:  (none yet)",
    ]
