"""What the private network needs of this host, and what running it changes here.

``bodega up`` and ``bodega join`` run the private network by default where it can
run: as root, with IPv6, nftables and WireGuard (the kernel's, or ``wireguard-go``).
``unable`` says why it cannot, in words a user acts on.

Running it changes the host, not only the machines, and the banner says how:
forwarding is turned on (IPv6, and IPv4, which machines in namespaces need anyway),
and stays on when bodega stops. A host that takes its own IPv6 address from router
advertisements would stop accepting them once it forwards; such an interface
(``accept_ra`` 1 with an address the kernel learned from one) is first set to
``accept_ra=2``, which keeps accepting them while forwarding (``keeps_ra``, pure).
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from bodega.networking.core.sixpn import host_field
from bodega.networking.overlay import interface_name

CONF = Path("/proc/sys/net/ipv6/conf")
FORWARDING = {"net.ipv6.conf.all.forwarding": Path("/proc/sys/net/ipv6/conf/all/forwarding"),
              "net.ipv4.ip_forward": Path("/proc/sys/net/ipv4/ip_forward")}


def unable(driver: str) -> str | None:
    """Why the private network cannot run on this host; None when it can."""
    if os.geteuid() != 0:
        return "it needs root (machines' network namespaces, nftables, WireGuard)"
    if driver == "null":
        return "the null driver runs no machine"
    disabled = CONF / "all" / "disable_ipv6"
    if not disabled.exists() or _read(disabled) == "1":
        return "IPv6 is off on this host"
    for command, package in (("nft", "nftables"), ("wg", "wireguard-tools")):
        if shutil.which(command) is None:
            return f"{command} is not installed (apt-get install {package})"
    if not _kernel_wireguard() and shutil.which("wireguard-go") is None:
        return ("this kernel has no WireGuard and wireguard-go is not installed "
                "(apt-get install wireguard-go)")
    return None


def _kernel_wireguard() -> bool:
    if Path("/sys/module/wireguard").exists():
        return True
    try:
        found = subprocess.run(["modprobe", "-n", "-q", "wireguard"], check=False,
                               capture_output=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return found.returncode == 0


@dataclass(frozen=True)
class HostChanges:
    """What turning forwarding on changed: the sysctls that were off, and the interfaces
    set to keep accepting router advertisements."""

    turned_on: tuple[str, ...] = ()
    keeps_ra: tuple[str, ...] = ()

    def describe(self) -> list[str]:
        said = []
        if self.turned_on:
            said.append(f"turned on {' and '.join(f'{name}=1' for name in self.turned_on)} "
                        "(left on when bodega stops)")
        if self.keeps_ra:
            said.append("set accept_ra=2 on " + ", ".join(self.keeps_ra) +
                        " (it keeps its address from router advertisements while forwarding)")
        return said


def keeps_ra(accept_ra: Mapping[str, str], learned: Iterable[str]) -> list[str]:
    """The interfaces to set ``accept_ra=2`` before forwarding: those accepting router
    advertisements now (1) that hold an address learned from one. Pure."""
    return sorted({name for name in learned if accept_ra.get(name) == "1"})


def turn_on_forwarding() -> HostChanges:
    """Turn forwarding on as the private network needs, keeping router advertisements
    where an interface depends on them; what changed."""
    accept_ra = {path.parent.name: _read(path) for path in CONF.glob("*/accept_ra")}
    keep = keeps_ra(accept_ra, _learned_from_ra())
    for name in keep:
        (CONF / name / "accept_ra").write_text("2\n")
    turned_on = []
    for name, path in FORWARDING.items():
        if _read(path) != "1":
            path.write_text("1\n")
            turned_on.append(name)
    return HostChanges(tuple(turned_on), tuple(keep))


def _learned_from_ra() -> list[str]:
    """Interfaces with a global IPv6 address the kernel took from a router advertisement
    (``dynamic``: it has a lifetime)."""
    try:
        shown = subprocess.run(["ip", "-6", "-o", "addr", "show", "scope", "global", "dynamic"],
                               check=False, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [line.split()[1] for line in shown.stdout.splitlines() if len(line.split()) > 1]


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def banner(*, on: bool, cluster_id: str, subnets: list[str], wireguard_ports: list[int],
           changes: HostChanges, unable_why: str | None) -> list[str]:
    """What ``bodega up`` or ``bodega join`` says of the private network: on, and what it
    changed on this host (each object by its name, so a user can find and remove it); or
    off, and why, and what keeps networks apart without it."""
    fences = f"nftables tables bodegafence_{cluster_id}_*"
    if not on:
        why = f"{unable_why}; " if unable_why else ""
        return [f"Private network: off ({why}--private-network turns it on): networks are "
                f"still fenced apart over IPv4 ({fences})"]
    blocks = [host_field(ipaddress.IPv4Network(subnet)) for subnet in subnets]
    interfaces = [interface_name(cluster_id, block) for block in blocks]
    ports = ", ".join(str(p) for p in wireguard_ports)
    lines = [f"Private network: on, cluster {cluster_id}: 6PN addresses and <app>.internal "
             "names in machines, networks fenced apart (--no-private-network turns it off)",
             f"  on this host: WireGuard {', '.join(interfaces)} on UDP {ports}; {fences} and "
             f"bodega6pn_{cluster_id}_*; an IPv6 rule per worker (priority 20000); all "
             "removed when bodega stops with its machines (Ctrl-C)"]
    lines += [f"  on this host: {said}" for said in changes.describe()]
    return lines
