"""What crosses the wire when a host joins, and the join tokens' admin API.

On the signer's join listener (TLS, no client certificate: the joining host
has none yet): ``GET /v1/join/ca`` answers ``CaAnswer``; the host checks its
hash against the token's pin, and only then ``POST /v1/join`` a
``JoinRequest`` (the token, one CSR per worker and one for the host's
broker, proxy and registry agent: keys stay on the host) over TLS checked
against that CA. The answer, ``JoinAnswer``, carries each certificate, the
gossip keyring, the secrets key and where to gossip; a host that runs a
broker also gets the admin token and the certificates key, one that runs a
proxy the certificates key and the edge's default certificate. On the public
Machines API (admin token): ``/v1/cluster/join-tokens``.
"""

from __future__ import annotations

import datetime

from pydantic import BaseModel, ConfigDict, Field

from bodega.runtime.tls.core.join_token import DEFAULT_TTL, MAX_TTL

CA_PATH = "/v1/join/ca"
JOIN_PATH = "/v1/join"
TOKENS_PATH = "/v1/cluster/join-tokens"
JOIN_PORT = 4281  # the join listener's port unless told otherwise (the API's, plus one)


class CaAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    ca: str  # PEM


class JoiningWorker(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{0,62}$")
    csr: str  # PEM: spiffe://<cluster>/worker/<name> and the host's address


class JoinRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    token: str
    region: str = Field(pattern=r"^[a-z0-9-]{1,32}$")
    workers: list[JoiningWorker] = Field(min_length=1, max_length=64)
    # The host's registry agent (its name and CSR), for the certificate it syncs with.
    agent: JoiningWorker | None = None
    # The host's broker and proxy (``bodega join`` runs both unless told not to).
    broker: JoiningWorker | None = None
    proxy: JoiningWorker | None = None
    # A server holds the CA's key and lets hosts join (``bodega join --server``): it needs
    # a server token (``bodega cluster token create --server``) and a broker.
    server: bool = False


class JoinedWorker(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    certificate: str  # PEM
    not_after: datetime.datetime
    subnet: str | None = None  # its machine subnet; None: it picks its own


class JoinAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    cluster_id: str
    ca: str  # PEM
    workers: list[JoinedWorker]
    keyring: str  # the gossip keyring's JSON (registry/sealing/core/keyring.py)
    secrets_key: str  # opens app secrets for machines
    seeds: list[str]  # gossip host:port of members to join through
    api_url: str  # the Machines API of the broker that let the host in
    image_registry: str | None = None
    proxy: str | None = None  # the proxy's public host:port: Flycast is relayed to it
    # The cluster's workers run the private network: a joining host runs it too, by default.
    private_network: bool = False
    agent: JoinedWorker | None = None  # the host's registry agent's certificate
    # The broker's host runs a registry agent: a joining host runs one too.
    registry_agent: bool = False
    broker_cert: JoinedWorker | None = None  # the host's broker's certificate, if it asked
    proxy_cert: JoinedWorker | None = None  # the host's proxy's certificate, if it asked
    admin_token: str | None = None  # to a host that runs a broker: it serves the API
    certs_key: str | None = None  # to a host with a broker (seals) or a proxy (opens)
    # To a host with a proxy: the edge's default certificate (key and chain, PEM) for
    # *.<edge_domain>, served when no app's certificate matches.
    edge_cert: str | None = None
    edge_domain: str = "localhost"
    # To a server only: the CA's private key (PEM), and the range joined workers' machine
    # subnets come from.
    ca_key: str | None = None
    join_subnets: str | None = None


class TokenCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    ttl: float = Field(default=DEFAULT_TTL, gt=0, le=MAX_TTL)  # seconds
    description: str = Field(default="", max_length=200)
    server: bool = False  # a server token: it may join a host as a server (it gets the CA)


class TokenInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    status: str  # valid, expired, revoked
    created: datetime.datetime
    expires: datetime.datetime
    revoked: datetime.datetime | None = None
    description: str = ""
    joins: int = 0
    server: bool = False


class TokenCreated(BaseModel):
    model_config = ConfigDict(extra="forbid")
    token: str  # shown once: the signer keeps its hash only
    info: TokenInfo
