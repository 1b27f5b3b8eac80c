"""Reaching into a running oci machine: signals and ps as for a process, exec with runc."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal as signals
from typing import TYPE_CHECKING

from bodega.worker.drivers.base import ExecResult, TaskSpec
from bodega.worker.drivers.process.control import EXEC_OUTPUT_LIMIT, ProcessControl

if TYPE_CHECKING:
    from bodega.worker.drivers.oci.driver import OciDriver


class OciControl(ProcessControl):
    """``exec`` runs in the container (its root, env, user and namespaces) via ``runc exec``."""

    def __init__(self, driver: OciDriver) -> None:
        super().__init__(driver)
        self.oci = driver

    async def exec(
        self, spec: TaskSpec, argv: list[str], timeout: float, stdin: bytes | None
    ) -> ExecResult:
        container = self.oci.container_id(spec.machine_id, spec.start_seq)
        command = self.oci.runc("exec", container, *argv)
        try:
            process = await asyncio.create_subprocess_exec(
                *command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, start_new_session=True,
            )
        except OSError as exc:
            return ExecResult(exit_code=127, stdout="", stderr=f"exec: {exc}\n")
        try:
            out, err = await asyncio.wait_for(process.communicate(stdin or b""), timeout)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signals.SIGKILL)
            out, err = await process.communicate()
            return ExecResult(exit_code=124, stdout=_text(out),
                              stderr=_text(err) + "exec: timed out\n",
                              exit_signal=signals.SIGKILL)
        code = process.returncode or 0
        return ExecResult(exit_code=code, stdout=_text(out), stderr=_text(err),
                          exit_signal=code - 128 if code > 128 else None)


def _text(data: bytes) -> str:
    return data[:EXEC_OUTPUT_LIMIT].decode(errors="replace")
