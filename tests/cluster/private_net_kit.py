"""Hosts with a private network: workers in network namespaces, each with --private-network.

Every "host" is a namespace of ``netns_kit`` (its own address on a shared bridge).
Workers share one cluster id, so they share the /48, and each has a machine /24
of its own, so each has a block. Machines run ``PROBE``: an HTTP server on
``[::]:8080`` that answers with its machine id and private address, and, asked
``/resolve?name=`` or ``/fetch?url=``, resolves or fetches from inside the
machine (its network namespace, its mount namespace's resolv.conf, its user);
``/connect?host=&port=`` says whether a TCP connection opens.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import string
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import httpx

from bodega.worker.host.network import run
from tests.integration.daemon_kit import Daemon, Identity
from tests.python_kit import machine_python

from .netns_kit import Hosts

TOKEN = "private-net-admin"
GOSSIP = 7946
WG_PORT = 51820

PROBE = r"""
import http.server, os, socket, subprocess, urllib.parse, urllib.request
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass
    def do_GET(self):
        url = urllib.parse.urlparse(self.path)
        q = dict(urllib.parse.parse_qsl(url.query))
        if url.path == "/resolve":
            r = subprocess.run(["getent", "ahostsv6", q["name"]], capture_output=True,
                               text=True, timeout=10)
            body = " ".join(sorted({l.split()[0] for l in r.stdout.splitlines() if l.strip()}))
        elif url.path == "/connect":
            try:
                socket.create_connection((q["host"], int(q["port"])), timeout=3).close()
                body = "connected"
            except OSError as exc:
                body = "error: " + type(exc).__name__
        elif url.path == "/fetch":
            try:
                with urllib.request.urlopen(q["url"], timeout=float(q.get("timeout", 3))) as resp:
                    body = resp.read().decode()
            except Exception as exc:
                body = "error: " + type(exc).__name__ + " " + str(getattr(exc, "reason", exc))
        else:
            body = os.environ["FLY_MACHINE_ID"] + " " + os.environ["FLY_PRIVATE_IP"]
        data = body.encode()
        self.send_response(200)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
class S(http.server.ThreadingHTTPServer):
    address_family = socket.AF_INET6
