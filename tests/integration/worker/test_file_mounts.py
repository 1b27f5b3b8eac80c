"""A machine's mount over a file: the private network's resolv.conf, in its own namespace."""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path

import pytest

from bodega.worker.drivers.base import Mount, TaskSpec
from bodega.worker.drivers.process import ProcessDriver
from bodega.worker.drivers.process.logfiles import log_path
from tests.python_kit import machine_python

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (mount namespaces)")


async def test_a_file_is_bound_over_a_file_in_the_machines_namespace_only(
        tmp_path: Path) -> None:
    driver = ProcessDriver(None)
    mine = tmp_path / "resolv.conf"
    mine.write_text("nameserver fdaa:1:2::3\n")
    host_before = Path("/etc/resolv.conf").read_text()
    mid = uuid.uuid4().hex[:14]
    spec = TaskSpec(
        machine_id=mid, instance_id="01TESTINSTANCE000000000000", start_seq=1, app="app",
        image="img", argv=[machine_python(), "-c", "print(open('/etc/resolv.conf').read())"],
        env={"PATH": "/usr/bin:/bin"}, cpus=1, cpu_kind="shared", memory_mb=256,
        machine_dir=tmp_path / mid, netns=None, user=(65534, 65534),
        mounts=(Mount(mine, "/etc/resolv.conf"),))
    handle = await driver.start(spec)
    status = await asyncio.wait_for(driver.wait(handle), 20)
    text = log_path(spec.machine_dir).read_text()
    assert status.exit_code == 0, text
    assert "nameserver fdaa:1:2::3" in text
    assert Path("/etc/resolv.conf").read_text() == host_before
    assert Path("/etc/resolv.conf").is_file()
