"""Which OCI runtime runs a worker's image machines, and the command line that runs it.

``crun`` where it is installed, ``runc`` otherwise (``--oci-runtime auto``, the default;
``runc`` or ``crun`` name one). crun starts a container several times faster than runc
here (C, no Go runtime to start, no re-exec of itself), and the two take the same
commands and the same bundle.

crun refuses a *hybrid* host: cgroup v1 hierarchies mounted, and a cgroup v2 hierarchy
beside them (``/sys/fs/cgroup/unified``) that still has controllers of its own. The
worker first gives those controllers v1 hierarchies of their own (``to_mount``), the
layout of a usual hybrid host, where v2 keeps none; crun then runs as it is. Where the
kernel refuses that (a controller in use under v2), crun runs in a mount namespace of its
own without that v2 hierarchy (a slave of the host's: the host's mounts still reach it,
its unmount never reaches the host), which is the v1 host it supports, at the cost of an
``unshare``, a ``sh`` and an ``umount`` on every command. Either way the container's
cgroups are the v1 ones runc uses.

Pure: the caller reads the host (``host/image_drivers.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import PurePath

RUNTIMES = ("auto", "runc", "crun")
UNIFIED = "/sys/fs/cgroup/unified"
WITHOUT_UNIFIED = f'umount {UNIFIED} && exec "$@"'


def pick(setting: str, installed: Callable[[str], bool]) -> str:
    """The runtime ``setting`` names; for ``auto``, crun if installed, else runc."""
    if setting not in RUNTIMES:
        raise ValueError(f"unknown OCI runtime {setting!r}: use auto, runc or crun")
    if setting != "auto":
        return setting
    return "crun" if installed("crun") else "runc"


def to_mount(runtime: str, unified_controllers: str | None) -> list[str]:
    """The controllers to mount as v1 hierarchies of their own before ``runtime`` runs:
    those the v2 hierarchy beside the v1 ones still holds, for crun only (runc takes a
    hybrid host as it is, and nothing on the host is changed for it)."""
    if PurePath(runtime).name != "crun" or not unified_controllers:
        return []
    return unified_controllers.split()


def command(runtime: str, unified_controllers: str | None) -> tuple[str, ...]:
    """The argv that runs ``runtime``. ``unified_controllers``: what the host's v2 hierarchy
    beside its v1 ones offers (``cgroup.controllers``), None when it has none mounted."""
    if PurePath(runtime).name == "crun" and unified_controllers and unified_controllers.strip():
        return ("unshare", "--mount", "--propagation", "slave", "--",
                "/bin/sh", "-c", WITHOUT_UNIFIED, "crun-v1", runtime)
    return (runtime,)


# The sandbox's runtime (``guest.isolation = "sandbox"``), gVisor's runsc. ptrace: on hosts
# whose /dev/kvm is emulated, ``--platform=kvm`` never returns from KVM_RUN. The host's
# network as the sandbox sees it, run inside the machine's own namespace: the sandbox's
# own network stack refuses to start on 6.x kernels in this release ("cannot run with
# network enabled in root network namespace": it tests for a file every namespace shows).
SANDBOX = "runsc"
SANDBOX_FLAGS = ("--platform=ptrace", "--network=host")
