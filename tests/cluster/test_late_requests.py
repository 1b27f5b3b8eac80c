"""A request a service gave up on during a partition never lands after the heal.

Found by the chaos suite: a broker forwarded a stop over a pooled connection
while the worker's host was cut off, gave up (503) and the client moved on;
when the network healed, the kernel's retransmission of that abandoned
request reached the worker, which applied it after later, answered requests.
The inter-service client now drops (RST) a connection it closes, so what it
gave up on dies with the socket.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from bodega.model.errors import Indeterminate
from bodega.wire.internal.worker_client import WorkerClient
from bodega.worker.host.network import run
from tests.integration.daemon_kit import Daemon, Identity
from tests.tls_kit import TEST_CA

from .netns_kit import hosts

pytestmark = [pytest.mark.root,
              pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")]

MACHINE = {"app": "late", "config": {"image": "img", "guest": {"cpus": 1, "memory_mb": 256}}}


async def test_a_stop_abandoned_during_a_partition_is_not_applied_after_the_heal(
    tmp_path: Path,
) -> None:
    async with hosts(1) as h:
        ready = tmp_path / "w.json"
        name = f"late-{os.getpid()}"
        worker = await Daemon(argv=h.exec(
            1, sys.executable, "-m", "bodega", "worker", "--name", name,
            "--region", "ams", "--data-dir", str(tmp_path / "w"), "--driver", "null",
            "--listen", f"{h.address(1)}:7000", "--cpus", "2", "--memory-mb", "2048",
            "--ready-file", str(ready)), ready_file=ready, log_file=tmp_path / "w.log",
            identity=Identity(tmp_path / "w" / "tls", "worker", name, (h.address(1),))).start()
        client = WorkerClient(worker.url, TEST_CA.context("broker"), timeout=2)
        try:
            machine = (await client.create_machine(MACHINE)).id
            assert (await client.wait(machine, "started", timeout=30))  # pools a connection
            # The worker's host drops everything from the test's address: the stop goes out
            # on the pooled connection and no answer can come back.
            rules = (f"table inet late {{\n chain input {{\n  type filter hook input priority 0;"
                     f"\n  ip saddr {h.address(254)} drop\n }}\n}}\n")
            await run(*h.exec(1, "nft", "-f", "-"), stdin=rules.encode())
            with pytest.raises(Indeterminate):
                await client.stop(machine)
            await run(*h.exec(1, "nft", "delete", "table", "inet", "late"))
            # TCP would retransmit an orphaned request within seconds of the heal.
            await asyncio.sleep(8)
            fresh = WorkerClient(worker.url, TEST_CA.context("broker"))
            try:
                assert (await fresh.machine(machine)).state == "started"
            finally:
                await fresh.aclose()
        finally:
            await client.aclose()
            await worker.stop()
