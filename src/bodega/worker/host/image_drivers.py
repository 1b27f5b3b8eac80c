"""Building the image-running drivers from the worker's configuration."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from bodega.worker.config import WorkerConfig
from bodega.worker.drivers.base import Driver
from bodega.worker.drivers.oci import OciDriver, runtimes
from bodega.worker.drivers.pair import DriverPair
from bodega.worker.drivers.process import ProcessDriver
from bodega.worker.drivers.process.cgroups import Cgroups
from bodega.worker.host.survey import RUNC_STATE
from bodega.worker.images.puller import Puller
from bodega.worker.images.registry_client import RegistryClient
from bodega.worker.images.store import ImageStore


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


def make_image_driver(config: WorkerConfig) -> Driver:
    """``oci``: image machines only; ``auto``: both drivers, the config picks."""
    if not runtime_available(config.oci_runtime):
        wanted = "runc or crun" if config.oci_runtime == "auto" else config.oci_runtime
        raise ValueError(f"the oci driver needs root and {wanted} installed")
    scope = config.cgroup_scope()  # runc's state and the cgroups carry the cluster id
    cgroups = Cgroups.detect(scope) if config.cgroups else None
    client = RegistryClient(config.registry_username, config.registry_password)
    puller = Puller(ImageStore(config.images_dir), client, config.image_registry,
                    config.failpoints)
    runtime = runtimes.pick(config.oci_runtime, installed)
    oci = OciDriver(cgroups, puller, config.machines_dir,
                    RUNC_STATE / scope, runtime=runtime,
                    runtime_command=runtimes.command(runtime, unified_controllers()),
                    cache_budget_bytes=int(config.image_cache_gb * (1 << 30)),
                    log_max_bytes=config.log_max_bytes)
    if config.driver == "oci":
        return oci
    process = ProcessDriver(cgroups=cgroups, log_max_bytes=config.log_max_bytes,
                            park_dir=config.data_dir / "park")
    return DriverPair(process, oci)
