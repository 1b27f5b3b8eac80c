"""Building the image-running drivers from the worker's configuration."""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from bodega.model.image_registries import Advertised
from bodega.model.rows import WorkerRow
from bodega.registry import Registry
from bodega.runtime.tls.files import TlsDir
from bodega.worker.config import WorkerConfig
from bodega.worker.drivers.base import Driver
from bodega.worker.drivers.oci import OciDriver
from bodega.worker.drivers.oci.core import runtimes
from bodega.worker.drivers.oci.core.isolations import Probe, probe_bundle, sandbox_probe
from bodega.worker.drivers.oci.runc import Runc
from bodega.worker.drivers.pair import DriverPair
from bodega.worker.drivers.process import ProcessDriver
from bodega.worker.drivers.process.cgroups import Cgroups
from bodega.worker.host.probe_run import probe_run
from bodega.worker.host.survey import RUNC_STATE
from bodega.worker.host.vm_probe import vm_machines
from bodega.worker.images.puller import Puller
from bodega.worker.images.registry_client import RegistryClient, RegistryTrust
from bodega.worker.images.sources import RegistrySources
from bodega.worker.images.store import ImageStore

log = logging.getLogger("bodega.worker.images")
CGROUP_ROOT = Path(runtimes.UNIFIED).parent
LOCK = Path("/run/bodega/cgroup-v1.lock")  # two workers starting at once mount each once
PROBE_TIMEOUT = 30.0  # seconds the probe sandbox may take (a hung platform never ends)


def installed(program: str) -> bool:
    return shutil.which(program) is not None


def runtime_available(runtime: str = "auto") -> bool:
    """Images run only as root with the runtime installed."""
    return os.geteuid() == 0 and installed(runtimes.pick(runtime, installed))


def unified_controllers() -> str | None:
    """The controllers of the host's cgroup v2 hierarchy mounted beside v1 ones, if any."""
    try:
        return Path(runtimes.UNIFIED, "cgroup.controllers").read_text()
    except OSError:
        return None


def give_controllers_to_v1(controllers: list[str], root: Path = CGROUP_ROOT) -> str | None:
    """Mount each of ``controllers`` as a v1 hierarchy of its own under ``root`` (taking it
    from the v2 hierarchy beside them); what the v2 hierarchy holds afterwards.

    The kernel moves a controller only while no v2 cgroup uses it; one it refuses stays
    where it was, and is logged, and crun then runs in a mount namespace of its own.
    """
    LOCK.parent.mkdir(parents=True, exist_ok=True)
    with LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for name in controllers:
            target = root / name
            if os.path.ismount(target):
                continue
            try:
                target.mkdir(exist_ok=True)
            except OSError as exc:  # a read-only /sys/fs/cgroup: nothing to do but fall back
                log.warning("could not make %s (%s): crun will run in a mount namespace "
                            "without %s", target, exc.strerror, runtimes.UNIFIED)
                continue
            done = subprocess.run(["mount", "-t", "cgroup", "-o", name, "cgroup", str(target)],
                                  capture_output=True, text=True, check=False)
            if done.returncode == 0:
                log.info("mounted the %s controller as a cgroup v1 hierarchy at %s, so crun "
                         "runs without a mount namespace of its own", name, target)
            else:
                log.warning("could not mount the %s controller at %s (%s): crun will run in "
                            "a mount namespace without %s", name, target,
                            done.stderr.strip(), runtimes.UNIFIED)
                with contextlib.suppress(OSError):
                    target.rmdir()
        return unified_controllers()


def controllers_for(runtime: str) -> str | None:
    """What the v2 hierarchy beside the v1 ones holds once the host is ready for ``runtime``:
    for crun, after its controllers were given v1 hierarchies of their own (if the kernel
    let them go)."""
    controllers = unified_controllers()
    wanted = runtimes.to_mount(runtime, controllers)
    return give_controllers_to_v1(wanted) if wanted else controllers


