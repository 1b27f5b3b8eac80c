"""The dashboard in a real browser (Debian's Chromium) against a real `bodega up`.

One cluster and one browser serve the module; each test opens its own signed-in page
and says the page loaded nothing from outside the broker and logged no error.
``BODEGA_UI_SCREENS=DIR`` also keeps a picture of each screen the tests visit (how
``docs/dashboard/`` is made).
"""

from __future__ import annotations

import asyncio
import math
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Browser, Locator

from tests.poll_kit import until
from tests.python_kit import machine_python
from tests.ui.browser_kit import WHY_NO_BROWSER, Watched, chromium, sign_in, watched
from tests.ui.conftest import UpCluster

pytestmark = [pytest.mark.skipif(chromium() is None, reason=WHY_NO_BROWSER),
              pytest.mark.asyncio(loop_scope="module")]

TICKER = ["/bin/sh", "-c", "while true; do echo tick; sleep 0.5; done"]
LIVE = 2000  # ms: how soon a change in the cluster must show on an open page (the issue's)
PHONE = (390, 844)


def config(cpus: int = 1, memory_mb: int = 512, kind: str = "shared",
           metadata: dict[str, str] | None = None) -> dict[str, Any]:
    return {"image": "local/ui", "init": {"exec": TICKER}, "metadata": metadata or {},
            "guest": {"cpu_kind": kind, "cpus": cpus, "memory_mb": memory_mb}}


async def new_app(cluster: UpCluster, name: str) -> None:
    async with cluster.api() as api:
        made = await api.post("/v1/apps", json={"app_name": name, "org_slug": "personal"})
        assert made.status_code == 201, made.text


async def new_machine(cluster: UpCluster, app: str, region: str = "ams",
                      **guest: Any) -> tuple[str, str]:
    """(machine id, its worker), once the API has answered the create."""
    async with cluster.api() as api:
        made = await api.post(f"/v1/apps/{app}/machines",
                              json={"region": region, "config": config(**guest)})
        assert made.status_code == 200, made.text
        machine_id = made.json()["id"]
        placed = await api.get(f"/v1/apps/{app}/machines/{machine_id}/placement")
        return machine_id, str(placed.json()["winner"]["worker"])


async def kept(seen: Watched, name: str) -> None:
    """Under ``BODEGA_UI_SCREENS``, a picture of this screen (for docs/dashboard/)."""
    if os.environ.get("BODEGA_UI_SCREENS"):
        await seen.shoot(Path(os.environ["BODEGA_UI_SCREENS"]), name)


def clean(seen: Watched) -> None:
    assert seen.outside() == [], f"requests outside the broker: {seen.outside()}"
    assert seen.own_errors() == [], "\n".join(seen.own_errors())


async def share(segment: Locator) -> float:
    """How much of its bar a segment covers, as drawn on the screen (measured in one go: the
    stream may swap the card in between two separate measurements). A card swapped in and
    not laid out yet measures 0 / 0: measured again a moment later."""
    for _ in range(50):
        drawn: float = await segment.evaluate(
            "seg => seg.getBoundingClientRect().width / "
            "seg.ownerSVGElement.querySelector('rect.track').getBoundingClientRect().width")
        if math.isfinite(drawn):
            break
        await asyncio.sleep(0.1)
    return drawn


async def test_up_prints_the_dashboard_url(cluster: UpCluster) -> None:
    line = await cluster.up.until_line("Dashboard:")
    assert f"{cluster.base}/ui/" in line


async def test_the_topology_shows_every_worker_by_region(cluster: UpCluster,
                                                         page: Watched) -> None:
    await page.goto("/ui/topology")
    for worker in cluster.workers():
        card = page.page.locator(f'article.worker[data-worker="{worker}"]')
        await card.wait_for()
        assert await card.locator('svg.bar[data-what="cpu"]').count() == 1
        assert await card.locator('svg.bar[data-what="memory"]').count() == 1
    regions = await page.page.locator("section.region h2").all_inner_texts()
    assert regions == ["ams", "syd"]
    clean(page)


