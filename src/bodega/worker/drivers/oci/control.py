"""Reaching into a running oci machine: signals and ps as for a process, exec with runc."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bodega.worker.drivers.base import ExecResult, TaskSpec
from bodega.worker.drivers.process.control import ProcessControl, run_bounded

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
        return await run_bounded(command, stdin, timeout, codes_over_128_are_signals=True)
