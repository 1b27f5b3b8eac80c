"""What ``bodega up`` keeps in its data dir to secure a cluster: keys and the CA.

- ``secrets-key``: seals app secrets at rest; given to brokers and workers
  (``BODEGA_SECRETS_KEY``), never to a proxy;
- ``gossip-keyring``: seals gossip packets (``registry/membership/keyfile.py``
  makes it); every component is given its path;
- ``tls/ca.pem`` and ``tls/ca-key.pem``: the cluster CA. Its key stays on this
  host: ``bodega up`` signs each component's certificate with it before
  starting the component, and the broker signs renewals with it;
- ``tls/admin/``: a certificate for the operator's tools (the ``admin`` role:
  metrics and reads on internal listeners);
- ``join-token`` (with ``--advertise``): a join token for other hosts, kept
  while it is valid and replaced by a new one (24 hours) once it is not; the
  tokens themselves are in ``tls/join-book.json`` (``runtime/tls/join_store.py``).

Each component's own key and certificate live in its own data dir
(``<component>/tls/identity.pem``), made there and never copied.

A data dir from before these files had one ``cluster-secret`` for all of it:
it seeds the secrets key (so every secret sealed under it still opens) and is
then removed; gossip gets a keyring of its own.
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass
from pathlib import Path

from bodega.runtime.tls.authority import CertificateAuthority, utc_now
from bodega.runtime.tls.files import CaDir, TlsDir, write_private
from bodega.runtime.tls.identity import Identity
from bodega.runtime.tls.join_store import BOOK, JoinStore
from bodega.runtime.tls.join_token import DEFAULT_TTL

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


def ensure_join_token(data_dir: Path, authority: CertificateAuthority) -> str:
    """The data dir's join token if the signer would still take it, else a new one (kept)."""
    store = JoinStore(data_dir / CA_DIR / BOOK, authority.cert, utc_now)
    kept = _read(data_dir / JOIN_TOKEN)
    if kept and store.valid(kept):
        return kept
    token, _ = store.create(DEFAULT_TTL, "bodega up --advertise")
    write_private(data_dir / JOIN_TOKEN, (str(token) + "\n").encode())
    log.info("made join token %s (valid 24h) in %s", token.id, data_dir / JOIN_TOKEN)
    return str(token)