async def test_a_machine_that_starts_grows_its_workers_bar_without_a_reload(
        cluster: UpCluster, page: Watched) -> None:
    await new_app(cluster, "grow")
    await page.goto("/ui/topology")
    await page.page.evaluate("window.bodegaSamePage = true")  # gone if the page reloads
    machine_id, worker = await new_machine(cluster, "grow", cpus=1, memory_mb=512)
    card = page.page.locator(f'article.worker[data-worker="{worker}"]')
    cpu = card.locator('svg.bar[data-what="cpu"]')
    segment = cpu.locator(f'rect.seg[data-key="{machine_id}"]')
    await segment.wait_for(timeout=LIVE)
    assert await page.page.evaluate("window.bodegaSamePage") is True
    # 1 shared cpu is 250 of the worker's 4000 millicpus; 512 of its 4096 MB.
    assert await share(segment) == pytest.approx(250 / 4000, abs=0.01)
    memory = card.locator(f'svg.bar[data-what="memory"] rect.seg[data-key="{machine_id}"]')
    assert await share(memory) == pytest.approx(512 / 4096, abs=0.01)
    clean(page)


async def test_a_failed_placement_shows_its_reason_and_where_one_would_fit(
        cluster: UpCluster, page: Watched) -> None:
    await new_app(cluster, "toobig")
    await page.goto("/ui/placements")
    async with cluster.api() as api:
        refused = await api.post("/v1/apps/toobig/machines", json={
            "region": "syd", "config": config(cpus=16, kind="performance")})
    assert refused.status_code == 412, refused.text
    reason = page.page.locator('section.reason[data-reason="cpu"]')
    await reason.wait_for(timeout=LIVE)  # live: the page was open before the create
    assert "not enough cpu" in await reason.inner_text()
    links = await reason.locator("a").evaluate_all("links => links.map(a => a.textContent)")
    assert sorted(links) == ["syd-1", "syd-2"]
    await page.page.select_option("form.where select[name=region]", "ams")
    await page.page.fill("form.where input[name=cpus]", "2")
    await page.page.fill("form.where input[name=count]", "3")
    await page.page.click("form.where button[type=submit]")
    await page.page.locator("#where .where-result").wait_for()
    assert "would fit in ams" in await page.page.locator("#where").inner_text()
    await kept(page, "placements")
    clean(page)


async def test_stopping_a_machine_from_its_page_stops_it(cluster: UpCluster,
                                                         page: Watched) -> None:
    await new_app(cluster, "stopme")
    machine_id, _ = await new_machine(cluster, "stopme", region="syd")
    await page.goto(f"/ui/apps/stopme/machines/{machine_id}")
    await page.page.locator("#log .line", has_text="tick").first.wait_for()  # the live tail
    await page.page.locator('.machine-state[data-state="started"]').wait_for()
    await kept(page, "machine")
    await page.page.click('button[data-action="stop"]')
    await page.page.locator('.machine-state[data-state="stopped"]').wait_for()
    await page.page.locator("#flash", has_text="Stop sent through the API").wait_for()
    async with cluster.api() as api:
        machine = (await api.get(f"/v1/apps/stopme/machines/{machine_id}")).json()
    assert machine["state"] == "stopped"
    assert await page.page.locator('button[data-action="start"]').is_enabled()
    clean(page)


async def test_the_app_screen_shows_machines_by_group_and_the_release_to_roll_back_to(
        cluster: UpCluster, page: Watched) -> None:
    await new_app(cluster, "shown")
    async with cluster.api() as api:  # what `bodega deploy` records: v2 good, v3 failed
        for outcome in ("complete", "complete", "failed"):
            made = await api.post("/v1/apps/shown/releases", json={
                "strategy": "rolling", "image": "local/ui", "config": {}, "user": "ops"})
            assert made.status_code == 201, made.text
            version = made.json()["version"]
            done = await api.patch(f"/v1/apps/shown/releases/{version}",
                                   json={"status": outcome})
            assert done.status_code == 200, done.text
        ip = await api.post("/v1/apps/shown/ip_assignments", json={"type": "v6"})
        assert ip.status_code in (200, 201), ip.text
    web, _ = await new_machine(cluster, "shown", metadata={"fly_process_group": "web",
                                                           "fly_release_version": "2"})
    worker, _ = await new_machine(cluster, "shown", region="syd",
                                  metadata={"fly_process_group": "worker",
                                            "fly_release_version": "2"})
    await page.goto("/ui/apps/shown")
    for group, region, machine_id in (("web", "ams", web), ("worker", "syd", worker)):
        row = page.page.locator(f'section.group[data-group="{group}"][data-region="{region}"] '
                                f'tr[data-machine="{machine_id}"]')
        await row.wait_for()
        assert "v2" in await row.inner_text()
    target = page.page.locator('tr[data-version="2"]')
    assert "roll back to this" in await target.inner_text()
    assert "roll back to this" not in await page.page.locator('tr[data-version="3"]').inner_text()
    await kept(page, "app")
    clean(page)


