"""The broker's join listener, started beside its other listeners when it signs joins.

``bodega broker --ca-dir DIR --join-listen HOST:PORT``: TLS with the broker's
own certificate (``InternalTls.open_server``: renewed with it), the routes of
``join.py``, and what a join hands out read from this broker's registry node
at the moment of the join: the gossip keyring, the live members to gossip
with, the machine subnets workers publish.
"""

from __future__ import annotations

from typing import Any

from bodega.broker.config import BrokerConfig
from bodega.broker.trust.join_book import JoinStore
from bodega.broker.trust.joining import Joining, join_app
from bodega.model.rows import WorkerRow
from bodega.registry import Registry
from bodega.registry.membership.core.members import Status
from bodega.runtime.serve import Served, serve
from bodega.runtime.tls.authority import CertificateAuthority
from bodega.runtime.tls.contexts import InternalTls


def gossip_seeds(node: Any) -> list[str]:
    """This node's own gossip address first, then every live member's."""
    host, port = node.gossip_addr
    seeds = [f"{host}:{port}"]
    for member in node.members():
        addr = f"{member.addr[0]}:{member.addr[1]}"
        if member.status == Status.ALIVE and addr not in seeds:
            seeds.append(addr)
    return seeds


def subnets_in_use(node: Registry) -> list[str]:
    return [row.subnet for row in node.rows(WorkerRow) if row.subnet]


def runs_private_network(node: Registry) -> bool:
    """Whether the cluster's workers run the private network: theirs advertise an overlay."""
    return any(row.wireguard is not None for row in node.rows(WorkerRow))


async def serve_joins(config: BrokerConfig, authority: CertificateAuthority, tls: InternalTls,
                      store: JoinStore, node: Any, api_url: str) -> Served:
    assert config.join_host is not None
    joining = Joining(authority=authority, store=store, subnet_pool=config.join_subnets,
                      keyring=lambda: str(node.keys.keyring.to_json()),
                      seeds=lambda: gossip_seeds(node),
                      taken_subnets=lambda: subnets_in_use(node),
                      secrets_key=config.secrets_key, api_url=api_url,
                      image_registry=config.image_registry, flycast=config.join_proxy,
                      private_network=lambda: runs_private_network(node),
                      registry_agent=config.registry_agent is not None,
                      admin_token=config.admin_tokens[0] if config.admin_tokens else "",
                      certs_key=config.certs_key, edge_domain=config.edge_domain)
    return await serve(join_app(joining), config.join_host, config.join_port,
                       open_tls=tls.open_server)
