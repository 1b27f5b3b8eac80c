"""The chaos suite's invariant checker sees violations: fed bad states, it reports each one."""

from __future__ import annotations

from tests.cluster.chaos import invariants
from tests.cluster.chaos.__main__ import table
from tests.cluster.chaos.scenario import Result
from tests.cluster.chaos.state import (
    CreateOutcome,
    Expectation,
    MachineProcess,
    RegistryView,
    Snapshot,
    StoredMachine,
    StoredReservation,
    Totals,
    Violation,
    WorkerState,
)

TOTALS = Totals(millicpus=2000, memory_mb=2048)


def machine(mid: str, state: str = "started", key: str | None = None) -> StoredMachine:
    return StoredMachine(id=mid, app="a", state=state, millicpus=250, memory_mb=256,
                         holds_compute=state == "started", idempotency_key=key)


def healthy() -> Snapshot:
    """Two workers, three machines (two running, one stopped), every check satisfied."""
    w1 = WorkerState(name="w1", totals=TOTALS, machines=[machine("m1", key="k1"),
                                                         machine("m2", "stopped", key="k2")])
    w2 = WorkerState(name="w2", totals=TOTALS, machines=[machine("m3", key="k3")])
    view = {"m1": "started", "m2": "stopped", "m3": "started"}
    return Snapshot(
        workers=[w1, w2],
        processes=[MachineProcess(pid=10, machine_id="m1", host="w1"),
                   MachineProcess(pid=11, machine_id="m1", host="w1"),
                   MachineProcess(pid=12, machine_id="m3", host="w2")],
        creates=[CreateOutcome(key="k1", app="a", machine_id="m1"),
                 CreateOutcome(key="k4", app="a", failed=True)],
        expectations=[Expectation(machine_id="m2", states=["stopped"]),
                      Expectation(machine_id="m9", states=["destroyed"])],
        views=[RegistryView(node="w1", machines=view),
               RegistryView(node="b1", machines={**view, "m0": "destroyed"})])


def kinds(violations: list[Violation]) -> list[str]:
    return [v.invariant for v in violations]


def test_a_healthy_cluster_has_no_violation() -> None:
    assert invariants.check(healthy()) == []


def test_a_worker_ledger_over_capacity_is_reported() -> None:
    s = healthy()
    crowded = [machine(f"x{i}", key=f"x{i}") for i in range(9)]  # 9 x 250 > 2000 millicpus
    over = s.workers[1].model_copy(update={"machines": crowded})
    bad = s.model_copy(update={"workers": [s.workers[0], over]})
    found = invariants.capacity(bad)
    assert kinds(found) == ["capacity"]
    assert "w2 ledger holds 2250 millicpus" in found[0].detail


def test_a_live_reservation_counts_against_the_ledger() -> None:
    s = healthy()
    held = s.workers[0].model_copy(update={"reservations": [StoredReservation(
        id="r1", millicpus=1800, memory_mb=10, live=True)]})
    bad = s.model_copy(update={"workers": [held, s.workers[1]]})
    assert kinds(invariants.capacity(bad)) == ["capacity"]
    assert "failed-create-clean" in kinds(invariants.creates(bad))  # and it is a leak once quiet


def test_processes_over_capacity_are_reported_even_when_the_ledger_is_fine() -> None:
    s = healthy()
    # Nine machines recorded as stopped on w1 (the ledger holds nothing) but all running there.
    quiet = [machine(f"s{i}", "stopped") for i in range(9)]
    w1 = s.workers[0].model_copy(update={"machines": quiet})
    procs = [MachineProcess(pid=100 + i, machine_id=f"s{i}", host="w1") for i in range(9)]
    bad = s.model_copy(update={"workers": [w1, s.workers[1]], "processes": procs})
    found = invariants.capacity(bad)
    assert kinds(found) == ["capacity"]
    assert "runs 9 machines" in found[0].detail
    assert kinds(invariants.processes(bad)).count("orphan-process") == 9


def test_a_refused_create_that_left_a_machine_is_reported() -> None:
    s = healthy()
    left = s.workers[1].model_copy(update={"machines": [*s.workers[1].machines,
                                                        machine("m4", "created", key="k4")]})
    bad = s.model_copy(update={"workers": [s.workers[0], left]})
    assert "failed-create-clean" in kinds(invariants.creates(bad))


def test_an_answered_create_with_no_machine_or_two_is_reported() -> None:
    s = healthy()
    ghost = s.model_copy(update={"creates": [CreateOutcome(key="k9", app="a", machine_id="m9")]})
    assert kinds(invariants.creates(ghost)) == ["created-exists"]
    twice = s.workers[1].model_copy(update={"machines": [machine("m5", key="k1")]})
    doubled = s.model_copy(update={"workers": [s.workers[0], twice]})
    assert kinds(invariants.creates(doubled)) == ["created-once"]


def test_a_machine_not_in_its_expected_state_is_reported() -> None:
    s = healthy()
    bad = s.model_copy(update={"expectations": [Expectation(machine_id="m1", states=["stopped"])]})
    assert kinds(invariants.desired(bad)) == ["desired-state"]


def test_orphans_and_missing_processes_are_reported() -> None:
    s = healthy()
    stray = MachineProcess(pid=99, machine_id="m2", host="w1")  # m2 is stopped
    elsewhere = MachineProcess(pid=98, machine_id="m3", host="w1")  # m3 lives on w2
    bad = s.model_copy(update={"processes": [*s.processes[:2], stray, elsewhere]})
    assert sorted(kinds(invariants.processes(bad))) == [
        "orphan-process", "orphan-process", "running-has-process"]


def test_unfinished_operations_are_reported() -> None:
    s = healthy()
    busy = s.workers[0].model_copy(update={"unfinished_ops": ["stop_machine:stopping on m1"]})
    bad = s.model_copy(update={"workers": [busy, s.workers[1]]})
    assert kinds(invariants.operations(bad)) == ["ops-finished"]


def test_a_view_that_lags_the_stores_is_reported() -> None:
    s = healthy()
    lagging = RegistryView(node="proxy", machines={"m1": "stopped", "m3": "started"})
    bad = s.model_copy(update={"views": [*s.views, lagging]})
    found = invariants.views(bad)
    assert kinds(found) == ["views-converged"]
    assert "missing ['m2']" in found[0].detail
    assert "stale ['m1']" in found[0].detail


def test_the_table_shows_every_scenario_and_its_violations() -> None:
    results = [Result("calm", operations=12, convergence=1.25),
               Result("stormy", operations=3, faults=["kill -9 w1", "kill -9 b1"],
                      violations=[Violation(invariant="capacity", detail="w1")])]
    text = table(results)
    assert "| calm " in text
    assert "1.2 s" in text or "1.3 s" in text
    assert "2: kill -9 w1 ..." in text
    assert "not reached" in text
    assert text.splitlines()[3].split("|")[4].strip() == "1"
