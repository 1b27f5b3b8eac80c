"""A running machine's memory, through its memory cgroup: its limit, its use, a reclaim.

Fly moves a balloon in a VM; a bodega machine is a cgroup, so its limit is the
cgroup's (``memory.limit_in_bytes`` on v1, ``memory.max`` on v2), set live: a
lower limit makes the kernel reclaim down to it at the write, and the write
fails (EBUSY on v1) when what the machine uses cannot be reclaimed below it.

Reclaim, measured on this project's hosts (v1, no swap): ``memory.force_empty``
works on a cgroup with tasks in it (a 6.x kernel reclaims what it can and
returns; 103 MB of page cache went to 0.4 MB, the program untouched), but it
takes everything. To reclaim an amount, the limit is written down to
``use - amount`` and back: the kernel reclaims to meet the lower limit (a
100 MB page cache, asked for 40 MB, went from 108 MB to 66 MB). Without swap
only reclaimable memory (page cache, mostly) can go; a program's own heap
stays, and a lower limit the kernel cannot meet is refused, never an OOM
kill. On v2, ``memory.reclaim`` takes the amount directly.
"""

from __future__ import annotations

import contextlib
import errno
from dataclasses import dataclass
from pathlib import Path

from bodega.worker.drivers.base import DriverError, MemoryBusy, MemoryUse
from bodega.worker.drivers.process.cgroups import Cgroups

MIB = 1024 * 1024


@dataclass(frozen=True)
class CgroupMemory:
    """The ``memory`` capability of the drivers that run machines in cgroups."""

    cgroups: Cgroups

    def _dir(self, machine_id: str) -> Path:
        return self.cgroups.dirs(machine_id)[0]

    def _limit_file(self) -> str:
        return "memory.max" if self.cgroups.version == 2 else "memory.limit_in_bytes"

    def _usage_file(self) -> str:
        return "memory.current" if self.cgroups.version == 2 else "memory.usage_in_bytes"

    def use(self, machine_id: str) -> MemoryUse | None:
        """The machine's limit and use in bytes; None when it has no memory cgroup."""
        path = self._dir(machine_id)
        try:
            limit_text = (path / self._limit_file()).read_text().strip()
            usage = int((path / self._usage_file()).read_text())
        except (OSError, ValueError):
            return None
        limit = 0 if limit_text == "max" else int(limit_text)
        return MemoryUse(limit_bytes=limit, usage_bytes=usage)

    def set_limit(self, machine_id: str, limit_mb: int) -> None:
        """Set the limit live; MemoryBusy when the kernel cannot reclaim down to it."""
        path = self._dir(machine_id)
        limit = limit_mb * MIB
        try:
            if self.cgroups.version == 2:
                (path / "memory.max").write_text(f"{limit}\n")
                return
            # memsw (memory + swap) must stay >= memory: lower memory first, raise memsw
            # first; the swap the machine's start allowed beside its memory stays as it
            # was. Where the host has no memsw accounting the writes are no-ops.
            current = self.use(machine_id)
            lowering = current is not None and limit < current.limit_bytes
            memsw = limit + self._swap_bytes(path)
            if not lowering:
                self._write_memsw(path, memsw)
            (path / "memory.limit_in_bytes").write_text(f"{limit}\n")
            if lowering:
                self._write_memsw(path, memsw)
        except FileNotFoundError:
            raise DriverError(f"machine {machine_id} has no memory cgroup") from None
        except OSError as exc:
            if exc.errno == errno.EBUSY:
                raise MemoryBusy(f"the kernel could not reclaim machine {machine_id}'s "
                                 f"memory down to {limit_mb} MB") from None
            raise DriverError(f"setting machine {machine_id}'s memory limit: {exc}") from None

    @staticmethod
    def _swap_bytes(path: Path) -> int:
        """The swap a v1 cgroup allows beside its memory: memsw's limit less memory's (0
        where memsw is not accounted)."""
        try:
            return max(int((path / "memory.memsw.limit_in_bytes").read_text())
                       - int((path / "memory.limit_in_bytes").read_text()), 0)
        except (OSError, ValueError):
            return 0

    @staticmethod
    def _write_memsw(path: Path, limit: int) -> None:
        with contextlib.suppress(OSError):
            (path / "memory.memsw.limit_in_bytes").write_text(f"{limit}\n")

    def reclaim(self, machine_id: str, amount_mb: int | None) -> int:
        """Ask the kernel to reclaim ``amount_mb`` (None: all it can); the bytes it did."""
        before = self.use(machine_id)
        if before is None:
            raise DriverError(f"machine {machine_id} has no memory cgroup")
        path = self._dir(machine_id)
        if self.cgroups.version == 2:
            amount = before.usage_bytes if amount_mb is None else amount_mb * MIB
            with contextlib.suppress(OSError):  # EAGAIN: it reclaimed less than asked
                (path / "memory.reclaim").write_text(f"{amount}\n")
        elif amount_mb is None:
            with contextlib.suppress(OSError):  # EINTR/EBUSY: it reclaimed what it could
                (path / "memory.force_empty").write_text("0\n")
        else:
            target = max(before.usage_bytes - amount_mb * MIB, MIB)
            try:
                with contextlib.suppress(OSError):  # EBUSY: it reclaimed what it could
                    (path / "memory.limit_in_bytes").write_text(f"{target}\n")
            finally:
                (path / "memory.limit_in_bytes").write_text(f"{before.limit_bytes}\n")
        after = self.use(machine_id)
        return max(before.usage_bytes - (after.usage_bytes if after else 0), 0)
