"""What `bodega up` says answers: the API and the proxy where they listen."""

from __future__ import annotations

from pathlib import Path

from bodega.cli.daemons.up_banner import entry_lines
from bodega.cluster.config import ClusterConfig


def test_a_local_cluster_names_apps_by_their_localhost_names() -> None:
    config = ClusterConfig(data_dir=Path("/d"), token="t", proxy_tls_port=8443,
                           proxy_tls_cert=Path("/d/proxy/edge/default.pem"))
    assert entry_lines(config) == [
        "Machines API: http://127.0.0.1:4280/v1   Proxy: http://<app>.localhost:8080/",
        "HTTPS: https://<app>.localhost:8443/ (trust the cluster CA: curl --cacert /d/ca.crt)"]


def test_an_advertised_cluster_names_the_address_its_proxy_listens_on() -> None:
    # <app>.localhost names 127.0.0.1, where an advertised proxy does not listen.
    config = ClusterConfig(data_dir=Path("/d"), token="t", advertise="192.0.2.1",
                           host="192.0.2.1", proxy_tls_port=8443,
                           proxy_tls_cert=Path("/d/proxy/edge/default.pem"))
    http, https = entry_lines(config)
    assert http.startswith("Machines API: http://192.0.2.1:4280/v1   Proxy: "
                           "http://192.0.2.1:8080/ with Host: <app>.localhost")
    assert "curl -H 'Host: <app>.localhost' http://192.0.2.1:8080/" in http
    assert "http://<app>.localhost:8080/" not in http
    assert "curl --resolve <app>.localhost:8443:192.0.2.1 --cacert /d/ca.crt" in https
