"""The broker places machines immediate-or-cancel, explains why, and never over-commits."""

from __future__ import annotations

import asyncio
from pathlib import Path

from .broker_kit import ADMIN, in_process_cluster, machine


async def test_create_is_placed_and_read_back_at_once(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path) as c:
        await c.add_worker("ams-1")
        await c.add_broker()
        async with c.api() as api:
            app = {"app_name": "web", "org_slug": "personal"}
            assert (await api.post("/v1/apps", json=app)).status_code == 201
            created = await api.post("/v1/apps/web/machines", json=machine())
            assert created.status_code == 200, created.text
            body = created.json()
            assert body["region"] == "ams"
            assert body["state"] in ("created", "starting", "started")
            assert "worker" not in body
            assert "app" not in body
            # No view update happened: the broker still reads its own write.
            listed = (await api.get("/v1/apps/web/machines")).json()
            assert [m["id"] for m in listed] == [body["id"]]
            got = await api.get(f"/v1/apps/web/machines/{body['id']}")
            assert got.status_code == 200
            assert got.json()["events"]
            waited = await api.get(f"/v1/apps/web/machines/{body['id']}/wait",
                                   params={"state": "started", "timeout": 10})
            assert waited.json()["ok"] is True


async def test_concurrent_creates_get_exactly_what_fits_and_clean_errors(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path) as c:
        for name in ("ams-1", "ams-2"):
            await c.add_worker(name, cpus=8, memory_mb=65536)
        c.follow()
        await c.add_broker()
        await c.add_broker(name="broker-b")  # two brokers race for the same room
        perf = {"config": {"image": "app:1", "guest": {"cpu_kind": "performance", "cpus": 1,
                                                       "memory_mb": 2048}}}
        async with c.api(0) as a, c.api(1) as b:
            await a.post("/v1/apps", json={"app_name": "burst", "org_slug": "personal"})
            responses = await asyncio.gather(*(
                (a if i % 2 else b).post("/v1/apps/burst/machines", json=perf)
                for i in range(200)))
        ok = [r for r in responses if r.status_code == 200]
        refused = [r for r in responses if r.status_code != 200]
        assert len(ok) == 16  # 2 workers x 8 dedicated cpus
        assert {r.status_code for r in refused} == {412}
        for r in refused:
            body = r.json()
            assert body["status"] == "insufficient_capacity"
            assert "asked for 1 performance cpu, 2048 MB" in body["error"]
            assert "2 workers considered" in body["error"]
        for worker in c.workers:
            used = worker.ledger.usage()
            assert used.millicpus <= worker.config.totals.millicpus
        assert sum(w.ledger.usage().millicpus for w in c.workers) == 16_000


async def test_regions_are_tried_in_order_and_never_beyond(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path) as c:
        await c.add_worker("ams-1", cpus=1, memory_mb=1024)
        await c.add_worker("syd-1", region="syd")
        await c.add_broker()
        async with c.api() as api:
            await api.post("/v1/apps", json={"app_name": "geo", "org_slug": "personal"})
            big = {"config": {"image": "app:1", "guest": {"cpu_kind": "performance",
                                                          "cpus": 1, "memory_mb": 2048}}}
            only_ams = await api.post("/v1/apps/geo/machines", json={**big, "region": "ams"})
            assert only_ams.status_code == 412
            assert "insufficient capacity in ams" in only_ams.json()["error"]
            fallback = await api.post("/v1/apps/geo/machines", json={**big, "region": "ams,syd"})
            assert fallback.status_code == 200
            assert fallback.json()["region"] == "syd"
            nowhere = await api.post("/v1/apps/geo/machines", json={**big, "region": "fra"})
            assert nowhere.status_code == 400
            assert nowhere.json() == {
                "error": "invalid_argument: region fra has no workers in this cluster; its "
                         "regions are ams, syd", "status": "invalid_argument"}
            bad = await api.post("/v1/apps/geo/machines", json={**big, "region": "AMS!"})
            assert bad.status_code == 400
            assert bad.json()["status"] == "invalid_argument"