def probe_sandbox(sandbox: Runc, work: Path) -> Probe:
    """Run the probe sandbox (``oci/core/isolations.py``) with ``sandbox`` in a fresh network
    namespace, its output through a pipe, and say whether it ran in a kernel of its own."""
    if not installed(sandbox.runtime):
        return Probe("sandbox", False, f"{sandbox.runtime} is not installed")
    bundle = work / "bundle"
    bundle.mkdir(parents=True)
    (bundle / "config.json").write_text(probe_bundle())
    argv = ["unshare", "--net", "--", *sandbox.argv("run", "--bundle", str(bundle),
                                                     f"probe-{os.getpid()}")]
    returncode, output = probe_run(argv, PROBE_TIMEOUT)
    return sandbox_probe(returncode, output, Path("/proc/version").read_text())


def sandbox_runtime(config: WorkerConfig, state_root: Path) -> Runc | None:
    """runsc, if a probe sandbox ran here (said in the log either way); else None."""
    if not config.sandbox:
        return None
    sandbox = Runc(runtimes.SANDBOX, state_root, flags=runtimes.SANDBOX_FLAGS,
                   freezes_cgroup=False)
    config.data_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="sandbox-probe-", dir=config.data_dir) as work:
        probe = probe_sandbox(Runc(sandbox.runtime, Path(work) / "state", flags=sandbox.flags),
                              Path(work))
    if not probe.ran:
        log.info("no sandbox isolation on this worker: %s", probe.why)
        return None
    log.info("sandbox isolation: a probe sandbox ran with %s", sandbox.runtime)
    return sandbox


def registry_trust(config: WorkerConfig) -> dict[str, RegistryTrust]:
    """The cluster's registry, reached over TLS checked against its CA, this worker showing
    its own certificate (none with --internal-tls off), which lets it pull there."""
    if config.image_registry is None or config.image_registry_ca is None:
        return {}
    identity = TlsDir(config.tls_dir).identity_path if config.tls_dir is not None else None
    return {config.image_registry: RegistryTrust(config.image_registry_ca, identity)}


def registry_sources(config: WorkerConfig) -> RegistrySources:
    """Every image registry of the cluster a pull may fetch from: ``--image-registry``
    until the worker reads the view (``advertised_registries``), each reached as it is."""
    trusted = registry_trust(config)
    return RegistrySources(config.image_registry,
                           config.image_registry if config.image_registry_here else None,
                           next(iter(trusted.values()), None))


def advertised_registries(view: Registry) -> list[Advertised]:
    """The registries the view's workers advertise, each live if membership says its
    worker is (alive or suspect)."""
    live = {member.name for member in view.members() if member.status.live}
    return [Advertised(row.image_registry, row.name in live)
            for row in view.rows(WorkerRow) if row.image_registry]


def make_image_driver(config: WorkerConfig, sources: RegistrySources | None = None) -> Driver:
    """``oci``: image machines only; ``auto``: both drivers, the config picks.
    ``sources``: the registries its pulls fetch from (the daemon attaches the view)."""
    if not runtime_available(config.oci_runtime):
        wanted = "runc or crun" if config.oci_runtime == "auto" else config.oci_runtime
        raise ValueError(f"the oci driver needs root and {wanted} installed")
    scope = config.cgroup_scope()  # runc's state and the cgroups carry the cluster id
    cgroups = Cgroups.detect(scope) if config.cgroups else None
    client = RegistryClient(config.registry_username, config.registry_password,
                            trusted=registry_trust(config))
    puller = Puller(ImageStore(config.images_dir), client, config.image_registry,
                    config.failpoints, sources or registry_sources(config))
    runtime = runtimes.pick(config.oci_runtime, installed)
    oci = OciDriver(cgroups, puller, config.machines_dir,
                    RUNC_STATE / scope, runtime=runtime,
                    runtime_command=runtimes.command(runtime, controllers_for(runtime)),
                    cache_budget_bytes=int(config.image_cache_gb * (1 << 30)),
                    log_max_bytes=config.log_max_bytes,
                    sandbox=sandbox_runtime(config, RUNC_STATE / scope / runtimes.SANDBOX),
                    vm=vm_machines(config.vm, config.vm_kernel))
    if config.driver == "oci":
        return oci
    process = ProcessDriver(cgroups=cgroups, log_max_bytes=config.log_max_bytes,
                            park_dir=config.data_dir / "park", warmup=oci.warmup,
                            resolv_conf=config.resolv_conf_ahead,
                            spare_homes=config.homes_ahead)
    return DriverPair(process, oci)
