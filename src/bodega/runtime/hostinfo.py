"""Defaults read from the host, used only by entry points."""

from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path


def cpu_count() -> int:
    return os.cpu_count() or 1


def memory_mb() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    except OSError:
        pass
    return 1024


def disk_gb(path: Path) -> int:
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return int(shutil.disk_usage(probe).free // (1 << 30))


def hostname() -> str:
    return socket.gethostname().split(".")[0].lower() or "worker"


def split_host_port(value: str, default_port: int) -> tuple[str, int]:
    """``host:port``, ``:port``, ``host`` or ``[v6]:port``."""
    text = value.strip()
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest.lstrip(":")
        return host, int(port) if port else default_port
    if text.count(":") == 1:
        host, port = text.split(":")
        return host or "0.0.0.0", int(port) if port else default_port
    if text.isdigit():
        return "127.0.0.1", int(text)
    return text, default_port


def comma_list(text: str | None) -> tuple[str, ...]:
    """``"a, b,,c"`` -> ``("a", "b", "c")``: how every list flag is written."""
    return tuple(part.strip() for part in (text or "").split(",") if part.strip())
