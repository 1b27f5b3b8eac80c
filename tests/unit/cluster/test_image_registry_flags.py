"""Where the cluster's image registry is told, and how it is reached: by `bodega up`'s
components and by a joined host's, its certificate checked against the cluster CA."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from bodega.cluster.components import components_for
from bodega.cluster.config import ClusterConfig
from bodega.cluster.joined import JoinedHost, JoinedWorker, joined_components

DATA = Path("/var/lib/bodega")
UP = ClusterConfig(data_dir=DATA, token="t", regions=("ams",), workers_per_region=1,
                   registry_port=5050, host="192.0.2.1", advertise="192.0.2.1",
                   cert_lifetime=90.0)


def flag(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


def test_up_serves_its_registry_with_a_certificate_from_the_ca_and_names_that_ca() -> None:
    argv = {c.role: c.argv for c in components_for(UP)}
    assert flag(argv["registry"], "--listen") == "192.0.2.1:5050"
    assert flag(argv["registry"], "--ca-dir") == str(DATA / "tls")
    assert flag(argv["registry"], "--cert-validity") == "90s"  # as every component's
    for role in ("worker", "broker"):
        assert flag(argv[role], "--image-registry") == "192.0.2.1:5050"
        assert flag(argv[role], "--image-registry-ca") == str(DATA / "ca.crt")


def test_without_internal_tls_the_registry_is_plain_and_no_ca_is_named() -> None:
    argv = {c.role: c.argv for c in components_for(dataclasses.replace(
        UP, internal_tls=False, advertise=None, host="127.0.0.1"))}
    assert "--ca-dir" not in argv["registry"]
    for role in ("worker", "broker"):
        assert flag(argv[role], "--image-registry") == "127.0.0.1:5050"
        assert "--image-registry-ca" not in argv[role]


def test_a_joined_hosts_workers_and_broker_check_host_1s_registry_by_the_ca(
        tmp_path: Path) -> None:
    host = JoinedHost(cluster_id="abcde", ca_sha256="00", region="syd", advertise="192.0.2.2",
                      join="192.0.2.1:4281", api_url="http://192.0.2.1:4280", seeds=["x:1"],
                      workers=[JoinedWorker(name="syd-a-1", subnet="10.209.128.0/24")],
                      image_registry="192.0.2.1:5050", broker="broker-syd-a")
    ports = {name: 7000 + i for i, name in enumerate(host.member_names())}
    argv = {c.role: c.argv for c in joined_components(host, tmp_path, ports, driver="auto",
                                                      log_level="info")}
    for role in ("worker", "broker"):
        assert flag(argv[role], "--image-registry") == "192.0.2.1:5050"
        assert flag(argv[role], "--image-registry-ca") == str(tmp_path / "ca.crt")
    alone = host.model_copy(update={"image_registry": None})
    argv = {c.role: c.argv for c in joined_components(alone, tmp_path, ports, driver="auto",
                                                      log_level="info")}
    assert "--image-registry-ca" not in argv["worker"]


def test_up_workers_advertise_their_hosts_registry_and_its_broker_does_not_take_the_flag(
        ) -> None:
    argv = {c.role: c.argv for c in components_for(UP)}
    assert "--image-registry-here" in argv["worker"]
    assert "--image-registry-here" not in argv["broker"]
    bare = {c.role: c.argv for c in components_for(dataclasses.replace(UP, registry_port=0))}
    assert "registry" not in bare
    assert "--image-registry-here" not in bare["worker"]


def test_a_joined_server_runs_its_own_registry_and_its_workers_pull_from_it_first(
        tmp_path: Path) -> None:
    """Every server host runs the registry: a joined server's serves on its own address
    with a certificate its CA (kept in tls/) issues, and its workers and broker name it,
    the workers advertising it; a joined host that is no server runs none."""
    host = JoinedHost(cluster_id="abcde", ca_sha256="00", region="syd", advertise="192.0.2.2",
                      join="192.0.2.1:4281", api_url="http://192.0.2.1:4280", seeds=["x:1"],
                      workers=[JoinedWorker(name="syd-a-1", subnet="10.209.128.0/24")],
                      image_registry="192.0.2.1:5050", broker="broker-syd-a", server=True)
    ports = {name: 7000 + i for i, name in enumerate(host.member_names())}
    components = joined_components(host, tmp_path, ports, driver="auto", log_level="info",
                                   own_registry="192.0.2.2:5051")
    assert components[0].role == "registry"  # first: its workers pull from it
    argv = {c.role: c.argv for c in components}
    assert flag(argv["registry"], "--listen") == "192.0.2.2:5051"
    assert flag(argv["registry"], "--ca-dir") == str(tmp_path / "tls")
    for role in ("worker", "broker"):
        assert flag(argv[role], "--image-registry") == "192.0.2.2:5051"
        assert flag(argv[role], "--image-registry-ca") == str(tmp_path / "ca.crt")
    assert "--image-registry-here" in argv["worker"]
    plain = {c.role: c.argv for c in joined_components(host, tmp_path, ports, driver="auto",
                                                       log_level="info")}
    assert "registry" not in plain
    assert "--image-registry-here" not in plain["worker"]
    assert flag(plain["worker"], "--image-registry") == "192.0.2.1:5050"
