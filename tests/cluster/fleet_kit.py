"""A small cluster of real daemons, each its own process, joined by gossip on loopback.

Unlike ``bodega up`` nothing here restarts a daemon that dies, so tests can
kill a worker and watch the rest of the cluster notice.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import httpx

from bodega.cluster import cleanup
from bodega.runtime.cluster_id import new as new_cluster_id
from tests.cidr_kit import octet
from tests.integration.daemon_kit import Daemon, Identity
from tests.poll_kit import until as poll_until
from tests.python_kit import machine_python
from tests.tls_kit import TEST_CA

TOKEN = "fleet-admin-token"
# A program for machines: answers every GET with its machine id and who it was asked for.
ECHO = (
    "import http.server, os, sys\n"
    "class H(http.server.BaseHTTPRequestHandler):\n"
    "    protocol_version = 'HTTP/1.1'\n"
    "    def do_GET(self):\n"
    "        body = (os.environ['BODEGA_MACHINE_ID'] + ' ' +\n"
    "                self.headers.get('X-Forwarded-For', '-')).encode()\n"
    "        self.send_response(200); self.send_header('Content-Length', str(len(body)))\n"
    "        self.end_headers(); self.wfile.write(body)\n"
    "    def log_message(self, *args): pass\n"
    "http.server.ThreadingHTTPServer(('0.0.0.0', 8080), H).serve_forever()\n"
)


def echo_config(marker: str, **service: Any) -> dict[str, Any]:
    return {"image": "local/echo", "init": {"exec": [machine_python(), "-c", ECHO, marker]},
            "guest": {"cpus": 1, "memory_mb": 256},
            "services": [{"protocol": "tcp", "internal_port": 8080,
                          "ports": [{"port": 80, "handlers": ["http"]}], **service}]}


@dataclass
class Fleet:
    tmp: Path
    daemons: dict[str, Daemon] = field(default_factory=dict)
    seed: str = ""
    third: int = field(default_factory=lambda: octet(60, 100))
    indexes: list[int] = field(default_factory=list)  # the workers' machine subnets
    cluster_id: str = field(default_factory=new_cluster_id)  # carried by every kernel object

    def _daemon(self, name: str, *args: str) -> Daemon:
        ready = self.tmp / f"{name}.ready.json"
        argv = [sys.executable, "-m", "bodega", *args, "--name", name,
                "--data-dir", str(self.tmp / name), "--ready-file", str(ready),
                "--log-level", "info"]
        if self.seed:
            argv += ["--join", self.seed]
        return Daemon(argv=argv, ready_file=ready, log_file=self.tmp / f"{name}.log",
                      env={"BODEGA_API_TOKEN": TOKEN},
                      identity=Identity(self.tmp / name / "tls", args[0], name))

    async def worker(self, name: str, index: int, region: str = "ams") -> Daemon:
        daemon = await self._daemon(
            name, "worker", "--region", region, "--listen", "127.0.0.1:0", "--cpus", "4",
            "--memory-mb", "4096", "--disk-gb", "5", "--stop-machines-on-exit",
            "--machine-subnet", self.subnet(index), "--cluster-id", self.cluster_id).start()
        self.daemons[name] = daemon
        self.indexes.append(index)
        if not self.seed:
            self.seed = json.loads(daemon.ready_file.read_text())["gossip"]
        return daemon

    async def broker(self) -> Daemon:
        daemon = await self._daemon("broker", "broker", "--region", "ams",
                                    "--listen", "127.0.0.1:0").start()
        self.daemons["broker"] = daemon
        return daemon

    async def proxy(self, *extra: str) -> Daemon:
        daemon = await self._daemon("proxy", "proxy", "--region", "ams",
                                    "--listen", "127.0.0.1:0", *extra).start()
        self.daemons["proxy"] = daemon
        return daemon

    def subnet(self, index: int) -> str:
        return f"10.{self.third}.{index}.0/24"

    def api(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.daemons["broker"].url, timeout=70,
                                 headers={"authorization": f"Bearer {TOKEN}"})

    def web(self, app: str) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.daemons["proxy"].url, timeout=60,
                                 headers={"host": f"{app}.localhost"})

    async def stop(self) -> None:
        workers = [n for n in self.daemons if n not in ("proxy", "broker")]
        for name in ("proxy", "broker", *workers):
            daemon = self.daemons.get(name)
            if daemon is not None:
                await daemon.stop()
        # A worker a test killed leaves its machines and their plumbing behind: sweep them,
        # this fleet's cluster id only (another fleet of the same test run has its own).
        await cleanup.sweep(self.tmp.resolve(), self.cluster_id)


@contextlib.asynccontextmanager
async def fleet(tmp: Path) -> AsyncIterator[Fleet]:
    f = Fleet(tmp)
    try:
        yield f
    finally:
        await f.stop()


until = partial(poll_until, timeout=60.0, every=0.1)


async def serving(api: httpx.AsyncClient, workers: int = 1) -> bool:
    """The broker answers from its view (``/v1/health`` ready) and that view holds at least
    ``workers`` alive workers. The workers' list is not gated: it can show rows before the
    broker is ready, when an app create still answers 503 with ``Retry-After``."""
    if not (await api.get("/v1/health")).json().get("ready"):
        return False
    listed = (await api.get("/v1/cluster/workers")).json()
    return sum(1 for w in listed if w["status"] == "alive") >= workers


async def machines_of(api: httpx.AsyncClient, app: str) -> list[dict[str, Any]]:
    return list((await api.get(f"/v1/apps/{app}/machines")).json())


def proxy_admin(f: Fleet) -> str:
    return str(json.loads(f.daemons["proxy"].ready_file.read_text())["admin_url"])


async def proxy_metric(f: Fleet, name: str) -> float:
    async with TEST_CA.http("admin") as http:
        text = (await http.get(f"{proxy_admin(f)}/metrics")).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(name) and not line.startswith("#"))


def machine_pids(machine_id: str) -> list[int]:
    """Processes that run as machine ``machine_id`` (by the env the worker gave them)."""
    wanted = f"BODEGA_MACHINE_ID={machine_id}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if wanted in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found
