"""The processes of this host, read from /proc: for tests that look for what a cluster
started, or left behind."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path


def live_pids(matches: Callable[[list[bytes]], bool]) -> list[int]:
    """The processes, zombies left out, whose argv (split at its NULs) ``matches``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            if not matches(argv):
                continue
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):  # gone between the reads
            continue
        if state != "Z":
            found.append(int(entry.name))
    return found
