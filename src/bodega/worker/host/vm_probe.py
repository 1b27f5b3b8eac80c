"""Whether this host boots vm machines: a probe VM booted once per host, its verdict kept.

A probe boot costs a couple of seconds of CPU under emulation, so the verdict is kept in
``CACHE_DIR`` (gone at the host's reboot, when ``/dev/kvm`` may change), named by what
decides it: qemu's binary, the kernel and bodega's initramfs. Workers starting together
take a lock around the boot, so the first boots and the others read its verdict: ``bodega
up`` with many workers boots one VM. KVM is tried first with a short timeout (an
emulated ``/dev/kvm`` may never return from ``KVM_RUN``), then qemu's emulation (tcg).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import shutil
from dataclasses import asdict
from pathlib import Path

from bodega.worker.drivers.oci.core.isolations import Probe, vm_probe
from bodega.worker.drivers.vm.core.qemu import MIN_MEMORY_MB, QEMU, VmLaunch, argv, tsc_khz
from bodega.worker.drivers.vm.initramfs import Kernel, KernelError, initramfs
from bodega.worker.drivers.vm.machines import VmMachines
from bodega.worker.host.probe_run import probe_run

log = logging.getLogger("bodega.worker.vm")
CACHE_DIR = Path("/run/bodega/vm-probe")
INITRAMFS_DIR = Path("/run/bodega/vm-initramfs")  # one build per host, for every worker
TIMEOUTS = {"kvm": 10.0, "tcg": 60.0}  # seconds a probe boot may take, by accelerator
KVM = Path("/dev/kvm")


def boot(kernel: Kernel, initrd: Path, accel: str, khz: int) -> Probe:
    """Boot the probe VM once with ``accel``; what it printed says whether it ran."""
    launch = VmLaunch(vmlinuz=kernel.vmlinuz, initramfs=initrd, cpus=1,
                      memory_mb=MIN_MEMORY_MB, accel=accel, tsc_khz=khz, probe=True)
    returncode, output = probe_run(argv(launch), TIMEOUTS[accel])
    return vm_probe(returncode, output, Path("/proc/version").read_text(), accel)


def cache_key(qemu: Path, kernel: Kernel, initrd: Path) -> str:
    parts = []
    for path in (qemu, kernel.vmlinuz):
        found = path.stat()
        parts.append(f"{path}:{found.st_size}:{found.st_mtime_ns}")
    parts.append(initrd.name)  # it carries the hash of the init, busybox and kernel version
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def probe(kernel: Kernel, initrd: Path, khz: int, cache_dir: Path = CACHE_DIR) -> Probe:
    """This host's verdict: kept, else booted (kvm where ``/dev/kvm`` is, then tcg)."""
    qemu = shutil.which(QEMU)
    if qemu is None:
        return Probe("vm", False, f"{QEMU} is not installed")
    cache_dir.mkdir(parents=True, exist_ok=True)
    kept = cache_dir / f"{cache_key(Path(qemu), kernel, initrd)}.json"
    with (cache_dir / "lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with contextlib.suppress(OSError, ValueError, TypeError):
            return Probe(**json.loads(kept.read_text()))
        tried = []
        for accel in ("kvm", "tcg") if KVM.exists() else ("tcg",):
            verdict = boot(kernel, initrd, accel, khz)
            if verdict.ran:
                break
            tried.append(verdict.why)
        else:
            verdict = Probe("vm", False, "; ".join(tried))
        kept.write_text(json.dumps(asdict(verdict)))
        return verdict


def vm_machines(enabled: bool, kernel_dir: Path,
                cache_dir: Path = INITRAMFS_DIR) -> VmMachines | None:
    """The vm part of the oci driver, if a probe VM booted here (said in the log either
    way); else None. ``cache_dir``: where bodega's initramfs is built."""
    if not enabled:
        return None
    try:
        kernel = Kernel.find(kernel_dir)
        initrd = initramfs(kernel, cache_dir)
    except (KernelError, OSError) as exc:
        log.info("no vm isolation on this worker: %s", exc)
        return None
    khz = tsc_khz(Path("/proc/cpuinfo").read_text())
    verdict = probe(kernel, initrd, khz)
    if not verdict.ran:
        log.info("no vm isolation on this worker: %s", verdict.why)
        return None
    log.info("vm isolation: a probe VM booted kernel %s with %s", kernel.version,
             verdict.accel)
    return VmMachines(kernel, initrd, verdict.accel, khz)
