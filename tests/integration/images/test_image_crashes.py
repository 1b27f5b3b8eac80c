"""Image pulls and starts survive kill -9; corrupt blobs are refetched; eviction; one pull."""

from __future__ import annotations

import asyncio
from functools import partial
from pathlib import Path

from bodega.wire.internal.worker_client import WorkerClient
from tests.poll_kit import until as poll_until
from tests.tls_kit import TEST_CA

from ..daemon_kit import worker_daemon
from .image_kit import build_image, needs_image_tools, registry
from .test_image_machines import fetch, image_machine, worker_args

pytestmark = needs_image_tools


until = partial(poll_until, timeout=60.0, every=0.05)


def blobs(data: Path) -> dict[str, float]:
    return {p.name: p.stat().st_mtime_ns for p in (data / "images" / "blobs" / "sha256").iterdir()
            if not p.name.endswith(".partial")}


async def test_a_worker_killed_mid_pull_and_mid_start_resumes_both(tmp_path: Path) -> None:
    async with registry(tmp_path) as host:
        image = build_image(tmp_path, host, "test/crash:v1", extra_mb=2)
        data = tmp_path / "w1"
        # Killed right after the pull kept its first blob (the manifest's config).
        crashing = worker_daemon(tmp_path, **worker_args(host))
        crashing.env = {"BODEGA_FAILPOINTS": "pull:blob:after"}
        await crashing.start()
        async with WorkerClient(crashing.url, TEST_CA.context("broker")) as client:
            created = await client.create_machine({"app": "img", "config": {"image": image}})
        assert await crashing.wait_exit() == -9
        kept = blobs(data)
        assert len(kept) == 2, kept  # the manifest and the first blob: the pull stopped there
        # A blob damaged on disk is not trusted: the resumed pull fetches it again.
        texts = {name: (data / "images" / "blobs" / "sha256" / name).read_bytes()
                 for name in kept}
        damaged = next(name for name in kept  # the config: the manifest names it
                       if any(name.encode() in text for text in texts.values()))
        (data / "images" / "blobs" / "sha256" / damaged).write_bytes(b"{}")

        # Restarted, killed again right after runc was spawned for the first start.
        crashing = worker_daemon(tmp_path, **worker_args(host))
        crashing.env = {"BODEGA_FAILPOINTS": "start_machine:spawn:after"}
        await crashing.start()
        assert await crashing.wait_exit() == -9
        after = blobs(data)
        assert len(after) == 3
        assert after[damaged] != kept[damaged], "the damaged blob was fetched again"
        for name in kept:
            if name != damaged:
                assert after[name] == kept[name], "a verified blob is never fetched twice"
        pidfiles = list((data / "machines" / created.id / "run").glob("*.pid"))
        await until(lambda: bool(pidfiles) or bool(
            list((data / "machines" / created.id / "run").glob("*.pid"))))
        pidfile = next((data / "machines" / created.id / "run").glob("*.pid"))
        pid = pidfile.read_text().strip()

        worker = await worker_daemon(tmp_path, **worker_args(host)).start()
        try:
            async with WorkerClient(worker.url, TEST_CA.context("broker")) as client:
                await client.wait(created.id, "started", timeout=60)
                machine = await client.machine(created.id)
                assert await fetch(f"http://{machine.private_ip}:8080/") == \
                    "hello from an image\n"
                assert pidfile.read_text().strip() == pid, "the run spawned before is adopted"
                assert len(list(pidfile.parent.glob("*.spawn"))) == 1, "never run twice"
                await client.destroy(created.id, force=True)
                await client.wait(created.id, "destroyed", timeout=30)
        finally:
            await worker.stop()


async def test_concurrent_creates_pull_once_and_eviction_spares_used_images(
        tmp_path: Path) -> None:
    async with registry(tmp_path) as host:
        used, unused, third = (build_image(tmp_path, host, f"test/e{i}:v1", page=f"{i}\n",
                                           extra_mb=1) for i in range(3))
        worker = await worker_daemon(
            tmp_path, **worker_args(host, "--image-cache-gb", "0.004")).start()
        bases = tmp_path / "w1" / "images" / "bases"
        try:
            async with WorkerClient(worker.url, TEST_CA.context("broker")) as client:
                pair = await asyncio.gather(image_machine(client, used),
                                            image_machine(client, used))
                assert worker.log_file.read_text().count("unpacked sha256:") == 1
                assert len(list(bases.iterdir())) == 1
                gone = await image_machine(client, unused)
                await client.destroy(gone.id, force=True)
                await client.wait(gone.id, "destroyed", timeout=30)
                assert len(list(bases.iterdir())) == 2  # within budget: nothing evicted yet
                last = await image_machine(client, third)
                # Over budget: the unused image goes, the one two machines run stays.
                names = {p.name for p in bases.iterdir()}
                assert len(names) == 2
                for machine in (*pair, last):
                    digest = (tmp_path / "w1" / "machines" / machine.id / "oci" /
                              "image").read_text().removeprefix("sha256:")
                    assert digest in names
                    assert await fetch(f"http://{machine.private_ip}:8080/") in (
                        "0\n", "2\n")
                for machine in (*pair, last):
                    await client.destroy(machine.id, force=True)
                    await client.wait(machine.id, "destroyed", timeout=30)
        finally:
            await worker.stop()
