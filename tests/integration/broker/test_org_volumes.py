"""``GET /v1/orgs/{org_slug}/volumes``: an org's volumes across its apps, filtered and paged."""

from __future__ import annotations

from pathlib import Path

import httpx

from .broker_kit import in_process_cluster


async def test_an_orgs_volumes_across_its_apps_filtered_and_paged(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path) as c:
        await c.add_worker("ams-1")
        await c.add_worker("syd-1", region="syd")
        await c.add_broker()
        async with c.api() as api:
            for app, org in (("one", "acme"), ("two", "acme"), ("mine", "personal")):
                assert (await api.post("/v1/apps", json={"app_name": app, "org_slug": org})
                        ).status_code == 201
            made: dict[str, list[str]] = {}
            for app, region in (("one", "ams"), ("two", "ams"), ("two", "syd"),
                                ("mine", "ams")):
                v = await api.post(f"/v1/apps/{app}/volumes", json={
                    "name": "data", "region": region, "size_gb": 1})
                assert v.status_code == 200, v.text
                made.setdefault(app, []).append(v.json()["id"])
            doomed = made["two"][1]
            assert (await api.delete(f"/v1/apps/two/volumes/{doomed}")).status_code == 200
            c.sync()

            body = (await api.get("/v1/orgs/acme/volumes")).json()
            volumes = body["volumes"]
            assert {v["id"] for v in volumes} == {made["one"][0], made["two"][0]}
            assert {v["app_name"] for v in volumes} == {"one", "two"}
            assert all(v["updated_at"] for v in volumes)
            assert [v["updated_at"] for v in volumes] == sorted(v["updated_at"] for v in volumes)
            assert body["last_volume_id"] == volumes[-1]["id"]
            assert "next_cursor" not in body
            # The app-level answer keeps the API's Volume shape: no updated_at, no app_name.
            one = (await api.get(f"/v1/apps/one/volumes/{made['one'][0]}")).json()
            assert "updated_at" not in one
            assert "app_name" not in one

            deleted = (await api.get("/v1/orgs/acme/volumes",
                                     params={"include_deleted": "true"})).json()["volumes"]
            assert doomed in {v["id"] for v in deleted}
            syd = (await api.get("/v1/orgs/acme/volumes", params={
                "region": "syd", "include_deleted": "true"})).json()["volumes"]
            assert [v["id"] for v in syd] == [doomed]
            assert (await api.get("/v1/orgs/acme/volumes", params={"state": "destroyed"})
                    ).json()["volumes"] == []

            seen, cursor = [], None
            for _ in range(5):
                params = {"limit": "1", "include_deleted": "true"}
                if cursor:
                    params["cursor"] = cursor
                page = (await api.get("/v1/orgs/acme/volumes", params=params)).json()
                seen += [v["id"] for v in page["volumes"]]
                cursor = page.get("next_cursor")
                if cursor is None:
                    break
            assert sorted(seen) == sorted(v["id"] for v in deleted)
            assert len(seen) == 3
            later = (await api.get("/v1/orgs/acme/volumes", params={
                "updated_after": volumes[-1]["updated_at"]})).json()
            assert later["volumes"] == []
            for bad in ({"cursor": "%%%"}, {"updated_after": "yesterday"}, {"limit": "0"}):
                refused = await api.get("/v1/orgs/acme/volumes", params=bad)
                assert refused.status_code == 400, (bad, refused.text)
                assert refused.json()["status"] == "invalid_argument"

            # An app token sees its own app's volumes only.
            token = (await api.post("/v1/apps/one/deploy_token", json={})).json()["token"]
            async with httpx.AsyncClient(base_url=str(api.base_url), headers={
                    "authorization": f"Bearer {token}"}) as scoped:
                mine = (await scoped.get("/v1/orgs/acme/volumes")).json()["volumes"]
                assert [v["id"] for v in mine] == [made["one"][0]]
