"""The SWIM state machine driven by hand: events in, exact packets and decisions out."""

from __future__ import annotations

import itertools

import pytest

from bodega.registry.membership.core.config import SwimConfig
from bodega.registry.membership.core.members import EventKind, Status
from bodega.registry.membership.core.messages import Ack, Message, Nack, Ping, PingReq, Sync, encode
from bodega.registry.membership.core.outputs import Send
from tests.unit.registry.membership.swim_kit import (
    ack,
    addr_of,
    bodies,
    deliver,
    events,
    learn,
    node,
    ping_of,
    rec,
    sends,
    tick_until,
    updates_about,
)

OTHERS = [f"m{i}" for i in range(9)]


# ── refutation and generations ──────────────────────────────────────────────


def test_a_suspected_member_refutes_with_a_higher_incarnation() -> None:
    a = node("a")
    learn(a, 0.0, rec("b"))
    learn(a, 1.0, rec("a", status=Status.SUSPECT, by="b"))
    assert a.incarnation == 1
    assert a.stats.refutations == 1
    assert a.health == 1  # Lifeguard: being suspected hints we may be the slow one
    refutation = updates_about(a.tick(5.0), "a")
    assert refutation
    assert refutation[0].status is Status.ALIVE
    assert refutation[0].incarnation == 1


def test_a_stale_suspicion_is_not_refuted_again() -> None:
    a = node("a")
    learn(a, 0.0, rec("a", status=Status.SUSPECT, by="b"))
    learn(a, 1.0, rec("a", status=Status.SUSPECT, by="c"))  # still incarnation 0 < 1
    assert (a.incarnation, a.stats.refutations) == (1, 1)


def test_the_suspect_hears_of_its_suspicion_from_the_probe_and_refutes_in_the_ack() -> None:
    a, b = node("a"), node("b")
    learn(a, 0.0, rec("b"))
    learn(a, 0.0, rec("b", status=Status.SUSPECT, by="c"))
    _, ping = tick_until(a, 0.0, Ping)
    assert ping_of(ping).target == "b"
    assert ping.message.updates[0] == rec("b", status=Status.SUSPECT, by="c")
    (acked,) = bodies(b.receive(1.0, addr_of("a"), ping.message), Ack)
    assert rec("b", inc=1) in acked.message.updates


def test_dead_is_final_for_a_generation_and_a_new_generation_revives() -> None:
    a = node("a")
    learn(a, 0.0, rec("b"))
    assert [e.kind for e in events(learn(a, 1.0, rec("b", status=Status.DEAD, by="c")))] == [
        EventKind.DEAD]
    assert events(learn(a, 2.0, rec("b", inc=99))) == []
    assert events(learn(a, 2.0, rec("b", inc=99, status=Status.SUSPECT))) == []
    assert a.member("b").status is Status.DEAD  # type: ignore[union-attr]
    (back,) = events(learn(a, 3.0, rec("b", gen=2)))
    assert (back.kind, back.member.status, back.member.generation) == (
        EventKind.JOINED, Status.ALIVE, 2)


def test_a_higher_generation_supersedes_whatever_was_known() -> None:
    a = node("a")
    learn(a, 0.0, rec("b", inc=5, status=Status.SUSPECT, by="c"))
    assert a.suspicion_deadline("b") is not None
    learn(a, 1.0, rec("b", gen=2))
    view = a.member("b")
    assert view is not None
    assert (view.status, view.incarnation, view.generation) == (
        Status.ALIVE, 0, 2)
    assert a.suspicion_deadline("b") is None  # the old generation's suspicion is void
    learn(a, 2.0, rec("b", gen=1, inc=9, status=Status.DEAD))
    assert a.member("b").generation == 2  # type: ignore[union-attr]


def test_a_member_told_it_is_dead_rejoins_as_the_next_generation() -> None:
    a = node("a", generation=4)
    learn(a, 0.0, rec("b"), rec("a", gen=4, inc=2, status=Status.DEAD, by="b"))
    assert (a.generation, a.incarnation, a.stats.rejoins) == (5, 0, 1)
    assert a.local.status is Status.ALIVE
    assert rec("a", gen=5) in updates_about(a.tick(5.0), "a")
    learn(a, 6.0, rec("a", gen=4, status=Status.DEAD, by="c"))  # old news now
    assert a.generation == 5


