"""Health checks in a real cluster: a worker probes, the registry carries, the proxy obeys.

Two workers (process driver, machines in namespaces), a broker and a proxy,
each its own process. The app answers ``/healthz`` with 200 until it is sent
``/break``, then with 500; the test watches the machine object's checks and
where the proxy sends requests, on both data planes. The test is in
``test_proxy_cluster.py``, on that module's shared cluster.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx

from tests.python_kit import machine_python

from .fleet_kit import Fleet, until

APP = (
    "import http.server, os\n"
    "broken = []\n"
    "class H(http.server.BaseHTTPRequestHandler):\n"
    "    protocol_version = 'HTTP/1.1'\n"
    "    def do_GET(self):\n"
    "        if self.path == '/break': broken.append(1)\n"
    "        code = 500 if self.path == '/healthz' and broken else 200\n"
    "        body = os.environ['BODEGA_MACHINE_ID'].encode()\n"
    "        self.send_response(code); self.send_header('Content-Length', str(len(body)))\n"
    "        self.end_headers(); self.wfile.write(body)\n"
    "    def log_message(self, *args): pass\n"
    "http.server.ThreadingHTTPServer(('0.0.0.0', 8080), H).serve_forever()\n"
)
INTERVAL = 1.0


def checked_config(marker: str) -> dict[str, Any]:
    return {"image": "local/health", "init": {"exec": [machine_python(), "-c", APP, marker]},
            "guest": {"cpus": 1, "memory_mb": 256},
            "checks": {"alive": {"type": "tcp", "port": 8080, "interval": "2s"}},
            "services": [{"protocol": "tcp", "internal_port": 8080,
                          "ports": [{"port": 80, "handlers": ["http"]}],
                          "checks": [{"type": "http", "path": "/healthz",
                                      "interval": f"{INTERVAL:g}s", "timeout": "1s"}]}]}


def statuses(machine: dict[str, Any]) -> dict[str, str]:
    return {c["name"]: c["status"] for c in machine.get("checks") or []}


async def a_failing_http_check_takes_the_machine_out_of_rotation(f: Fleet) -> None:
    marker = f"bodega-checks-{uuid.uuid4().hex[:8]}"
    async with f.api() as api, f.web("healthy") as web:
        await api.post("/v1/apps", json={"app_name": "healthy", "org_slug": "personal"})
        ids = []
        for _ in range(2):
            m = (await api.post("/v1/apps/healthy/machines",
                                json={"config": checked_config(marker)})).json()
            ids.append(m["id"])
        good, bad = ids

        async def machine(mid: str) -> dict[str, Any]:
            return dict((await api.get(f"/v1/apps/healthy/machines/{mid}")).json())

        async def all_passing() -> bool:
            for mid in ids:
                if set(statuses(await machine(mid)).values()) != {"passing"}:
                    return False
            return True

        await until(all_passing)
        shown = await machine(good)
        assert [c["name"] for c in shown["checks"]] == ["alive", "servicecheck-00-http-8080"]
        assert all(c["updated_at"] and c["output"] for c in shown["checks"])

        async def served_by() -> set[str]:
            answers = await asyncio.gather(*(web.get("/") for _ in range(20)))
            return {a.text for a in answers if a.status_code == 200}

        await until(lambda: _equals(served_by(), set(ids)))

        doc = await machine(bad)
        async with httpx.AsyncClient(timeout=10) as direct:
            host = doc.get("service_host") or doc["private_ip"]
            assert (await direct.get(f"http://{host}:8080/break")).status_code == 200

        async def bad_is_critical() -> bool:
            return statuses(await machine(bad)).get("servicecheck-00-http-8080") == \
                "critical"

        await until(bad_is_critical)
        critical = await machine(bad)
        assert statuses(critical)["alive"] == "passing"  # the TCP check still passes
        events = [e for e in critical.get("events") or [] if e["type"] == "check"]
        assert [e["status"] for e in events][:1] == ["critical"]  # newest first
        # Out of rotation: soon every answer comes from the good machine, and stays so.
        await until(lambda: _equals(served_by(), {good}), timeout=4 * INTERVAL + 30)
        for _ in range(3):
            assert await served_by() == {good}
        assert statuses(await machine(good)) == {
            "alive": "passing", "servicecheck-00-http-8080": "passing"}


async def _equals(got: Any, want: set[str]) -> bool:
    return bool(await got == want)
