"""The cluster's image registry: Debian's ``docker-registry`` (CNCF distribution) behind a door.

``bodega image-registry`` runs it as a supervised component of ``bodega up``:
it writes the registry's configuration (storage under the data dir), starts
it, writes the ready file once ``GET /v2/`` answers, and lives exactly as long
as the registry does (a SIGTERM is passed on), so the supervisor's restarts
and stops apply to it like to any component.

With the cluster CA (``RegistryTls``: every cluster but one started with
``--internal-tls off``), docker-registry listens on a Unix socket in the
registry's 0700 data dir and ``registry_front.py`` serves the address others
reach: HTTPS with a certificate the CA issues here for the listen address and
loopback (role ``image-registry``, which may call nothing), renewed at two
thirds of its life and swapped in without a restart, and only admin tokens
push (it is given their SHA-256, never the tokens). Without it (a benchmark's
plaintext cluster, on loopback only), the registry serves plain HTTP on the
listen address, open, as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import ssl
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from bodega.cluster.registry_front import RegistryFront
from bodega.runtime.lifecycle import private_dir, until_stopped, write_ready
from bodega.runtime.ready import Ready
from bodega.runtime.serve import Served, serve
from bodega.runtime.tls import pki
from bodega.runtime.tls.access import IMAGE_REGISTRY
from bodega.runtime.tls.authority import CertificateAuthority, utc_now
from bodega.runtime.tls.files import CaDir, TlsDir
from bodega.runtime.tls.identity import Identity, cert_pem

log = logging.getLogger("bodega.cluster.registry")

PROGRAM = "docker-registry"
READY_TIMEOUT = 30.0
SOCKET = "registry.sock"
MAX_SOCKET_PATH = 107  # bytes of a Unix socket's path (sun_path, less its NUL)
NAME = "registry"  # the component's name, in its certificate's identity


@dataclass(frozen=True)
class RegistryTls:
    """How the registry serves TLS: the CA its certificate comes from, for how long each
    certificate lives, and the SHA-256 of each admin token that may push (the tokens
    themselves stay with the broker)."""

    ca_dir: Path
    lifetime: float
    admin_hashes: tuple[bytes, ...]


def registry_config(storage: Path, host: str, port: int, socket: Path | None = None) -> str:
    """docker-registry's configuration: on ``socket`` when given (behind the front), else
    on ``host:port``. Relative URLs: the front's clients resolve them against its own."""
    listen = (f"  net: unix\n  addr: {socket}\n  relativeurls: true\n" if socket is not None
              else f"  addr: {host}:{port}\n")
    return (f"version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n"
            f"    rootdirectory: {storage}\n  delete:\n    enabled: true\n"
            f"http:\n{listen}")


