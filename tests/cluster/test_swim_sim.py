"""SWIM + Lifeguard on the simulated network: many nodes, simulated time, real codec.

Each scenario is seeded, so a failure replays exactly. Figures (detection
times, suspicions) are printed; run with ``-s`` to see them.
"""

from __future__ import annotations

import math
import statistics

from bodega.registry.membership.core.config import SwimConfig
from bodega.registry.membership.core.members import EventKind, Status
from bodega.registry.membership.core.suspicion import suspicion_max, suspicion_min
from bodega.sim.swim.simnet import SimNet

LAN = SwimConfig()
# Plain SWIM for comparison: no local health, no nacks, a fixed suspicion timeout.
PLAIN = SwimConfig(awareness_max_multiplier=1, suspicion_max_timeout_mult=1, nacks=False)


def cluster(n: int, seed: int, *, config: SwimConfig = LAN, loss: float = 0.0) -> SimNet:
    """``n`` nodes that all join through the first one, run until they agree."""
    net = SimNet(seed, config=config, loss=loss)
    names = [f"node-{i:03d}" for i in range(n)]
    for name in names:
        net.add(name)
    for name in names[1:]:
        net.join(name, [names[0]])
    assert net.run_until(net.converged, timeout=60), "the cluster never converged"
    return net


def deaths_after(net: SimNet, start: float, *, about: set[str] | None = None) -> list[str]:
    return [o.event.member.name for o in net.observations
            if o.at >= start and o.event.kind is EventKind.DEAD
            and (about is None or o.event.member.name in about)]


def detection_bound(n: int) -> float:
    """When memberlist's formulas say every live member must have declared a crash.

    first probe of the dead node (SWIM: e/(e-1) ~ 1.6 periods expected; 3 allowed)
    + the longest a suspicion can last (Max: it only shrinks with confirmations)
    + spreading the death (each update is gossiped retransmit_limit times, 200 ms apart)
    """
    first_probe = 3 * LAN.probe_interval
    return first_probe + suspicion_max(LAN, n) + LAN.retransmit_limit(n) * LAN.gossip_interval


def test_200_nodes_joining_through_one_seed_converge() -> None:
    net = SimNet(1)
    names = [f"node-{i:03d}" for i in range(200)]
    for name in names:
        net.add(name)
    for name in names[1:]:
        net.join(name, ["node-000"])
    # Updates take O(log n) gossip rounds; 30 s is ~150 rounds and 3 push-pull periods.
    assert net.run_until(net.converged, timeout=30.0, step=0.25)
    print(f"\n200 nodes converged in {net.now:.2f} s simulated; "
          f"{net.traffic.sent} packets, largest {net.traffic.largest} B")
    assert net.traffic.largest <= 1400
    assert all(net.nodes[name].swim.joined for name in names[1:])


def test_a_crashed_node_is_declared_dead_everywhere_within_the_expected_time() -> None:
    n = 50
    net = cluster(n, seed=2)
    net.run_for(10)
    killed_at = net.now
    net.kill("node-017")
    bound = detection_bound(n)
    assert net.run_until(lambda: net.everyone_sees("node-017", Status.DEAD), timeout=bound)
    firsts = sorted(o.at - killed_at for o in net.first(EventKind.DEAD, "node-017"))
    assert len(firsts) == n - 1
    # Nobody can call it dead before the shortest suspicion has run its course.
    assert firsts[0] >= suspicion_min(LAN, n)
    assert firsts[-1] <= bound
    print(f"\ncrash of 1 in {n}: first declared dead after {firsts[0]:.2f} s, everyone after "
          f"{firsts[-1]:.2f} s (median {statistics.median(firsts):.2f} s; bound {bound:.1f} s, "
          f"suspicion Min {suspicion_min(LAN, n):.2f} s)")


