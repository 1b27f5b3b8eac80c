"""Volumes on hosts joined with the CLI (``multihost_kit.py``): where a worker keeps a
volume's files, their digest, and a host lost at once."""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
from pathlib import Path

from tests.cluster.multihost_kit import Host, MultiHost


def volume_dir(host: Host, volume_id: str) -> Path:
    (found,) = list(host.data.glob(f"workers/*/volumes/{volume_id}"))
    return found


def blob_digest(root: Path) -> str:
    digest = hashlib.sha256()
    with (root / "blob").open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def host_of(cluster: MultiHost, worker: str) -> Host:
    (found,) = [h for h in cluster.members if worker in h.worker_pids()]
    return found


def lose(host: Host) -> None:
    """The host is gone: every bodega process on it killed at once, nobody stops anything."""
    for pid in host.worker_pids().values():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert host.process is not None
    host.process.kill()
    host.process.wait()
