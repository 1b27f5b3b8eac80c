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
import os
import shutil
import signal
import ssl
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from bodega.cluster.registry_front import RegistryFront
from bodega.runtime.lifecycle import die_with_parent, private_dir, until_stopped, write_ready
from bodega.runtime.ready import Ready
from bodega.runtime.serve import Served, serve
from bodega.runtime.tls.authority import CertificateAuthority, Clock, utc_now
from bodega.runtime.tls.core import pki
from bodega.runtime.tls.core.access import IMAGE_REGISTRY
from bodega.runtime.tls.core.identity import Identity, cert_pem
from bodega.runtime.tls.files import CaDir, TlsDir
from bodega.runtime.waits import process_ended, within

log = logging.getLogger("bodega.cluster.registry")

PROGRAM = "docker-registry"
READY_TIMEOUT = 30.0
SOCKET = "registry.sock"
MAX_SOCKET_PATH = 107  # bytes of a Unix socket's path (sun_path, less its NUL)
NAME = "registry"  # the component's name, in its certificate's identity
CONFIG = "registry.yml"
STOP_GRACE = 10.0  # seconds an earlier docker-registry may take to end on SIGTERM
RENEWAL_FAILED = 1  # the component's exit code when its certificate's renewal ended
Sleep = Callable[[float], Awaitable[None]]


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

    def __init__(self, tls: RegistryTls, tls_dir: TlsDir, hosts: tuple[str, ...],
                 clock: Clock = utc_now) -> None:
        self.tls = tls
        self.dir = tls_dir
        self.hosts = hosts
        self.clock = clock

    def authority(self) -> CertificateAuthority:
        # Read at each issue, not kept: the CA's key is in memory only while it signs.
        return CertificateAuthority.load(CaDir(self.tls.ca_dir), lifetime=self.tls.lifetime,
                                         clock=self.clock)

    def ensure(self) -> str:
        """A current certificate in the TLS directory (issued unless it holds one); the
        trust domain it names."""
        authority = self.authority()
        if authority.issue(self.dir, Identity(authority.cluster, IMAGE_REGISTRY, NAME),
                           self.hosts):
            log.info("issued the image registry a certificate for %s", ", ".join(self.hosts))
        return authority.cluster

    async def keep(self, context: ssl.SSLContext, sleep: Sleep = asyncio.sleep) -> None:
        """Renew at two thirds of each certificate's life and load it into ``context``: new
        handshakes present it, connections open keep theirs. A failed try (the TLS
        directory or the CA unreadable, a signature refused) is logged and retried sooner
        and sooner, as every component's renewal is (``pki.renewal_wait``)."""
        failures = unread = 0
        while True:
            try:
                _, cert = self.dir.read_identity()
            except Exception as exc:  # read again soon; it says when to renew
                unread += 1
                log.warning("could not read the image registry's certificate (try %d): %s",
                            unread, exc)
                await sleep(pki.retry_wait(unread))
                continue
            unread = 0
            await sleep(pki.renewal_wait(cert, self.clock(), failures))
            try:
                await asyncio.to_thread(self.ensure)
                context.load_cert_chain(self.dir.identity_path)
            except Exception as exc:
                failures += 1
                log.warning("could not renew the image registry's certificate (try %d; it "
                            "expires at %s): %s", failures,
                            cert.not_valid_after_utc.isoformat(timespec="seconds"), exc)
            else:
                failures = 0


def serving(config: Path, processes: Iterable[tuple[int, list[bytes]]]) -> list[int]:
    """The pids among ``processes`` (pid, argv) that are docker-registry serving
    ``config``."""
    wanted = [b"serve", str(config).encode()]
    return [pid for pid, argv in processes
            if len(argv) == 3 and Path(os.fsdecode(argv[0])).name == PROGRAM
            and argv[1:] == wanted]


def _processes() -> Iterator[tuple[int, list[bytes]]]:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                yield int(entry.name), (entry / "cmdline").read_bytes().rstrip(b"\0").split(
                    b"\0")


def _argv(pid: int) -> list[bytes]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
    except OSError:
        return []


async def end_earlier(config: Path) -> None:
    """End every docker-registry still serving ``config``, and wait until each has: one
    whose component was killed (it ends on its own, at the death signal, but may not have
    yet), or that a component of an older bodega left running."""
    for pid in serving(config, _processes()):
        try:
            pidfd = os.pidfd_open(pid)
        except ProcessLookupError:
            continue
        try:  # checked again once pinned: the pid may have been another's by then
            if not serving(config, [(pid, _argv(pid))]):
                continue
            log.warning("ending docker-registry %d, an earlier run's, still serving %s", pid,
                        config)
            signal.pidfd_send_signal(pidfd, signal.SIGTERM)
        finally:
            os.close(pidfd)
        try:
            await within(process_ended(pid), STOP_GRACE)
        except TimeoutError:
            log.warning("docker-registry %d did not end in %.0fs: killing it", pid, STOP_GRACE)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            await process_ended(pid)


def _renewal_ended(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("the image registry's certificate renewal ended; stopping the registry "
                  "for its supervisor to restart it", exc_info=task.exception())


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
    config = data_dir / CONFIG
    socket = data_dir / SOCKET if tls is not None else None
    if socket is not None and len(str(socket).encode()) > MAX_SOCKET_PATH:
        raise ValueError(f"{socket} is too long a path for a Unix socket: give the cluster "
                         "a shorter --data-dir")
    await end_earlier(config)
    if socket is not None:
        socket.unlink(missing_ok=True)  # an earlier run's: no one listens on it now
    certificate = (RegistryCertificate(tls, TlsDir(data_dir / "tls"), certificate_hosts(host))
                   if tls is not None else None)
    cluster = certificate.ensure() if certificate is not None else ""
    write_config(config, registry_config(data_dir / "storage", host, port, socket))
    process = await asyncio.create_subprocess_exec(
        program, "serve", str(config), preexec_fn=die_with_parent(os.getpid()))
    stop = asyncio.create_task(until_stopped(exit_with_parent))
    exited = asyncio.create_task(process.wait())
    front: RegistryFront | None = None
    served: Served | None = None
    renewal: asyncio.Task[None] | None = None
    renewal_failed = False
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
                    renewal.add_done_callback(_renewal_ended)
                    url = f"https://{host}:{port}"
                if ready_file is not None:
                    write_ready(ready_file, Ready(url=url, registry=f"{host}:{port}"))
        ended, _ = await asyncio.wait({stop, exited, *([renewal] if renewal else [])},
                                      return_when=asyncio.FIRST_COMPLETED)
        renewal_failed = renewal is not None and renewal in ended
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
    return RENEWAL_FAILED if renewal_failed else code
