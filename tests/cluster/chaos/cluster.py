"""A bodega cluster across network namespaces: three regions, six workers, two brokers, a proxy.

Every daemon is its own "host": a namespace with one veth on a bridge
(``tests.cluster.netns_kit``), an address, fixed ports (API 7000, gossip UDP
7946, brokers 4280, proxy 8080), so a daemon killed and started again with its
data directory comes back where its peers knew it. Workers run real programs
(process driver) in their host's network (``--network host``): a machine is
attributed to a host by the network namespace its process runs in. Two hosts
are special: ``ord1`` keeps its data on a small tmpfs (a disk that can fill)
and ``ord2`` answers through a delaying relay (a slow host).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from bodega.worker.host.network import run
from tests.integration.daemon_kit import Daemon, Identity
from tests.tls_kit import TEST_CA

from ..netns_kit import Hosts
from .state import Totals

TOKEN = "chaos-admin-token"
GOSSIP_PORT = 7946
API_PORT = 7000
CPUS, MEMORY_MB = 2, 2048  # eight 1-cpu/256 MB shared machines per worker: creates do fill up
TMPFS_MB = 24


@dataclass(frozen=True)
class Node:
    name: str
    kind: str  # worker, broker or proxy
    index: int  # host number in ``Hosts``
    region: str
    tmpfs: bool = False
    relay: bool = False


def layout(tag: str) -> list[Node]:
    workers = [Node(f"{r}{i}-{tag}", "worker", n, r, tmpfs=(r, i) == ("ord", 1),
                    relay=(r, i) == ("ord", 2))
               for n, (r, i) in enumerate(
                   [("ams", 1), ("ams", 2), ("syd", 1), ("syd", 2), ("ord", 1), ("ord", 2)],
                   start=1)]
    return [*workers, Node(f"b1-{tag}", "broker", 7, "ams"), Node(f"b2-{tag}", "broker", 8, "syd"),
            Node(f"proxy-{tag}", "proxy", 9, "ams")]


@dataclass
class Cluster:
    hosts: Hosts
    tmp: Path
    nodes: list[Node] = field(default_factory=list)
    daemons: dict[str, Daemon] = field(default_factory=dict)
    relays: dict[str, asyncio.subprocess.Process] = field(default_factory=dict)

    # -- shape --------------------------------------------------------------------------------
    def node(self, name: str) -> Node:
        return next(n for n in self.nodes if n.name == name)

    def of(self, kind: str) -> list[Node]:
        return [n for n in self.nodes if n.kind == kind]

    @property
    def workers(self) -> list[Node]:
        return self.of("worker")

    @property
    def brokers(self) -> list[Node]:
        return self.of("broker")

    @property
    def proxy(self) -> Node:
        return self.of("proxy")[0]

    def address(self, node: Node) -> str:
        return self.hosts.address(node.index)

    def data_dir(self, node: Node) -> Path:
        return self.tmp / node.name

    def totals(self) -> dict[str, Totals]:
        return {n.name: Totals(millicpus=CPUS * 1000, memory_mb=MEMORY_MB) for n in self.workers}

    def delay_file(self, node: Node) -> Path:
        return self.tmp / f"{node.name}.delay-ms"

    def broker_url(self, node: Node) -> str:
        return f"http://{self.address(node)}:4280"

    def worker_url(self, node: Node) -> str:
        return f"https://{self.address(node)}:{API_PORT}"

    def proxy_url(self) -> str:
        return f"http://{self.address(self.proxy)}:8080"

    def api(self, broker: Node) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.broker_url(broker), timeout=30,
                                 headers={"authorization": f"Bearer {TOKEN}"})

    def internal(self) -> httpx.AsyncClient:
        return TEST_CA.http("broker", timeout=30)  # acts as a broker on workers' APIs

    # -- daemons ------------------------------------------------------------------------------
    def argv(self, node: Node) -> list[str]:
        addr = self.address(node)
        argv = [sys.executable, "-m", "bodega", node.kind, "--name", node.name,
                "--region", node.region, "--data-dir", str(self.data_dir(node)),
                "--ready-file", str(self.tmp / f"{node.name}.ready.json"),
                "--gossip-listen", f"{addr}:{GOSSIP_PORT}", "--log-level", "info"]
        seeds = [f"{self.address(w)}:{GOSSIP_PORT}" for w in self.workers[::2]
                 if w.name != node.name]
        argv += ["--join", ",".join(seeds)]
        if node.kind == "worker":
            listen = f"127.0.0.1:{API_PORT}" if node.relay else f"{addr}:{API_PORT}"
            argv += ["--listen", listen, "--advertise", addr, "--driver", "process",
                     "--network", "host", "--cpus", str(CPUS), "--memory-mb", str(MEMORY_MB),
                     "--disk-gb", "1", "--stop-machines-on-exit"]
        elif node.kind == "broker":
            argv += ["--listen", f"{addr}:4280"]
        else:
            argv += ["--listen", f"{addr}:8080", "--admin-listen", f"{addr}:8081"]
        return self.hosts.exec(node.index, *argv)

    async def start(self, node: Node) -> Daemon:
        daemon = self.daemons.get(node.name)
        if daemon is None:
            daemon = Daemon(argv=self.argv(node), ready_file=self.tmp / f"{node.name}.ready.json",
                            log_file=self.tmp / f"{node.name}.log",
                            env={"BODEGA_API_TOKEN": TOKEN},
                            identity=Identity(self.data_dir(node) / "tls", node.kind, node.name,
                                              (self.address(node), "127.0.0.1")))
            self.daemons[node.name] = daemon
        await daemon.start()
        return daemon

    async def kill9(self, node: Node) -> None:
        await self.daemons[node.name].kill9()

    def alive(self, node: Node) -> bool:
        d = self.daemons.get(node.name)
        return d is not None and d.process is not None and d.process.returncode is None

    async def start_relay(self, node: Node) -> None:
        addr = self.address(node)
        self.relays[node.name] = await asyncio.create_subprocess_exec(
            *self.hosts.exec(node.index, sys.executable, "-m", "tests.cluster.chaos.relay",
                             f"{addr}:{API_PORT}", f"127.0.0.1:{API_PORT}",
                             str(self.delay_file(node))),
            stdin=asyncio.subprocess.DEVNULL, start_new_session=True)

    async def boot(self) -> None:
        for node in self.workers:
            self.data_dir(node).mkdir(parents=True, exist_ok=True)
            if node.tmpfs:
                await run("mount", "-t", "tmpfs", "-o", f"size={TMPFS_MB}m", "tmpfs",
                          str(self.data_dir(node)))
            if node.relay:
                await self.start_relay(node)
        first, *rest = self.workers
        await self.start(first)
        await asyncio.gather(*(self.start(n) for n in rest))
        await asyncio.gather(*(self.start(n) for n in (*self.brokers, self.proxy)))

    async def shutdown(self) -> None:
        # The proxy and brokers first, then the workers; each group side by side, as each
        # stop mostly waits (a worker's leave, its machines' stops) and none needs another.
        for kinds in (("proxy", "broker"), ("worker",)):
            await asyncio.gather(*(daemon.stop() for node in self.nodes if node.kind in kinds
                                   and (daemon := self.daemons.get(node.name)) is not None))
        for relay in self.relays.values():
            with contextlib.suppress(ProcessLookupError):
                relay.kill()
            await relay.wait()
        for node in self.workers:
            if node.tmpfs:
                await run("umount", "-l", str(self.data_dir(node)), check=False)


@contextlib.asynccontextmanager
async def netns_cluster(tmp: Path) -> AsyncIterator[Cluster]:
    """A booted cluster across network namespaces, one per host; everything it made (hosts,
    mounts, processes) is gone afterwards."""
    from .observe import sweep_machines  # here, not at the top: observe imports this module

    hosts = Hosts()
    c = Cluster(hosts, tmp, layout(hosts.tag))
    try:
        await hosts.setup(len(c.nodes))
        await c.boot()
        yield c
    finally:
        try:
            await c.shutdown()
        finally:
            sweep_machines(c)
            await hosts.teardown()
            await asyncio.sleep(0)
