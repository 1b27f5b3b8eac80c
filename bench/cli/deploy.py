"""A rolling deploy under constant load through the proxy, and deploys of N machines.

A real `bodega up` (two workers in one region, process driver) runs
examples/hello. Under load (``--concurrency`` loops, each one request at a time
with ``--pause`` between, through the proxy on loopback), a rolling deploy of the
two-machine app changes its greeting: the figures are requests, failed requests
(aim: zero) and the deploy's duration. Then, for each N of ``--sizes``, an app of
N machines is rolled to a new release and the deploy is timed (one machine at a
time, each waited on: started, 10 s smoke check, checks).

    python -m bench.cli.deploy [--concurrency 4] [--pause 0.01] [--sizes 1,4,16]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
from tests.leftovers_kit import sweep_data_dir
from tests.python_kit import machine_python

from bodega.deploy.core.config import load
from bodega.deploy.deployer import DeployOptions, deploy
from bodega.wire.public.fly import CreateMachineRequest
from bodega.wire.public.machines_client import MachinesClient

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "hello"
TOKEN = "bench-deploy-token"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def readable_dir() -> Path:
    root = Path(tempfile.mkdtemp(prefix="bodega-bench-deploy-"))
    root.chmod(0o755)  # the machines' unprivileged user reads the app from here
    return root


def app_copy(root: Path, app: str, greeting: str) -> Path:
    target = root / f"{app}-{greeting.replace(' ', '-')}"
    shutil.copytree(EXAMPLE, target)
    toml = target / "bodega.toml"
    toml.write_text(toml.read_text().replace('app = "hello"', f'app = "{app}"', 1)
                    .replace("hello from bodega", greeting)
                    .replace('"python3 ', f'"{machine_python()} '))
    return toml


async def load_until(url: str, app: str, stop: asyncio.Event, concurrency: int,
                     pause: float) -> tuple[int, list[str]]:
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


async def main(args: argparse.Namespace) -> None:
    root = readable_dir()
    api, proxy = free_port(), free_port()
    cidr = f"10.{100 + os.getpid() % 40}.0.0/16"
    up = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bodega", "up", "--data-dir", str(root / "cluster"),
        "--regions", "ams", "--workers-per-region", "2", "--worker-cpus", "16",
        "--worker-memory-mb", "8192", "--api-port", str(api), "--proxy-port", str(proxy),
        "--proxy-tls-port", str(free_port()),
        "--machine-cidr", cidr, "--token", TOKEN,
        "--log-level", "warning", stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        # Its CLI context goes in a file of its own, removed with it, not the user's.
        env={**os.environ, "BODEGA_CONFIG": str(root / "config.toml")})
    try:
        assert up.stdout is not None
        while b"bodega is up" not in (line := await asyncio.wait_for(up.stdout.readline(), 120)):
            if not line:
                raise SystemExit("bodega up exited")
        async with MachinesClient(f"http://127.0.0.1:{api}", TOKEN) as client:
            await timed_deploy(client, app_copy(root, "hello", "v1"))
            stop = asyncio.Event()
            traffic = asyncio.create_task(load_until(
                f"http://127.0.0.1:{proxy}/", "hello", stop, args.concurrency, args.pause))
            await asyncio.sleep(2)
            seconds = await timed_deploy(client, app_copy(root, "hello", "v2"))
            await asyncio.sleep(2)
            stop.set()
            requests, failures = await traffic
            print(f"rolling deploy of 2 machines under load: {requests} requests, "
                  f"{len(failures)} failed {sorted(set(failures))}, deploy {seconds:.1f} s")
            for n in [int(s) for s in args.sizes.split(",")]:
                app = f"fleet{n}"
                await timed_deploy(client, app_copy(root, app, "a"), ha=False)
                first = [m.id for m in await client.machines(app)]
                base = (await client.machine(app, first[0])).config
                assert base is not None
                await asyncio.gather(*(client.create_machine(app, CreateMachineRequest(
                    config=base)) for _ in range(n - 1)))
                await asyncio.sleep(2)
                seconds = await timed_deploy(client, app_copy(root, app, "b"))
                print(f"rolling deploy of {n} machines: {seconds:.1f} s")
    finally:
        if up.returncode is None:
            up.send_signal(signal.SIGINT)
            await asyncio.wait_for(up.wait(), 120)
        await sweep_data_dir(root / "cluster")  # what a stop cut short left (nothing, normally)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--pause", type=float, default=0.01)
    parser.add_argument("--sizes", default="1,4,16")
    asyncio.run(main(parser.parse_args()))
