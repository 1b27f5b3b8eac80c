"""One registry agent per host: its processes read its replica and hand it their rows.

A real ``bodega agent`` process (plaintext internal links, loopback) and, in this
test's process, the ``HostedNode`` of a worker and of a broker, each a SWIM member
with a store of its own rows. The agent is killed with SIGKILL and started again on
the same data dir: what its processes wrote meanwhile, and what it had not
committed, reaches it once it answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bodega.registry import HostedNode, RegistryConfig
from bodega.registry.agent.link import AgentLink, AgentUnavailable
from bodega.registry.replication.view import View
from tests.integration.registry.node_kit import FAST
from tests.keyring_kit import ENV, KEYRING
from tests.poll_kit import until
from tests.ports_kit import free_port

WAIT = 30.0


def machine(mid: str, state: str, worker: str = "w1") -> dict[str, object]:
    return {"id": mid, "app": "web", "name": mid, "region": "ams", "worker": worker,
            "state": state}


class Agent:
    """``bodega agent`` on ``data_dir``, as `bodega up --registry-agent` starts it."""

    def __init__(self, root: Path, name: str = "agent", join: str | None = None) -> None:
        self.name = name
        self.dir = root / name
        self.ready = root / f"{name}.json"
        self.join = join
        self.process: subprocess.Popen[bytes] | None = None
        self.gossip = ""

    async def start(self) -> None:
        self.ready.unlink(missing_ok=True)
        port = self.gossip.rsplit(":", 1)[1] if self.gossip else "0"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bodega", "agent", "--name", self.name, "--region", "ams",
             "--data-dir", str(self.dir), "--listen", "127.0.0.1:0",
             "--gossip-listen", f"127.0.0.1:{port}", "--internal-tls", "off",
             "--ready-file", str(self.ready), "--log-level", "warning",
             *(["--join", self.join] if self.join else [])],
            env={**os.environ, **ENV}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        await until(lambda: self.ready.exists(), timeout=WAIT)
        self.gossip = json.loads(self.ready.read_text())["gossip"]

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def view(self) -> View:
        return View(self.dir / "registry.db", reader=True)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(30)


@pytest.fixture
async def agent(tmp_path: Path) -> AsyncIterator[Agent]:
    running = Agent(tmp_path)
    await running.start()
    try:
        yield running
    finally:
        running.stop()


@contextlib.asynccontextmanager
async def worker_and_broker(agent: Agent, root: Path) -> AsyncIterator[tuple[HostedNode,
                                                                              HostedNode]]:
    """A worker's and a broker's node on the agent's host, started, stopped after."""
    worker = hosted(agent, root, "w1", "worker")
    broker = hosted(agent, root, "broker", "broker")
    await worker.start()
    await broker.start()
    try:
        yield worker, broker
    finally:
        await worker.stop()
        await broker.stop()


def hosted(agent: Agent, root: Path, name: str, role: str) -> HostedNode:
    return HostedNode(RegistryConfig(
        name=name, role=role, region="ams", data_dir=root / name, keyring=KEYRING,
        seeds=(agent.gossip,), meta={"url": f"http://{name}"}, swim=FAST), agent.dir)


def held(view: View, table: str, key: str) -> dict[str, object] | None:
    row = view.get(table, key)
    return None if row is None else row.doc


async def test_rows_written_on_the_host_reach_its_agent_keep_their_writer_and_are_read_back(
        agent: Agent, tmp_path: Path) -> None:
    async with worker_and_broker(agent, tmp_path) as (worker, broker):
        watched = broker.subscribe("machines", app="web")
        worker.put_owned("machines", "m1", machine("m1", "started"))
        assert worker.get("machines", "m1") == machine("m1", "started")  # at once: its own
        change = await asyncio.wait_for(anext(watched), WAIT)
        assert (change.kind, change.key) == ("insert", "m1")
        assert broker.rows("machines", app="web") == [machine("m1", "started")]
        view = agent.view()
        row = view.get("machines", "m1")
        assert row is not None
        assert row.owner == "w1"  # relayed, never rewritten
        broker.put_shared("apps", "web", {"name": "web", "org_slug": "personal"})
        assert broker.get("apps", "web") == {"name": "web", "org_slug": "personal"}
        await until(lambda: worker.get("apps", "web") is not None, timeout=WAIT)
        assert {m.name for m in broker.members()} >= {"agent", "w1", "broker"}
        view.close()


