"""The worker's configuration, built once by the entry point and passed in."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from bodega.model.capacity import Totals
from bodega.registry.sealing.keyfile import KeyringSource
from bodega.runtime.failpoints import Failpoints
from bodega.runtime.lifecycle import StopCause
from bodega.worker.host.core.names import HostNames

# Held (flock) by the worker running on a data dir, for as long as it runs.
LOCK_FILE = "worker.lock"
STORE_FILE = "worker.db"  # its machines' records: a worker ran on the data dir


@dataclass(frozen=True)
class JobSettings:
    """The batch layer on this worker (docs/jobs.md): as a home, and as a runner of tasks."""

    queue_limit: int = 100_000  # tasks queued here at most: a submit past it is a 429
    finished_ttl: float = 24 * 3600.0  # finished jobs are kept this long...
    keep_per_app: int = 1000  # ...and at most this many per app
    probe_ratio: float = 2.0  # late binding's d: reservations placed per task to top up
    clock_file: Path | None = None  # periodic jobs fire by the time written here (tests)
    warm_slots: bool = True  # host-program tasks run one after another in kept machines
    # The jobs door's port on the listen host (0: any free one; None: no door). A worker
    # with no secrets key opens none: it could check no pass.
    door_port: int | None = 0
    sync_submits: bool = False  # fsync each submit before its answer (else within SYNC_EVERY)


@dataclass(frozen=True)
class SnapshotSettings:
    """Volume snapshots off their host (docs/volumes.md)."""

    copies: int = 1  # other workers each snapshot is sent to
    every: float = 86400.0  # seconds between a volume's scheduled snapshots
    upkeep: float = 30.0  # seconds between passes: schedule, retries, expiry


@dataclass(frozen=True)
class WorkerConfig:
    name: str
    region: str
    data_dir: Path
    listen_host: str = "127.0.0.1"
    listen_port: int = 0
    advertise_host: str | None = None  # address others use to reach this worker
    driver: str = "process"
    totals: Totals = field(default_factory=lambda: Totals(cpus=2, memory_mb=2048, disk_gb=10))
    # The cluster's secrets key: opens the app secrets machines are given ("" for none).
    secrets_key: str = ""
    # Key, certificate and CA for mutual TLS on the internal API (bodega.runtime.tls.files);
    # None: plain HTTP with no authentication, for measurement on loopback only.
    tls_dir: Path | None = None
    # Carried by every kernel object the worker makes (namespaces, links, cgroups), so sweeps
    # take this cluster's objects only; "" for a worker that makes none (fake, null, host).
    cluster_id: str = ""
    machine_subnet: str | None = None  # e.g. 10.209.5.0/24; None: derived from the name
    network: str = "auto"  # auto | netns | host
    # The private network (bodega.networking): 6PN addresses, isolation, resolver, overlay.
    private_network: bool = False
    wireguard_port: int = 51820  # the overlay's UDP port on this host
    flycast_proxy: tuple[str, int] | None = None  # the proxy Flycast addresses relay to
    machine_user: str | None = "nobody"  # run machines as this user when the worker is root
    log_max_bytes: int = 1 << 20
    reservation_ttl: float = 10.0
    # What stops the machines with the worker: ``--stop-machines-on-exit`` both signals,
    # ``--stop-machines-on-interrupt`` (what `bodega up` and `bodega join` pass) SIGINT only,
    # so that their SIGTERM (systemd's stop, an upgrade) leaves the machines running. A
    # worker whose supervisor died (``ORPHANED``) never stops them: nobody asked it to.
    stop_machines_on: frozenset[StopCause] = frozenset()
    failpoints: Failpoints = field(default_factory=Failpoints)
    cgroups: bool = True
    fsync: bool = True  # False only to simulate many hosts on one disk (benchmarks)
    # False: no registry node, no publishing (a host whose view is given some other way:
    # scale benchmarks that simulate a thousand hosts in one process).
    gossip: bool = True
    # Step records of finished operations older than this are dropped; events are kept.
    log_keep_seconds: float = 7 * 24 * 3600.0
    gossip_host: str | None = None  # the registry's UDP endpoint; None: the listen host
    gossip_port: int = 0
    join: tuple[str, ...] = ()  # gossip host:port of members to join through
    gossip_keyring: KeyringSource | None = None  # required when gossip is on
    registry_agent: Path | None = None  # the host's registry agent's data dir (None: our own)
    tombstone_ttl: float = 3600.0  # destroyed machines stay listed this long in the registry
    # Images: the registry a reference without a host is pulled from (`bodega up` runs one),
    # credentials for it (never logged), the runtime, and the cache's size budget.
    image_registry: str | None = None
    # The CA (PEM) ``image_registry``'s certificate is checked by: reached over HTTPS, this
    # worker's own certificate shown (the cluster's registry lets workers pull by it).
    image_registry_ca: str | None = None
    # ``image_registry`` runs on this worker's host (a server host's): advertised in its
    # row, and pulled from first.
    image_registry_here: bool = False
    registry_username: str | None = None
    registry_password: str | None = None
    oci_runtime: str = "auto"  # crun if installed, else runc (drivers/oci/core/runtimes.py)
    # Try runsc at start, and offer the sandbox isolation if it runs (docs/isolation.md).
    sandbox: bool = True
    # Boot a probe VM at start (once per host: the verdict is kept by qemu and kernel), and
    # offer the vm isolation if it boots; the kernel bodega boots is unpacked here.
    vm: bool = True
    vm_kernel: Path = Path("/var/lib/bodega/vm-kernel")
    image_cache_gb: float = 10.0
    jobs: JobSettings = field(default_factory=JobSettings)
    snapshots: SnapshotSettings = field(default_factory=SnapshotSettings)

    @property
    def registry_dir(self) -> Path:
        return self.data_dir / "registry"

    @property
    def lock_path(self) -> Path:
        return self.data_dir / LOCK_FILE

    @property
    def store_path(self) -> Path:
        return self.data_dir / STORE_FILE

    @property
    def resolv_conf(self) -> Path | None:
        """The private network's resolv.conf (its resolver, for every machine of the host);
        None without a private network."""
        return self.data_dir / "resolv.conf" if self.private_network else None

    @property
    def resolv_conf_ahead(self) -> Path | None:
        """What parked launchers bind over /etc/resolv.conf ahead of a start: the private
        network's, where machines run as users of their own (a machine run as root could
        remount it and write the host's file; it gets its own copy at its start)."""
        return self.resolv_conf if self.machine_user is not None else None

    @property
    def homes_ahead(self) -> bool:
        """Whether a launcher parked at a free address makes the next machine's directory
        ahead and binds it: where machines run as users of their own, from that directory."""
        return self.machine_user is not None

    @property
    def machines_dir(self) -> Path:
        return self.data_dir / "machines"

    @property
    def volumes_dir(self) -> Path:
        return self.data_dir / "volumes"

    @property
    def snapshots_dir(self) -> Path:
        return self.data_dir / "snapshots"

    def snapshot_dir(self, snapshot_id: str) -> Path:
        return self.snapshots_dir / snapshot_id

    @property
    def images_dir(self) -> Path:
        return self.data_dir / "images"

    def machine_dir(self, machine_id: str) -> Path:
        return self.machines_dir / machine_id

    def volume_dir(self, volume_id: str) -> Path:
        return self.volumes_dir / volume_id

    def host(self) -> str:
        return self.advertise_host or self.listen_host

    def host_names(self) -> HostNames:
        """The names of this worker's kernel objects; a worker making any needs a cluster id."""
        if not self.cluster_id:
            raise ValueError("a worker that makes namespaces or cgroups needs a cluster id "
                             "(--cluster-id, or the one stored in its data dir)")
        return HostNames(self.cluster_id)

    def cgroup_scope(self) -> str:
        """The worker's cgroup directory under ``bodega/`` (and its runtime's state dir)."""
        return self.host_names().cgroup_scope(self.name)
