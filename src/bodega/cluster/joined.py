"""A host that joined a cluster: what it keeps (``joined.json``) and what it runs.

``joined.json`` (in the host's data dir) names the cluster, the region, the
address the host serves on, the workers it was given names and machine
subnets for, where to gossip, and whether its workers run the private network
(kept once given: its machines then have private addresses). With it,
``bodega join`` starts the same workers again after a restart, with the keys
and certificates they keep in ``workers/<name>/tls`` and renew themselves: no
token is needed again.

Each worker runs as ``bodega up`` runs its own (``components.py``): a ready
file and a log file of its own, machines stopped when it stops, restarted
with a backoff if it crashes (and re-adopting its machines).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict

from bodega.cluster.components import Component, bodega_argv, private_network_args
from bodega.registry.membership import keyfile
from bodega.runtime.lifecycle import write_json_atomic

JOINED = "joined.json"
JOIN_LOCK = "join.lock"  # held by `bodega join` while it runs


class JoinedWorker(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    subnet: str | None = None


class JoinedHost(BaseModel):
    model_config = ConfigDict(extra="forbid")
    cluster_id: str
    ca_sha256: str
    region: str
    advertise: str  # where this host's workers serve and gossip
    join: str  # the join listener it joined through (host:port)
    api_url: str
    seeds: list[str]
    workers: list[JoinedWorker]
    image_registry: str | None = None
    proxy: str | None = None  # the proxy's public host:port, for Flycast
    # As the cluster ran it at the join, or as `--[no-]private-network` said since; kept:
    # its machines have 6PN addresses.
    private_network: bool = False
    wireguard_port: int = 51820  # the first worker's; the next ones take the next ports
    agent: str | None = None  # its registry agent's name (its certificate is in agent/tls)
    registry_agent: bool = False  # the cluster runs one per host: this host runs its agent

    @classmethod
    def read(cls, data_dir: Path) -> JoinedHost | None:
        try:
            return cls.model_validate_json((data_dir / JOINED).read_bytes())
        except FileNotFoundError:
            return None

    def write(self, data_dir: Path) -> None:
        write_json_atomic(data_dir / JOINED, self.model_dump(mode="json"))


def worker_dir(data_dir: Path, name: str) -> Path:
    return data_dir / "workers" / name


def worker_tls(data_dir: Path, name: str) -> Path:
    return worker_dir(data_dir, name) / "tls"


def agent_dir(data_dir: Path) -> Path:
    return data_dir / "agent"


def agent_tls(data_dir: Path) -> Path:
    return agent_dir(data_dir) / "tls"


def joined_components(host: JoinedHost, data_dir: Path, gossip_ports: dict[str, int], *,
                      driver: str, log_level: str,
                      extra_worker_args: tuple[str, ...] = ()) -> list[Component]:
    run_dir, logs = data_dir / "run", data_dir / "logs"
    images = ("--image-registry", host.image_registry) if host.image_registry else ()
    components = []
    hosted: tuple[str, ...] = ()
    seeds = list(host.seeds)
    if host.registry_agent and host.agent:  # first: the workers read its replica
        gossip = f"{host.advertise}:{gossip_ports.get(host.agent, 0)}"
        ready = run_dir / "agent.json"
        components.append(Component("agent", host.agent, host.region, bodega_argv(
            "agent", "--name", host.agent, "--region", host.region,
            "--data-dir", str(agent_dir(data_dir)), "--listen", f"{host.advertise}:0",
            "--gossip-listen", gossip, "--gossip-keyring", str(data_dir / keyfile.FILE_NAME),
            "--join", ",".join(host.seeds), "--exit-with-parent", "--ready-file", str(ready),
            "--log-level", log_level), ready, logs / "agent.log"))
        hosted = ("--registry-agent", str(agent_dir(data_dir)))
        seeds = [gossip, *seeds]
    for index, worker in enumerate(host.workers):
        ready = run_dir / f"{worker.name}.json"
        argv = bodega_argv(
            "worker", "--name", worker.name, "--region", host.region,
            "--data-dir", str(worker_dir(data_dir, worker.name)),
            "--listen", f"{host.advertise}:0", "--driver", driver,
            *(("--machine-subnet", worker.subnet) if worker.subnet else ()),
            "--cluster-id", host.cluster_id,
            "--stop-machines-on-exit", "--exit-with-parent",
            "--ready-file", str(ready), "--log-level", log_level,
            "--gossip-listen", f"{host.advertise}:{gossip_ports.get(worker.name, 0)}",
            "--gossip-keyring", str(data_dir / keyfile.FILE_NAME),
            "--join", ",".join(seeds), *images, *hosted,
            *private_network_args(host.private_network, host.wireguard_port + index,
                                  host.proxy),
            *extra_worker_args)
        components.append(Component("worker", worker.name, host.region, argv, ready,
                                    logs / f"{worker.name}.log"))
    return components
