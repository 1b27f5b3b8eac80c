"""The dashboard over a real broker and workers: who may see it, CSRF, its streams, its screens.

The browser tests (``tests/ui``) show the pages work in Chromium; these check
the doors with plain HTTP, the way an attacker would knock: no token, a bad
cookie, another app's token, a form from another site, a token looked for in
every page and URL.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import httpx

from bodega.broker.ui.core import session

from .broker_kit import ADMIN, Cluster, in_process_cluster, machine


@dataclass
class Setup:
    cluster: Cluster
    url: str
    machine_id: str
    worker: str


@contextlib.asynccontextmanager
async def dashboard_cluster(tmp: Path) -> AsyncIterator[Setup]:
    async with in_process_cluster(tmp) as c:
        await c.add_worker("ams-1", cpus=4, memory_mb=4096)
        await c.add_worker("ams-2", cpus=4, memory_mb=4096)
        c.follow()
        broker = await c.add_broker()
        async with c.api() as api:
            for app in ("web", "other"):
                assert (await api.post("/v1/apps", json={"app_name": app,
                                                         "org_slug": "personal"})).is_success
            made = (await api.post("/v1/apps/web/machines", json=machine())).json()
            await api.get(f"/v1/apps/web/machines/{made['id']}/wait",
                          params={"state": "started", "timeout": 10})
        c.sync()  # the view has it now, not one publish later
        yield Setup(c, broker.url, made["id"], row(c, made["id"])["worker"])


def row(c: Cluster, machine_id: str) -> dict[str, Any]:
    """The machine's row in the view."""
    found = c.catalog.get("machines", machine_id)
    assert found is not None, machine_id
    return found


def signed_in(url: str, token: str = ADMIN) -> httpx.AsyncClient:
    """A client holding the cookie a login with ``token`` set."""
    client = httpx.AsyncClient(base_url=url, timeout=30)
    client.cookies.set(session.COOKIE, session.set_cookie(token, False).split(";")[0]
                       .split("=", 1)[1], path="/ui")
    return client


async def test_without_a_token_pages_lead_to_sign_in_and_the_rest_is_refused(
        tmp_path: Path) -> None:
    async with dashboard_cluster(tmp_path) as s, httpx.AsyncClient(base_url=s.url) as web:
        page = await web.get("/ui/topology?region=ams")
        assert page.status_code == 303
        assert unquote(page.headers["location"]) == "/ui/login?next=/ui/topology?region=ams"
        login = await web.get(page.headers["location"])
        assert login.status_code == 200
        assert 'name="token"' in login.text
        stream = await web.get("/ui/streams/topology")
        assert (stream.status_code, stream.headers["hx-redirect"]) == (401, "/ui/login")
        stop = await web.post(f"/ui/apps/web/machines/{s.machine_id}/stop")
        assert stop.status_code == 401
        assert row(s.cluster, s.machine_id)["state"] == "started"


async def test_signing_in_sets_a_cookie_only_the_dashboard_reads(tmp_path: Path) -> None:
    async with dashboard_cluster(tmp_path) as s, httpx.AsyncClient(base_url=s.url) as web:
        bad = await web.post("/ui/login", data={"token": "nope", "next": "/ui/apps"})
        assert bad.status_code == 401
        assert "Refused" in bad.text
        assert "set-cookie" not in bad.headers
        away = await web.post("/ui/login", data={"token": ADMIN, "next": "/ui/apps"},
                              headers={"origin": "http://evil.example"})
        assert away.status_code == 403
        assert "set-cookie" not in away.headers
        good = await web.post("/ui/login", data={"token": ADMIN, "next": "/ui/apps"})
        assert (good.status_code, good.headers["location"]) == (303, "/ui/apps")
        cookie = good.headers["set-cookie"]
        assert {"HttpOnly", "SameSite=Strict", "Path=/ui"} <= {
            p.strip() for p in cookie.split(";")}
        assert ADMIN not in cookie
        apps = await web.get("/ui/apps")
        assert apps.status_code == 200
        assert 'data-app="web"' in apps.text
        topology = await web.get("/ui/topology")
        assert 'data-worker="ams-1"' in topology.text
        assert 'data-worker="ams-2"' in topology.text
        out = await web.post("/ui/logout", data={"csrf": session.csrf_token(ADMIN)})
        assert out.status_code == 303
        assert "Max-Age=0" in out.headers["set-cookie"]


