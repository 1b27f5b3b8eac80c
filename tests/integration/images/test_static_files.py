"""A machine's statics served from its image by a real worker, the machine stopped."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from bodega.proxy.core.load import Load
from bodega.proxy.core.routes import RoutingTable
from bodega.proxy.core.statics import StaticsTable
from bodega.proxy.metrics import ProxyMetrics
from bodega.proxy.wake import Waker
from bodega.wire.internal.worker_client import WorkerClient
from tests.integration.images.test_image_machines import worker_args
from tests.tls_kit import TEST_CA

from ..daemon_kit import running_worker_daemon
from ..proxy.plane_kit import PLANES, serving
from .image_kit import build_image, needs_image_tools, registry

pytestmark = needs_image_tools

STYLE = b"body { color: #123456 }\n" * 100


def public_files(rootfs: Path) -> None:
    """/app/public: a file, a directory with an index, links inside and reaching out."""
    public = rootfs / "app" / "public"
    (public / "docs").mkdir(parents=True)
    (public / "site.css").write_bytes(STYLE)
    (public / "docs" / "index.html").write_text("<h1>docs</h1>\n")
    (public / "page two.txt").write_text("two\n")
    (public / "style.css").symlink_to("site.css")  # a link inside: followed
    (public / "up").symlink_to("../../../../../../etc")  # stops at the image's root
    (public / "abs").symlink_to("/etc/passwd")  # the image's /etc/passwd, not the host's
    (public / "dev").symlink_to("/dev/null")  # not a regular file in the image


async def get(client: WorkerClient, machine_id: str, path: str, *, method: str = "GET",
              headers: dict[str, str] | None = None
              ) -> tuple[int, dict[str, str], bytes]:
    async with client.static(machine_id, path, method=method, headers=headers) as answer:
        body = b"".join([chunk async for chunk in answer.chunks])
        return answer.status, dict(answer.headers), body


async def test_a_stopped_machines_statics_are_served_from_its_image_and_it_stays_stopped(
        tmp_path: Path) -> None:
    async with registry(tmp_path) as host:
        image = build_image(tmp_path, host, "test/statics:v1", files=public_files)
        async with running_worker_daemon(tmp_path, **worker_args(host)) as (_daemon, client):
            machine = await client.create_machine({"app": "img", "config": {
                "image": image, "guest": {"cpus": 1, "memory_mb": 256},
                "statics": [{"guest_path": "/app/public", "url_prefix": "/static",
                             "index_document": "index.html"}]}})
            await client.wait(machine.id, "started", timeout=60)
            await client.stop(machine.id)
            await client.wait(machine.id, "stopped", timeout=30)

            status, headers, body = await get(client, machine.id, "/static/site.css")
            assert (status, body) == (200, STYLE)
            assert headers["content-type"].startswith("text/css")
            assert headers["content-length"] == str(len(STYLE))
            assert headers["etag"]
            assert headers["last-modified"]
            assert (await get(client, machine.id, "/static/style.css"))[2] == STYLE

            status, headers, body = await get(client, machine.id, "/static/site.css",
                                              method="HEAD")
            assert (status, body, headers["content-length"]) == (200, b"", str(len(STYLE)))
            etag = headers["etag"]
            status, headers, body = await get(client, machine.id, "/static/site.css",
                                              headers={"if-none-match": etag})
            assert (status, body, headers["etag"]) == (304, b"", etag)
            modified = headers["last-modified"]
            for since, wanted in [(modified, 304), ("Thu, 01 Jan 1998 00:00:00 GMT", 200),
                                  ("not a date", 200)]:
                status, headers, body = await get(client, machine.id, "/static/site.css",
                                                  headers={"if-modified-since": since})
                assert (status, len(body)) == (wanted, 0 if wanted == 304 else len(STYLE))
            status, _, body = await get(client, machine.id, "/static/site.css", headers={
                "if-none-match": '"another"', "if-modified-since": modified})
            assert (status, body) == (200, STYLE), "If-None-Match decides when it is given"

            assert (await get(client, machine.id, "/static/docs"))[2] == b"<h1>docs</h1>\n"
            assert (await get(client, machine.id, "/static/docs/"))[2] == b"<h1>docs</h1>\n"
            assert (await get(client, machine.id, "/static/page two.txt"))[2] == b"two\n"
            image_passwd = b"root:x:0:0:root:/:/bin/sh\n"
            assert (await get(client, machine.id, "/static/up/passwd"))[2] == image_passwd
            assert (await get(client, machine.id, "/static/abs"))[2] == image_passwd

            for path, why in [("/static/missing.css", "no file at /app/public/missing.css"),
                              ("/static/dev", "no file at /app/public/dev"),
                              ("/elsewhere", "no static of machine"),
                              ("/static/a\x00b", "a NUL in the path")]:
                status, headers, body = await get(client, machine.id, path)
                assert status == 404, (path, body)
                error = json.loads(body)
                assert error["status"] == "not_found"
                assert why in error["error"], (path, error)
            assert (await client.machine(machine.id)).state == "stopped"

            async with client.static(machine.id, "/static/site.css", app="other") as answer:
                assert answer.status == 404  # a machine of another app is never reached
            for role, expected in [("proxy", 200), ("admin", 403)]:
                caller = WorkerClient(client.base_url, TEST_CA.context(role))
                try:
                    assert (await get(caller, machine.id, "/static/site.css"))[0] == expected
                finally:
                    await caller.aclose()


@pytest.mark.parametrize("plane", PLANES)
async def test_the_edge_serves_statics_of_a_stopped_machine_and_wakes_it_for_the_rest(
        tmp_path: Path, plane: str) -> None:
    """Both data planes, a real worker: a GET under the prefix is the file from the image
    with the machine left stopped; a POST there and any other path start it."""
    async with registry(tmp_path) as host:
        image = build_image(tmp_path, host, "test/statics:v1", files=public_files)
        async with running_worker_daemon(tmp_path, **worker_args(host)) as (daemon, client):
            created = await client.create_machine({"app": "web", "config": {
                "image": image, "guest": {"cpus": 1, "memory_mb": 256},
                "services": [{"protocol": "tcp", "internal_port": 8080, "autostart": True,
                              "ports": [{"port": 80, "handlers": ["http"]}]}],
                "statics": [{"guest_path": "/app/public", "url_prefix": "/static"}]}})
            await client.wait(created.id, "started", timeout=60)
            await client.stop(created.id)
            await client.wait(created.id, "stopped", timeout=30)
            machine = await client.machine(created.id)
            assert machine.worker

            proxy_client = WorkerClient(daemon.url, TEST_CA.context("proxy"))
            table, statics, load, metrics = RoutingTable(), StaticsTable(), Load(), ProxyMetrics()
            table.put_machine(machine.id, machine)
            statics.put_machine(machine.id, machine)
            waker = Waker(table, lambda _w: proxy_client, load, metrics, "ams")
            try:
                async with serving(plane, table, waker, load, metrics, statics) as served, \
                        httpx.AsyncClient(base_url=served.url, timeout=60,
                                          headers={"host": "web.localhost"}) as http:
                    await served.synced()
                    got = await http.get("/static/site.css")
                    assert (got.status_code, got.content) == (200, STYLE)
                    assert got.headers["content-type"].startswith("text/css")
                    assert got.headers["fly-request-id"]
                    again = await http.get("/static/site.css",
                                           headers={"if-none-match": got.headers["etag"]})
                    assert (again.status_code, again.content) == (304, b"")
                    part = await http.get("/static/site.css", headers={"range": "bytes=0-3"})
                    assert (part.status_code, part.content) == (206, STYLE[:4])
                    assert part.headers["content-range"] == f"bytes 0-3/{len(STYLE)}"
                    missing = await http.get("/static/nothing.css")
                    assert missing.status_code == 404
                    assert json.loads(missing.content)["status"] == "not_found"
                    dots = await http.get("/static/%2e%2e/%2e%2e/etc/passwd")
                    assert dots.status_code == 404
                    assert "'..' step" in dots.text
                    assert (await client.machine(machine.id)).state == "stopped"
                    assert load.outstanding == {}  # no request counted on the machine
                    assert load.idle_since == {}  # nor its idleness restarted

                    page = await http.get("/index.html")  # not a static: wakes the machine
                    assert (page.status_code, page.text) == (200, "hello from an image\n")
                    assert (await client.machine(machine.id)).state == "started"
                    await served.synced()  # HAProxy now routes the app to the machine...
                    assert (await http.get("/index.html")).text == "hello from an image\n"
                    # ...but a static still to the edge (the machine's httpd has no such file)
                    got = await http.get("/static/site.css")
                    assert (got.status_code, got.content) == (200, STYLE)

                    table.set_worker(machine.worker, "dead")  # no worker left to ask
                    await served.synced()
                    gone = await http.get("/static/site.css")
                    assert gone.status_code == 503
                    assert "no static file of web can be served right now" in gone.text
            finally:
                await proxy_client.aclose()
