"""Clients of the Fly Machines API work against bodega by changing only the base URL and token."""

from __future__ import annotations

import asyncio
import http.client
import json
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from .harness import ADMIN, cluster
from .spec_client import ApiError, SpecClient

CONFIG = {"image": "registry.local/web:1", "guest": {"cpu_kind": "shared", "cpus": 1,
                                                    "memory_mb": 256},
          "services": [{"protocol": "tcp", "internal_port": 8080, "autostop": True,
                        "ports": [{"port": 80, "handlers": ["http"]}]}],
          "restart": {"policy": "on-failure", "max_retries": 3}}


async def test_the_full_lifecycle_with_a_client_written_from_the_spec(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        await c.add_worker("ams-1")
        await c.add_worker("ams-2")
        c.follow()
        broker = await c.add_broker()
        fly = SpecClient(broker.url + "/v1", ADMIN)
        try:
            await fly.create_app("lifecycle")
            assert (await fly.get_app("lifecycle")).organization.slug == "personal"  # type: ignore[union-attr]
            assert [a.name for a in (await fly.list_apps()).apps] == ["lifecycle"]

            m = await fly.launch("lifecycle", {"config": CONFIG, "region": "ams",
                                               "skip_launch": True, "name": "web-1"})
            assert (m.state, m.name, m.region) == ("created", "web-1", "ams")
            assert m.config is not None
            assert m.config["services"][0]["autostop"] is True
            assert m.id is not None
            assert m.instance_id is not None
            assert (await fly.start("lifecycle", m.id))["previous_state"] == "created"
            assert (await fly.wait("lifecycle", m.id, "started")).ok

            lease = await fly.acquire_lease("lifecycle", m.id, 30)
            assert lease.status == "success"
            refreshed = await fly.acquire_lease("lifecycle", m.id, 30, lease.data.nonce)
            assert refreshed.data.nonce == lease.data.nonce
            with pytest.raises(ApiError) as held:
                await fly.stop("lifecycle", m.id)
            assert held.value.code == 409
            assert "lease currently held" in held.value.body.error
            await fly.stop("lifecycle", m.id, nonce=lease.data.nonce)
            await fly.wait("lifecycle", m.id, "stopped", instance_id=m.instance_id)
            await fly.release_lease("lifecycle", m.id, lease.data.nonce)

            updated = await fly.update("lifecycle", m.id, {
                "config": {**CONFIG, "env": {"RELEASE": "2"}}, "skip_launch": True})
            assert updated.instance_id != m.instance_id
            versions = await fly.versions("lifecycle", m.id)
            assert {v.version for v in versions} == {m.instance_id, updated.instance_id}

            await fly.set_metadata("lifecycle", m.id, "fly_release_version", "2")
            assert (await fly.metadata("lifecycle", m.id))["fly_release_version"] == "2"
            listed = await fly.machines("lifecycle", **{"metadata.fly_release_version": "2"})
            assert [x.id for x in listed] == [m.id]
            await fly.cordon("lifecycle", m.id, True)
            assert (await fly.get("lifecycle", m.id)).cordoned is True
            await fly.cordon("lifecycle", m.id, False)

            with pytest.raises(ApiError) as timed_out:
                await fly.wait("lifecycle", m.id, "started", timeout=1)
            assert timed_out.value.code == 408
            assert timed_out.value.body.error.startswith("deadline_exceeded:")
            with pytest.raises(ApiError) as bad_wait:
                await fly.wait("lifecycle", m.id, "started", timeout=61)
            assert bad_wait.value.code == 400

            events = await fly.events("lifecycle", m.id)
            assert events[0].timestamp is not None
            assert events[-1].type == "launch"
            assert [e.timestamp for e in events] == sorted((e.timestamp or 0 for e in events),
                                                           reverse=True)

            vol = await fly.create_volume("lifecycle", "data", "ams")
            assert vol.id.startswith("vol_")
            assert vol.region == "ams"
            assert [v.id for v in await fly.list_volumes("lifecycle")] == [vol.id]

            await fly.destroy("lifecycle", m.id, kill=True)
            await fly.wait("lifecycle", m.id, "destroyed")
            assert await fly.machines("lifecycle") == []
            assert [x.state for x in await fly.machines("lifecycle", include_deleted="true")] == [
                "destroyed"]
            with pytest.raises(ApiError) as missing:
                await fly.get("lifecycle", "0123456789abcd")
            assert missing.value.code == 404
            assert "not found" in missing.value.body.error
        finally:
            await fly.aclose()


def plain(url: str, method: str, path: str, body: object = None,
          token: str | None = ADMIN) -> tuple[int, dict[str, str], Any]:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    raw = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    conn.request(method, path, body=raw, headers=headers)
    response = conn.getresponse()
    data = response.read()
    conn.close()
    return response.status, {k.lower(): v for k, v in response.getheaders()}, (
        json.loads(data) if data else None)


async def test_plain_http_and_every_error_has_the_error_shape(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        await c.add_worker("ams-1")
        broker = await c.add_broker()
        url = broker.url

        def scenario() -> None:
            status, headers, _ = plain(url, "POST", "/v1/apps", {"app_name": "plain"})
            assert status == 201
            assert headers["fly-request-id"]
            status, headers, machine = plain(url, "POST", "/v1/apps/plain/machines", {
                "config": {"image": "img", "guest": {"cpus": 1, "memory_mb": 256}}})
            assert status == 200
            assert headers["content-type"] == "application/json"
            assert isinstance(machine, dict)
            errors = [
                plain(url, "GET", "/v1/apps", token=None),
                plain(url, "GET", "/v1/apps", token="wrong"),
                plain(url, "GET", "/v1/apps/nope"),
                plain(url, "GET", "/v1/apps/plain/machines/0123456789abcd"),
                plain(url, "GET", "/v1/apps/plain/machines/not-an-id"),
                plain(url, "POST", "/v1/apps/plain/machines", b"{not json"),
                plain(url, "POST", "/v1/apps/plain/machines", [1, 2]),
                plain(url, "POST", "/v1/apps/plain/machines", {"config": {}}),
                plain(url, "POST", "/v1/apps/plain/machines",
                      {"config": {"image": "x", "guest": {"memory_mb": 100}}}),
                plain(url, "POST", "/v1/apps/plain/machines",
                      {"config": {"image": "x"}, "region": "!!"}),
                plain(url, "POST", "/v1/apps", {"app_name": "plain"}),
                plain(url, "POST", "/v1/apps", {"app_name": "Bad Name"}),
                plain(url, "DELETE", f"/v1/apps/plain/machines/{machine['id']}"),
                plain(url, "GET", f"/v1/apps/plain/machines/{machine['id']}/wait?timeout=0"),
                plain(url, "GET", "/v1/no/such/route"),
                plain(url, "PATCH", "/v1/apps"),
            ]
            codes = [e[0] for e in errors]
            assert codes == [401, 401, 404, 404, 404, 400, 400, 400, 400, 400, 422, 400, 412,
                             400, 404, 405]
            for _status, headers, body in errors:
                assert isinstance(body, dict), body
                assert set(body) >= {"error", "status"}, body
                assert headers["content-type"] == "application/json"
            assert errors[10][2]["status"] == "name_taken"
            status, _, _ = plain(url, "GET", "/v1/health", token=None)
            assert status == 200
            status, _, doc = plain(url, "GET", "/openapi.json", token=None)
            assert status == 200
            assert "/v1/apps/{app_name}/machines" in doc["paths"]

        await asyncio.to_thread(scenario)
