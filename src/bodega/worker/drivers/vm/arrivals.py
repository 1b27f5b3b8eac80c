"""A live move's marks on disk (``live.py``): the target's staged arrival, which its start
reads (a blank root disk of the source's size, the source's MAC, ``-incoming defer``),
and the source's sockets set aside for the target's qemu to bind their names."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from bodega.runtime.commands import run_command
from bodega.worker.drivers.base import DriverError
from bodega.worker.drivers.vm.core.qemu import (
    console_socket,
    control_socket,
    exec_socket,
    qmp_socket,
)

ARRIVAL = "arrival.json"  # in the target's vm directory: a live move's qemu waits for state
ASIDE = "set-aside"  # in the source's vm directory: its sockets carry ASIDE_SUFFIX
ASIDE_SUFFIX = ".leaving"


class Arrival(BaseModel):
    """What the target's start needs of a live move: the source's MAC and disk size."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    move_id: str
    mac: str
    disk_bytes: int


def vm_dir(machine_dir: Path) -> Path:
    return machine_dir / "vm"


def stage_arrival(machine_dir: Path, arrival: Arrival) -> None:
    directory = vm_dir(machine_dir)
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / (ARRIVAL + ".tmp")
    tmp.write_text(arrival.model_dump_json())
    tmp.rename(directory / ARRIVAL)


def arrival_of(machine_dir: Path) -> Arrival | None:
    try:
        return Arrival.model_validate_json((vm_dir(machine_dir) / ARRIVAL).read_bytes())
    except (OSError, ValueError):
        return None


def staged_within(machine_dir: Path, seconds: float) -> bool:
    """Whether an arrival is staged in ``machine_dir`` and was so less than ``seconds``
    ago (one stat: the publisher asks it of every machine it publishes)."""
    try:
        staged = (vm_dir(machine_dir) / ARRIVAL).stat().st_mtime
    except OSError:
        return False
    return time.time() - staged < seconds


def clear_arrival(machine_dir: Path) -> None:
    (vm_dir(machine_dir) / ARRIVAL).unlink(missing_ok=True)


def sockets(machine_id: str) -> tuple[Path, ...]:
    return (qmp_socket(machine_id), control_socket(machine_id), exec_socket(machine_id),
            console_socket(machine_id))


def aside(socket: Path) -> Path:
    return socket.with_name(socket.name + ASIDE_SUFFIX)


def set_aside(machine_id: str, machine_dir: Path) -> None:
    """The source's sockets renamed aside, once: after that the names are the target's."""
    marker = vm_dir(machine_dir) / ASIDE
    if marker.exists():
        return
    for socket in sockets(machine_id):
        with contextlib.suppress(FileNotFoundError):
            socket.rename(aside(socket))
    marker.touch()


def put_back(machine_id: str, machine_dir: Path) -> None:
    """Undo ``set_aside``: the move did not happen, the VM runs on here."""
    marker = vm_dir(machine_dir) / ASIDE
    if not marker.exists():
        return
    for socket in sockets(machine_id):
        with contextlib.suppress(FileNotFoundError):
            aside(socket).rename(socket)
    marker.unlink()


def leaving_qmp(machine_id: str, machine_dir: Path) -> Path:
    socket = qmp_socket(machine_id)
    return aside(socket) if (vm_dir(machine_dir) / ASIDE).exists() else socket


def is_set_aside(machine_dir: Path) -> bool:
    return (vm_dir(machine_dir) / ASIDE).exists()


async def blank_disk(disk: Path, size: int) -> None:
    """The target's root disk until the source's comes: of its size, over nothing."""
    remove(disk, disk.with_suffix(".base"))  # a next cold start makes it afresh
    done = await run_command("qemu-img", "create", "-q", "-f", "qcow2", str(disk), str(size))
    if done.returncode != 0:
        raise DriverError(f"qemu-img create: {done.stderr.decode(errors='replace').strip()}")


def remove(*paths: Path) -> None:
    for path in paths:
        path.unlink(missing_ok=True)
