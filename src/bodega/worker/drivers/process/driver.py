"""The process driver: a machine is a host process in its own session.

The driver's core (``Driver``); its task control is in ``control.py``. See
``launch.py`` for the wrapper that makes a run's pid and exit status
durable. This module spawns it, watches it with a pidfd (which works for our
own children and for processes re-adopted after a worker restart alike),
signals its process group, and cleans up. Identity checks guard against pid
reuse: a pid is only ours if ``/proc/<pid>/cmdline`` names this run's pidfile
and its start time matches the one recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal as signals
import subprocess
import time
from pathlib import Path

from bodega.model.machine import ExitStatus
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
    RunFiles,
    home_of,
    parse_exit_file,
    wrapper_argv,
)
from bodega.worker.drivers.process.logfiles import LogJanitor, log_path
from bodega.worker.drivers.process.parking import Parking
from bodega.worker.drivers.process.procfs import (
    is_ours,
    pids_with_argument,
    read_pid,
    start_time,
    until_gone,
    until_program_runs,
)

log = logging.getLogger("bodega.worker.process")

CGROUP_EMPTY_TIMEOUT = 10.0  # seconds a destroy waits for its cgroups to empty


class ProcessDriver:
    name = "process"

    def __init__(self, cgroups: Cgroups | None, log_max_bytes: int = 1 << 20,
                 park_dir: Path | None = None) -> None:
        self.cgroups = cgroups
        # Launchers wait in wired namespaces only where there are cgroups to save time on.
        self.parking = Parking(park_dir, cgroups) if cgroups and park_dir else None
        self.janitor = LogJanitor(log_max_bytes)
        self.control = ProcessControl(self)
        freezer = CgroupFreezer(cgroups) if cgroups and CgroupFreezer.available(cgroups) else None
        self.capabilities = Capabilities(needs_command=True, own_netns=True,
                                         control=self.control, parking=self.parking,
                                         logs=self.janitor, suspend=freezer)
        self._children: dict[int, subprocess.Popen[bytes]] = {}
        self._handles: dict[tuple[str, str, int], TaskHandle] = {}
        self._exits: dict[tuple[str, str, int], asyncio.Future[ExitStatus]] = {}

    # -- prepare and start ------------------------------------------------------------
    async def prepare(self, spec: TaskSpec) -> None:
        root = spec.machine_dir / "root"
        for path in (root, spec.machine_dir / "logs", spec.machine_dir / "run"):
            path.mkdir(parents=True, exist_ok=True)
        if spec.user is not None:
            os.chown(root, *spec.user)
            HOME_MOUNT.mkdir(parents=True, exist_ok=True)
        self._check_executable(spec)

    def _check_executable(self, spec: TaskSpec) -> None:
        if not spec.argv:
            raise DriverError("no command to run: set config.init.exec")
        program = spec.argv[0]
        if "/" in program:
            path = Path(program)
            if not path.is_absolute():
                path = spec.machine_dir / "root" / path
            if not (path.is_file() and os.access(path, os.X_OK)):
                raise DriverError(f"exec: {program}: no such executable file")
        elif shutil.which(program, path=spec.env.get("PATH")) is None:
            raise DriverError(f"exec: {program}: not found in PATH {spec.env.get('PATH', '')}")

    async def start(self, spec: TaskSpec) -> TaskHandle:
        key = (spec.machine_id, spec.instance_id, spec.start_seq)
        started = self._handles.get(key)
        if started is not None:
            return started  # this process already started this run
        files = RunFiles.for_run(spec.machine_dir, spec.instance_id, spec.start_seq)
        if files.spawnfile.exists():
            earlier = self._find_run(spec, files)
            if earlier is not None:
                return earlier
        await self.prepare(spec)
        self._forget_ended(spec.machine_id)
        files.exitfile.unlink(missing_ok=True)
        memory_kib = None if self.cgroups else spec.memory_mb * 1024
        if self.parking is not None:
            files.spawnfile.touch()
            parked = self.parking.take(spec, files, memory_kib)
            if parked is not None:
                assert self.cgroups is not None
                self._children[parked.pid] = parked
                log.info("%s: started pid %d (%s) from a parked launcher", spec.machine_id,
                         parked.pid, spec.argv[0])
                return self._handle(spec, files, parked.pid,
                                    self.cgroups.oom_kills(spec.machine_id))
        oom_base = 0
        procs: list[Path] = []
        if self.cgroups is not None:
            self.cgroups.create(spec.machine_id, spec.memory_mb, spec.cpus)
            procs = self.cgroups.procs_files(spec.machine_id)
            oom_base = self.cgroups.oom_kills(spec.machine_id)
        argv = wrapper_argv(
            spec.argv, files, cgroup_procs=procs, user=spec.user, memory_kib=memory_kib,
            mounts=[(m.host_path, m.guest_path) for m in spec.mounts], netns=spec.netns,
            home=home_of(spec),
        )
        logfile = log_path(spec.machine_dir)
        files.spawnfile.touch()
        fd = os.open(logfile, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640)
        try:
            # A plain fork-exec (well under a millisecond), not an asyncio subprocess: the
            # driver watches the child itself with a pidfd, the same way it watches runs it
            # re-adopts after a restart, so asyncio's child watcher must not reap it.
            popen = subprocess.Popen(  # noqa: ASYNC220
                argv, stdin=subprocess.DEVNULL, stdout=fd, stderr=fd, env=spec.env,
                cwd=spec.machine_dir / "root", start_new_session=True, close_fds=True,
            )
        except OSError as exc:
            files.spawnfile.unlink(missing_ok=True)
            raise DriverError(f"could not start the machine: {exc}") from exc
        finally:
            os.close(fd)
        self._children[popen.pid] = popen
        handle = self._handle(spec, files, popen.pid, oom_base)
        log.info("%s: started pid %d (%s)", spec.machine_id, popen.pid, spec.argv[0])
        return handle

    def _handle(self, spec: TaskSpec, files: RunFiles, pid: int | None,
                oom_base: int) -> TaskHandle:
        handle = TaskHandle(
            driver=self.name, machine_id=spec.machine_id, instance_id=spec.instance_id,
            start_seq=spec.start_seq, pid=pid, started_at=time.time(),
            data={"start_time": start_time(pid) if pid else None, "oom_base": oom_base,
                  "pidfile": str(files.pidfile), "exitfile": str(files.exitfile)},
        )
        self._handles[self._key(handle)] = handle
        self._watch(handle)
        return handle

    def _find_run(self, spec: TaskSpec, files: RunFiles) -> TaskHandle | None:
        """The run an earlier attempt spawned, alive or already ended; None if it never ran.

        The wrapper's command line names its pidfile from the moment it is
        spawned, so a wrapper that has not yet written its pid is still found.
        """
        pid = read_pid(files.pidfile)
        if pid is None or not is_ours(pid, files.pidfile, None):
            found = [p for p in pids_with_argument(str(files.pidfile))
                     if is_ours(p, files.pidfile, None)]
            pid = found[0] if found else None
        if pid is None and not (files.exitfile.exists() or files.pidfile.exists()):
            return None  # spawned nothing: the attempt died before the fork, or it never ran
        log.info("%s: run %d was already started%s; adopting it", spec.machine_id,
                 spec.start_seq, f" as pid {pid}" if pid else " and has ended")
        return self._handle(spec, files, pid, 0)

    # -- watching ---------------------------------------------------------------------
    def _forget_ended(self, machine_id: str) -> None:
        """Drop what is kept about a machine's runs that have ended (their files remain)."""
        for key in [k for k, f in self._exits.items() if k[0] == machine_id and f.done()]:
            del self._exits[key]
            self._handles.pop(key, None)

    def _key(self, handle: TaskHandle) -> tuple[str, str, int]:
        return (handle.machine_id, handle.instance_id, handle.start_seq)

    def alive(self, handle: TaskHandle) -> bool:
        if handle.pid is None:
            return False
        popen = self._children.get(handle.pid)
        if popen is not None:
            return popen.poll() is None
        return is_ours(handle.pid, Path(handle.data.get("pidfile", "")),
                        handle.data.get("start_time"))

    def _watch(self, handle: TaskHandle) -> asyncio.Future[ExitStatus]:
        key = self._key(handle)
        future = self._exits.get(key)
        if future is not None:
            return future
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._exits[key] = future
        if handle.pid is None or not self.alive(handle):
            future.set_result(self._exit_status(handle))
            return future
        try:
            pidfd = os.pidfd_open(handle.pid)
        except ProcessLookupError:
            future.set_result(self._exit_status(handle))
            return future

        def on_exit() -> None:
            loop.remove_reader(pidfd)
            os.close(pidfd)
            if not future.done():
                future.set_result(self._exit_status(handle))

        loop.add_reader(pidfd, on_exit)
        return future

    def _exit_status(self, handle: TaskHandle) -> ExitStatus:
        """How the run ended: the wrapper's exit file, else the wrapper's own status."""
        signal_number: int | None = None
        code: int | None = None
        popen = self._children.pop(handle.pid, None) if handle.pid else None
        if popen is not None:
            returncode = popen.wait()
            if returncode < 0:
                signal_number = -returncode
        exitfile = Path(handle.data.get("exitfile", ""))
        with contextlib.suppress(OSError):
            code = parse_exit_file(exitfile.read_text())
        if code is None and signal_number is None:
            signal_number = signals.SIGKILL  # the wrapper died with no record: killed
        if code is None:
            code = 128 + (signal_number or signals.SIGKILL)
        elif code > 128 and signal_number is None:
            signal_number = code - 128
        oom = False
        if self.cgroups is not None:
            oom = self.cgroups.oom_kills(handle.machine_id) > int(handle.data.get("oom_base", 0))
        return ExitStatus(exit_code=code, signal=signal_number, oom_killed=oom,
                          exited_at=time.time())

    async def recover(self, handle: TaskHandle) -> bool:
        alive = self.alive(handle)
        self._watch(handle)
        return alive

    async def wait(self, handle: TaskHandle) -> ExitStatus:
        return await asyncio.shield(self._watch(handle))

    async def inspect(self, handle: TaskHandle) -> bool:
        return self.alive(handle)

    # -- signals ----------------------------------------------------------------------
    async def signal(self, handle: TaskHandle, signal: int) -> None:
        if handle.pid is None or not self.alive(handle):
            return
        await until_program_runs(handle.pid)  # a wrapper about to fork would swallow it
        with contextlib.suppress(ProcessLookupError):
            os.killpg(handle.pid, signal)

    async def stop(self, handle: TaskHandle, signal: int, timeout: float) -> None:
        future = self._watch(handle)
        if future.done():
            return
        await self.signal(handle, signal)
        try:
            await asyncio.wait_for(asyncio.shield(future), timeout)
            return
        except TimeoutError:
            log.info("%s: still running %.1fs after signal %d; killing it",
                     handle.machine_id, timeout, signal)
        self._kill(handle)
        await asyncio.shield(future)

    def _kill(self, handle: TaskHandle) -> None:
        if handle.pid is not None and self.alive(handle):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(handle.pid, signals.SIGKILL)
        if self.cgroups is not None:
            self.cgroups.kill_all(handle.machine_id)

    # -- destroy ----------------------------------------------------------------------
    async def destroy(self, machine_id: str, machine_dir: Path) -> None:
        if self.cgroups is not None:
            self.cgroups.thaw(machine_id)  # a frozen process would wait for its SIGKILL
        run = machine_dir / "run"
        for pidfile in sorted(run.glob("*.pid")) if run.exists() else []:
            pid = read_pid(pidfile)
            if pid is not None and is_ours(pid, pidfile, None):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signals.SIGKILL)
                await until_gone(pid)
        if self.cgroups is not None:
            await self.cgroups.empty(machine_id, CGROUP_EMPTY_TIMEOUT)
        for popen in [p for p in self._children.values() if p.poll() is not None]:
            self._children.pop(popen.pid, None)
        self._forget_ended(machine_id)
        await asyncio.to_thread(shutil.rmtree, machine_dir, True)
