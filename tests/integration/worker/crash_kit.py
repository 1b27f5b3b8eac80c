"""Helpers for crash tests: a process-driver worker that can be killed and restarted."""

from __future__ import annotations

import contextlib
import ipaddress
import itertools
import os
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from bodega.model.errors import Timeout
from bodega.wire.internal.worker_client import WorkerClient
from bodega.worker.host.netns import NetnsNetwork
from tests.cidr_kit import held_octet
from tests.leftovers_kit import names_of, sweep_data_dir
from tests.poll_kit import until as poll_until
from tests.proc_kit import live_pids
from tests.python_kit import machine_python
from tests.tls_kit import TEST_CA

from ..daemon_kit import Daemon, Identity, worker_argv

_subnets = itertools.count(1)


@dataclass
class CrashWorker:
    tmp: Path
    name: str
    subnet: str
    daemon: Daemon | None = None
    client: WorkerClient | None = None

    def _daemon(self, failpoints: str | None, extra: tuple[str, ...] = ()) -> Daemon:
        ready = self.tmp / f"{self.name}.ready.json"
        argv = worker_argv(self.tmp / self.name, ready, name=self.name, driver="process",
                           extra=("--machine-subnet", self.subnet, *extra))
        return Daemon(argv=argv, ready_file=ready, log_file=self.tmp / f"{self.name}.log",
                      env={"BODEGA_FAILPOINTS": failpoints} if failpoints else {},
                      identity=Identity(self.tmp / self.name / "tls", "worker", self.name))

    def network(self) -> NetnsNetwork:
        """The worker's network, as it names it (with the cluster id of its data dir)."""
        return NetnsNetwork(ipaddress.ip_network(self.subnet), names_of(self.tmp / self.name))

    async def start(self, failpoints: str | None = None,
                    extra: tuple[str, ...] = ()) -> WorkerClient:
        self.daemon = await self._daemon(failpoints, extra).start()
        if self.client is not None:
            await self.client.aclose()
        self.client = WorkerClient(self.daemon.url, TEST_CA.context("broker"), timeout=30)
        return self.client

    async def reached(self, machine_id: str, state: str, timeout: int = 30) -> None:
        """Wait for the machine to reach ``state``. A wait that fails says why: the
        machine's last events, and the lines the worker logged about it."""
        assert self.client is not None
        try:
            await self.client.wait(machine_id, state, timeout=timeout)
        except Timeout as exc:
            events = await self.client.call("GET", machine_id, "events")
            log = (self.tmp / f"{self.name}.log").read_text(errors="replace").splitlines()
            about = [line for line in log if machine_id in line]
            raise AssertionError(f"{exc}\nevents: {events[:6]}\nworker log:\n"
                                 + "\n".join(about[-20:])) from exc

    async def crashed(self, timeout: float = 30.0) -> int:
        assert self.daemon is not None
        return await self.daemon.wait_exit(timeout)

    async def cleanup(self) -> None:
        if self.client is not None and self.daemon is not None and (
            self.daemon.process and self.daemon.process.returncode is None
        ):
            with contextlib.suppress(Exception):
                for machine in await self.client.list_machines():
                    with contextlib.suppress(Exception):
                        await self.client.destroy(machine.id, force=True)
                        await self.client.wait(machine.id, "destroyed", timeout=30)
        if self.client is not None:
            await self.client.aclose()  # also when the test stopped the worker itself
        if self.daemon is not None:
            await self.daemon.stop()
        # Machines a test left (a crashed worker's), their namespaces, links and cgroups.
        await sweep_data_dir(self.tmp / self.name)
        shutil.rmtree(self.tmp / self.name, ignore_errors=True)


@contextlib.asynccontextmanager
async def crash_worker(tmp: Path) -> AsyncIterator[CrashWorker]:
    n = next(_subnets)
    # Subnets differ per test process too, so runs side by side never share a namespace.
    subnet = f"10.{held_octet('crash', 232, 248)}.{n % 250 + 1}.0/24"
    worker = CrashWorker(tmp, f"crash{os.getpid() % 1000}-{n}", subnet)
    try:
        yield worker
    finally:
        await worker.cleanup()


def machine_config(marker: str, env: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "image": "local/sleeper",
        "init": {"exec": [machine_python(), "-c", "import time; time.sleep(600)", marker]},
        "guest": {"cpus": 1, "memory_mb": 256},
        "env": env or {},
        **extra,
    }


def program_pids(marker: str) -> list[int]:
    """The machine's own program (not its wrapper): argv[0] is Python and it carries the marker."""
    python = machine_python().encode()
    return live_pids(lambda argv: argv[0] == python and marker.encode() in argv[1:])


until = partial(poll_until, timeout=20.0, every=0.05)


def environ_of(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode().split("=", 1) for item in raw if b"=" in item)
