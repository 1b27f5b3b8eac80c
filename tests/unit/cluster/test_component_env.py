"""Which secrets each component of ``bodega up`` starts with."""

from __future__ import annotations

from pathlib import Path

from bodega.cluster.components import component_env
from bodega.cluster.config import ClusterConfig

CONFIG = ClusterConfig(data_dir=Path("/nowhere"), token="admin-token", cluster_secret="secret")
# `bodega up` run with the token exported, and a stale secret left in the shell.
INHERITED = {"PATH": "/usr/bin", "BODEGA_API_TOKEN": "admin-token",
             "BODEGA_CLUSTER_SECRET": "stale"}


def test_only_the_broker_gets_the_admin_token() -> None:
    assert component_env(INHERITED, "broker", CONFIG)["BODEGA_API_TOKEN"] == "admin-token"
    for role in ("worker", "proxy"):
        env = component_env(INHERITED, role, CONFIG)
        assert "BODEGA_API_TOKEN" not in env
        assert "admin-token" not in env.values()


def test_every_component_gets_this_clusters_secret_and_the_rest_of_the_environment() -> None:
    for role in ("broker", "worker", "proxy"):
        env = component_env(INHERITED, role, CONFIG)
        assert env["BODEGA_CLUSTER_SECRET"] == "secret"
        assert env["PATH"] == "/usr/bin"
