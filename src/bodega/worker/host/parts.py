"""The parts of a worker its host decides: the driver and the machine network its config asks for.

``auto`` runs both the process and the oci driver (a config's image picks) when an OCI
runtime is installed, else the process driver alone; the network is a namespace per
machine when root and the driver runs machines in their own.
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
from dataclasses import replace

from bodega.networking.core.rules import fence4_table_name, table_name
from bodega.networking.core.sixpn import host_field
from bodega.worker.config import WorkerConfig
from bodega.worker.drivers.base import Driver
from bodega.worker.drivers.process.cgroups import Cgroups
from bodega.worker.host.core.names import Owner, Subnet
from bodega.worker.host.image_drivers import make_image_driver, runtime_available
from bodega.worker.host.netns import NetnsNetwork
from bodega.worker.host.network import HostNetwork, Network
from bodega.worker.host.network_fence import NetworkFence
from bodega.worker.host.private_net import PrivateNetwork
from bodega.worker.images.sources import RegistrySources


def default_subnet(name: str) -> str:
    """A /24 in 10.209.0.0/16 picked from the worker's name; `bodega up` assigns them instead."""
    octet = int(hashlib.sha256(name.encode()).hexdigest(), 16) % 250 + 2
    return f"10.209.{octet}.0/24"


def owner(config: WorkerConfig) -> Owner | None:
    """What a sweep of this worker's own objects takes; None when it makes none."""
    if not config.cluster_id or os.geteuid() != 0:
        return None
    return Owner(config.host_names(), subnet=machine_subnet(config), scope=config.cgroup_scope())


def machine_subnet(config: WorkerConfig) -> Subnet:
    return ipaddress.ip_network(config.machine_subnet or default_subnet(config.name))


def cgroups_mounted(config: WorkerConfig) -> bool:
    """A cgroup hierarchy with the memory controller is mounted (not under ``ip netns
    exec``, which hides them)."""
    return os.geteuid() == 0 and Cgroups.detect(config.cgroup_scope()) is not None


def images_off(config: WorkerConfig) -> str | None:
    """Why this worker cannot run image machines (its workers row says it, and placement
    sends them elsewhere, naming it); None when it can."""
    if config.driver in ("null", "fake"):
        return None  # simulations: whatever is asked is run
    if config.driver == "process":
        return "the worker runs the process driver only (--driver process)"
    if os.geteuid() != 0:
        return "the worker is not root"
    if not runtime_available(config.oci_runtime):
        return "neither runc nor crun is installed"
    if not cgroups_mounted(config):
        return "no cgroup hierarchy is mounted at /sys/fs/cgroup (runc and crun need one)"
    return None


def limits_notice(config: WorkerConfig) -> str | None:
    """The one line a worker says at start when it cannot enforce machines' limits."""
    if config.driver in ("null", "fake") or os.geteuid() != 0 or cgroups_mounted(config):
        return None
    images = "" if config.driver == "process" else (
        "; image machines cannot run here (runc and crun need cgroups), so this worker "
        "offers the process driver only")
    return ("no cgroup hierarchy is mounted at /sys/fs/cgroup (as under `ip netns exec`): "
            "machines get no cpu limit, only `ulimit -v` bounds their memory, and they cannot "
            "be suspended" + images)


def swap_notice(config: WorkerConfig) -> str | None:
    """The one line a worker says at start when its machines' cgroups cannot bound swap."""
    if config.driver in ("null", "fake") or not config.cgroups or os.geteuid() != 0:
        return None
    cgroups = Cgroups.detect(config.cgroup_scope())
    if cgroups is None or cgroups.accounts_swap():
        return None
    return ("this host's memory cgroups do not account swap (swapaccount=0): a machine's "
            "memory limit bounds its RAM alone, and init.swap_size_mb does not bound a "
            "container's or a process machine's swap (a vm's swap disk is its size)")


def make_driver(config: WorkerConfig, sources: RegistrySources | None = None) -> Driver:
    if config.driver == "null":
        from bodega.worker.drivers.null import NullDriver

        return NullDriver()
    if config.driver == "fake":
        from bodega.worker.drivers.fake import FakeDriver

        return FakeDriver()
    if config.driver == "oci" and (why := images_off(config)) is not None:
        raise ValueError(f"the oci driver cannot run here: {why}")
    if config.driver == "auto" and images_off(config) is not None:
        config = replace(config, driver="process")
    if config.driver == "process":
        from bodega.worker.drivers.process import ProcessDriver

        cgroups = (Cgroups.detect(config.cgroup_scope())
                   if config.cgroups and os.geteuid() == 0 else None)
        return ProcessDriver(cgroups=cgroups, log_max_bytes=config.log_max_bytes,
                             park_dir=config.data_dir / "park",
                             resolv_conf=config.resolv_conf_ahead,
                             spare_homes=config.homes_ahead)
    if config.driver in ("oci", "auto"):
        return make_image_driver(config, sources)
    raise ValueError(f"unknown driver {config.driver!r}: use auto, process, oci, null or fake")


def make_network(config: WorkerConfig, driver: Driver) -> Network:
    mode = config.network
    if mode == "auto":
        mode = "netns" if os.geteuid() == 0 and driver.capabilities.own_netns else "host"
    if mode == "netns":
        return NetnsNetwork(machine_subnet(config), config.host_names())
    if mode == "host":
        return HostNetwork(config.host(), machine_subnet(config))
    raise ValueError(f"unknown network mode {config.network!r}: use auto, netns or host")


def make_fence(config: WorkerConfig, network: Network) -> NetworkFence | None:
    """The fence that keeps networks apart over IPv4, for a worker whose machines have
    namespaces of their own (machines sharing the host's network have none to fence)."""
    if not isinstance(network, NetnsNetwork):
        return None
    host = host_field(ipaddress.IPv4Network(network.subnet))
    return NetworkFence(network, fence4_table_name(config.cluster_id, host),
                        private=config.private_network,
                        other_table=None if config.private_network
                        else table_name(config.cluster_id, host))


def make_private_network(config: WorkerConfig, network: Network) -> PrivateNetwork | None:
    """The private network the config asks for: it needs a namespace per machine."""
    if config.resolv_conf is None:
        return None
    if not isinstance(network, NetnsNetwork) or not config.cluster_id:
        raise ValueError("--private-network needs a network namespace per machine: run the "
                         "worker as root with --network netns (or auto) and a cluster id")
    network.links = True  # the private network's attach takes each one's (``take_link``)
    return PrivateNetwork(
        network=network, cluster_id=config.cluster_id, name=config.name, region=config.region,
        data_dir=config.data_dir, resolv_conf=config.resolv_conf,
        endpoint_host=config.advertise_host or config.host(),
        wireguard_port=config.wireguard_port, flycast_proxy=config.flycast_proxy)
