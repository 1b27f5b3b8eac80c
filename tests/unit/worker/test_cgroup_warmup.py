"""Where a worker's warm-up thread moves itself to ready the kernel's cgroup lock (pure)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from bodega.worker.drivers.process.cgroups import Cgroups
from bodega.worker.drivers.process.warmup import Warmup, own_cgroup_file

ROOT = Path("/sys/fs/cgroup")
V1 = "10:hugetlb:/\n4:memory:/bodega/w1/run\n1:cpu,cpuacct:/\n0::/\n"


def test_a_thread_moves_into_its_own_memory_cgroup() -> None:
    assert own_cgroup_file(ROOT, V1) == ROOT / "memory" / "bodega" / "w1" / "run" / "tasks"
    assert own_cgroup_file(ROOT, "3:cpu,memory:/\n") == ROOT / "memory" / "tasks"


def test_no_memory_hierarchy_means_nowhere_to_move() -> None:
    assert own_cgroup_file(ROOT, "0::/user.slice/worker\n") is None
    assert own_cgroup_file(ROOT, "") is None


def test_only_v1_cgroups_get_a_warm_up() -> None:
    warmup = Warmup.of(Cgroups(1, "w1"))
    assert warmup is not None
    assert warmup.root == ROOT
    assert Warmup.of(Cgroups(2, "w1")) is None  # a v2 runtime starts a container in place
    assert Warmup.of(None) is None


async def test_cgroup_work_waits_while_a_move_may_hold_the_kernel_s_mutex() -> None:
    warmup = Warmup(ROOT)
    await asyncio.wait_for(warmup.clear(), 5)  # nothing under way: at once
    warmup.moving = True
    waiting = asyncio.create_task(warmup.clear(limit=30))
    await asyncio.sleep(0.02)
    assert not waiting.done()
    warmup.moving = False  # the burst's first move is done
    await asyncio.wait_for(waiting, 5)


async def test_a_move_that_never_lets_go_holds_cgroup_work_back_only_so_long() -> None:
    warmup = Warmup(ROOT)
    warmup.moving = True
    await asyncio.wait_for(warmup.clear(limit=0.05), 5)
