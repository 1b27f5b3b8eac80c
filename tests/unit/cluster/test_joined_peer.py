"""What a joined host runs: its workers, and a broker and a proxy as host 1's, unless it opted
out; a server's broker holds the CA and the join listener."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bodega.cluster.joined import JoinedHost, JoinedWorker, joined_components


def flag(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


def joined(**more: Any) -> JoinedHost:
    return JoinedHost(cluster_id="abcde", ca_sha256="00", region="syd", advertise="192.0.2.2",
                      join="192.0.2.1:4281", api_url="http://192.0.2.1:4280", seeds=["x:1"],
                      workers=[JoinedWorker(name="syd-a-1", subnet="10.209.128.0/24")],
                      proxy="192.0.2.1:8080", **more)


def by_role(host: JoinedHost, data: Path, **kw: Any) -> dict[str, list[str]]:
    ports = {name: 7000 + i for i, name in enumerate(host.member_names())}
    return {c.role: c.argv for c in joined_components(host, data, ports, driver="process",
                                                      log_level="info", **kw)}


def test_a_joined_peer_serves_the_api_and_the_proxy_on_its_own_address(tmp_path: Path) -> None:
    host = joined(broker="broker-syd-a", proxy_name="proxy-syd-a", private_network=True)
    argv = by_role(host, tmp_path)
    assert set(argv) == {"worker", "broker", "proxy"}
    assert flag(argv["broker"], "--listen") == "192.0.2.2:4280"
    assert flag(argv["broker"], "--name") == "broker-syd-a"
    assert "--ca-dir" not in argv["broker"]
    assert "--join-listen" not in argv["broker"]
    assert flag(argv["proxy"], "--listen") == "192.0.2.2:8080"
    # Both gossip on ports of their own, joined to the seeds and the host's workers.
    assert flag(argv["broker"], "--gossip-listen") == "192.0.2.2:7001"
    assert flag(argv["proxy"], "--join") == "x:1,192.0.2.2:7000"
    # The host's workers relay Flycast to the host's own proxy, not host 1's.
    assert flag(argv["worker"], "--flycast-proxy") == "192.0.2.2:8080"
    assert host.own_api == "http://192.0.2.2:4280"


def test_its_proxy_serves_tls_only_with_the_edge_certificate_it_was_given(
        tmp_path: Path) -> None:
    host = joined(broker="broker-syd-a", proxy_name="proxy-syd-a", proxy_tls_port=9443)
    assert "--tls-listen" not in by_role(host, tmp_path)["proxy"]
    edge = tmp_path / "proxy" / "edge" / "default.pem"
    edge.parent.mkdir(parents=True)
    edge.write_text("pem")
    proxy = by_role(host, tmp_path)["proxy"]
    assert flag(proxy, "--tls-listen") == "192.0.2.2:9443"
    assert flag(proxy, "--tls-cert") == str(edge)
    assert "--tls-listen" not in by_role(host, tmp_path, proxy_tls=False)["proxy"]


def test_a_server_broker_holds_the_ca_and_lets_hosts_join(tmp_path: Path) -> None:
    host = joined(broker="broker-syd-a", proxy_name="proxy-syd-a", server=True,
                  join_subnets="10.209.128.0/17", join_port=4291)
    broker = by_role(host, tmp_path)["broker"]
    assert flag(broker, "--ca-dir") == str(tmp_path / "tls")
    assert flag(broker, "--join-listen") == "192.0.2.2:4291"
    assert flag(broker, "--join-subnets") == "10.209.128.0/17"
    assert flag(broker, "--join-proxy") == "192.0.2.2:8080"


def test_a_worker_only_host_and_one_from_before_peers_run_workers_alone(
        tmp_path: Path) -> None:
    assert set(by_role(joined(), tmp_path)) == {"worker"}
    old = ('{"cluster_id": "abcde", "ca_sha256": "00", "region": "syd", "advertise": "a", '
           '"join": "b:1", "api_url": "http://c", "seeds": [], "workers": []}')
    before = JoinedHost.model_validate_json(old)
    assert (before.broker, before.proxy_name, before.server, before.own_api) == (
        None, None, False, None)
    assert joined().flycast == "192.0.2.1:8080"  # no proxy here: the one it was told