async def test_a_region_without_workers_is_named_one_whose_workers_are_down_says_so(
        tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path) as c:
        await c.add_worker("ams-1")
        await c.add_worker("fra-1", region="fra")
        await c.add_worker("lhr-1", region="lhr")
        await c.add_worker("syd-1", region="syd")
        c.workers[2].ledger.set_cordoned(True)
        c.workers[3].ledger.set_cordoned(True, "draining")
        c.sync()
        c.catalog.set_status("fra-1", "dead")
        await c.add_broker()
        async with c.api() as api:
            await api.post("/v1/apps", json={"app_name": "geo", "org_slug": "personal"})
            for region in ("xyz", "ams,xyz"):
                typo = await api.post("/v1/apps/geo/machines", json=machine(region=region))
                assert typo.status_code == 400, typo.text
                assert typo.json() == {
                    "error": "invalid_argument: region xyz has no workers in this cluster; its "
                             "regions are ams, fra, lhr, syd", "status": "invalid_argument"}
            two = await api.post("/v1/apps/geo/machines", json=machine(region="xyz,abc"))
            assert "regions xyz, abc have no workers" in two.json()["error"]
            placements = await api.post("/v1/platform/placements", json={
                "org_slug": "personal", "region": "xyz", "count": 1})
            assert placements.status_code == 400
            assert "region xyz has no workers" in placements.json()["error"]
            volume = await api.post("/v1/apps/geo/volumes", json={
                "name": "data", "region": "xyz", "size_gb": 1})
            assert volume.status_code == 400
            # Regions that exist but cannot take anything: still no capacity, and why.
            for region, why in (("fra", "1 dead"), ("lhr", "1 cordoned"), ("syd", "1 draining")):
                down = await api.post("/v1/apps/geo/machines", json=machine(region=region))
                assert down.status_code == 412, down.text
                assert down.json()["status"] == "insufficient_capacity"
                assert f"no worker in {region} can take machines now: {why}" in \
                    down.json()["error"]
            assert (await api.post("/v1/apps/geo/machines", json=machine(region="ams"))
                    ).status_code == 200


async def test_every_placement_can_be_explained(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path) as c:
        await c.add_worker("ams-1")
        await c.add_worker("ams-2", memory_mb=512)
        await c.add_worker("ams-3")
        c.workers[2].ledger.set_cordoned(True)
        c.sync()
        await c.add_broker()
        async with c.api() as api:
            await api.post("/v1/apps", json={"app_name": "why", "org_slug": "personal"})
            mid = (await api.post("/v1/apps/why/machines",
                                  json=machine(config={"guest": {"cpus": 1, "memory_mb": 1024}})
                                  )).json()["id"]
            record = (await api.get(f"/v1/apps/why/machines/{mid}/placement")).json()
            assert record["winner"]["worker"] == "ams-1"
            region = record["regions"][0]
            assert region["candidates"] == 3
            assert region["feasible"] == 1
            assert region["refused"] == {"cordoned": 1, "memory": 1}
            reasons = {r["worker"]: r["reason"] for r in region["refusals"]}
            assert reasons["ams-3"] == "cordoned"
            assert reasons["ams-2"].startswith("memory: needs 1024 MB")
            assert set(region["ranked"][0]["subscores"]) >= {"cpu", "memory"}
            assert record["attempts"][-1]["worker"] == "ams-1"
            simulated = await api.post("/v1/platform/placements", json={
                "org_slug": "personal", "region": "ams", "count": 3, "explain": True,
                "compute": {"cpu_kind": "shared", "cpus": 1, "memory_mb": 256}})
            # ams-2 still fits two small machines; ams-3 is cordoned.
            assert simulated.json()["regions"] == [{"region": "ams", "count": 3,
                                                    "concurrency": 2}]
            assert simulated.json()["explain"][0]["refused"] == {"cordoned": 1}
            limits = await api.post("/v1/platform/placements", json={
                "org_slug": "personal", "region": "ams", "count": 0,
                "compute": {"cpu_kind": "shared", "cpus": 1, "memory_mb": 256}})
            # ams-1: 31 more quarter-cpus beside the machine placed above; ams-2: 2 x 256 MB.
            assert limits.json()["regions"] == [{"region": "ams", "count": 33,
                                                 "concurrency": 2}]
            regions = (await api.get("/v1/platform/regions", params={"size": "shared-cpu-1x"}
                                     )).json()
            assert [r["code"] for r in regions["Regions"]] == ["ams"]
            assert regions["Regions"][0]["capacity"] > 0


