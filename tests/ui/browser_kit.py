"""Debian's Chromium driven by playwright, and a page that remembers what it saw.

Playwright cannot download its own browser here, so it launches the
``chromium`` that ``scripts/host-packages`` installs, with the flags that keep
it off the network (no background fetches, updates or sync: a closed host
refuses those connections) in a fresh profile. A ``Watched`` page records
every request it made and every console error, so a test can say the page
loaded nothing from outside the broker and logged no error.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

from playwright.async_api import (
    Browser,
    BrowserContext,
    ConsoleMessage,
    Page,
    Request,
    async_playwright,
)
from playwright.async_api import Error as PlaywrightError

CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync"]
WHY_NO_BROWSER = ("Debian's chromium is not installed (scripts/host-packages installs it "
                  "when run as root: apt-get install -y chromium)")


def chromium() -> str | None:
    return shutil.which("chromium")


@contextlib.asynccontextmanager
async def launched() -> AsyncIterator[Browser]:
    """Chromium, headless, in a fresh profile playwright makes and removes."""
    executable = chromium()
    assert executable is not None, WHY_NO_BROWSER
    async with async_playwright() as driver:
        browser = await driver.chromium.launch(executable_path=executable, headless=True,
                                               args=CHROMIUM_FLAGS)
        try:
            yield browser
        finally:
            await browser.close()


@dataclass
class Watched:
    """A page of its own context (its own cookies), with what it requested and logged."""

    context: BrowserContext
    page: Page
    base: str
    requests: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    network_changed: bool = False  # the host's addresses changed under the browser

    def own_errors(self) -> list[str]:
        """The errors the page logged but for the host's network changing under it. Chromium
        drops every connection when any interface's address changes, loopback ones too, and
        the tests beside this one add and remove interfaces: a stream cut so (htmx logs the
        event) is the host's doing, not the page's."""
        if not self.network_changed:
            return self.errors
        return [e for e in self.errors if not e.startswith("console: [object Event] ")]

    def outside(self) -> list[str]:
        """Requests to anywhere but the broker."""
        return [u for u in self.requests if not (u == self.base or u.startswith(self.base + "/"))]

    async def goto(self, path: str) -> None:
        answer = await self.page.goto(self.base + path)
        assert answer is not None, path
        assert answer.ok, f"{path}: {answer.status}"

    async def shoot(self, directory: Path, name: str) -> Path:
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{name}.png"
        await self.page.screenshot(path=str(path), full_page=True)
        return path


async def watched(browser: Browser, base: str, storage: str | None = None,
                  width: int = 1280, height: int = 900) -> Watched:
    context = await browser.new_context(base_url=base, storage_state=storage,
                                        viewport={"width": width, "height": height})
    page = await context.new_page()
    seen = Watched(context, page, base)

    def on_request(request: Request) -> None:
        seen.requests.append(request.url)

    def on_console(message: ConsoleMessage) -> None:
        if message.type == "error" and "net::ERR_NETWORK_CHANGED" in message.text:
            seen.network_changed = True
        elif message.type == "error":
            seen.errors.append(f"console: {message.text} ({message.location})")

    def on_error(error: PlaywrightError) -> None:
        seen.errors.append(f"page error: {error}")

    page.on("request", on_request)
    page.on("console", on_console)
    page.on("pageerror", on_error)
    return seen


async def sign_in(seen: Watched, token: str, then: str = "/ui/") -> None:
    """Through the login form, as a person would."""
    await seen.goto(then)
    await seen.page.fill("#token", token)
    async with seen.page.expect_navigation():
        await seen.page.click("form[action='/ui/login'] button[type=submit]")
