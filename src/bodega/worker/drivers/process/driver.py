"""The process driver: a machine is a host process in its own session.

The driver's core (``Driver``): it prepares a machine's directories, forks the
wrapper of ``launch.py`` (which makes a run's pid and exit status durable), or
hands the run to a launcher parked in the machine's namespace (``parking.py``),
and removes what is left at destroy. What it knows of each run (watching,
signals, stops, re-adoption) is kept by ``runs.py``; its task control is in
``control.py`` and its freezer in ``freezer.py``, each given only what it uses.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import subprocess
from pathlib import Path

from bodega.worker.drivers.base import (
    Capabilities,
    DriverError,
    TaskHandle,
    TaskSpec,
)
from bodega.worker.drivers.process.cgroups import Cgroups
from bodega.worker.drivers.process.control import ProcessControl
from bodega.worker.drivers.process.freezer import CgroupFreezer
from bodega.worker.drivers.process.launch import (
    HOME_MOUNT,
    MACHINE_DIRS,
    ROOT_ENV,
    RunFiles,
    bind_order,
    hand_over,
    handed_over,
    home_of,
    make_gate,
    memory_fd,
    program_step,
    wrapper_argv,
)
from bodega.worker.drivers.process.logfiles import LogJanitor, close_off, log_path
from bodega.worker.drivers.process.memory import CgroupMemory
from bodega.worker.drivers.process.parking import Parking
from bodega.worker.drivers.process.program import check_program
from bodega.worker.drivers.process.runs import Runs, RunsDriver
from bodega.worker.drivers.process.warmup import Warmup

log = logging.getLogger("bodega.worker.process")


class ProcessDriver(RunsDriver):
    name = "process"

    def __init__(self, cgroups: Cgroups | None, log_max_bytes: int = 1 << 20,
                 park_dir: Path | None = None, warmup: Warmup | None = None,
                 resolv_conf: Path | None = None, spare_homes: bool = False) -> None:
        self.cgroups = cgroups
        # The image driver's warm-up beside this one (``pair.py``), if any: this driver's
        # own cgroup work waits until that warm-up's move lets go of the kernel's mutex.
        self.warmup = warmup
        self.runs = Runs(self.name, cgroups, warmup)
        # Launchers wait in wired namespaces only where there are cgroups to save time on.
        # ``resolv_conf``: the private network's, which parked launchers bind ahead;
        # ``spare_homes``: machines run as their own users (``parking.py``).
        self.parking = (Parking(park_dir, cgroups, warmup, resolv_conf, spare_homes)
                        if cgroups and park_dir else None)
        self.janitor = LogJanitor(log_max_bytes)
        self.control = ProcessControl(self.runs, cgroups)
        freezer = CgroupFreezer(cgroups) if cgroups and CgroupFreezer.available(cgroups) else None
        self.capabilities = Capabilities(needs_command=True, own_netns=True,
                                         control=self.control, parking=self.parking,
                                         logs=self.janitor, suspend=freezer,
                                         memory=CgroupMemory(cgroups) if cgroups else None)

    # -- prepare and start ------------------------------------------------------------
    async def prepare(self, spec: TaskSpec) -> None:
        if self.parking is not None and spec.netns is not None and spec.user is not None:
            # A new machine takes the directory its namespace's launcher made and bound.
            self.parking.furnish(spec.netns, spec.machine_dir)
        for part in MACHINE_DIRS:
            (spec.machine_dir / part).mkdir(parents=True, exist_ok=True)
        root = spec.machine_dir / MACHINE_DIRS[0]
        if spec.user is not None:
            os.chown(root, *spec.user)
            HOME_MOUNT.mkdir(parents=True, exist_ok=True)
            for mount in spec.mounts:  # a volume fresh or last another machine's
                try:
                    if handed_over(mount.host_path, spec.user):
                        continue
                    if mount.host_path.is_dir():  # a volume: its tree is walked off the loop
                        await asyncio.to_thread(hand_over, mount.host_path, spec.user)
                    else:  # a file (the machine's resolv.conf): one chown, no thread to await
                        hand_over(mount.host_path, spec.user)
                except OSError as exc:
                    raise DriverError(f"could not hand {mount.host_path} to the machine's "
                                      f"user: {exc}") from exc
        check_program(spec)

    async def start(self, spec: TaskSpec) -> TaskHandle:
        started = self.runs.held(spec)
        if started is not None:
            return started  # this process already started this run
        files = RunFiles.for_run(spec.machine_dir, spec.instance_id, spec.start_seq)
        if files.spawnfile.exists():
            earlier = self.runs.earlier(spec, files)
            if earlier is not None:
                return earlier
        if not spec.prepared:
            await self.prepare(spec)
        self.runs.forget_ended(spec.machine_id)
        files.exitfile.unlink(missing_ok=True)
        close_off(spec.machine_dir)  # earlier runs' lines keep their times, not this run's
        mounts = bind_order(spec.mounts)
        memory_kib = None if self.cgroups else spec.memory_mb * 1024
        if self.warmup is not None:
            await self.warmup.clear()  # a parked launcher's cgroups are renamed, or new made
        if self.parking is not None:
            files.spawnfile.touch()
            parked = self.parking.take(spec, files, memory_kib, mounts)
            if parked is not None:
                assert self.cgroups is not None
                log.info("%s: started pid %d (%s) from a parked launcher", spec.machine_id,
                         parked.pid, spec.argv[0])
                return self.runs.spawned(spec, files, parked,
                                         self.cgroups.oom_kills(spec.machine_id))
        if mounts:
            make_gate(files)
        oom_base = 0
        procs: list[Path] = []
        if self.cgroups is not None:
            self.cgroups.create(spec.machine_id, spec.memory_mb, spec.cpus, spec.swap_mb)
            procs = self.cgroups.procs_files(spec.machine_id)
            oom_base = self.cgroups.oom_kills(spec.machine_id)
        argv = wrapper_argv(
            spec.argv, files, cgroup_procs=procs, user=spec.user, memory_kib=memory_kib,
            mounts=mounts, netns=spec.netns, home=home_of(spec),
        )
        logfile = log_path(spec.machine_dir)
        files.spawnfile.touch()
        fd = os.open(logfile, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640)
        step = memory_fd(program_step(spec.env))
        try:
            # A plain fork-exec (well under a millisecond), not an asyncio subprocess: the
            # driver watches the child itself with a pidfd, the same way it watches runs it
            # re-adopts after a restart, so asyncio's child watcher must not reap it. Root
            # runs it: it gets none of the machine's variables, which its stdin, the program's
            # step, exports as the machine's user.
            popen = subprocess.Popen(  # noqa: ASYNC220
                argv, stdin=step, stdout=fd, stderr=fd, env=dict(ROOT_ENV),
                cwd=spec.machine_dir / "root", start_new_session=True, close_fds=True,
            )
        except OSError as exc:
            files.spawnfile.unlink(missing_ok=True)
            raise DriverError(f"could not start the machine: {exc}") from exc
        finally:
            os.close(step)
            os.close(fd)
        handle = self.runs.spawned(spec, files, popen, oom_base)
        log.info("%s: started pid %d (%s)", spec.machine_id, popen.pid, spec.argv[0])
        return handle

    async def stop(self, handle: TaskHandle, signal: int, timeout: float) -> None:
        await self.runs.stop(handle, signal, timeout)

    async def destroy(self, machine_id: str, machine_dir: Path) -> None:
        await self.runs.end_all(machine_id, machine_dir)
        await asyncio.to_thread(shutil.rmtree, machine_dir, True)