async def test_idempotent_creates_return_the_same_machine_even_on_another_broker(
    tmp_path: Path,
) -> None:
    async with in_process_cluster(tmp_path) as c:
        await c.add_worker("ams-1")
        await c.add_worker("ams-2")
        await c.add_broker()
        await c.add_broker(name="broker-b")
        headers = {"idempotency-key": "deploy-42-web-1"}
        body = machine(name="web-1")  # a retry is not a second machine of that name
        async with c.api(0) as a, c.api(1) as b:
            await a.post("/v1/apps", json={"app_name": "idem", "org_slug": "personal"})
            first = (await a.post("/v1/apps/idem/machines", json=body, headers=headers)).json()
            again = await a.post("/v1/apps/idem/machines", json=body, headers=headers)
            assert again.status_code == 200, again.text
            # The view never heard of it (no sync), and broker b never saw it: it asks workers.
            elsewhere = (await b.post("/v1/apps/idem/machines", json=body,
                                      headers=headers)).json()
            assert first["id"] == again.json()["id"] == elsewhere["id"]
            assert sum(len(w.machines.store.db.execute("SELECT id FROM machines").fetchall())
                       for w in c.workers) == 1

            # A worker that may hold a new key's machine does not answer: say so, place nothing.
            silent = next(w for w in c.workers
                          if not w.machines.store.db.execute("SELECT id FROM machines").fetchall())
            await silent.stop()
            c.workers.remove(silent)
            unsure = await b.post("/v1/apps/idem/machines", json=machine(),
                                  headers={"idempotency-key": "deploy-43"})
            assert unsure.status_code == 503, unsure.text
            assert unsure.json()["error"].startswith("cannot tell whether this Idempotency-Key")
            assert silent.config.name in unsure.json()["error"]
            assert sum(len(w.machines.store.db.execute("SELECT id FROM machines").fetchall())
                       for w in c.workers) == 1


async def test_a_volume_pins_its_machine_and_a_full_host_says_so(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path) as c:
        await c.add_worker("ams-1", cpus=8)
        await c.add_worker("ams-2", cpus=8)
        await c.add_worker("syd-1", region="syd", cpus=1, memory_mb=512)
        c.follow()
        await c.add_broker()
        async with c.api() as api:
            await api.post("/v1/apps", json={"app_name": "db", "org_slug": "personal"})
            vol = (await api.post("/v1/apps/db/volumes", json={
                "name": "data", "region": "ams", "size_gb": 1})).json()
            mounts = [{"volume": vol["id"], "path": "/data"}]
            m = await api.post("/v1/apps/db/machines", json=machine(config={"mounts": mounts}))
            assert m.status_code == 200, m.text
            assert m.json()["region"] == "ams"  # the volume's region, though none was asked
            record = (await api.get(f"/v1/apps/db/machines/{m.json()['id']}/placement")).json()
            assert record["winner"]["worker"] == vol["zone"]
            other = "ams-2" if vol["zone"] == "ams-1" else "ams-1"
            assert record["regions"][0]["refused"] == {"pinned": 1}
            assert record["regions"][0]["refusals"] == [
                {"worker": other, "reason": f"volume {vol['id']} is on {vol['zone']}"}]
            twice = await api.post("/v1/apps/db/machines", json=machine(config={"mounts": mounts}))
            assert twice.status_code == 412
            assert "already attached" in twice.json()["error"]

            small = (await api.post("/v1/apps/db/volumes", json={
                "name": "logs", "region": "syd", "size_gb": 1})).json()
            assert small["zone"] == "syd-1"
            big = await api.post("/v1/apps/db/machines", json=machine(config={
                "mounts": [{"volume": small["id"], "path": "/logs"}],
                "guest": {"cpus": 1, "memory_mb": 1024}}))
            assert big.status_code == 412
            assert big.json()["status"] == "volume_placement_capacity"
            assert "fork the volume" in big.json()["error"]


