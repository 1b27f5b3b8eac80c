"""The runs a driver started or adopted on this host: handles, exits, signals, the end of each.

A run is one start of one machine version, a wrapper (``launch.py``) in a
session of its own that records its pid and its program's exit in the run's
files. Both the process and the oci driver hold a ``Runs``: it keeps what is
known about each run in memory (its handle, the ``Popen`` of a child, a future
of its exit), watches every run with a pidfd (which works for the worker's own
children and for runs re-adopted after a restart alike), signals its process
group, stops and kills it. Identity checks guard against pid reuse: a pid is
only a run's if ``/proc/<pid>/cmdline`` names its pidfile and its start time
matches the one recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal as signals
import subprocess
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path

from bodega.model.machine import ExitStatus
from bodega.runtime.waits import process_ended, within
from bodega.worker.drivers.base import TaskHandle, TaskSpec
from bodega.worker.drivers.process.cgroups import Cgroups
from bodega.worker.drivers.process.launch import RunFiles, parse_exit_file
from bodega.worker.drivers.process.procfs import (
    is_ours,
    pids_with_argument,
    read_pid,
    start_time,
    until_gone,
    until_program_runs,
)
from bodega.worker.drivers.process.warmup import Warmup

log = logging.getLogger("bodega.worker.process")

CGROUP_EMPTY_TIMEOUT = 10.0  # seconds ending a machine's runs waits for its cgroups to empty
SET_UP_TIMEOUT = 5.0  # seconds an exec waits for a wrapper just spawned to be set up

RunKey = tuple[str, str, int]  # (machine, instance, start_seq)


def run_key(handle: TaskHandle) -> RunKey:
    return (handle.machine_id, handle.instance_id, handle.start_seq)


class Runs:
    def __init__(self, driver: str, cgroups: Cgroups | None,
                 warmup: Warmup | None = None) -> None:
        self.driver = driver  # the name the handles carry: which driver re-adopts them
        self.cgroups = cgroups
        self.warmup = warmup  # removing cgroups waits until its move lets go of the kernel's
        self._children: dict[int, subprocess.Popen[bytes]] = {}
        self._handles: dict[RunKey, TaskHandle] = {}
        self._exits: dict[RunKey, asyncio.Future[ExitStatus]] = {}
        # Delivers a signal some other way than to the run's process group (a sandbox's,
        # through its runtime); False when it did not, and the group is signalled.
        self.signaller: Callable[[TaskHandle, int], Awaitable[bool]] | None = None

    # -- recording runs ---------------------------------------------------------------
    def held(self, spec: TaskSpec) -> TaskHandle | None:
        """The handle of this run, if this worker process started or adopted it."""
        return self._handles.get((spec.machine_id, spec.instance_id, spec.start_seq))

    def spawned(self, spec: TaskSpec, files: RunFiles, child: subprocess.Popen[bytes],
                oom_base: int) -> TaskHandle:
        """A run this process just forked (or handed to a parked launcher): watch it."""
        self._children[child.pid] = child
        return self.adopt(spec, files, child.pid, oom_base)

    def adopt(self, spec: TaskSpec, files: RunFiles, pid: int | None,
              oom_base: int) -> TaskHandle:
        handle = TaskHandle(
            driver=self.driver, machine_id=spec.machine_id, instance_id=spec.instance_id,
            start_seq=spec.start_seq, pid=pid, started_at=time.time(),
            data={"start_time": start_time(pid) if pid else None, "oom_base": oom_base,
                  "pidfile": str(files.pidfile), "exitfile": str(files.exitfile)},
        )
        self._handles[run_key(handle)] = handle
        self._watch(handle)
        return handle

    def earlier(self, spec: TaskSpec, files: RunFiles) -> TaskHandle | None:
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
        return self.adopt(spec, files, pid, 0)

    def respawned(self, handle: TaskHandle, child: subprocess.Popen[bytes],
                  oom_base: int) -> TaskHandle:
        """``handle``'s run, ended, going on in ``child``: a new process in the same run's
        files (a VM resumed from the snapshot its suspend wrote, its qemu ended)."""
        self._children[child.pid] = child
        return self._renewed(handle, child.pid, oom_base)

    def successor(self, handle: TaskHandle) -> TaskHandle | None:
        """The live run in ``handle``'s files that is not ``handle``'s own process (one
        ``respawned`` by a worker killed before it recorded it), adopted; None if none."""
        pidfile = Path(handle.data.get("pidfile", ""))
        found = [p for p in pids_with_argument(str(pidfile))
                 if p != handle.pid and is_ours(p, pidfile, None)]
        if not found:
            return None
        log.info("%s: run %d goes on as pid %d; adopting it", handle.machine_id,
                 handle.start_seq, found[0])
        return self._renewed(handle, found[0], int(handle.data.get("oom_base", 0)))

    def _renewed(self, handle: TaskHandle, pid: int, oom_base: int) -> TaskHandle:
        key = run_key(handle)
        self._exits.pop(key, None)  # the ended process's: the run's exit is the new one's
        renewed = replace(handle, pid=pid, data={**handle.data, "start_time": start_time(pid),
                                                 "oom_base": oom_base})
        self._handles[key] = renewed
        self._watch(renewed)
        return renewed

    def forget_ended(self, machine_id: str) -> None:
        """Drop what is kept about a machine's runs that have ended (their files remain)."""
        for key in [k for k, f in self._exits.items() if k[0] == machine_id and f.done()]:
            del self._exits[key]
            self._handles.pop(key, None)

    # -- watching ---------------------------------------------------------------------
    def alive(self, handle: TaskHandle) -> bool:
        if handle.pid is None:
            return False
        popen = self._children.get(handle.pid)
        if popen is not None:
            return popen.poll() is None
        return is_ours(handle.pid, Path(handle.data.get("pidfile", "")),
                        handle.data.get("start_time"))

    def _watch(self, handle: TaskHandle) -> asyncio.Future[ExitStatus]:
        key = run_key(handle)
        future = self._exits.get(key)
        if future is not None:
            return future
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._exits[key] = future
        if handle.pid is None or not self.alive(handle):
            future.set_result(self._exit_status(handle, found_ended=True))
            return future
        ended = process_ended(handle.pid)
        if ended.done():  # no process by that pid: it ended before it was looked at
            future.set_result(self._exit_status(handle, found_ended=True))
            return future

        def on_exit(_: asyncio.Future[None]) -> None:
            if not future.done():
                future.set_result(self._exit_status(handle))

        ended.add_done_callback(on_exit)
        return future

    def _exit_status(self, handle: TaskHandle, found_ended: bool = False) -> ExitStatus:
        """How the run ended: the wrapper's exit file, else the wrapper's own status.

        ``found_ended``: the run was over when first looked at. One of another worker
        process that left no exit file had its wrapper killed with it: ``lost``."""
        signal_number: int | None = None
        code: int | None = None
        own_code: int | None = None  # the wrapper's own exit code, when it exited
        popen = self._children.pop(handle.pid, None) if handle.pid else None
        if popen is not None:
            returncode = popen.wait()
            if returncode < 0:
                signal_number = -returncode
            else:
                own_code = returncode
        exitfile = Path(handle.data.get("exitfile", ""))
        with contextlib.suppress(OSError):
            code = parse_exit_file(exitfile.read_text())
        if code is None and signal_number is None:
            # No record, yet not killed: what runs before the wrapper's shell (``nsenter``
            # finding no namespace, ``unshare``) failed, and its code says so; reporting a
            # SIGKILL instead would blame a kill nobody sent.
            code = own_code
        lost = found_ended and popen is None and code is None
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
                          exited_at=time.time(), lost=lost)

    async def recover(self, handle: TaskHandle) -> bool:
        alive = self.alive(handle)
        self._watch(handle)
        return alive

    async def wait(self, handle: TaskHandle) -> ExitStatus:
        return await asyncio.shield(self._watch(handle))

    async def set_up(self, handle: TaskHandle, limit: float = SET_UP_TIMEOUT) -> bool:
        """The run's wrapper is in all its program will be in (its namespaces, cgroups,
        mounts and directory): it writes its pidfile only then (``launch.py``). Waits up
        to ``limit`` seconds for that; False if it has not, or the run is over."""
        pidfile = Path(handle.data.get("pidfile", ""))
        deadline = time.monotonic() + limit
        while self.alive(handle):
            if read_pid(pidfile) == handle.pid:
                return True
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(0.002)
        return False

    # -- signals and ends ---------------------------------------------------------------
    async def signal(self, handle: TaskHandle, signal: int) -> None:
        if handle.pid is None or not self.alive(handle):
            return
        await until_program_runs(handle.pid)  # a wrapper about to fork would swallow it
        if self.signaller is not None and await self.signaller(handle, signal):
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(handle.pid, signal)

    async def stop(self, handle: TaskHandle, signal: int, timeout: float) -> None:
        future = self._watch(handle)
        if future.done():
            return
        await self.signal(handle, signal)
        try:
            await within(asyncio.shield(future), timeout)
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

    async def end_all(self, machine_id: str, machine_dir: Path) -> None:
        """Kill every run of the machine still going (proven by its pidfile) and forget them."""
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
            if self.warmup is not None:
                await self.warmup.clear()
            await self.cgroups.empty(machine_id, CGROUP_EMPTY_TIMEOUT)
        for popen in [p for p in self._children.values() if p.poll() is not None]:
            self._children.pop(popen.pid, None)
        self.forget_ended(machine_id)


class RunsDriver:
    """What a driver whose runs are ``Runs`` answers about them, the same for the process
    and the oci driver: each keeps its ``runs`` and differs only in how a run starts and
    what a stop or destroy leaves behind."""

    runs: Runs

    async def recover(self, handle: TaskHandle) -> bool:
        return await self.runs.recover(handle)

    async def wait(self, handle: TaskHandle) -> ExitStatus:
        return await self.runs.wait(handle)

    async def inspect(self, handle: TaskHandle) -> bool:
        return self.runs.alive(handle)

    async def signal(self, handle: TaskHandle, signal: int) -> None:
        await self.runs.signal(handle, signal)
