from __future__ import annotations

import contextlib
import ipaddress
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bodega.model.capacity import Totals
from bodega.worker.config import WorkerConfig
from bodega.worker.daemon import Worker
from bodega.worker.drivers.fake import FakeDriver
from bodega.worker.host.network import HostNetwork
from tests.keyring_kit import SOURCE


def worker_config(tmp_path: Path, **overrides: object) -> WorkerConfig:
    values: dict[str, object] = {
        "name": "w1", "region": "ams", "data_dir": tmp_path / "w1", "driver": "fake",
        "totals": Totals(cpus=2, memory_mb=1024, disk_gb=10, shared_cpu_ratio=2.0),
        "network": "host", "machine_user": None, "gossip_keyring": SOURCE,
    }
    values.update(overrides)
    return WorkerConfig(**values)  # type: ignore[arg-type]


def make_worker(config: WorkerConfig) -> tuple[Worker, FakeDriver]:
    driver = FakeDriver()
    network = HostNetwork("127.0.0.1", ipaddress.ip_network("10.250.0.0/24"))
    return Worker(config, driver=driver, network=network), driver


@contextlib.asynccontextmanager
async def in_process_worker(config: WorkerConfig) -> AsyncIterator[tuple[Worker, FakeDriver]]:
    """A recovered worker with a fake driver and host networking, closed on the way out."""
    w, driver = make_worker(config)
    await w.network.setup()
    await w.machines.recover()
    yield w, driver
    await w.machines.settle()
    await w.machines.supervision.close()
    w.store.close()


@pytest.fixture
async def worker(tmp_path: Path) -> AsyncIterator[tuple[Worker, FakeDriver]]:
    """A worker with a fake driver and host networking, not serving HTTP."""
    async with in_process_worker(worker_config(tmp_path)) as pair:
        yield pair
