"""The lease calls a deploy makes, the releases extension and the last log lines.

Thin: each is one request through the typed public client (``MachinesClient``),
which carries a held lease's nonce on the machine calls themselves.
"""

from __future__ import annotations

import json
from typing import Any

import aiohttp

from bodega.wire.machines_client import MachinesClient

LEASE_TTL = 13  # seconds, as flyctl's deploy leases


def _path(app: str, machine_id: str, part: str = "") -> str:
    return f"/v1/apps/{app}/machines/{machine_id}" + (f"/{part}" if part else "")


async def acquire_lease(client: MachinesClient, app: str, machine_id: str,
                        nonce: str | None = None, ttl: int = LEASE_TTL) -> str:
    """A lease's nonce (a refresh when ``nonce`` is given); 409 if someone else holds it."""
    answer = await client.request("POST", _path(app, machine_id, "lease"),
                                  json={"ttl": ttl, "description": "bodega deploy"},
                                  nonce=nonce)
    return str(answer["data"]["nonce"])


async def release_lease(client: MachinesClient, app: str, machine_id: str,
                        nonce: str) -> None:
    await client.request("DELETE", _path(app, machine_id, "lease"), nonce=nonce)


async def set_metadata(client: MachinesClient, app: str, machine_id: str, key: str, value: str,
                       nonce: str | None = None) -> None:
    """One metadata key set in place: the machine is not restarted."""
    await client.request("POST", _path(app, machine_id, f"metadata/{key}"),
                         json={"value": value}, nonce=nonce)


# -- releases (a bodega extension: /v1/apps/{app}/releases) --------------------------------
async def releases(client: MachinesClient, app: str) -> list[dict[str, Any]]:
    return list(await client.request("GET", f"/v1/apps/{app}/releases"))


async def create_release(client: MachinesClient, app: str,
                         body: dict[str, Any]) -> dict[str, Any]:
    return dict(await client.request("POST", f"/v1/apps/{app}/releases", json=body))


async def finish_release(client: MachinesClient, app: str, version: int, status: str,
                         failure: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"status": status}
    if failure:
        body["failure"] = failure
    return dict(await client.request("PATCH", f"/v1/apps/{app}/releases/{version}",
                                     json=body))


async def last_log_lines(client: MachinesClient, app: str, machine_id: str,
                         lines: int = 10) -> list[str]:
    """The machine's last log lines (NDJSON), if the cluster serves logs; none if it does not."""
    try:
        async with client.http.get(
                f"{client.base_url}/v1/apps/{app}/logs", headers=client.headers,
                params={"machine": machine_id, "limit": str(lines)},
                timeout=aiohttp.ClientTimeout(total=10)) as response:
            if response.status != 200:
                return []
            text = await response.text()
    except (aiohttp.ClientError, TimeoutError, OSError):
        return []  # logs help the reader; their absence never changes why a deploy failed
    out = []
    for line in text.splitlines()[-lines:]:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        out.append(str(entry.get("message", "")) if isinstance(entry, dict) else str(entry))
    return out
