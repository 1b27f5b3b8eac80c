"""What ``bodega up`` keeps for the TLS edge: the certificates key, ``ca.crt``, the default cert.

- ``certs-key``: seals the keys of the edge's certificates in the registry; given
  to brokers (which seal) and proxies (which open), never to workers;
- ``ca.crt``: the cluster CA's certificate, for clients (``curl --cacert
  .bodega/ca.crt https://hello.localhost:8443/``) and browsers to trust;
- ``proxy/edge/default.pem``: the proxy's default certificate (key and chain,
  ``*.localhost`` and ``localhost``), served when no app's certificate matches
  the SNI; issued again when a third of its life is left.
"""

from __future__ import annotations

import secrets
from pathlib import Path

from bodega.runtime.tls.authority import CertificateAuthority
from bodega.runtime.tls.core import sites
from bodega.runtime.tls.core.identity import cert_pem
from bodega.runtime.tls.files import write_private

CERTS_KEY = "certs-key"
CA_CRT = "ca.crt"
DEFAULT_CERT = "proxy/edge/default.pem"


def ensure_certs_key(data_dir: Path) -> str:
    path = data_dir / CERTS_KEY
    try:
        value = path.read_text().strip()
    except FileNotFoundError:
        value = ""
    if not value:
        value = secrets.token_urlsafe(32)
        write_private(path, (value + "\n").encode())
    return value


def ensure_edge(data_dir: Path, authority: CertificateAuthority, base_domain: str) -> Path:
    """``ca.crt`` written, and a current default certificate; the latter's path."""
    write_private(data_dir / CA_CRT, cert_pem(authority.cert), 0o644)
    path = data_dir / DEFAULT_CERT
    now = authority.clock()
    try:
        info = sites.info_of(path.read_bytes())
        current = (info.issuer == authority.cert.subject.rfc4514_string()
                   and (info.not_after - now).total_seconds() > sites.SITE_LIFETIME / 3)
    except (FileNotFoundError, ValueError, IndexError):
        current = False
    if not current:
        made = sites.issue(authority.cert, authority.key, (f"*.{base_domain}", base_domain), now)
        write_private(path, made.key_pem + made.chain_pem)
    return path
