"""The Machines API's certificate operations on a real broker: the edge's certificates (the
rows every proxy serves), through the reference's paths and shapes, and `bodega certs` on
the same routes. Every refusal is ``{"error", "status"}`` with its code, never a 500."""

from __future__ import annotations

import asyncio
import datetime
import sys
from pathlib import Path
from typing import Any

import httpx

from bodega.runtime.tls.core import sites
from bodega.wire.internal.certificates import TABLE, CertificateRow
from tests.tls_kit import TEST_CA

from .broker_kit import ADMIN, Cluster, in_process_cluster

CERTS = "/v1/apps/web/certificates"


def own_pair(hostname: str) -> dict[str, str]:
    made = sites.self_signed((hostname,), datetime.datetime.now(datetime.UTC))
    return {"hostname": hostname, "fullchain": made.chain_pem.decode(),
            "private_key": made.key_pem.decode()}


def refused(answer: httpx.Response, code: int, status: str, *words: str) -> str:
    assert answer.status_code == code, answer.text
    body = answer.json()
    assert (set(body), body["status"]) == ({"error", "status"}, status), body
    assert all(w in body["error"] for w in words), body["error"]
    return str(body["error"])


async def started(c: Cluster, **extra: Any) -> None:
    await c.add_broker(certs_key="test-certs-key", ca_dir=TEST_CA.root / "ca", **extra)
    async with c.api() as api:
        for app in ("web", "shop"):
            made = await api.post("/v1/apps", json={"app_name": app, "org_slug": "personal"})
            assert made.status_code == 201, made.text


async def test_custom_imports_check_reports_and_the_deletes_remove(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path) as c:
        await started(c)
        async with c.api() as api:
            mine = own_pair("own.example.com")
            made = await api.post(f"{CERTS}/custom", json=mine)
            assert made.status_code == 201, made.text
            detail = made.json()
            assert (detail["hostname"], detail["status"], detail["configured"]) == (
                "own.example.com", "active", True)
            entry = detail["certificates"][0]
            assert (entry["source"], entry["hostnames"], entry["issued"][0]["type"]) == (
                "custom", ["own.example.com"], "ecdsa")
            row = CertificateRow.model_validate(c.catalog.get(TABLE, "web/own.example.com"))
            assert "PRIVATE KEY" not in row.sealed_key
            assert "PRIVATE KEY" not in made.text

            shown = await api.get(f"{CERTS}/own.example.com")
            assert shown.status_code == 200
            assert shown.json()["certificates"] == [entry]
            checked = await api.post(f"{CERTS}/own.example.com/check")
            assert checked.status_code == 200, checked.text
            assert (checked.json()["status"], checked.json()["validation_errors"]) == (
                "active", [])

            # The wrong kind's delete removes nothing and says which one to use.
            refused(await api.delete(f"{CERTS}/own.example.com/acme"), 404, "not_found",
                    "no ACME (cluster CA) certificate", "/custom")
            gone = await api.delete(f"{CERTS}/own.example.com/custom")
            assert gone.status_code == 200, gone.text
            assert (gone.json()["status"], gone.json()["certificates"]) == ("removed", [])
            assert "default certificate" in gone.json()["warning"]
            assert c.catalog.get(TABLE, "web/own.example.com") is None
            refused(await api.get(f"{CERTS}/own.example.com"), 404, "not_found",
                    "no certificate for own.example.com")

            issued = await api.post(CERTS, json={"hostname": "www.example.com"})
            assert issued.status_code == 201, issued.text
            assert issued.json()["certificates"][0]["source"] == "fly"
            refused(await api.delete(f"{CERTS}/www.example.com/custom"), 404, "not_found",
                    "no custom certificate", "/acme")
            acme_gone = await api.delete(f"{CERTS}/www.example.com/acme")
            assert acme_gone.status_code == 200
            assert acme_gone.json()["status"] == "removed"
            assert "warning" not in acme_gone.json()

            await api.post(f"{CERTS}/custom", json=mine)
            plain = await api.delete(f"{CERTS}/own.example.com")
            assert (plain.status_code, plain.content) == (204, b"")
            refused(await api.delete(f"{CERTS}/own.example.com"), 404, "not_found")
            refused(await api.post(f"{CERTS}/own.example.com/check"), 404, "not_found")


