"""Clients of the Fly Machines API work against bodega by changing only the base URL and token."""

from __future__ import annotations

import asyncio
import http.client
import json
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from .broker_kit import ADMIN, in_process_cluster
from .lifecycle_scenario import full_lifecycle
from .spec_client_kit import SpecClient

CONFIG = {"image": "registry.local/web:1", "guest": {"cpu_kind": "shared", "cpus": 1,
                                                    "memory_mb": 256},
          "services": [{"protocol": "tcp", "internal_port": 8080, "autostop": True,
                        "ports": [{"port": 80, "handlers": ["http"]}]}],
          "restart": {"policy": "on-failure", "max_retries": 3}}


async def test_the_full_lifecycle_with_a_client_written_from_the_spec(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path) as c:
        await c.add_worker("ams-1")
        await c.add_worker("ams-2")
        c.follow()
        broker = await c.add_broker()
        fly = SpecClient(broker.url + "/v1", ADMIN)
        try:
            await full_lifecycle(fly, "lifecycle", CONFIG)
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
    async with in_process_cluster(tmp_path) as c:
        await c.add_worker("ams-1")
        broker = await c.add_broker()
        url = broker.url

        def scenario() -> None:
            status, headers, _ = plain(url, "POST", "/v1/apps",
                                       {"app_name": "plain", "org_slug": "personal"})
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
                plain(url, "POST", "/v1/apps", {"app_name": "plain", "org_slug": "personal"}),
                plain(url, "POST", "/v1/apps", {"app_name": "Bad Name", "org_slug": "personal"}),
                plain(url, "POST", "/v1/apps", {"app_name": "no-org"}),
                plain(url, "DELETE", f"/v1/apps/plain/machines/{machine['id']}"),
                plain(url, "GET", f"/v1/apps/plain/machines/{machine['id']}/wait?timeout=0"),
                plain(url, "GET", "/v1/no/such/route"),
                plain(url, "PATCH", "/v1/apps"),
            ]
            codes = [e[0] for e in errors]
            assert codes == [401, 401, 404, 404, 404, 400, 400, 400, 400, 400, 422, 400, 400,
                             412, 400, 404, 405]
            for _status, headers, body in errors:
                assert isinstance(body, dict), body
                assert set(body) >= {"error", "status"}, body
                assert headers["content-type"] == "application/json"
            assert errors[10][2]["status"] == "name_taken"
            assert "org_slug is required" in errors[12][2]["error"]
            assert plain(url, "GET", "/v1/apps/no-org")[0] == 404  # nothing was created
            status, _, _ = plain(url, "GET", "/v1/health", token=None)
            assert status == 200
            status, _, doc = plain(url, "GET", "/openapi.json", token=None)
            assert status == 200
            assert "/v1/apps/{app_name}/machines" in doc["paths"]

        await asyncio.to_thread(scenario)
