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

from bench.cli.cluster import app_copy, load_until, timed_deploy, up
from bodega.wire.public.fly import CreateMachineRequest


async def main(args: argparse.Namespace) -> None:
    async with up(workers=2, cpus=16, memory_mb=8192) as cluster, cluster.client() as client:
        await timed_deploy(client, app_copy(cluster.root, "hello", "v1"))
        stop = asyncio.Event()
        traffic = asyncio.create_task(load_until(
            f"{cluster.proxy}/", "hello", stop, args.concurrency, args.pause))
        await asyncio.sleep(2)
        seconds = await timed_deploy(client, app_copy(cluster.root, "hello", "v2"))
        await asyncio.sleep(2)
        stop.set()
        requests, failures = await traffic
        print(f"rolling deploy of 2 machines under load: {requests} requests, "
              f"{len(failures)} failed {sorted(set(failures))}, deploy {seconds:.1f} s")
        for n in [int(s) for s in args.sizes.split(",")]:
            app = f"fleet{n}"
            await timed_deploy(client, app_copy(cluster.root, app, "a"), ha=False)
            first = [m.id for m in await client.machines(app)]
            base = (await client.machine(app, first[0])).config
            assert base is not None
            await asyncio.gather(*(client.create_machine(app, CreateMachineRequest(
                config=base)) for _ in range(n - 1)))
            await asyncio.sleep(2)
            seconds = await timed_deploy(client, app_copy(cluster.root, app, "b"))
            print(f"rolling deploy of {n} machines: {seconds:.1f} s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--pause", type=float, default=0.01)
    parser.add_argument("--sizes", default="1,4,16")
    asyncio.run(main(parser.parse_args()))
