"""One registry agent per host: rows written through an agent, and the fleet under creates."""

from __future__ import annotations

import math

from bodega.sim.replication.agentsim import AgentLoad, HostWriter, run
from bodega.sim.replication.replsim import ReplicaNet
from tests.unit.registry.replication.row_kit import machine_doc


def test_a_row_written_through_an_agent_reaches_every_host_with_its_writer_as_origin() -> None:
    rn = ReplicaNet(3)
    for name in ("a", "b", "c", "d"):
        rn.add(name, seeds=["a"] if name != "a" else [])
    assert rn.net.run_until(rn.net.converged, timeout=30)
    worker = HostWriter("a-worker", rn.wall)
    rows = [worker.row("machines", f"m{i}", machine_doc(f"m{i}", "a-worker")) for i in range(5)]
    for row in rows:
        assert rn.relay("a", row, worker.floor)
    assert rn.run_until_converged(timeout=30)
    for name, replica in rn.replicas.items():
        held = {(r.key, r.owner, r.version) for r in replica.view.all_rows()}
        assert held == {(r.key, "a-worker", r.version) for r in rows}, name
        # The agent gossips the rows but never writes: the only origin is the worker.
        assert set(replica.known()) == {"a-worker"}, name
        assert replica.known_of("a-worker").top == rows[-1].version
        assert not replica.missing()
    assert rn.stats.applied_local == len(rows)


def test_every_host_applies_every_create_of_the_fleet_once() -> None:
    load = AgentLoad(hosts=12, creates_per_second=60.0, writers_per_host=2, warmup=0.5,
                     measure=1.0, idle=1.0, drain=30.0, seed=7)
    report = run(load)
    assert report.creates > 0
    assert report.tracked > 0
    assert report.held_by_all
    assert report.identical
    assert report.per_host_applied == {f"h{i:05d}": report.creates for i in range(12)}
    assert all(math.isfinite(t) for t in report.reach_all)
    assert report.local_applied > 0
    assert report.gossip_applied + report.sync_applied > 0


def test_a_row_new_to_a_host_is_pushed_on_so_creates_spread_without_pulls() -> None:
    """Gossip carries a row or two per packet: under a steady stream of creates, most rows
    reached most hosts only by the next pull. A host that takes a row new to it pushes it on
    to a few hosts more, once, so with pulls switched off nearly every host still gets it."""
    load = AgentLoad(hosts=40, creates_per_second=100.0, warmup=0.5, measure=1.0, idle=1.0,
                     drain=2.0, seed=3, sync_interval=1e9)
    report = run(load)
    assert report.creates > 100
    assert report.sync_applied == 0
    held = sum(report.per_host_applied.values()) / (load.hosts * report.creates)
    assert held > 0.95, held
