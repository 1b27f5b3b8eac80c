"""A renewal, with the CA in the process: a new key and certificate, loaded with no restart."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest

from bodega.runtime.tls.authority import CertificateAuthority, Issued
from bodega.runtime.tls.contexts import InternalTls, TlsUnusable
from bodega.runtime.tls.core import pki
from bodega.runtime.tls.core.identity import Identity, Refused, cert_pem, hosts_of, new_key
from bodega.runtime.tls.files import CaDir, TlsDir
from bodega.runtime.tls.renewal import LocalSigner, Renewal

WORKER = Identity("c1", "worker", "ams-1")


def authority(tmp: Path, lifetime: float = 3600.0) -> CertificateAuthority:
    return CertificateAuthority.ensure(CaDir(tmp / "ca"), "c1", lifetime=lifetime)


async def test_a_renewal_replaces_key_and_certificate_and_reloads_the_contexts(
        tmp_path: Path) -> None:
    ca = authority(tmp_path)
    where = TlsDir(tmp_path / "w")
    assert ca.issue(where, WORKER, ("127.0.0.1",))
    assert not ca.issue(where, WORKER, ("127.0.0.1",))  # a good one is kept, not re-made
    tls = InternalTls(where)
    old_key, old = where.read_identity()
    published: list[datetime.datetime] = []
    renewal = Renewal(tls, LocalSigner(ca, tls), on_renewed=lambda t: published.append(
        t.not_after))
    await renewal.renew()
    new_key_, new = where.read_identity()
    assert new.serial_number != old.serial_number
    assert new_key_.public_key() != old_key.public_key()  # a new key, made here
    assert hosts_of(new) == ("127.0.0.1",)  # same identity, same addresses
    assert tls.certificate == new
    assert published == [new.not_valid_after_utc]
    assert where.identity_path.stat().st_mode & 0o077 == 0


class Impostor:
    """A signer that answers a certificate for someone else."""

    def __init__(self, ca: CertificateAuthority) -> None:
        self.ca = ca

    async def sign(self, csr: bytes) -> Issued:
        other = pki.build_csr(new_key(), Identity("c1", "broker", "b"), ())
        return self.ca.sign(pki.csr_pem(other), pki.Grant(frozenset({"broker"})))


async def test_an_answer_for_another_identity_or_key_is_refused_and_nothing_changes(
        tmp_path: Path) -> None:
    ca = authority(tmp_path)
    where = TlsDir(tmp_path / "w")
    ca.issue(where, WORKER, ())
    tls = InternalTls(where)
    before = where.identity_path.read_bytes()
    with pytest.raises(Refused):
        await Renewal(tls, Impostor(ca)).renew()
    assert where.identity_path.read_bytes() == before


def test_a_component_refuses_to_serve_with_an_expired_or_foreign_certificate(
        tmp_path: Path) -> None:
    past = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=1)
    ca = authority(tmp_path)
    old = CertificateAuthority(ca.cert, ca.key, lifetime=60.0, clock=lambda: past)
    old.issue(TlsDir(tmp_path / "expired"), WORKER, ())
    with pytest.raises(TlsUnusable, match="expired"):
        InternalTls(TlsDir(tmp_path / "expired"))
    foreign = CertificateAuthority.ensure(CaDir(tmp_path / "other"), "c1")
    foreign.issue(TlsDir(tmp_path / "foreign"), WORKER, ())
    (tmp_path / "foreign" / "ca.pem").write_bytes(cert_pem(ca.cert))  # trusts ours
    with pytest.raises(TlsUnusable, match="not this CA's"):  # same name, another key
        InternalTls(TlsDir(tmp_path / "foreign"))
