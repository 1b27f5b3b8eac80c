"""A vm machine that keeps state in its guest's memory, on a real ``bodega up``, for the
live move's test and bench: its image counts in a tmpfs, says its boot's id and serves
both (busybox httpd), so a move that loses its memory, or reboots it, shows."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.cluster.deploy_kit import EXAMPLES, Cli
from tests.integration.images.image_kit import BUSYBOX
from tests.proc_kit import live_pids

# The program: a counter in the guest's tmpfs and its boot's id, served on 8080.
START = """#!/bin/busybox sh
B=/bin/busybox
$B mkdir -p /dev/shm/www
$B cat /proc/sys/kernel/random/boot_id > /dev/shm/www/boot
echo up > /dev/shm/www/index.html
( i=0; while :; do i=$((i+1)); echo $i > /dev/shm/www/count; $B usleep 20000; done ) &
exec $B httpd -f -p 8080 -h /dev/shm/www
"""
DOCKERFILE = """FROM scratch
COPY busybox /bin/busybox
COPY start.sh /start.sh
ENTRYPOINT ["/bin/busybox", "sh", "/start.sh"]
"""


def vm_app(apps: Path, app: str) -> Path:
    """The app's directory (its bodega.toml returned): one vm machine of that image."""
    target = apps / app
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(EXAMPLES / "image-app", target)
    shutil.copy(BUSYBOX, target / "busybox")
    (target / "start.sh").write_text(START)
    (target / "Dockerfile").write_text(DOCKERFILE)
    toml = target / "bodega.toml"
    # Not woken by the proxy: a cold move's stop is the bench's, not undone by a request.
    # No check either: the proxy sends to a machine at once, so a gap in its answers is
    # the move's, not a check's interval before the proxy trusts where it went.
    text = toml.read_text()
    text = text[:text.index("  [[http_service.checks]]")]
    toml.write_text(text.replace('app = "image-app"', f'app = "{app}"', 1)
                    .replace("auto_start_machines = true", "auto_start_machines = false")
                    + "\n[[vm]]\n  isolation = \"vm\"\n")
    return toml


def qemus(machine_id: str) -> list[int]:
    """The qemu processes running the machine's VM, on this host."""
    return live_pids(lambda argv: argv[0].endswith(b"qemu-system-x86_64")
                     and any(machine_id.encode() in arg for arg in argv))


async def read(cli: Cli, app: str, path: str) -> str | None:
    with contextlib.suppress(httpx.HTTPError):
        answer = await cli.get(app, path)
        if answer.status_code == 200:
            return answer.text.strip()
    return None


@dataclass
class Gaps:
    """The longest time no answer came from the guest, polled every ``every`` seconds."""

    every: float = 0.005
    longest: float = 0.0
    failed: int = 0
    answered: int = 0
    counts: list[int] = field(default_factory=list)


@contextlib.asynccontextmanager
async def polled(cli: Cli, app: str, every: float = 0.005, timeout: float = 0.5
                 ) -> AsyncIterator[Gaps]:
    """The guest's counter asked through the proxy every few ms while the block runs."""
    gaps = Gaps(every)

    async def poll() -> None:
        last = time.monotonic()
        async with httpx.AsyncClient(timeout=timeout) as web:
            while True:
                try:
                    answer = await web.get(cli.proxy + "/count",
                                           headers={"host": f"{app}.localhost"})
                    ok = answer.status_code == 200
                except httpx.HTTPError:
                    ok = False
                now = time.monotonic()
                if ok:
                    gaps.answered += 1
                    gaps.longest = max(gaps.longest, now - last)
                    with contextlib.suppress(ValueError):
                        gaps.counts.append(int(answer.text))
                    last = now
                else:
                    gaps.failed += 1
                await asyncio.sleep(every)

    task = asyncio.create_task(poll())
    try:
        yield gaps
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@contextlib.asynccontextmanager
async def polled_directly(api: httpx.AsyncClient, app: str, machine_id: str,
                          every: float = 0.005) -> AsyncIterator[Gaps]:
    """The guest's counter asked at its own address every few ms, the proxy left out: at
    the address the machine had, and at the one it has once the API says it moved (both
    asked each time: whichever answers is the guest)."""
    gaps = Gaps(every)
    addresses: list[str] = []

    async def learn() -> None:
        """From the machine's answer, and from the cluster's view (admin), which has the
        new worker's row as soon as it took the machine, before the old one forgot it."""
        while True:
            with contextlib.suppress(httpx.HTTPError, ValueError, TypeError):
                said = [(await api.get(f"/v1/apps/{app}/machines/{machine_id}")).json()]
                said += [m for m in (await api.get("/v1/cluster/machines")).json()
                         if m.get("id") == machine_id]
                for machine in said:
                    address = str(machine.get("private_ip") or "")
                    if address and address not in addresses:
                        addresses.append(address)
            await asyncio.sleep(0.05)

    async def ask(web: httpx.AsyncClient, address: str) -> int | None:
        host = f"[{address}]" if ":" in address else address
        with contextlib.suppress(httpx.HTTPError, ValueError):
            answer = await web.get(f"http://{host}:8080/count")
            if answer.status_code == 200:
                return int(answer.text)
        return None

    async def poll() -> None:
        async with httpx.AsyncClient(timeout=0.2) as web:
            while not addresses:
                await asyncio.sleep(every)
            last = time.monotonic()
            while True:
                said = [c for c in await asyncio.gather(
                    *(ask(web, a) for a in addresses[-3:])) if c is not None]
                now = time.monotonic()
                if said:
                    gaps.answered += 1
                    gaps.longest = max(gaps.longest, now - last)
                    gaps.counts.append(max(said))
                    last = now
                else:
                    gaps.failed += 1
                await asyncio.sleep(every)

    tasks = [asyncio.create_task(learn()), asyncio.create_task(poll())]
    try:
        yield gaps
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