async def test_app_tokens_see_only_their_app(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path) as c:
        await c.add_worker("ams-1")
        await c.add_broker()
        async with c.api() as admin:
            for name in ("mine", "theirs"):
                await admin.post("/v1/apps", json={"app_name": name, "org_slug": "personal"})
            token = (await admin.post("/v1/apps/mine/deploy_token", json={})).json()["token"]
            theirs = (await admin.post("/v1/apps/theirs/machines", json=machine())).json()
        async with c.api(token=token) as app_api, c.api(token=None) as anon:
            assert (await anon.get("/v1/apps")).status_code == 401
            assert (await anon.get("/v1/apps")).json()["status"] == "unauthenticated"
            listed = (await app_api.get("/v1/apps")).json()
            assert [a["name"] for a in listed["apps"]] == ["mine"]
            assert (await app_api.get("/v1/apps/theirs/machines")).status_code == 404
            assert (await app_api.get(f"/v1/apps/theirs/machines/{theirs['id']}")
                    ).status_code == 404
            assert (await app_api.post("/v1/apps/mine/machines", json=machine())
                    ).status_code == 200
            app = {"app_name": "x", "org_slug": "personal"}
            refused = await app_api.post("/v1/apps", json=app)
            assert (refused.status_code, refused.json()["status"]) == (403, "permission_denied")
        async with c.api(token=f"FlyV1 {ADMIN}") as fly_scheme:
            fly_scheme.headers["authorization"] = f"FlyV1 {ADMIN}"
            assert (await fly_scheme.get("/v1/apps")).status_code == 200


async def test_hedged_placement_leaves_no_reservation_behind(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path) as c:
        await c.add_worker("ams-1", cpus=2)
        await c.add_worker("ams-2", cpus=2)
        c.follow()
        await c.add_broker(hedge=True)
        async with c.api() as api:
            await api.post("/v1/apps", json={"app_name": "hedge", "org_slug": "personal"})
            answers = await asyncio.gather(*(
                api.post("/v1/apps/hedge/machines", json=machine(config={"guest": {
                    "cpu_kind": "performance", "cpus": 1, "memory_mb": 256}}))
                for _ in range(6)))
        codes = sorted(a.status_code for a in answers)
        placed = codes.count(200)
        # Four fit. A hedge holds room on two workers for a moment, so a create racing for
        # the last slots may be refused while another's spare reservation is still held: at
        # worst two creates hold all four slots between them (how many of the six ask while
        # they do depends on how the calls interleave, TLS handshakes and all).
        assert set(codes) == {200, 412}
        assert 2 <= placed <= 4
        machines = [worker.machines.store.db.execute("SELECT count(*) FROM machines")
                    .fetchone()[0] for worker in c.workers]
        assert sum(machines) == placed
        assert max(machines) <= 2  # never over-committed
        for worker in c.workers:
            assert worker.machines.store.db.execute(
                "SELECT count(*) FROM reservations WHERE claimed_by IS NULL").fetchone()[0] == 0


async def test_room_a_destroy_gave_back_is_placed_at_once_with_the_view_behind(
        tmp_path: Path) -> None:
    # Room for one machine, and a view that never hears the worker again (no follow): a
    # user who destroys a machine and creates another must not be told the host is full.
    async with in_process_cluster(tmp_path) as c:
        await c.add_worker("ams-1", cpus=1, memory_mb=256)
        await c.add_broker()
        async with c.api() as api:
            await api.post("/v1/apps", json={"app_name": "churn", "org_slug": "personal"})
            for _ in range(3):
                made = await api.post("/v1/apps/churn/machines", json=machine())
                assert made.status_code == 200, made.text
                gone = await api.delete(f"/v1/apps/churn/machines/{made.json()['id']}",
                                        params={"force": "true"})
                assert gone.status_code == 200, gone.text
            # Still one machine's room and no more: the credit is what was destroyed.
            first = await api.post("/v1/apps/churn/machines", json=machine())
            assert first.status_code == 200, first.text
            second = await api.post("/v1/apps/churn/machines", json=machine())
            assert second.status_code == 412, second.text