async def test_the_members_screen_lists_every_component(cluster: UpCluster,
                                                        page: Watched) -> None:
    # The image registry and the metrics store are no members: they gossip with no one.
    components = [str(c["name"]) for c in cluster.up.state()["components"]
                  if c["role"] not in ("registry", "metrics-store")]

    async def every_member_known() -> bool:  # the last one's join spreads by gossip
        async with cluster.api() as api:
            members = (await api.get("/v1/cluster/members")).json()
        return sorted(str(m["name"]) for m in members) == sorted(components)

    await until(every_member_known, timeout=60, every=0.2,
                what="the broker knowing every component")
    await page.goto("/ui/members")
    names = await page.page.locator("tr[data-member]").evaluate_all(
        "rows => rows.map(r => r.dataset.member)")
    assert sorted(names) == sorted(components)
    await kept(page, "members")
    await page.goto("/ui/apps")
    await kept(page, "apps")
    clean(page)


async def test_every_screen_loads_only_the_brokers_scripts_and_logs_no_error(
        cluster: UpCluster, page: Watched) -> None:
    await new_app(cluster, "tour")
    machine_id, worker = await new_machine(cluster, "tour")
    frozen, _ = await new_machine(cluster, "tour", region="syd", kind="performance", cpus=2,
                                  memory_mb=1024)
    async with cluster.api() as api:  # a suspended machine keeps its room: drawn as such
        for state in ("started", "suspended"):
            if state == "suspended":
                suspended = await api.post(f"/v1/apps/tour/machines/{frozen}/suspend", json={})
                assert suspended.status_code == 200, suspended.text
            waited = await api.get(f"/v1/apps/tour/machines/{frozen}/wait",
                                   params={"state": state, "timeout": 50})
            assert waited.status_code == 200, f"{state}: {waited.text}"
    screens = {"/ui/topology": "topology", f"/ui/workers/{worker}": "worker", "/ui/apps": "",
               "/ui/apps/tour": "", f"/ui/apps/tour/machines/{machine_id}": "",
               "/ui/placements": "", "/ui/members": ""}
    for path, name in screens.items():
        await page.goto(path)
        if path == "/ui/topology":
            await page.page.locator(f'rect.seg.s-suspended[data-key="{frozen}"]').first.wait_for()
        if name:  # by now the other tests have left machines all over the cluster
            await kept(page, name)
        scripts = await page.page.locator("script").evaluate_all(
            "scripts => scripts.map(s => s.src)")
        assert scripts == [f"{cluster.base}/ui/static/vendor/htmx.min.js",
                           f"{cluster.base}/ui/static/vendor/sse.min.js"], path
    assert any("/ui/streams/" in u for u in page.requests)  # the pages opened their streams
    clean(page)


async def test_the_screens_fit_a_phone(cluster: UpCluster, browser: Browser) -> None:
    phone = await watched(browser, cluster.base, cluster.storage, *PHONE)
    try:
        for path in ("/ui/topology", "/ui/apps", "/ui/placements", "/ui/members"):
            await phone.goto(path)
            width = await phone.page.evaluate("document.documentElement.scrollWidth")
            assert width <= PHONE[0], f"{path} is {width}px wide on a {PHONE[0]}px screen"
            if path == "/ui/topology":
                await kept(phone, "topology-phone")
        clean(phone)
    finally:
        await phone.context.close()


