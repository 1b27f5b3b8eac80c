"""A drain of a worker holding 20 machines of 4 apps, under constant load through the proxy.

A real `bodega up` (three workers in one region, process driver) runs examples/hello as
four apps of five machines each, all on one worker (the two others cordoned while they are
made); with ``--volumes N``, the last machine of each of the first N apps mounts a volume
of its own holding ``--volume-mb`` MB of random data. Under load on every app
(``--concurrency`` loops per app, each one request at a time with ``--pause`` between,
through the proxy on loopback), `bodega host drain` moves them all to the two other
workers: the figures are the drain's wall time, the seconds per move, requests and failed
requests per app (aim: zero), and whether each volume's data arrived whole (its tree's
digest where it went against the one taken before the drain).

    python -m bench.cli.drain [--apps 4] [--machines 5] [--volumes 4] [--volume-mb 100]
                              [--concurrency 2] [--pause 0.01]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path

from bench.cli.cluster import app_copy, load_until, timed_deploy, up
from bodega.model.machine_config import Mount
from bodega.wire.public.fly import CreateMachineRequest, CreateVolumeRequest
from bodega.worker.host.volume_copy import tree_digest

WORKERS = ("ams-1", "ams-2", "ams-3")


async def main(args: argparse.Namespace) -> None:
    async with up(workers=3, cpus=32, memory_mb=16384) as cluster, cluster.client() as client:
        root, env, proxy = cluster.root, cluster.env, cluster.proxy
        for worker in WORKERS[1:]:
            await client.drain_host(worker, True)
        await asyncio.sleep(1)  # the cordons reach the view
        apps = [f"app{i}" for i in range(args.apps)]
        digests: dict[str, tuple[Path, str]] = {}  # volume -> its data's dir, digest
        for n, app in enumerate(apps):
            await timed_deploy(client, app_copy(root, app, "v1"), ha=False)
            first = [m.id for m in await client.machines(app)]
            base = (await client.machine(app, first[0])).config
            assert base is not None
            for i in range(args.machines - len(first)):
                config = base
                if n < args.volumes and i == args.machines - len(first) - 1:
                    volume = await client.create_volume(app, CreateVolumeRequest(
                        name="data", region="ams", size_gb=1))
                    config = base.model_copy(update={"mounts": [
                        Mount(volume=volume.id, path="/data")]})
                made = await client.create_machine(app, CreateMachineRequest(config=config))
                if config is not base:
                    await client.wait(app, made.id, "started")
                    (data,) = (root / "cluster").glob(f"**/volumes/{volume.id}")
                    with (data / "blob").open("wb") as blob:
                        for _ in range(args.volume_mb):
                            blob.write(os.urandom(1 << 20))
                    digests[volume.id] = (data, tree_digest(data)[1])
        for worker in WORKERS[1:]:
            await client.drain_host(worker, False)
        await asyncio.sleep(1)
        held = [m for m in await client.cluster_machines() if m.worker == WORKERS[0]]
        stop = asyncio.Event()
        traffic = [asyncio.create_task(load_until(
            f"{proxy}/", app, stop, args.concurrency, args.pause))
            for app in apps]
        await asyncio.sleep(2)
        drain = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bodega", "host", "drain", WORKERS[0], "--json",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env)
        out, err = await drain.communicate()
        await asyncio.sleep(2)
        stop.set()
        loads = await asyncio.gather(*traffic)
        if drain.returncode != 0:
            raise SystemExit(f"drain failed ({drain.returncode}): {out.decode()}\n"
                             f"{err.decode()}")
        report = json.loads(out)
        left = [m for m in await client.cluster_machines() if m.worker == WORKERS[0]]
        print(f"drain of {WORKERS[0]} holding {len(held)} machines of {len(apps)} apps: "
              f"{report['moved']} moved, {len(report['stuck'])} stuck, "
              f"{len(left)} left, in {report['seconds']:.1f} s "
              f"({report['seconds'] / max(report['moved'], 1):.2f} s a move)")
        for app, (requests, failures) in zip(apps, loads, strict=True):
            print(f"  {app}: {requests} requests, {len(failures)} failed "
                  f"{sorted(set(failures))}")
        whole = 0
        for volume_id, (origin, digest) in digests.items():
            there = [p for p in (root / "cluster").glob(f"**/volumes/{volume_id}")
                     if p != origin]
            whole += len(there) == 1 and tree_digest(there[0])[1] == digest
        if digests:
            print(f"  volumes of {args.volume_mb} MB: {len(digests)} moved with their "
                  f"machines, {whole} with their data's digest equal")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--apps", type=int, default=4)
    parser.add_argument("--machines", type=int, default=5)
    parser.add_argument("--volumes", type=int, default=4,
                        help="apps whose last machine mounts a volume of its own")
    parser.add_argument("--volume-mb", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--pause", type=float, default=0.01)
    asyncio.run(main(parser.parse_args()))
