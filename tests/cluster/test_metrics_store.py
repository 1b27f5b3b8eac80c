"""The metrics store on a real `bodega up`: supervised, scraping what the broker lists, and
queried per org through the broker's API.

victoria-metrics runs as a component; its targets come from the broker's HTTP
service discovery (the daemons over mutual TLS, apps' ``[metrics]`` endpoints), every
second here (``--metrics-interval 1s``). An app deployed with ``[metrics]`` serves a
counter (``APP``) that claims another org in a label of its own;
its series are queryable with the admin token and its own app's token, and refused to
a token of an app in another org. `bodega metrics --json` lists the app's machines. A
store killed is started again by the supervisor and answers again.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.cluster.deploy_kit import Cli, readable_dir, up_cluster
from tests.cluster.listener_kit import children_of
from tests.cluster.up_kit import UpProcess
from tests.poll_kit import until
from tests.python_kit import machine_python

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="bodega up with machines needs root"),
    pytest.mark.skipif(shutil.which("victoria-metrics") is None,
                       reason="victoria-metrics is not installed"),
]

# The app: / counts requests, :9091/metrics shows the count, with an org label of its own
# that the store must not take for the broker's.
APP = (
    "import threading\n"
    "from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer\n"
    "SERVED = [0]\n"
    "class App(BaseHTTPRequestHandler):\n"
    "    def do_GET(self):\n"
    "        if self.connection.getsockname()[1] == 9091:\n"
    "            body = ('# TYPE demo_requests_total counter\\n'\n"
    "                    f'demo_requests_total{{org=\"other\"}} {SERVED[0]}\\n').encode()\n"
    "        else:\n"
    "            SERVED[0] += 1\n"
    "            body = b'counted\\n'\n"
    "        self.send_response(200); self.send_header('Content-Length', str(len(body)))\n"
    "        self.end_headers(); self.wfile.write(body)\n"
    "    def log_message(self, *args): pass\n"
    "metrics = ThreadingHTTPServer(('0.0.0.0', 9091), App)\n"
    "threading.Thread(target=metrics.serve_forever, daemon=True).start()\n"
    "ThreadingHTTPServer(('0.0.0.0', 8080), App).serve_forever()\n"
)
TOKEN = "deploy-token"


def fly_toml(app: str) -> str:
    return (f'app = "{app}"\nprimary_region = "ams"\n\n[processes]\n'
            f'  app = "{machine_python()} app.py"\n\n[http_service]\n  internal_port = 8080\n'
            '  auto_stop_machines = "off"\n  min_machines_running = 1\n\n'
            '[metrics]\n  port = 9091\n  path = "/metrics"\n')


async def promql(cli: Cli, token: str, org: str, query: str) -> httpx.Response:
    async with httpx.AsyncClient(timeout=30) as api:
        return await api.post(f"{cli.env['BODEGA_API_URL']}/prometheus/{org}/api/v1/query",
                              data={"query": query},
                              headers={"Authorization": f"Bearer {token}"})


async def series(cli: Cli, token: str, org: str, query: str) -> list[dict[str, Any]]:
    answer = await promql(cli, token, org, query)
    assert answer.status_code == 200, answer.text
    return list(answer.json()["data"]["result"])


async def app_token(cli: Cli, app: str) -> str:
    async with httpx.AsyncClient(timeout=30) as api:
        made = await api.post(f"{cli.env['BODEGA_API_URL']}/v1/apps/{app}/deploy_token",
                              headers={"Authorization": f"Bearer {TOKEN}"})
    assert made.status_code in (200, 201), made.text
    return str(made.json()["token"])


def store_of(up: UpProcess) -> dict[str, Any]:
    return next(c for c in up.state()["components"] if c["role"] == "metrics-store")


async def test_the_store_scrapes_the_cluster_and_an_apps_metrics_each_org_seeing_its_own(
        tmp_path: Path) -> None:
    async with up_cluster(tmp_path, workers=1, extra=("--metrics-interval", "1s")) as (cli, up):
        store = store_of(up)
        said = await up.until_line("Metrics: PromQL at")
        assert f"{cli.env['BODEGA_API_URL']}/prometheus/<org>/api/v1/query" in said
        assert store["pid"]
        assert store["url"].startswith("http://127.0.0.1:")
        # The store is no open door: a query without its password is refused.
        async with httpx.AsyncClient(timeout=10) as plain:
            bare = await plain.get(f"{store['url']}/api/v1/query", params={"query": "up"})
        assert bare.status_code == 401

        async def workers_up() -> list[dict[str, Any]]:
            found = await series(cli, TOKEN, "personal", 'up{role="worker"} == 1')
            return found if [s["metric"]["host"] for s in found] == ["ams-1"] else []
        await until(workers_up, timeout=60, every=0.5, what="the worker's up series")
        roles = {s["metric"]["role"] for s in await series(cli, TOKEN, "personal", "up == 1")}
        assert {"worker", "proxy", "agent"} <= roles

        with readable_dir() as where:
            (where / "app.py").write_text(APP)
            (where / "fly.toml").write_text(fly_toml("counted"))
            await cli.ok("deploy", "-c", str(where / "fly.toml"))
            machines = {m["id"] for m in await cli.machines("counted")}
            for _ in range(3):
                assert (await cli.get("counted")).status_code == 200

            async def counted() -> list[dict[str, Any]]:
                found = await series(cli, TOKEN, "personal", "demo_requests_total")
                total = sum(float(s["value"][1]) for s in found)
                return found if total >= 3 else []
            found = await until(counted, timeout=60, every=0.5, what="the app's counter")
            assert {s["metric"]["machine"] for s in found} == machines
            for one in found:  # the broker's labels, not the app's own claim of an org
                assert one["metric"]["org"] == "personal"
                assert one["metric"]["exported_org"] == "other"
                assert one["metric"]["app"] == "counted"

            mine = await app_token(cli, "counted")
            assert len(await series(cli, mine, "personal", "demo_requests_total")) == len(found)
            # An app token sees no cluster series (they name no org)...
            assert await series(cli, mine, "personal", 'up{role="worker"}') == []
            # ...and another org's app token sees nothing of this org.
            await cli.ok("apps", "create", "elsewhere", "--org", "acme")
            theirs = await app_token(cli, "elsewhere")
            refused = await promql(cli, theirs, "personal", "demo_requests_total")
            assert refused.status_code == 404
            assert refused.json() == {"error": "org not found: personal", "status": "not_found"}
            assert await series(cli, theirs, "acme", "demo_requests_total") == []
            assert (await promql(cli, mine, "acme", "up")).status_code == 404

            shown = json.loads(await cli.ok("metrics", "-a", "counted", "--json"))
            assert shown["org"] == "personal"
            assert {m["id"] for m in shown["machines"]} == machines

        # Killed, the store is started again by the supervisor, and answers again.
        vm = children_of(int(store["pid"]))
        assert len(vm) == 1
        os.kill(vm[0], signal.SIGKILL)
        await until(lambda: store_of(up)["pid"] not in (None, store["pid"])
                    and store_of(up)["url"] != store["url"], timeout=60, every=0.2,
                    what="the store's restart")
        await until(workers_up, timeout=60, every=0.5, what="up series after the restart")
