"""Real bodega daemons as subprocesses, for integration tests.

Each daemon gets a TLS identity from the test CA (``tests.tls_kit``) in its
data dir before it starts, when it has one (``identity``), and the cluster's
gossip secret and secrets key in its environment.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

from bodega.wire.internal.worker_client import WorkerClient
from tests.tls_kit import LOOPBACK, TEST_CA, daemon_env

READY_TIMEOUT = 30.0
BROKER_TOKEN = "integration-admin-token"


@dataclass(frozen=True)
class Identity:
    """The certificate a daemon is given: its role and name, where it serves."""

    tls_dir: Path
    role: str
    name: str
    hosts: tuple[str, ...] = LOOPBACK


@dataclass
class Daemon:
    argv: list[str]
    ready_file: Path
    log_file: Path
    env: dict[str, str] = field(default_factory=dict)
    process: asyncio.subprocess.Process | None = None
    url: str = ""
    identity: Identity | None = None

    async def start(self) -> Daemon:
        self.ready_file.unlink(missing_ok=True)
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        if self.identity is not None:
            TEST_CA.issue(self.identity.tls_dir, self.identity.role, self.identity.name,
                          self.identity.hosts)
        with self.log_file.open("ab") as out:
            self.process = await asyncio.create_subprocess_exec(
                *self.argv, stdout=out, stderr=out, stdin=asyncio.subprocess.DEVNULL,
                env={**os.environ, **daemon_env(), **self.env},
                start_new_session=True,
            )
        deadline = time.monotonic() + READY_TIMEOUT
        while not self.ready_file.exists():
            if self.process.returncode is not None:
                raise RuntimeError(f"daemon exited {self.process.returncode}:\n{self.log()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"daemon not ready in {READY_TIMEOUT}s:\n{self.log()}")
            await asyncio.sleep(0.02)
        self.url = json.loads(self.ready_file.read_text())["url"]
        return self

    @property
    def internal_url(self) -> str:
        """Where members reach it: a broker's internal listener, any other's only one."""
        ready = json.loads(self.ready_file.read_text())
        return str(ready.get("internal_url") or ready["url"])

    def log(self) -> str:
        try:
            return self.log_file.read_text()[-4000:]
        except OSError:
            return ""

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    async def kill9(self) -> None:
        """SIGKILL, like a crash; machines in their own sessions are untouched."""
        assert self.process is not None
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()
        await self.process.wait()

    async def wait_exit(self, timeout: float = 30.0) -> int:
        assert self.process is not None
        return await asyncio.wait_for(self.process.wait(), timeout)

    async def stop(self, timeout: float = 20.0) -> None:
        if self.process is None or self.process.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            self.process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(self.process.wait(), timeout)
        except TimeoutError:
            await self.kill9()


def worker_argv(data_dir: Path, ready: Path, *, name: str = "w1", region: str = "ams",
                driver: str = "null", cpus: int = 4, memory_mb: int = 4096,
                extra: tuple[str, ...] = ()) -> list[str]:
    return [
        sys.executable, "-m", "bodega", "worker", "--name", name, "--region", region,
        "--data-dir", str(data_dir), "--listen", "127.0.0.1:0", "--driver", driver,
        "--cpus", str(cpus), "--memory-mb", str(memory_mb), "--disk-gb", "10",
        "--ready-file", str(ready), "--log-level", "info", *extra,
    ]


def worker_daemon(tmp: Path, name: str = "w1", **kw: object) -> Daemon:
    """A ``bodega worker`` process, not started yet (``await worker_daemon(...).start()``)."""
    return Daemon(
        argv=worker_argv(tmp / name, tmp / f"{name}.ready.json", name=name, **kw),  # type: ignore[arg-type]
        ready_file=tmp / f"{name}.ready.json", log_file=tmp / f"{name}.log",
        identity=Identity(tmp / name / "tls", "worker", name),
    )


@contextlib.asynccontextmanager
async def running_worker_daemon(tmp: Path,
                                **kw: object) -> AsyncIterator[tuple[Daemon, WorkerClient]]:
    """A started ``bodega worker`` process and a client of its API, stopped on the way out.

    Its own process, unlike ``tests/unit/worker``'s ``in_process_worker`` (a ``Worker``
    object in the test's event loop).
    """
    daemon = await worker_daemon(tmp, **kw).start()  # type: ignore[arg-type]
    client = WorkerClient(daemon.url, TEST_CA.context("broker"))
    try:
        yield daemon, client
    finally:
        await client.aclose()
        await daemon.stop()


def broker_daemon(tmp: Path, name: str = "b1", *extra: str) -> Daemon:
    """A ``bodega broker`` process (admin token ``BROKER_TOKEN``), not started yet, with an
    identity from the test CA (set ``identity`` to None to give it one yourself)."""
    ready = tmp / f"{name}.ready.json"
    return Daemon(
        argv=[sys.executable, "-m", "bodega", "broker", "--name", name, "--region", "ams",
              "--data-dir", str(tmp / name), "--listen", "127.0.0.1:0",
              "--ready-file", str(ready), "--log-level", "info", *extra],
        ready_file=ready, log_file=tmp / f"{name}.log", env={"BODEGA_API_TOKEN": BROKER_TOKEN},
        identity=Identity(tmp / name / "tls", "broker", name))