async def test_a_bad_cookie_is_refused_and_cleared_and_a_bearer_token_works(
        tmp_path: Path) -> None:
    async with dashboard_cluster(tmp_path) as s:
        for value in ("not-base64-%%", session.set_cookie("revoked", False).split(";")[0]
                      .split("=", 1)[1]):
            async with httpx.AsyncClient(base_url=s.url) as web:
                web.cookies.set(session.COOKIE, value, path="/ui")
                page = await web.get("/ui/topology")
                assert page.status_code == 401, value
                assert "Signed out" in page.text
                assert 'name="token"' in page.text
                assert "Max-Age=0" in page.headers["set-cookie"]
        async with httpx.AsyncClient(base_url=s.url,
                                     headers={"authorization": f"Bearer {ADMIN}"}) as web:
            assert (await web.get("/ui/members")).status_code == 200
            stop = await web.post(f"/ui/apps/web/machines/{s.machine_id}/stop")
            assert stop.status_code == 303  # no CSRF needed: a browser never adds the header
        async with httpx.AsyncClient(base_url=s.url,
                                     headers={"authorization": "Bearer wrong"}) as web:
            assert (await web.get("/ui/members")).status_code == 401


async def test_an_app_token_sees_its_app_and_nothing_else(tmp_path: Path) -> None:
    async with dashboard_cluster(tmp_path) as s:
        async with s.cluster.api() as api:
            token = (await api.post("/v1/apps/web/deploy_token", json={})).json()["token"]
        async with signed_in(s.url, token) as web:
            apps = await web.get("/ui/apps")
            assert 'data-app="web"' in apps.text
            assert 'data-app="other"' not in apps.text
            assert (await web.get("/ui/topology")).status_code == 403
            assert (await web.get("/ui/members")).status_code == 403
            assert (await web.get("/ui/apps/other")).status_code == 404
            assert (await web.get("/ui/apps/web")).status_code == 200
            machine_page = await web.get(f"/ui/apps/web/machines/{s.machine_id}")
            assert machine_page.status_code == 200


URL_ATTRIBUTE = re.compile(r'(?:href|src|action|sse-connect|hx-post|hx-get)="([^"]*)"')


async def test_the_token_never_appears_in_a_url_or_a_page(tmp_path: Path) -> None:
    async with dashboard_cluster(tmp_path) as s:
        secrets = [ADMIN, session.set_cookie(ADMIN, False).split(";")[0].split("=", 1)[1]]
        async with signed_in(s.url) as web:
            pages = ["/ui/", "/ui/topology", f"/ui/workers/{s.worker}", "/ui/apps",
                     "/ui/apps/web", f"/ui/apps/web/machines/{s.machine_id}",
                     "/ui/placements", "/ui/members", "/ui/login"]
            for path in pages:
                answer = await web.get(path, follow_redirects=True)
                assert answer.status_code == 200, (path, answer.text[:300])
                urls = URL_ATTRIBUTE.findall(answer.text) + [str(answer.url)] + [
                    str(r.headers.get("location", "")) for r in answer.history]
                for secret in secrets:
                    assert secret not in answer.text, path
                    assert not [u for u in urls if secret in u], path
            async with web.stream("GET", "/ui/streams/topology") as stream:
                first = await anext(stream.aiter_text())
                for secret in secrets:
                    assert secret not in first


async def test_a_change_needs_the_sessions_csrf_token_and_this_origin(tmp_path: Path) -> None:
    async with dashboard_cluster(tmp_path) as s, signed_in(s.url) as web:
        path = f"/ui/apps/web/machines/{s.machine_id}/stop"
        csrf = session.csrf_token(ADMIN)
        for data, headers in (({}, {}), ({"csrf": "0" * 64}, {}),
                              ({"csrf": csrf}, {"origin": "http://evil.example"})):
            refused = await web.post(path, data=data, headers=headers)
            assert refused.status_code == 403, (data, headers)
        assert row(s.cluster, s.machine_id)["state"] == "started"
        done = await web.post(path, headers={"x-bodega-csrf": csrf, "hx-request": "true"})
        assert done.status_code == 200
        assert "Stop sent through the API" in done.text
        async with s.cluster.api() as api:
            waited = await api.get(f"/v1/apps/web/machines/{s.machine_id}/wait",
                                   params={"state": "stopped", "timeout": 10})
            assert waited.status_code == 200
        unknown = await web.post(path.replace("/stop", "/%3Cscript%3Ealert(1)"),
                                 headers={"x-bodega-csrf": csrf, "hx-request": "true"})
        assert unknown.status_code == 404
        assert "<script>" not in unknown.text  # what the path said is shown, never run
        refused = await web.post(path.replace("/stop", "/suspend"),
                                 headers={"x-bodega-csrf": csrf, "hx-request": "true"})
        assert "suspend refused" in refused.text, refused.text  # the API's answer, passed on


