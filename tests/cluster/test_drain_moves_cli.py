"""`bodega host drain` and `bodega cluster rebalance` carried out through the move route, on
a real `bodega up` with three workers (one region, process driver).

A drain of the worker holding one of examples/hello's two machines moves every machine
off it, one at a time (the same ids; a stopped one stays stopped), while requests go to
the app through the proxy all along: none fails. Undrained, the worker takes machines
again; a lopsided fleet of stopped machines is rebalanced for real, each moved machine
still stopped on its new worker.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from tests.cluster.deploy_kit import Cli, app_dir, load, readable_dir, until, up_cluster
from tests.cluster.drain_kit import api, refusals, sleeper, where

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="machines in namespaces need root")


async def states(cli: Cli, app: str) -> dict[str, str]:
    return {m["id"]: m["state"] for m in await cli.machines(app)}


async def test_a_drain_moves_every_machine_off_while_the_app_serves_then_a_rebalance(
        tmp_path: Path) -> None:
    with readable_dir() as apps:
        async with up_cluster(tmp_path, workers=3) as (cli, _up):
            await cli.ok("deploy", "-c", str(app_dir(apps, "hello", "web")))
            await cli.ok("apps", "create", "side")
            await sleeper(cli, "side")
            resting = await sleeper(cli, "side")
            await cli.ok("machine", "stop", resting["id"], "--app", "side")
            before = await where(cli)
            web = sorted(await states(cli, "web"))
            drained = before[web[0]]
            on_it = sorted(i for i, w in before.items() if w == drained)

            stop = asyncio.Event()
            traffic = asyncio.create_task(load(cli, "web", stop))
            await asyncio.sleep(1.0)
            code, out, err = await cli.run("host", "drain", drained, "--json")
            await asyncio.sleep(1.0)
            stop.set()
            count, failures = await traffic
            assert code == 0, f"{out}\n{err}"
            report = json.loads(out)
            assert report["moved"] == len(on_it), report
            assert sorted(m["machine"] for m in report["moves"]) == on_it
            assert report["failed"] == []
            assert report["stuck"] == []
            assert f"[{len(on_it)}/{len(on_it)}]" in err, err  # progress, on stderr with --json
            assert count > 20, count
            assert failures == [], failures[:5]

            after = await where(cli)
            assert set(after) == set(before)  # the same machines, none made or lost
            assert drained not in after.values(), after
            assert set((await states(cli, "web")).values()) == {"started"}
            assert (await states(cli, "side"))[resting["id"]] == "stopped"
            for moved in report["moves"]:
                assert after[moved["machine"]] == moved["to"]
            assert (await refusals(cli)).get(drained) == "draining"

            await cli.ok("host", "undrain", drained)

            async def placeable() -> bool:
                return drained not in await refusals(cli)

            await until(placeable)

            # A lopsided fleet: stopped machines made while the two other workers are
            # drained all sit on one; a rebalance moves some of them off, stopped.
            workers = sorted(set(after.values()) | {drained})
            keep, others = workers[0], workers[1:]
            async with api(cli) as client:
                for name in others:
                    assert (await client.post(f"/v1/cluster/hosts/{name}/drain")).is_success

            async def only_keep_places() -> bool:
                refused = await refusals(cli)
                return all(refused.get(n) == "draining" for n in others)

            await until(only_keep_places)
            await cli.ok("apps", "create", "lumpy")
            lumpy = [(await sleeper(cli, "lumpy", "--memory", "1024"))["id"] for _ in range(3)]
            for mid in lumpy:
                await cli.ok("machine", "stop", mid, "--app", "lumpy")
            for name in others:
                await cli.ok("host", "undrain", name)
            assert {(await where(cli))[mid] for mid in lumpy} == {keep}
            code, out, err = await cli.run("cluster", "rebalance", "--json")
            assert code == 0, f"{out}\n{err}"
            done = json.loads(out)
            assert done["moved"] == len(done["moves"]) > 0, done
            assert done["failed"] == []
            now = await where(cli)
            for moved in done["moves"]:  # stopped ones only (no --running), now where planned
                assert moved["state"] == "stopped"
                assert now[moved["machine"]] == moved["to"] != moved["from"]
            assert any(m["machine"] in lumpy and m["from"] == keep for m in done["moves"]), done
            assert set((await states(cli, "lumpy")).values()) == {"stopped"}
            again = await cli.json("cluster", "rebalance", "--dry-run")
            assert len(again["moves"]) < len(done["moves"]) or again["moves"] == [], again
