"""Releases (a bodega extension): recorded through one broker, read through another after the
first is gone, as shared rows of a real registry; bad input is a clear 4xx."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx

from bodega.broker.config import BrokerConfig
from bodega.broker.daemon import Broker
from bodega.cluster.ports import free_udp_ports
from tests.keyring_kit import SOURCE

from .broker_kit import ADMIN

BASE = "/v1/apps/web/releases"


def broker_config(tmp: Path, name: str, port: int, seeds: tuple[str, ...] = ()) -> BrokerConfig:
    return BrokerConfig(name=name, data_dir=tmp / name,
                        admin_tokens=(ADMIN,), listen_port=0, gossip_port=port, seeds=seeds,
                        gossip_keyring=SOURCE)


def api(broker: Broker) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=broker.url, timeout=30,
                             headers={"authorization": f"Bearer {ADMIN}"})


async def test_releases_outlive_the_broker_that_recorded_them(tmp_path: Path) -> None:
    port_a, port_b = free_udp_ports("127.0.0.1", 2)
    first = Broker(broker_config(tmp_path, "broker-a", port_a))
    await first.start()
    second = Broker(broker_config(tmp_path, "broker-b", port_b, (f"127.0.0.1:{port_a}",)))
    await second.start()
    try:
        async with api(first) as a:
            assert (await a.post("/v1/apps", json={"app_name": "web", "org_slug": "personal"})
                    ).status_code == 201
            body = {"strategy": "rolling", "image": "process", "config": {"app": "web"},
                    "user": "ana"}
            one = await a.post(BASE, json=body)
            assert one.status_code == 201, one.text
            assert (one.json()["version"], one.json()["status"]) == (1, "running")
            assert (await a.patch(f"{BASE}/1", json={"status": "complete"})).status_code == 200
            two = (await a.post(BASE, json={**body, "strategy": "bluegreen"})).json()
            assert two["version"] == 2
            failed = await a.patch(f"{BASE}/v2", json={"status": "failed",
                                                       "failure": "machine x failed"})
            assert failed.json()["failure"] == "machine x failed"

            # Bad input: one clear line, the right code, nothing recorded.
            assert (await a.patch(f"{BASE}/2", json={"status": "done"})).status_code == 400
            assert (await a.patch(f"{BASE}/x", json={"status": "failed"})).status_code == 400
            missing = await a.get(f"{BASE}/9")
            assert missing.status_code == 404
            assert missing.json() == {"error": "release not found: web has no version 9",
                                      "status": "not_found"}
            assert (await a.post(BASE, json={**body, "extra": 1})).status_code == 400
            assert (await a.get("/v1/apps/nope/releases")).status_code == 404
        await first.stop()

        async with api(second) as b:
            async def seen() -> list[dict[str, object]]:
                while True:
                    answer = await b.get(BASE)
                    if answer.status_code == 200 and len(answer.json()) == 2:
                        return list(answer.json())
                    await asyncio.sleep(0.1)
            listed = await asyncio.wait_for(seen(), 60)
            assert [(r["version"], r["status"], r["strategy"]) for r in listed] == [
                (2, "failed", "bluegreen"), (1, "complete", "rolling")]
            assert listed[1]["config"] == {"app": "web"}
            assert listed[1]["user"] == "ana"
            # Deleting the app deletes its releases: a new app of that name starts at v1.
            assert (await b.delete("/v1/apps/web")).status_code == 202
            assert (await b.post("/v1/apps", json={"app_name": "web", "org_slug": "personal"})
                    ).status_code == 201
            assert (await b.get(BASE)).json() == []
    finally:
        await second.stop()


async def test_an_apps_status_follows_its_releases(tmp_path: Path) -> None:
    (port,) = free_udp_ports("127.0.0.1", 1)
    broker = Broker(broker_config(tmp_path, "broker-a", port))
    await broker.start()
    try:
        async with api(broker) as a:
            async def status() -> tuple[str, str]:
                one = (await a.get("/v1/apps/web")).json()["status"]
                (listed,) = (await a.get("/v1/apps")).json()["apps"]
                return one, listed["status"]

            created = await a.post("/v1/apps", json={"app_name": "web", "org_slug": "personal"})
            assert created.json()["status"] == "pending"  # never deployed, no machines
            body = {"strategy": "rolling", "image": "process", "config": {"app": "web"}}
            await a.post(BASE, json=body)
            assert await status() == ("pending", "pending")  # v1 running
            await a.patch(f"{BASE}/1", json={"status": "failed", "failure": "x"})
            assert await status() == ("failed", "failed")  # its only release failed
            await a.post(BASE, json=body)
            await a.patch(f"{BASE}/2", json={"status": "interrupted"})
            assert await status() == ("failed", "failed")
            await a.post(BASE, json=body)
            await a.patch(f"{BASE}/3", json={"status": "complete"})
            await a.post(BASE, json=body)
            await a.patch(f"{BASE}/4", json={"status": "failed"})
            assert await status() == ("deployed", "deployed")  # v3 still runs
    finally:
        await broker.stop()
