"""A worker where no cgroup hierarchy is mounted says so, and offers only what can run.

``ip netns exec`` (which the multi-host docs and tests run workers under) mounts a
fresh ``/sys`` and hides the cgroup hierarchies: a process machine then gets no cpu
or memory limit from cgroups, and runc or crun cannot run an image at all. A real
``bodega worker --driver auto`` started that way must say, in one line, which limits
it cannot enforce (in its log, and in its ready file, where `bodega up` and `bodega
join` read it to print), and declare the process driver only, so that placement sends
image machines elsewhere instead of the worker failing them at start.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.daemon_kit import Daemon, Identity, worker_argv

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")

NOTICE = "no cgroup hierarchy is mounted at /sys/fs/cgroup (as under `ip netns exec`)"


@pytest.fixture
def namespace() -> Iterator[str]:
    name = f"bdgt-cg-{uuid.uuid4().hex[:6]}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    subprocess.run(["ip", "-n", name, "link", "set", "lo", "up"], check=True)
    try:
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)


async def test_a_worker_without_cgroups_says_so_and_declares_the_process_driver_only(
        tmp_path: Path, namespace: str) -> None:
    ready = tmp_path / "w1.ready.json"
    argv = ["ip", "netns", "exec", namespace,
            *worker_argv(tmp_path / "w1", ready, driver="auto",
                         extra=("--cluster-id", "cgtst", "--machine-subnet", "10.251.7.0/24",
                                "--stop-machines-on-exit"))]
    worker = await Daemon(argv=argv, ready_file=ready, log_file=tmp_path / "w1.log",
                          identity=Identity(tmp_path / "w1" / "tls", "worker", "w1")).start()
    try:
        said = json.loads(ready.read_text())
        (warning,) = said["warnings"]
        assert warning.startswith(NOTICE), warning
        assert "machines get no cpu limit" in warning
        assert "this worker offers the process driver only" in warning
        log = (tmp_path / "w1.log").read_text()
        assert "(ams, process driver) serving" in log, log
        assert any("WARNING" in line and NOTICE in line for line in log.splitlines()), log
    finally:
        await worker.stop()
