"""The oci driver's vm machines: what a boot needs on the host, and reaching the guest.

A vm machine is an image machine like the others to the oci driver (pulled, run by
the process driver's wrapper in its cgroups, watched and re-adopted by its pid and
exit files); only its program differs: ``qemu.RUN`` booting the image's root on the
machine's disks (``disks.py``) with bodega's kernel and init (``initramfs.py``), in
the machine's network namespace. Signals go to the init over the VM's second serial
port (``signal_line.py``), except SIGKILL, which ends qemu itself, as a stop past its
timeout does. An exec goes to the init over its exec line (``guest_exec.py``), woken by
a line on the signal line; a console runs on the guest's own terminal, a virtio
console (``guest_console.py``), one at a time. The run's sockets live in
``qemu.CONTROL_DIR`` under the machine's id: the machine's own directory may be too deep
for a Unix socket's path.
"""

from __future__ import annotations

import contextlib
import logging
import signal as signals
from collections.abc import AsyncIterator, Awaitable
from dataclasses import replace
from pathlib import Path

from bodega.model.capacity import VM_OVERHEAD_MB
from bodega.model.console import TerminalSize
from bodega.runtime.commands import run_command
from bodega.worker.drivers.base import (
    Busy,
    ConsoleSession,
    DriverError,
    ExecResult,
    GuestConsole,
    TaskGone,
    TaskSpec,
)
from bodega.worker.drivers.oci.core.bundle import (
    BundleError,
    MachineCommand,
    command,
    environment,
    image_user,
)
from bodega.worker.drivers.oci.guest_files import FILES_WRITTEN, swap_written
from bodega.worker.drivers.process.launch import SHELL
from bodega.worker.drivers.vm import arrivals
from bodega.worker.drivers.vm.arrivals import arrival_of, blank_disk
from bodega.worker.drivers.vm.core.config import (
    STATUS_BYTES,
    GuestConfig,
    GuestNetwork,
    config_disk,
    guest_network,
)
from bodega.worker.drivers.vm.core.console_marks import ConsoleRequest
from bodega.worker.drivers.vm.core.qemu import (
    CONTROL_DIR,
    MIN_MEMORY_MB,
    RUN,
    TAP,
    Share,
    VmLaunch,
    argv,
    console_socket,
    control_socket,
    exec_socket,
    launch_of,
    launch_record,
    qmp_socket,
    run_args,
    share_socket,
)
from bodega.worker.drivers.vm.disks import SWAP_DISK, RootDisks, machine_disk, swap_disk
from bodega.worker.drivers.vm.guest_console import VmConsole
from bodega.worker.drivers.vm.guest_exec import ExecRequest, GuestExec
from bodega.worker.drivers.vm.initramfs import Kernel
from bodega.worker.drivers.vm.signal_line import Offer, SignalLine
from bodega.worker.images.core.manifest import ImageConfig

log = logging.getLogger("bodega.worker.vm")
RESOLV_CONF = "/etc/resolv.conf"
LAUNCH = "launch.json"  # in the machine's vm directory: its last boot's ``VmLaunch``


