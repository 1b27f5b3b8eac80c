"""An app's autoscale setting over the view's in-memory catalog: written whole, read with
the evaluator's last decision, dropped with its run."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from bodega.broker.autoscale.routes import AutoscaleSettings
from bodega.broker.view.apps import Apps
from bodega.broker.view.catalog import MemoryCatalog
from bodega.model.errors import NotFound
from bodega.model.rows import AutoscaleRow, AutoscaleRunRow, Decision
from bodega.wire.public.autoscale import SetAutoscale


def settings() -> tuple[MemoryCatalog, AutoscaleSettings]:
    catalog = MemoryCatalog()
    apps = Apps(catalog)
    apps.create("web", "personal", None)
    return catalog, AutoscaleSettings(catalog, apps)


def test_a_setting_is_one_row_read_back_with_the_last_decision() -> None:
    catalog, store = settings()
    answer = store.put("web", SetAutoscale(min=1, max=3, concurrency=2))
    assert answer.setting.concurrency == 2
    assert answer.decision is None
    row = catalog.get(AutoscaleRow, "web")
    assert row is not None
    assert (row.min, row.max, row.expr, row.scale_in_after) == (1, 3, None, 30.0)
    decision = Decision(wanted=2, serving=1, figure="3 sessions", reason="scale out")
    catalog.put_shared(AutoscaleRunRow.TABLE, "web", AutoscaleRunRow(
        app="web", holder="b1", beat=4, decision=decision).doc())
    shown = store.get("web")
    assert shown.evaluator == "b1"
    assert shown.decision == decision
    # A new setting replaces the whole row: no target of the old one is left behind.
    store.put("web", SetAutoscale(min=0, max=5, expr="vector(2)"))
    replaced = catalog.get(AutoscaleRow, "web")
    assert replaced is not None
    assert (replaced.concurrency, replaced.expr) == (None, "vector(2)")


def test_off_drops_the_setting_and_its_run_and_unknowns_are_404() -> None:
    catalog, store = settings()
    store.put("web", SetAutoscale(min=1, max=2, concurrency=1))
    catalog.put_shared(AutoscaleRunRow.TABLE, "web",
                       AutoscaleRunRow(app="web", holder="b1").doc())
    store.delete("web")
    assert catalog.get(AutoscaleRow, "web") is None
    assert catalog.get(AutoscaleRunRow, "web") is None
    with pytest.raises(NotFound, match="autoscale not set"):
        store.get("web")
    with pytest.raises(NotFound, match="app not found"):
        store.put("nope", SetAutoscale(min=1, max=2, concurrency=1))


@pytest.mark.parametrize(("body", "why"), [
    ({"min": 3, "max": 2, "concurrency": 1}, "above max"),
    ({"min": 1, "max": 2}, "give one target"),
    ({"min": 1, "max": 2, "concurrency": 1, "expr": "x"}, "give one target"),
    ({"min": 1, "max": 2, "concurrency": 0}, "greater than or equal to 0.01"),
    ({"min": 1, "max": 2, "concurrency": 1, "step": 1}, "Extra inputs"),
])
def test_a_setting_that_cannot_hold_is_refused(body: dict[str, object], why: str) -> None:
    with pytest.raises(ValidationError, match=why):
        SetAutoscale.model_validate(body)
