"""An agent speaking for its host's processes in SWIM (``tenants.py``, ``Swim.host``): the
records it gossips for them, its verdicts on their silence, its refutations, and every other
member taking them for dead with it. Driven by hand: stimuli in, decisions out."""

from __future__ import annotations

from dataclasses import replace

import pytest

from bodega.registry.membership.core.config import SwimConfig
from bodega.registry.membership.core.members import (
    HOST_META,
    EventKind,
    MemberRecord,
    MemberView,
    Role,
    Status,
)
from bodega.registry.membership.core.messages import Ack, Message, Ping, decode, encode, record_json
from bodega.registry.membership.core.swim import Swim
from bodega.registry.membership.core.tenants import Tenants
from tests.unit.registry.membership.swim_kit import (
    deliver,
    events,
    learn,
    node,
    rec,
    sends,
    tick_until,
)

CONFIG = SwimConfig(tenant_suspect_after=3.0, tenant_dead_after=8.0)


def agent() -> Swim:
    swim = node("agent", config=CONFIG)
    swim.join(0.0, [])
    return swim


def view(swim: Swim, name: str) -> MemberView:
    found = swim.member(name)
    assert found is not None, f"{name} unknown"
    return found


def check_in(swim: Swim, now: float, name: str = "w1", generation: int = 1,
             meta: dict[str, str] | None = None) -> MemberRecord:
    record, _ = swim.host(now, name, Role.WORKER, "ams", meta or {"url": "http://w1"},
                          generation)
    return record


def test_tenants_give_a_verdict_on_silence_alone() -> None:
    tenants = Tenants(3.0, 8.0)
    tenants.heard(0.0, "w1")
    assert tenants.next_due() == 3.0
    assert tenants.due(2.9) == []
    assert tenants.due(3.0) == [("w1", Status.SUSPECT)]
    assert tenants.due(5.0) == []  # suspect once
    assert tenants.next_due() == 8.0
    tenants.heard(6.0, "w1")  # back in time: alive again, judged from then
    assert tenants.due(8.5) == []
    assert tenants.due(14.0) == [("w1", Status.DEAD)]
    assert "w1" not in tenants
    with pytest.raises(ValueError, match="suspect before it is dead"):
        Tenants(8.0, 3.0)


def test_a_check_in_gossips_a_record_carrying_the_agent_as_host_and_its_address() -> None:
    swim = agent()
    record, outs = swim.host(1.0, "w1", Role.WORKER, "ams", {"url": "http://w1"}, 4)
    assert (record.host, record.addr, record.generation) == ("agent", swim.local.addr, 4)
    assert [(e.kind, e.member.name, e.member.host) for e in events(outs)] == [
        (EventKind.JOINED, "w1", "agent")]
    assert view(swim, "w1").host == "agent"
    again, outs = swim.host(2.0, "w1", Role.WORKER, "ams", {"url": "http://w1"}, 4)
    assert again is record
    assert events(outs) == []
    moved, outs = swim.host(3.0, "w1", Role.WORKER, "ams", {"url": "http://w1:2"}, 4)
    assert moved.incarnation == 1
    assert [e.kind for e in events(outs)] == [EventKind.META_UPDATED]
    with pytest.raises(ValueError, match="this agent itself"):
        swim.host(3.0, "agent", Role.WORKER, "ams", {}, 1)


def test_a_records_host_travels_in_its_metadata_which_any_version_decodes() -> None:
    hosted = replace(rec("w1", meta={"url": "http://w1"}), host="agent")
    wire = record_json(hosted)
    # Ten fields, as every version reads them; the agent among the metadata.
    assert len(wire) == 10
    assert wire[5] == {"url": "http://w1", HOST_META: "agent"}
    message = decode(encode(Message("agent", None, updates=(hosted, rec("w2")))))
    assert message.updates == (hosted, rec("w2"))
    assert message.updates[0].meta == {"url": "http://w1"}
    # The key is reserved: no daemon's own metadata may claim an agent.
    with pytest.raises(ValueError, match="reserved"):
        rec("w3", meta={HOST_META: "agent"})
    # Counted in the metadata's bound, so a member of any version takes the record.
    with pytest.raises(ValueError, match="at most 512 bytes"):
        replace(rec("w1", meta={"k": "x" * 490}), host="agent")


