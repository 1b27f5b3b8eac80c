"""What `bodega up --private-network` and `bodega join --private-network` give each worker.

Every worker of the cluster needs ``--private-network``, the one cluster id, a
WireGuard port of its own (workers on one host share its addresses) and the
proxy Flycast is relayed to; without the flag, none of it.
"""

from __future__ import annotations

from pathlib import Path

from bodega.cluster.components import components_for
from bodega.cluster.config import ClusterConfig
from bodega.cluster.joined import JoinedHost, JoinedWorker, joined_components


def flag(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


def test_up_gives_every_worker_the_network_the_cluster_id_and_a_port_of_its_own() -> None:
    config = ClusterConfig(data_dir=Path("/nowhere"), token="t", cluster_id="abcde",
                           regions=("ams", "syd"), workers_per_region=2, host="192.0.2.1",
                           proxy_port=8080, advertise="192.0.2.1", private_network=True,
                           wireguard_port=51900)
    components = components_for(config)
    workers = [c.argv for c in components if c.role == "worker"]
    assert len(workers) == 4
    assert all("--private-network" in argv for argv in workers)
    assert {flag(argv, "--cluster-id") for argv in workers} == {"abcde"}
    assert [flag(argv, "--wireguard-port") for argv in workers] == \
        ["51900", "51901", "51902", "51903"]
    assert {flag(argv, "--flycast-proxy") for argv in workers} == {"192.0.2.1:8080"}
    assert {flag(argv, "--network") for argv in workers} == {"netns"}
    broker = next(c.argv for c in components if c.role == "broker")
    assert flag(broker, "--join-proxy") == "192.0.2.1:8080"  # told to joining hosts


def test_up_without_the_flag_runs_no_private_network() -> None:
    config = ClusterConfig(data_dir=Path("/nowhere"), token="t", cluster_id="abcde")
    for component in components_for(config):
        assert "--private-network" not in component.argv
        assert "--wireguard-port" not in component.argv


def joined(**private: object) -> JoinedHost:
    return JoinedHost(cluster_id="abcde", ca_sha256="00", region="syd", advertise="192.0.2.2",
                      join="192.0.2.1:4281", api_url="http://192.0.2.1:4280", seeds=["x:1"],
                      workers=[JoinedWorker(name="syd-a-1", subnet="10.209.128.0/24"),
                               JoinedWorker(name="syd-a-2", subnet="10.209.129.0/24")],
                      proxy="192.0.2.1:8080", **private)


def test_a_joined_host_gives_its_workers_the_network_with_the_proxy_it_was_told() -> None:
    host = joined(private_network=True, wireguard_port=52000)
    workers = [c.argv for c in joined_components(host, Path("/nowhere"), {}, driver="process",
                                                 log_level="info")]
    assert all("--private-network" in argv for argv in workers)
    assert {flag(argv, "--cluster-id") for argv in workers} == {"abcde"}
    assert [flag(argv, "--wireguard-port") for argv in workers] == ["52000", "52001"]
    assert {flag(argv, "--flycast-proxy") for argv in workers} == {"192.0.2.1:8080"}


def test_a_joined_host_keeps_it_off_unless_asked_and_reads_a_file_from_before_it() -> None:
    workers = joined_components(joined(), Path("/nowhere"), {}, driver="process",
                                log_level="info")
    assert not any("--private-network" in c.argv for c in workers)
    old = ('{"cluster_id": "abcde", "ca_sha256": "00", "region": "syd", "advertise": "a", '
           '"join": "b:1", "api_url": "http://c", "seeds": [], "workers": []}')
    before = JoinedHost.model_validate_json(old)
    assert (before.private_network, before.proxy) == (False, None)


def test_up_gives_each_worker_the_wireguard_port_chosen_for_it() -> None:
    config = ClusterConfig(data_dir=Path("/nowhere"), token="t", cluster_id="abcde",
                           regions=("ams",), workers_per_region=2, private_network=True,
                           wireguard_ports={"ams-1": 27001, "ams-2": 24017})
    workers = [c.argv for c in components_for(config) if c.role == "worker"]
    assert [flag(argv, "--wireguard-port") for argv in workers] == ["27001", "24017"]
