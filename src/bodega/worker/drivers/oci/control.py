"""Reaching into a running oci machine: signals and ps as for a process, exec with the runtime."""

from __future__ import annotations

import json

from bodega.worker.drivers.base import ExecResult, TaskGone, TaskHandle, TaskSpec
from bodega.worker.drivers.oci.runc import Runc
from bodega.worker.drivers.process.cgroups import Cgroups
from bodega.worker.drivers.process.control import ProcessControl, run_bounded
from bodega.worker.drivers.process.runs import Runs


class OciControl(ProcessControl):
    """``exec`` runs in the container (its root, env, user and namespaces) via ``runc exec``."""

    def __init__(self, runc: Runc, runs: Runs, cgroups: Cgroups | None) -> None:
        super().__init__(runs, cgroups)
        self.runc = runc

    async def exec(
        self, handle: TaskHandle, spec: TaskSpec, argv: list[str], timeout: float,
        stdin: bytes | None,
    ) -> ExecResult:
        if not self.runs.alive(handle):
            raise TaskGone(f"machine {handle.machine_id}'s program is not running")
        container = self.runc.container_id(handle.machine_id, handle.start_seq)
        # In the program's working directory, as on Fly: runc takes it from the bundle,
        # crun starts an exec in / unless told.
        cwd = _working_directory(spec)
        command = self.runc.argv("exec", *(["--cwd", cwd] if cwd else []), container, *argv)
        return await run_bounded(command, stdin, timeout, codes_over_128_are_signals=True)


def _working_directory(spec: TaskSpec) -> str | None:
    """The machine's program's working directory, as its bundle's ``config.json`` says."""
    try:
        config = json.loads((spec.machine_dir / "oci" / "config.json").read_text())
    except (OSError, ValueError):
        return None
    cwd = config.get("process", {}).get("cwd")
    return cwd if isinstance(cwd, str) and cwd else None