def test_five_percent_loss_for_minutes_kills_nobody() -> None:
    n = 40
    net = cluster(n, seed=3, loss=0.05)
    start = net.now
    net.run_for(240)
    suspicions = sum(node.swim.stats.suspicions for node in net.nodes.values())
    refutations = sum(node.swim.stats.refutations for node in net.nodes.values())
    probes = sum(node.swim.stats.probes for node in net.nodes.values())
    print(f"\n5% loss, {n} nodes, 240 s: {probes} probes, {suspicions} suspicions, "
          f"{refutations} refutations, 0 deaths expected; {net.traffic.lost} packets lost")
    assert net.traffic.lost > 0.04 * net.traffic.sent
    assert deaths_after(net, start) == []
    assert net.converged()


def slow_node_run(config: SwimConfig) -> tuple[list[str], int]:
    """20 nodes, one of them 5 s behind on everything it receives, for 3 minutes."""
    net = cluster(20, seed=4, config=config)
    start = net.now
    net.set_slow("node-007", 5.0)
    net.run_for(180)
    healthy = set(net.nodes) - {"node-007"}
    return deaths_after(net, start, about=healthy), net.nodes["node-007"].swim.stats.suspicions


def test_one_slow_node_kills_no_healthy_node_thanks_to_lifeguard() -> None:
    healthy_deaths, accusations = slow_node_run(LAN)
    plain_deaths, plain_accusations = slow_node_run(PLAIN)
    print(f"\nslow node (5 s behind), 180 s: Lifeguard {accusations} suspicions raised by it, "
          f"{len(healthy_deaths)} healthy deaths; plain SWIM {plain_accusations} suspicions, "
          f"{len(plain_deaths)} healthy deaths")
    assert healthy_deaths == []
    # The same run without Lifeguard: the slow node's accusations become deaths.
    assert len(plain_deaths) > 0
    assert accusations < plain_accusations / 10


def test_a_partition_is_declared_dead_both_ways_then_heals_by_itself() -> None:
    net = cluster(20, seed=5)
    left, right = sorted(net.nodes)[:10], sorted(net.nodes)[10:]
    net.partition(left, right)

    def split() -> bool:
        return all(net.everyone_sees(name, Status.DEAD, observers=left) for name in right) and \
            all(net.everyone_sees(name, Status.DEAD, observers=right) for name in left)

    assert net.run_until(split, timeout=120)
    assert net.converged(left)
    assert net.converged(right)
    healed_at = net.now
    net.heal()
    assert net.run_until(net.converged, timeout=60)
    print(f"\npartition 10/10: each side saw the other dead; after healing all 20 alive "
          f"in {net.now - healed_at:.2f} s")


def test_a_restarted_node_is_alive_again_after_being_declared_dead() -> None:
    net = cluster(15, seed=6)
    net.kill("node-004")
    assert net.run_until(lambda: net.everyone_sees("node-004", Status.DEAD), timeout=60)
    net.restart("node-004", ["node-000"])
    assert net.run_until(
        lambda: net.everyone_sees("node-004", Status.ALIVE, generation=2), timeout=30)
    assert net.converged()


def test_a_graceful_leave_shows_left_everywhere_and_never_dead() -> None:
    net = cluster(15, seed=7)
    start = net.now
    net.leave("node-009")
    assert net.run_until(lambda: net.everyone_sees("node-009", Status.LEFT), timeout=5)
    net.kill("node-009")  # the process exits after leaving
    net.run_for(60)
    assert net.everyone_sees("node-009", Status.LEFT)
    assert deaths_after(net, start) == []


def test_retransmit_and_suspicion_figures_match_memberlist() -> None:
    # The numbers the scenarios above rely on, as memberlist derives them.
    assert [LAN.retransmit_limit(n) for n in (10, 100, 1000)] == [8, 12, 16]
    assert suspicion_min(LAN, 100) == 8.0
    assert math.isclose(suspicion_max(LAN, 100), 48.0)
