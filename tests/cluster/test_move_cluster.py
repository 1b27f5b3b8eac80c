"""`bodega machine move` on a real `bodega up` (two workers of one region, process driver).

A running machine is moved with the CLI as typed (``--to WORKER``), then a stopped one
to any other worker of its region (``--region``): the same id, name and config; the
running one runs again there (its program a new process, exec answers through the
broker), the stopped one stays stopped; the list shows each once, in the state its new
worker gives it; its events show the move, from where to where and why, beside what
happened before it. A move to the worker it is on is refused in one readable line, one
leased by someone else with 409, an unknown worker or both a worker and a region with
400, an unknown machine with 404; a machine moved back is where the CLI says. A start
that finds no room on its worker moves the machine; the moves bench runs at its smallest.
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path

import httpx
import pytest

from tests.cidr_kit import machine_cidr
from tests.cluster.up_kit import UpProcess, free_port, unwire
from tests.poll_kit import until as poll_until
from tests.python_kit import machine_python

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="machines in namespaces need root")

APP = "movers"
TOKEN = "move-token"
until = partial(poll_until, timeout=60.0, every=0.25)


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[tuple[UpProcess, int]]:
    api = free_port()
    up = await UpProcess(
        tmp_path / "up", "--regions", "ams", "--workers-per-region", "2", "--worker-cpus", "4",
        "--worker-memory-mb", "2048", "--api-port", str(api), "--proxy-port", str(free_port()),
        "--proxy-tls-port", str(free_port()), "--machine-cidr", machine_cidr(140, 200),
        "--token", TOKEN, "--registry-port", "0").start()
    try:
        await up.until_line("bodega is up", timeout=120)
        yield up, api
    finally:
        await up.end()
        await unwire(tmp_path / "up")


async def cli(api: int, *args: str, ok: bool = True) -> str:
    """A command as a user types it; its output (stdout, or stderr when it fails)."""
    env = {**os.environ, "BODEGA_API_URL": f"http://127.0.0.1:{api}", "BODEGA_API_TOKEN": TOKEN}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bodega", *args, env=env, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(process.communicate(), 180)
    assert (process.returncode == 0) == ok, (out + err).decode()
    return (out if ok else err).decode()


def programs(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if argv[0] == machine_python() and marker in argv[1:] and state != "Z":
                found.append(int(entry.name))
    return found


async def test_machines_move_with_the_cli(cluster: tuple[UpProcess, int]) -> None:
    up, port = cluster
    workers = sorted(c["name"] for c in up.state()["components"] if c["role"] == "worker")
    assert len(workers) == 2
    marker = uuid.uuid4().hex
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}/v1", timeout=90,
                                 headers={"authorization": f"Bearer {TOKEN}"}) as api:
        assert (await api.post("/apps", json={"app_name": APP,
                                              "org_slug": "personal"})).status_code == 201
        made = await api.post(f"/apps/{APP}/machines", json={"name": "mover", "config": {
            "image": "local/sleeper", "metadata": {"tier": "web"},
            "init": {"exec": [machine_python(), "-c", "import time; time.sleep(10**6)",
                              marker]}}})
        assert made.status_code == 200, made.text
        mid = made.json()["id"]
        assert (await api.get(f"/apps/{APP}/machines/{mid}/wait",
                              params={"state": "started"})).status_code == 200
        first = await until(lambda: programs(marker))
        here = await until(lambda: holder(api, workers))
        there = next(w for w in workers if w != here)
        # A move to the worker it is on is refused, in one line.
        said = await cli(port, "machine", "move", mid, "--to", here, "-a", APP, ok=False)
        assert said.count("\n") == 1, said
        assert "already" in said, said

        # A worker that is not one, both a worker and a region, no such machine.
        for body, status in (({"worker": "nowhere"}, 400),
                             ({"worker": there, "region": "ams"}, 400)):
            answer = await api.post(f"/apps/{APP}/machines/{mid}/move", json=body)
            assert answer.status_code == status, answer.text
        missing = await api.post(f"/apps/{APP}/machines/0123456789abcd/move", json={})
        assert missing.status_code == 404, missing.text
        # Leased by someone else: refused (409) until the lease is let go.
        lease = await api.post(f"/apps/{APP}/machines/{mid}/lease", json={"ttl": 60})
        assert lease.status_code == 201, lease.text
        leased = await api.post(f"/apps/{APP}/machines/{mid}/move", json={"worker": there})
        assert leased.status_code == 409, leased.text
        assert "lease" in leased.json()["error"]
        nonce = lease.json()["data"]["nonce"]
        assert (await api.delete(f"/apps/{APP}/machines/{mid}/lease", headers={
            "fly-machine-lease-nonce": nonce})).status_code == 200

        said = await cli(port, "machine", "move", mid, "--to", there, "-a", APP,
                         "--reason", "kernel upgrade")
        assert said.strip() == f"Machine {mid}: moved to worker {there} (started)", said
        now = await until(lambda: (found := programs(marker)) and found != first and found)
        assert len(now) == 1
        assert await until(lambda: holder(api, workers)) == there
        listed = (await api.get(f"/apps/{APP}/machines")).json()
        assert [(m["id"], m["name"], m["state"]) for m in listed] == [(mid, "mover", "started")]
        assert listed[0]["config"]["metadata"] == {"tier": "web"}
        ran = await cli(port, "machine", "exec", mid, "-a", APP, "--", "echo", "here")
        assert ran.strip() == "here"
        events = await cli(port, "machine", "events", mid, "-a", APP)
        assert f"from {here} to {there}; kernel upgrade" in events, events
        assert "launch" in events  # what happened before the move came with it

        # Stopped, it moves back to any other worker of its region, and stays stopped.
        await cli(port, "machine", "stop", mid, "-a", APP)
        assert (await api.get(f"/apps/{APP}/machines/{mid}/wait",
                              params={"state": "stopped"})).status_code == 200
        said = await cli(port, "machine", "move", mid, "--region", "ams", "-a", APP)
        assert said.strip() == f"Machine {mid}: moved to another worker of ams (stopped)"
        assert await until(lambda: holder(api, workers)) == here
        await until(lambda: not programs(marker))

        async def listed_once_stopped() -> bool:
            found = (await api.get(f"/apps/{APP}/machines")).json()
            return [(m["id"], m["state"]) for m in found] == [(mid, "stopped")]

        await until(listed_once_stopped)
        await cli(port, "machine", "start", mid, "-a", APP)
        assert (await api.get(f"/apps/{APP}/machines/{mid}/wait",
                              params={"state": "started"})).status_code == 200
        await until(lambda: len(programs(marker)) == 1)


async def holder(api: httpx.AsyncClient, workers: list[str]) -> str | None:
    """The one worker whose published row counts a machine (the cluster holds one), once
    the rows agree: one worker counts it, the other none."""
    rows = (await api.get("/cluster/workers")).json()
    counts = {row["name"]: row.get("machines") for row in rows if row["name"] in workers}
    holding = [name for name, count in counts.items() if count == 1]
    return holding[0] if len(holding) == 1 and sorted(counts.values()) == [0, 1] else None


async def test_a_start_that_finds_no_room_moves(cluster: tuple[UpProcess, int]) -> None:
    """A stopped machine whose worker is full now starts on the other worker instead of
    a refusal: the same machine, its events saying why."""
    up, port = cluster
    workers = sorted(c["name"] for c in up.state()["components"] if c["role"] == "worker")
    marker = uuid.uuid4().hex
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}/v1", timeout=120,
                                 headers={"authorization": f"Bearer {TOKEN}"}) as api:
        assert (await api.post("/apps", json={"app_name": APP,
                                              "org_slug": "personal"})).status_code == 201

        async def create(name: str, memory_mb: int) -> str:
            made = await api.post(f"/apps/{APP}/machines", json={"name": name, "config": {
                "image": "local/sleeper", "guest": {"cpus": 1, "memory_mb": memory_mb},
                "init": {"exec": [machine_python(), "-c", "import time; time.sleep(10**6)",
                                  marker, name]}}})
            assert made.status_code == 200, made.text
            mid = str(made.json()["id"])
            assert (await api.get(f"/apps/{APP}/machines/{mid}/wait",
                                  params={"state": "started"})).status_code == 200
            return mid

        sleeper = await create("sleeper", 1024)
        assert (await api.post(f"/apps/{APP}/machines/{sleeper}/stop")).status_code == 200
        assert (await api.get(f"/apps/{APP}/machines/{sleeper}/wait",
                              params={"state": "stopped"})).status_code == 200
        full = await until(lambda: holder(api, workers))
        other = next(w for w in workers if w != full)
        # Its worker fills up: a machine that leaves it 512 MB (moved there if placed away).
        filler = await create("filler", 1536)
        moved = await api.post(f"/apps/{APP}/machines/{filler}/move", json={"worker": full})
        assert moved.status_code == 200 or "already" in moved.text, moved.text

        started = await api.post(f"/apps/{APP}/machines/{sleeper}/start")
        assert started.status_code == 200, started.text
        assert started.json() == {"previous_state": "stopped", "migrated": True,
                                  "new_host": other}
        assert (await api.get(f"/apps/{APP}/machines/{sleeper}/wait",
                              params={"state": "started"})).status_code == 200
        events = (await api.get(f"/apps/{APP}/machines/{sleeper}/events")).json()
        said = [e["request"] for e in events if (e["type"], e["status"]) == ("move", "moved")
                and e["request"].get("moved_to")]
        assert said, events
        assert said[0]["moved_from"] == full
        assert said[0]["moved_to"] == other
        assert said[0]["reason"].startswith(f"no room to start on {full}")
        await until(lambda: sorted(programs(marker)) != [] and len(programs(marker)) == 2)
        # Now the other worker has no room for the filler: a move of it is refused (412),
        # saying what was asked, and it runs on where it was.
        for body in ({"worker": other}, {"region": "ams"}):
            refused = await api.post(f"/apps/{APP}/machines/{filler}/move", json=body)
            assert refused.status_code == 412, refused.text
            assert refused.json()["status"] == "insufficient_capacity"
            assert "1536" in refused.json()["error"], refused.text
        assert len(programs(marker)) == 2


async def test_the_moves_bench_runs() -> None:
    """``bench/machines/moves.py`` at its smallest: one ordinary start, one moved."""
    from bench.machines.moves import report, run

    starts, moved = await run(1)
    assert len(starts) == len(moved) == 1
    assert "moved / start" in report(starts, moved)


async def test_a_start_with_move_takes_a_volume_and_its_data(
        cluster: tuple[UpProcess, int]) -> None:
    """A machine with a volume on a full worker: its start is refused as before, and
    ``bodega machine start --move`` moves it with its data (checksum equal) and starts it."""
    from bodega.worker.host.volume_copy import tree_digest

    up, port = cluster
    workers = sorted(c["name"] for c in up.state()["components"] if c["role"] == "worker")
    marker = uuid.uuid4().hex
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}/v1", timeout=120,
                                 headers={"authorization": f"Bearer {TOKEN}"}) as api:
        assert (await api.post("/apps", json={"app_name": APP,
                                              "org_slug": "personal"})).status_code == 201
        made = await api.post(f"/apps/{APP}/volumes", json={"name": "data", "region": "ams",
                                                            "size_gb": 1})
        assert made.status_code == 200, made.text
        volume = made.json()["id"]

        async def create(name: str, memory_mb: int, **more: object) -> str:
            answer = await api.post(f"/apps/{APP}/machines", json={"name": name, "config": {
                "image": "local/sleeper", "guest": {"cpus": 1, "memory_mb": memory_mb},
                "init": {"exec": [machine_python(), "-c", "import time; time.sleep(10**6)",
                                  marker, name]}, **more}})
            assert answer.status_code == 200, answer.text
            mid = str(answer.json()["id"])
            assert (await api.get(f"/apps/{APP}/machines/{mid}/wait",
                                  params={"state": "started"})).status_code == 200
            return mid

        keeper = await create("keeper", 1024, mounts=[{"volume": volume, "path": "/data"}])
        (data,) = (up.data_dir).glob(f"**/volumes/{volume}")
        (data / "ledger.db").write_bytes(os.urandom(2 << 20))
        digest = tree_digest(data)
        assert (await api.post(f"/apps/{APP}/machines/{keeper}/stop")).status_code == 200
        assert (await api.get(f"/apps/{APP}/machines/{keeper}/wait",
                              params={"state": "stopped"})).status_code == 200
        full = await until(lambda: holder(api, workers))
        filler = await create("filler", 1536)
        moved = await api.post(f"/apps/{APP}/machines/{filler}/move", json={"worker": full})
        assert moved.status_code == 200 or "already" in moved.text, moved.text

        refused = await api.post(f"/apps/{APP}/machines/{keeper}/start")
        assert refused.json()["status"] == "insufficient_capacity", refused.text
        said = await cli(port, "machine", "start", keeper, "--move", "-a", APP)
        assert said.strip() == f"Machine {keeper}: start requested"
        assert (await api.get(f"/apps/{APP}/machines/{keeper}/wait",
                              params={"state": "started"})).status_code == 200
        (there,) = [p for p in up.data_dir.glob(f"**/volumes/{volume}") if p != data]
        assert tree_digest(there) == digest
        assert not data.exists()
        found = (await api.get(f"/apps/{APP}/volumes/{volume}")).json()
        assert found["attached_machine_id"] == keeper
