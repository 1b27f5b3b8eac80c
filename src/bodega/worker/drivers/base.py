"""The driver protocol: how the worker's state machines touch a host.

Modelled on Nomad's task driver: a core every driver implements (prepare,
recover, start, wait, stop, destroy, inspect) and optional capabilities a
driver declares in ``capabilities`` (task control, launcher parking, log
housekeeping, suspend); the worker never probes for a method. Every method
is idempotent, because the worker may crash at any instant and repeat the
step it was in: ``start`` for a (machine, instance, start_seq) that is
already running returns the running task's handle instead of starting a
second one, ``stop`` of an exited task returns at once, ``destroy`` of a
destroyed machine does nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from bodega.model.console import TerminalSize
from bodega.model.machine import ExitStatus, names_registry
from bodega.model.machine_answers import ExecAnswer, ListenSocket, ProcessStat
from bodega.model.machine_config import MachineConfig

# A run's handle is kept in the machine's row, which the pure core reads: it is defined there.
from bodega.worker.core.guest_files import GuestFile
from bodega.worker.core.records import TaskHandle as TaskHandle


@dataclass(frozen=True)
class Mount:
    host_path: Path
    guest_path: str


# Where a machine finds its resolver: the private network binds its resolv.conf there.
RESOLV_CONF = "/etc/resolv.conf"


@dataclass(frozen=True)
class TaskSpec:
    """Everything a driver needs to run one start of one machine version."""

    machine_id: str
    instance_id: str
    start_seq: int  # rises on every start of the machine; names this run's files
    app: str
    image: str
    argv: list[str]
    env: dict[str, str]
    cpus: int
    cpu_kind: str
    memory_mb: int
    machine_dir: Path  # the machine's own directory on the worker, kept until destroy
    netns: str | None = None  # network namespace to run in, None for the host's
    mounts: tuple[Mount, ...] = ()
    user: tuple[int, int] | None = None  # (uid, gid) to run as; None keeps the worker's
    # init.entrypoint and init.cmd as given (None: not given), for an image to fill in
    entrypoint: list[str] | None = None
    cmd: list[str] | None = None
    isolation: str = "container"  # guest.isolation: the oci driver runs a sandbox with runsc
    # init.swap_size_mb: a vm's swap disk; the swap a container's or a process's cgroup may
    # use beside its memory (0: none)
    swap_mb: int = 0
    # config.files with their bytes (secrets resolved), written into the root at this start;
    # filled in for a spawn only (``ops/effects.py``), never kept.
    files: tuple[GuestFile, ...] = ()
    # Readied by this driver's ``prepare`` a moment ago, in this process (a create's launch):
    # a driver whose start prepares too may skip that.
    prepared: bool = False


@dataclass(frozen=True)
class ExecResult:
    exit_code: int
    stdout: str
    stderr: str
    exit_signal: int | None = None

    def answer(self) -> ExecAnswer:
        return ExecAnswer(exit_code=self.exit_code, stdout=self.stdout, stderr=self.stderr,
                          exit_signal=self.exit_signal)


@dataclass(frozen=True)
class ConsoleCommand:
    """How to start a console's program where the machine's program runs: the worker starts
    ``argv`` on a pseudo-terminal of its own (``worker/ops/terminal.py``)."""

    argv: list[str]
    env: dict[str, str] | None = None  # None: the worker's
    cwd: Path | None = None
    # Where the program's pid is written, when it runs on a terminal of its own that its
    # runtime made (an oci exec's, in the container) and copies the worker's to: that one
    # is resized too, as a runtime may not pass a resize on.
    pid_file: Path | None = None


class ConsoleSession(Protocol):
    """A console's program, started: its terminal's bytes both ways, its size, its end
    (``worker/ops/terminal.py``'s ``Terminal``, a VM's ``VmConsole``)."""

    async def read(self) -> bytes:
        """What the program printed next; b"" once nothing more will come."""

    async def write(self, data: bytes) -> None:
        """Type ``data``."""

    def resize(self, size: TerminalSize) -> None:
        """The terminal's new size (the program in the foreground gets SIGWINCH)."""

    async def exit_code(self) -> int:
        """Wait for the program to end: its exit code, as a shell says it."""

    async def close(self) -> None:
        """Hang the terminal up and wait for the program's end (bounded)."""


