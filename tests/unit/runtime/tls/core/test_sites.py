"""Site certificates: hostnames checked, wildcards matched as TLS clients match them, issued
by the cluster CA, and imported pairs refused with the reason when they cannot serve."""

from __future__ import annotations

import datetime

import pytest
from cryptography import x509

from bodega.runtime.tls.core import pki, sites
from bodega.runtime.tls.core.identity import Key, Refused, new_key

NOW = datetime.datetime(2026, 5, 1, tzinfo=datetime.UTC)


def ca() -> tuple[x509.Certificate, Key]:
    key = new_key()
    return pki.make_ca("c1", key, NOW), key


@pytest.mark.parametrize("name", ["hello.localhost", "*.hello.localhost", "a-b.example.com",
                                  "WWW.Example.COM."])
def test_hostnames_are_kept_in_lower_case(name: str) -> None:
    assert sites.check_hostname(name) == name.lower().rstrip(".")


@pytest.mark.parametrize("name", ["", "a..b", "-a.com", "a_b.com", "*.*.com", "a.*.com",
                                  "x" * 64 + ".com", "héllo.com", "a b.com"])
def test_what_is_no_hostname_is_refused(name: str) -> None:
    with pytest.raises(Refused, match="is not a hostname"):
        sites.check_hostname(name)


@pytest.mark.parametrize(("pattern", "host", "covered"), [
    ("*.hello.localhost", "api.hello.localhost", True),
    ("*.hello.localhost", "hello.localhost", False),
    ("*.hello.localhost", "a.b.hello.localhost", False),
    ("www.example.com", "www.example.com", True),
    ("www.example.com", "example.com", False)])
def test_a_wildcard_covers_one_label(pattern: str, host: str, covered: bool) -> None:
    assert sites.covers(pattern, host) is covered


def test_the_ca_issues_a_serving_certificate_chained_to_itself() -> None:
    cert, key = ca()
    made = sites.issue(cert, key, ("shop.localhost", "*.shop.localhost"), NOW)
    assert made.info.hostnames == ("shop.localhost", "*.shop.localhost")
    assert made.info.issuer == cert.subject.rfc4514_string()
    assert made.info.not_after == NOW + datetime.timedelta(seconds=sites.SITE_LIFETIME)
    assert made.chain_pem.count(b"BEGIN CERTIFICATE") == 2
    again = sites.check_pair(made.chain_pem, made.key_pem, "api.shop.localhost", NOW)
    assert again.info == made.info


def test_an_import_that_cannot_serve_is_refused_saying_why() -> None:
    cert, key = ca()
    made = sites.issue(cert, key, ("own.test",), NOW)
    other = sites.issue(cert, key, ("other.test",), NOW)
    with pytest.raises(Refused, match=r"covers own\.test, not else\.test"):
        sites.check_pair(made.chain_pem, made.key_pem, "else.test", NOW)
    with pytest.raises(Refused, match="the key is not the certificate's"):
        sites.check_pair(made.chain_pem, other.key_pem, "own.test", NOW)
    with pytest.raises(Refused, match="expired"):
        sites.check_pair(made.chain_pem, made.key_pem, "own.test",
                         NOW + datetime.timedelta(days=365))
    with pytest.raises(Refused, match="not PEM"):
        sites.check_pair(b"junk", made.key_pem, "own.test", NOW)
    with pytest.raises(Refused, match="not an unencrypted PEM private key"):
        sites.check_pair(made.chain_pem, b"junk", "own.test", NOW)


def test_a_self_signed_default_names_its_hosts() -> None:
    made = sites.self_signed(("*.localhost", "localhost"), NOW)
    assert made.info.self_signed
    assert made.info.hostnames == ("*.localhost", "localhost")
