"""Refused placements: kept newest first, bounded, grouped by reason with the workers involved."""

from __future__ import annotations

from bodega.broker.placing.core.record import Attempt, Record
from bodega.broker.ui.core.refusals import (
    RecentRefusals,
    Refusal,
    WorkerRefusal,
    group_by_reason,
    kind_of,
    refusal_of,
)
from bodega.model.capacity import Ask, Totals, Usage
from bodega.placement import Candidate, PlacementRequest, Policy, rank_candidates


def candidate(name: str, used_mcpu: int = 0, status: str = "alive",
              cordoned: bool = False) -> Candidate:
    return Candidate(name, "ams", f"http://{name}", Totals(cpus=4, memory_mb=4096),
                     Usage(millicpus=used_mcpu), cordoned=cordoned, status=status)


def refused_record(ask: Ask, candidates: list[Candidate],
                   attempts: tuple[Attempt, ...] = ()) -> Record:
    request = PlacementRequest("web", ask, ("ams",))
    record = Record("utility", ask, ("ams",), "broker")
    record.regions.append(rank_candidates(request, "ams", candidates, Policy()))
    record.attempts.extend(attempts)
    return record


def test_a_refusal_names_each_worker_with_the_filter_that_turned_it_away() -> None:
    record = refused_record(
        Ask(cpu_kind="performance", cpus=2, memory_mb=256),
        [candidate("ams-1", used_mcpu=3000), candidate("ams-2", status="dead"),
         candidate("ams-3", cordoned=True), candidate("ams-4")],
        (Attempt("ams-4", "ams", "rejected", "could not reserve resource: cpu"),))
    refusal = refusal_of("web", record, "insufficient capacity in ams: ...", at=5.0)
    assert refusal.asked == "2 performance cpu, 256 MB"
    assert dict(refusal.kinds) == {"cpu": 1, "not_alive": 1, "cordoned": 1, "said_no": 1}
    assert sorted((w.worker, w.kind) for w in refusal.workers) == [
        ("ams-1", "cpu"), ("ams-2", "not_alive"), ("ams-3", "cordoned"), ("ams-4", "said_no")]


def test_kinds_follow_the_filters_wording() -> None:
    assert kind_of("worker is suspect") == "not_alive"
    assert kind_of("cpu kind performance not offered") == "cpu_kind"
    assert kind_of("cpu: needs 2000 mcpu, 1000 mcpu free; memory: needs 1 MB") == "cpu"
    assert kind_of("memory: needs 512 MB, 0 MB free") == "memory"
    assert kind_of("disk: needs 5 GB, 1 GB free") == "disk"
    assert kind_of("volume vol_1 is on ams-2", ["pinned"]) == "pinned"
    assert kind_of("a volume named data is there", ["avoided"]) == "avoided"


def refusal(app: str, kinds: dict[str, int], workers: list[tuple[str, str, str]]) -> Refusal:
    return Refusal(0.0, app, "1 shared cpu, 256 MB", ("ams",), f"no room for {app}",
                   tuple(sorted(kinds.items())),
                   tuple(WorkerRefusal(w, "ams", k, r) for w, k, r in workers))


def test_groups_count_placements_and_workers_per_reason_most_frequent_first() -> None:
    newest = refusal("b", {"memory": 2}, [("ams-1", "memory", "memory: new"),
                                          ("ams-2", "memory", "memory: x")])
    older = refusal("a", {"memory": 1, "cordoned": 1}, [("ams-1", "memory", "memory: old"),
                                                        ("ams-3", "cordoned", "cordoned")])
    groups = group_by_reason([newest, older])
    assert [(g.kind, g.placements, g.refused) for g in groups] == [
        ("memory", 2, 3), ("cordoned", 1, 1)]
    memory = groups[0]
    assert [(t.worker, t.times, t.last_reason) for t in memory.workers] == [
        ("ams-1", 2, "memory: new"), ("ams-2", 1, "memory: x")]
    assert memory.latest.app == "b"
    assert memory.label == "not enough memory"
    assert group_by_reason([]) == []


def test_recent_refusals_are_newest_first_bounded_and_announced() -> None:
    recent = RecentRefusals(kept=3)
    heard: list[int] = []
    stop = recent.listen(lambda: heard.append(len(recent.items())))
    for app in "abcde":
        recent.add(refusal(app, {"cpu": 1}, []))
    assert [r.app for r in recent.items()] == ["e", "d", "c"]
    assert heard == [1, 2, 3, 3, 3]
    stop()
    recent.add(refusal("f", {"cpu": 1}, []))
    assert len(heard) == 5
    stop()  # twice is harmless
