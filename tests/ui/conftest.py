"""What the browser tests share: one real `bodega up` and one Chromium per module, a signed-in
page per test, and screenshots of every screen when a test fails.

The screenshots go to the test's own output directory (``tmp_path/screens``, which pytest
keeps for the last runs), or under ``BODEGA_UI_SCREENS`` when that names a directory.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Generator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import pytest_asyncio
from playwright.async_api import Browser

from tests.cidr_kit import machine_cidr
from tests.cluster.up_kit import UpProcess, free_port, unwire
from tests.ui.browser_kit import Watched, launched, sign_in, watched

SCREENS = ("topology", "apps", "placements", "members")
TOKEN = "ui-test-admin-token"


@dataclass
class UpCluster:
    up: UpProcess
    base: str  # the broker: API and dashboard
    token: str
    storage: str  # a signed-in browser's cookies, to start each page signed in

    def api(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.base, timeout=60,
                                 headers={"authorization": f"Bearer {self.token}"})

    def workers(self) -> list[str]:
        return [str(c["name"]) for c in self.up.state()["components"] if c["role"] == "worker"]


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item,
                              call: pytest.CallInfo[None]) -> Generator[None, object, object]:
    report = yield
    if call.when == "call":
        item.stash[FAILED] = bool(getattr(report, "failed", False))
    return report


FAILED = pytest.StashKey[bool]()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def browser() -> AsyncIterator[Browser]:
    async with launched() as running:
        yield running


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def cluster(tmp_path_factory: pytest.TempPathFactory,
                  browser: Browser) -> AsyncIterator[UpCluster]:
    """Two regions of two workers, a broker and a proxy, on free ports and a range of its own."""
    data = tmp_path_factory.mktemp("ui") / "cluster"
    api = free_port()
    up = UpProcess(data, "--regions", "ams,syd", "--workers-per-region", "2",
                   "--worker-cpus", "4", "--worker-memory-mb", "4096", "--api-port", str(api),
                   "--proxy-port", str(free_port()), "--proxy-tls-port", "0",
                   "--registry-port", "0",
                   "--machine-cidr", machine_cidr(240, 248), "--token", TOKEN,
                   "--metrics-interval", "1s")  # the charts' metrics store, where installed
    await up.start()
    try:
        await up.until_line("bodega is up", timeout=180)
        base = f"http://127.0.0.1:{api}"
        seen = await watched(browser, base)
        await sign_in(seen, TOKEN)
        storage = str(data.parent / "signed-in.json")
        await seen.context.storage_state(path=storage)
        await seen.context.close()
        yield UpCluster(up, base, TOKEN, storage)
    finally:
        if up.process is not None and up.process.returncode is None:
            await up.stop()
        await unwire(data)


@pytest_asyncio.fixture(loop_scope="module")
async def page(request: pytest.FixtureRequest, browser: Browser, cluster: UpCluster,
               tmp_path: Path) -> AsyncIterator[Watched]:
    """A signed-in page; when the test fails, every screen is photographed first."""
    seen = await watched(browser, cluster.base, cluster.storage)
    try:
        yield seen
        if request.node.stash.get(FAILED, False):
            where = Path(os.environ.get("BODEGA_UI_SCREENS") or tmp_path) / "screens"
            await photograph(seen, where)
            sys.stderr.write(f"\nscreenshots of the failed test's screens: {where}\n")
    finally:
        await seen.context.close()


async def photograph(seen: Watched, where: Path) -> None:
    """The page as the test left it, then each screen as it is now."""
    await seen.shoot(where, "as-left")
    for screen in SCREENS:
        await seen.page.goto(f"{seen.base}/ui/{screen}")
        await seen.shoot(where, screen)