def test_the_agent_answers_probes_for_its_tenants_as_older_members_send_them() -> None:
    swim = agent()
    check_in(swim, 0.0)
    acks = [s for s in sends(deliver(swim, 1.0, "old", Ping(5, "w1")))
            if isinstance(s.message.body, Ack)]
    assert [a.message.body.seq for a in acks] == [5]  # type: ignore[union-attr]
    swim.tick(9.0)  # silent: dead, no longer answered for
    assert [s for s in sends(deliver(swim, 10.0, "old", Ping(6, "w1")))
            if isinstance(s.message.body, Ack)] == []


def test_a_silent_tenant_turns_suspect_then_dead_and_a_check_in_brings_a_new_generation(
        ) -> None:
    swim = agent()
    check_in(swim, 0.0)
    assert swim.next_due() <= 3.0
    kinds = [e.kind for t in (2.9, 3.0, 7.9, 8.0) for e in events(swim.tick(t))
             if e.member.name == "w1"]
    assert kinds == [EventKind.SUSPECT, EventKind.DEAD]
    assert view(swim, "w1").status is Status.DEAD
    back = check_in(swim, 9.0)  # it was frozen, not gone: its own count says 1 still
    assert (back.status, back.generation) == (Status.ALIVE, 2)


def test_a_suspect_tenant_that_checks_in_is_alive_at_a_higher_incarnation() -> None:
    swim = agent()
    check_in(swim, 0.0)
    swim.tick(3.5)
    assert view(swim, "w1").status is Status.SUSPECT
    back = check_in(swim, 4.0)
    assert (back.status, back.incarnation, back.generation) == (Status.ALIVE, 1, 1)
    assert [e.kind for e in events(swim.tick(6.9))] == []  # heard at 4: no verdict yet


def test_the_agent_refutes_a_death_others_derived_for_a_tenant_still_checking_in() -> None:
    swim = agent()
    mine = check_in(swim, 0.0, generation=3)
    outs = learn(swim, 1.0, mine.with_status(Status.DEAD, by="b"))
    now = view(swim, "w1")
    assert (now.status, now.generation) == (Status.ALIVE, 4)
    assert [e.kind for e in events(outs)] == [EventKind.JOINED]
    # A suspicion at its incarnation is refuted with the next one.
    current = swim.record_of("w1")
    assert current is not None
    learn(swim, 2.0, current.with_status(Status.SUSPECT, by="b"))
    refuted = view(swim, "w1")
    assert (refuted.status, refuted.incarnation) == (Status.ALIVE, 1)
    # Old news changes nothing.
    learn(swim, 3.0, mine.with_status(Status.DEAD, by="b"))
    assert swim.record_of("w1") == replace(current, incarnation=1)


def test_every_member_takes_an_agents_tenants_for_dead_with_it_and_never_probes_them() -> None:
    b = node("b", config=CONFIG)
    b.join(0.0, [])
    host = rec("agent")
    tenant = MemberRecord("w1", host.addr, Role.WORKER, "ams", {}, 0, 1, host="agent")
    other = MemberRecord("w2", host.addr, Role.WORKER, "ams", {}, 0, 1, host="agent")
    learn(b, 0.0, host, tenant, other)
    assert b.n == 2  # b and the agent: tenants are not probed, nor counted for gossip
    _, probe = tick_until(b, 0.0, Ping)
    assert probe.message.body.target == "agent"  # type: ignore[union-attr]
    # The agent is declared dead: its tenants go with it, declared by b.
    outs = learn(b, 5.0, host.with_status(Status.DEAD, by="c"))
    assert sorted((e.member.name, e.kind) for e in events(outs)) == [
        ("agent", EventKind.DEAD), ("w1", EventKind.DEAD), ("w2", EventKind.DEAD)]
    # A new life of the agent and of its tenants (their check-ins bump the generation).
    learn(b, 6.0, replace(host, generation=2), replace(tenant, generation=2))
    assert view(b, "w1").status is Status.ALIVE
    assert view(b, "w2").status is Status.DEAD


