"""Which isolations a worker offers: those it ran at its start, never those it found a file of.

A container is offered wherever the process or oci driver runs (namespaces and cgroups
on the host's kernel, as ever). A sandbox is offered once runsc has run a tiny one here:
the host's root, read-only, as its root, ``cat /proc/version`` as its program, in a
network namespace of its own as a machine's would be; it counts only if the kernel it
printed is not the host's (gVisor's answers as Linux 4.4.0). A vm is offered once a probe
VM booted bodega's kernel and init here (``bodega.probe`` on its command line: the init
prints ``/proc/version`` and powers off), with KVM if that boots, else under qemu's
emulation. Pure: the runs themselves are the worker's (``host/image_drivers.py``,
``host/vm_probe.py``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from bodega.model.machine_config import ISOLATIONS

PROBE_PROGRAM = ["/bin/cat", "/proc/version"]


@dataclass(frozen=True)
class Probe:
    """One isolation tried at the worker's start: whether it ran, and if not why."""

    isolation: str
    ran: bool
    why: str = ""
    accel: str = ""  # a VM's: kvm (the hardware's) or tcg (qemu's emulation)


def sandbox_probe(returncode: int | None, output: str, host_version: str) -> Probe:
    """What the probe sandbox's run says: ``returncode`` None when it never ended."""
    if returncode is None:
        return Probe("sandbox", False, "runsc did not finish its probe run")
    if returncode != 0:
        last = output.strip().splitlines()[-1:] or ["no output"]
        return Probe("sandbox", False, f"runsc's probe run failed ({returncode}): {last[0]}")
    if not output.startswith("Linux version"):
        return Probe("sandbox", False, f"runsc's probe printed no kernel: {output[:80]!r}")
    if output.strip() == host_version.strip():
        return Probe("sandbox", False, "runsc's probe ran on the host's own kernel")
    return Probe("sandbox", True)


def offered(probes: Iterable[Probe]) -> tuple[str, ...]:
    """The isolations that ran, in ``ISOLATIONS`` order."""
    ran = {probe.isolation for probe in probes if probe.ran}
    return tuple(isolation for isolation in ISOLATIONS if isolation in ran)


def probe_bundle() -> str:
    """The probe sandbox's ``config.json``: the host's root, read-only, and no network
    namespace in the spec (runsc runs in a fresh one, as in a machine's)."""
    return json.dumps({
        "ociVersion": "1.0.2",
        "process": {"terminal": False, "user": {"uid": 0, "gid": 0}, "args": PROBE_PROGRAM,
                    "env": ["PATH=/usr/bin:/bin"], "cwd": "/"},
        "root": {"path": "/", "readonly": True},
        "hostname": "bodega-probe",
        "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"}],
        "linux": {"namespaces": [{"type": "pid"}, {"type": "mount"}, {"type": "ipc"},
                                 {"type": "uts"}]},
    })


def vm_probe(returncode: int | None, output: str, host_version: str, accel: str) -> Probe:
    """What the probe VM's boot says (bodega's init prints ``/proc/version`` and powers
    off): ``returncode`` is qemu's, None when it never ended; ``accel`` kvm or tcg."""
    if returncode is None:
        return Probe("vm", False, f"the probe VM ({accel}) did not power off in time")
    version = next((line.strip() for line in output.splitlines()
                    if line.startswith("Linux version")), "")
    if returncode != 0 or not version:
        last = output.strip().splitlines()[-1:] or ["no output"]
        return Probe("vm", False, f"the probe VM ({accel}) failed ({returncode}): {last[0]}")
    if version == host_version.strip():
        return Probe("vm", False, "the probe VM printed the host's own kernel")
    return Probe("vm", True, accel=accel)
