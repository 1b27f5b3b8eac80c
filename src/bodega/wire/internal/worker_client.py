"""A typed async client for a worker's internal API.

Brokers, proxies and tests use it; every body it sends is a model of
``worker_calls`` (the worker refuses unknown fields), and errors come back as
the same ``BodegaError`` subclasses the worker raised, so a 409 from a
reservation is a ``Conflict`` here too and can be re-raised to a public client
unchanged. Machines and volumes come back as the answer models the worker built
them from (``model/machine.py``, ``model/volume.py``), read by pydantic's JSON
parser straight from the bytes; an answer of another shape is ``Indeterminate``.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote

from bodega.model.capacity import Ask
from bodega.model.machine import Machine
from bodega.model.machine_answers import WaitAnswer
from bodega.model.volume import Volume
from bodega.wire.internal.worker_calls import (
    OWNER_HEADER,
    Capacity,
    CordonBody,
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
from bodega.wire.transport.json_client import NONCE_HEADER, JsonClient, Params
from bodega.wire.transport.seam import Streamed

if TYPE_CHECKING:
    import aiohttp  # the session a caller may share; calls travel through transport/

A = TypeVar("A", bound=WorkerAnswer)

__all__ = ["NONCE_HEADER", "WorkerClient", "machine_path", "wire_bytes"]


def wire_bytes(body: WorkerRequest | None) -> bytes | None:
    """A request model as JSON, encoded by pydantic's own serializer (no dict built, no
    second walk); unset optional fields are left out, as the worker's defaults."""
    return None if body is None else body.model_dump_json(exclude_none=True).encode()


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
                   timeout: float | None = None, owner: str | None = None) -> bytes | None:
        """One call with a typed body; the answer is the worker's JSON as it came, for a
        caller that hands it on (None for an empty answer)."""
        return await self.exchange(method, path, encoded=wire_bytes(body), params=params,
                                   nonce=nonce, timeout=timeout,
                                   headers={OWNER_HEADER: owner} if owner else None)

    async def _typed(self, model: type[A], method: str, path: str,
                     body: WorkerRequest | None = None, *, params: Params = None,
                     nonce: str | None = None) -> A:
        return await self.answer(model, method, path, encoded=wire_bytes(body), params=params,
                                 nonce=nonce)

    # -- host ---------------------------------------------------------------------
    async def health(self) -> Health:
        return await self.answer(Health, "GET", "/v1/health")

    async def capacity(self) -> Capacity:
        """The ledger's snapshot: totals, used, free, cordoned, live reservations."""
        return await self.answer(Capacity, "GET", "/v1/capacity")

    async def reserve(self, app: str, ask: Ask, ttl: float) -> Reservation:
        return await self._typed(Reservation, "POST", "/v1/reservations",
                                 ReserveBody.of(app, ask, ttl))

    async def release(self, reservation_id: str) -> Released:
        return await self._typed(Released, "DELETE", f"/v1/reservations/{reservation_id}")

    async def cordon(self, cordoned: bool, reason: str | None = None) -> Cordoned:
        """Cordon the host (no new machines), ``reason`` saying why (``draining``), or
        uncordon it."""
        if not cordoned:
            return await self._typed(Cordoned, "POST", "/v1/uncordon")
        return await self._typed(Cordoned, "POST", "/v1/cordon",
                                 CordonBody(reason=reason) if reason else None)

    # -- machines -------------------------------------------------------------------
    async def create_machine(self, body: CreateMachineBody | Mapping[str, Any], *,
                             owner: str | None = None,
                             timeout: float | None = None) -> Machine:
        """Create a machine; a mapping is checked against ``CreateMachineBody`` first."""
        typed = body if isinstance(body, CreateMachineBody) else \
            CreateMachineBody.model_validate(body)
        return await self.answer(Machine, "POST", "/v1/machines", encoded=wire_bytes(typed),
                                 headers={OWNER_HEADER: owner} if owner else None,
                                 timeout=timeout)

    async def update_machine(self, machine_id: str, body: UpdateMachineBody, *,
                             app: str | None = None, nonce: str | None = None) -> Machine:
        return await self.answer(Machine, "POST", machine_path(machine_id),
                                 encoded=wire_bytes(body), params={"app": app}, nonce=nonce)

    async def list_machines(self, app: str | None = None,
                            include_deleted: bool = False) -> list[Machine]:
        params = {"app": app, "include_deleted": "true" if include_deleted else None}
        return await self.answers(Machine, "GET", "/v1/machines", params=params)

    async def machine(self, machine_id: str, app: str | None = None, *,
                      timeout: float | None = None) -> Machine:
        return await self.answer(Machine, "GET", machine_path(machine_id),
                                 params={"app": app}, timeout=timeout)

    async def call(
        self, method: str, machine_id: str, action: str = "", *, app: str | None = None,
        json: Any = None, params: Params = None, nonce: str | None = None,
        timeout: float | None = None,
    ) -> Any:
        """Any per-machine route, raw: ``call("GET", id, "events")``. Tests use it to send
        what no typed method would."""
        pairs = list(params.items()) if isinstance(params, Mapping) else list(params or [])
        if app:
            pairs.append(("app", app))
        return await self.request(method, machine_path(machine_id, action), json=json,
                                  params=pairs or None, nonce=nonce, timeout=timeout)

    async def start(self, machine_id: str, nonce: str | None = None) -> Started:
        return await self._typed(Started, "POST", machine_path(machine_id, "start"),
                                 nonce=nonce)

    async def stop(self, machine_id: str, signal: str | None = None,
                   timeout: str | None = None, nonce: str | None = None) -> Done:
        body = StopBody(signal=signal or None, timeout=timeout or None)
        return await self._typed(Done, "POST", machine_path(machine_id, "stop"), body,
                                 nonce=nonce)

    async def suspend(self, machine_id: str, nonce: str | None = None) -> Done:
        return await self._typed(Done, "POST", machine_path(machine_id, "suspend"),
                                 nonce=nonce)

    async def destroy(self, machine_id: str, force: bool = False,
                      nonce: str | None = None) -> Done:
        return await self._typed(Done, "DELETE", machine_path(machine_id),
                                 params={"force": "true"} if force else None, nonce=nonce)

    async def wait(self, machine_id: str, state: str = "started", timeout: int = 60,
                   version: str | None = None) -> WaitAnswer:
        params = {"state": state, "timeout": timeout, "version": version or None}
        return await self.answer(WaitAnswer, "GET", machine_path(machine_id, "wait"),
                                 params=params, timeout=timeout + 5)

    def static(self, machine_id: str, path: str, *, method: str = "GET", app: str | None = None,
               headers: Mapping[str, str] | None = None,
               timeout: float | None = None) -> AbstractAsyncContextManager[Streamed]:
        """A file of the machine's statics, streamed: ``path`` is the request's path,
        decoded (``/static/a b.css``). Any status comes back as it is, an error's body in
        the error shape; ``NotConnected`` and ``NoAnswer`` say the call failed."""
        call = self.outgoing(method, machine_path(machine_id, "statics") + quote(path),
                             params={"app": app}, headers=headers, timeout=timeout)
        return self.transport.stream(call)

    # -- volumes --------------------------------------------------------------------
    async def create_volume(self, body: CreateVolumeBody | Mapping[str, Any], *,
                            timeout: float | None = None) -> Volume:
        typed = body if isinstance(body, CreateVolumeBody) else \
            CreateVolumeBody.model_validate(body)
        return await self.answer(Volume, "POST", "/v1/volumes", encoded=wire_bytes(typed),
                                 timeout=timeout)

    async def list_volumes(self, app: str | None = None) -> list[Volume]:
        return await self.answers(Volume, "GET", "/v1/volumes", params={"app": app})
