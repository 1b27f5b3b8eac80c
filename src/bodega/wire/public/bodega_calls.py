"""bodega's own routes beside the Machines API: an app's releases, its secrets and logs,
where machines would go, the regions, and the cluster's members and workers.

``MachinesClient`` holds these with Fly's routes; as there, a call imports the models
it reads and sends when it is first made, not when this module is.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from bodega.model.errors import Unavailable, Unreachable
from bodega.wire.transport.json_client import JsonClient
from bodega.wire.transport.seam import NoAnswer, NotConnected, lines

if TYPE_CHECKING:
    from bodega.model.machine import Machine
    from bodega.wire.public.cluster_info import ClusterInfo
    from bodega.wire.public.fly import PlacementsRequest
    from bodega.wire.public.logs import LogLine
    from bodega.wire.public.platform import Member, Placements, Regions, WorkerStatus
    from bodega.wire.public.releases import CreateRelease, Release, Status
    from bodega.wire.public.secrets import SecretList, SecretsUpdated

LOG_LINES_TIMEOUT = 10.0
LOG_CONNECT_TIMEOUT = 10.0  # a follow has no bound on the whole call, only on connecting


def body_of(request: BaseModel) -> bytes:
    """A request model as the JSON it sends: the fields it holds, unset ones left out."""
    return request.model_dump_json(exclude_none=True).encode()


class BodegaCalls(JsonClient):
    # -- releases (a bodega extension) and secrets ----------------------------------------
    async def releases(self, app: str) -> list[Release]:
        """The app's releases, newest first."""
        from bodega.wire.public.releases import Release

        return await self.answers(Release, "GET", f"/v1/apps/{app}/releases")

    async def create_release(self, app: str, body: CreateRelease) -> Release:
        from bodega.wire.public.releases import Release

        return await self.answer(Release, "POST", f"/v1/apps/{app}/releases",
                                 encoded=body_of(body))

    async def finish_release(self, app: str, version: int, status: Status,
                             failure: str | None = None) -> Release:
        from bodega.wire.public.releases import FinishRelease, Release

        return await self.answer(Release, "PATCH", f"/v1/apps/{app}/releases/{version}",
                                 encoded=body_of(FinishRelease(status=status,
                                                               failure=failure or None)))

    async def secrets(self, app: str) -> SecretList:
        """The app's secrets: names and digests, never values."""
        from bodega.wire.public.secrets import SecretList

        return await self.answer(SecretList, "GET", f"/v1/apps/{app}/secrets")

    async def update_secrets(self, app: str,
                             values: Mapping[str, str | None]) -> SecretsUpdated:
        """Set secrets (a value) and unset them (None), all in one new secrets version."""
        from bodega.wire.public.secrets import SecretsUpdated

        return await self.answer(SecretsUpdated, "POST", f"/v1/apps/{app}/secrets",
                                 json={"values": dict(values)})

    async def log_lines(self, app: str, machine_id: str, lines: int = 10) -> list[str]:
        """The machine's last log lines, if the cluster serves logs; none if it does not."""
        call = self.outgoing("GET", f"/v1/apps/{app}/logs", timeout=LOG_LINES_TIMEOUT,
                             params={"machine": machine_id, "limit": str(lines)})
        try:
            answer = await self.transport.send(call)
        except (NotConnected, NoAnswer):
            return []  # logs help the reader; their absence never changes what failed
        if answer.status != 200:
            return []
        text = answer.body.decode(errors="replace")
        out = []
        for line in text.splitlines()[-lines:]:
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            out.append(str(entry.get("message", "")) if isinstance(entry, dict) else str(entry))
        return out

    async def follow_logs(self, app: str, machine_id: str, limit: int
                          ) -> AsyncIterator[LogLine]:
        """The machine's last ``limit`` log lines, then each new one as it is written, until
        the server ends the stream; none if the cluster serves no logs. A line that cannot
        be read is skipped."""
        from bodega.wire.public.logs import LogLine

        call = replace(self.outgoing("GET", f"/v1/apps/{app}/logs", timeout=None, params={
            "machine": machine_id, "follow": "true", "limit": str(limit)}),
            connect_timeout=LOG_CONNECT_TIMEOUT)
        try:
            async with self.transport.stream(call) as answer:
                if answer.status != 200:
                    return
                async for raw in lines(answer.chunks):
                    if raw.strip():
                        with contextlib.suppress(ValidationError):
                            yield LogLine.model_validate_json(raw)
        except NotConnected as exc:
            raise Unreachable(f"{self.what} at {self.base_url} unreachable ({exc.reason})",
                              url=self.base_url, reason=exc.reason) from exc
        except NoAnswer as exc:
            raise Unavailable(f"{self.what} at {self.base_url}: {exc}") from exc

    # -- platform and cluster -------------------------------------------------------------
    async def placements(self, body: PlacementsRequest) -> Placements:
        from bodega.wire.public.platform import Placements

        return await self.answer(Placements, "POST", "/v1/platform/placements",
                                 encoded=body_of(body))

    async def regions(self, **params: Any) -> Regions:
        from bodega.wire.public.platform import Regions

        return await self.answer(Regions, "GET", "/v1/platform/regions",
                                 params=params or None)

    async def cluster_info(self) -> ClusterInfo:
        """What the cluster tells its clients: where its image registry is."""
        from bodega.wire.public.cluster_info import ClusterInfo  # only for who asks

        return await self.answer(ClusterInfo, "GET", "/v1/cluster")

    async def members(self) -> list[Member]:
        from bodega.wire.public.platform import Member

        return await self.answers(Member, "GET", "/v1/cluster/members")

    async def workers(self) -> list[WorkerStatus]:
        from bodega.wire.public.platform import WorkerStatus

        return await self.answers(WorkerStatus, "GET", "/v1/cluster/workers")

    async def hosts(self) -> list[WorkerStatus]:
        """Every worker with its host (``WorkerStatus.host``) and drain cordon."""
        from bodega.wire.public.platform import WorkerStatus

        return await self.answers(WorkerStatus, "GET", "/v1/cluster/hosts")

    async def cluster_machines(self) -> list[Machine]:
        """Every machine of the cluster with its app and worker (admin tokens only)."""
        from bodega.model.machine import Machine

        return await self.answers(Machine, "GET", "/v1/cluster/machines")

    async def drain_host(self, name: str, draining: bool = True) -> list[WorkerStatus]:
        """Cordon host ``name``'s workers (or the worker ``name``) for a drain, or lift it."""
        from bodega.wire.public.platform import WorkerStatus

        action = "drain" if draining else "undrain"
        return await self.answers(WorkerStatus, "POST", f"/v1/cluster/hosts/{name}/{action}")
