"""The topology: bars split per machine, reserved and free; region totals; a thousand workers
on one page by aggregating and paging."""

from __future__ import annotations

import re
from typing import Any

from bodega.broker.ui.core.bars import BAR_WIDTH
from bodega.broker.ui.core.rows import MachineSlice, WorkerView, machine_slice, worker_view
from bodega.broker.ui.core.topology import PAGE_SIZE, region_view, topology, worker_card
from bodega.broker.ui.render import Templates
from bodega.broker.ui.screens import TopologyScreen
from bodega.model.rows import WorkerRow, read_rows


def worker(name: str, region: str = "ams", cpus: int = 4, memory_mb: int = 4096,
           used_mcpu: int = 0, used_mb: int = 0, status: str | None = "alive",
           **extra: Any) -> WorkerView:
    doc = {"name": name, "region": region, "url": "http://x",
           "totals": {"cpus": cpus, "memory_mb": memory_mb, "disk_gb": 20,
                      "shared_cpu_ratio": 4.0},
           "used": {"millicpus": used_mcpu, "memory_mb": used_mb, "disk_gb": 0}, **extra}
    return worker_view(WorkerRow.model_validate(doc), status)


def machine(mid: str, on: str, state: str = "started", cpus: int = 1, kind: str = "shared",
            memory_mb: int = 256, app: str = "web", region: str = "ams") -> MachineSlice:
    found = machine_slice({"id": mid, "name": f"m-{mid}", "app": app, "state": state,
                           "region": region, "worker": on,
                           "config": {"guest": {"cpu_kind": kind, "cpus": cpus,
                                                "memory_mb": memory_mb}}})
    assert found is not None
    return found


def test_a_worker_bar_has_a_segment_per_machine_holding_room_then_reserved_then_free() -> None:
    w = worker("ams-1", used_mcpu=2250, used_mb=1536 + 512)
    card = worker_card(w, [machine("a", "ams-1", kind="performance", memory_mb=1024),
                           machine("b", "ams-1", state="starting", memory_mb=512),
                           machine("c", "ams-1", state="stopped", memory_mb=2048)])
    assert [(s.key, s.kind, s.amount) for s in card.cpu.segments] == [
        ("a", "started", 1000), ("b", "starting", 250), ("reserved", "reserved", 1000),
        ("free", "free", 1750)]
    assert [(s.key, s.amount) for s in card.memory.segments] == [
        ("a", 1024), ("b", 512), ("reserved", 512), ("free", 2048)]
    assert card.resting == 1  # stopped: it holds nothing, it is only counted
    assert card.cpu.segments[0].width == BAR_WIDTH / 4  # its share of the worker's cpu


def test_conditions_mark_dead_suspect_and_cordoned_workers() -> None:
    assert worker("a", status="dead", cordoned=True).condition == "dead"
    assert worker("a", status="suspect").condition == "suspect"
    assert worker("a", cordoned=True).condition == "cordoned"
    assert worker("a", cordoned=True, cordon_reason="draining").condition == "draining"
    assert worker("a", cordon_reason="draining").condition == "alive"  # a stale reason
    assert worker("a", status=None).condition == "unknown"
    assert worker("a").condition == "alive"


def test_region_totals_add_every_worker_and_set_aside_room_nobody_may_use() -> None:
    workers = [worker("ams-1", used_mcpu=1000, used_mb=1024),
               worker("ams-2", used_mcpu=0, used_mb=0, status="dead")]
    totals = region_view("ams", workers, [machine("a", "ams-1", kind="performance",
                                                  memory_mb=1024)]).totals
    assert totals.workers == 2
    assert dict(totals.conditions) == {"alive": 1, "dead": 1}
    assert [(s.kind, s.amount) for s in totals.cpu.segments] == [
        ("started", 1000), ("unusable", 4000), ("free", 3000)]
    assert totals.machines == 1


def test_a_thousand_workers_are_one_page_of_cards_a_strip_and_totals_over_all() -> None:
    workers = [worker(f"ams-{i}", used_mcpu=(i % 5) * 1000, used_mb=0) for i in range(1, 1001)]
    machines = [machine(f"m{i}", f"ams-{i}", kind="performance") for i in range(1, 1001, 10)]
    view = region_view("ams", workers, machines, page=3)
    assert view.pages == 1000 // PAGE_SIZE
    assert [c.worker.name for c in view.cards] == [f"ams-{i}" for i in range(101, 151)]
    assert len(view.strip) == 1000
    assert {c.row for c in view.strip} == set(range(20))
    assert view.strip[0].name == "ams-1"
    assert view.strip[-1].name == "ams-1000"
    assert view.totals.workers == 1000
    assert view.totals.cpu.total == 4_000_000
    assert view.totals.machines == 100
    loads = {c.name: c.load for c in view.strip}
    assert (loads["ams-5"], loads["ams-3"], loads["ams-4"]) == (0, 3, 4)  # 0, 3000, 4000 used
    assert region_view("ams", workers, machines, page=99).page == 20  # clamped


def test_a_region_that_fits_one_page_has_no_strip() -> None:
    view = region_view("syd", [worker(f"syd-{i}", "syd") for i in range(PAGE_SIZE)], [])
    assert view.strip == ()
    assert view.pages == 1
    assert len(view.cards) == PAGE_SIZE


def test_the_page_for_a_thousand_workers_draws_fifty_cards() -> None:
    workers = [worker(f"ams-{i}") for i in range(1000)] + [worker("syd-1", "syd")]
    screen = TopologyScreen(topology(workers, [], {"ams": 2}), "ams", 2)
    html = Templates().fragment("_topology.html", screen=screen)
    assert len(re.findall(r'<article class="worker"', html)) == PAGE_SIZE + 1
    assert 'data-worker="ams-50"' in html
    assert 'data-worker="ams-49"' not in html
    assert len(re.findall(r'<rect class="cell', html)) == 1000
    assert len(html) < 600_000, len(html)


def test_rows_that_cannot_be_read_are_left_out() -> None:
    assert read_rows(WorkerRow, [{"name": "x"}]) == []  # a row the dashboard cannot show
    assert machine_slice({"name": "no id"}) is None
    defaults = machine_slice({"id": "m", "config": {}})
    assert defaults is not None
    assert (defaults.cpus, defaults.memory_mb) == (1, 256)
