"""The host commands `bodega up` and `bodega join` need, checked before anything starts.

As root, with a driver that runs machines, every worker puts its machines in network
namespaces (``ip``), fences their networks apart with nftables (``nft``), enters the
namespaces and takes the machines' users (``nsenter``, ``unshare``) and binds their
directories (``mount``). A host where bodega was installed with pip, not through
``make``, may lack one; without this check the first worker to need it would exit
mid-start ("No such file or directory: 'nft'") after the others had started. Named here
with the Debian package that provides each, as ``scripts/host-packages`` lists them for
``make`` (a unit test holds the two lists to each other), so the refusal is one line a
user acts on: ``nft is not installed: apt-get install nftables``.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class HostCommand:
    command: str
    package: str  # the Debian package that provides it


# What a worker running machines as root cannot start without (scripts/host-packages'
# lines without "optional").
AS_ROOT = (HostCommand("ip", "iproute2"), HostCommand("nft", "nftables"),
           HostCommand("nsenter", "util-linux"), HostCommand("unshare", "util-linux"),
           HostCommand("mount", "mount"))

# Drivers that run machines (the null driver runs none: it needs nothing of the host).
MACHINE_DRIVERS = ("auto", "process", "oci")


def needed(driver: str, root: bool) -> tuple[HostCommand, ...]:
    """The commands a cluster of ``driver`` needs on this host: without root, machines
    share the host's network and user, and need none."""
    return AS_ROOT if root and driver in MACHINE_DRIVERS else ()


def missing(commands: Sequence[HostCommand],
            which: Callable[[str], str | None]) -> list[HostCommand]:
    """Those of ``commands`` that ``which`` does not find, in order."""
    return [c for c in commands if which(c.command) is None]


def refusal(absent: Sequence[HostCommand]) -> str | None:
    """One line naming what is missing and the packages that install it; None if nothing
    is."""
    if not absent:
        return None
    names = [c.command for c in absent]
    packages = list(dict.fromkeys(c.package for c in absent))
    said = (f"{names[0]} is not installed" if len(names) == 1
            else f"{', '.join(names[:-1])} and {names[-1]} are not installed")
    return f"{said}: apt-get install {' '.join(packages)}"


def require(driver: str) -> None:
    """Raise ValueError (the CLI's one error line) if a command the cluster needs is not
    on PATH."""
    line = refusal(missing(needed(driver, os.geteuid() == 0), shutil.which))
    if line is not None:
        raise ValueError(line)
