"""Leave the host as found: launchers parked by the tests' workers, their bridges and netns."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.leftovers_kit import sweep_under


def pids_under(path: Path) -> list[int]:
    """Processes whose command line names something under ``path`` (parked launchers)."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            with contextlib.suppress(OSError):
                if str(path).encode() in (proc / "cmdline").read_bytes():
                    found.append(int(proc.name))
    return found


@pytest.fixture(autouse=True)
async def clean_host(tmp_path: Path) -> AsyncIterator[None]:
    yield
    for pid in pids_under(tmp_path):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    if os.geteuid() == 0:
        await sweep_under(tmp_path)
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            target = line.split()[4]
            if target.startswith(str(tmp_path)):  # a machine a failed test left mounted
                subprocess.run(["umount", "-l", target], check=False)
