"""`bodega host drain|undrain|ls` and `bodega cluster rebalance`, the real command on a real
`bodega up` with three workers (one region, process driver).

The drain's cordon: `host drain --dry-run` lists each machine's target (another worker)
and why, and changes nothing (a dry run of the whole host lists every machine as stuck,
naming each worker's refusal); the drain route cordons one worker of the three for the
drain: `host ls` and `cluster workers` say draining, a placement's explanation refuses it
saying draining, a new machine goes elsewhere; `host undrain` lets placement use it again.
A lopsided fleet (stopped machines all on one worker) gets a rebalance plan from
`cluster rebalance --dry-run` that lowers the simulator's score, and changes nothing.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.cluster.deploy_kit import app_dir, readable_dir, until, up_cluster
from tests.cluster.drain_kit import api, refusals, sleeper, where, worker_of

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="machines in namespaces need root")


async def test_drain_dry_run_cordon_undrain_and_a_rebalance_plan(tmp_path: Path) -> None:
    with readable_dir() as apps:
        async with up_cluster(tmp_path, workers=3) as (cli, _up):
            await cli.ok("apps", "create", "side")
            await cli.ok("deploy", "-c", str(app_dir(apps, "hello", "web")))
            await worker_of(cli, (await sleeper(cli, "side"))["id"])  # in the view: listed
            web = [m["id"] for m in await cli.machines("web")]
            for machine in web:
                await worker_of(cli, machine)
            before = await where(cli)
            drained = before[web[0]]
            on_it = sorted(i for i, w in before.items() if w == drained)

            # The dry run: each machine of the worker gets another worker, nothing changes.
            plan = await cli.json("host", "drain", drained, "--dry-run")
            assert plan["dry_run"] is True
            assert plan["workers"] == [drained]
            assert sorted(m["machine"] for m in plan["moves"]) == on_it, plan
            assert all(m["to"] not in (drained, "") and m["from"] == drained
                       for m in plan["moves"]), plan
            assert all("best fit in ams" in m["why"] for m in plan["moves"]), plan
            assert plan["stuck"] == []
            hosts = {w["name"]: w for w in await cli.json("host", "ls")}
            assert not hosts[drained].get("cordoned"), hosts[drained]
            assert await where(cli) == before
            text = await cli.ok("host", "drain", drained, "--dry-run")
            assert f"would drain {drained}" in text, text
            # The whole host (its agent's workers, all three): nowhere to go, each machine
            # listed as stuck with each worker's refusal.
            host = hosts[drained]["host"]
            assert host, hosts
            assert {w["host"] for w in hosts.values()} == {host}, hosts
            whole = await cli.json("host", "drain", host, "--dry-run")
            assert sorted(whole["workers"]) == sorted(hosts)
            assert whole["moves"] == []
            assert sorted(m["machine"] for m in whole["stuck"]) == sorted(before), whole
            assert all(": draining" in m["why"] and "no worker in ams" in m["why"]
                       for m in whole["stuck"]), whole

            # The drain's cordon, as the CLI asks it first: placement refuses it, draining.
            async with api(cli) as client:
                answer = await client.post(f"/v1/cluster/hosts/{drained}/drain")
                assert answer.status_code == 200, answer.text
                assert [w["cordon_reason"] for w in answer.json()] == ["draining"]
                missing = await client.post("/v1/cluster/hosts/nowhere/drain")
                assert missing.status_code == 404, missing.text
                assert "nowhere" in missing.json()["error"]

            async def says_draining() -> bool:
                return (await refusals(cli)).get(drained) == "draining"

            await until(says_draining)
            hosts = {w["name"]: w for w in await cli.json("host", "ls")}
            assert hosts[drained]["cordon_reason"] == "draining"
            listed = await cli.ok("host", "ls")
            assert "draining" in listed, listed
            workers = {w["name"]: w for w in await cli.json("cluster", "workers")}
            assert workers[drained]["cordon_reason"] == "draining"
            for _ in range(3):  # new creates avoid it
                made = await sleeper(cli, "side")
                assert await worker_of(cli, made["id"]) != drained
            # A restart of nothing: the cordon is the worker's, the view keeps saying it.
            assert (await refusals(cli)).get(drained) == "draining"

            undone = await cli.json("host", "undrain", drained)
            assert [w.get("cordoned") for w in undone] == [False]

            async def placeable() -> bool:
                return drained not in await refusals(cli)

            await until(placeable)

            # A lopsided fleet: stopped machines made while two workers are drained all sit
            # on the third; a rebalance's dry run plans moves that lower the score.
            others = sorted({w for w in (await where(cli)).values()} | set(hosts))
            keep = others[0]
            async with api(cli) as client:
                for name in others[1:]:
                    assert (await client.post(f"/v1/cluster/hosts/{name}/drain")).is_success

            async def only_keep_places() -> bool:
                refused = await refusals(cli)
                return all(refused.get(n) == "draining" for n in others[1:])

            await until(only_keep_places)
            await cli.ok("apps", "create", "lumpy")
            lumpy = [await sleeper(cli, "lumpy", "--memory", "1024") for _ in range(3)]
            for m in lumpy:
                await cli.ok("machine", "stop", m["id"], "--app", "lumpy")
            for name in others[1:]:
                await cli.ok("host", "undrain", name)
            at = await where(cli)
            assert {at[m["id"]] for m in lumpy} == {keep}
            rebalance = await cli.json("cluster", "rebalance", "--dry-run")
            assert rebalance["dry_run"] is True
            moved = {m["machine"]: m for m in rebalance["moves"]}
            assert moved, rebalance
            assert set(moved) <= {m["id"] for m in lumpy}, rebalance
            assert all(m["from"] == keep and m["to"] != keep and m["state"] == "stopped"
                       for m in moved.values()), rebalance
            assert rebalance["after"] != rebalance["before"]
            assert await where(cli) == at  # a dry run changes nothing
