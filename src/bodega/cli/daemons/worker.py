"""``bodega worker``: run the per-host agent."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer

from bodega.cli.daemons.core.listeners import Listener, listening
from bodega.cli.daemons.internal_links import tls_dir_for
from bodega.cli.daemons.options import (
    ExitWithParentOption,
    GossipKeyring,
    GossipListenOption,
    InternalTlsOption,
    JoinOption,
    LogLevelOption,
    ReadyFileOption,
    RegistryAgentOption,
    SecretsKeyOption,
    TlsDirOption,
    gossip_keyring,
)
from bodega.cli.session.errors import friendly
from bodega.model.capacity import CPU_KINDS, Totals
from bodega.registry.membership import parse_seed
from bodega.runtime import cluster_id, hostinfo
from bodega.runtime.failpoints import Failpoints
from bodega.runtime.lifecycle import StopCause, daemon_runtime, run_daemon
from bodega.runtime.logs import configure
from bodega.runtime.ready import Ready
from bodega.runtime.tls.files import read_ca_file
from bodega.worker.config import JobSettings, SnapshotSettings, WorkerConfig
from bodega.worker.daemon import Worker


def parse_gpus(values: list[str]) -> dict[str, int]:
    gpus: dict[str, int] = {}
    for value in values:
        kind, _, count = value.partition("=")
        if not kind or not count.isdigit():
            raise ValueError(f"--gpus takes kind=count, got {value!r}")
        gpus[kind] = int(count)
    return gpus


@friendly
def worker(
    region: Annotated[str, typer.Option(help="Region code this worker supplies, e.g. ams")],
    data_dir: Annotated[Path, typer.Option(help="Where the worker keeps its state")],
    name: Annotated[str | None, typer.Option(help="Unique worker name (default: hostname)")] = None,
    listen: Annotated[str, typer.Option(help="host:port of the internal API")] = "127.0.0.1:0",
    advertise: Annotated[str | None, typer.Option(help="Address others use to reach it")] = None,
    driver: Annotated[str, typer.Option(
        help="auto (process, plus oci when root with runc or crun), process, oci, null or fake")]
    = "auto",
    image_registry: Annotated[str | None, typer.Option(
        help="Registry host:port for image references that name none")] = None,
    image_registry_ca: Annotated[Path | None, typer.Option(
        help="A CA certificate (PEM): reach --image-registry over HTTPS, its certificate "
             "checked against this CA, showing this worker's own certificate (the "
             "cluster's registry lets workers pull by it)")] = None,
    image_registry_here: Annotated[bool, typer.Option(
        help="--image-registry runs on this host (a server host's): advertise it in this "
             "worker's row, for every host to pull from and deploys to push to, and pull "
             "from it first")] = False,
    registry_username: Annotated[str | None, typer.Option(
        envvar="BODEGA_REGISTRY_USERNAME", help="Registry user (basic or bearer auth)")] = None,
    registry_password: Annotated[str | None, typer.Option(
        envvar="BODEGA_REGISTRY_PASSWORD", help="Registry password", show_default=False)]
    = None,
    image_cache_gb: Annotated[float, typer.Option(help="Image cache budget, GB")] = 10.0,
    oci_runtime: Annotated[str, typer.Option(
        help="OCI runtime for image machines: auto (crun if installed, else runc), runc or crun")]
    = "auto",
    sandbox: Annotated[bool, typer.Option(
        help="Try runsc at start and offer the sandbox isolation if it runs")] = True,
    vm: Annotated[bool, typer.Option(
        help="Boot a probe VM at start (once per host) and offer the vm isolation if it "
             "boots")] = True,
    vm_kernel: Annotated[Path, typer.Option(
        help="Directory of the kernel vm machines boot (boot/vmlinuz-*, lib/modules/*)")]
    = Path("/var/lib/bodega/vm-kernel"),
    cpus: Annotated[int | None, typer.Option(help="CPUs to offer (default: all)")] = None,
    memory_mb: Annotated[int | None, typer.Option(help="Memory to offer (default: all)")] = None,
    disk_gb: Annotated[int | None, typer.Option(help="Disk for volumes (default: free)")] = None,
    shared_cpu_ratio: Annotated[float, typer.Option(help="Shared vCPUs per physical CPU")] = 4.0,
    cpu_kinds: Annotated[str, typer.Option(help="CPU kinds offered")] = ",".join(CPU_KINDS),
    gpus: Annotated[list[str] | None, typer.Option(help="GPUs as kind=count")] = None,
    secrets_key: SecretsKeyOption = None,
    tls_dir: TlsDirOption = None,
    internal_tls: InternalTlsOption = "on",
    machine_subnet: Annotated[str | None, typer.Option(help="Machine /24, e.g. 10.209.5.0/24")]
    = None,
    cluster: Annotated[str | None, typer.Option(
        "--cluster-id", help="Id every namespace, link and cgroup of this worker carries "
                             "(default: the one in the data dir's cluster-id, made once)")]
    = None,
    network: Annotated[str, typer.Option(help="auto, netns (root) or host")] = "auto",
    private_network: Annotated[bool, typer.Option(
        help="Give machines private IPv6 addresses (6PN), isolate networks with nftables, "
             "serve .internal names and peer with other hosts over WireGuard")] = False,
    wireguard_port: Annotated[int, typer.Option(help="UDP port of this host's WireGuard "
                                                     "overlay (with --private-network)")]
    = 51820,
    flycast_proxy: Annotated[str | None, typer.Option(
        help="host:port of the proxy's public listener: machines reach their network's "
             "Flycast addresses through it (with --private-network)")] = None,
    machine_user: Annotated[str, typer.Option(help="Run machines as this user when root")]
    = "nobody",
    reservation_ttl: Annotated[float, typer.Option(help="Seconds an unclaimed hold lasts")] = 10.0,
    stop_machines_on_exit: Annotated[bool, typer.Option(
        help="Stop machines when stopped with SIGINT or SIGTERM (never when killed, or when "
             "the supervisor that started it is gone)")] = False,
    stop_machines_on_interrupt: Annotated[bool, typer.Option(
        help="Stop machines when stopped with SIGINT (Ctrl-C) only: SIGTERM leaves them "
             "running for the next start to re-adopt (what bodega up and join pass)")]
    = False,
    job_queue_limit: Annotated[int, typer.Option(
        min=1, help="Job tasks queued here (as their home) at most: a submit past it is a 429")]
    = 100_000,
    job_ttl: Annotated[float, typer.Option(
        min=0, help="Seconds a finished job is kept (status, logs)")] = 24 * 3600.0,
    jobs_kept: Annotated[int, typer.Option(
        min=1, help="Finished jobs kept per app (the oldest go first)")] = 1000,
    probe_ratio: Annotated[float, typer.Option(
        min=1.0, help="Late binding: reservations placed per queued task")] = 2.0,
    warm_slots: Annotated[bool, typer.Option(
        help="Run host-program job tasks one after another in kept slot machines "
             "(--no-warm-slots: a machine per task)")] = True,
    jobs_sync_submits: Annotated[bool, typer.Option(
        help="fsync each job's submit before answering it (default: the submit is in the "
             "jobs database's WAL when answered, safe from any process's crash, and fsync'd "
             "within 50 ms, with the submits around it)")] = False,
    jobs_door: Annotated[str, typer.Option(
        help="Port of the jobs door on the --listen host, where clients holding a jobs pass "
             "submit to a job's home directly (0: any free one; off: no door)")] = "0",
    snapshot_copies: Annotated[int, typer.Option(
        min=0, help="Other workers each volume snapshot is sent to (0: kept on this host "
                    "only)")] = 1,
    snapshot_every: Annotated[float, typer.Option(
        min=1, help="Seconds between a volume's scheduled snapshots")] = 86400.0,
    snapshot_upkeep: Annotated[float, typer.Option(
        min=0.1, help="Seconds between passes that take scheduled snapshots, retry copies "
                      "and remove expired ones")] = 30.0,
    gossip_listen: GossipListenOption = None,
    join: JoinOption = None,
    keyring: GossipKeyring = None,
    registry_agent: RegistryAgentOption = None,
    ready_file: ReadyFileOption = None,
    exit_with_parent: ExitWithParentOption = False,
    # Periodic jobs fire by the epoch seconds written in this file, not the wall clock: how
    # the tests take a schedule across a daylight-saving change.
    job_clock_file: Annotated[Path | None, typer.Option(hidden=True)] = None,
    failpoints: Annotated[str | None, typer.Option(envvar="BODEGA_FAILPOINTS", hidden=True)]
    = None,
    log_level: LogLevelOption = "info",
) -> None:
    """Run a worker: the single source of truth for the machines on this host."""
    worker_name = name or hostinfo.hostname()
    host, port = hostinfo.split_host_port(listen, 0)
    gossip_host, gossip_port = hostinfo.split_host_port(gossip_listen or f"{host}:0", 0)
    seeds = hostinfo.comma_list(join)
    for seed in seeds:
        parse_seed(seed)  # a ValueError names the bad one before anything starts
    kinds = hostinfo.comma_list(cpu_kinds)
    for kind in kinds:
        if kind not in CPU_KINDS:
            raise ValueError(f"unknown cpu kind {kind!r}: use shared or performance")
    if shared_cpu_ratio < 1:
        raise ValueError("--shared-cpu-ratio must be at least 1")
    keys = gossip_keyring(keyring)
    data_dir = data_dir.resolve()
    tls = tls_dir_for(data_dir, tls_dir, internal_tls, [host, *([advertise] if advertise else [])],
                      "worker", worker_name)
    cid = cluster_id.check(cluster) if cluster else cluster_id.ensure(data_dir)
    config = WorkerConfig(
        name=worker_name, region=region, data_dir=data_dir, listen_host=host, listen_port=port,
        advertise_host=advertise, driver=driver,
        totals=Totals(
            cpus=cpus or hostinfo.cpu_count(), memory_mb=memory_mb or hostinfo.memory_mb(),
            disk_gb=disk_gb if disk_gb is not None else hostinfo.disk_gb(data_dir),
            gpus=parse_gpus(gpus or []), shared_cpu_ratio=shared_cpu_ratio, cpu_kinds=kinds,
        ),
        secrets_key=secrets_key or "", tls_dir=tls, cluster_id=cid,
        machine_subnet=machine_subnet, network=network, private_network=private_network,
        wireguard_port=wireguard_port,
        flycast_proxy=hostinfo.split_host_port(flycast_proxy, 80) if flycast_proxy else None,
        machine_user=machine_user or None, reservation_ttl=reservation_ttl,
        stop_machines_on=stop_causes(on_exit=stop_machines_on_exit,
                                     on_interrupt=stop_machines_on_interrupt),
        failpoints=Failpoints.parse(failpoints),
        gossip_host=gossip_host, gossip_port=gossip_port, join=seeds, gossip_keyring=keys,
        registry_agent=registry_agent.resolve() if registry_agent else None,
        image_registry=image_registry,
        image_registry_ca=_registry_ca(image_registry, image_registry_ca),
        image_registry_here=image_registry_here and image_registry is not None,
        registry_username=registry_username,
        registry_password=registry_password, image_cache_gb=image_cache_gb,
        oci_runtime=oci_runtime, sandbox=sandbox, vm=vm, vm_kernel=vm_kernel,
        jobs=JobSettings(queue_limit=job_queue_limit, finished_ttl=job_ttl,
                         keep_per_app=jobs_kept, probe_ratio=probe_ratio,
                         clock_file=job_clock_file, warm_slots=warm_slots,
                         door_port=_door_port(jobs_door), sync_submits=jobs_sync_submits),
        snapshots=SnapshotSettings(copies=snapshot_copies, every=snapshot_every,
                                   upkeep=snapshot_upkeep),
    )
    configure(log_level, f"worker[{worker_name}]")
    daemon_runtime()
    with listening(Listener("--listen", "TCP", port),
                   Listener("--gossip-listen", "UDP", gossip_port),
                   Listener("--wireguard-port", "UDP", wireguard_port)):
        asyncio.run(_run(config, ready_file, exit_with_parent))


def stop_causes(*, on_exit: bool, on_interrupt: bool) -> frozenset[StopCause]:
    """What stops the machines with the worker, from its two flags."""
    if on_exit:
        return frozenset({StopCause.INTERRUPT, StopCause.TERMINATE})
    return frozenset({StopCause.INTERRUPT}) if on_interrupt else frozenset()


async def _run(config: WorkerConfig, ready_file: Path | None, exit_with_parent: bool) -> None:
    daemon = Worker(config)
    await run_daemon(daemon.start, daemon.stop, exit_with_parent=exit_with_parent,
                     ready_file=ready_file,
                     ready=lambda: Ready(url=daemon.url, gossip=daemon.gossip,
                                         name=config.name, region=config.region,
                                         warnings=daemon.notices))


def _registry_ca(registry: str | None, ca: Path | None) -> str | None:
    """The PEM of ``--image-registry-ca``, read once here; it names the registry's CA."""
    if ca is not None and registry is None:
        raise ValueError("--image-registry-ca is the CA of --image-registry: give both")
    return read_ca_file(ca, "--image-registry-ca")


def _door_port(given: str) -> int | None:
    if given == "off":
        return None
    if not given.isdigit() or int(given) > 65535:
        raise ValueError(f"--jobs-door must be a port (0: any free one) or off, not {given!r}")
    return int(given)
