"""The cluster's PKI as pure functions: requests signed under a grant, peers checked, renewal."""

from __future__ import annotations

import datetime

import pytest
from cryptography import x509

from bodega.runtime.tls.core import pki
from bodega.runtime.tls.core.identity import (
    Identity,
    Key,
    Refused,
    cert_pem,
    fingerprint,
    hosts_of,
    identity_of,
    load_cert,
    new_key,
    trust_domain,
)

NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
HOUR = 3600.0
WORKER = Identity("c1", "worker", "ams-1")


def ca(cluster: str = "c1") -> tuple[x509.Certificate, Key]:
    key = new_key()
    return pki.make_ca(cluster, key, NOW), key


def issue(authority: tuple[x509.Certificate, Key], who: Identity = WORKER,
          hosts: tuple[str, ...] = ("127.0.0.1",), grant: pki.Grant | None = None,
          at: datetime.datetime = NOW, lifetime: float = HOUR) -> x509.Certificate:
    csr = pki.build_csr(new_key(), who, hosts)
    return pki.sign(csr, grant or pki.Grant.exactly(who, hosts), *authority, at, lifetime)


def test_a_signed_request_carries_the_identity_and_addresses_and_chains_to_the_ca() -> None:
    authority = ca()
    cert = issue(authority, hosts=("127.0.0.1", "w1.example", "::1"))
    assert identity_of(cert) == WORKER
    assert identity_of(cert).uri == "spiffe://c1/worker/ams-1"
    assert set(hosts_of(cert)) == {"127.0.0.1", "w1.example", "::1"}
    assert pki.verify(cert, authority[0], NOW) == WORKER
    assert cert.not_valid_after_utc == NOW + datetime.timedelta(hours=1)
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    assert trust_domain(authority[0]) == "c1"
    assert load_cert(cert_pem(cert)) == cert
    assert fingerprint(authority[0]).startswith("sha256:")
    assert fingerprint(authority[0]) != fingerprint(ca()[0])


def test_the_ca_lives_ten_years_and_a_leaf_one_by_default() -> None:
    authority = ca()
    assert authority[0].not_valid_after_utc - NOW == datetime.timedelta(days=3650)
    csr = pki.build_csr(new_key(), WORKER, ())
    leaf = pki.sign(csr, pki.Grant.exactly(WORKER), *authority, NOW)
    assert leaf.not_valid_after_utc - NOW == datetime.timedelta(days=365)


def test_a_grant_signs_nothing_beyond_itself() -> None:
    authority = ca()
    broker = Identity("c1", "broker", "ams-1")
    with pytest.raises(Refused) as role:  # a worker's grant, a broker's request
        issue(authority, broker, grant=pki.Grant.exactly(WORKER))
    assert role.value.reason == "role"
    with pytest.raises(Refused) as name:
        issue(authority, Identity("c1", "worker", "syd-1"), grant=pki.Grant.exactly(WORKER))
    assert name.value.reason == "identity"
    with pytest.raises(Refused) as hosts:
        issue(authority, hosts=("127.0.0.1", "10.0.0.9"),
              grant=pki.Grant.exactly(WORKER, ("127.0.0.1",)))
    assert hosts.value.reason == "hosts"
    with pytest.raises(Refused) as cluster:
        issue(authority, Identity("c2", "worker", "ams-1"),
              grant=pki.Grant(frozenset({"worker"})))
    assert cluster.value.reason == "identity"
    # A grant of a role with any name signs the name asked for.
    assert identity_of(issue(authority, grant=pki.Grant(frozenset({"worker"})))) == WORKER


def test_a_request_must_be_signed_by_its_key_and_name_one_known_role() -> None:
    with pytest.raises(Refused):
        Identity.from_uri("spiffe://c1/janitor/x")
    with pytest.raises(Refused):
        Identity.from_uri("https://c1/worker/x")
    with pytest.raises(Refused):
        pki.build_csr(new_key(), Identity("c1", "worker", "../etc"), ())


def test_a_renewal_is_granted_the_holders_identity_and_at_most_its_addresses() -> None:
    authority = ca()
    held = issue(authority, hosts=("127.0.0.1", "10.0.0.1"))
    grant = pki.Grant.renewal(held)
    renewed = issue(authority, hosts=("127.0.0.1",), grant=grant)
    assert identity_of(renewed) == WORKER
    with pytest.raises(Refused):
        issue(authority, hosts=("127.0.0.1", "10.0.0.2"), grant=grant)
    with pytest.raises(Refused):
        issue(authority, Identity("c1", "broker", "ams-1"), grant=grant)


@pytest.mark.parametrize("case", ["another ca", "expired", "not yet valid", "wrong role"])
def test_verify_refuses_what_the_cluster_does_not_accept(case: str) -> None:
    authority = ca()
    cert = issue(authority)
    at, roles = NOW, None
    if case == "another ca":
        cert = issue(ca())  # same cluster name, same identity: another key
        expect = "unknown authority"
    elif case == "expired":
        at, expect = NOW + datetime.timedelta(hours=2), "expired"
    elif case == "not yet valid":
        at, expect = NOW - datetime.timedelta(hours=2), "not yet valid"
    else:
        roles, expect = ("broker",), "role"
    with pytest.raises(Refused) as refused:
        pki.verify(cert, authority[0], at, roles)
    assert refused.value.reason == expect


def test_renewal_comes_at_two_thirds_and_retries_sooner_near_the_end() -> None:
    cert = issue(ca(), lifetime=HOUR)
    start = cert.not_valid_before_utc
    life = cert.not_valid_after_utc - start
    assert pki.renew_at(cert) == start + life * 2 / 3
    assert not pki.renewal_due(cert, pki.renew_at(cert) - datetime.timedelta(seconds=1))
    assert pki.renewal_due(cert, pki.renew_at(cert))
    assert pki.renewal_wait(cert, NOW) == (pki.renew_at(cert) - NOW).total_seconds()
    assert pki.renewal_wait(cert, pki.renew_at(cert) + datetime.timedelta(seconds=5)) == 0
    # After failures: 1 s, 2 s, 4 s ..., at most a minute and a tenth of what is left.
    late = pki.renew_at(cert)
    assert [pki.renewal_wait(cert, late, n) for n in (1, 2, 3)] == [1.0, 2.0, 4.0]
    assert pki.renewal_wait(cert, late, 20) == 60.0
    last_minute = cert.not_valid_after_utc - datetime.timedelta(seconds=30)
    assert pki.renewal_wait(cert, last_minute, 20) == 3.0
    assert pki.renewal_wait(cert, cert.not_valid_after_utc, 20) == 0.5  # still trying


def test_a_short_lived_certificate_is_backdated_a_tenth_of_its_life_at_most() -> None:
    cert = issue(ca(), lifetime=60.0)
    assert NOW - cert.not_valid_before_utc == datetime.timedelta(seconds=6)
    with pytest.raises(ValueError, match="at least"):
        issue(ca(), lifetime=1.0)