def test_a_node_that_lost_its_generation_counter_moves_past_the_one_it_hears() -> None:
    a = node("a", generation=1)
    learn(a, 0.0, rec("a", gen=7))
    assert a.generation == 8


# ── suspicion ───────────────────────────────────────────────────────────────


def test_suspicion_shortens_with_independent_confirmations_and_ends_dead() -> None:
    a = node("a")
    learn(a, 0.0, *[rec(m) for m in OTHERS])  # n = 10: Min 4 s, Max 24 s, K = 2
    learn(a, 10.0, rec("m0", status=Status.SUSPECT, by="m1"))
    assert a.suspicion_deadline("m0") == 34.0
    learn(a, 11.0, rec("m0", status=Status.SUSPECT, by="m2"))
    assert a.suspicion_deadline("m0") == pytest.approx(34 - 20 * 0.6309, abs=1e-3)
    learn(a, 11.0, rec("m0", status=Status.SUSPECT, by="m2"))  # not independent
    learn(a, 12.0, rec("m0", status=Status.SUSPECT, by="m3"))
    assert a.suspicion_deadline("m0") == 14.0
    assert events(a.tick(13.99)) == []
    (dead,) = events(a.tick(14.0))
    assert (dead.kind, dead.member.name) == (EventKind.DEAD, "m0")
    assert a.stats.deaths == 1
    assert updates_about(a.tick(14.5), "m0")[0] == rec("m0", status=Status.DEAD, by="a")


def test_confirmations_are_passed_on() -> None:
    a = node("a")
    learn(a, 0.0, *[rec(m) for m in OTHERS])
    learn(a, 1.0, rec("m0", status=Status.SUSPECT, by="m1"))
    a.piggyback.updates.take(100_000, limit=1)  # everything queued so far went out
    learn(a, 1.5, rec("m0", status=Status.SUSPECT, by="m2"))
    queued, _ = a.piggyback.updates.take(100_000, limit=1)
    assert queued == [rec("m0", status=Status.SUSPECT, by="m2")]


def test_a_refutation_cancels_the_suspicion() -> None:
    a = node("a")
    learn(a, 0.0, *[rec(m) for m in OTHERS])
    learn(a, 1.0, rec("m0", status=Status.SUSPECT, by="m1"))
    (alive,) = events(learn(a, 2.0, rec("m0", inc=1)))
    assert alive.kind is EventKind.ALIVE
    assert events(a.tick(60.0)) == []
    assert a.member("m0").status is Status.ALIVE  # type: ignore[union-attr]


# ── probing, local health, nacks ────────────────────────────────────────────


def test_a_direct_ack_completes_the_probe_and_improves_health() -> None:
    a = node("a")
    learn(a, 0.0, rec("b"), rec("a", status=Status.SUSPECT, by="b"))  # health 1
    t, ping = tick_until(a, 0.0, Ping)
    ack(a, t + 0.1, "b", ping_of(ping).seq)
    assert a.health == 0
    assert events(a.tick(t + 5)) == []
    assert a.stats.probe_failures == 0


def test_without_relays_a_failed_probe_suspects_the_target_and_costs_one_health() -> None:
    a = node("a")
    learn(a, 0.0, rec("b"))
    t, _ = tick_until(a, 0.0, Ping)
    assert sends(a.tick(t + 0.5)) == []  # nobody to relay through
    assert events(a.tick(t + 0.99)) == []
    (suspect,) = events(a.tick(t + 1.0))
    assert (suspect.kind, suspect.member.name) == (EventKind.SUSPECT, "b")
    assert (a.health, a.stats.suspicions, a.stats.probe_failures) == (1, 1, 1)


def test_ping_req_goes_to_k_relays_after_the_probe_timeout() -> None:
    a = node("a")
    learn(a, 0.0, *[rec(m) for m in OTHERS])
    t, ping = tick_until(a, 0.0, Ping)
    target = ping_of(ping).target
    assert bodies(a.tick(t + 0.49), PingReq) == []
    reqs = bodies(a.tick(t + 0.5), PingReq)
    assert len(reqs) == 3
    assert {s.message.body.target for s in reqs} == {target}  # type: ignore[union-attr]
    assert addr_of(target) not in {s.addr for s in reqs}
    # A forwarded ack (same sequence) from a relay completes the probe.
    ack(a, t + 0.8, "m8", ping_of(ping).seq)
    assert events(a.tick(t + 1.0)) == []
    assert a.stats.probe_failures == 0


