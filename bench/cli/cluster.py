"""The `bodega up` the CLI benches run, and what they do on it.

One region, the process driver, every port free and a machine range no test holds
(``tests/cidr_kit.py``); the CLI's context goes in a file of the bench's own, removed with
it, never the user's. ``up`` yields the cluster's addresses and the environment a
`bodega` command needs to reach it; on the way out the cluster is stopped (Ctrl-C, as a
user stops it) and what a cut-short stop left is swept. The rest are what both benches
do on it: a copy of examples/hello as another app, a deploy timed, and a load through
the proxy counting failed requests.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import aiohttp
from tests.cidr_kit import machine_cidr
from tests.cluster.up_kit import UpProcess, free_port
from tests.leftovers_kit import sweep_data_dir
from tests.python_kit import machine_python

from bodega.deploy.core.config import load
from bodega.deploy.deployer import DeployOptions, deploy
from bodega.wire.public.machines_client import MachinesClient

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "hello"
TOKEN = "bench-cli-token"
OCTETS = (100, 140)  # machine ranges for the CLI benches (tests/cidr_kit.py)


@dataclass(frozen=True)
class Cluster:
    root: Path  # the bench's own directory: the cluster's data, app copies, CLI context
    api: str
    proxy: str
    env: dict[str, str]  # a `bodega` command's environment, pointed at this cluster

    def client(self) -> MachinesClient:
        return MachinesClient(self.api, TOKEN)


@asynccontextmanager
async def up(workers: int, cpus: int, memory_mb: int) -> AsyncIterator[Cluster]:
    """A `bodega up` of ``workers`` workers in ams, each of ``cpus`` and ``memory_mb``."""
    root = Path(tempfile.mkdtemp(prefix="bodega-bench-cli-"))
    os.chmod(root, 0o755)  # the machines' unprivileged user reads the apps from here
    os.environ["BODEGA_CONFIG"] = str(root / "config.toml")
    api, proxy = free_port(), free_port()
    process = UpProcess(
        root / "cluster", "--regions", "ams", "--workers-per-region", str(workers),
        "--worker-cpus", str(cpus), "--worker-memory-mb", str(memory_mb),
        "--api-port", str(api), "--proxy-port", str(proxy), "--proxy-tls-port", str(free_port()),
        "--machine-cidr", machine_cidr(*OCTETS), "--token", TOKEN, "--log-level", "warning")
    await process.start()
    try:
        await process.until_line("bodega is up")
        env = {**os.environ, "BODEGA_API_URL": f"http://127.0.0.1:{api}",
               "BODEGA_API_TOKEN": TOKEN}
        yield Cluster(root, f"http://127.0.0.1:{api}", f"http://127.0.0.1:{proxy}", env)
    finally:
        await process.end(grace=120)
        await sweep_data_dir(root / "cluster")  # what a stop cut short left (nothing, normally)
        shutil.rmtree(root, ignore_errors=True)


def app_copy(root: Path, app: str, greeting: str) -> Path:
    """examples/hello as ``app``, greeting with ``greeting``: its bodega.toml."""
    target = root / f"{app}-{greeting.replace(' ', '-')}"
    shutil.copytree(EXAMPLE, target)
    toml = target / "bodega.toml"
    toml.write_text(toml.read_text().replace('app = "hello"', f'app = "{app}"', 1)
                    .replace("hello from bodega", greeting)
                    .replace('"python3 ', f'"{machine_python()} '))
    return toml


async def load_until(url: str, app: str, stop: asyncio.Event, concurrency: int,
                     pause: float) -> tuple[int, list[str]]:
    """``concurrency`` loops of one request at a time to ``app`` until ``stop``: the
    requests sent and what each failed one got."""
    counts = [0]
    failures: list[str] = []

    async def loop(session: aiohttp.ClientSession) -> None:
        while not stop.is_set():
            try:
                async with session.get(url, headers={"host": f"{app}.localhost"}) as answer:
                    await answer.read()
                    if answer.status != 200:
                        failures.append(str(answer.status))
            except (aiohttp.ClientError, TimeoutError) as exc:
                failures.append(type(exc).__name__)
            counts[0] += 1
            await asyncio.sleep(pause)

    timeout = aiohttp.ClientTimeout(total=30)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        await asyncio.gather(*(loop(session) for _ in range(concurrency)))
    return counts[0], failures


async def timed_deploy(client: MachinesClient, toml: Path, **options: object) -> float:
    config, _ = load(toml)
    began = time.monotonic()
    result = await deploy(client, config, DeployOptions(
        base_dir=str(toml.parent), who="bench", **options))
    if not result.outcome.ok:
        raise SystemExit(f"deploy failed: {result.outcome.failure}")
    return time.monotonic() - began
