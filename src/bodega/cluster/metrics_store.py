"""The cluster's metrics store: Debian's ``victoria-metrics`` behind a password, on loopback.

``bodega metrics-store`` runs it as a supervised, optional component of
``bodega up`` and of every server host (``bodega join --server``): it writes
the scrape configuration, starts VictoriaMetrics, writes the ready file once it
answers, and lives exactly as long as it does (a SIGTERM is passed on), so the
supervisor's restarts and stops apply to it as to any component.

It is no open door: VictoriaMetrics listens on 127.0.0.1 only, at a port chosen
at each start, and every page but ``/health`` needs the password made at that
start (given to it in its environment, never on a command line), which is
written with the address in ``endpoint.json`` in the store's 0700 data dir for
the host's broker to read (``broker/prometheus/store.py``).

What it scrapes it learns from the host's broker, by Prometheus HTTP service
discovery on the broker's internal listener (``GET /v1/metrics/targets``):
the cluster's own daemons over mutual TLS with the store's certificate (role
``metrics-store``: their ``GET /metrics`` and the discovery, nothing more), and
each app's ``[metrics]`` endpoint over plain HTTP, the labels the broker gives
winning over the ones an app exports (an app cannot claim another org's
``org``). The broker's internal address is read from its ready file, again
every few seconds: a broker restarted on another port is followed. The store
renews its own certificate with the cluster CA (it runs on server hosts only,
which hold the CA's key) at two thirds of its life, as every component does.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import secrets
import shutil
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from bodega.runtime.lifecycle import (
    die_with_parent,
    private_dir,
    until_stopped,
    write_ready,
)
from bodega.runtime.ready import Ready
from bodega.runtime.tls.authority import CertificateAuthority, Clock, utc_now
from bodega.runtime.tls.core import pki
from bodega.runtime.tls.core.identity import hosts_of, identity_of
from bodega.runtime.tls.files import CaDir, TlsDir, write_private
from bodega.wire.internal.metrics_store import ENDPOINT, TARGETS_PATH, USER, Endpoint

log = logging.getLogger("bodega.cluster.metrics")

PROGRAM = "victoria-metrics"
CONFIG = "scrape.json"  # JSON is YAML: VictoriaMetrics reads it as its -promscrape.config
READY_TIMEOUT = 30.0
FOLLOW_EVERY = 2.0  # seconds between reads of the broker's ready file
RENEWED = "tls-"  # the prefix of the TLS directories of the store's own renewals
APP_SAMPLE_LIMIT = 10_000  # series one scrape of an app's [metrics] endpoint may bring


@dataclass(frozen=True)
class StoreSettings:
    data_dir: Path
    broker_ready: Path  # the host's broker's ready file: its internal listener's address
    interval: float = 15.0  # seconds between scrapes, and between discoveries
    retention: str = "30d"
    tls_dir: Path | None = None  # the store's identity for mutual TLS (None: plain links)
    # The cluster CA (a server host's): the store renews its own certificate with it, at two
    # thirds of its life (None: it keeps the one the supervisor gave it).
    ca_dir: Path | None = None
    cert_lifetime: float = pki.LEAF_LIFETIME


@dataclass(frozen=True)
class ScrapeTls:
    """The files VictoriaMetrics presents and checks by: the cluster CA, and the store's
    key and certificate (of the supervisor's TLS directory, or of its latest renewal's)."""

    ca_file: Path
    identity_file: Path


@dataclass
class Scraping:
    """What the configuration is written from now: the broker's internal URL and the
    store's TLS files."""

    broker: str
    tls: ScrapeTls | None


