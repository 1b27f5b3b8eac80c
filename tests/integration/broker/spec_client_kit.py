"""A Machines API client written from the published spec alone, with strict response models.

Nothing here imports bodega: paths, bodies and the response shapes come from
the Fly Machines API v1 spec and its wire notes (the lease envelope, ``/wait``
answering 408, errors as ``{"error", "status"}``). The models forbid fields
the spec does not define, so a response with something extra, or a wrong
type, fails to parse, as it would in a strict generated client.
"""

from __future__ import annotations

from typing import Any, TypeVar

import httpx
from pydantic import BaseModel, ConfigDict, TypeAdapter

M = TypeVar("M")


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ImageRef(Strict):
    registry: str | None = None
    repository: str | None = None
    tag: str | None = None
    digest: str | None = None
    labels: dict[str, str] | None = None


class MachineEvent(Strict):
    id: str | None = None
    type: str | None = None
    status: str | None = None
    source: str | None = None
    timestamp: int | None = None
    request: dict[str, Any] | None = None


class CheckStatus(Strict):
    name: str | None = None
    output: str | None = None
    status: str | None = None
    updated_at: str | None = None


class Machine(Strict):
    id: str | None = None
    name: str | None = None
    state: str | None = None
    region: str | None = None
    instance_id: str | None = None
    version: str | None = None  # fly-go reads it beside instance_id
    private_ip: str | None = None
    config: dict[str, Any] | None = None
    incomplete_config: dict[str, Any] | None = None
    image_ref: ImageRef | None = None
    created_at: str | None = None
    updated_at: str | None = None
    events: list[MachineEvent] | None = None
    checks: list[CheckStatus] | None = None
    nonce: str | None = None
    host_status: str | None = None
    cordoned: bool | None = None


class Organization(Strict):
    name: str | None = None
    slug: str | None = None
    internal_numeric_id: int | None = None


class App(Strict):
    id: str | None = None
    name: str | None = None
    status: str | None = None
    network: str | None = None
    organization: Organization | None = None
    machine_count: int | None = None
    volume_count: int | None = None
    internal_numeric_id: int | None = None


class ListAppsResponse(Strict):
    apps: list[App]
    total_apps: int


class Lease(Strict):
    nonce: str
    expires_at: int
    owner: str
    description: str | None = None
    version: str | None = None


class LeaseEnvelope(Strict):
    status: str
    data: Lease


class WaitMachineResponse(Strict):
    ok: bool
    state: str | None = None
    version: str | None = None
    event_id: str | None = None


class MachineVersion(Strict):
    version: str
    user_config: dict[str, Any]


class Volume(Strict):
    id: str
    name: str | None = None
    state: str | None = None
    size_gb: int | None = None
    region: str | None = None
    zone: str | None = None
    encrypted: bool | None = None
    attached_machine_id: str | None = None
    attached_alloc_id: str | None = None
    created_at: str | None = None
    fstype: str | None = None
    snapshot_retention: int | None = None
    auto_backup_enabled: bool | None = None
    host_status: str | None = None
    block_size: int | None = None
    blocks: int | None = None
    blocks_avail: int | None = None
    blocks_free: int | None = None
    bytes_total: int | None = None
    bytes_used: int | None = None
    type: str | None = None


class ErrorResponse(Strict):
    error: str
    status: str | None = None
    details: dict[str, Any] | None = None


class ExecResponse(Strict):
    exit_code: int | None = None
    exit_signal: int | None = None
    stdout: str | None = None
    stderr: str | None = None


class ApiError(Exception):
    def __init__(self, code: int, body: ErrorResponse) -> None:
        super().__init__(f"{code}: {body.error}")
        self.code = code
        self.body = body


