"""Which TLS material a daemon serves its internal links with, checked before it starts.

A worker, broker or proxy serves its internal listener with mutual TLS from
``--tls-dir`` (default ``<data-dir>/tls``: ``ca.pem`` and ``identity.pem``,
which ``bodega up`` makes for each of its components). It refuses to start
without them, with a certificate of another role or name than its own, or
one that does not name the address it serves on (its peers check that
name). ``--internal-tls off`` (hidden) serves plain HTTP with no
authentication at all, for the benchmark that measures what TLS costs; it is
refused on any address but loopback.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path

from bodega.runtime.tls.core.identity import Refused, hosts_of, identity_of
from bodega.runtime.tls.files import TlsDir


def loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def unspecified(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:
        return False


def tls_dir_for(data_dir: Path, tls_dir: Path | None, internal_tls: str,
                serves_on: list[str], role: str, name: str) -> Path | None:
    """The TLS directory of the ``role`` named ``name`` serving on ``serves_on``; None for
    plaintext."""
    if internal_tls == "off":
        public = [h for h in serves_on if not loopback(h)]
        if public:
            raise ValueError(f"--internal-tls off serves internal links with no "
                             f"authentication: loopback only, not {public[0]}")
        return None
    if internal_tls != "on":
        raise ValueError("--internal-tls is on or off")
    directory = TlsDir((tls_dir or data_dir / "tls").resolve())
    if not directory.complete():
        raise ValueError(f"no TLS identity in {directory.path} (ca.pem, identity.pem): "
                         "bodega up makes one for each component; pass --tls-dir to use "
                         "another")
    try:
        _, cert = directory.read_identity()
        who = identity_of(cert)
    except (Refused, ValueError) as exc:
        raise ValueError(f"{directory.identity_path} is unusable: {exc}") from None
    if (who.role, who.name) != (role, name):
        raise ValueError(f"the certificate in {directory.identity_path} is {who.role} "
                         f"{who.name}'s, not this {role} {name}'s")
    named = set(hosts_of(cert))
    missing = [h for h in serves_on if not unspecified(h) and h.strip("[]") not in named]
    if missing:
        raise ValueError(f"the certificate in {directory.identity_path} names "
                         f"{', '.join(sorted(named)) or 'no address'}, not {missing[0]}, "
                         "where this daemon serves: peers would refuse it")
    return directory.path
