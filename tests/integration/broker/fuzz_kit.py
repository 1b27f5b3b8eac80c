"""A broker over a real worker, served from its own event loop in a thread, for fuzzing.

Fuzzers (Hypothesis, schemathesis) call synchronously, so the cluster runs on
a loop of its own; ``Target`` names what the fuzzers may aim at: a live app,
machine and volume, an app token that sees only another app, and the
broker's URL. ``error_shape`` is the one check every answer must pass.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.tls_kit import TEST_CA

from .broker_kit import ADMIN, Cluster, machine

# Per request: no bodega route should take longer than this (a /wait is aimed at with a
# short timeout of its own); a request that does counts as a hang.
REQUEST_TIMEOUT = 20.0


@dataclass(frozen=True)
class Target:
    url: str
    app: str
    machine_id: str
    volume_id: str
    other_app_token: str  # a deploy token of another app: sees nothing of ``app``


@contextmanager
def served_cluster(tmp: Path) -> Iterator[tuple[Target, Cluster, asyncio.AbstractEventLoop]]:
    """A worker and a broker on a loop in a thread, with an app, a machine and a volume."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    c = Cluster(tmp)

    async def setup() -> Target:
        await c.add_worker("ams-1", cpus=64, memory_mb=262144, disk_gb=100000)
        # With the certificates key and the CA: the certificate routes do their work.
        broker = await c.add_broker(certs_key="fuzz-certs-key", ca_dir=TEST_CA.root / "ca")
        c.follow()
        async with c.api() as api:
            for app in ("fuzz", "other"):
                (await api.post("/v1/apps", json={"app_name": app,
                                                  "org_slug": "personal"})).raise_for_status()
            created = await api.post("/v1/apps/fuzz/machines", json=machine())
            created.raise_for_status()
            volume = await api.post("/v1/apps/fuzz/volumes",
                                    json={"name": "data", "size_gb": 1})
            volume.raise_for_status()
            token = await api.post("/v1/apps/other/deploy_token", json={})
            token.raise_for_status()
        return Target(url=broker.url, app="fuzz", machine_id=created.json()["id"],
                      volume_id=volume.json()["id"], other_app_token=token.json()["token"])

    try:
        target = asyncio.run_coroutine_threadsafe(setup(), loop).result(120)
        yield target, c, loop
    finally:
        asyncio.run_coroutine_threadsafe(c.close(), loop).result(120)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)
        loop.close()


def run_on(loop: asyncio.AbstractEventLoop, coro: Any, timeout: float = 60) -> Any:
    return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout)


def error_problem(status: int, content_type: str, body: bytes) -> str | None:
    """Why an answer breaks the error contract, or None: no 5xx, errors in the shape."""
    if status >= 500:
        return f"server error {status}: {body[:300]!r}"
    if status < 400:
        return None
    if not content_type.startswith("application/json"):
        return f"error {status} with content type {content_type!r}"
    try:
        error = httpx.Response(status, content=body).json()
    except ValueError:
        return f"error {status} whose body is not JSON: {body[:300]!r}"
    if not isinstance(error, dict) or not isinstance(error.get("error"), str) \
            or not isinstance(error.get("status"), str):
        return f"error {status} not in the {{error, status}} shape: {body[:300]!r}"
    return None


def admin_headers() -> dict[str, str]:
    return {"authorization": f"Bearer {ADMIN}"}


@dataclass
class Tally:
    """Cases sent and cases that broke the contract, for ``make fuzz`` to print."""

    cases: int = 0
    failures: int = 0


TALLY = Tally()