@dataclass(frozen=True)
class GuestConsole:
    """A console the machine's guest runs on a terminal of its own kernel (a vm's init),
    where the worker's pseudo-terminal cannot reach: ``start`` opens it at its first size."""

    start: Callable[[TerminalSize], Awaitable[ConsoleSession]]


@dataclass(frozen=True)
class ProcessInfo:
    pid: int
    command: str
    cpu: int  # jiffies used (utime + stime)
    rss: int  # bytes
    stime: int
    rtime: int
    directory: str
    listen_sockets: list[dict[str, str]] = field(default_factory=list)

    def answer(self) -> ProcessStat:
        return ProcessStat(pid=self.pid, command=self.command, cpu=self.cpu, rss=self.rss,
                           stime=self.stime, rtime=self.rtime, directory=self.directory,
                           listen_sockets=[ListenSocket.model_validate(s)
                                           for s in self.listen_sockets])


class DriverError(Exception):
    """A driver could not do what was asked; the message says why, for the machine's events."""


class TaskGone(DriverError):
    """The task has no running program to reach into (it has ended, or not yet begun)."""


class Busy(DriverError):
    """What was asked is held by another caller (a VM's one console); asking again once it
    is let go may work."""


class NoAnswer(DriverError):
    """The task's guest did not answer in time (a VM still booting, or its init busy with
    an earlier exec); asking again later may work."""


class MemoryBusy(DriverError):
    """The kernel could not reclaim a machine's memory down to a lower limit."""


@dataclass(frozen=True)
class MemoryUse:
    limit_bytes: int  # 0: no limit
    usage_bytes: int


class MemoryControl(Protocol):
    """A running machine's memory limit, set live, and a reclaim (``process/memory.py``)."""

    def use(self, machine_id: str) -> MemoryUse | None:
        """Its limit and use; None when it has nothing running to measure."""

    def set_limit(self, machine_id: str, limit_mb: int) -> None:
        """Set the limit now; MemoryBusy when the kernel cannot meet a lower one."""

    def reclaim(self, machine_id: str, amount_mb: int | None) -> int:
        """Reclaim up to ``amount_mb`` (None: all the kernel can); the bytes reclaimed."""


class TaskControl(Protocol):
    """Reaching into a running task: signals, commands, its process list."""

    async def signal(self, handle: TaskHandle, signal: int) -> None:
        """Deliver a signal to the task's processes; no-op if it has exited."""

    async def exec(
        self, handle: TaskHandle, spec: TaskSpec, argv: list[str], timeout: float,
        stdin: bytes | None,
    ) -> ExecResult:
        """Run a command where the running task's program runs (its namespaces, cgroups,
        user, directory, env); TaskGone when it is not running."""

    def console(self, handle: TaskHandle, spec: TaskSpec, argv: list[str]
                ) -> AbstractAsyncContextManager[ConsoleCommand | GuestConsole]:
        """The command that starts ``argv`` (empty: the machine's shell) where ``exec``
        would, valid while the context is held (a guest's own console, for a machine behind
        a kernel of its own); TaskGone when it is not running, Busy when it takes one
        console at a time and has one."""

    async def ps(self, handle: TaskHandle) -> list[ProcessInfo]:
        """The task's processes."""


class LauncherParking(Protocol):
    """Launchers kept waiting in network namespaces, so a start there only has to exec."""

    def park(self, netns: str, home: Path | None = None) -> None:
        """Keep a launcher waiting in ``netns`` (idempotent); ``home``: the directory of the
        machine at rest there, bound ahead where its program will start."""

    def release(self, netns: str) -> None:
        """End the launcher waiting in ``netns``, if any (its namespace is going)."""

    def waiting(self, netns: str) -> bool:
        """A launcher in ``netns`` is ready for a start (it has joined its cgroups)."""

    def holds(self, netns: str, home: Path | None = None) -> bool:
        """A launcher was parked in ``netns`` with ``home`` bound (None: none), and no start
        has taken it since (what this process remembers, no system call: whether it still
        lives is ``park``'s check)."""

    async def clear(self) -> None:
        """Until parking can make a cgroup without waiting on the kernel (``warmup.py``)."""

    def close(self) -> None:
        """End every parked launcher (the worker is exiting)."""

    def reap(self) -> None:
        """End launchers an earlier worker process left parked."""


