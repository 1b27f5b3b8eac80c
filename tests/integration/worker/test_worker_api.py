"""A real worker process over HTTP: errors, reservations, the machine lifecycle.

Who may call it (mutual TLS, roles) is ``test_worker_mtls.py``."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bodega.model.capacity import Ask
from bodega.model.errors import BadRequest, Conflict, NotFound, Timeout
from bodega.model.refusals import NoRoom
from bodega.wire.internal.worker_calls import Reservation
from tests.tls_kit import TEST_CA

from ..daemon_kit import running_worker_daemon

CONFIG = {"image": "app:1", "guest": {"cpu_kind": "shared", "cpus": 1, "memory_mb": 256}}


async def test_bad_input_gets_the_error_shape_never_a_500(tmp_path: Path) -> None:
    async with running_worker_daemon(tmp_path) as (daemon, client):
        headers = client.headers
        async with TEST_CA.http() as http:
            cases = [
                ("POST", "/v1/machines", b"{not json", 400),
                ("POST", "/v1/machines", b"[]", 400),
                ("POST", "/v1/machines", b'{"app": "a"}', 400),
                ("POST", "/v1/machines", b'{"app": "a", "config": {"image": "x", '
                                         b'"guest": {"memory_mb": 100}}}', 400),
                ("GET", "/v1/machines/zzz", b"", 404),
                ("GET", "/v1/nowhere", b"", 404),
                ("PUT", "/v1/capacity", b"", 405),
                ("POST", "/v1/reservations", b'{"app": "a", "cpus": -1}', 400),
            ]
            for method, path, body, status in cases:
                response = await http.request(method, daemon.url + path, content=body,
                                              headers=headers)
                assert response.status_code == status, (method, path, response.text)
                payload = response.json()
                assert set(payload) >= {"error", "status"}, payload


async def test_concurrent_reservations_never_exceed_capacity(tmp_path: Path) -> None:
    # 4 cpus x ratio 4 = 16 shared-cpu-1x by cpu; 4096 MB / 256 = 16 by memory.
    async with running_worker_daemon(tmp_path) as (_daemon, client):
        ask = Ask(cpu_kind="shared", cpus=1, memory_mb=256)
        results = await asyncio.gather(
            *(client.reserve("app", ask, ttl=60) for _ in range(200)), return_exceptions=True
        )
        accepted = [r for r in results if isinstance(r, Reservation)]
        rejected = [r for r in results if isinstance(r, Conflict)]
        assert len(accepted) == 16
        assert len(rejected) == 184
        assert all(r.status == "insufficient_capacity" for r in rejected)
        assert isinstance(rejected[0].details, NoRoom)
        assert rejected[0].details.free is not None
        capacity = await client.capacity()
        assert capacity.used.memory_mb == 4096
        await client.release(accepted[0].id)
        assert (await client.capacity()).used.memory_mb == 3840


async def test_unclaimed_reservations_expire_by_themselves(tmp_path: Path) -> None:
    async with running_worker_daemon(tmp_path, memory_mb=256) as (_daemon, client):
        await client.reserve("app", Ask(cpus=1, memory_mb=256), ttl=0.3)
        with pytest.raises(Conflict):
            await client.reserve("app", Ask(cpus=1, memory_mb=256), ttl=0.3)
        for _ in range(100):
            await asyncio.sleep(0.05)
            try:
                await client.reserve("app", Ask(cpus=1, memory_mb=256), ttl=30)
                break
            except Conflict:
                continue
        else:
            pytest.fail("the expired reservation was never released")


async def test_machine_lifecycle_over_http(tmp_path: Path) -> None:
    async with running_worker_daemon(tmp_path) as (_daemon, client):
        reservation = await client.reserve("web", Ask(cpus=1, memory_mb=256), ttl=30)
        machine = await client.create_machine(
            {"app": "web", "config": CONFIG, "reservation_id": reservation.id,
             "name": "web-1"}
        )
        mid = machine.id
        assert machine.state in ("created", "starting", "started")
        assert machine.region == "ams"
        assert len(machine.instance_id) == 26
        waited = await client.wait(mid, "started", timeout=10)
        assert waited.ok is True
        assert waited.state == "started"
        listed = await client.list_machines("web")
        assert [m.id for m in listed] == [mid]
        assert await client.list_machines("other") == []
        with pytest.raises(NotFound):
            await client.machine(mid, app="other")
        await client.stop(mid, signal="SIGTERM")
        await client.wait(mid, "stopped", timeout=10)
        events = await client.call("GET", mid, "events")
        assert [(e["type"], e["status"]) for e in events[:2]] == [
            ("exit", "stopped"), ("stop", "stopping")]
        with pytest.raises(Timeout, match="currently stopped"):
            await client.wait(mid, "started", timeout=1)
        with pytest.raises(BadRequest):
            await client.wait(mid, "sideways", timeout=1)
        await client.destroy(mid)
        await client.wait(mid, "destroyed", timeout=10)
        assert await client.list_machines("web") == []
        assert len(await client.list_machines("web", include_deleted=True)) == 1


async def test_leases_over_http_use_the_success_envelope(tmp_path: Path) -> None:
    async with running_worker_daemon(tmp_path) as (_daemon, client):
        machine = await client.create_machine({"app": "web", "config": CONFIG})
        mid = machine.id
        lease = await client.call("POST", mid, "lease", json={"ttl": 30})
        assert lease["status"] == "success"
        nonce = lease["data"]["nonce"]
        with pytest.raises(Conflict, match="lease currently held"):
            await client.stop(mid)
        again = await client.call("POST", mid, "lease", json={"ttl": 60}, nonce=nonce)
        assert again["data"]["nonce"] == nonce
        await client.stop(mid, nonce=nonce)
        released = await client.call("DELETE", mid, "lease", nonce=nonce)
        assert released == {"status": "success", "data": {"ok": True}}
        with pytest.raises(NotFound, match="lease not found"):
            await client.call("GET", mid, "lease")


async def test_metrics_are_served(tmp_path: Path) -> None:
    async with running_worker_daemon(tmp_path) as (daemon, client):
        await client.reserve("app", Ask(cpus=1, memory_mb=256), ttl=30)
        async with TEST_CA.http("admin") as http:  # metrics are the operator's
            text = (await http.get(daemon.url + "/metrics")).text
        assert 'bodega_worker_reservations_total{result="accepted"} 1.0' in text


async def test_delete_with_lease_override_destroys_a_leased_machine(tmp_path: Path) -> None:
    # The broker's app delete destroys every machine of the app, whoever holds a lease.
    async with running_worker_daemon(tmp_path) as (_daemon, client):
        machine = await client.create_machine({"app": "web", "config": CONFIG})
        mid = machine.id
        await client.wait(mid, "started", timeout=10)
        await client.call("POST", mid, "lease", json={"ttl": 300})
        with pytest.raises(Conflict, match="lease currently held"):
            await client.destroy(mid, force=True)
        with pytest.raises(Conflict, match="lease currently held"):
            await client.call("DELETE", mid, params={"force": "true", "lease_override": "false"})
        assert (await client.machine(mid)).state == "started"
        await client.call("DELETE", mid, params={"force": "true", "lease_override": "true"})
        waited = await client.wait(mid, "destroyed", timeout=10)
        assert waited.state == "destroyed"
        with pytest.raises(NotFound, match="lease not found"):
            await client.call("GET", mid, "lease")
