"""A broker that has not heard from the cluster says so (503, Retry-After), never "no room"."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import sys
import time
from pathlib import Path

import httpx

from bodega.broker.config import BrokerConfig
from bodega.broker.daemon import Broker
from tests.integration.daemon_kit import worker_daemon
from tests.integration.registry.node_kit import until
from tests.keyring_kit import SOURCE
from tests.ports_kit import free_port as any_free_port
from tests.tls_kit import TEST_CA, daemon_env

from .broker_kit import ADMIN, machine

DEADLINE = 90.0


def free_port(kind: socket.SocketKind) -> int:
    """Free for TCP and UDP alike, out of the ephemeral range (``tests/ports_kit.py``)."""
    return any_free_port()


async def until_status(http: httpx.AsyncClient, url: str, status: int) -> httpx.Response:
    deadline = time.monotonic() + DEADLINE
    while True:
        with contextlib.suppress(httpx.TransportError):
            response = await http.get(url)
            if response.status_code == status:
                return response
        assert time.monotonic() < deadline, f"{url} never answered {status}"
        await asyncio.sleep(0.1)


async def test_a_broker_is_not_ready_until_it_hears_from_its_seeds(tmp_path: Path) -> None:
    gossip = free_port(socket.SOCK_DGRAM)
    api_port = free_port(socket.SOCK_STREAM)
    ready_file = tmp_path / "broker.ready.json"
    log = (tmp_path / "broker.log").open("ab")
    TEST_CA.issue(tmp_path / "broker" / "tls", "broker", "b1")
    broker = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bodega", "broker", "--name", "b1", "--region", "ams",
        "--data-dir", str(tmp_path / "broker"), "--listen", f"127.0.0.1:{api_port}",
        "--join", f"127.0.0.1:{gossip}", "--ready-file", str(ready_file),
        stdout=log, stderr=log, stdin=asyncio.subprocess.DEVNULL, start_new_session=True,
        env={**os.environ, **daemon_env(), "BODEGA_API_TOKEN": ADMIN})
    worker = worker_daemon(tmp_path, "w1", extra=("--gossip-listen", f"127.0.0.1:{gossip}"))
    url = f"http://127.0.0.1:{api_port}"
    try:
        async with httpx.AsyncClient(base_url=url, timeout=30,
                                     headers={"authorization": f"Bearer {ADMIN}"}) as api:
            health = await until_status(api, "/v1/health", 503)
            assert health.headers["retry-after"] == "1"
            body = health.json()
            assert (body["ok"], body["ready"], body["name"], body["status"]) == (
                False, False, "b1", "unavailable")
            assert "not ready" in body["error"]
            for method, path, payload in (
                    ("POST", "/v1/apps", {"app_name": "early", "org_slug": "personal"}),
                    ("POST", "/v1/apps/early/machines", machine()),
                    ("GET", "/v1/apps/early/machines", None)):
                early = await api.request(method, path, json=payload)
                assert early.status_code == 503, early.text
                assert early.headers["retry-after"] == "1"
                assert early.json()["status"] == "unavailable"
            # Whoever reads the ready file learns where the broker serves, and that it is
            # not ready for creates yet.
            await until(ready_file.exists)
            assert json.loads(ready_file.read_text())["ready"] is False

            await worker.start()  # the seed appears
            ready = await until_status(api, "/v1/health", 200)
            assert ready.json() == {"ok": True, "ready": True, "name": "b1"}
            await until(lambda: json.loads(ready_file.read_text())["ready"] is True)
            assert json.loads(ready_file.read_text())["url"] == url
            assert (await api.post("/v1/apps", json={"app_name": "early",
                                                     "org_slug": "personal"})).status_code == 201
            created = await api.post("/v1/apps/early/machines", json=machine())
            assert created.status_code == 200, created.text
    finally:
        with contextlib.suppress(ProcessLookupError):
            broker.terminate()
        await asyncio.wait_for(broker.wait(), 30)
        log.close()
        await worker.stop()


async def test_a_broker_without_seeds_is_ready_at_once(tmp_path: Path) -> None:
    broker = Broker(BrokerConfig(name="alone", data_dir=tmp_path / "alone",
                                 admin_tokens=(ADMIN,), listen_port=0,
                                 gossip_keyring=SOURCE))
    await broker.start()
    try:
        await asyncio.wait_for(broker.until_ready(), 5)
        async with httpx.AsyncClient(base_url=broker.url, timeout=30) as http:
            health = await http.get("/v1/health")
            assert health.status_code == 200
            assert health.json() == {"ok": True, "ready": True, "name": "alone"}
            refused = await http.post("/v1/apps/x/machines", json=machine(),
                                      headers={"authorization": f"Bearer {ADMIN}"})
            assert refused.status_code == 404  # answered from the view, not gated
    finally:
        await broker.stop()
