"""The member table's index of replica holders: whom pushes and pulls pick from.

On a host with a registry agent only the agent holds a replica (``meta["sync"]``);
its twenty workers, its broker and its proxy are members too. Pushes and pulls
sample the holders alone, so they find an agent at once however many processes
a host runs.
"""

from __future__ import annotations

import random

from bodega.registry.membership.core.config import SwimConfig
from bodega.registry.membership.core.members import MemberRecord, MemberView, Role, Status
from bodega.registry.membership.core.table import MemberTable
from bodega.registry.sync.core.peers import choose_alive


def record(name: str, *, holds: bool, status: Status = Status.ALIVE, incarnation: int = 0,
           port: int = 7000) -> MemberRecord:
    meta = {"url": f"https://{name}", **({"sync": f"https://{name}"} if holds else {})}
    return MemberRecord(name, ("127.0.0.1", port), Role.AGENT if holds else Role.WORKER,
                        "ams", meta, incarnation=incarnation, status=status)


def test_only_live_members_that_hold_a_replica_are_holders() -> None:
    table = MemberTable(SwimConfig())
    table.apply(0.0, record("agent-b", holds=True))
    for i in range(20):
        table.apply(0.0, record(f"b-worker-{i}", holds=False))
    assert sorted(table.holders.names) == ["agent-b"]
    # Suspect: not pushed to or pulled from until it is alive again.
    table.apply(1.0, record("agent-b", holds=True, status=Status.SUSPECT, incarnation=1))
    assert table.holders.names == []
    table.apply(2.0, record("agent-b", holds=True, incarnation=2))
    assert table.holders.names == ["agent-b"]
    # A member whose meta stops naming a sync route stops being one.
    table.apply(3.0, record("agent-b", holds=False, incarnation=3))
    assert table.holders.names == []
    table.apply(4.0, record("agent-b", holds=True, incarnation=4))
    table.apply(5.0, record("agent-b", holds=True, status=Status.DEAD, incarnation=4))
    assert table.holders.names == []
    table.reap(5.0 + SwimConfig().dead_retention + 1)
    assert "agent-b" not in table.holders


def test_a_pull_finds_an_agent_among_many_processes_every_round() -> None:
    table = MemberTable(SwimConfig())
    for i in range(50):
        table.apply(0.0, record(f"h{i}-agent", holds=True))
        for j in range(21):
            table.apply(0.0, record(f"h{i}-p{j}", holds=False))

    def member(name: str) -> MemberView | None:
        found = table.get(name)
        return None if found is None else MemberView.of(found)

    rng = random.Random(1)
    from_holders = [choose_alive(table.holders.names, member, {}, 1, rng) for _ in range(200)]
    assert all(len(chosen) == 1 for chosen in from_holders)
    assert all(chosen[0].name.endswith("-agent") for chosen in from_holders)
    # Sampled among every live member, as pulls were, most rounds found no agent.
    everyone = table.by_status[Status.ALIVE].names
    from_everyone = [choose_alive(everyone, member, {}, 1, rng) for _ in range(200)]
    assert sum(1 for chosen in from_everyone if chosen) < 100
