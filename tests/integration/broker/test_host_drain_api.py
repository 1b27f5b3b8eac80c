"""The hosts routes on a broker over real in-process workers: ``/v1/cluster/hosts`` lists
every worker with its host, ``/v1/cluster/hosts/{name}/drain`` cordons one worker, or every
worker of a host, for a drain (kept by each worker with its reason), after which a create
goes elsewhere and its placement record refuses the worker saying draining, and a region
with nothing but draining workers answers 412 saying so; ``/undrain`` lifts it;
``/v1/cluster/machines`` names each machine's app and worker. Admin tokens only."""

from __future__ import annotations

from pathlib import Path

from .broker_kit import in_process_cluster, machine


async def test_a_drain_cordons_one_worker_or_a_hosts_workers_and_placement_says_so(
        tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path) as c:
        for name in ("ams-1", "ams-2", "ams-3"):
            await c.add_worker(name)
        await c.add_worker("syd-1", region="syd")
        for name in ("ams-1", "ams-2"):  # two workers of one host, speaking through its agent
            c.catalog.set_status(name, "alive", role="worker", region="ams", host="box-a")
        for name in ("ams-3", "syd-1"):
            c.catalog.set_status(name, "alive", role="worker")
        await c.add_broker()
        async with c.api() as api:
            listed = (await api.get("/v1/cluster/hosts")).json()
            assert {w["name"]: w["host"] for w in listed} == {
                "ams-1": "box-a", "ams-2": "box-a", "ams-3": "ams-3", "syd-1": "syd-1"}

            one = await api.post("/v1/cluster/hosts/ams-3/drain")
            assert one.status_code == 200, one.text
            assert [(w["name"], w["cordoned"], w["cordon_reason"]) for w in one.json()] == [
                ("ams-3", True, "draining")]
            assert (c.workers[2].ledger.cordoned, c.workers[2].ledger.cordon_reason) == (
                True, "draining")
            both = await api.post("/v1/cluster/hosts/box-a/drain")
            assert sorted(w["name"] for w in both.json()) == ["ams-1", "ams-2"]
            await api.post("/v1/cluster/hosts/box-a/undrain")
            assert not c.workers[0].ledger.cordoned
            assert c.workers[0].ledger.cordon_reason is None
            c.sync()

            await api.post("/v1/apps", json={"app_name": "web", "org_slug": "personal"})
            made = await api.post("/v1/apps/web/machines", json=machine(region="ams"))
            assert made.status_code == 200, made.text
            mid = made.json()["id"]
            record = (await api.get(f"/v1/apps/web/machines/{mid}/placement")).json()
            assert record["winner"]["worker"] != "ams-3"
            reasons = {r["worker"]: r["reason"] for r in record["regions"][0]["refusals"]}
            assert reasons["ams-3"] == "draining"
            workers = {w["name"]: w for w in (await api.get("/v1/cluster/workers")).json()}
            assert workers["ams-3"]["cordon_reason"] == "draining"

            c.sync()  # the view: what the route reads
            machines = (await api.get("/v1/cluster/machines")).json()
            assert [(m["id"], m["app"], m["worker"]) for m in machines] == [
                (mid, "web", record["winner"]["worker"])]

            await api.post("/v1/cluster/hosts/syd-1/drain")
            c.sync()
            down = await api.post("/v1/apps/web/machines", json=machine(region="syd"))
            assert down.status_code == 412, down.text
            assert "no worker in syd can take machines now: 1 draining" in down.json()["error"]

            missing = await api.post("/v1/cluster/hosts/nowhere/drain")
            assert missing.status_code == 404
            assert "no worker or host named 'nowhere'" in missing.json()["error"]
            token = (await api.post("/v1/apps/web/deploy_token", json={})).json()["token"]
        async with c.api(token=token) as app_api:  # an app's token is refused
            for method, path in (("GET", "/v1/cluster/hosts"), ("GET", "/v1/cluster/machines"),
                                 ("POST", "/v1/cluster/hosts/ams-1/drain")):
                refused = await app_api.request(method, path)
                assert refused.status_code == 403, (path, refused.text)
