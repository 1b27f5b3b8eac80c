"""Which secrets each component of ``bodega up`` starts with."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path

from bodega.cluster.components import component_env
from bodega.cluster.config import ClusterConfig

CONFIG = ClusterConfig(data_dir=Path("/nowhere"), token="admin-token", secrets_key="sealing")
# `bodega up` run with the token exported, and stale secrets left in the shell.
INHERITED = {"PATH": "/usr/bin", "BODEGA_API_TOKEN": "admin-token",
             "BODEGA_CLUSTER_SECRET": "stale",
             "BODEGA_SECRETS_KEY": "stale", "BODEGA_GOSSIP_KEYRING": "stale",
             "BODEGA_GOSSIP_KEYRING_FILE": "stale"}


def test_only_the_broker_gets_the_admin_token() -> None:
    assert component_env(INHERITED, "broker", CONFIG)["BODEGA_API_TOKEN"] == "admin-token"
    # The image registry lets a push in with it, knowing its SHA-256 alone; with no TLS (a
    # benchmark's cluster) it asks for nothing.
    registry = component_env(INHERITED, "registry", CONFIG)
    assert registry["BODEGA_API_TOKEN_SHA256"] == hashlib.sha256(b"admin-token").hexdigest()
    assert "admin-token" not in registry.values()
    plain = replace(CONFIG, internal_tls=False)
    assert "BODEGA_API_TOKEN_SHA256" not in component_env(INHERITED, "registry", plain)
    for role in ("worker", "proxy", "registry"):
        env = component_env(INHERITED, role, CONFIG)
        assert "BODEGA_API_TOKEN" not in env
        assert "admin-token" not in env.values()


def test_every_component_gets_the_rest_of_the_environment_and_no_stale_secret() -> None:
    for role in ("broker", "worker", "proxy"):
        env = component_env(INHERITED, role, CONFIG)
        assert env["PATH"] == "/usr/bin"
        assert "BODEGA_CLUSTER_SECRET" not in env  # nothing reads it any more
        # The gossip keyring is a file every component is given the path of, never a value.
        assert "BODEGA_GOSSIP_KEYRING" not in env
        assert "BODEGA_GOSSIP_KEYRING_FILE" not in env


def test_the_secrets_key_goes_to_brokers_and_workers_never_to_a_proxy() -> None:
    for role in ("broker", "worker"):
        assert component_env(INHERITED, role, CONFIG)["BODEGA_SECRETS_KEY"] == "sealing"
    env = component_env(INHERITED, "proxy", CONFIG)
    assert "BODEGA_SECRETS_KEY" not in env
    assert "sealing" not in env.values()
    assert "stale" not in env.values()