@pytest.mark.parametrize(("nacks", "penalty"), [(0, 3), (1, 2), (3, 0)])
def test_missing_nacks_cost_health_when_relays_were_asked(nacks: int, penalty: int) -> None:
    a = node("a")
    learn(a, 0.0, *[rec(m) for m in OTHERS])
    t, ping = tick_until(a, 0.0, Ping)
    relays = [s.addr for s in bodies(a.tick(t + 0.5), PingReq)]
    for addr in relays[:nacks]:
        a.receive(t + 0.9, addr, Message("relay", Nack(ping_of(ping).seq)))
    a.tick(t + 1.0)
    assert a.health == penalty
    assert a.stats.suspicions == 1


def test_local_health_stretches_the_probe_and_the_interval() -> None:
    a = node("a")
    learn(a, 0.0, *[rec(m) for m in OTHERS])
    for i in range(2):
        learn(a, 0.0, rec("a", inc=i, status=Status.SUSPECT, by="m0"))
    assert a.health == 2
    t, _ = tick_until(a, 0.0, Ping)
    assert bodies(a.tick(t + 1.49), PingReq) == []  # timeout 0.5 s x 3
    assert len(bodies(a.tick(t + 1.5), PingReq)) == 3
    assert events(a.tick(t + 2.99)) == []  # interval 1 s x 3
    assert [e.kind for e in events(a.tick(t + 3.0))] == [EventKind.SUSPECT]


def test_loop_lag_counts_against_health_once_per_probe_round() -> None:
    a = node("a")
    learn(a, 0.0, rec("b"))
    a.note_loop_lag(0.05)
    assert a.health == 0
    a.note_loop_lag(0.3)
    a.note_loop_lag(0.3)
    assert a.health == 1
    t, ping = tick_until(a, 0.0, Ping)
    ack(a, t + 0.01, "b", ping_of(ping).seq)
    a.note_loop_lag(0.3)
    assert a.health == 1  # -1 for the ack, +1 for the lag in this new round


def test_the_indirect_phase_keeps_its_length_when_the_loop_stalls() -> None:
    a = node("a")
    learn(a, 0.0, *[rec(m) for m in OTHERS])
    t, ping = tick_until(a, 0.0, Ping)
    assert len(bodies(a.tick(t + 0.9), PingReq)) == 3  # ticked 0.4 s late
    assert events(a.tick(t + 1.3)) == []  # a full 0.5 s for the relays
    ack(a, t + 1.35, "m1", ping_of(ping).seq)
    assert events(a.tick(t + 2.0)) == []
    assert a.stats.probe_failures == 0


def test_a_relay_nacks_at_80_percent_of_the_probe_timeout() -> None:
    relay = node("r")
    (ping,) = bodies(deliver(relay, 10.0, "a", PingReq(41, "b", addr_of("b"))), Ping)
    assert ping.addr == addr_of("b")
    assert bodies(relay.tick(10.39), Nack) == []
    (nack,) = bodies(relay.tick(10.4), Nack)
    assert nack.addr == addr_of("a")
    assert nack.message.body == Nack(41)
    assert bodies(relay.tick(10.5), Nack) == []  # once


def test_a_relay_forwards_the_targets_ack_and_then_sends_no_nack() -> None:
    relay = node("r")
    (ping,) = bodies(deliver(relay, 10.0, "a", PingReq(41, "b", addr_of("b"))), Ping)
    (forwarded,) = bodies(ack(relay, 10.02, "b", ping_of(ping).seq), Ack)
    assert forwarded.addr == addr_of("a")
    assert forwarded.message.body == Ack(41)
    assert bodies(relay.tick(10.5), Nack) == []


def test_a_ping_for_another_name_is_not_acked() -> None:
    b = node("b")
    assert bodies(deliver(b, 0.0, "a", Ping(1, "someone-else")), Ack) == []
    assert len(bodies(deliver(b, 0.0, "a", Ping(2, "b")), Ack)) == 1