class LogHousekeeping(Protocol):
    async def run(self, machines_dir: Path) -> None:
        """Keep the machines' log files bounded, until cancelled."""


class ImageCache(Protocol):
    def held(self) -> list[str]:
        """Images held, most recently used first: each digest, then the references to it."""

    def disk_gb(self) -> int:
        """Disk the cache takes, in whole GB rounded up: it counts against the worker's."""


class Suspend(Protocol):
    async def suspend(self, handle: TaskHandle) -> None: ...

    async def resume(self, handle: TaskHandle) -> TaskHandle:
        """Let the suspended run go on; its handle from now on: ``handle`` where the
        suspend kept its process (frozen), a new one where it ended it (a VM's)."""


class StartWarmup(Protocol):
    """Readies the host for a start that is on its way (``process/warmup.py``)."""

    def start_coming(self, machine_id: str, config: MachineConfig) -> bool:
        """Machine ``machine_id`` of ``config`` starts in a few milliseconds; never blocks.
        True if it readied something for it that ``start_called_off`` undoes."""

    def start_called_off(self, machine_id: str) -> None:
        """The start announced for ``machine_id`` will not come (its create was refused):
        undo what was readied for it; never blocks."""

    @property
    def warmup_moves(self) -> int:
        """The moves made so far to ready the host (the worker's metrics)."""


@dataclass(frozen=True)
class Capabilities:
    """What a driver can do beyond the core protocol; None: it cannot."""

    needs_command: bool = False  # it runs the config's command: a config needs one
    # It runs config.image when that names a registry (no command needed) and caches images.
    images: ImageCache | None = None
    own_netns: bool = False  # it can run each machine in its own network namespace
    control: TaskControl | None = None
    parking: LauncherParking | None = None
    logs: LogHousekeeping | None = None
    suspend: Suspend | None = None
    memory: MemoryControl | None = None
    warmup: StartWarmup | None = None
    # False: ``prepare`` does nothing on the host (no directories, no image), so the
    # runner joins the prepare step to the next one in a single commit.
    prepares: bool = True
    # What may stand between a machine and the host's kernel here (``guest.isolation``):
    # those the driver ran at its start (``oci/core/isolations.py``).
    isolations: tuple[str, ...] = ("container",)
    vm_accel: str = ""  # how a vm runs here: kvm, or tcg (qemu's emulation); "": no vm


class Driver(Protocol):
    """The core every driver implements; the rest is declared in ``capabilities``."""

    name: str
    capabilities: Capabilities

    async def prepare(self, spec: TaskSpec) -> None:
        """Make the machine runnable: directories, image, rootfs. Idempotent."""

    async def start(self, spec: TaskSpec) -> TaskHandle:
        """Start the task, or return the handle of the one already started for this start_seq."""

    async def recover(self, handle: TaskHandle) -> bool:
        """Re-attach to a task started before a restart; True if it is still running."""

    async def wait(self, handle: TaskHandle) -> ExitStatus:
        """Return once the task has exited, with how it ended."""

    async def stop(self, handle: TaskHandle, signal: int, timeout: float) -> None:
        """Send ``signal``; after ``timeout`` seconds send SIGKILL. Returns once it has exited."""

    async def inspect(self, handle: TaskHandle) -> bool:
        """True while the task runs."""

    async def destroy(self, machine_id: str, machine_dir: Path) -> None:
        """Kill anything left and remove every trace of the machine. Idempotent."""


def needs_command(capabilities: Capabilities, config: MachineConfig) -> bool:
    """Whether a config must give a command: an image the driver runs brings its own."""
    if not capabilities.needs_command:
        return False
    return not (capabilities.images is not None and names_registry(config.image))