class SpecClient:
    """``base_url`` ends in ``/v1``, as ``FLY_FLAPS_BASE_URL`` does."""

    def __init__(self, base_url: str, token: str) -> None:
        self.http = httpx.AsyncClient(base_url=base_url.rstrip("/"), timeout=90,
                                      headers={"Authorization": f"Bearer {token}"})

    async def aclose(self) -> None:
        await self.http.aclose()

    async def _call(self, method: str, path: str, model: Any, **kw: Any) -> Any:
        response = await self.http.request(method, path, **kw)
        if response.status_code >= 400:
            raise ApiError(response.status_code,
                           ErrorResponse.model_validate_json(response.content))
        if model is None:
            return None
        return TypeAdapter(model).validate_json(response.content)

    # Apps
    async def create_app(self, name: str) -> None:
        response = await self.http.post("/apps", json={"app_name": name, "org_slug": "personal"})
        assert response.status_code == 201, response.text

    async def get_app(self, name: str) -> App:
        result: App = await self._call("GET", f"/apps/{name}", App)
        return result

    async def list_apps(self) -> ListAppsResponse:
        result: ListAppsResponse = await self._call("GET", "/apps", ListAppsResponse,
                                params={"org_slug": "personal"})
        return result

    # Machines
    async def launch(self, app: str, body: dict[str, Any]) -> Machine:
        result: Machine = await self._call("POST", f"/apps/{app}/machines", Machine,
                                json=body)
        return result

    async def get(self, app: str, mid: str) -> Machine:
        result: Machine = await self._call("GET", f"/apps/{app}/machines/{mid}", Machine)
        return result

    async def machines(self, app: str, **params: Any) -> list[Machine]:
        result: list[Machine] = await self._call("GET", f"/apps/{app}/machines", list[Machine],
                                params=params)
        return result

    async def update(self, app: str, mid: str, body: dict[str, Any],
                     nonce: str | None = None) -> Machine:
        headers = {"fly-machine-lease-nonce": nonce} if nonce else {}
        result: Machine = await self._call("POST", f"/apps/{app}/machines/{mid}", Machine,
                                json=body, headers=headers)
        return result

    async def start(self, app: str, mid: str) -> dict[str, Any]:
        result: dict[str, Any] = await self._call("POST", f"/apps/{app}/machines/{mid}/start",
                                dict[str, Any])
        return result

    async def stop(self, app: str, mid: str, nonce: str | None = None) -> None:
        headers = {"fly-machine-lease-nonce": nonce} if nonce else {}
        await self._call("POST", f"/apps/{app}/machines/{mid}/stop", None,
                         json={"signal": "SIGTERM", "timeout": "5s"}, headers=headers)

    async def wait(self, app: str, mid: str, state: str, *, instance_id: str | None = None,
                   timeout: int = 60) -> WaitMachineResponse:
        params: dict[str, Any] = {"state": state, "timeout": timeout}
        if instance_id:
            params["instance_id"] = instance_id
        result: WaitMachineResponse = await self._call("GET", f"/apps/{app}/machines/{mid}/wait",
                                WaitMachineResponse, params=params)
        return result

    async def destroy(self, app: str, mid: str, *, kill: bool = False) -> None:
        params = {"kill": "true"} if kill else {}
        await self._call("DELETE", f"/apps/{app}/machines/{mid}", None, params=params)

    async def acquire_lease(self, app: str, mid: str, ttl: int,
                            nonce: str | None = None) -> LeaseEnvelope:
        headers = {"fly-machine-lease-nonce": nonce} if nonce else {}
        result: LeaseEnvelope = await self._call("POST", f"/apps/{app}/machines/{mid}/lease",
                                LeaseEnvelope, params={"ttl": ttl}, json={"ttl": ttl},
                                headers=headers)
        return result

    async def release_lease(self, app: str, mid: str, nonce: str) -> None:
        await self._call("DELETE", f"/apps/{app}/machines/{mid}/lease", None,
                         headers={"fly-machine-lease-nonce": nonce})

    async def events(self, app: str, mid: str) -> list[MachineEvent]:
        result: list[MachineEvent] = await self._call("GET", f"/apps/{app}/machines/{mid}/events",
                                list[MachineEvent])
        return result

    async def versions(self, app: str, mid: str) -> list[MachineVersion]:
        path = f"/apps/{app}/machines/{mid}/versions"
        result: list[MachineVersion] = await self._call("GET", path, list[MachineVersion])
        return result

    async def set_metadata(self, app: str, mid: str, key: str, value: str) -> None:
        response = await self.http.post(f"/apps/{app}/machines/{mid}/metadata/{key}",
                                        json={"value": value})
        assert response.status_code == 204, response.text

    async def metadata(self, app: str, mid: str) -> dict[str, str]:
        result: dict[str, str] = await self._call("GET", f"/apps/{app}/machines/{mid}/metadata",
                                dict[str, str])
        return result

    async def cordon(self, app: str, mid: str, on: bool) -> None:
        await self._call("POST", f"/apps/{app}/machines/{mid}/{'cordon' if on else 'uncordon'}",
                         None)

    async def exec(self, app: str, mid: str, command: list[str]) -> ExecResponse:
        result: ExecResponse = await self._call("POST", f"/apps/{app}/machines/{mid}/exec",
                                ExecResponse, json={"command": command, "timeout": 10})
        return result

    # Volumes
    async def create_volume(self, app: str, name: str, region: str) -> Volume:
        result: Volume = await self._call("POST", f"/apps/{app}/volumes", Volume,
                                json={"name": name, "region": region, "size_gb": 1})
        return result

    async def list_volumes(self, app: str) -> list[Volume]:
        result: list[Volume] = await self._call("GET", f"/apps/{app}/volumes", list[Volume])
        return result
