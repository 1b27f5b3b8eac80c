"""Invariant 3 under group commit: a worker killed right after answering a group of creates
loses none of them, and finishes the operations they began."""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path

import pytest

from .crash_kit import crash_worker, machine_config, program_pids, until

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the process driver test needs root")


async def test_sigkill_right_after_a_group_is_answered_loses_no_create(tmp_path: Path) -> None:
    markers = [f"bodega-group-{uuid.uuid4().hex[:12]}" for _ in range(4)]
    async with crash_worker(tmp_path) as worker:
        client = await worker.start()
        # Concurrent creates: the worker commits those that arrive together as one group.
        answered = await asyncio.gather(*(
            client.create_machine({"app": "crash", "config": machine_config(marker),
                                   "name": f"m{i}"})
            for i, marker in enumerate(markers)))
        assert worker.daemon is not None
        await worker.daemon.kill9()  # at once: the operations they began may not have run
        client = await worker.start()
        machines = {m.id: m for m in await client.list_machines("crash")}
        assert set(machines) == {m.id for m in answered}
        assert {m.name for m in machines.values()} == {f"m{i}" for i in range(4)}
        for machine in answered:  # each create resumed and went on to start, once
            await client.wait(machine.id, "started", timeout=60)
        for marker in markers:
            await until(lambda m=marker: len(program_pids(m)) == 1)
