"""A real HAProxy with a TLS listener, its certificates from a test cluster CA.

``edge()`` serves a routing table the way ``bodega proxy --tls-listen`` does:
the default certificate is the CA's ``*.localhost``, and certificates added to
its ``SiteStore`` as registry rows (sealed keys) reach HAProxy through the
runtime API. Clients are real: curl, and Python's ssl module verifying the
chain against the CA.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import shutil
import ssl
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509

from bodega.proxy.core.load import Load
from bodega.proxy.core.routes import RoutingTable
from bodega.proxy.core.sites import SiteStore
from bodega.proxy.core.statics import StaticsTable
from bodega.proxy.core.tcp_routes import TcpTable
from bodega.proxy.haproxy.dataplane import HaproxyDataPlane
from bodega.proxy.haproxy.tcp_plane import TcpPlane
from bodega.proxy.metrics import ProxyMetrics
from bodega.proxy.plane import haproxy_settings
from bodega.proxy.server import ProxyConfig, ProxyServer
from bodega.proxy.tcp_activator import TcpActivator
from bodega.proxy.upstream import Upstreams
from bodega.proxy.wake import Waker
from bodega.runtime.secretbox import SecretBox
from bodega.runtime.tls.core import pki, sites
from bodega.runtime.tls.core.identity import Key, cert_pem, new_key
from bodega.wire.internal.certificates import CertificateRow
from bodega.wire.internal.worker_client import WorkerClient
from tests.ports_kit import free_port

from .plane_kit import haproxy_binary

CERTS_KEY = "test-certs-key"


def now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


@dataclass
class TestCa:
    cert: x509.Certificate
    key: Key
    path: Path  # its certificate, for curl --cacert

    @classmethod
    def make(cls, where: Path) -> TestCa:
        key = new_key()
        cert = pki.make_ca("edge-test", key, now())
        where.write_bytes(cert_pem(cert))
        return cls(cert, key, where)

    def row(self, app: str, hostname: str, covers: tuple[str, ...] | None = None
            ) -> dict[str, Any]:
        """A registry row for ``hostname`` as a broker writes it (the key sealed)."""
        made = sites.issue(self.cert, self.key, covers or (hostname,), now())
        box = SecretBox(CERTS_KEY)
        return CertificateRow(
            key=f"{app}/{hostname}", app=app, hostname=hostname, source="cluster-ca",
            hostnames=list(made.info.hostnames), issuer=made.info.issuer,
            not_after=made.info.not_after, fingerprint=made.info.fingerprint,
            created_at="t", updated_at="t", chain=made.chain_pem.decode(),
            sealed_key=box.seal(app, hostname, made.key_pem.decode())).model_dump(mode="json")


@dataclass
class Edge:
    http_port: int
    tls_port: int
    dataplane: HaproxyDataPlane
    sites: SiteStore
    ca: TestCa

    async def synced(self) -> None:
        await self.dataplane.sync()

    def put(self, app: str, hostname: str, doc: dict[str, Any] | None) -> None:
        self.sites.put(f"{app}/{hostname}", doc)


@contextlib.asynccontextmanager
async def edge(table: RoutingTable, tmp: Path, region: str = "ams",
               tcp: TcpTable | None = None,
               worker: Callable[[str], WorkerClient | None] = lambda _w: None,
               statics: StaticsTable | None = None) -> AsyncIterator[Edge]:
    binary = haproxy_binary()
    ca = TestCa.make(tmp / "ca.pem")
    default = sites.issue(ca.cert, ca.key, ("*.localhost", "localhost"), now())
    default_path = tmp / "default.pem"
    default_path.write_bytes(default.key_pem + default.chain_pem)
    load, metrics, upstreams = Load(), ProxyMetrics(), Upstreams()
    waker = Waker(table, worker, load, metrics, region)
    tcp_activator = TcpActivator(tcp or TcpTable(), table, waker, region)
    server = ProxyServer(ProxyConfig(region, behind_data_plane=True), table, upstreams, waker,
                         load, metrics, statics=statics)
    listener = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    activator = listener.sockets[0].getsockname()[:2]
    store = SiteStore(SecretBox(CERTS_KEY), table)
    workdir, settings = haproxy_settings("127.0.0.1", 0, activator, "localhost", 1,
                                         region=region, tls=("127.0.0.1", 0),
                                         default_cert=default_path)
    dataplane = HaproxyDataPlane(binary, workdir, settings, table, region, waker, store,
                                 TcpPlane(tcp_activator.tcp, tcp_activator, table, region,
                                          "127.0.0.1"), statics)
    try:
        await dataplane.start()
        yield Edge(settings.bind_port, settings.tls_port, dataplane, store, ca)
    finally:
        await dataplane.stop()
        await tcp_activator.close()
        shutil.rmtree(workdir, ignore_errors=True)
        listener.close()
        upstreams.close()


async def curl(*args: str) -> tuple[int, str, str]:
    """curl's exit code, stdout and stderr."""
    process = await asyncio.create_subprocess_exec(
        "curl", "-sS", "--max-time", "10", *args, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    out, err = await process.communicate()
    return process.returncode or 0, out.decode(), err.decode()


async def served_certificate(port: int, server_name: str, ca: Path) -> x509.Certificate:
    """The leaf served for ``server_name`` (SNI), after the chain verified against ``ca``."""
    context = ssl.create_default_context(cafile=str(ca))
    context.check_hostname = False  # the names are checked by the caller, who knows them
    _reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context,
                                                    server_hostname=server_name)
    try:
        transport = writer.get_extra_info("ssl_object")
        der = transport.getpeercert(binary_form=True)
        return x509.load_der_x509_certificate(der)
    finally:
        writer.close()


def names(cert: x509.Certificate) -> list[str]:
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return list(sans.get_values_for_type(x509.DNSName))


def free_tcp_port() -> int:
    """Out of the ephemeral range: no outgoing connection takes it before a test binds it."""
    return free_port()