def scrape_config(broker_internal: str, interval: float, tls: ScrapeTls | None) -> str:
    """The scrape configuration: the cluster's daemons (their labels kept: a worker's
    per-machine series carry their own ``app``/``org``) and apps' endpoints (the broker's
    labels win), both found by HTTP service discovery at the broker."""
    seconds = f"{max(interval, 1.0):g}s"
    tls_config = ({"ca_file": str(tls.ca_file), "cert_file": str(tls.identity_file),
                   "key_file": str(tls.identity_file)} if tls is not None else None)

    def discovery(kind: str) -> dict[str, object]:
        found: dict[str, object] = {"url": f"{broker_internal}{TARGETS_PATH}?kind={kind}"}
        if tls_config is not None:
            found["tls_config"] = tls_config
        return found

    cluster: dict[str, object] = {
        "job_name": "bodega", "honor_labels": True,
        "scheme": "https" if tls is not None else "http",
        "http_sd_configs": [discovery("cluster")]}
    if tls_config is not None:
        cluster["tls_config"] = tls_config
    # An app's endpoint is the app's to fill: past APP_SAMPLE_LIMIT series, a scrape is
    # refused (its ``up`` 0) rather than the store filled.
    apps = {"job_name": "apps", "honor_labels": False, "sample_limit": APP_SAMPLE_LIMIT,
            "http_sd_configs": [discovery("apps")]}
    document = {"global": {"scrape_interval": seconds, "scrape_timeout": seconds},
                "scrape_configs": [cluster, apps]}
    return json.dumps(document, indent=1)


def store_argv(program: str, port: int, settings: StoreSettings) -> list[str]:
    # -enableTCP6: a machine's [metrics] may be at its 6PN (IPv6) address.
    return [program, "-envflag.enable", "-enableTCP6", f"-httpListenAddr=127.0.0.1:{port}",
            f"-storageDataPath={settings.data_dir / 'data'}",
            f"-promscrape.config={settings.data_dir / CONFIG}",
            f"-promscrape.configCheckInterval={FOLLOW_EVERY:g}s",
            f"-promscrape.httpSDCheckInterval={max(settings.interval, 1.0):g}s",
            # Points become visible to queries one scrape after they land, not 30 s after.
            f"-search.latencyOffset={max(settings.interval, 1.0):g}s",
            f"-retentionPeriod={settings.retention}", "-loggerLevel=WARN"]


def secret_flags(password: str) -> dict[str, str]:
    """VictoriaMetrics' flags that hold the password, as its environment gives them
    (``-envflag.enable``): the API's basic auth, and the keys of the pages it leaves out of
    basic auth (its own ``/metrics``, ``/flags``, ``/debug/pprof``); only ``/health`` is
    left open, and it says "OK"."""
    return {"httpAuth_username": USER, "httpAuth_password": password,
            "metricsAuthKey": password, "flagsAuthKey": password, "pprofAuthKey": password}


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def _broker_internal(ready: Path) -> str | None:
    try:
        return Ready.read(ready).internal_url
    except (OSError, ValueError):
        return None


async def until_broker(ready: Path, stop: asyncio.Task[object]) -> str | None:
    """The broker's internal URL once its ready file names it (None: stopped first)."""
    while not stop.done():
        url = _broker_internal(ready)
        if url is not None:
            return url
        await asyncio.sleep(0.2)
    return None


async def _answers(session: aiohttp.ClientSession, url: str, auth: aiohttp.BasicAuth) -> bool:
    try:
        async with session.get(url, auth=auth, timeout=aiohttp.ClientTimeout(total=2)) as reply:
            return reply.status == 200
    except (aiohttp.ClientError, TimeoutError):
        return False


def write_config(settings: StoreSettings, now: Scraping) -> None:
    write_private(settings.data_dir / CONFIG,
                  scrape_config(now.broker, settings.interval, now.tls).encode())


def scrape_tls(tls_dir: Path | None) -> ScrapeTls | None:
    """The files of a TLS directory VictoriaMetrics presents and checks by (None: no TLS)."""
    if tls_dir is None:
        return None
    tls = TlsDir(tls_dir)
    return ScrapeTls(tls.ca_path, tls.identity_path)


def renewed_dirs(data_dir: Path) -> list[Path]:
    """The TLS directories of the store's own renewals (``tls-<id>``), beside the
    supervisor's (``tls``)."""
    return sorted(p for p in data_dir.glob(f"{RENEWED}*") if p.is_dir())


async def _follow(settings: StoreSettings, now: Scraping) -> None:
    """Rewrite the configuration when the broker comes back at another address
    (VictoriaMetrics reads it again every ``FOLLOW_EVERY`` seconds)."""
    while True:
        await asyncio.sleep(FOLLOW_EVERY)
        url = _broker_internal(settings.broker_ready)
        if url is not None and url != now.broker:
            log.info("the broker's internal listener moved to %s: discovering there", url)
            now.broker = url
            write_config(settings, now)


