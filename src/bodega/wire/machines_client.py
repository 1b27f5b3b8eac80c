"""A typed async client for the public Machines API (what the CLI and benchmarks use).

It speaks to any server of the Fly Machines API v1 subset bodega serves, so
the same calls work against a bodega broker and, for the common routes,
against Fly's own API.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import aiohttp

from bodega.wire.json_client import JsonClient

if TYPE_CHECKING:
    from bodega.wire.cluster_info import ClusterInfo


class MachinesClient(JsonClient):
    def __init__(self, base_url: str, token: str, *, client: aiohttp.ClientSession | None = None,
                 timeout: float = 70.0) -> None:
        super().__init__(base_url, token, client=client, timeout=timeout, what="bodega API")

    async def __aenter__(self) -> MachinesClient:
        return self

    # -- apps ---------------------------------------------------------------------------
    async def apps(self) -> list[dict[str, Any]]:
        return list((await self.request("GET", "/v1/apps"))["apps"])

    async def create_app(self, name: str, org_slug: str = "personal",
                         network: str | None = None) -> dict[str, Any]:
        body = {"app_name": name, "org_slug": org_slug}
        if network:
            body["network"] = network
        return dict(await self.request("POST", "/v1/apps", json=body))

    async def app(self, name: str) -> dict[str, Any]:
        return dict(await self.request("GET", f"/v1/apps/{name}"))

    async def delete_app(self, name: str) -> None:
        await self.request("DELETE", f"/v1/apps/{name}")

    async def deploy_token(self, app: str, expiry: str | None = None) -> str:
        body = {"expiry": expiry} if expiry else {}
        return str((await self.request("POST", f"/v1/apps/{app}/deploy_token", json=body))
                   ["token"])

    # -- machines -------------------------------------------------------------------------
    async def machines(self, app: str, **params: Any) -> list[dict[str, Any]]:
        return list(await self.request("GET", f"/v1/apps/{app}/machines", params=params))

    async def create_machine(self, app: str, body: dict[str, Any],
                             idempotency_key: str | None = None) -> dict[str, Any]:
        headers = {"idempotency-key": idempotency_key} if idempotency_key else None
        return dict(await self.request("POST", f"/v1/apps/{app}/machines", json=body,
                                       headers=headers))

    async def machine(self, app: str, machine_id: str) -> dict[str, Any]:
        return dict(await self.request("GET", f"/v1/apps/{app}/machines/{machine_id}"))

    # ``nonce``: a held lease's, sent in the lease header as flyctl sends it.
    async def update_machine(self, app: str, machine_id: str, body: dict[str, Any],
                             nonce: str | None = None) -> dict[str, Any]:
        return dict(await self.request("POST", f"/v1/apps/{app}/machines/{machine_id}",
                                       json=body, nonce=nonce))

    async def action(self, app: str, machine_id: str, action: str,
                     body: dict[str, Any] | None = None, *, nonce: str | None = None,
                     **params: Any) -> Any:
        return await self.request("POST", f"/v1/apps/{app}/machines/{machine_id}/{action}",
                                  json=body, params=params or None, nonce=nonce)

    async def destroy(self, app: str, machine_id: str, force: bool = False,
                      nonce: str | None = None) -> None:
        await self.request("DELETE", f"/v1/apps/{app}/machines/{machine_id}",
                           params={"force": "true"} if force else None, nonce=nonce)

    async def wait(self, app: str, machine_id: str, state: str = "started",
                   timeout: int = 60, version: str | None = None) -> dict[str, Any]:
        params: dict[str, Any] = {"state": state, "timeout": timeout}
        if version:
            params["version"] = version
        return dict(await self.request("GET", f"/v1/apps/{app}/machines/{machine_id}/wait",
                                       params=params, timeout=timeout + 10))

    async def read(self, app: str, machine_id: str, part: str, **params: Any) -> Any:
        """GET a machine's events, versions, ps, metadata, lease or placement."""
        return await self.request("GET", f"/v1/apps/{app}/machines/{machine_id}/{part}",
                                  params=params or None)

    async def exec(self, app: str, machine_id: str, command: list[str],
                   timeout: int = 30) -> dict[str, Any]:
        return dict(await self.action(app, machine_id, "exec",
                                      {"command": command, "timeout": timeout}))

    # -- volumes ----------------------------------------------------------------------------
    async def volumes(self, app: str) -> list[dict[str, Any]]:
        return list(await self.request("GET", f"/v1/apps/{app}/volumes"))

    async def create_volume(self, app: str, body: dict[str, Any]) -> dict[str, Any]:
        return dict(await self.request("POST", f"/v1/apps/{app}/volumes", json=body))

    async def delete_volume(self, app: str, volume_id: str) -> dict[str, Any]:
        return dict(await self.request("DELETE", f"/v1/apps/{app}/volumes/{volume_id}"))

    # -- platform and cluster -------------------------------------------------------------
    async def placements(self, body: dict[str, Any]) -> dict[str, Any]:
        return dict(await self.request("POST", "/v1/platform/placements", json=body))

    async def regions(self, **params: Any) -> dict[str, Any]:
        return dict(await self.request("GET", "/v1/platform/regions", params=params or None))

    async def cluster_info(self) -> ClusterInfo:
        """What the cluster tells its clients: where its image registry is."""
        from bodega.wire.cluster_info import ClusterInfo  # pydantic: only for who asks

        return ClusterInfo.model_validate(await self.request("GET", "/v1/cluster"))

    async def members(self) -> list[dict[str, Any]]:
        return list(await self.request("GET", "/v1/cluster/members"))

    async def workers(self) -> list[dict[str, Any]]:
        return list(await self.request("GET", "/v1/cluster/workers"))
