"""Several hosts, each its own network namespace: a worker dies, the network splits and heals.

Three workers and a broker, each on its own "host" (namespace, address,
veth on a shared bridge), gossiping over real UDP. One worker is killed with
SIGKILL: membership declares it dead everywhere and no machine lands on it.
Then the network is cut in two with nftables: each side keeps working on its
own (the broker places on what it can reach; the cut-off worker still takes
a create of its own), and once healed, every node's view holds the same rows.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import httpx
import pytest

from tests.integration.daemon_kit import Daemon, Identity
from tests.tls_kit import TEST_CA

from .fleet_kit import serving, until
from .netns_kit import Hosts, hosts

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")

TOKEN = "netns-admin"
MACHINE = {"config": {"image": "img", "guest": {"cpus": 1, "memory_mb": 256}}}


def daemon(h: Hosts, index: int, tmp: Path, name: str, *args: str) -> Daemon:
    ready = tmp / f"{name}.json"
    argv = h.exec(index, sys.executable, "-m", "bodega", *args, "--name", name,
                  "--data-dir", str(tmp / name), "--ready-file", str(ready),
                  "--gossip-listen", f"{h.address(index)}:7946", "--log-level", "info")
    if index != 1:
        argv += ["--join", f"{h.address(1)}:7946"]
    return Daemon(argv=argv, ready_file=ready, log_file=tmp / f"{name}.log",
                  env={"BODEGA_API_TOKEN": TOKEN},
                  identity=Identity(tmp / name / "tls", args[0], name, (h.address(index),)))


async def view(url: str, table: str = "machines") -> dict[str, str]:
    """One node's replica of ``table``: key -> state, read from its subscription snapshot."""
    rows: dict[str, str] = {}
    async with TEST_CA.http(timeout=10) as http, http.stream(
            "POST", f"{url}/v1/registry/subscriptions", json={"table": table}) as stream:
        async for line in stream.aiter_lines():
            message = json.loads(line)
            if "eoq" in message:
                return rows
            row = message["row"]  # {"kind", "table", "key", "doc"}
            rows[str(row["key"])] = str(row["doc"].get("state"))
    return rows


async def statuses(api: httpx.AsyncClient) -> dict[str, str]:
    return {m["name"]: m["status"] for m in (await api.get("/v1/cluster/members")).json()}


async def create(api: httpx.AsyncClient, count: int) -> list[tuple[str, str]]:
    """Create ``count`` machines; (id, worker it landed on) for each."""
    out = []
    for _ in range(count):
        response = await api.post("/v1/apps/net/machines", json=MACHINE)
        assert response.status_code == 200, response.text
        mid = response.json()["id"]
        record = (await api.get(f"/v1/apps/net/machines/{mid}/placement")).json()
        out.append((mid, record["winner"]["worker"]))
    return out


async def test_death_partition_and_heal_across_hosts(tmp_path: Path) -> None:
    async with hosts(4) as h:
        daemons = []
        try:
            for index, name in ((1, "w1"), (2, "w2"), (3, "w3")):
                daemons.append(await daemon(
                    h, index, tmp_path, name, "worker", "--region", "ams", "--driver", "null",
                    "--listen", f"{h.address(index)}:0", "--cpus", "8",
                    "--memory-mb", "8192").start())
            broker = await daemon(h, 4, tmp_path, "b", "broker", "--region", "ams",
                                  "--listen", f"{h.address(4)}:4280").start()
            daemons.append(broker)
            w1, w2, w3 = daemons[:3]
            async with httpx.AsyncClient(base_url=broker.url, timeout=30, headers={
                    "authorization": f"Bearer {TOKEN}"}) as api:
                await until(lambda: _all(api, {"w1", "w2", "w3", "b"}, "alive"))
                await until(lambda: serving(api, 3))  # their rows reached its view
                await api.post("/v1/apps", json={"app_name": "net", "org_slug": "personal"})
                before = await create(api, 6)
                assert {w for _, w in before} == {"w1", "w2", "w3"}  # the app is spread

                # A worker dies (once the rows it wrote have spread: a row its owner never
                # got out dies with it): everyone hears, and nothing is placed on it any more.
                made = {m for m, _ in before}
                await until(lambda: _has(broker.internal_url, made))
                await w3.kill9()
                await until(lambda: _status(api, "w3", "dead"), timeout=90)
                after_death = await create(api, 6)
                assert {w for _, w in after_death} <= {"w1", "w2"}

                # Split {w1, broker} from {w2}: each side carries on with what it reaches.
                await h.partition([1, 4], [2])
                await until(lambda: _status(api, "w2", "dead"), timeout=90)
                cut_off = await create(api, 3)
                assert {w for _, w in cut_off} == {"w1"}
                async with TEST_CA.http(timeout=30) as direct:
                    lonely = (await direct.post(f"{w2.url}/v1/machines", json={
                        "app": "net", **MACHINE})).json()["id"]

                await h.heal()
                await until(lambda: _status(api, "w2", "alive"), timeout=90)
                expected = {m for m, _ in before + after_death + cut_off} | {lonely}

                last: list[dict[str, str]] = []

                async def converged() -> bool:
                    last[:] = await asyncio.gather(*(view(d.internal_url)
                                                     for d in (w1, w2, broker)))
                    return all(set(v) == expected for v in last) and \
                        last[0] == last[1] == last[2]

                try:
                    await until(converged, timeout=90)
                except AssertionError:
                    missing = [sorted(expected - set(v)) for v in last]
                    extra = [sorted(set(v) - expected) for v in last]
                    raise AssertionError(f"views differ: missing {missing}, extra {extra}, "
                                         f"states {last}") from None
                listed = {m["id"] for m in (await api.get("/v1/apps/net/machines")).json()}
                assert lonely in listed  # the broker lists what w2 made while cut off
                again = await create(api, 4)
                assert {w for _, w in again} <= {"w1", "w2"}  # still never the dead one
        finally:
            for d in reversed(daemons):
                await d.stop()


async def _all(api: httpx.AsyncClient, names: set[str], status: str) -> bool:
    seen = await statuses(api)
    return all(seen.get(n) == status for n in names - {"b"})


async def _has(url: str, machines: set[str]) -> bool:
    return machines <= set(await view(url))


async def _status(api: httpx.AsyncClient, name: str, status: str) -> bool:
    return (await statuses(api)).get(name) == status