async def keep_certificate(settings: StoreSettings, now: Scraping,
                           sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
                           clock: Clock = utc_now) -> None:
    """Renew the store's certificate at two thirds of its life with the cluster CA (this
    is a server host: it holds the CA's key), and scrape with the new one from then on; a
    failed try is logged and tried again sooner and sooner, as every component's is.

    Each renewal is a new TLS directory (``tls-<id>``, a key of its own): the
    configuration then names other files, so VictoriaMetrics reads it again and presents
    the new certificate; the directory before it is removed once it has (the store's key
    is in one place on disk, but for those seconds)."""
    if settings.tls_dir is None or settings.ca_dir is None:
        return
    current, failures = TlsDir(settings.tls_dir), 0
    while True:
        _, cert = current.read_identity()
        await sleep(pki.renewal_wait(cert, clock(), failures))
        try:
            authority = CertificateAuthority.load(
                CaDir(settings.ca_dir), lifetime=settings.cert_lifetime, clock=clock)
            fresh = TlsDir(settings.data_dir / f"{RENEWED}{secrets.token_hex(4)}")
            authority.issue(fresh, identity_of(cert), hosts_of(cert))
        except Exception as exc:  # tried again: the old one is good for a third of its life
            failures += 1
            log.warning("could not renew the metrics store's certificate (try %d; it expires "
                        "at %s): %s", failures,
                        cert.not_valid_after_utc.isoformat(timespec="seconds"), exc)
            continue
        failures = 0
        now.tls = scrape_tls(fresh.path)
        write_config(settings, now)
        log.info("renewed the metrics store's certificate (%s)", fresh.path.name)
        await sleep(2 * FOLLOW_EVERY)  # VictoriaMetrics has read its configuration again
        shutil.rmtree(current.path, ignore_errors=True)
        current = fresh


async def run_store(settings: StoreSettings, ready_file: Path | None,
                    exit_with_parent: bool = False) -> int:
    program = shutil.which(PROGRAM)
    if program is None:
        raise ValueError(f"{PROGRAM} is not installed: apt-get install -y victoria-metrics")
    private_dir(settings.data_dir)
    (settings.data_dir / ENDPOINT).unlink(missing_ok=True)  # an earlier run's password
    stop: asyncio.Task[object] = asyncio.create_task(until_stopped(exit_with_parent))
    broker = await until_broker(settings.broker_ready, stop)
    if broker is None:
        return 0
    for stale in renewed_dirs(settings.data_dir):  # an earlier run's renewals: the
        shutil.rmtree(stale, ignore_errors=True)  # supervisor gave this run its certificate
    now = Scraping(broker, scrape_tls(settings.tls_dir))
    write_config(settings, now)
    port = free_port()
    password = secrets.token_urlsafe(24)
    env = {**os.environ, **secret_flags(password)}
    process = await asyncio.create_subprocess_exec(
        *store_argv(program, port, settings), env=env, stdin=asyncio.subprocess.DEVNULL,
        preexec_fn=die_with_parent(os.getpid()))
    exited = asyncio.create_task(process.wait())
    following: list[asyncio.Task[None]] = []
    url = f"http://127.0.0.1:{port}"
    try:
        auth = aiohttp.BasicAuth(USER, password)
        deadline = asyncio.get_running_loop().time() + READY_TIMEOUT
        async with aiohttp.ClientSession() as session:
            while not await _answers(session, f"{url}/api/v1/labels", auth):
                if exited.done() or stop.done():
                    break
                if asyncio.get_running_loop().time() > deadline:
                    raise ValueError(f"{PROGRAM} did not answer in {READY_TIMEOUT:.0f}s")
                await asyncio.sleep(0.1)
            else:
                write_private(settings.data_dir / ENDPOINT,
                              Endpoint(url=url, password=password).model_dump_json().encode())
                following = [asyncio.create_task(_follow(settings, now)),
                             asyncio.create_task(keep_certificate(settings, now))]
                if ready_file is not None:
                    write_ready(ready_file, Ready(url=url, name="metrics"))
                log.info("%s serving on %s, scraping every %gs", PROGRAM, url,
                         settings.interval)
        await asyncio.wait({stop, exited}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        (settings.data_dir / ENDPOINT).unlink(missing_ok=True)
        for task in following:
            task.cancel()
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.terminate()
        code = await process.wait()
        stop.cancel()
    return code
