"""Which data plane carries client traffic: HAProxy when installed, else bodega's own.

``auto`` takes HAProxy when ``haproxy`` is on PATH; ``haproxy`` insists on it
(an error if missing); ``python`` keeps every request in bodega's proxy.
"""

from __future__ import annotations

import shutil
import socket
import tempfile
from dataclasses import dataclass
from pathlib import Path

from bodega.proxy.haproxy.config import HaproxySettings
from bodega.runtime.binding import BindError

MODES = ("auto", "haproxy", "python")


@dataclass(frozen=True)
class PlaneChoice:
    binary: str | None  # haproxy's path, or None for the Python data plane
    why: str


def choose_plane(mode: str, which: str | None = None) -> PlaneChoice:
    """``which``: where haproxy is (default: looked up on PATH)."""
    if mode not in MODES:
        raise ValueError(f"--data-plane must be one of {', '.join(MODES)}, not {mode!r}")
    if mode == "python":
        return PlaneChoice(None, "asked for with --data-plane python")
    found = which if which is not None else shutil.which("haproxy")
    if found:
        return PlaneChoice(found, f"{found} found")
    if mode == "haproxy":
        raise ValueError("--data-plane haproxy: haproxy is not installed "
                         "(apt-get install haproxy)")
    return PlaneChoice(None, "haproxy is not installed")


def haproxy_settings(listen_host: str, listen_port: int, activator: tuple[str, int],
                     base_domain: str, threads: int) -> tuple[Path, HaproxySettings]:
    """A short private directory for HAProxy's files (a socket path must stay short)."""
    port = _free_port(listen_host, listen_port)
    workdir = Path(tempfile.mkdtemp(prefix="bodega-haproxy-"))
    return workdir, HaproxySettings(
        bind_host=listen_host, bind_port=port, activator_host=activator[0],
        activator_port=activator[1], socket_path=workdir / "admin.sock",
        hosts_map=workdir / "hosts.map", base_domain=base_domain, threads=threads)


def _free_port(host: str, port: int) -> int:
    """``port`` if it can be bound, or a free one for 0 (HAProxy needs a number).

    Bound here first so a taken port is the same one-line error as on the
    Python data plane, rather than HAProxy's exit.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise BindError(exc, host, port, "TCP") from exc
        return int(sock.getsockname()[1])
