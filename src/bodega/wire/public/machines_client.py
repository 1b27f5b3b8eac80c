"""A typed async client for the public Machines API (what the CLI, the deploy and benchmarks use).

It speaks to any server of the Fly Machines API v1 subset bodega serves, so
the same calls work against a bodega broker and, for the common routes,
against Fly's own API. Every call answers a model (``Machine``, ``Volume``,
``App``, ``LeaseAnswer`` ...), read by pydantic's JSON parser straight from the
bytes, as fly-go answers structs; bodies go out as the request models of
``wire/public/fly.py``. Besides the machines, it holds the calls a deploy makes: leases
(``acquire_lease`` takes one or refreshes it, ``release_lease``) and metadata, and
bodega's own routes (``wire/public/bodega_calls.py``): releases, secrets, a machine's last
log lines, the platform and the cluster.

A call imports the models it reads and sends when it is first made, not when
this module is: a command pays for its own few (``bodega apps list`` builds
``App`` and ``Release``, never ``Machine`` and its config).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from bodega.wire.public.bodega_calls import BodegaCalls, body_of
from bodega.wire.transport.seam import Transport

if TYPE_CHECKING:
    import aiohttp

    from bodega.model.machine import Machine, MachineEvent
    from bodega.model.machine_answers import (
        ExecAnswer,
        LeaseAnswer,
        MachineVersion,
        ProcessStat,
        WaitAnswer,
    )
    from bodega.model.volume import ExtendVolumeAnswer, Volume, VolumeSnapshot
    from bodega.wire.public.apps import App
    from bodega.wire.public.fly import (
        CreateMachineRequest,
        CreateVolumeRequest,
        UpdateMachineRequest,
        UpdateVolumeRequest,
    )
    from bodega.wire.public.placement import PlacementRecord


class MachinesClient(BodegaCalls):
    def __init__(self, base_url: str, token: str, *, client: aiohttp.ClientSession | None = None,
                 timeout: float = 70.0, transport: Transport | None = None) -> None:
        super().__init__(base_url, token, client=client, timeout=timeout, what="bodega API",
                         transport=transport)

    async def __aenter__(self) -> MachinesClient:
        return self

    # -- apps ---------------------------------------------------------------------------
    async def apps(self) -> list[App]:
        from bodega.wire.public.apps import AppList

        return (await self.answer(AppList, "GET", "/v1/apps")).apps

    async def create_app(self, name: str, org_slug: str = "personal",
                         network: str | None = None) -> App:
        from bodega.wire.public.apps import App

        body = {"app_name": name, "org_slug": org_slug}
        if network:
            body["network"] = network
        return await self.answer(App, "POST", "/v1/apps", json=body)

    async def app(self, name: str) -> App:
        from bodega.wire.public.apps import App

        return await self.answer(App, "GET", f"/v1/apps/{name}")

    async def delete_app(self, name: str) -> None:
        await self.exchange("DELETE", f"/v1/apps/{name}")

    async def deploy_token(self, app: str, expiry: str | None = None) -> str:
        from bodega.wire.public.apps import DeployToken

        body = {"expiry": expiry} if expiry else {}
        return (await self.answer(DeployToken, "POST", f"/v1/apps/{app}/deploy_token",
                                  json=body)).token

    # -- machines -------------------------------------------------------------------------
    async def machines(self, app: str, **params: Any) -> list[Machine]:
        from bodega.model.machine import Machine

        return await self.answers(Machine, "GET", f"/v1/apps/{app}/machines", params=params)

    async def create_machine(self, app: str, body: CreateMachineRequest,
                             idempotency_key: str | None = None) -> Machine:
        from bodega.model.machine import Machine

        headers = {"idempotency-key": idempotency_key} if idempotency_key else None
        return await self.answer(Machine, "POST", f"/v1/apps/{app}/machines",
                                 encoded=body_of(body), headers=headers)

    async def machine(self, app: str, machine_id: str) -> Machine:
        from bodega.model.machine import Machine

        return await self.answer(Machine, "GET", _machine(app, machine_id))

    # ``nonce``: a held lease's, sent in the lease header as flyctl sends it.
    async def update_machine(self, app: str, machine_id: str, body: UpdateMachineRequest,
                             nonce: str | None = None) -> Machine:
        from bodega.model.machine import Machine

        return await self.answer(Machine, "POST", _machine(app, machine_id),
                                 encoded=body_of(body), nonce=nonce)

    async def action(self, app: str, machine_id: str, action: str, *,
                     nonce: str | None = None, **params: Any) -> None:
        """A lifecycle action without a body: start, restart, suspend, cordon, uncordon."""
        await self.exchange("POST", _machine(app, machine_id, action), params=params or None,
                            nonce=nonce)

    async def move(self, app: str, machine_id: str, *, worker: str | None = None,
                   region: str | None = None, reason: str | None = None,
                   nonce: str | None = None) -> Machine:
        """Move the machine to ``worker``, or to another worker of ``region`` (of its own
        region when neither is given): a bodega extension. The machine, on its new worker."""
        from bodega.model.machine import Machine
        from bodega.wire.public.moves import MOVE_TIMEOUT, MoveMachineRequest

        body = MoveMachineRequest(worker=worker, region=region, reason=reason)
        return await self.answer(Machine, "POST", _machine(app, machine_id, "move"),
                                 encoded=body_of(body), nonce=nonce, timeout=MOVE_TIMEOUT)

    async def stop(self, app: str, machine_id: str, signal: str | None = None,
                   timeout: str | None = None, nonce: str | None = None) -> None:
        from bodega.wire.public.fly import StopRequest

        await self.exchange("POST", _machine(app, machine_id, "stop"), nonce=nonce,
                            encoded=body_of(StopRequest(signal=signal, timeout=timeout)))

    async def destroy(self, app: str, machine_id: str, force: bool = False,
                      nonce: str | None = None) -> None:
        await self.exchange("DELETE", _machine(app, machine_id),
                            params={"force": "true"} if force else None, nonce=nonce)

    async def wait(self, app: str, machine_id: str, state: str = "started",
                   timeout: int = 60, version: str | None = None) -> WaitAnswer:
        from bodega.model.machine_answers import WaitAnswer

        params = {"state": state, "timeout": timeout, "version": version or None}
        return await self.answer(WaitAnswer, "GET", _machine(app, machine_id, "wait"),
                                 params=params, timeout=timeout + 10)

    async def events(self, app: str, machine_id: str, limit: int | None = None
                     ) -> list[MachineEvent]:
        """The machine's events, newest first."""
        from bodega.model.machine import MachineEvent

        return await self.answers(MachineEvent, "GET", _machine(app, machine_id, "events"),
                                  params={"limit": limit})

    async def versions(self, app: str, machine_id: str) -> list[MachineVersion]:
        from bodega.model.machine_answers import MachineVersion

        return await self.answers(MachineVersion, "GET",
                                  _machine(app, machine_id, "versions"))

    async def ps(self, app: str, machine_id: str) -> list[ProcessStat]:
        from bodega.model.machine_answers import ProcessStat

        return await self.answers(ProcessStat, "GET", _machine(app, machine_id, "ps"))

    async def placement(self, app: str, machine_id: str) -> PlacementRecord:
        """Why the broker placed the machine where it is (bodega's)."""
        from bodega.wire.public.placement import PlacementRecord

        return await self.answer(PlacementRecord, "GET",
                                 _machine(app, machine_id, "placement"))

    async def exec(self, app: str, machine_id: str, command: list[str],
                   timeout: int = 30) -> ExecAnswer:
        from bodega.model.machine_answers import ExecAnswer

        return await self.answer(ExecAnswer, "POST", _machine(app, machine_id, "exec"),
                                 json={"command": command, "timeout": timeout})

    # -- leases and metadata ------------------------------------------------------------
    async def acquire_lease(self, app: str, machine_id: str, ttl: int,
                            description: str = "", nonce: str | None = None) -> LeaseAnswer:
        """Take the machine's lease for ``ttl`` seconds; with the ``nonce`` of the lease this
        client holds, refresh it. Someone else's lease is a 409 (``Conflict``)."""
        from bodega.model.machine_answers import LeaseAnswer

        return await self.answer(LeaseAnswer, "POST", _machine(app, machine_id, "lease"),
                                 json={"ttl": ttl, "description": description}, nonce=nonce)

    async def refresh_lease(self, app: str, machine_id: str, nonce: str, ttl: int,
                            description: str = "") -> LeaseAnswer:
        """Extend the lease this client holds (its ``nonce``) by ``ttl`` seconds from now."""
        return await self.acquire_lease(app, machine_id, ttl, description, nonce=nonce)

    async def lease(self, app: str, machine_id: str) -> LeaseAnswer:
        from bodega.model.machine_answers import LeaseAnswer

        return await self.answer(LeaseAnswer, "GET", _machine(app, machine_id, "lease"))

    async def release_lease(self, app: str, machine_id: str, nonce: str) -> None:
        await self.exchange("DELETE", _machine(app, machine_id, "lease"), nonce=nonce)

    async def metadata(self, app: str, machine_id: str) -> dict[str, str]:
        found = await self.request("GET", _machine(app, machine_id, "metadata"))
        return {str(k): str(v) for k, v in dict(found or {}).items()}

    async def metadata_value(self, app: str, machine_id: str, key: str) -> str:
        from bodega.model.machine_answers import MetadataValue

        return (await self.answer(MetadataValue, "GET",
                                  _machine(app, machine_id, _metadata_key(key)))).value

    async def set_metadata(self, app: str, machine_id: str, key: str, value: str,
                           nonce: str | None = None) -> None:
        """One metadata key set in place: the machine is not restarted."""
        await self.exchange("POST", _machine(app, machine_id, _metadata_key(key)),
                            json={"value": value}, nonce=nonce)

    async def delete_metadata(self, app: str, machine_id: str, key: str,
                              nonce: str | None = None) -> None:
        await self.exchange("DELETE", _machine(app, machine_id, _metadata_key(key)),
                            nonce=nonce)

    # -- volumes ----------------------------------------------------------------------------
    async def volumes(self, app: str, include_deleted: bool = False) -> list[Volume]:
        """The app's volumes, oldest first; ``include_deleted`` adds the destroyed ones."""
        from bodega.model.volume import Volume

        return await self.answers(Volume, "GET", f"/v1/apps/{app}/volumes",
                                  params={"include_deleted": "true"} if include_deleted else None)

    async def create_volume(self, app: str, body: CreateVolumeRequest) -> Volume:
        """A new volume; with ``snapshot_id`` a copy of that snapshot, with
        ``source_volume_id`` a fork of that volume (both on the host holding the data).

        Only the fields the caller set are sent: the broker fills the rest with the same
        defaults, except ``size_gb``, which, unsent, is the snapshot's size for a copy."""
        from bodega.model.volume import Volume

        return await self.answer(Volume, "POST", f"/v1/apps/{app}/volumes",
                                 encoded=body.model_dump_json(exclude_unset=True,
                                                              exclude_none=True).encode())

    async def volume(self, app: str, volume_id: str) -> Volume:
        from bodega.model.volume import Volume

        return await self.answer(Volume, "GET", _volume(app, volume_id))

    async def update_volume(self, app: str, volume_id: str, body: UpdateVolumeRequest) -> Volume:
        from bodega.model.volume import Volume

        return await self.answer(Volume, "PUT", _volume(app, volume_id), encoded=body_of(body))

    async def extend_volume(self, app: str, volume_id: str, size_gb: int) -> ExtendVolumeAnswer:
        """Grow the volume to ``size_gb``; the answer says whether its machine needs a
        restart to see the new size."""
        from bodega.model.volume import ExtendVolumeAnswer
        from bodega.wire.public.fly import ExtendVolumeRequest

        return await self.answer(ExtendVolumeAnswer, "PUT", _volume(app, volume_id, "extend"),
                                 encoded=body_of(ExtendVolumeRequest(size_gb=size_gb)))

    async def fork_volume(self, app: str, volume_id: str, body: CreateVolumeRequest) -> Volume:
        """A new volume holding a copy of ``volume_id``'s data (``create_volume`` with
        ``source_volume_id``): ``body`` gives its name, region and the rest."""
        return await self.create_volume(
            app, body.model_copy(update={"source_volume_id": volume_id, "snapshot_id": None}))

    async def delete_volume(self, app: str, volume_id: str) -> Volume:
        from bodega.model.volume import Volume

        return await self.answer(Volume, "DELETE", _volume(app, volume_id))

    async def volume_snapshots(self, app: str, volume_id: str) -> list[VolumeSnapshot]:
        """The volume's snapshots, oldest first."""
        from bodega.model.volume import VolumeSnapshot

        return await self.answers(VolumeSnapshot, "GET", _volume(app, volume_id, "snapshots"))

    async def take_snapshot(self, app: str, volume_id: str) -> VolumeSnapshot:
        """A snapshot of the volume taken now; the answer comes once it is taken."""
        from bodega.model.volume import VolumeSnapshot

        return await self.answer(VolumeSnapshot, "POST", _volume(app, volume_id, "snapshots"))

def _machine(app: str, machine_id: str, part: str = "") -> str:
    return f"/v1/apps/{app}/machines/{machine_id}" + (f"/{part}" if part else "")


def _volume(app: str, volume_id: str, part: str = "") -> str:
    return f"/v1/apps/{app}/volumes/{volume_id}" + (f"/{part}" if part else "")


def _metadata_key(key: str) -> str:
    return f"metadata/{quote(key, safe='')}"  # one path segment, whatever the key holds
