"""Whether this host lets a test reach its own v1 memory cgroup (the cgroup warm-up's)."""

from __future__ import annotations

import os
from pathlib import Path

from bodega.worker.drivers.process.warmup import own_cgroup_file

ROOT = Path("/sys/fs/cgroup")


def warmable() -> bool:
    """Root, and this process's own v1 memory cgroup reachable under ``ROOT``."""
    mine = own_cgroup_file(ROOT, Path("/proc/self/cgroup").read_text())
    return os.geteuid() == 0 and mine is not None and mine.exists()
