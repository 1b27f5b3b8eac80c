"""Reaching into a running oci machine: signals and ps as for a process, exec with the runtime.

An exec is the runtime's ``exec`` given the program's own process (``--process``):
the bundle's ``config.json`` process with the command's argv for its args, so
the command has what the program has (its user, environment, working directory,
capabilities, limits), where the runtime puts it: in the container's namespaces
and cgroups. Told nothing more, crun would run it as root in ``/``. A vm machine's
exec goes to its guest's init instead (``vm/guest_exec.py``): no runtime reaches past
the VM's kernel.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from bodega.model.console import CONSOLE_TERM
from bodega.worker.drivers.base import (
    ConsoleCommand,
    DriverError,
    ExecResult,
    GuestConsole,
    TaskGone,
    TaskHandle,
    TaskSpec,
)
from bodega.worker.drivers.oci.runc import Runc
from bodega.worker.drivers.process.cgroups import Cgroups
from bodega.worker.drivers.process.control import ProcessControl, run_bounded
from bodega.worker.drivers.process.entry import memory_file
from bodega.worker.drivers.process.runs import Runs
from bodega.worker.drivers.vm.machines import VmMachines

CONSOLE_SHELL = "/bin/sh"  # a console's program unless told one: the image's shell


class OciControl(ProcessControl):
    """``exec`` runs in the container as its program does, via ``runc exec --process``."""

    def __init__(self, runtime_of: Callable[[str], Runc], runs: Runs,
                 cgroups: Cgroups | None, vm: VmMachines | None = None) -> None:
        super().__init__(runs, cgroups)
        self.runtime_of = runtime_of  # the runtime of a machine's bundle (runc or runsc)
        self.vm = vm

    async def exec(
        self, handle: TaskHandle, spec: TaskSpec, argv: list[str], timeout: float,
        stdin: bytes | None,
    ) -> ExecResult:
        if not self.runs.alive(handle):
            raise TaskGone(f"machine {handle.machine_id}'s program is not running")
        if (spec.machine_dir / "oci" / "vm").exists():
            if self.vm is None:
                raise DriverError(f"machine {handle.machine_id} runs in a vm, which this "
                                  "worker no longer offers")
            return await self.vm.exec(handle.machine_id, argv, timeout, stdin)
        runtime = self.runtime_of(handle.machine_id)
        container = runtime.container_id(handle.machine_id, handle.start_seq)
        try:
            config = (spec.machine_dir / "oci" / "config.json").read_text()
        except OSError as exc:
            raise DriverError(f"machine {handle.machine_id}'s bundle: {exc}") from exc
        # The file holds the environment, the app's secrets among it: in memory only.
        with memory_file(exec_process(config, argv)) as process:
            command = runtime.argv("exec", "--process", process, container)
            return await run_bounded(command, stdin, timeout, codes_over_128_are_signals=True)


    @contextlib.asynccontextmanager
    async def console(self, handle: TaskHandle, spec: TaskSpec, argv: list[str]
                      ) -> AsyncIterator[ConsoleCommand | GuestConsole]:
        """The runtime's ``exec`` as for an exec, with a terminal: the runtime makes one in
        the container (the program its session's leader there, so job control and Ctrl-C
        work as on any terminal) and copies it to and from its own stdio, the worker's
        terminal. Without one the runtime starts the program in a session of its own with
        no controlling terminal, where a shell has no job control and Ctrl-C would reach
        the runtime, not the program in the foreground. A vm machine's console is its
        guest's (``vm/guest_console.py``)."""
        if not self.runs.alive(handle):
            raise TaskGone(f"machine {handle.machine_id}'s program is not running")
        if (spec.machine_dir / "oci" / "vm").exists():
            if self.vm is None:
                raise DriverError(f"machine {handle.machine_id} runs in a vm, which this "
                                  "worker no longer offers")
            async with self.vm.console(handle.machine_id, spec.machine_dir, argv) as guest:
                yield guest
            return
        runtime = self.runtime_of(handle.machine_id)
        container = runtime.container_id(handle.machine_id, handle.start_seq)
        try:
            config = (spec.machine_dir / "oci" / "config.json").read_text()
        except OSError as exc:
            raise DriverError(f"machine {handle.machine_id}'s bundle: {exc}") from exc
        process_file = exec_process(config, argv or [CONSOLE_SHELL], term=CONSOLE_TERM,
                                    terminal=True)
        with memory_file(process_file) as process, \
                tempfile.TemporaryDirectory(prefix="bodega-console-") as scratch:
            pid_file = Path(scratch) / "pid"
            yield ConsoleCommand(runtime.argv("exec", "--process", process, "--pid-file",
                                              str(pid_file), container), pid_file=pid_file)


def exec_process(bundle_config: str, argv: list[str], *, term: str | None = None,
                 terminal: bool = False) -> str:
    """The runtime's process file for an exec of ``argv``: the program's process, from the
    bundle's ``config.json``, with ``argv`` for its args and no terminal; ``term``: the
    ``TERM`` it gets unless the program's environment names one."""
    process = json.loads(bundle_config).get("process") or {}
    env = list(process.get("env") or [])
    if term is not None and not any(str(item).startswith("TERM=") for item in env):
        env.append(f"TERM={term}")
    return json.dumps({**process, "args": list(argv), "terminal": terminal,
                       **({"env": env} if env else {})})
