"""An image pull with the first host's registry lost, beside one with it present.

Two real registries (docker-registry, on loopback) hold the same image, copied
by digest with skopeo as a push to every server host leaves it. A worker's
puller (``worker/images/puller.py`` with its ``RegistrySources``, as the worker
runs it) pulls it into an empty store, the reference naming registry A (host
1's, which the push went through), in four cases:

- **present**: A answers;
- **lost, known**: A's registry is gone and membership says its host is dead, so
  A is tried last: the pull goes to B at once;
- **lost, refused**: A's registry is gone but its host still looks live (the
  view has not heard yet) and refuses the connection: A once, then B;
- **lost, unreachable**: A's host is gone from the network (a TEST-NET address
  with no route, not yet known dead): the connection fails at once, then B. A
  host that drops packets silently instead costs one ``CONNECT_TIMEOUT`` per
  pull until membership calls it dead (the one that answered is asked first
  for the rest of the pull).

Each case is timed ``--runs`` times (a fresh store each), median printed with its
ratio to "present".

    python -m bench.machines.image_pull_failover [--runs 5] [--size-mb 20]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.integration.images.image_kit import build_image, registry

from bodega.model.image_registries import Advertised
from bodega.worker.images.puller import Puller
from bodega.worker.images.registry_client import CONNECT_TIMEOUT, RegistryClient
from bodega.worker.images.sources import RegistrySources
from bodega.worker.images.store import ImageStore

UNREACHABLE = "192.0.2.1:5000"  # TEST-NET-1: routed nowhere, nothing answers


async def pull_once(scratch: Path, reference: str, named: str,
                    advertised: list[Advertised]) -> float:
    """Seconds to pull ``reference`` into an empty store, the cluster's registries being
    ``advertised``."""
    with tempfile.TemporaryDirectory(dir=scratch) as store:
        sources = RegistrySources(named)
        sources.attach(lambda: advertised)
        puller = Puller(ImageStore(Path(store)), RegistryClient(), sources=sources)
        started = time.perf_counter()
        await puller.pull(reference)
        return time.perf_counter() - started


async def timed(scratch: Path, runs: int, reference: str, named: str,
                advertised: list[Advertised]) -> float:
    return statistics.median([await pull_once(scratch, reference, named, advertised)
                              for _ in range(runs)])


async def main(runs: int, size_mb: int) -> None:
    with tempfile.TemporaryDirectory(prefix="pull-failover-") as tmp:
        root = Path(tmp)
        (root / "a").mkdir()
        (root / "b").mkdir()
        results: dict[str, float] = {}
        async with registry(root / "b") as peer:
            stack = contextlib.AsyncExitStack()
            first = await stack.enter_async_context(registry(root / "a"))
            image = await asyncio.to_thread(build_image, root, first, "app:v1",
                                            extra_mb=size_mb)
            await asyncio.to_thread(
                subprocess.run, ["skopeo", "copy", "--src-tls-verify=false",
                                 "--dest-tls-verify=false", f"docker://{image}",
                                 f"docker://{peer}/app:v1"], check=True, capture_output=True)
            both = [Advertised(first, True), Advertised(peer, True)]
            results["present"] = await timed(root, runs, image, first, both)
            await stack.aclose()  # host 1's registry gone
            results["lost, known"] = await timed(
                root, runs, image, first, [Advertised(first, False), Advertised(peer, True)])
            results["lost, refused"] = await timed(root, runs, image, first, both)
            gone = image.replace(first, UNREACHABLE, 1)
            results["lost, unreachable"] = await timed(
                root, runs, gone, UNREACHABLE,
                [Advertised(UNREACHABLE, True), Advertised(peer, True)])
    base = results["present"]
    print(f"image pull of a {size_mb} MB image into an empty store, median of {runs} "
          f"(connect timeout {CONNECT_TIMEOUT:g}s):")
    for case, seconds in results.items():
        print(f"  {case:<18} {seconds * 1000:8.1f} ms   x{seconds / base:.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--size-mb", type=int, default=20)
    args = parser.parse_args()
    asyncio.run(main(args.runs, args.size_mb))
