"""Placement by isolation: a worker offers those it ran at its start, and no other."""

from __future__ import annotations

from bodega.model.capacity import VM_OVERHEAD_MB, Ask, Totals, Usage, fits, shortfalls
from bodega.model.machine_config import MachineConfig
from bodega.model.rows import HostTotals
from bodega.placement import Candidate, PlacementRequest, Policy, rank_candidates


def worker(name: str, isolations: tuple[str, ...]) -> Candidate:
    return Candidate(name, "ams", f"http://{name}",
                     Totals(cpus=8, memory_mb=8192, disk_gb=100, isolations=isolations),
                     Usage())


def ask(isolation: str) -> PlacementRequest:
    return PlacementRequest(app="web", ask=Ask(cpus=1, memory_mb=256, isolation=isolation),
                            regions=("ams",), image="127.0.0.1:5000/web:1", needs_images=True)


def test_a_sandbox_machine_goes_only_where_sandboxes_run_and_the_rest_say_why() -> None:
    workers = [worker("plain", ("container",)), worker("gvisor", ("container", "sandbox"))]
    ranking = rank_candidates(ask("sandbox"), "ams", workers, Policy())
    assert [s.candidate.name for s in ranking.attempts()] == ["gvisor"]
    assert dict(ranking.refusals) == {"plain": "isolation sandbox not offered"}
    assert ranking.refused_by_kind == {"isolation": 1}


def test_a_container_machine_goes_to_any_worker_that_offers_containers() -> None:
    workers = [worker("plain", ("container",)), worker("gvisor", ("container", "sandbox")),
               worker("only-sandbox", ("sandbox",))]
    ranking = rank_candidates(ask("container"), "ams", workers, Policy())
    assert sorted(s.candidate.name for s in ranking.attempts()) == ["gvisor", "plain"]
    assert ranking.refused_by_kind == {"isolation": 1}


def test_no_worker_offering_a_vm_refuses_every_worker_by_isolation() -> None:
    workers = [worker("a", ("container", "sandbox")), worker("b", ("container",))]
    ranking = rank_candidates(ask("vm"), "ams", workers, Policy())
    assert list(ranking.attempts()) == []
    assert ranking.refused_by_kind == {"isolation": 2}


def test_the_ledger_refuses_an_isolation_its_host_does_not_offer() -> None:
    totals = Totals(cpus=4, memory_mb=4096)  # one that says nothing: containers only
    assert shortfalls(totals, Usage(), Ask(cpus=1, memory_mb=256)) == []
    assert shortfalls(totals, Usage(), Ask(cpus=1, memory_mb=256, isolation="sandbox")) == [
        "isolation sandbox not offered"]


def test_isolations_and_the_ask_survive_the_wire() -> None:
    totals = Totals(cpus=4, memory_mb=4096, isolations=("container", "sandbox"))
    assert Totals.from_row(totals.row()) == totals
    assert Totals.from_row(HostTotals(cpus=1, memory_mb=256)).isolations == ("container",)
    sandboxed = Ask(cpus=1, memory_mb=256, isolation="sandbox")
    assert Ask.from_wire(sandboxed.to_wire()) == sandboxed
    assert sandboxed.describe() == "1 shared cpu, 256 MB, sandbox isolation"


def test_a_vm_is_charged_its_guests_memory_and_its_vmms_beside_it() -> None:
    def config(isolation: str) -> MachineConfig:
        return MachineConfig.model_validate({"image": "127.0.0.1:5000/web:1", "guest": {
            "cpus": 1, "memory_mb": 128, "isolation": isolation}})

    vm, container = Ask.for_config(config("vm")), Ask.for_config(config("container"))
    assert (vm.memory_mb, container.memory_mb) == (128 + VM_OVERHEAD_MB, 128)
    assert "128 MB + 128 MB for its VM, vm isolation" in vm.describe()
    # A 4 GB host takes 16 idle 128 MB VMs (each holds ~190 MB), not 32.
    totals = Totals(cpus=64, memory_mb=4096, isolations=("container", "vm"))
    used, placed = Usage(), 0
    while fits(totals, used, vm):
        used, placed = used.plus(totals, vm), placed + 1
    assert placed == 16
