"""What a machine's other routes answer: its lease, versions, processes, an exec, a wait.

Each is the Machines API's object of the same name (``Lease``, ``MachineVersion``,
``ProcessStat``, ``flydv1.ExecResponse``, ``WaitMachineResponse``,
``metadataValueResponse``), built by the worker and read by the clients; the broker
hands them on as the worker wrote them.
"""

from __future__ import annotations

from bodega.model.answer import Answer
from bodega.model.machine_config import MachineConfig


class Lease(Answer):
    nonce: str = ""
    expires_at: int = 0  # seconds since the epoch
    owner: str = ""
    description: str = ""
    version: str = ""  # the machine's instance when the lease was taken


class LeaseAnswer(Answer):
    """The lease envelope (``{"status": "success", "data": ...}``) flyctl and fly-go read."""

    status: str = "success"
    data: Lease


class MachineVersion(Answer):
    version: str
    user_config: MachineConfig


class ListenSocket(Answer):
    address: str = ""
    proto: str = ""


class ProcessStat(Answer):
    pid: int = 0
    command: str = ""
    cpu: int = 0  # jiffies used (utime + stime)
    rss: int = 0  # bytes
    stime: int = 0
    rtime: int = 0
    directory: str = ""
    listen_sockets: list[ListenSocket] = []


class ExecAnswer(Answer):
    exit_code: int = 0
    stdout: str = ""
    stderr: str = ""
    exit_signal: int | None = None


class WaitAnswer(Answer):
    ok: bool = True
    state: str = ""
    version: str = ""
    event_id: str | None = None  # the machine's latest event, when it has one


class MetadataValue(Answer):
    value: str