class VmMachines:
    def __init__(self, kernel: Kernel, initramfs: Path, accel: str, tsc_khz: int) -> None:
        self.kernel = kernel
        self.initramfs = initramfs
        self.accel = accel  # kvm or tcg: what the worker's probe VM booted with
        self.tsc_khz = tsc_khz
        self.disks = RootDisks()
        self.execs = GuestExec()
        self.signal_line = SignalLine()
        self.consoles: set[str] = set()  # the machines with a console open: one each

    @staticmethod
    def directory(machine_dir: Path) -> Path:
        return machine_dir / "vm"

    @staticmethod
    def memory_mb(guest_mb: int) -> int:
        """The machine's cgroup limit: the guest's memory and qemu's own beside it."""
        return guest_mb + VM_OVERHEAD_MB

    @staticmethod
    def guest_mb(spec: TaskSpec) -> int:
        """The guest's memory: the machine's, as its host's ledger counts it and its cgroup
        allows it (``capacity.Ask``), less what qemu itself takes beside the guest."""
        return spec.memory_mb - VM_OVERHEAD_MB

    async def prepare(self, spec: TaskSpec, rootfs: Path) -> None:
        directory = self.directory(spec.machine_dir)
        directory.mkdir(parents=True, exist_ok=True)
        base = await self.disks.base(rootfs)  # its next cold start's, if a live move's
        arrival = arrival_of(spec.machine_dir)
        if arrival is not None:  # the disk comes from the source (``live.py``)
            await blank_disk(directory / "root.qcow2", arrival.disk_bytes)
            return
        await machine_disk(base, directory / "root.qcow2")

    async def program(self, spec: TaskSpec, image: ImageConfig, rootfs: Path) -> list[str]:
        """The wrapper's program for this start: ``qemu.RUN`` and qemu's argv, with the
        machine's config disk written, its status disk cleared and the launch kept for
        its resumes (``snapshots.py``)."""
        if self.guest_mb(spec) < MIN_MEMORY_MB:
            raise DriverError(f"a vm machine needs {MIN_MEMORY_MB} MB at least for its "
                              f"kernel, not {self.guest_mb(spec)}")
        if spec.netns is None:
            raise DriverError("a vm machine needs a network namespace of its own")
        resolv = [m for m in spec.mounts if m.guest_path == RESOLV_CONF]
        volumes = [m for m in spec.mounts if m.guest_path != RESOLV_CONF]
        shares = tuple(Share(f"vol{i}", share_socket(spec.machine_id, f"vol{i}"), m.host_path)
                       for i, m in enumerate(volumes))
        for share in shares:
            if not share.source.is_dir():
                raise DriverError(f"a vm machine's volume is a directory: {share.source} is not")

        try:
            config = GuestConfig(
                hostname=spec.machine_id,
                argv=command(image, MachineCommand(spec.argv, spec.entrypoint, spec.cmd)),
                env=dict(item.partition("=")[::2] for item in environment(image, spec.env)),
                network=await namespace_network(spec.netns),
                user=image_user(image.config.user, rootfs),
                workdir=image.config.working_dir or "/",
                resolv_conf=resolv[0].host_path.read_text() if resolv else "",
                volumes=[(share.tag, m.guest_path)
                         for share, m in zip(shares, volumes, strict=True)],
                swap=spec.swap_mb > 0,
                files=spec.files,
                dropped=swap_written(self.directory(spec.machine_dir) / FILES_WRITTEN,
                                     spec.files))
            disk = config_disk(config)
        except (BundleError, OSError, ValueError) as exc:
            raise DriverError(str(exc)) from exc
        directory = self.directory(spec.machine_dir)
        (directory / "config.img").write_bytes(disk)
        (directory / "status.img").write_bytes(b"\0" * STATUS_BYTES)
        swap = swap_disk(directory / SWAP_DISK, spec.swap_mb)
        CONTROL_DIR.mkdir(parents=True, exist_ok=True)
        arrival = arrival_of(spec.machine_dir)
        mac = config.network.mac if arrival is None else arrival.mac
        if arrival is not None:  # the guest keeps its MAC: the namespace's eth0 takes it
            done = await run_command("ip", "-n", spec.netns, "link", "set", "dev", "eth0",
                                     "address", mac)
            if done.returncode != 0:
                raise DriverError(f"the VM's MAC: {done.stderr.decode(errors='replace')}")
        launch = VmLaunch(
            vmlinuz=self.kernel.vmlinuz, initramfs=self.initramfs, cpus=spec.cpus,
            memory_mb=self.guest_mb(spec), accel=self.accel, root=directory / "root.qcow2",
            config=directory / "config.img", status=directory / "status.img", swap=swap,
            mac=mac, control=control_socket(spec.machine_id),
            qmp=qmp_socket(spec.machine_id), exec_line=exec_socket(spec.machine_id),
            console_line=console_socket(spec.machine_id),
            tsc_khz=self.tsc_khz, shares=shares, init_answers_signals=True)
        keep_launch(directory, launch)
        if arrival is not None:  # waits for the source's state (``live.py``)
            return wrapper_program(replace(launch, incoming=True))
        return wrapper_program(launch)

    async def signal(self, machine_id: str, signal: int, machine_dir: Path) -> bool:
        """Send ``signal`` to the VM's program through its init (``signal_line.py``); False
        if it was not (SIGKILL, which ends qemu; or no VM listening), and the run's process
        group is signalled."""
        if signal == signals.SIGKILL:
            return False
        line = control_socket(machine_id)
        if answers_signals(self.directory(machine_dir)):
            return await self.signal_line.send(machine_id, line, signal)
        return await self.signal_line.tell(machine_id, line, str(signal))

    async def exec(self, machine_id: str, argv: list[str], timeout: float,
                   stdin: bytes | None) -> ExecResult:
        return await self.execs.run(
            machine_id, exec_socket(machine_id), ExecRequest(argv, timeout, stdin),
            wake=lambda: self.signal_line.tell(machine_id, control_socket(machine_id), "exec",
                                           unless_busy=True))

    @contextlib.asynccontextmanager
    async def console(self, machine_id: str, machine_dir: Path, argv: list[str]
                      ) -> AsyncIterator[GuestConsole]:
        """The VM's console for ``argv`` (empty: the image's shell), one at a time: Busy
        while one is open (until its program has ended), TaskGone for a VM booted with no
        console port (by an older bodega; a restart gives it one)."""
        launch = kept_launch(self.directory(machine_dir))
        line = launch.console_line if launch is not None else None
        if line is None:
            raise TaskGone(f"machine {machine_id}'s VM was booted with no console port; "
                           "restart the machine to open one (machine exec reaches it)")
        if machine_id in self.consoles:
            raise Busy(f"machine {machine_id}'s VM has a console open already: it takes "
                       "one at a time")
        self.consoles.add(machine_id)

        def tell(verb: str, words: tuple[str, ...]) -> Awaitable[bool]:
            return self.signal_line.offer(machine_id, control_socket(machine_id),
                                          Offer(0, verb=verb, words=words))

        async def start(size: TerminalSize) -> ConsoleSession:
            return await VmConsole.open(machine_id, line, ConsoleRequest(argv, size), tell)

        try:
            yield GuestConsole(start)
        finally:
            self.consoles.discard(machine_id)

    async def unwire(self, netns: str) -> None:
        """Undo ``qemu.RUN``'s tap and redirect, where a killed run left them: the namespace
        may run a container next."""
        await run_command("ip", "-n", netns, "link", "del", TAP, stdout=False)
        await run_command("tc", "-n", netns, "qdisc", "del", "dev", "eth0", "ingress",
                          stdout=False)

    @staticmethod
    def forget(machine_id: str, machine_dir: Path) -> None:
        """The run's sockets removed; a VM that moved live leaves the names to its target
        (``arrivals.set_aside``), where a worker of the same host may serve them."""
        sockets = arrivals.sockets(machine_id)
        if arrivals.is_set_aside(machine_dir):
            sockets = tuple(arrivals.aside(socket) for socket in sockets)
        for socket in (*sockets, *CONTROL_DIR.glob(f"{machine_id}.vol*")):
            socket.unlink(missing_ok=True)


