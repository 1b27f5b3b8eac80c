"""What ``bodega up`` keeps in its data dir to secure a cluster: keys and the CA.

- ``secrets-key``: seals app secrets at rest; given to brokers and workers
  (``BODEGA_SECRETS_KEY``), never to a proxy;
- ``gossip-keyring``: seals gossip packets (``registry/sealing/keyfile.py``
  makes it); every component is given its path;
- ``tls/ca.pem`` and ``tls/ca-key.pem``: the cluster CA. Its key stays on this
  host: ``bodega up`` signs each component's certificate with it before
  starting the component, and the broker signs renewals with it;
- ``tls/admin/``: a certificate for the operator's tools (the ``admin`` role:
  metrics and reads on internal listeners);
- ``join-token`` (with ``--advertise``): a join token for other hosts, kept
  while it is valid and replaced by a new one (24 hours) once it is not. The
  tokens themselves are in the cluster view, where every server reads them
  (``broker/trust/join_book.py``): ``bodega up`` asks its own broker, once it
  is up, whether the kept one is still valid, and for a new one if not.

Each component's own key and certificate live in its own data dir
(``<component>/tls/identity.pem``), made there and never copied.

A data dir from before these files had one ``cluster-secret`` for all of it:
it seeds the secrets key (so every secret sealed under it still opens) and is
then removed; gossip gets a keyring of its own.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from bodega.runtime.tls.authority import CertificateAuthority
from bodega.runtime.tls.core.identity import Identity
from bodega.runtime.tls.core.join_token import JoinToken, ca_hash
from bodega.runtime.tls.files import CaDir, TlsDir, write_private
from bodega.wire.internal.join import TOKENS_PATH, TokenCreate, TokenCreated, TokenInfo
from bodega.wire.transport.json_client import JsonClient

log = logging.getLogger("bodega.cluster")

SECRETS_KEY = "secrets-key"
LEGACY_SECRET = "cluster-secret"
CA_DIR = "tls"
ADMIN_TLS = "tls/admin"
JOIN_TOKEN = "join-token"


@dataclass(frozen=True)
class ClusterKeys:
    secrets_key: str


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        return ""


def ensure_keys(data_dir: Path) -> ClusterKeys:
    """The data dir's keys, made (or carried over from a ``cluster-secret``) if missing."""
    legacy = _read(data_dir / LEGACY_SECRET)
    value = _read(data_dir / SECRETS_KEY)
    if not value:
        value = legacy or secrets.token_urlsafe(32)
        write_private(data_dir / SECRETS_KEY, (value + "\n").encode())
    if legacy:
        (data_dir / LEGACY_SECRET).unlink()
        log.info("the data dir's cluster-secret now seeds %s, and is gone", SECRETS_KEY)
    return ClusterKeys(secrets_key=value)


def ensure_ca(data_dir: Path, cluster: str, lifetime: float) -> CertificateAuthority:
    """The cluster CA (made now on a new data dir), and a current operator certificate."""
    authority = CertificateAuthority.ensure(CaDir(data_dir / CA_DIR), cluster, lifetime=lifetime)
    if authority.cluster != cluster:
        raise ValueError(f"the CA in {data_dir / CA_DIR} is cluster {authority.cluster}'s, not "
                         f"{cluster}'s (the data dir's cluster-id changed?)")
    authority.issue(TlsDir(data_dir / ADMIN_TLS), Identity(cluster, "admin", "operator"), ())
    return authority


def still_valid(kept: str, pinned: str, listed: Iterable[TokenInfo]) -> bool:
    """Whether the kept token ``kept`` pins this cluster's CA (``pinned``) and the join
    book lists it as valid."""
    try:
        token = JoinToken.parse(kept)
    except ValueError:
        return False
    return token.ca_hash == pinned and any(t.id == token.id and t.status == "valid"
                                           for t in listed)


async def ensure_join_token(data_dir: Path, authority: CertificateAuthority,
                            api: JsonClient) -> str:
    """The data dir's join token if the join book (asked through the broker's API, ``api``)
    would still take it, else a new one made there (kept)."""
    kept = _read(data_dir / JOIN_TOKEN)
    if kept and still_valid(kept, ca_hash(authority.cert),
                            await api.answers(TokenInfo, "GET", TOKENS_PATH)):
        return kept
    body = TokenCreate(description="bodega up --advertise")
    made = await api.answer(TokenCreated, "POST", TOKENS_PATH, json=body.model_dump())
    write_private(data_dir / JOIN_TOKEN, (made.token + "\n").encode())
    log.info("made join token %s (valid 24h) in %s", made.info.id, data_dir / JOIN_TOKEN)
    return made.token
