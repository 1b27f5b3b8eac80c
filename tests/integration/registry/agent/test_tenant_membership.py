"""The host's registry agent as its only SWIM speaker: its processes are its tenants.

Two hosts, each a real ``bodega agent`` process (plaintext, loopback), the second joined to
the first; a worker's ``HostedNode`` on host A and a broker's on host B, in this test's
process. They bind no gossip socket of their own: each checks in with its agent, which
gossips a record for it. The broker sees the worker through two agents, as alive, then
suspect and dead when it goes silent, left when it says goodbye, dead when its agent is
killed with SIGKILL, and alive again (a new generation) when its agent comes back.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from bodega.registry import HostedNode, RegistryConfig
from bodega.registry.agent.link import AgentLink, CheckIn, Presence
from bodega.registry.membership.core.members import MemberView, Status
from tests.integration.registry.agent.test_registry_agent import Agent
from tests.integration.registry.node_kit import FAST
from tests.keyring_kit import KEYRING
from tests.poll_kit import until

WAIT = 40.0


def tenant(agent: Agent, root: Path, name: str, role: str) -> HostedNode:
    return HostedNode(RegistryConfig(
        name=name, role=role, region="ams", data_dir=root / name, keyring=KEYRING,
        meta={"url": f"http://{name}"}, swim=FAST), agent.dir)


def seen(node: HostedNode, name: str) -> MemberView | None:
    return node.membership.member(name)


def status_of(node: HostedNode, name: str) -> Status | None:
    member = seen(node, name)
    return None if member is None else member.status


@contextlib.asynccontextmanager
async def two_hosts(root: Path) -> AsyncIterator[tuple[Agent, Agent, HostedNode, HostedNode]]:
    """Host A's agent and a worker on it; host B's agent, joined to A's, and a broker."""
    a = Agent(root, "agent-a")
    await a.start()
    b = Agent(root, "agent-b", join=a.gossip)
    await b.start()
    worker = tenant(a, root, "w1", "worker")
    broker = tenant(b, root, "broker", "broker")
    try:
        await worker.start()
        await broker.start()
        yield a, b, worker, broker
    finally:
        await worker.stop()  # once: a test may have stopped it already
        await broker.stop()
        b.stop()
        a.stop()


async def test_a_tenant_is_seen_across_hosts_through_the_agents(tmp_path: Path) -> None:
    async with two_hosts(tmp_path) as (a, b, worker, broker):
        # No gossip socket of their own: each is reached at its agent's address.
        assert "{}:{}".format(*worker.gossip_addr) == a.gossip
        assert "{}:{}".format(*broker.gossip_addr) == b.gossip
        w1 = await until(lambda: seen(broker, "w1"), timeout=WAIT, what="w1 on host B")
        assert (w1.host, w1.status, w1.meta["url"]) == ("agent-a", Status.ALIVE,
                                                        "http://w1")
        other = await until(lambda: seen(worker, "broker"), timeout=WAIT,
                            what="the broker on host A")
        assert other.host == "agent-b"
        assert broker.urls_of("worker", "url") == ["http://w1"]

        # Silent (stopped without a goodbye): suspect, then dead, everywhere.
        await worker.stop(leave=False)
        await until(lambda: status_of(broker, "w1") is Status.SUSPECT, timeout=WAIT,
                    what="w1 suspect on host B")
        await until(lambda: status_of(broker, "w1") is Status.DEAD, timeout=WAIT,
                    what="w1 dead on host B")

        # Back (a new process on the same data dir): a new generation, alive.
        again = tenant(a, tmp_path, "w1", "worker")
        await again.start()
        await until(lambda: status_of(broker, "w1") is Status.ALIVE, timeout=WAIT,
                    what="w1 alive again")
        assert seen(broker, "w1").generation > w1.generation  # type: ignore[union-attr]

        # A goodbye shows as left.
        await again.stop(leave=True)
        await until(lambda: status_of(broker, "w1") is Status.LEFT, timeout=WAIT,
                    what="w1 left")


async def test_a_killed_agent_takes_its_tenants_with_it_and_brings_them_back(
        tmp_path: Path) -> None:
    async with two_hosts(tmp_path) as (a, _b, worker, broker):
        first = await until(lambda: seen(broker, "w1"), timeout=WAIT, what="w1 on host B")
        await until(lambda: seen(worker, "broker"), timeout=WAIT, what="the broker on host A")
        a.kill()
        # The worker runs on; the cluster cannot tell, so it takes it for dead with its
        # agent, once host B's agent has found the agent dead.
        await until(lambda: status_of(broker, "agent-a") is Status.DEAD, timeout=WAIT,
                    what="agent A dead on host B")
        await until(lambda: status_of(broker, "w1") is Status.DEAD, timeout=WAIT,
                    what="w1 dead with its agent")
        # The worker still reads the cluster as it last heard it.
        assert seen(worker, "broker") is not None
        await a.start()
        await until(lambda: status_of(broker, "w1") is Status.ALIVE, timeout=WAIT,
                    what="w1 back with its agent")
        back = seen(broker, "w1")
        assert back is not None
        assert back.generation > first.generation
        assert back.host == "agent-a"


async def test_a_check_in_carries_only_the_members_that_changed_since_the_last(
        tmp_path: Path) -> None:
    """On a real agent: a first check-in hears every member; one with the mark of the last
    answer hears nothing until something changes, then only what changed."""
    a = Agent(tmp_path, "agent-a")
    await a.start()
    w1, w2 = tenant(a, tmp_path, "w1", "worker"), tenant(a, tmp_path, "w2", "worker")
    link = AgentLink(a.dir)

    async def check_in(mark: str, hold: float = 0.0) -> Presence:
        return await link.check_in(CheckIn(name="probe", role="broker", region="ams",
                                           generation=1, mark=mark, hold=hold))

    def names(presence: Presence) -> set[str]:
        return {str(record[0]) for record in presence.members or []}

    try:
        await w1.start()
        first = await check_in("")
        assert names(first) == {"agent-a", "w1", "probe"}
        assert (await check_in(first.mark)).members is None  # nothing changed
        await w2.start()
        later = await check_in(first.mark, hold=2.0)  # held until w2's record is in
        assert names(later) == {"agent-a", "w2"}
        assert later.mark != first.mark
        # A mark of another life of the agent, or none, or none it could have made: every
        # member again.
        everyone = {"agent-a", "w1", "w2", "probe"}
        assert names(await check_in("0123.1.1.0")) == everyone
        epoch = first.mark.split(".")[0]
        assert names(await check_in(f"{epoch}.\u00b2.1.0")) == everyone  # a digit, not ASCII
        assert names(await check_in(f"{epoch}.99999999.1.0")) == everyone  # ahead of it
    finally:
        await link.aclose()
        await w2.stop()
        await w1.stop()
        a.stop()
