"""The broker's certificates: issued by the CA or imported, keys sealed, one app per hostname,
and every app given its own certificate (renewed when a third of its life is left)."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest

from bodega.broker.certificates.core import answers
from bodega.broker.certificates.defaults import DefaultCertificates
from bodega.broker.certificates.store import AppCertificates
from bodega.broker.view.apps import Apps
from bodega.broker.view.catalog import MemoryCatalog
from bodega.model.errors import BadRequest, Conflict, NotFound, Unprocessable
from bodega.runtime.secretbox import SecretBox
from bodega.runtime.tls.authority import CertificateAuthority
from bodega.runtime.tls.core import sites
from bodega.runtime.tls.files import CaDir
from bodega.wire.internal.certificates import TABLE, CertificateRequest, CertificateRow
from bodega.wire.public.fly_certificates import AcmeCertificateRequest


def rig(tmp_path: Path, with_ca: bool = True) -> tuple[AppCertificates, MemoryCatalog]:
    catalog = MemoryCatalog()
    catalog.tables[TABLE] = {}
    apps = Apps(catalog)
    apps.create("web", "personal", None)
    apps.create("shop", "personal", None)
    authority = (CertificateAuthority.ensure(CaDir(tmp_path / "ca"), "c1")
                 if with_ca else None)
    return AppCertificates(catalog, apps, SecretBox("k"), authority), catalog


def test_an_issued_certificate_keeps_its_key_sealed_and_never_shows_it(tmp_path: Path) -> None:
    certs, catalog = rig(tmp_path)
    view = certs.add("web", CertificateRequest(hostname="WWW.Example.com"))
    assert (view.hostname, view.source, view.hostnames) == (
        "www.example.com", "cluster-ca", ["www.example.com"])
    row = CertificateRow.model_validate(catalog.get(TABLE, "web/www.example.com"))
    assert "PRIVATE KEY" not in row.sealed_key
    assert "PRIVATE KEY" not in row.chain
    key = SecretBox("k").open("web", "www.example.com", row.sealed_key)
    assert "PRIVATE KEY" in key
    assert "PRIVATE KEY" not in certs.get("web", "www.example.com").model_dump_json()
    assert [v.hostname for v in certs.list("web").certificates] == ["www.example.com"]
    assert certs.remove("web", "www.example.com").hostname == "www.example.com"
    with pytest.raises(NotFound):
        certs.get("web", "www.example.com")


def test_a_hostname_belongs_to_one_app(tmp_path: Path) -> None:
    certs, _ = rig(tmp_path)
    certs.add("web", CertificateRequest(hostname="www.example.com"))
    with pytest.raises(Conflict, match="already has a certificate in app web"):
        certs.add("shop", CertificateRequest(hostname="www.example.com"))


def test_bad_requests_are_one_clear_line(tmp_path: Path) -> None:
    certs, _ = rig(tmp_path, with_ca=False)
    with pytest.raises(BadRequest, match="no CA to issue certificates with"):
        certs.add("web", CertificateRequest(hostname="www.example.com"))
    with pytest.raises(BadRequest, match="needs both certificate and private_key"):
        certs.add("web", CertificateRequest(hostname="a.test", certificate="x"))
    with pytest.raises(BadRequest, match="is not a hostname"):
        certs.add("web", CertificateRequest(hostname="not a host"))
    with pytest.raises(Unprocessable, match="not PEM"):
        certs.add("web", CertificateRequest(hostname="a.test", certificate="x",
                                            private_key="y"))
    with pytest.raises(NotFound, match="app not found"):
        certs.add("nope", CertificateRequest(hostname="a.test"))


def test_every_app_gets_its_own_certificate_and_a_new_one_near_its_end(tmp_path: Path) -> None:
    certs, catalog = rig(tmp_path)
    defaults = DefaultCertificates(catalog, certs, "localhost")
    assert defaults.ensure() == 2
    row = CertificateRow.model_validate(catalog.get(TABLE, "web/web.localhost"))
    assert row.hostnames == ["web.localhost", "*.web.localhost"]
    assert defaults.ensure() == 0
    late = row.not_after - datetime.timedelta(days=29)
    assert defaults.due(late) == ["shop", "web"]
    assert defaults.due(row.not_after - datetime.timedelta(seconds=sites.SITE_LIFETIME / 2)) == []


def test_a_list_is_filtered_and_paged_by_the_last_hostname(tmp_path: Path) -> None:
    certs, _ = rig(tmp_path)
    for name in ("c.example.com", "a.example.com", "b.other.test"):
        certs.add("web", CertificateRequest(hostname=name))
    first = certs.list("web", limit=2)
    assert ([c.hostname for c in first.certificates], first.total_count, first.next_cursor) == (
        ["a.example.com", "b.other.test"], 3, "b.other.test")
    last = certs.list("web", limit=2, cursor=first.next_cursor or "")
    assert ([c.hostname for c in last.certificates], last.next_cursor) == (
        ["c.example.com"], None)
    only = certs.list("web", filter="EXAMPLE")
    assert [c.hostname for c in only.certificates] == ["a.example.com", "c.example.com"]
    assert only.certificates[0].has_fly_certificate
    assert not only.certificates[0].has_custom_certificate
    for bad, why in (("0", "1 to 500"), ("501", "1 to 500"), ("x", "whole number")):
        with pytest.raises(ValueError, match=why):
            answers.parse_limit(bad)
    assert answers.parse_limit(None) == answers.DEFAULT_LIMIT


def test_check_reports_an_expired_certificate_and_a_key_that_does_not_open(
        tmp_path: Path) -> None:
    certs, catalog = rig(tmp_path)
    certs.add("web", CertificateRequest(hostname="www.example.com"))
    good = certs.check("web", "www.example.com")
    assert (good.status, good.configured, good.validation_errors) == ("active", True, [])
    assert good.certificates[0].source == "fly"
    row = CertificateRow.model_validate(catalog.get(TABLE, "web/www.example.com"))
    certs.clock = lambda: row.not_after.timestamp() + 60
    late = certs.check("web", "www.example.com")
    assert (late.status, late.configured) == ("expired", False)
    assert late.validation_errors[0].code == "expired"
    assert "bodega certs add" in late.validation_errors[0].remediation
    assert certs.get("web", "www.example.com").status == "expired"
    certs.clock = lambda: row.not_after.timestamp() - 60
    other = AppCertificates(catalog, certs.apps, SecretBox("another key"), None)
    sealed = other.check("web", "www.example.com")
    assert (sealed.status, sealed.validation_errors[0].code) == ("invalid", "sealed_key")


def test_the_kind_deletes_remove_only_their_kind_and_acme_is_refused(tmp_path: Path) -> None:
    certs, _ = rig(tmp_path)
    certs.add("web", CertificateRequest(hostname="www.example.com"))
    with pytest.raises(NotFound, match=r"no custom certificate .* is fly: DELETE .*/acme"):
        certs.remove("web", "www.example.com", "custom")
    assert certs.remove("web", "www.example.com", "fly").hostname == "www.example.com"
    with pytest.raises(Unprocessable, match="no ACME client") as refused:
        certs.acme("web", AcmeCertificateRequest(hostname="a.example.com"))
    assert refused.value.status == "unimplemented"
    assert "/v1/apps/web/certificates/custom" in refused.value.message
    with pytest.raises(BadRequest, match="is not a hostname"):
        certs.acme("web", AcmeCertificateRequest(hostname="not a host"))