async def test_acme_is_refused_naming_the_ways_and_bad_input_is_a_clear_4xx(
        tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path) as c:
        await started(c)
        async with c.api() as api:
            refused(await api.post(f"{CERTS}/acme", json={"hostname": "www.example.com"}),
                    422, "unimplemented", "no ACME client", "www.example.com",
                    "/v1/apps/web/certificates/custom", "bodega certs add")
            refused(await api.post(f"{CERTS}/acme", json={"hostname": "not a host"}), 400,
                    "invalid_argument", "is not a hostname")
            refused(await api.post("/v1/apps/nope/certificates/acme",
                                   json={"hostname": "a.example.com"}), 404, "not_found")
            await api.post("/v1/apps/shop/certificates/custom", json=own_pair("x.example.com"))
            refused(await api.post(f"{CERTS}/acme", json={"hostname": "x.example.com"}), 409,
                    "failed_precondition", "already has a certificate in app shop")

            other = own_pair("other.example.com")
            wrong = {**other, "hostname": "a.example.com"}
            refused(await api.post(f"{CERTS}/custom", json=wrong), 422, "invalid_argument",
                    "covers other.example.com, not a.example.com")
            refused(await api.post(f"{CERTS}/custom", json={**other, "fullchain": "garbage"}),
                    422, "invalid_argument", "not PEM")
            refused(await api.post(f"{CERTS}/custom", json={"hostname": "a.example.com"}), 400,
                    "invalid_argument", "fullchain")
            refused(await api.post(f"{CERTS}/custom", json={**other, "certificate": "x"}), 400,
                    "invalid_argument")
            refused(await api.post(f"{CERTS}/custom", content=b"{"), 400, "invalid_argument")
            refused(await api.get(f"{CERTS}?limit=0"), 400, "invalid_argument", "1 to 500")
            refused(await api.get(f"{CERTS}?limit=many"), 400, "invalid_argument", "whole")
            refused(await api.get("/v1/apps/nope/certificates"), 404, "not_found")
            async with c.api(token=None) as nobody:
                refused(await nobody.get(CERTS), 401, "unauthenticated")


async def test_a_list_pages_by_cursor_and_filters_by_hostname(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path) as c:
        await started(c, edge_domain="edge.test")
        async with c.api() as api:
            for name in ("b.example.com", "a.example.com", "c.example.com"):
                assert (await api.post(CERTS, json={"hostname": name})).status_code == 201
            pages, cursor = [], None
            while True:
                params = {"filter": "example", "limit": "2", **(
                    {"cursor": cursor} if cursor else {})}
                page = (await api.get(CERTS, params=params)).json()
                pages.append([s["hostname"] for s in page["certificates"]])
                assert page["total_count"] == 3
                cursor = page.get("next_cursor")
                if cursor is None:
                    break
            assert pages == [["a.example.com", "b.example.com"], ["c.example.com"]]
            summary = (await api.get(CERTS, params={"filter": "a.ex"})).json()
            assert summary["certificates"][0]["has_fly_certificate"] is True
            assert summary["certificates"][0]["status"] == "active"


async def test_a_broker_without_a_certificates_key_names_it(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path) as c:
        await c.add_broker()
        async with c.api() as api:
            for method, path in (("GET", CERTS), ("POST", f"{CERTS}/acme"),
                                 ("POST", f"{CERTS}/www.example.com/check"),
                                 ("DELETE", f"{CERTS}/www.example.com/custom")):
                answer = await api.request(method, path, json={} if method == "POST" else None)
                refused(answer, 409, "failed_precondition", "certificates key")


async def bodega(url: str, *args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bodega", "certs", *args, "-a", "web", "--api-url", url,
        "--token", ADMIN, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await process.communicate()
    return process.returncode or 0, out.decode(), err.decode()


async def test_bodega_certs_works_on_the_same_routes(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path) as c:
        await started(c)
        url = c.brokers[0].url
        code, out, err = await bodega(url, "add", "www.example.com")
        assert code == 0, err
        assert out.startswith("Issued www.example.com for web: cluster-ca"), out
        mine = own_pair("own.example.com")
        (tmp_path / "own.crt").write_text(mine["fullchain"])
        (tmp_path / "own.key").write_text(mine["private_key"])
        pair = ("--cert", str(tmp_path / "own.crt"), "--key", str(tmp_path / "own.key"))
        code, out, err = await bodega(url, "import", "own.example.com", *pair)
        assert code == 0, err
        assert out.startswith("Imported own.example.com for web: imported"), out
        code, out, err = await bodega(url, "import", "else.example.com", *pair)
        assert (code, err.strip()) == (1, "Error: certificate for else.example.com: the "
                                          "certificate covers own.example.com, not "
                                          "else.example.com")
        code, out, err = await bodega(url, "list")
        assert code == 0, err
        assert "own.example.com  imported" in out
        assert "www.example.com  cluster-ca" in out
        code, out, err = await bodega(url, "show", "www.example.com")
        assert code == 0, err
        assert "Covers:      www.example.com" in out
        code, out, err = await bodega(url, "remove", "www.example.com")
        assert code == 0
        assert out.strip() == "Removed the certificate for www.example.com from web"
        code, _, err = await bodega(url, "show", "www.example.com")
        assert (code, err.strip()) == (1, "Error: no certificate for www.example.com in app web")
