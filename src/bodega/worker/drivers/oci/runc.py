"""The OCI runtime as the oci driver runs it: its argv, container ids and checked runs.

Every call names the state root of this worker's containers (``--root``, which
carries the cluster id), so two workers never see each other's containers. A
container id is ``<machine>-<start_seq>``: one per run, so a run killed with the
worker never blocks the next.

runsc (a sandbox: ``guest.isolation = "sandbox"``) takes the same commands, with
flags of its own, and one more rule: a sandbox answers its commands on an abstract
Unix socket, which lives in a network namespace, so every command for a sandbox runs
in the machine's (``within``); elsewhere runsc finds no sandbox and calls it stopped.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

from bodega.runtime.commands import run_command
from bodega.worker.drivers.base import DriverError

log = logging.getLogger("bodega.worker.oci")


class Runc:
    """runc, or crun (``runtimes.py``): ``command`` is the argv that runs it."""

    def __init__(self, runtime: str, state_root: Path,
                 command: tuple[str, ...] | None = None, flags: tuple[str, ...] = (),
                 netns: str | None = None, *, freezes_cgroup: bool = True) -> None:
        self.runtime = runtime
        self.state_root = state_root
        self.command = command or (runtime,)
        self.flags = flags  # global flags after --root (runsc's platform and network)
        self.netns = netns  # the namespace every command runs in (a sandbox's), None: ours
        # runc's pause is the cgroup freezer, which bodega can read; runsc's stops the
        # sandbox's own tasks, which only ``state`` tells.
        self.freezes_cgroup = freezes_cgroup

    def within(self, netns: str | None) -> Runc:
        """This runtime with every command run in the network namespace ``netns``."""
        return Runc(self.runtime, self.state_root, self.command, self.flags, netns,
                    freezes_cgroup=self.freezes_cgroup)

    def argv(self, *args: str) -> list[str]:
        enter = ["nsenter", f"--net=/run/netns/{self.netns}", "--"] if self.netns else []
        return [*enter, *self.command, "--root", str(self.state_root), *self.flags, *args]

    @staticmethod
    def container_id(machine_id: str, start_seq: int) -> str:
        return f"{machine_id}-{start_seq}"

    def containers(self, machine_id: str) -> list[str]:
        """The ids of the machine's containers the runtime keeps state for, any run."""
        if not self.state_root.exists():
            return []
        # runc keeps a directory per container; runsc files named ``<id>_sandbox:<id>.*``.
        return sorted({state.name.partition("_sandbox:")[0]
                       for state in self.state_root.glob(f"{machine_id}-*")})

    async def run(self, *args: str, check: bool = True) -> None:
        """Run the runtime; with ``check`` a failure is a ``DriverError`` with its message."""
        argv = self.argv(*args)
        started = time.monotonic()
        done = await run_command(*argv, stdout=False)  # the loop not held while it forks
        if check and done.returncode != 0:
            raise DriverError(f"{self.runtime} {args[0] if args else ''}: "
                              f"{done.stderr.decode(errors='replace').strip()}")
        log.debug("%s took %.3fs", " ".join(argv[:3]), time.monotonic() - started)

    async def status(self, container: str) -> str:
        """The container's status as the runtime reports it (running, paused, stopped, ...)."""
        done = await run_command(*self.argv("state", container))
        if done.returncode != 0:
            error = done.stderr.decode(errors="replace").strip()
            raise DriverError(f"{self.runtime} state: {error}")
        return str(json.loads(done.stdout).get("status", ""))
