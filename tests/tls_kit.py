"""A cluster CA for tests: certificates for the daemons a test starts, and for the test itself.

``TEST_CA`` is one CA per test process (made on first use, in memory; the
identities it issues are written where the daemons read them). A kit gives
each daemon it starts a certificate in the daemon's TLS directory
(``TEST_CA.issue(data_dir / "tls", "worker", name)``), and a test talks to an
internal listener as a role of its choosing (``TEST_CA.context("broker")``:
an ``ssl.SSLContext`` for aiohttp, httpx or a ``WorkerClient``). For the
doors that must stay shut: ``expired`` (an expired certificate of this CA)
and ``stranger`` (a certificate from another CA, with the same names).
"""

from __future__ import annotations

import atexit
import datetime
import shutil
import ssl
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from bodega.runtime.tls.authority import CertificateAuthority, utc_now
from bodega.runtime.tls.contexts import client_context
from bodega.runtime.tls.core.identity import Identity, cert_pem
from bodega.runtime.tls.files import CaDir, TlsDir
from tests.keyring_kit import ENV as KEYRING_ENV

CLUSTER = "tests"
LOOPBACK = ("127.0.0.1", "localhost")
SECRETS_KEY = "integration-secrets-key"


@dataclass
class ClusterCa:
    authority: CertificateAuthority
    root: Path  # where the test's own identities are kept
    _contexts: dict[tuple[str, str], ssl.SSLContext] = field(default_factory=dict)

    @classmethod
    def make(cls, root: Path, cluster: str = CLUSTER, lifetime: float = 3600.0) -> ClusterCa:
        authority = CertificateAuthority.ensure(CaDir(root / "ca"), cluster, lifetime=lifetime)
        return cls(authority, root)

    @property
    def cluster(self) -> str:
        return self.authority.cluster

    @property
    def ca_pem(self) -> str:
        return cert_pem(self.authority.cert).decode()

    def issue(self, tls_dir: Path, role: str, name: str,
              hosts: Iterable[str] = LOOPBACK) -> Path:
        """Give a daemon whose TLS directory is ``tls_dir`` an identity; returns the dir."""
        self.authority.issue(TlsDir(tls_dir), Identity(self.cluster, role, name), hosts)
        return tls_dir

    def identity_file(self, role: str, name: str = "test") -> Path:
        directory = self.root / "clients" / f"{role}-{name}"
        self.issue(directory, role, name, ())
        return TlsDir(directory).identity_path

    def context(self, role: str = "broker", name: str = "test") -> ssl.SSLContext:
        """A client context presenting a certificate of ``role`` (cached per role and name)."""
        key = (role, name)
        if key not in self._contexts:
            context = client_context(self.ca_pem)
            context.load_cert_chain(self.identity_file(role, name))
            self._contexts[key] = context
        return self._contexts[key]

    def anonymous(self) -> ssl.SSLContext:
        """Trusts the CA, presents no certificate."""
        return client_context(self.ca_pem)

    def expired(self, role: str = "broker") -> ssl.SSLContext:
        """Presents a certificate of this CA that expired a day ago."""
        past = utc_now() - datetime.timedelta(days=1)
        old = CertificateAuthority(self.authority.cert, self.authority.key, lifetime=60.0,
                                   clock=lambda: past)
        directory = self.root / "clients" / f"expired-{role}"
        old.issue(TlsDir(directory), Identity(self.cluster, role, "expired"), ())
        context = client_context(self.ca_pem)
        context.load_cert_chain(TlsDir(directory).identity_path)
        return context

    def stranger(self, role: str = "broker") -> ssl.SSLContext:
        """Presents a certificate from another CA (same cluster name, same role), and trusts
        this cluster's CA, so only the server's check of the client can refuse it."""
        other = ClusterCa.make(self.root / "stranger", self.cluster)
        context = client_context(self.ca_pem)
        context.load_cert_chain(other.identity_file(role, "stranger"))
        return context

    def http(self, role: str = "broker", name: str = "test",
             **kwargs: object) -> httpx.AsyncClient:
        """An httpx client presenting a certificate of ``role`` (named ``name``)."""
        return httpx.AsyncClient(verify=self.context(role, name), **kwargs)  # type: ignore[arg-type]


def _shared() -> ClusterCa:
    root = Path(tempfile.mkdtemp(prefix="bodega-test-ca-"))
    atexit.register(shutil.rmtree, root, True)
    return ClusterCa.make(root)


TEST_CA = _shared()


def daemon_env() -> dict[str, str]:
    """The secrets a daemon of a test cluster is started with (its TLS identity is a file):
    the test gossip keyring and the secrets key."""
    return {**KEYRING_ENV, "BODEGA_SECRETS_KEY": SECRETS_KEY}
