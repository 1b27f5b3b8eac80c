"""Which data plane carries client traffic: HAProxy when installed, else bodega's own.

``auto`` takes HAProxy when ``haproxy`` is on PATH; ``haproxy`` insists on it
(an error if missing); ``python`` keeps every request in bodega's proxy.
"""

from __future__ import annotations

import contextlib
import datetime
import shutil
import socket
import tempfile
from dataclasses import dataclass
from pathlib import Path

from bodega.proxy.haproxy.core.config import HaproxySettings
from bodega.runtime.binding import BindError
from bodega.runtime.tls.core import sites
from bodega.runtime.tls.files import write_private

MODES = ("auto", "haproxy", "python")
WORKDIR_PREFIX = "bodega-haproxy-"
# In the proxy's data dir: the directory of its HAProxy's files (maps, certificates and
# their keys), which a proxy killed with SIGKILL cannot remove.
WORKDIR_NOTE = "haproxy-workdir"


@dataclass(frozen=True)
class PlaneChoice:
    binary: str | None  # haproxy's path, or None for the Python data plane
    why: str


def choose_plane(mode: str, which: str | None = None, tls: bool = False) -> PlaneChoice:
    """``which``: where haproxy is (default: looked up on PATH); ``tls``: a TLS listener is
    asked for, which only HAProxy serves."""
    choice = _choose(mode, which)
    if tls and choice.binary is None:
        raise ValueError(f"--tls-listen needs the haproxy data plane ({choice.why}); "
                         "the python data plane serves plain HTTP only")
    return choice


def _choose(mode: str, which: str | None) -> PlaneChoice:
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
                     base_domain: str, threads: int, *, region: str = "",
                     tls: tuple[str, int] | None = None, default_cert: Path | None = None
                     ) -> tuple[Path, HaproxySettings]:
    """A short private directory for HAProxy's files (a socket path must stay short).

    ``tls``: where to serve TLS (port 0: any free one); ``default_cert``: the key and chain a
    client gets when no SNI matches (None: a self-signed one for ``*.<base-domain>``, made
    here: fly.toml's ``default_self_signed``)."""
    port = _free_port(listen_host, listen_port)
    tls_port = _free_port(*tls) if tls is not None else 0
    workdir = Path(tempfile.mkdtemp(prefix=WORKDIR_PREFIX))
    if tls is not None and default_cert is None:
        made = sites.self_signed((f"*.{base_domain}", base_domain),
                                 datetime.datetime.now(datetime.UTC))
        default_cert = workdir / "default.pem"
        write_private(default_cert, made.key_pem + made.chain_pem)
    return workdir, HaproxySettings(
        bind_host=listen_host, bind_port=port, activator_host=activator[0],
        activator_port=activator[1], socket_path=workdir / "admin.sock",
        hosts_map=workdir / "hosts.map", base_domain=base_domain, threads=threads,
        region=region, tls_host=tls[0] if tls else "", tls_port=tls_port,
        default_cert=default_cert)


def left_workdir(data_dir: Path) -> Path | None:
    """The HAProxy directory the proxy of ``data_dir`` noted and has not removed: a proxy
    killed with SIGKILL leaves its files (TLS keys among them). Only a directory this
    module would have made counts, whatever the note says."""
    with contextlib.suppress(OSError):
        left = Path((data_dir / WORKDIR_NOTE).read_text().strip())
        if (left.parent == Path(tempfile.gettempdir()) and left.name.startswith(WORKDIR_PREFIX)
                and left.is_dir()):
            return left
    return None


def take_workdir(data_dir: Path, workdir: Path) -> None:
    """Note ``workdir`` as the proxy of ``data_dir``'s, first removing the one an earlier
    run noted and left."""
    left = left_workdir(data_dir)
    if left is not None and left != workdir:
        shutil.rmtree(left, ignore_errors=True)
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / WORKDIR_NOTE).write_text(f"{workdir}\n")


def give_back_workdir(data_dir: Path, workdir: Path) -> None:
    """Remove ``workdir`` and its note (a proxy stopping)."""
    shutil.rmtree(workdir, ignore_errors=True)
    (data_dir / WORKDIR_NOTE).unlink(missing_ok=True)


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