S(("::", 8080), H).serve_forever()
"""


def machine_config(served: bool = False) -> dict[str, object]:
    """The probe; ``served``: behind the proxy on port 80, started and stopped by it."""
    config: dict[str, object] = {
        "image": "local/probe", "init": {"exec": [machine_python(), "-c", PROBE]},
        "guest": {"cpus": 1, "memory_mb": 128}}
    if served:
        config["services"] = [{"protocol": "tcp", "internal_port": 8080, "autostart": True,
                               "ports": [{"port": 80, "handlers": ["http"]}]}]
    return config


def new_cluster_id() -> str:
    return "n" + "".join(random.choices(string.ascii_lowercase + string.digits, k=4))


@dataclass
class PrivateHosts:
    hosts: Hosts
    tmp: Path
    cluster_id: str

    def subnet(self, index: int) -> str:
        return f"10.{self.hosts.octet}.{100 + index}.0/24"

    def worker(self, index: int, name: str, region: str, *extra: str) -> Daemon:
        addr = self.hosts.address(index)
        ready = self.tmp / f"{name}.json"
        argv = self.hosts.exec(
            index, sys.executable, "-m", "bodega", "worker", "--name", name, "--region", region,
            "--data-dir", str(self.tmp / name), "--ready-file", str(ready),
            "--listen", f"{addr}:7000", "--advertise", addr,
            "--gossip-listen", f"{addr}:{GOSSIP}", "--join", f"{self.hosts.address(1)}:{GOSSIP}",
            "--driver", "process", "--network", "netns", "--private-network",
            "--cluster-id", self.cluster_id, "--machine-subnet", self.subnet(index),
            "--cpus", "4", "--memory-mb", "2048", "--disk-gb", "1", "--stop-machines-on-exit",
            "--log-level", "info", *extra)
        return Daemon(argv=argv, ready_file=ready, log_file=self.tmp / f"{name}.log",
                      env={"BODEGA_API_TOKEN": TOKEN},
                      identity=Identity(self.tmp / name / "tls", "worker", name, (addr,)))

    def proxy(self, index: int, name: str = "proxy") -> Daemon:
        """A proxy on host ``index``: public port 8080, gossip on 7947 (a broker may share
        the host)."""
        addr = self.hosts.address(index)
        ready = self.tmp / f"{name}.json"
        argv = self.hosts.exec(
            index, sys.executable, "-m", "bodega", "proxy", "--name", name, "--region", "ams",
            "--data-dir", str(self.tmp / name), "--ready-file", str(ready),
            "--listen", f"{addr}:8080", "--admin-listen", f"{addr}:8081",
            "--gossip-listen", f"{addr}:{GOSSIP + 1}",
            "--join", f"{self.hosts.address(1)}:{GOSSIP}", "--log-level", "info")
        return Daemon(argv=argv, ready_file=ready, log_file=self.tmp / f"{name}.log",
                      env={"BODEGA_API_TOKEN": TOKEN},
                      identity=Identity(self.tmp / name / "tls", "proxy", name, (addr,)))

    def broker(self, index: int, name: str = "b") -> Daemon:
        addr = self.hosts.address(index)
        ready = self.tmp / f"{name}.json"
        argv = self.hosts.exec(
            index, sys.executable, "-m", "bodega", "broker", "--name", name, "--region", "ams",
            "--data-dir", str(self.tmp / name), "--ready-file", str(ready),
            "--listen", f"{addr}:4280", "--gossip-listen", f"{addr}:{GOSSIP}",
            "--join", f"{self.hosts.address(1)}:{GOSSIP}", "--log-level", "info")
        return Daemon(argv=argv, ready_file=ready, log_file=self.tmp / f"{name}.log",
                      env={"BODEGA_API_TOKEN": TOKEN},
                      identity=Identity(self.tmp / name / "tls", "broker", name, (addr,)))

    async def ask(self, index: int, address: str, path: str, wait: float = 20) -> str:
        """GET ``path`` of the probe at private ``address``, from its host ``index``."""
        out = await run(*self.hosts.exec(index, "curl", "-s", "--max-time", str(wait),
                                         f"http://[{address}]:8080{path}"), check=False)
        return out.strip()

    async def resolve(self, index: int, address: str, name: str) -> set[str]:
        """The addresses ``name`` resolves to inside the machine at ``address``."""
        return set((await self.ask(index, address, f"/resolve?name={quote(name)}")).split())

    async def fetch(self, index: int, address: str, url: str, timeout: float = 3) -> str:
        """What the machine at ``address`` gets fetching ``url`` from inside (``timeout``:
        the fetch's own; short where it is expected to fail, long where it wakes a machine)."""
        return await self.ask(index, address,
                              f"/fetch?url={quote(url, safe='')}&timeout={timeout}",
                              wait=timeout + 17)

    async def reap(self) -> None:
        """Kill what a host killed with SIGKILL left running in it (its wireguard-go)."""
        for index in range(1, len(self.hosts.names) + 1):
            pids = await run("ip", "netns", "pids", self.hosts.namespace(index), check=False)
            for pid in pids.split():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)

    async def connect(self, index: int, address: str, host: str, port: int) -> str:
        """``connected`` if the machine at ``address`` opens a TCP connection to host:port."""
        return await self.ask(index, address, f"/connect?host={quote(host)}&port={port}")

    async def wg_dump(self, index: int, interface: str) -> str:
        return await run(*self.hosts.exec(index, "wg", "show", interface, "dump"))

    async def wg_peers(self, index: int, interface: str) -> set[str]:
        out = await run(*self.hosts.exec(index, "wg", "show", interface, "peers"), check=False)
        return set(out.split())


def api(broker: Daemon) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=broker.url, timeout=30,
                             headers={"authorization": f"Bearer {TOKEN}"})



async def public_key(worker_dir: Path) -> str:
    """The public key of a worker's overlay, from the private key it keeps."""
    key = (worker_dir / "wireguard" / "private.key").read_bytes()
    return (await run("wg", "pubkey", stdin=key)).strip()