async def test_rows_written_together_go_to_the_agent_once_committed_and_a_refused_batch_never(
        agent: Agent, tmp_path: Path) -> None:
    async with worker_and_broker(agent, tmp_path) as (worker, broker):
        watched = broker.subscribe("machines", app="web")

        def refused() -> None:
            with worker.writes_together():
                worker.put_owned("machines", "gone", machine("gone", "started"))
                raise RuntimeError("the batch was refused")

        with pytest.raises(RuntimeError, match="refused"):
            refused()
        with worker.writes_together():
            worker.put_owned("machines", "m1", machine("m1", "started"))
            worker.put_owned("machines", "m2", machine("m2", "stopped"))
        assert worker.get("machines", "m2") == machine("m2", "stopped")
        keys = {(await asyncio.wait_for(anext(watched), WAIT)).key for _ in range(2)}
        assert keys == {"m1", "m2"}
        view = agent.view()
        await until(lambda: held(view, "machines", "m2") is not None, timeout=WAIT)
        # Handed in the order written: a refused row would have gone first.
        assert held(view, "machines", "gone") is None
        assert worker.get("machines", "gone") is None
        view.close()
        # A key written twice in one batch: the batch reads its own write, and a
        # subscription hears both changes as they happened, once the batch commits.
        started = worker.subscribe("machines", app="web", state="started")
        with worker.writes_together():
            worker.put_owned("machines", "m3", machine("m3", "started"))
            assert worker.get("machines", "m3") == machine("m3", "started")
            assert machine("m3", "started") in worker.rows("machines", app="web")
            worker.put_owned("machines", "m3", machine("m3", "stopped"))
        seen = [await asyncio.wait_for(anext(started), WAIT) for _ in range(3)]
        assert [(c.kind, c.key) for c in seen] == [("initial", "m1"), ("insert", "m3"),
                                                    ("delete", "m3")]


async def test_a_killed_agent_loses_no_row_its_host_wrote_and_subscriptions_go_on(
        agent: Agent, tmp_path: Path) -> None:
    async with worker_and_broker(agent, tmp_path) as (worker, broker):
        watched = broker.subscribe("machines")
        for i in range(20):
            worker.put_owned("machines", f"m{i}", machine(f"m{i}", "started"))
        agent.kill()  # at once: some of these may not have reached it, or not committed
        for i in range(10):  # written while it is down: kept, read back by their writer
            worker.put_owned("machines", f"m{i}", machine(f"m{i}", "stopped"))
        worker.delete_owned("machines", "m19")
        assert worker.get("machines", "m3") == machine("m3", "stopped")
        assert worker.get("machines", "m19") is None
        assert len(worker.rows("machines", state="stopped")) == 10

        await agent.start()
        view = agent.view()

        def agent_holds_it_all() -> bool:
            return all(held(view, "machines", f"m{i}") == machine(
                f"m{i}", "stopped" if i < 10 else "started") for i in range(19)) \
                and held(view, "machines", "m19") is None
        await until(agent_holds_it_all, timeout=WAIT)
        await until(lambda: broker.get("machines", "m5") == machine("m5", "stopped"),
                    timeout=WAIT)
        # What the broker's subscription saw, last state by key: m19 was deleted before
        # the agent heard of it, or after (then its insert and delete were both seen).
        seen: dict[str, str | None] = {}
        wanted = {f"m{i}": "stopped" if i < 10 else "started" for i in range(19)}
        while {k: v for k, v in seen.items() if v is not None} != wanted \
                or seen.get("m19") is not None:
            try:
                change = await asyncio.wait_for(anext(watched), WAIT)
            except TimeoutError:
                raise AssertionError(f"the subscription saw {seen}") from None
            seen[change.key] = None if change.doc is None else str(change.doc["state"])
        view.close()


async def test_a_process_whose_own_store_is_new_supersedes_what_an_earlier_life_left(
        agent: Agent, tmp_path: Path) -> None:
    """Its data dir wiped, a worker starts again: rows of its earlier life the agent still
    holds are superseded (a tombstone for one it no longer has), never left standing."""
    first = hosted(agent, tmp_path, "w1", "worker")
    await first.start()
    first.put_owned("machines", "gone", machine("gone", "started"))
    view = agent.view()
    await until(lambda: held(view, "machines", "gone") is not None, timeout=WAIT)
    await first.stop()
    os.remove(tmp_path / "w1" / "own.db")

    again = hosted(agent, tmp_path, "w1", "worker")
    await again.start()
    try:
        again.put_owned("machines", "new", machine("new", "started"))
        await until(lambda: held(view, "machines", "gone") is None
                    and held(view, "machines", "new") is not None, timeout=WAIT)
    finally:
        await again.stop()
        view.close()


async def test_a_new_agent_tells_no_process_its_past_before_it_has_heard_from_a_peer(
        agent: Agent, tmp_path: Path) -> None:
    """A new agent with a cluster to join (a host wiped and joined again) holds nothing of
    a process's earlier life until its first sync: peers may. It says so, and the process
    asks again, rather than take an empty answer for an empty past."""
    joining = Agent(tmp_path, "joining", join=f"127.0.0.1:{free_port()}")  # nobody there
    await joining.start()
    link = AgentLink(joining.dir)
    try:
        with pytest.raises(AgentUnavailable, match="has not synced with the cluster yet"):
            await link.rows_of("w1")
        joining.stop()
        joining.join = agent.gossip  # now a peer answers: after its first pull, it can say
        await joining.start()

        async def answered() -> bool:
            with contextlib.suppress(AgentUnavailable):
                return (await link.rows_of("w1")).rows == []
            return False

        await until(answered, timeout=WAIT)
    finally:
        await link.aclose()
        joining.stop()


