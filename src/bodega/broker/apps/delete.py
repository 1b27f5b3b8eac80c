"""Deleting an app: destroy its machines (leases or not), then its volumes, tokens, IP
assignments and row.

The Machines API answers 202 and destroys the app's machines, leased ones
too: a lease guards a machine against other clients' changes, not against
its app going away. So the broker asks each machine's worker to destroy it
with ``force`` (stop it first) and ``lease_override`` (an internal flag only
this path sends; a client's query parameters never reach it). Whatever goes
wrong is the client's to retry, so it is answered as 4xx or 503, never 500,
and the app row stays until everything under it is gone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from bodega.broker.apps.ip_assignments import IpAssignments
from bodega.broker.apps.releases import Releases
from bodega.broker.auth.tokens import Tokens
from bodega.broker.certificates import store as certificates
from bodega.broker.machines.service import Machines
from bodega.broker.secrets import keys as secret_keys
from bodega.broker.secrets import store as secrets
from bodega.broker.view.apps import Apps
from bodega.broker.view.core.machine_index import INACTIVE
from bodega.broker.volumes.service import Volumes
from bodega.model.errors import BodegaError, NotFound, PreconditionFailed, Unavailable
from bodega.model.rows import AutoscaleRow, AutoscaleRunRow

DESTROY_PARAMS = {"force": "true", "lease_override": "true"}
VOLUME_DETACH_TRIES = 100  # machines detach their volume as their destroy completes
VOLUME_DETACH_PAUSE = 0.1


def delete_failure(what: str, results: Sequence[object]) -> BodegaError | None:
    """The error to answer for an app delete whose deletes of ``what`` gave ``results``.

    A machine already gone is not a failure. A worker's 4xx keeps its code (the
    client can act on it); anything else (no answer, a worker's 5xx, an
    unexpected exception) is a 503: the delete can simply be retried.
    """
    for result in results:
        if not isinstance(result, BaseException) or isinstance(result, NotFound):
            continue
        message = f"could not delete {what}: {result}; retry the delete"
        if isinstance(result, BodegaError) and 400 <= result.http_status < 500:
            error = BodegaError(message, status=result.status, details=result.details)
            error.http_status = result.http_status
            return error
        return Unavailable(message)
    return None


class AppDelete:
    def __init__(self, apps: Apps, machines: Machines, volumes: Volumes, tokens: Tokens,
                 ips: IpAssignments) -> None:
        self.apps = apps
        self.ips = ips
        self.machines = machines
        self.volumes = volumes
        self.tokens = tokens

    async def delete(self, app: str) -> None:
        self.apps.require(app)
        # The autoscaler first: no evaluation starts machines its delete is destroying.
        for table in (AutoscaleRow.TABLE, AutoscaleRunRow.TABLE):
            if self.apps.catalog.get(table, app) is not None:
                self.apps.catalog.delete_shared(table, app)
        live = [m.id for m in self.machines.app_machines(app, destroyed=False)
                if m.state not in INACTIVE]
        results = await asyncio.gather(
            *(self.machines.relay(app, machine_id, "DELETE", params=DESTROY_PARAMS)
              for machine_id in live), return_exceptions=True)
        failure = delete_failure(f"every machine of {app}", results)
        if failure is not None:
            raise failure
        for volume in self.volumes.app_volumes(app):
            if volume.state != "destroyed":
                await self._delete_volume_when_free(app, volume.id)
        self.tokens.revoke_app_tokens(app)
        self.ips.remove_all(app)
        secrets.remove_all(self.apps.catalog, app)
        secret_keys.remove_all(self.apps.catalog, app)
        certificates.remove_all(self.apps.catalog, app)
        Releases(self.apps.catalog, self.apps).remove_all(app)
        self.apps.delete(app)

    async def _delete_volume_when_free(self, app: str, volume_id: str) -> None:
        for _ in range(VOLUME_DETACH_TRIES):
            try:
                await self.volumes.call(app, volume_id, "DELETE")
                return
            except NotFound:
                return
            except PreconditionFailed:
                pass  # still attached to a machine whose destroy is finishing
            except BodegaError as exc:
                raise delete_failure(f"volume {volume_id} of {app}", [exc]) or exc from None
            await asyncio.sleep(VOLUME_DETACH_PAUSE)
        raise Unavailable(f"volume {volume_id} of {app} is still attached to a machine that is "
                          "being destroyed; retry the delete")