def keep_launch(directory: Path, launch: VmLaunch) -> None:
    """``launch`` as the boot the machine's resumes run again (``LAUNCH``)."""
    kept = directory / LAUNCH
    kept.with_suffix(".tmp").write_bytes(launch_record(launch))
    kept.with_suffix(".tmp").rename(kept)


def kept_launch(directory: Path) -> VmLaunch | None:
    """The VM's last boot as ``keep_launch`` kept it; None if none was."""
    try:
        return launch_of((directory / LAUNCH).read_bytes())
    except (OSError, ValueError):
        return None


def answers_signals(directory: Path) -> bool:
    """The VM's init answers the signals it takes, as its boot's kept launch says; one
    with none kept was booted before bodega kept them, by an init that does not."""
    launch = kept_launch(directory)
    return launch is not None and launch.init_answers_signals


def wrapper_program(launch: VmLaunch) -> list[str]:
    """``qemu.RUN`` with the launch's status disk and qemu's argv: what the wrapper runs."""
    return [SHELL, "-c", RUN, "bodega-vm", str(launch.status), *run_args(launch.shares),
            *argv(launch)]


async def namespace_network(netns: str) -> GuestNetwork:
    """The addresses, MAC and gateways of ``netns``'s ``eth0`` (``config.guest_network``)."""
    outputs = []
    for args in (("addr", "show", "dev", "eth0"), ("route", "show", "default"),
                 ("-6", "route", "show", "default")):
        done = await run_command("ip", "-n", netns, "-j", *args)
        outputs.append(done.stdout.decode())
    return guest_network(*outputs)
