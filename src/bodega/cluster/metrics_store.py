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
every few seconds: a broker restarted on another port is followed.
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
from bodega.runtime.tls.files import TlsDir, write_private
from bodega.wire.internal.metrics_store import ENDPOINT, TARGETS_PATH, USER, Endpoint

log = logging.getLogger("bodega.cluster.metrics")

PROGRAM = "victoria-metrics"
CONFIG = "scrape.json"  # JSON is YAML: VictoriaMetrics reads it as its -promscrape.config
READY_TIMEOUT = 30.0
FOLLOW_EVERY = 2.0  # seconds between reads of the broker's ready file


@dataclass(frozen=True)
class StoreSettings:
    data_dir: Path
    broker_ready: Path  # the host's broker's ready file: its internal listener's address
    interval: float = 15.0  # seconds between scrapes, and between discoveries
    retention: str = "30d"
    tls_dir: Path | None = None  # the store's identity for mutual TLS (None: plain links)


def scrape_config(broker_internal: str, interval: float, tls: TlsDir | None) -> str:
    """The scrape configuration: the cluster's daemons (their labels kept: a worker's
    per-machine series carry their own ``app``/``org``) and apps' endpoints (the broker's
    labels win), both found by HTTP service discovery at the broker."""
    seconds = f"{max(interval, 1.0):g}s"
    tls_config = ({"ca_file": str(tls.ca_path), "cert_file": str(tls.identity_path),
                   "key_file": str(tls.identity_path)} if tls is not None else None)

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
    apps = {"job_name": "apps", "honor_labels": False, "http_sd_configs": [discovery("apps")]}
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


def write_config(settings: StoreSettings, broker_internal: str) -> None:
    tls = TlsDir(settings.tls_dir) if settings.tls_dir is not None else None
    write_private(settings.data_dir / CONFIG,
                  scrape_config(broker_internal, settings.interval, tls).encode())


async def _follow(settings: StoreSettings, current: str) -> None:
    """Rewrite the configuration when the broker comes back at another address
    (VictoriaMetrics reads it again every ``FOLLOW_EVERY`` seconds)."""
    while True:
        await asyncio.sleep(FOLLOW_EVERY)
        url = _broker_internal(settings.broker_ready)
        if url is not None and url != current:
            log.info("the broker's internal listener moved to %s: discovering there", url)
            write_config(settings, url)
            current = url


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
    write_config(settings, broker)
    port = free_port()
    password = secrets.token_urlsafe(24)
    env = {**os.environ, **secret_flags(password)}
    process = await asyncio.create_subprocess_exec(
        *store_argv(program, port, settings), env=env, stdin=asyncio.subprocess.DEVNULL,
        preexec_fn=die_with_parent(os.getpid()))
    exited = asyncio.create_task(process.wait())
    following: asyncio.Task[None] | None = None
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
                following = asyncio.create_task(_follow(settings, broker))
                if ready_file is not None:
                    write_ready(ready_file, Ready(url=url, name="metrics"))
                log.info("%s serving on %s, scraping every %gs", PROGRAM, url,
                         settings.interval)
        await asyncio.wait({stop, exited}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        (settings.data_dir / ENDPOINT).unlink(missing_ok=True)
        if following is not None:
            following.cancel()
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.terminate()
        code = await process.wait()
        stop.cancel()
    return code
