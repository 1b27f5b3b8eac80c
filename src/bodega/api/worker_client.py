"""A typed async client for a worker's internal API.

Brokers, proxies and tests use it; errors come back as the same
``BodegaError`` subclasses the worker raised, so a 409 from a reservation is a
``Conflict`` here too and can be re-raised to a public client unchanged.
"""

from __future__ import annotations

from typing import Any

import aiohttp

from bodega.api.json_client import NONCE_HEADER, JsonClient
from bodega.model.capacity import Ask

__all__ = ["NONCE_HEADER", "WorkerClient"]


class WorkerClient(JsonClient):
    def __init__(self, base_url: str, token: str, *, client: aiohttp.ClientSession | None = None,
                 timeout: float = 10.0) -> None:
        super().__init__(base_url, token, client=client, timeout=timeout, what="worker")

    async def __aenter__(self) -> WorkerClient:
        return self

    # -- host ---------------------------------------------------------------------
    async def health(self) -> dict[str, Any]:
        result: dict[str, Any] = await self.request("GET", "/v1/health")
        return result

    async def capacity(self) -> dict[str, Any]:
        result: dict[str, Any] = await self.request("GET", "/v1/capacity")
        return result

    async def reserve(self, app: str, ask: Ask, ttl: float) -> dict[str, Any]:
        body = {"app": app, **ask.to_wire(), "ttl": ttl}
        result: dict[str, Any] = await self.request("POST", "/v1/reservations", json=body)
        return result

    async def release(self, reservation_id: str) -> None:
        await self.request("DELETE", f"/v1/reservations/{reservation_id}")

    async def cordon(self, cordoned: bool) -> None:
        await self.request("POST", "/v1/cordon" if cordoned else "/v1/uncordon")

    # -- machines -------------------------------------------------------------------
    async def create_machine(self, body: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = await self.request("POST", "/v1/machines", json=body)
        return result

    async def list_machines(
        self, app: str | None = None, include_deleted: bool = False
    ) -> list[dict[str, Any]]:
        params: dict[str, Any] = {}
        if app:
            params["app"] = app
        if include_deleted:
            params["include_deleted"] = "true"
        result: list[dict[str, Any]] = await self.request("GET", "/v1/machines", params=params)
        return result

    async def machine(self, machine_id: str, app: str | None = None) -> dict[str, Any]:
        result: dict[str, Any] = await self.request(
            "GET", f"/v1/machines/{machine_id}", params={"app": app} if app else None
        )
        return result

    async def call(
        self, method: str, machine_id: str, action: str = "", *, app: str | None = None,
        json: Any = None, params: dict[str, Any] | None = None, nonce: str | None = None,
        timeout: float | None = None,
    ) -> Any:
        """Any per-machine route: ``call("POST", id, "start")``, ``call("GET", id, "wait")``."""
        path = f"/v1/machines/{machine_id}" + (f"/{action}" if action else "")
        query = dict(params or {})
        if app:
            query["app"] = app
        return await self.request(method, path, json=json, params=query or None, nonce=nonce,
                                  timeout=timeout)

    async def start(self, machine_id: str, nonce: str | None = None) -> dict[str, Any]:
        result: dict[str, Any] = await self.call("POST", machine_id, "start", nonce=nonce)
        return result

    async def stop(self, machine_id: str, signal: str | None = None,
                   timeout: str | None = None, nonce: str | None = None) -> None:
        body = {k: v for k, v in {"signal": signal, "timeout": timeout}.items() if v}
        await self.call("POST", machine_id, "stop", json=body, nonce=nonce)

    async def destroy(self, machine_id: str, force: bool = False,
                      nonce: str | None = None) -> None:
        await self.call("DELETE", machine_id, params={"force": "true"} if force else None,
                        nonce=nonce)

    async def wait(self, machine_id: str, state: str = "started", timeout: int = 60,
                   version: str | None = None) -> dict[str, Any]:
        params: dict[str, Any] = {"state": state, "timeout": timeout}
        if version:
            params["version"] = version
        result: dict[str, Any] = await self.call("GET", machine_id, "wait", params=params,
                                                 timeout=timeout + 5)
        return result

    # -- volumes --------------------------------------------------------------------
    async def create_volume(self, body: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = await self.request("POST", "/v1/volumes", json=body)
        return result

    async def list_volumes(self, app: str | None = None) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = await self.request(
            "GET", "/v1/volumes", params={"app": app} if app else None
        )
        return result
