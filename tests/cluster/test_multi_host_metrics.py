"""Every server host a metrics store: a query through any broker survives the loss of a host.

Three namespace hosts: host 1 runs ``bodega up --advertise``, host 2 joins as a
server (a store of its own), host 3 as a plain peer (a broker, no store). Each
store scrapes the whole cluster (every second here). A query through host 3's
broker is handed to a server host's broker and sees every host's worker; an app
with ``[metrics]`` and a machine on each host has every endpoint up in both
stores; with host 1's link down, queries through hosts 2 and 3 still answer,
from host 2's store.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Iterator
from functools import partial
from typing import Any

import httpx
import pytest

from tests.cluster.deploy_kit import readable_dir
from tests.cluster.multihost_kit import TOKEN, MultiHost, three_hosts, until, wait_for
from tests.python_kit import machine_python

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root"),
    pytest.mark.skipif(shutil.which("victoria-metrics") is None,
                       reason="victoria-metrics is not installed"),
]

SIZES = ("--driver", "process", "--cpus", "2", "--memory-mb", "1024")
FAST = ("--metrics-interval", "1s")
# A [metrics] endpoint: one gauge on 9091, nothing else.
APP = (
    "import http.server\n"
    "class H(http.server.BaseHTTPRequestHandler):\n"
    "    def do_GET(self):\n"
    "        body = b'# TYPE gauged gauge\\ngauged 1\\n'\n"
    "        self.send_response(200); self.send_header('Content-Length', str(len(body)))\n"
    "        self.end_headers(); self.wfile.write(body)\n"
    "    def log_message(self, *args): pass\n"
    "http.server.ThreadingHTTPServer(('0.0.0.0', 9091), H).serve_forever()\n"
)


@pytest.fixture(scope="module")
def hosts() -> Iterator[MultiHost]:
    with readable_dir() as root, three_hosts(root, *FAST) as multi:
        server_token = multi.ok("cluster", "token", "create", "--server",
                                "--description", "host 2").strip()
        first = multi.join_argv("syd")[1]
        syd = multi.start(2, "join", first, "--token", server_token, "--region", "syd",
                          "--server", *FAST, *SIZES)
        lon = multi.start(3, *multi.join_argv("lon"), *FAST, *SIZES)
        for host in (syd, lon):
            wait_for(host, "bodega joined")
        until(lambda: sum(1 for s in multi.alive().values() if s == "alive") >= 9,
              "three workers, three brokers and three proxies alive")
        yield multi


def workers_up(multi: MultiHost, index: int) -> set[str]:
    """The workers whose ``up`` is 1, as host ``index``'s broker answers (empty on any
    refusal)."""
    api = multi.api if index == 1 else f"http://{multi.hosts.address(index)}:4280"
    try:
        answer = httpx.post(f"{api}/prometheus/personal/api/v1/query",
                            data={"query": 'up{role="worker"} == 1'},
                            headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60)
    except httpx.HTTPError:
        return set()
    if answer.status_code != 200:
        return set()
    result: list[dict[str, Any]] = answer.json()["data"]["result"]
    return {str(s["metric"]["host"]) for s in result}


def test_the_server_hosts_run_stores_and_a_plain_hosts_broker_asks_theirs(
        hosts: MultiHost) -> None:
    roles = {i: [c["role"] for c in m.components()] for i, m in
             ((m.index, m) for m in hosts.members)}
    assert "metrics-store" in roles[1]
    assert "metrics-store" in roles[2]  # a joined server runs its own
    assert "metrics-store" not in roles[3]  # a plain peer runs none
    workers = {w for m in hosts.members for w in m.worker_pids()}
    assert len(workers) == 3
    for index in (1, 2, 3):  # host 3's broker hands its queries to a server's
        until(partial(lambda i: workers_up(hosts, i) == workers, index),
              f"every worker up, through host {index}'s broker")


def apps_up(multi: MultiHost, index: int) -> dict[str, str]:
    """Each scraped [metrics] endpoint's machine -> its ``up``, through host ``index``."""
    api = multi.api if index == 1 else f"http://{multi.hosts.address(index)}:4280"
    answer = httpx.post(f"{api}/prometheus/personal/api/v1/query",
                        data={"query": 'up{job="apps",app="gauged"}'},
                        headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60)
    if answer.status_code != 200:
        return {}
    return {str(s["metric"]["machine"]): str(s["value"][1])
            for s in answer.json()["data"]["result"]}


def test_each_store_scrapes_every_hosts_app_endpoints(hosts: MultiHost) -> None:
    where = hosts.root / "gauged"
    where.mkdir(exist_ok=True)
    (where / "app.py").write_text(APP)
    (where / "fly.toml").write_text(
        f'app = "gauged"\nprimary_region = "ams"\n\n[processes]\n'
        f'  app = "{machine_python()} app.py"\n\n[metrics]\n  port = 9091\n')
    hosts.ok("deploy", "-c", str(where / "fly.toml"))
    hosts.ok("scale", "count", "1", "--app", "gauged", "--region", "ams,syd,lon")

    def one_started_on_each() -> set[str] | None:
        listed = hosts.json("machine", "list", "--app", "gauged")
        started = {m["region"]: m["id"] for m in listed if m["state"] == "started"}
        return set(started.values()) if sorted(started) == ["ams", "lon", "syd"] else None
    machines = until(one_started_on_each, "a machine of the app started on each host")
    for index in (1, 2, 3):  # both stores reach every host's machines; host 3 asks theirs
        until(partial(lambda i: apps_up(hosts, i) == dict.fromkeys(machines, "1"), index),
              f"every host's endpoint up, through host {index}'s broker")


def test_with_host_1_lost_queries_through_the_others_still_answer(hosts: MultiHost) -> None:
    asyncio.run(hosts.hosts.link(1, up=False))
    try:
        syd_and_lon = {w for m in hosts.members if m.index in (2, 3) for w in m.worker_pids()}
        for index in (2, 3):
            until(partial(lambda i: syd_and_lon <= workers_up(hosts, i), index),
                  f"host 2's and 3's workers up, through host {index}'s broker")
    finally:
        asyncio.run(hosts.hosts.link(1, up=True))