async def test_signing_in_through_the_form_puts_no_token_in_any_url(
        cluster: UpCluster, browser: Browser) -> None:
    fresh = await watched(browser, cluster.base)
    try:
        await fresh.goto("/ui/members")
        assert fresh.page.url.startswith(f"{cluster.base}/ui/login")
        await sign_in(fresh, cluster.token, "/ui/members")
        assert fresh.page.url == f"{cluster.base}/ui/members"
        assert not [u for u in fresh.requests if cluster.token in u]
        assert cluster.token not in await fresh.page.content()
        cookies = await fresh.context.cookies()
        assert [(c["name"], c["httpOnly"], c["sameSite"]) for c in cookies] == [
            ("bodega_ui", True, "Strict")]
        assert await fresh.page.evaluate("document.cookie") == ""  # scripts cannot read it
        clean(fresh)
    finally:
        await fresh.context.close()


async def test_a_worker_drained_wears_a_draining_badge_until_undrained(
        cluster: UpCluster, page: Watched) -> None:
    worker = cluster.workers()[0]
    async with cluster.api() as api:
        drained = await api.post(f"/v1/cluster/hosts/{worker}/drain")
        assert drained.status_code == 200, drained.text
    try:
        await page.goto("/ui/topology")
        card = page.page.locator(f'article.worker[data-worker="{worker}"]')
        badge = card.locator(".badge.c-draining")

        async def badged() -> bool:
            if await badge.count():
                return True
            await page.goto("/ui/topology")  # the row may come after the page was drawn
            return False

        await until(badged, timeout=30.0, every=0.5)
        assert await badge.inner_text() == "draining"
    finally:
        async with cluster.api() as api:
            undone = await api.post(f"/v1/cluster/hosts/{worker}/undrain")
            assert undone.status_code == 200, undone.text
    await page.goto("/ui/topology")

    async def unbadged() -> bool:
        if not await card.locator(".badge.c-draining").count():
            return True
        await page.goto("/ui/topology")
        return False

    await until(unbadged, timeout=30.0, every=0.5)


# A machine with a [metrics] endpoint: it serves one counter on 9091.
METRICS_APP = (
    "import http.server\n"
    "class H(http.server.BaseHTTPRequestHandler):\n"
    "    def do_GET(self):\n"
    "        body = b'# TYPE ui_demo_total counter\\nui_demo_total 1\\n'\n"
    "        self.send_response(200); self.send_header('Content-Length', str(len(body)))\n"
    "        self.end_headers(); self.wfile.write(body)\n"
    "    def log_message(self, *args): pass\n"
    "http.server.ThreadingHTTPServer(('0.0.0.0', 9091), H).serve_forever()\n"
)


@pytest.mark.skipif(shutil.which("victoria-metrics") is None,
                    reason="victoria-metrics is not installed: no metrics store")
async def test_the_app_and_machine_pages_chart_their_metrics(cluster: UpCluster,
                                                             page: Watched) -> None:
    await new_app(cluster, "charted")
    async with cluster.api() as api:
        made = await api.post("/v1/apps/charted/machines", json={"region": "ams", "config": {
            "image": "local/ui", "init": {"exec": [machine_python(), "-c", METRICS_APP]},
            "guest": {"cpus": 1, "memory_mb": 256}, "metrics": {"port": 9091}}})
        assert made.status_code == 200, made.text
        machine_id = made.json()["id"]
    await page.goto("/ui/apps/charted")
    up = page.page.locator('#charts figure.chart[data-chart="up"]')
    await up.wait_for()
    assert await page.page.locator("#charts figure.chart").count() == 5

    async def drawn() -> bool:  # scraped within seconds; the page asks again every 15 s
        await page.goto("/ui/apps/charted")
        await up.wait_for()
        return await up.locator("svg polyline").count() == 1
    await until(drawn, timeout=60, every=1.0, what="the [metrics] endpoint charted")
    assert (await up.locator(".last").inner_text()) == "1"
    # A figure this cluster has no series of says so, and draws no line.
    rps = page.page.locator('#charts figure.chart[data-chart="rps"]')
    assert await rps.locator("svg").count() == 0
    assert "no samples" in await rps.inner_text()
    await page.goto(f"/ui/apps/charted/machines/{machine_id}")
    machine_up = page.page.locator('#charts figure.chart[data-chart="up"]')
    await machine_up.wait_for()
    # A flat line has no height: it is there (attached), not "visible" to playwright.
    await machine_up.locator("svg polyline").wait_for(state="attached", timeout=20000)
    assert await page.page.locator("#charts figure.chart").count() == 5
    await kept(page, "charts")
    clean(page)
