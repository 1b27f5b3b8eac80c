"""The simulated network is a fake other tests trust: deterministic, and its faults are real."""

from __future__ import annotations

from bodega.registry.membership.core.members import Status
from bodega.registry.membership.core.messages import Item
from bodega.sim.swim.simnet import SimNet
from bodega.sim.swim.simtime import SimClock


def small(seed: int, n: int = 5, **kw: object) -> SimNet:
    net = SimNet(seed, **kw)  # type: ignore[arg-type]
    for i in range(n):
        net.add(f"n{i}")
    for i in range(1, n):
        net.join(f"n{i}", ["n0"])
    return net


def trace(net: SimNet) -> list[tuple[float, str, str, str]]:
    return [(o.at, o.observer, o.event.kind, o.event.member.name) for o in net.observations]


def test_the_same_seed_replays_the_same_history() -> None:
    runs = []
    for _ in range(2):
        net = small(7, loss=0.1)
        net.run_for(20)
        net.kill("n3")
        net.run_for(30)
        runs.append((trace(net), net.traffic))
    assert runs[0] == runs[1]
    assert runs[0][1].lost > 0


def test_the_clock_moves_only_with_the_network() -> None:
    clock = SimClock(5.0)
    assert clock() == 5.0
    net = small(1)
    assert net.now == 0.0
    net.run_for(2.5)
    assert net.clock() == 2.5


def test_members_join_through_a_seed_and_see_each_other() -> None:
    net = small(1)
    assert not net.converged()
    assert net.run_until(net.converged, timeout=10)
    assert net.traffic.largest <= 1400  # packets went through the real codec and HMAC


def test_a_lossless_network_loses_nothing_and_a_dead_link_loses_everything() -> None:
    net = small(2, n=2)
    net.run_for(5)
    assert net.traffic.lost == 0
    net.set_link_loss("n0", "n1", 1.0)
    sent = net.traffic.sent
    net.run_for(5)
    assert net.traffic.lost == net.traffic.sent - sent > 0


def test_a_partition_cuts_groups_apart_and_heal_joins_them() -> None:
    net = small(3, n=4)
    net.run_until(net.converged, timeout=10)
    net.partition(["n0", "n1"], ["n2", "n3"])
    assert net.run_until(lambda: net.status("n0", "n2") is Status.DEAD, timeout=60)
    assert net.status("n0", "n1") is Status.ALIVE
    net.heal()
    assert net.run_until(net.converged, timeout=60)


def test_a_killed_node_stops_answering_and_a_restart_is_a_new_generation() -> None:
    net = small(4, n=3)
    net.run_until(net.converged, timeout=10)
    net.kill("n2")
    assert net.run_until(lambda: net.everyone_sees("n2", Status.DEAD), timeout=60)
    node = net.restart("n2", ["n0"])
    assert node.swim.generation == 2
    assert net.run_until(lambda: net.everyone_sees("n2", Status.ALIVE, generation=2), timeout=30)


def test_a_slow_node_gets_its_packets_late_and_feels_it_in_its_health() -> None:
    net = small(5, n=2)
    net.run_until(net.converged, timeout=10)
    net.set_slow("n1", 1.2)  # acks to n0's probes come back after the probe deadline
    net.run_for(5)
    assert net.nodes["n0"].swim.stats.suspicions > 0
    assert net.nodes["n1"].swim.health > 0


def test_items_broadcast_in_the_simulation_reach_everyone_once() -> None:
    net = small(6, n=8)
    net.run_until(net.converged, timeout=10)
    net.broadcast("n0", Item("hello", {"v": 1}))
    net.run_for(5)
    receivers = sorted(name for _, name, d in net.deliveries if d.item.key == "hello")
    assert receivers == [f"n{i}" for i in range(1, 8)]