def test_probes_go_round_robin_over_every_live_member() -> None:
    a = node("a")
    learn(a, 0.0, *[rec(m) for m in OTHERS], rec("dead", status=Status.DEAD))
    targets, t = [], 0.0
    for _ in range(2 * len(OTHERS)):
        t, ping = tick_until(a, t, Ping)
        targets.append(ping_of(ping).target)
        ack(a, t, ping_of(ping).target, ping_of(ping).seq)
        t += 0.01
    assert sorted(targets[:9]) == OTHERS
    assert sorted(targets[9:]) == OTHERS


# ── dissemination ───────────────────────────────────────────────────────────


def test_an_update_is_piggybacked_exactly_the_retransmit_limit_times() -> None:
    a = node("a")
    learn(a, 0.0, *[rec(m) for m in OTHERS])  # n = 10: 4·ceil(log10 11) = 8
    learn(a, 0.0, rec("m0", inc=3))
    carried = 0
    t = 0.0
    while t < 20:
        carried += sum(r == rec("m0", inc=3) for r in updates_about(a.tick(t), "m0"))
        t = round(t + 0.05, 3)
    assert carried == a.config.retransmit_limit(10) == 8


def test_gossip_goes_to_three_members_every_200ms_while_there_is_news() -> None:
    quiet = SwimConfig(probe_interval=1000.0, push_pull_interval=1000.0)
    a = node("a", config=quiet)  # no probes, no push-pull: gossip alone
    learn(a, 0.0, *[rec(m) for m in OTHERS])  # nine updates, each sent 8 times (n = 10)
    rounds: list[tuple[float, list[tuple[str, int]]]] = []
    for step in range(200):
        t = round(step * 0.05, 2)
        gossip = sends(a.tick(t))
        assert all(s.message.body is None for s in gossip)
        assert all(len(s.message.updates) == 9 for s in gossip)  # all fit in one packet
        if gossip:
            rounds.append((t, [s.addr for s in gossip]))
    assert [len(addrs) for _, addrs in rounds] == [3, 3, 2]
    assert all(len(set(addrs)) == len(addrs) for _, addrs in rounds)
    assert {round(b[0] - a_[0], 2) for a_, b in itertools.pairwise(rounds)} == {0.2}


def test_recently_dead_members_are_gossiped_to_for_a_while() -> None:
    a = node("a", config=SwimConfig(gossip_nodes=1))
    learn(a, 0.0, rec("b", status=Status.DEAD))
    assert {s.addr for s in sends(a.tick(0.5)) if s.message.body is None} == {addr_of("b")}
    learn(a, 40.0, rec("c", status=Status.DEAD))  # fresh news; b died 40 s ago
    gossip = {s.addr for t in range(41, 50) for s in sends(a.tick(float(t)))
              if s.message.body is None}
    assert gossip == {addr_of("c")}


def test_push_pull_sends_a_digest_and_only_the_buckets_that_differ_come_back() -> None:
    a, b = node("a"), node("b")
    members = [rec(f"member-with-a-long-name-{i:03d}", meta={"api": f"http://10.1.0.{i}:4280"})
               for i in range(120)]
    learn(a, 0.0, rec("b"), *members)
    learn(b, 0.0, rec("a"), *members[:-1])  # b missed one join
    t = 0.0
    while not (syncs := bodies(a.tick(t), Sync)):
        t += 0.05
    assert t <= a.config.push_pull_period(a.n)
    (push,) = syncs  # one packet, whatever the table's size
    assert isinstance(push.message.body, Sync)
    assert push.message.body.digest is not None
    assert [r.name for r in push.message.body.records] == ["a"]
    assert len(encode(push.message)) <= a.config.payload_budget
    replies = [s for s in b.receive(t, addr_of("a"), push.message) if isinstance(s, Send)]
    back = [r for s in replies if isinstance(s.message.body, Sync) for r in s.message.body.records]
    assert 0 < len(back) < 20  # b's records in the differing bucket, not its table
    (first,) = [s for s in replies if isinstance(s.message.body, Sync) and s.message.body.want]
    outs: list[Send] = []
    for s in replies:
        outs += [o for o in a.receive(t, addr_of("b"), s.message) if isinstance(o, Send)]
    for s in outs:
        b.receive(t, addr_of("a"), s.message)
    assert {m.name for m in b.members()} == {m.name for m in a.members()}
    assert isinstance(first.message.body, Sync)


