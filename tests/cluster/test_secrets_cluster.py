"""App secrets in a real cluster: set through the broker, opened by the worker at launch.

A worker (process driver, machines in namespaces) and a broker, each its own
process. The machine answers ``/env/NAME`` with its environment variable, so
the test reads what its process got; afterwards every file the cluster wrote
(daemon logs, stores, replicas, machine logs) is searched for the value.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.python_kit import machine_python

from .fleet_kit import fleet, serving, until

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="machines in namespaces need root")

APP = (
    "import http.server, os\n"
    "class H(http.server.BaseHTTPRequestHandler):\n"
    "    def do_GET(self):\n"
    "        body = os.environ.get(self.path.rsplit('/', 1)[1], '<unset>').encode()\n"
    "        self.send_response(200); self.send_header('Content-Length', str(len(body)))\n"
    "        self.end_headers(); self.wfile.write(body)\n"
    "    def log_message(self, *args): pass\n"
    "http.server.HTTPServer(('0.0.0.0', 8080), H).serve_forever()\n"
)


def config(marker: str) -> dict[str, Any]:
    return {"image": "local/env", "init": {"exec": [machine_python(), "-c", APP, marker]},
            "guest": {"cpus": 1, "memory_mb": 256}, "env": {"DB_PASSWORD": "from-config"},
            "services": [{"protocol": "tcp", "internal_port": 8080,
                          "ports": [{"port": 80, "handlers": ["http"]}]}]}


def files_holding(root: Path, needle: bytes) -> list[str]:
    found = []
    for directory, _dirs, names in os.walk(root):
        for name in names:
            path = Path(directory) / name
            try:
                if not path.is_symlink() and path.is_file() and needle in path.read_bytes():
                    found.append(str(path.relative_to(root)))
            except OSError:
                continue
    return found


async def test_a_secret_reaches_a_new_machines_env_and_nothing_else(tmp_path: Path) -> None:
    value = f"s3cr3t-{uuid.uuid4().hex}"
    newer = f"n3wer-{uuid.uuid4().hex}"
    marker = f"bodega-secrets-{uuid.uuid4().hex[:8]}"
    async with fleet(tmp_path) as f:
        await f.worker(f"sw-{os.getpid() % 10000}", 1)
        await f.broker()
        async with f.api() as api, httpx.AsyncClient(timeout=10) as direct:
            await until(lambda: serving(api))
            await api.post("/v1/apps", json={"app_name": "vault", "org_slug": "personal"})
            answer = await api.post("/v1/apps/vault/secrets",
                                    json={"values": {"DB_PASSWORD": value, "OTHER": "x"}})
            assert answer.status_code == 200, answer.text
            listed = await api.get("/v1/apps/vault/secrets")
            one = await api.get("/v1/apps/vault/secrets/DB_PASSWORD")
            for shown in (answer, listed, one):
                assert value not in shown.text
            assert [s["name"] for s in listed.json()["secrets"]] == ["DB_PASSWORD", "OTHER"]
            bad = await api.post("/v1/apps/vault/secrets/bad-name", json={"value": value})
            assert bad.status_code == 400
            assert value not in bad.text

            m = (await api.post("/v1/apps/vault/machines", json={"config": config(marker)})
                 ).json()
            await api.get(f"/v1/apps/vault/machines/{m['id']}/wait",
                          params={"state": "started"})
            doc = (await api.get(f"/v1/apps/vault/machines/{m['id']}")).json()
            assert value not in str(doc)
            host = doc.get("service_host") or doc["private_ip"]

            async def env(name: str) -> str:
                try:
                    return (await direct.get(f"http://{host}:8080/env/{name}")).text
                except httpx.HTTPError:
                    return ""

            # Secrets win over the config's env, as on Fly.
            assert await until(lambda: env("DB_PASSWORD")) == value
            # Setting a secret restarts nothing; an update (what `secrets deploy` does) applies.
            await api.post("/v1/apps/vault/secrets/DB_PASSWORD", json={"value": newer})
            assert await env("DB_PASSWORD") == value
            updated = await api.post(f"/v1/apps/vault/machines/{m['id']}",
                                     json={"config": config(marker)})
            assert updated.status_code == 200, updated.text

            async def has_newer() -> bool:
                return await env("DB_PASSWORD") == newer

            await until(has_newer)
            # Deleting the app forgets its secrets: a new app of the same name starts bare.
            assert (await api.delete("/v1/apps/vault")).status_code < 300
            await api.post("/v1/apps", json={"app_name": "vault", "org_slug": "personal"})
            assert (await api.get("/v1/apps/vault/secrets")).json() == {"secrets": []}
    for secret in (value, newer):
        assert files_holding(tmp_path, secret.encode()) == []