async def events(stream: httpx.Response) -> AsyncIterator[tuple[str, str]]:
    """(event, data) pairs as the stream sends them."""
    name, data = "", []
    async for line in stream.aiter_lines():
        if line.startswith("event: "):
            name = line.removeprefix("event: ")
        elif line.startswith("data: "):
            data.append(line.removeprefix("data: "))
        elif not line and name:
            yield name, "\n".join(data)
            name, data = "", []


async def test_the_topology_stream_sends_the_card_of_the_worker_a_machine_starts_on(
        tmp_path: Path) -> None:
    async with dashboard_cluster(tmp_path) as s, signed_in(s.url) as web, \
            web.stream("GET", "/ui/streams/topology") as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")
        feed = events(stream)
        name, first = await anext(feed)
        assert name == "topology"
        assert s.machine_id in first
        async with s.cluster.api() as api:
            made = (await api.post("/v1/apps/web/machines", json=machine())).json()
        async with asyncio.timeout(20):
            while True:
                name, data = await anext(feed)
                if made["id"] in data and name.startswith("worker-"):
                    break
        worker = row(s.cluster, made["id"])["worker"]
        assert name == f"worker-{worker}"


async def test_a_refused_placement_shows_its_reason_and_the_workers(tmp_path: Path) -> None:
    async with dashboard_cluster(tmp_path) as s, signed_in(s.url) as web:
        assert "No placement has been refused" in (await web.get("/ui/placements")).text
        big = machine(config={"guest": {"cpu_kind": "performance", "cpus": 16,
                                        "memory_mb": 1024}})
        async with s.cluster.api() as api:
            refused = await api.post("/v1/apps/web/machines", json=big)
        assert refused.status_code == 412
        page = (await web.get("/ui/placements")).text
        assert 'data-reason="cpu"' in page
        assert "not enough cpu" in page
        assert 'href="/ui/workers/ams-1"' in page
        assert 'href="/ui/workers/ams-2"' in page
        assert refused.json()["error"] in page.replace("&#39;", "'")
        where = await web.post("/ui/placements/where", data={
            "csrf": session.csrf_token(ADMIN), "region": "ams", "cpus": "2", "memory_mb": "512",
            "count": "3"})
        assert "would fit in ams" in where.text
        bad = await web.post("/ui/placements/where", data={
            "csrf": session.csrf_token(ADMIN), "cpus": "x"})
        assert "Bad form: cpus must be a whole number" in bad.text


async def test_a_machine_on_a_host_nobody_hears_is_marked_on_its_app_and_worker_screens(
        tmp_path: Path) -> None:
    async with dashboard_cluster(tmp_path) as s, signed_in(s.url) as web:
        catalog = s.cluster.catalog
        for name in ("ams-1", "ams-2"):
            catalog.set_status(name, "alive")
        pages = ("/ui/apps/web", f"/ui/workers/{s.worker}",
                 f"/ui/apps/web/machines/{s.machine_id}")

        async def marks() -> list[str]:
            return [m for page in pages
                    for m in re.findall(r'data-host-status="(\w+)"', (await web.get(page)).text)]

        assert await marks() == []
        catalog.set_status(s.worker, "dead")
        assert await marks() == ["unreachable"] * 3
        members = (await web.get("/ui/members")).text
        assert f'data-member="{s.worker}"' in members
        catalog.set_status(s.worker, "alive")
        assert await marks() == []


async def test_closing_the_dashboard_ends_its_open_streams(tmp_path: Path) -> None:
    async with dashboard_cluster(tmp_path) as s, signed_in(s.url) as web, \
            web.stream("GET", "/ui/streams/members") as stream:
        feed = events(stream)
        assert (await anext(feed))[0] == "members"
        dashboard = s.cluster.brokers[0].dashboard
        assert dashboard is not None
        await dashboard.close()
        async with asyncio.timeout(10):
            rest = [e async for e in feed]
        assert rest == []
