"""Routes of the Machines API spec: an org's machines, app IP assignments, org_slug required."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import httpx

from bodega.broker.config import BrokerConfig
from bodega.broker.daemon import Broker
from tests.keyring_kit import SOURCE

from .broker_kit import ADMIN, in_process_cluster, machine


async def test_an_orgs_machines_across_its_apps_filtered_and_paged(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path) as c:
        await c.add_worker("ams-1")
        await c.add_broker()
        async with c.api() as api:
            for app, org in (("one", "acme"), ("two", "acme"), ("mine", "personal")):
                created = await api.post("/v1/apps", json={"app_name": app, "org_slug": org})
                assert created.status_code == 201, created.text
            ids: dict[str, list[str]] = {}
            for app in ("one", "two", "two", "mine"):
                m = (await api.post(f"/v1/apps/{app}/machines", json=machine(
                    config={"metadata": {"team": app}}))).json()
                ids.setdefault(app, []).append(m["id"])
            doomed = ids["two"][1]
            assert (await api.delete(f"/v1/apps/two/machines/{doomed}",
                                     params={"force": "true"})).status_code == 200

            listed = await api.get("/v1/orgs/acme/machines")
            assert listed.status_code == 200, listed.text
            body = listed.json()
            machines = body["machines"]
            assert {m["id"] for m in machines} == {ids["one"][0], ids["two"][0]}
            assert {m["app_name"] for m in machines} == {"one", "two"}
            assert [m["updated_at"] for m in machines] == sorted(m["updated_at"]
                                                               for m in machines)
            first = machines[0]
            assert set(first["config"]) == {"image", "guest", "metadata"}
            assert first["config"]["metadata"]["team"] == first["app_name"]
            assert body["last_machine_id"] == machines[-1]["id"]
            assert body["error_regions"] == []
            assert "next_cursor" not in body

            deleted = (await api.get("/v1/orgs/acme/machines",
                                     params={"include_deleted": "true"})).json()["machines"]
            assert doomed in {m["id"] for m in deleted}
            summary = (await api.get("/v1/orgs/acme/machines",
                                     params={"summary": "true"})).json()["machines"]
            assert all("config" not in m for m in summary)
            none = (await api.get("/v1/orgs/acme/machines",
                                  params={"state": "suspended"})).json()
            assert none["machines"] == []

            seen, cursor = [], None
            for _ in range(5):
                params = {"limit": "1", "include_deleted": "true"}
                if cursor:
                    params["cursor"] = cursor
                page = (await api.get("/v1/orgs/acme/machines", params=params)).json()
                seen += [m["id"] for m in page["machines"]]
                cursor = page.get("next_cursor")
                if cursor is None:
                    break
            assert sorted(seen) == sorted({m["id"] for m in deleted})
            assert len(seen) == 3

            later = (await api.get("/v1/orgs/acme/machines", params={
                "updated_after": machines[-1]["updated_at"]})).json()
            assert later["machines"] == []
            assert (await api.get("/v1/orgs/nobody/machines")).json()["machines"] == []
            for bad in ({"cursor": "%%%"}, {"updated_after": "yesterday"}, {"limit": "0"},
                        {"limit": "many"}):
                refused = await api.get("/v1/orgs/acme/machines", params=bad)
                assert refused.status_code == 400, (bad, refused.text)
                assert refused.json()["status"] == "invalid_argument"

            token = (await api.post("/v1/apps/one/deploy_token")).json()["token"]
        async with c.api(token=token) as scoped:
            only = (await scoped.get("/v1/orgs/acme/machines")).json()["machines"]
            assert [m["app_name"] for m in only] == ["one"]


async def test_ip_assignments_are_recorded_listed_and_removed(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path) as c:
        await c.add_worker("ams-1")
        await c.add_broker()
        async with c.api() as api:
            await api.post("/v1/apps", json={"app_name": "ips", "org_slug": "personal"})
            base = "/v1/apps/ips/ip_assignments"
            assert (await api.get(base)).json() == {"ips": []}
            v6 = await api.post(base, json={"type": "v6", "region": "ams",
                                            "service_name": "web"})
            assert v6.status_code == 200, v6.text
            assert ipaddress.ip_address(v6.json()["ip"]).version == 6
            assert (v6.json()["region"], v6.json()["service_name"], v6.json()["shared"]) == (
                "ams", "web", False)
            v4 = (await api.post(base, json={"type": "v4"})).json()
            assert ipaddress.ip_address(v4["ip"]).version == 4
            assert v4["region"] == "global"
            shared = (await api.post(base, json={"type": "shared_v4"})).json()
            assert shared["shared"] is True
            assert (await api.post(base, json={"type": "shared_v4"})).json() == shared
            listed = (await api.get(base)).json()["ips"]
            assert sorted(i["ip"] for i in listed) == sorted(
                [v6.json()["ip"], v4["ip"], shared["ip"]])
            for bad in ({"type": "v5"}, {}):
                refused = await api.post(base, json=bad)
                assert refused.status_code == 400, refused.text
                assert "type" in refused.json()["error"]
            assert (await api.delete(f"{base}/{v4['ip']}")).status_code == 204
            assert (await api.delete(f"{base}/{v4['ip']}")).status_code == 404
            assert (await api.delete(f"{base}/not-an-ip")).status_code == 400
            assert v4["ip"] not in {i["ip"] for i in (await api.get(base)).json()["ips"]}
            assert (await api.get("/v1/apps/nope/ip_assignments")).status_code == 404

            assert (await api.delete("/v1/apps/ips")).status_code == 202
            await api.post("/v1/apps", json={"app_name": "ips", "org_slug": "personal"})
            assert (await api.get(base)).json() == {"ips": []}  # the delete took them along


async def test_ip_assignments_live_in_a_real_registry_view(tmp_path: Path) -> None:
    broker = Broker(BrokerConfig(name="solo", data_dir=tmp_path / "solo",
                                 admin_tokens=(ADMIN,), listen_port=0, gossip_keyring=SOURCE))
    await broker.start()
    try:
        async with httpx.AsyncClient(base_url=broker.url, timeout=30, headers={
                "authorization": f"Bearer {ADMIN}"}) as api:
            assert (await api.post("/v1/apps", json={"app_name": "reg"})).status_code == 400
            assert (await api.post("/v1/apps", json={"app_name": "reg", "org_slug": "acme"})
                    ).status_code == 201
            ip = (await api.post("/v1/apps/reg/ip_assignments",
                                 json={"type": "private_v6"})).json()["ip"]
            assert ipaddress.ip_address(ip) in ipaddress.ip_network("fdaa::/16")
            assert broker.node.get("ip_assignments", f"reg/{ip}")["app"] == "reg"
            listed = (await api.get("/v1/apps/reg/ip_assignments")).json()["ips"]
            assert [i["ip"] for i in listed] == [ip]
            spec = (await api.get("/openapi.json")).json()["paths"]
            assert {"/v1/orgs/{org_slug}/machines", "/v1/apps/{app_name}/ip_assignments",
                    "/v1/apps/{app_name}/ip_assignments/{ip}"} <= set(spec)
    finally:
        await broker.stop()
