"""Per-machine cgroups: a memory limit, a cpu quota, and a handle on every process.

A machine swaps as much as its ``init.swap_size_mb`` beside its memory, none without it:
v1's ``memory.memsw.limit_in_bytes`` is memory + swap, v2's ``memory.swap.max`` the swap
alone. Where the kernel does not account swap (``swapaccount=0``) the memory limit bounds
RAM and swap is bounded by nothing of the machine's (the worker says so at its start).

Supports the v1 hierarchy (one mount per controller, as on this project's
hosts), the unified v2 hierarchy, and none (not root, or not writable), in
which case the process driver falls back to ``ulimit -v``. Each machine gets
``bodega/<scope>/<machine id>`` under every controller used; ``scope`` is
the worker's name so several workers on one host never collide.

The cpu quota is ``cpus x period`` for both cpu kinds: it caps a machine at
the vCPUs it asked for. What oversubscription means for shared cpus is
decided by the ledger (how many machines a host accepts), not here.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import re
import signal
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("bodega.worker.cgroups")

ROOT = Path("/sys/fs/cgroup")
CPU_PERIOD_US = 100_000
MIB = 1024 * 1024
_SCOPE_RE = re.compile(r"[^A-Za-z0-9_.-]")


@dataclass(frozen=True)
class Cgroups:
    version: int  # 1 or 2
    scope: str
    root: Path = ROOT

    @classmethod
    def detect(cls, scope: str, root: Path = ROOT) -> Cgroups | None:
        """The hierarchy this host offers, or None when machines cannot have cgroups."""
        if os.geteuid() != 0:
            return None
        scope = _SCOPE_RE.sub("_", scope) or "worker"
        if (root / "cgroup.controllers").exists():
            controllers = (root / "cgroup.controllers").read_text().split()
            if "memory" in controllers:
                return cls(2, scope, root)
            return None
        if (root / "memory" / "memory.limit_in_bytes").exists():
            return cls(1, scope, root)
        return None

    # -- paths ----------------------------------------------------------------------
    def dirs(self, machine_id: str) -> list[Path]:
        if self.version == 2:
            return [self.root / "bodega" / self.scope / machine_id]
        dirs = [self.root / "memory" / "bodega" / self.scope / machine_id]
        if (self.root / "cpu" / "cpu.cfs_quota_us").exists():
            dirs.append(self.root / "cpu" / "bodega" / self.scope / machine_id)
        return dirs

    def freezer_dir(self, machine_id: str) -> Path | None:
        """Where the machine's freezer state lives; None when this host has no freezer.

        On v1 it is the ``freezer`` controller's cgroup of the same name (the one runc's
        ``cgroupsPath`` makes too), joined only when the machine is suspended, so a start
        pays no extra cgroup move; on v2 it is the machine's own cgroup.
        """
        if self.version == 2:
            return self.dirs(machine_id)[0]
        if not (self.root / "freezer").is_dir():
            return None
        return self.root / "freezer" / "bodega" / self.scope / machine_id

    def thaw(self, machine_id: str) -> None:
        """Let the machine's frozen processes run again; nothing if none are frozen."""
        path = self.freezer_dir(machine_id)
        if path is None:
            return
        name, value = ("cgroup.freeze", "0") if self.version == 2 else ("freezer.state", "THAWED")
        with contextlib.suppress(FileNotFoundError):
            (path / name).write_text(f"{value}\n")

    def procs_files(self, machine_id: str) -> list[Path]:
        """Where a process writes its pid to join the machine's cgroups."""
        return [d / "cgroup.procs" for d in self.dirs(machine_id)]

    def holding(self, machine_id: str, pid: int) -> list[Path]:
        """The ``cgroup.procs`` files of the machine's cgroups ``pid`` is in: where another
        process goes to be counted, limited and frozen with it (on v1 its memory and cpu
        cgroups, and its freezer cgroup once a suspend has moved it there)."""
        dirs = self.dirs(machine_id)
        freezer = self.freezer_dir(machine_id)
        if freezer is not None and freezer not in dirs:
            dirs.append(freezer)
        holding = []
        for path in dirs:
            with contextlib.suppress(OSError):
                if str(pid) in (path / "cgroup.procs").read_text().split():
                    holding.append(path / "cgroup.procs")
        return holding

    # -- lifecycle --------------------------------------------------------------------
    def made(self, machine_id: str) -> bool:
        """The machine's cgroups all exist (``fit`` then sets their limits: no ``mkdir``,
        which would take its parent directory's lock, and may wait on the cgroup mutex)."""
        return all(path.is_dir() for path in self.dirs(machine_id))

    def create(self, machine_id: str, memory_mb: int | None, cpus: int | None,
               swap_mb: int = 0) -> None:
        """Make (or refit) the machine's cgroups; idempotent. None leaves a limit unset."""
        if self.version == 2:
            self._enable_v2_controllers()
        for path in self.dirs(machine_id):
            path.mkdir(parents=True, exist_ok=True)
        self.fit(machine_id, memory_mb, cpus, swap_mb)

    def fit(self, machine_id: str, memory_mb: int | None, cpus: int | None,
            swap_mb: int = 0) -> None:
        """Set the limits of the machine's cgroups, already made. None leaves one unset.
        ``swap_mb`` is the swap it may use beside its memory (``init.swap_size_mb``); a host
        that does not account swap (``accounts_swap``) bounds its memory alone."""
        if self.version == 2:
            path = self.dirs(machine_id)[0]
            if memory_mb is not None:
                (path / "memory.max").write_text(f"{memory_mb * MIB}\n")
                with contextlib.suppress(OSError):
                    (path / "memory.swap.max").write_text(f"{swap_mb * MIB}\n")
            if cpus is not None:
                with contextlib.suppress(OSError):
                    (path / "cpu.max").write_text(f"{cpus * CPU_PERIOD_US} {CPU_PERIOD_US}\n")
            return
        for path in self.dirs(machine_id):
            if path.is_relative_to(self.root / "memory"):
                if memory_mb is not None:
                    limit, memsw = memory_mb * MIB, (memory_mb + swap_mb) * MIB
                    # memsw (memory + swap) is never below memory: written first, it fails
                    # when lowered below the memory limit still in place, and again after.
                    with contextlib.suppress(OSError):
                        (path / "memory.memsw.limit_in_bytes").write_text(f"{memsw}\n")
                    (path / "memory.limit_in_bytes").write_text(f"{limit}\n")
                    with contextlib.suppress(OSError):
                        (path / "memory.memsw.limit_in_bytes").write_text(f"{memsw}\n")
            elif cpus is not None:
                (path / "cpu.cfs_period_us").write_text(f"{CPU_PERIOD_US}\n")
                (path / "cpu.cfs_quota_us").write_text(f"{cpus * CPU_PERIOD_US}\n")

    def accounts_swap(self) -> bool:
        """The kernel counts swap in memory cgroups (v1's ``memory.memsw.*``, v2's
        ``memory.swap.max``: both absent with ``swapaccount=0``), so a machine's swap can be
        bounded; else its memory limit bounds its RAM, and its swap only the host's has."""
        if self.version == 2:
            return any(self.root.glob("*/memory.swap.max"))
        return (self.root / "memory" / "memory.memsw.limit_in_bytes").exists()

    def adopt(self, slot: str, machine_id: str, memory_mb: int, cpus: int,
              swap_mb: int = 0) -> None:
        """Make cgroups ``slot`` (with whatever waits in them) the machine's, then fit them.

        A rename moves no process, so it costs none of a migration's RCU wait;
        the machine's old, empty cgroups (from an earlier run) are removed first.
        """
        for old, new in zip(self.dirs(slot), self.dirs(machine_id), strict=True):
            with contextlib.suppress(FileNotFoundError):
                new.rmdir()
            old.rename(new)
        self.fit(machine_id, memory_mb, cpus, swap_mb)

    def _enable_v2_controllers(self) -> None:
        parent = self.root
        for part in ("bodega", self.scope):
            with contextlib.suppress(OSError):
                (parent / "cgroup.subtree_control").write_text("+memory +cpu\n")
            parent = parent / part
            parent.mkdir(exist_ok=True)
        with contextlib.suppress(OSError):
            (parent / "cgroup.subtree_control").write_text("+memory +cpu\n")

    def pids(self, machine_id: str) -> list[int]:
        pids: set[int] = set()
        for path in self.procs_files(machine_id):
            with contextlib.suppress(OSError):
                pids.update(int(line) for line in path.read_text().split())
        return sorted(pids)

    def oom_kills(self, machine_id: str) -> int:
        """How many times the kernel's OOM killer struck inside the machine's cgroup."""
        path = self.dirs(machine_id)[0]
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        try:
            text = (path / name).read_text()
        except OSError:
            return 0
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0

    def kill_all(self, machine_id: str) -> None:
        for pid in self.pids(machine_id):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        # A frozen process only dies of its SIGKILL once thawed (v1 freezer); thawing after
        # the kill means it never runs another instruction of its own.
        self.thaw(machine_id)

    def remove(self, machine_id: str) -> bool:
        """Remove the machine's cgroups; only empty ones can go, so kill first.

        False when one is still busy: a killed process leaves its cgroup a little after it
        dies (the kernel frees it asynchronously), so callers that must see it gone retry.
        """
        removed = True
        freezer = self.freezer_dir(machine_id)
        extra = [freezer] if freezer is not None and self.version == 1 else []
        for path in [*self.dirs(machine_id), *extra]:
            try:
                path.rmdir()
            except FileNotFoundError:
                continue
            except OSError as exc:
                if exc.errno != errno.EBUSY:
                    raise
                removed = False
        return removed

    async def empty(self, machine_id: str, timeout: float) -> None:
        """Kill what is left in the machine's cgroups and remove them, retrying while busy.

        On a loaded host a killed process can take a while to leave its cgroup; a destroy
        waits for that (bounded) rather than fail, and leaves an empty cgroup at worst.
        """
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            self.kill_all(machine_id)
            if not self.pids(machine_id) and self.remove(machine_id):
                return
            if asyncio.get_running_loop().time() > deadline:
                log.warning("%s: its cgroups are still busy after %.0fs; left in place",
                            machine_id, timeout)
                return
            await asyncio.sleep(0.02)
