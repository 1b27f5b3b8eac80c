"""A typed async client for a worker's internal API.

Brokers, proxies and tests use it; every body it sends is a model of
``worker_calls`` (the worker refuses unknown fields), and errors come back as
the same ``BodegaError`` subclasses the worker raised, so a 409 from a
reservation is a ``Conflict`` here too and can be re-raised to a public client
unchanged. Machine and volume documents come back as the JSON the worker
wrote: the broker hands them on to its own clients as they are.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from typing import Any, TypeVar

import aiohttp
from pydantic import ValidationError

from bodega.model.capacity import Ask
from bodega.model.errors import Indeterminate
from bodega.wire.json_client import NONCE_HEADER, JsonClient, Params
from bodega.wire.worker_calls import (
    OWNER_HEADER,
    Cordoned,
    CreateMachineBody,
    CreateVolumeBody,
    Done,
    Health,
    Released,
    Reservation,
    ReserveBody,
    Started,
    StopBody,
    UpdateMachineBody,
    WorkerAnswer,
    WorkerRequest,
)

A = TypeVar("A", bound=WorkerAnswer)

__all__ = ["NONCE_HEADER", "WorkerClient", "machine_path", "read_answer", "wire_bytes"]


def wire_bytes(body: WorkerRequest | None) -> bytes | None:
    """A request model as JSON, encoded by pydantic's own serializer (no dict built, no
    second walk); unset optional fields are left out, as the worker's defaults."""
    return None if body is None else body.model_dump_json(exclude_none=True).encode()


def read_answer(model: type[A], data: Any, where: str) -> A:
    """A worker's answer as ``model``; one of another shape is a worker that did something
    this caller cannot read, so whether the call took effect is unknown."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise Indeterminate(f"worker at {where} answered what is not a {model.__name__}: "
                            f"{exc.errors()[0].get('msg', 'invalid')}") from None


def machine_path(machine_id: str, action: str = "") -> str:
    return f"/v1/machines/{machine_id}" + (f"/{action}" if action else "")


class WorkerClient(JsonClient):
    """``tls``: the caller's client context (its certificate says who calls); a session
    given as ``client`` was made with it already."""

    def __init__(self, base_url: str, tls: ssl.SSLContext | None = None, *,
                 client: aiohttp.ClientSession | None = None, timeout: float = 10.0) -> None:
        super().__init__(base_url, None, client=client, timeout=timeout, what="worker",
                         ssl=tls)

    async def __aenter__(self) -> WorkerClient:
        return self

    async def send(self, method: str, path: str, body: WorkerRequest | None = None, *,
                   params: Params = None, nonce: str | None = None,
                   timeout: float | None = None, owner: str | None = None) -> Any:
        """One call with a typed body; the answer is the worker's JSON."""
        return await self.request(method, path, encoded=wire_bytes(body), params=params,
                                  nonce=nonce, timeout=timeout,
                                  headers={OWNER_HEADER: owner} if owner else None)

    def _read(self, model: type[A], data: Any) -> A:
        return read_answer(model, data, self.base_url)

    # -- host ---------------------------------------------------------------------
    async def health(self) -> Health:
        return self._read(Health, await self.request("GET", "/v1/health"))

    async def capacity(self) -> dict[str, Any]:
        """The ledger's snapshot: totals, used, free, cordoned, live reservations."""
        result: dict[str, Any] = await self.request("GET", "/v1/capacity")
        return result

    async def reserve(self, app: str, ask: Ask, ttl: float) -> Reservation:
        answer = await self.send("POST", "/v1/reservations", ReserveBody.of(app, ask, ttl))
        return self._read(Reservation, answer)

    async def release(self, reservation_id: str) -> Released:
        answer = await self.request("DELETE", f"/v1/reservations/{reservation_id}")
        return self._read(Released, answer)

    async def cordon(self, cordoned: bool) -> Cordoned:
        answer = await self.request("POST", "/v1/cordon" if cordoned else "/v1/uncordon")
        return self._read(Cordoned, answer)

    # -- machines -------------------------------------------------------------------
    async def create_machine(self, body: CreateMachineBody | Mapping[str, Any], *,
                             owner: str | None = None) -> dict[str, Any]:
        """Create a machine; a mapping is checked against ``CreateMachineBody`` first."""
        typed = body if isinstance(body, CreateMachineBody) else \
            CreateMachineBody.model_validate(body)
        result: dict[str, Any] = await self.send("POST", "/v1/machines", typed, owner=owner)
        return result

    async def update_machine(self, machine_id: str, body: UpdateMachineBody, *,
                             app: str | None = None, nonce: str | None = None) -> dict[str, Any]:
        result: dict[str, Any] = await self.send("POST", machine_path(machine_id), body,
                                                 params={"app": app}, nonce=nonce)
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
            "GET", machine_path(machine_id), params={"app": app} if app else None
        )
        return result

    async def call(
        self, method: str, machine_id: str, action: str = "", *, app: str | None = None,
        json: Any = None, params: dict[str, Any] | None = None, nonce: str | None = None,
        timeout: float | None = None,
    ) -> Any:
        """Any per-machine route, raw: ``call("GET", id, "events")``. Tests use it to send
        what no typed method would."""
        query = dict(params or {})
        if app:
            query["app"] = app
        return await self.request(method, machine_path(machine_id, action), json=json,
                                  params=query or None, nonce=nonce, timeout=timeout)

    async def start(self, machine_id: str, nonce: str | None = None) -> Started:
        answer = await self.send("POST", machine_path(machine_id, "start"), nonce=nonce)
        return self._read(Started, answer)

    async def stop(self, machine_id: str, signal: str | None = None,
                   timeout: str | None = None, nonce: str | None = None) -> Done:
        body = StopBody(signal=signal or None, timeout=timeout or None)
        answer = await self.send("POST", machine_path(machine_id, "stop"), body, nonce=nonce)
        return self._read(Done, answer)

    async def suspend(self, machine_id: str, nonce: str | None = None) -> Done:
        answer = await self.send("POST", machine_path(machine_id, "suspend"), nonce=nonce)
        return self._read(Done, answer)

    async def destroy(self, machine_id: str, force: bool = False,
                      nonce: str | None = None) -> Done:
        answer = await self.send("DELETE", machine_path(machine_id),
                                 params={"force": "true"} if force else None, nonce=nonce)
        return self._read(Done, answer)

    async def wait(self, machine_id: str, state: str = "started", timeout: int = 60,
                   version: str | None = None) -> dict[str, Any]:
        params: dict[str, Any] = {"state": state, "timeout": timeout}
        if version:
            params["version"] = version
        result: dict[str, Any] = await self.call("GET", machine_id, "wait", params=params,
                                                 timeout=timeout + 5)
        return result

    # -- volumes --------------------------------------------------------------------
    async def create_volume(self, body: CreateVolumeBody | Mapping[str, Any]) -> dict[str, Any]:
        typed = body if isinstance(body, CreateVolumeBody) else \
            CreateVolumeBody.model_validate(body)
        result: dict[str, Any] = await self.send("POST", "/v1/volumes", typed)
        return result

    async def list_volumes(self, app: str | None = None) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = await self.request(
            "GET", "/v1/volumes", params={"app": app} if app else None
        )
        return result
