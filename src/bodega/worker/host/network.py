"""Per-machine networking: a private address for every machine.

Two modes, chosen by the worker at start:

``NetnsNetwork`` (root, ``netns.py``). The worker owns a machine subnet (a /24) and a Linux
bridge holding its gateway address. Each machine gets a named network
namespace ``bodega-<cluster id>-<b>-<c>-<index>`` (named by its address, so the
worker wires the next few ahead of time, off the request path), a veth pair
(host end on the bridge, the machine end renamed ``eth0``), its own address and
a default route through the gateway. Every name carries the cluster id
(``names.py``), so no two clusters on a host share, adopt or remove each
other's objects. Two machines on one worker can both bind ``0.0.0.0:8080``. A
machine's services are published at ``private_ip:internal_port``: the host
(and the proxy on it) reach them straight through the bridge; other hosts
reach them once the operator routes the worker's subnet to the worker, the
way Kubernetes pod CIDRs are routed (the multi-host tests do it with
``ip route``). Forwarding is enabled in the worker's namespace for that.

``HostNetwork`` (not root). Machines share the host's network namespace;
their address and published host are the worker's own, so two machines on
one worker cannot use the same internal port.

Setup is idempotent: attaching a machine that is half attached (a crash in
the middle) deletes its pieces and builds them again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from bodega.runtime.commands import run_command
from bodega.worker.host.core.names import Subnet

# Namespaces kept wired for the next creates, so a create rarely waits for `ip`.
WIRE_AHEAD = 2


class NetworkError(Exception):
    """A network step failed; the message carries the command's error."""


class SubnetInUse(ValueError):
    """Another device on the host holds an address of the worker's machine subnet."""


@dataclass(frozen=True)
class Attachment:
    private_ip: str
    netns: str | None  # the machine's namespace, None when it shares the host's
    service_host: str  # where others reach the machine's services


class Network(Protocol):
    index_range: tuple[int, int]

    async def setup(self) -> None: ...

    def address(self, index: int) -> str:
        """The private address a machine at ``index`` has (known before it is wired)."""
        ...

    def namespace(self, index: int) -> str | None:
        """The network namespace of address ``index``, None when machines share the host's."""
        ...

    async def attach(self, machine_id: str, index: int) -> Attachment: ...

    def fixed_attachment(self) -> Attachment | None:
        """What every attach reports when attaching does nothing on the host (machines
        share its network); None when each attach wires a namespace."""
        ...

    async def detach(self, machine_id: str, index: int | None = None) -> None: ...

    def ready(self, index: int) -> bool:
        """True if the address ``index`` can be attached without waiting."""
        ...

    async def prewarm(self, indexes: list[int]) -> None: ...

    async def release_spares(self, in_use: set[int]) -> None: ...

    def close(self) -> None:
        """Let go of what it keeps open in the host's namespaces (the worker stops)."""
        ...

    async def teardown(self) -> None: ...

    def service_host(self, private_ip: str | None) -> str | None: ...


async def run(*argv: str, stdin: bytes | None = None, check: bool = True) -> str:
    """Run an ``ip`` command (without holding the event loop while it forks)."""
    done = await run_command(*argv, stdin=stdin)
    if check and done.returncode != 0:
        raise NetworkError(f"{' '.join(argv[:4])} failed: {done.stderr.decode().strip()}")
    return done.stdout.decode()


class HostNetwork:
    def __init__(self, host: str, subnet: Subnet) -> None:
        self.host = host
        self.subnet = subnet
        self.index_range = (2, min(subnet.num_addresses - 2, 65000))

    def service_host(self, private_ip: str | None) -> str | None:
        return self.host

    async def setup(self) -> None:
        return None

    async def teardown(self) -> None:
        return None

    def address(self, index: int) -> str:
        return self.host

    def namespace(self, index: int) -> str | None:
        return None

    async def attach(self, machine_id: str, index: int) -> Attachment:
        return Attachment(self.host, None, self.host)

    async def detach(self, machine_id: str, index: int | None = None) -> None:
        return None

    def ready(self, index: int) -> bool:
        return True

    def fixed_attachment(self) -> Attachment | None:
        return Attachment(self.host, None, self.host)

    async def prewarm(self, indexes: list[int]) -> None:
        return None

    async def release_spares(self, in_use: set[int]) -> None:
        return None

    def close(self) -> None:
        return None
