"""The oci driver: the process driver's frame (wrapper, pid files, cgroups, netns, logs,
re-adoption) around ``runc run`` of a bundle made from a pulled image.

It is composed of the process driver's parts rather than derived from it: the
wrapper's argv and run files (``process/launch.py``), the runs it starts
(``process/runs.py``), log housekeeping, and the runtime's command line
(``runc.py``), which its task control and freezer are given too.

A start runs the process driver's wrapper with ``runc run`` as its program,
in the foreground: runc stays the wrapper's child, forwards the signals sent
to the machine's process group to the container and exits with its status,
which the wrapper records as for any program. runc joins the machine's network
namespace by the path ``config.json`` names, so nothing else runs before it. The container joins the
machine's cgroups (``cgroupsPath``), so memory and cpu limits, OOM counts,
``ps`` and kill-all work unchanged; the wrapper itself stays outside them.

Each machine's root is an overlay: the image's shared, read-only base as the
lower layer, ``oci/upper`` of its own as the upper one; two machines of one
image share one base. Container ids are ``<machine>-<start_seq>``, one per
run, so a run killed with the worker never blocks the next.

A machine whose ``guest.isolation`` is ``sandbox`` runs the same bundle with runsc
(gVisor: a kernel in user space between the program and the host's). Three things
differ, each for a reason of runsc's: the wrapper enters the machine's network
namespace itself and the spec names none (runsc's own network stack cannot run here,
so the sandbox takes the namespace's as its host network); every runsc command runs in
that namespace (``runc.py``); and signals go through ``runsc kill``, since ``runsc run``
forwards none and dies of a SIGTERM sent to its process group (its sandbox with it).
The bundle's ``sandbox`` file names the namespace: a re-adopted run and an exec find
their runtime in it.

A machine whose ``guest.isolation`` is ``vm`` runs no runtime: the wrapper's program is
qemu booting the image's root with bodega's kernel and init (``vm/machines.py``), in the
machine's namespace, and its root is a disk, not an overlay. The bundle's ``vm`` file
names the namespace, as ``sandbox`` does, and tells a re-adopted run's signals and
suspends where to go. A vm's suspend ends its qemu (its state in a snapshot file), and
its resume goes on with the run in a new one (``respawn``, ``vm/snapshots.py``).

The module is long because it is one run's whole life on the host (its bundle or disks,
its spawn and a VM's respawn, its stop, its destroy) over the same run files, cgroups and
namespace: what could go elsewhere already has (``control.py``, ``isolations.py``,
``freezer.py``, the vm package).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import subprocess
from pathlib import Path

from bodega.model.machine_config import MachineConfig
from bodega.worker.drivers.base import Capabilities, DriverError, TaskHandle, TaskSpec
from bodega.worker.drivers.oci.control import OciControl
from bodega.worker.drivers.oci.core.bundle import (
    BundleError,
    MachineCommand,
    MemoryLimits,
    image_user,
    runtime_spec,
)
from bodega.worker.drivers.oci.freezer import RuncFreezer
from bodega.worker.drivers.oci.guest_files import FILES_WRITTEN, refresh_files
from bodega.worker.drivers.oci.mounts import mount_overlay, mounted, unmount
from bodega.worker.drivers.oci.runc import Runc
from bodega.worker.drivers.process.cgroups import Cgroups
from bodega.worker.drivers.process.launch import RunFiles, wrapper_argv
from bodega.worker.drivers.process.logfiles import LogJanitor, close_off, log_path
from bodega.worker.drivers.process.memory import CgroupMemory
from bodega.worker.drivers.process.runs import Runs, RunsDriver
from bodega.worker.drivers.process.warmup import Warmup
from bodega.worker.drivers.vm.machines import VmMachines
from bodega.worker.drivers.vm.snapshots import VmSuspend
from bodega.worker.images.core.eviction import to_evict
from bodega.worker.images.core.manifest import BadImage
from bodega.worker.images.core.reference import BadReference
from bodega.worker.images.puller import Puller
from bodega.worker.images.registry_client import RegistryError

log = logging.getLogger("bodega.worker.oci")
SANDBOX_MARKER = "sandbox"  # in the bundle: the run is runsc's, in the namespace it names
VM_MARKER = "vm"  # in the bundle: the run is a VM's, in the namespace it names


class OciDriver(RunsDriver):
    name = "oci"

    def __init__(self, cgroups: Cgroups | None, puller: Puller, machines_dir: Path,
                 state_root: Path, runtime: str = "runc", cache_budget_bytes: int = 10 << 30,
                 log_max_bytes: int = 1 << 20,
                 runtime_command: tuple[str, ...] | None = None,
                 sandbox: Runc | None = None, vm: VmMachines | None = None) -> None:
        self.cgroups = cgroups
        self.puller = puller
        self.machines_dir = machines_dir
        self.runc = Runc(runtime, state_root, runtime_command)
        self.sandbox = sandbox  # runsc, where it ran at the worker's start; else None
        self.vm = vm  # qemu and bodega's kernel, where a probe VM booted at its start
        self.warmup = Warmup.of(cgroups)
        self.runs = Runs(self.name, cgroups, self.warmup)
        self.runs.signaller = self._signal_guest
        self.cache_budget_bytes = cache_budget_bytes
        self.janitor = LogJanitor(log_max_bytes)
        self.control = OciControl(self.runtime_of, self.runs, cgroups, vm)
        self.capabilities = Capabilities(needs_command=False, own_netns=True,
                                         control=self.control, logs=self.janitor,
                                         images=puller.store,
                                         suspend=VmSuspend(self, RuncFreezer(
                                             self.runtime_of, cgroups)),
                                         memory=CgroupMemory(cgroups) if cgroups else None,
                                         warmup=self if self.warmup is not None else None,
                                         isolations=("container",
                                                     *(("sandbox",) if sandbox else ()),
                                                     *(("vm",) if vm else ())),
                                         vm_accel=vm.accel if vm else "")

    def runtime_of(self, machine_id: str) -> Runc:
        """The runtime of the machine's bundle: runsc in its namespace for a sandbox."""
        marker = self.bundle(self.machines_dir / machine_id) / SANDBOX_MARKER
        if self.sandbox is None or not marker.exists():
            return self.runc
        return self.sandbox.within(marker.read_text().strip() or None)

    def vm_of(self, machine_dir: Path) -> str | None:
        """The namespace of the machine's VM, if its bundle says it runs one; else None."""
        with contextlib.suppress(OSError):
            return (self.bundle(machine_dir) / VM_MARKER).read_text().strip()
        return None

    async def _signal_guest(self, handle: TaskHandle, signal: int) -> bool:
        """Send ``signal`` to a VM's program through its init, or a sandbox's with ``runsc
        kill``; False for a container (its process group is signalled), or a sandbox not
        made yet (nor is its program: the group's signal ends its ``runsc run`` before it
        starts anything)."""
        machine_dir = self.machines_dir / handle.machine_id
        if self.vm is not None and self.vm_of(machine_dir) is not None:
            return await self.vm.signal(handle.machine_id, signal, machine_dir)
        runtime = self.runtime_of(handle.machine_id)
        if runtime is self.runc:
            return False
        container = runtime.container_id(handle.machine_id, handle.start_seq)
        try:
            await runtime.run("kill", container, str(signal))
        except DriverError as exc:
            log.info("%s: runsc kill %d: %s", handle.machine_id, signal, exc)
            return False
        return True

    def start_coming(self, machine_id: str, config: MachineConfig) -> bool:
        """A start joins the machine's cgroups in a few milliseconds (the runtime's move):
        make them and pay the kernel's wait for the move now (``process/warmup.py``).
        True if it readied something a refused create should undo."""
        if self.warmup is None or self.warmup.off:
            return False
        cgroups = self.cgroups
        self.warmup.warm(None if cgroups is None else
                         lambda: cgroups.create(machine_id, memory_mb=None, cpus=None))
        return cgroups is not None

    def start_called_off(self, machine_id: str) -> None:
        """The start ``start_coming`` announced will not come (its create was refused):
        remove the cgroups made for it, after them (in the same thread)."""
        if self.warmup is not None and self.cgroups is not None:
            cgroups = self.cgroups

            def remove() -> None:
                cgroups.remove(machine_id)  # empty: nothing ever joined them

            self.warmup.warm(remove)

    @property
    def warmup_moves(self) -> int:
        return self.warmup.moves if self.warmup is not None else 0

    @staticmethod
    def bundle(machine_dir: Path) -> Path:
        return machine_dir / "oci"

    @staticmethod
    def image_of(machine_dir: Path) -> str | None:
        """The digest of the image the machine runs, once prepared (None before, and for a
        machine this driver does not run)."""
        try:
            return (OciDriver.bundle(machine_dir) / "image").read_text().strip() or None
        except OSError:
            return None

    # -- prepare: pull, overlay -----------------------------------------------------
    async def prepare(self, spec: TaskSpec) -> None:
        bundle = self.bundle(spec.machine_dir)
        for path in (spec.machine_dir / "logs", spec.machine_dir / "run", bundle / "upper",
                     bundle / "work", bundle / "rootfs"):
            path.mkdir(parents=True, exist_ok=True)
        unpacks = self.puller.stats.unpacks
        digest = self.cached(spec.image)
        if digest is None:
            try:
                digest = await self.puller.pull(spec.image)
            except (BadImage, BadReference, RegistryError) as exc:
                raise DriverError(f"image {spec.image}: {exc}") from exc
        marker = bundle / "image"
        if not marker.exists() or marker.read_text() != digest:
            marker.write_text(digest)
        store = self.puller.store
        if spec.isolation == "vm":
            if self.vm is None:
                raise DriverError("this worker offers no vm isolation")
            await self.vm.prepare(spec, store.rootfs(digest))
        elif not mounted(bundle / "rootfs"):
            mount_overlay(store.rootfs(digest), bundle / "upper", bundle / "work",
                          bundle / "rootfs")
        if self.puller.stats.unpacks != unpacks:  # the cache grew: trim it to its budget
            await asyncio.to_thread(self.evict)

    def cached(self, image: str) -> str | None:
        """The digest of ``image`` if the store already holds it complete, else None.

        A warm start's common case, answered here with a few stats and no thread
        hop or pull lock: on a busy worker each hop to a thread costs milliseconds.
        A base only appears complete once renamed into place, so this never sees a
        half-unpacked image.
        """
        try:
            ref = self.puller.reference(image)
        except BadReference:
            return None
        store = self.puller.store
        digest = store.resolved(ref)
        if digest is None or not store.complete(digest):
            return None
        store.touch(digest)
        return digest

    def images_in_use(self) -> set[str]:
        used = set()
        for marker in self.machines_dir.glob("*/oci/image"):
            with contextlib.suppress(OSError):
                used.add(marker.read_text().strip())
        return used

    def evict(self) -> list[str]:
        """Drop least recently used images no machine uses, down to the cache's budget."""
        store = self.puller.store
        evicted = to_evict(store.cached(), self.images_in_use(), self.cache_budget_bytes)
        for digest in evicted:
            log.info("evicting image %s (cache over %d bytes)", digest, self.cache_budget_bytes)
            store.remove(digest)
        return evicted

    def _write_config(self, spec: TaskSpec) -> None:
        bundle = self.bundle(spec.machine_dir)
        vm_marker = bundle / VM_MARKER
        if spec.isolation == "vm":
            if self.vm is None or spec.netns is None:
                raise DriverError("this worker runs no VM (none booted at its start, or its "
                                  "machines have no network namespace of their own)")
            vm_marker.write_text(spec.netns)
            (bundle / SANDBOX_MARKER).unlink(missing_ok=True)
            return
        vm_marker.unlink(missing_ok=True)  # an update may change the machine's isolation
        sandboxed = spec.isolation == "sandbox"
        if sandboxed and (self.sandbox is None or spec.netns is None):
            raise DriverError("this worker runs no sandbox (runsc did not run at its start, "
                              "or its machines have no network namespace of their own)")
        digest = (bundle / "image").read_text().strip()
        store = self.puller.store
        image = store.image_config(digest)
        rootfs = store.rootfs(digest)

        try:
            config = runtime_spec(
                image, MachineCommand(spec.argv, spec.entrypoint, spec.cmd), env=spec.env,
                rootfs=str(bundle / "rootfs"), hostname=spec.machine_id,
                cgroups_path=(f"/bodega/{self.cgroups.scope}/{spec.machine_id}"
                              if self.cgroups else None),
                # A sandbox's runsc runs in the namespace: the sandbox's spec names none.
                netns=f"/run/netns/{spec.netns}" if spec.netns and not sandboxed else None,
                user=image_user(image.config.user, rootfs),
                binds=[(str(m.host_path), m.guest_path) for m in spec.mounts],
                memory=MemoryLimits(spec.memory_mb, spec.swap_mb),
            )
        except BundleError as exc:
            raise DriverError(str(exc)) from exc
        tmp = bundle / "config.json.tmp"
        tmp.write_text(json.dumps(config))
        tmp.rename(bundle / "config.json")
        marker = bundle / SANDBOX_MARKER
        if sandboxed:
            marker.write_text(spec.netns or "")
        else:
            marker.unlink(missing_ok=True)  # an update may change the machine's isolation

    # -- start ------------------------------------------------------------------------
    async def start(self, spec: TaskSpec) -> TaskHandle:
        started = self.runs.held(spec)
        if started is not None:
            return started
        files = RunFiles.for_run(spec.machine_dir, spec.instance_id, spec.start_seq)
        if files.spawnfile.exists():
            earlier = self.runs.earlier(spec, files)
            if earlier is not None:
                return earlier
        if not spec.prepared:  # a create's launch: its prepare readied this spec a moment ago
            await self.prepare(spec)
        self._write_config(spec)
        bundle = self.bundle(spec.machine_dir)
        if spec.isolation != "vm" and (spec.files or (bundle / FILES_WRITTEN).exists()):
            await asyncio.to_thread(refresh_files, bundle / "rootfs", bundle / FILES_WRITTEN,
                                    spec.files)  # a vm's init writes them (vm/init.sh)
        await self._delete_containers(spec.machine_id)
        self.runs.forget_ended(spec.machine_id)
        files.exitfile.unlink(missing_ok=True)
        close_off(spec.machine_dir)  # earlier runs' lines keep their times, not this run's
        oom_base = 0
        if self.cgroups is not None:
            # A VM's memory counts qemu's own beside the guest's (``capacity.Ask``); its swap
            # is a disk of its own (``vm/disks.py``): qemu swaps nothing.
            memory_mb, swap_mb = spec.memory_mb, 0 if spec.isolation == "vm" else spec.swap_mb
            if self.warmup is not None and self.cgroups.made(spec.machine_id):
                self.cgroups.fit(spec.machine_id, memory_mb, spec.cpus, swap_mb)  # made ahead
            else:
                if self.warmup is not None:
                    await self.warmup.clear()  # making a cgroup takes the mutex a move holds
                self.cgroups.create(spec.machine_id, memory_mb, spec.cpus, swap_mb)
            oom_base = self.cgroups.oom_kills(spec.machine_id)
        runtime = self.runtime_of(spec.machine_id)
        sandboxed = runtime is not self.runc
        if sandboxed:
            runtime = runtime.within(None)  # the wrapper is in the namespace already
        if self.vm is not None and spec.isolation == "vm":
            store = self.puller.store
            digest = (self.bundle(spec.machine_dir) / "image").read_text().strip()
            program = await self.vm.program(spec, store.image_config(digest),
                                            store.rootfs(digest))
            sandboxed = True  # the wrapper enters the namespace, where qemu.RUN wires it
            runtime_name = "qemu"
            # No runtime puts qemu in the machine's cgroups: the wrapper joins them first.
            procs = self.cgroups.procs_files(spec.machine_id) if self.cgroups else []
        else:
            program = runtime.argv("run", "--bundle", str(self.bundle(spec.machine_dir)),
                                   runtime.container_id(spec.machine_id, spec.start_seq))
            runtime_name = runtime.runtime
            procs = []  # the runtime moves the container into them (cgroupsPath)
        # runc joins the machine's network namespace itself (config.json names it), so no
        # nsenter runs before it: one fork and exec fewer on every start. runsc cannot.
        popen = self._spawn(spec.machine_dir, files, program, procs,
                            spec.netns if sandboxed else None)
        log.info("%s: started pid %d (%s, image %s)", spec.machine_id, popen.pid,
                 runtime_name, spec.image)
        return self.runs.spawned(spec, files, popen, oom_base)

    async def respawn(self, handle: TaskHandle, program: list[str], memory_mb: int,
                      cpus: int) -> TaskHandle:
        """``handle``'s run, ended, going on as ``program`` in the same run's files, cgroups
        (made again at ``memory_mb`` and ``cpus`` if they went) and VM's namespace: a VM
        resumed from its snapshot (``vm/snapshots.py``)."""
        machine_dir = self.machines_dir / handle.machine_id
        files = RunFiles.for_run(machine_dir, handle.instance_id, handle.start_seq)
        self.runs.forget_ended(handle.machine_id)
        files.exitfile.unlink(missing_ok=True)  # the ended process's
        oom_base, procs = 0, []
        if self.cgroups is not None:
            if not self.cgroups.made(handle.machine_id):
                if self.warmup is not None:
                    await self.warmup.clear()
                self.cgroups.create(handle.machine_id, memory_mb, cpus)
            oom_base = self.cgroups.oom_kills(handle.machine_id)
            procs = self.cgroups.procs_files(handle.machine_id)
        popen = self._spawn(machine_dir, files, program, procs, self.vm_of(machine_dir))
        log.info("%s: run %d goes on as pid %d", handle.machine_id, handle.start_seq, popen.pid)
        return self.runs.respawned(handle, popen, oom_base)

    @staticmethod
    def _spawn(machine_dir: Path, files: RunFiles, program: list[str], procs: list[Path],
               netns: str | None) -> subprocess.Popen[bytes]:
        """The wrapper running ``program`` (in ``netns`` if given: else the runtime joins
        the machine's namespace itself), its output to the machine's log."""
        argv = wrapper_argv(program, files, cgroup_procs=procs, user=None, memory_kib=None,
                            mounts=[], netns=netns, environment=False)
        fd = os.open(log_path(machine_dir), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640)
        files.spawnfile.touch()
        try:
            # Watched with a pidfd, as in the process driver.
            return subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=fd, stderr=fd,
                env={"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")},
                cwd=machine_dir, start_new_session=True, close_fds=True,
            )
        except OSError as exc:
            files.spawnfile.unlink(missing_ok=True)
            raise DriverError(f"could not start the machine: {exc}") from exc
        finally:
            os.close(fd)

    # -- stop and destroy -------------------------------------------------------------
    async def stop(self, handle: TaskHandle, signal: int, timeout: float) -> None:
        """Stop the run, then unmount its root: a stopped machine holds no mount on the host
        (its upper layer keeps what it wrote; the next start mounts it again)."""
        await self.runs.stop(handle, signal, timeout)
        pidfile = handle.data.get("pidfile")
        if pidfile:
            machine_dir = Path(pidfile).parent.parent
            netns = self.vm_of(machine_dir)
            if self.vm is not None and netns:
                await self.vm.unwire(netns)
            await self._unmount(machine_dir)

    async def _unmount(self, machine_dir: Path) -> None:
        rootfs = self.bundle(machine_dir) / "rootfs"
        if mounted(rootfs):
            unmount(rootfs)

    async def _delete_containers(self, machine_id: str) -> None:
        """Forget runtime state of this machine's earlier runs (killed with a worker), under
        either runtime: an update may have changed the machine's isolation."""
        runtimes = [self.runc]
        if self.sandbox is not None:
            runtime = self.runtime_of(machine_id)
            runtimes.append(runtime if runtime is not self.runc else self.sandbox)
        for runtime in runtimes:
            for container in runtime.containers(machine_id):
                await runtime.run("delete", "--force", container, check=False)

    async def destroy(self, machine_id: str, machine_dir: Path) -> None:
        netns = self.vm_of(machine_dir)
        await self._delete_containers(machine_id)
        await self._unmount(machine_dir)
        await self.runs.end_all(machine_id, machine_dir)
        if self.vm is not None and netns:
            await self.vm.unwire(netns)  # after its qemu is gone: a kill skips qemu.RUN's
        VmMachines.forget(machine_id, machine_dir)
        await asyncio.to_thread(shutil.rmtree, machine_dir, True)