def test_a_member_never_suspects_a_tenant_on_its_own() -> None:
    b = node("b", config=CONFIG)
    b.join(0.0, [])
    tenant = MemberRecord("w1", ("10.0.0.9", 7000), Role.WORKER, "ams", {}, 0, 1, host="agent")
    learn(b, 0.0, rec("agent"), tenant, tenant.with_status(Status.SUSPECT, by="agent"))
    # Its agent's suspicion is news, but no timer of b's turns it into a death (the agent
    # itself stays alive: it refutes each suspicion of b's).
    for t in range(1, 120):
        learn(b, float(t), replace(rec("agent"), incarnation=t))
        b.tick(float(t))
    assert view(b, "w1").status is Status.SUSPECT


def test_an_agent_declared_dead_comes_back_with_its_tenants() -> None:
    swim = agent()
    check_in(swim, 0.0)
    me = swim.record
    outs = learn(swim, 1.0, me.with_status(Status.DEAD, by="b"))
    assert swim.generation == 2
    tenant = view(swim, "w1")
    assert (tenant.status, tenant.generation) == (Status.ALIVE, 2)
    assert [(e.member.name, e.kind) for e in events(outs)] == [("w1", EventKind.JOINED)]


def test_a_tenant_that_leaves_shows_left_and_is_judged_no_more() -> None:
    swim = agent()
    check_in(swim, 0.0)
    outs = swim.tenant_left(1.0, "w1")
    assert [e.kind for e in events(outs)] == [EventKind.LEFT]
    assert [e.kind for e in events(swim.tick(20.0))] == []


def test_a_tenant_an_earlier_life_spoke_for_is_judged_and_dead_unless_it_checks_in() -> None:
    """A restarted agent hears from peers of a tenant its earlier life gossiped: it judges
    it from then on, so a process gone while the agent was down does not stay alive."""
    swim = agent()
    ghost = MemberRecord("w9", swim.local.addr, Role.WORKER, "ams", {}, 0, 3, host="agent")
    learn(swim, 10.0, ghost)
    assert view(swim, "w9").status is Status.ALIVE
    kinds = [e.kind for t in (12.9, 13.0, 18.0) for e in events(swim.tick(t))
             if e.member.name == "w9"]
    assert kinds == [EventKind.SUSPECT, EventKind.DEAD]
    # One that does check in stays alive, its record as the agent had it.
    learn(swim, 20.0, replace(ghost, name="w8"))
    assert check_in(swim, 21.0, "w8", generation=1).generation == 3
    assert [e.kind for e in events(swim.tick(23.5))] == []
    assert view(swim, "w8").status is Status.ALIVE


def test_the_agents_own_stall_counts_against_no_tenant() -> None:
    swim = agent()
    check_in(swim, 0.0)
    swim.note_loop_lag(6.0)  # its loop stalled: the check-ins of those seconds wait unread
    assert [e.kind for e in events(swim.tick(8.5))] == []
    assert [e.kind for e in events(swim.tick(9.0))] == [EventKind.SUSPECT]


def test_a_busy_loops_small_lags_do_not_keep_a_silent_tenant_alive() -> None:
    swim = agent()
    check_in(swim, 0.0)
    t, kinds = 0.0, []
    while t < 10.0:  # 0.2 s late at every tick: busy, never stalled
        t = round(t + 0.25, 2)
        swim.note_loop_lag(0.2)
        kinds += [e.kind for e in events(swim.tick(t))]
    assert kinds == [EventKind.SUSPECT, EventKind.DEAD]


def test_a_check_in_is_answered_with_what_changed_since_the_version_its_tenant_holds() -> None:
    """``Swim.changed_since``: the agent's own record, then each member stored after the
    version, once (its latest), oldest change first; nothing else of a large table."""
    swim = agent()
    check_in(swim, 1.0, "w1")
    check_in(swim, 1.0, "w2")
    held = swim.table_version
    assert [r.name for r in swim.changed_since(held)] == ["agent"]
    check_in(swim, 2.0, "w3")
    check_in(swim, 2.0, "w1", meta={"url": "http://w1:2"})
    check_in(swim, 2.0, "w1", meta={"url": "http://w1:3"})
    changed = swim.changed_since(held)
    assert [r.name for r in changed] == ["agent", "w3", "w1"]
    assert changed[2].meta["url"] == "http://w1:3"
    assert [r.name for r in swim.changed_since(0)] == ["agent", "w2", "w3", "w1"]
    assert [r.name for r in swim.changed_since(swim.table_version)] == ["agent"]