def write_config(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def certificate_hosts(host: str) -> tuple[str, ...]:
    """Where clients reach the registry: its listen address, and loopback on its host."""
    return tuple(sorted({host, "127.0.0.1", "localhost"}))


def front_context(ca_pem: str, identity: Path) -> ssl.SSLContext:
    """The front's TLS: its certificate, and a client's checked against the cluster CA when
    it shows one (a worker's); buildah and skopeo show none, and authenticate by token."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.verify_mode = ssl.CERT_OPTIONAL
    context.load_verify_locations(cadata=ca_pem)
    context.load_cert_chain(identity)
    return context


class RegistryCertificate:
    """The registry's certificate, issued here by the cluster CA, and kept current."""

    def __init__(self, tls: RegistryTls, tls_dir: TlsDir, hosts: tuple[str, ...]) -> None:
        self.tls = tls
        self.dir = tls_dir
        self.hosts = hosts

    def authority(self) -> CertificateAuthority:
        # Read at each issue, not kept: the CA's key is in memory only while it signs.
        return CertificateAuthority.load(CaDir(self.tls.ca_dir), lifetime=self.tls.lifetime)

    def ensure(self) -> str:
        """A current certificate in the TLS directory (issued unless it holds one); the
        trust domain it names."""
        authority = self.authority()
        if authority.issue(self.dir, Identity(authority.cluster, IMAGE_REGISTRY, NAME),
                           self.hosts):
            log.info("issued the image registry a certificate for %s", ", ".join(self.hosts))
        return authority.cluster

    async def keep(self, context: ssl.SSLContext) -> None:
        """Renew at two thirds of each certificate's life and load it into ``context``: new
        handshakes present it, connections open keep theirs. A failed try is retried sooner
        and sooner, as every component's renewal is (``pki.renewal_wait``)."""
        failures = 0
        while True:
            _, cert = self.dir.read_identity()
            await asyncio.sleep(pki.renewal_wait(cert, utc_now(), failures))
            try:
                await asyncio.to_thread(self.ensure)
                context.load_cert_chain(self.dir.identity_path)
            except (OSError, ValueError) as exc:
                failures += 1
                log.warning("could not renew the image registry's certificate (try %d; it "
                            "expires at %s): %s", failures,
                            cert.not_valid_after_utc.isoformat(timespec="seconds"), exc)
            else:
                failures = 0


async def _answers(session: aiohttp.ClientSession, url: str) -> bool:
    try:
        async with session.get(url, timeout=aiohttp.ClientTimeout(total=2)) as reply:
            return reply.status == 200
    except (aiohttp.ClientError, TimeoutError):
        return False


async def run_registry(data_dir: Path, host: str, port: int, ready_file: Path | None,
                       exit_with_parent: bool = False, tls: RegistryTls | None = None) -> int:
    program = shutil.which(PROGRAM)
    if program is None:
        raise ValueError(f"{PROGRAM} is not installed: apt-get install -y docker-registry")
    private_dir(data_dir)
    socket = data_dir / SOCKET if tls is not None else None
    if socket is not None:
        if len(str(socket).encode()) > MAX_SOCKET_PATH:
            raise ValueError(f"{socket} is too long a path for a Unix socket: give the cluster "
                             "a shorter --data-dir")
        socket.unlink(missing_ok=True)  # an earlier run's, killed: no one listens on it
    certificate = (RegistryCertificate(tls, TlsDir(data_dir / "tls"), certificate_hosts(host))
                   if tls is not None else None)
    cluster = certificate.ensure() if certificate is not None else ""
    config = data_dir / "registry.yml"
    write_config(config, registry_config(data_dir / "storage", host, port, socket))
    process = await asyncio.create_subprocess_exec(program, "serve", str(config))
    stop = asyncio.create_task(until_stopped(exit_with_parent))
    exited = asyncio.create_task(process.wait())
    front: RegistryFront | None = None
    served: Served | None = None
    renewal: asyncio.Task[None] | None = None
    try:
        connector = aiohttp.UnixConnector(path=str(socket)) if socket is not None else None
        probe = "http://registry/v2/" if socket is not None else f"http://{host}:{port}/v2/"
        deadline = asyncio.get_running_loop().time() + READY_TIMEOUT
        async with aiohttp.ClientSession(connector=connector) as session:
            while not await _answers(session, probe):
                if exited.done() or stop.done():
                    break
                if asyncio.get_running_loop().time() > deadline:
                    raise ValueError(f"{PROGRAM} did not answer in {READY_TIMEOUT:.0f}s")
                await asyncio.sleep(0.05)
            else:
                url = f"http://{host}:{port}"
                if certificate is not None and tls is not None and socket is not None:
                    front = RegistryFront(socket, cluster, tls.admin_hashes)
                    context = front_context(cert_pem(certificate.dir.read_ca()).decode(),
                                            certificate.dir.identity_path)
                    served = await serve(front.app(), host, port, open_tls=context)
                    renewal = asyncio.create_task(certificate.keep(context))
                    url = f"https://{host}:{port}"
                if ready_file is not None:
                    write_ready(ready_file, Ready(url=url, registry=f"{host}:{port}"))
        await asyncio.wait({stop, exited}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if renewal is not None:
            renewal.cancel()
        if served is not None:
            await served.stop()
        if front is not None:
            await front.close()
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.terminate()
        code = await process.wait()
        stop.cancel()
    return code
