"""Real registry nodes for integration tests: UDP gossip and HTTP sync on loopback.

Each node's HTTP server is mutual TLS with an identity from the test CA, as a
daemon's internal listener is, so every pull between nodes is a real one.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path

from prometheus_client import CollectorRegistry
from starlette.applications import Starlette

from bodega.registry import RegistryConfig, RegistryNode, SwimConfig
from bodega.registry.membership.transport import Binder, UdpTransport
from bodega.registry.sealing.core.keyring import Keyring
from bodega.runtime.serve import Served, bind, serve
from bodega.runtime.tls.contexts import InternalTls
from bodega.runtime.tls.files import TlsDir
from tests.keyring_kit import KEYRING
from tests.poll_kit import until as poll_until
from tests.tls_kit import TEST_CA

# memberlist's LAN figures halved, so a crash is detected in seconds of test time.
FAST = SwimConfig(probe_interval=0.5, probe_timeout=0.25, gossip_interval=0.1,
                  push_pull_interval=5.0, dead_announce_interval=2.0, join_retry_interval=0.2)
WAIT = 30.0


until = partial(poll_until, timeout=WAIT)


@dataclass
class Running:
    node: RegistryNode
    served: Served

    @property
    def seed(self) -> str:
        return f"127.0.0.1:{self.node.gossip_addr[1]}"

    @property
    def url(self) -> str:
        return self.served.url


class Nodes:
    """Registry nodes, each with its own HTTP server serving ``node.routes()``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.running: dict[str, Running] = {}

    async def start(self, name: str, *, seeds: tuple[str, ...] = (),
                    role: str = "worker", sync_interval: float = 0.5,
                    keyring: Keyring = KEYRING, keyring_file: Path | None = None,
                    udp: Binder = UdpTransport.bind) -> Running:
        """A node named ``name`` on its data dir under the root (the same one again after a
        stop); ``keyring_file``: the host's keyring file it keeps up to date."""
        sock = bind("127.0.0.1", 0)
        url = f"https://127.0.0.1:{sock.getsockname()[1]}"
        tls = InternalTls(TlsDir(TEST_CA.issue(self.root / name / "tls", role, name)))
        node = RegistryNode(RegistryConfig(
            name=name, role=role, region="ams", data_dir=self.root / name,
            keyring=keyring, keyring_file=keyring_file, seeds=seeds,
            meta={"url": url}, swim=FAST, sync_interval=sync_interval),
            registry=CollectorRegistry(), bind=udp, tls=tls)
        served = await serve(Starlette(routes=node.routes()), "127.0.0.1", 0, sock=sock, tls=tls)
        await node.start()
        running = Running(node, served)
        self.running[name] = running
        return running

    async def stop(self, name: str, *, leave: bool) -> None:
        running = self.running.pop(name)
        await running.node.stop(leave=leave)
        await running.served.stop(grace=1.0)

    async def stop_all(self) -> None:
        for name in list(self.running):
            await self.stop(name, leave=False)

    def nodes(self) -> list[RegistryNode]:
        return [r.node for r in self.running.values()]