def test_members_that_agree_exchange_a_digest_and_nothing_more() -> None:
    a, b = node("a"), node("b")
    members = [rec(f"m{i:03d}") for i in range(100)]
    learn(a, 0.0, rec("b"), *members)
    learn(b, 0.0, rec("a"), *members)
    push = Message("a", Sync((rec("a"),), True, a._table.digest.digest(a.record)))
    assert [s for s in b.receive(1.0, addr_of("a"), push) if isinstance(s, Send)] == []
    hello = b.receive(1.0, addr_of("c"), Message("c", Sync((rec("c"),), True)))
    records = [r for s in bodies(hello, Sync) if isinstance(s.message.body, Sync)
               for r in s.message.body.records]
    assert len(records) == 103  # a joiner still gets the whole table: b, a, c and the 100


def test_dead_members_are_told_so_periodically() -> None:
    a = node("a")
    learn(a, 0.0, rec("b", status=Status.DEAD, by="c"))
    _t, announce = tick_until(a, 0.0, Sync, limit=10)
    assert announce.addr == addr_of("b")
    assert announce.message.body == Sync((rec("a"), rec("b", status=Status.DEAD, by="c")),
                                         reply=True)


def test_join_retries_seeds_with_backoff_until_one_answers() -> None:
    a = node("a")
    hello = sends(a.join(0.0, [addr_of("s"), addr_of("a")]))
    assert [s.addr for s in hello] == [addr_of("s")]  # never ourselves
    assert hello[0].message.body == Sync((rec("a"),), reply=True)
    assert bodies(a.tick(0.99), Sync) == []
    assert len(bodies(a.tick(1.0), Sync)) == 1
    assert bodies(a.tick(2.5), Sync) == []
    assert len(bodies(a.tick(3.0), Sync)) == 1  # after 2 s more
    outs = deliver(a, 3.1, "s", Sync((rec("s"),), reply=False))
    assert a.joined
    assert [e.kind for e in events(outs)] == [EventKind.JOINED]
    later = [s for t in range(4, 30) for s in bodies(a.tick(float(t)), Sync)]
    assert all(s.message.body != Sync((rec("a"),), reply=True) for s in later)


def test_a_seed_answers_a_join_with_its_table_and_spreads_the_newcomer() -> None:
    s = node("s")
    learn(s, 0.0, rec("b"))
    outs = deliver(s, 1.0, "a", Sync((rec("a"),), reply=True))
    (reply,) = bodies(outs, Sync)
    assert reply.addr == addr_of("a")
    records = sorted(reply.message.body.records, key=lambda r: r.name)  # type: ignore[union-attr]
    assert records == [rec("a"), rec("b"), rec("s")]
    assert [e.kind for e in events(outs)] == [EventKind.JOINED]
    assert rec("a") in [r for o in sends(s.tick(2.0)) for r in o.message.updates]


def test_alone_is_joined() -> None:
    a = node("a")
    assert a.join(0.0, []) == []
    assert a.joined


def test_leave_is_announced_at_once_and_stops_probing() -> None:
    a = node("a")
    learn(a, 0.0, *[rec(m) for m in OTHERS])
    outs = a.leave(1.0)
    assert len(sends(outs)) == 3
    assert all(rec("a", status=Status.LEFT, by="a") in s.message.updates for s in sends(outs))
    assert a.members()[0].status is Status.LEFT
    assert all(not bodies(a.tick(1.0 + t / 10), Ping) for t in range(50))
    learn(a, 7.0, rec("a", status=Status.DEAD, by="m0"))
    assert a.generation == 1  # leaving: no comeback


def test_metadata_updates_raise_the_incarnation_and_reach_others() -> None:
    a, b = node("a"), node("b")
    learn(a, 0.0, rec("b"))
    learn(b, 0.0, rec("a"))
    a.update_meta({"api": "http://10.0.0.1:4280"})
    assert a.incarnation == 1
    newer = rec("a", inc=1, meta={"api": "http://10.0.0.1:4280"})
    _, gossip = tick_until(a, 0.0, type(None))
    assert newer in gossip.message.updates
    (event,) = events(b.receive(1.0, addr_of("a"), gossip.message))
    assert event.kind is EventKind.META_UPDATED
    assert event.member.meta == {"api": "http://10.0.0.1:4280"}
