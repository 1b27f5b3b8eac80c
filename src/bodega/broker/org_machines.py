"""``GET /v1/orgs/{org_slug}/machines``: every machine of an org's apps, oldest change first.

Pure: the handler gathers the machine docs of the org's apps (the view with
this broker's own writes laid over) and ``page`` filters, orders and cuts
them. The order is by ``updated_at`` then id, and the cursor names the last
machine returned in that order, so paging never repeats or skips a machine
that did not change meanwhile (one that did moves to the end, where the
Machines API's "point in time" caveat applies too).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict

from bodega.broker.freshness import stamp
from bodega.model.errors import BadRequest

MAX_LIMIT = 1000
TRUE = ("1", "true", "yes", "on", "")


class OrgMachinesQuery(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    include_deleted: bool = False
    regions: frozenset[str] = frozenset()
    states: frozenset[str] = frozenset()
    summary: bool = False
    updated_after: float | None = None
    after: tuple[float, str] | None = None  # the cursor: (stamp, id) of the last one sent
    limit: int = MAX_LIMIT


def _words(values: Sequence[str]) -> frozenset[str]:
    return frozenset(s.strip() for v in values for s in v.split(",") if s.strip())


def parse_query(params: Mapping[str, Sequence[str]]) -> OrgMachinesQuery:
    """The query from its parameters (each name to its values); bad ones are a 400."""
    def one(name: str) -> str | None:
        values = params.get(name) or ()
        return values[-1] if values else None

    def flag(name: str) -> bool:
        value = one(name)
        return value is not None and value.lower() in TRUE

    limit = MAX_LIMIT
    if (raw := one("limit")) not in (None, ""):
        try:
            limit = int(str(raw))
        except ValueError:
            raise BadRequest("invalid_argument: limit must be an integer") from None
        if limit < 1:
            raise BadRequest("invalid_argument: limit must be at least 1")
    updated_after = None
    if raw_after := one("updated_after"):
        try:
            updated_after = datetime.fromisoformat(raw_after.replace("Z", "+00:00")).timestamp()
        except ValueError:
            raise BadRequest(f"invalid_argument: updated_after {raw_after!r} is not an RFC 3339 "
                             "timestamp") from None
    cursor = one("cursor")
    return OrgMachinesQuery(
        include_deleted=flag("include_deleted"), regions=_words(params.get("region") or ()),
        states=_words(params.get("state") or ()), summary=flag("summary"),
        updated_after=updated_after, after=decode_cursor(cursor) if cursor else None,
        limit=min(limit, MAX_LIMIT))


def encode_cursor(doc: dict[str, Any]) -> str:
    raw = json.dumps([stamp(doc), str(doc["id"])]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[float, str]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        at, machine_id = json.loads(raw)
        return float(at), str(machine_id)
    except (binascii.Error, ValueError, TypeError):
        raise BadRequest("invalid_argument: cursor is not one this API gave out") from None


def org_machine(doc: dict[str, Any], summary: bool) -> dict[str, Any]:
    """The OrgMachine object: the machine's overview, with its app's name."""
    out = {"id": doc["id"], "name": doc.get("name"), "app_name": doc.get("app"),
           "state": doc.get("state"), "region": doc.get("region"),
           "instance_id": doc.get("instance_id"), "version": doc.get("version"),
           "private_ip": doc.get("private_ip"), "created_at": doc.get("created_at"),
           "updated_at": doc.get("updated_at")}
    if not summary:
        config = doc.get("config") or {}
        out["config"] = {k: config[k] for k in ("image", "guest", "metadata") if k in config}
    return {k: v for k, v in out.items() if v is not None}


def page(docs: list[dict[str, Any]], query: OrgMachinesQuery) -> dict[str, Any]:
    """The OrgMachinesResponse for ``docs`` (every machine of the org's apps)."""
    def wanted(doc: dict[str, Any]) -> bool:
        state = doc.get("state")
        return ((query.include_deleted or state != "destroyed")
                and (not query.regions or doc.get("region") in query.regions)
                and (not query.states or state in query.states)
                and (query.updated_after is None or stamp(doc) > query.updated_after))

    ordered = sorted((d for d in docs if wanted(d)), key=lambda d: (stamp(d), str(d["id"])))
    if query.after is not None:
        after = query.after
        ordered = [d for d in ordered if (stamp(d), str(d["id"])) > after]
    chosen = ordered[:query.limit]
    body: dict[str, Any] = {"machines": [org_machine(d, query.summary) for d in chosen],
                            "error_regions": []}
    if chosen:
        body["last_machine_id"] = str(chosen[-1]["id"])
        body["last_updated_at"] = chosen[-1].get("updated_at")
    if len(ordered) > len(chosen):
        body["next_cursor"] = encode_cursor(chosen[-1])
    return body