async def test_without_an_agent_a_process_says_how_to_start_one(tmp_path: Path) -> None:
    from bodega.registry.agent.hosted import AgentMissing

    with pytest.raises(AgentMissing, match="start `bodega agent --data-dir"):
        HostedNode(RegistryConfig(name="w1", role="worker", region="ams",
                                  data_dir=tmp_path / "w1", keyring=KEYRING), tmp_path / "none")


async def test_changes_holds_a_follower_until_rows_are_applied_and_a_new_life_answers_at_once(
        agent: Agent, tmp_path: Path) -> None:
    """How the host's processes follow the view: asked with the current mark, the agent holds
    the call until it applies rows; a mark of the agent's earlier life is answered at once."""
    from bodega.registry.agent.link import AgentLink, ChangeMark

    link = AgentLink(agent.dir)
    worker = hosted(agent, tmp_path, "w1", "worker")
    await worker.start()
    try:
        first = await asyncio.wait_for(link.changes(ChangeMark()), WAIT)  # no mark: at once
        assert first.epoch
        # The worker's start may still be handing rows: a call held half a second is one
        # made once they were applied.
        held_call = asyncio.create_task(link.changes(first))
        for _ in range(60):
            await asyncio.sleep(0.5)
            if not held_call.done():
                break
            first = held_call.result()
            held_call = asyncio.create_task(link.changes(first))
        assert not held_call.done(), "the agent answers at once with nothing applied"
        worker.put_owned("machines", "m1", machine("m1", "started"))
        woken = await asyncio.wait_for(held_call, WAIT)
        assert (woken.epoch, woken.generation > first.generation) == (first.epoch, True)

        # Asked about one table, a call is not woken by rows of another.
        apps = await asyncio.wait_for(link.changes(ChangeMark(), ["apps"]), WAIT)
        apps_call = asyncio.create_task(link.changes(apps, ["apps"]))
        worker.put_owned("machines", "m2", machine("m2", "started"))
        view = agent.view()
        await until(lambda: held(view, "machines", "m2") is not None, timeout=WAIT)
        view.close()
        await asyncio.sleep(0.2)  # time for a wrongly woken call's answer to come back
        assert not apps_call.done(), "a machines row woke a call about apps"
        worker.put_shared("apps", "web", {"name": "web", "org_slug": "personal"})
        assert (await asyncio.wait_for(apps_call, WAIT)).generation > apps.generation

        agent.kill()
        await agent.start()
        again = await asyncio.wait_for(link.changes(woken), WAIT)  # its earlier life's mark
        assert again.epoch != woken.epoch
    finally:
        await link.aclose()
        await worker.stop()


async def test_table_listeners_hear_of_every_table_the_agent_changed_not_only_followed_ones(
        agent: Agent, tmp_path: Path) -> None:
    """What the query API's subscriptions re-run on: a row another process wrote in a table
    this process follows no feed of (here ``volumes``) is heard of too."""
    worker = hosted(agent, tmp_path, "w1", "worker")
    broker = hosted(agent, tmp_path, "broker", "broker")
    heard: set[str] = set()
    broker.table_listeners.append(heard.update)
    await worker.start()
    await broker.start()
    try:
        worker.put_owned("volumes", "vol_1", {"id": "vol_1", "app": "web", "name": "data",
                                              "region": "ams", "worker": "w1",
                                              "state": "created"})
        await until(lambda: "volumes" in heard, timeout=WAIT)
    finally:
        await worker.stop()
        await broker.stop()


async def test_a_subscription_goes_on_when_the_agent_restarts_below_the_numbers_it_saw(
        agent: Agent, tmp_path: Path) -> None:
    """The agent numbers the rows it puts from the highest number in its view at start. A
    purged tombstone that was the newest row leaves that start below what a follower saw:
    the follower reads its tables whole on the agent's new life, and misses no row."""
    import sqlite3

    async with worker_and_broker(agent, tmp_path) as (worker, broker):
        watched = broker.subscribe("machines")
        worker.put_owned("machines", "m1", machine("m1", "started"))
        assert (await asyncio.wait_for(anext(watched), WAIT)).key == "m1"
        worker.delete_owned("machines", "m1")  # the newest row: a tombstone
        gone = await asyncio.wait_for(anext(watched), WAIT)  # followed up to it
        assert (gone.key, gone.doc) == ("m1", None)
        agent.kill()
        with sqlite3.connect(agent.dir / "registry.db") as db:  # as a purge would, on a stop
            db.execute("DELETE FROM machines WHERE id = 'm1'")
        await agent.start()
        worker.put_owned("machines", "m2", machine("m2", "started"))
        while True:
            change = await asyncio.wait_for(anext(watched), WAIT)
            if change.key == "m2":
                break
        assert broker.get("machines", "m2") == machine("m2", "started")
