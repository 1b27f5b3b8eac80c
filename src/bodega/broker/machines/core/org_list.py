"""``GET /v1/orgs/{org_slug}/machines``: every machine of an org's apps, oldest change first.

Pure: the handler gathers the machines of the org's apps (the view with this
broker's own writes laid over) and ``page`` filters, orders and cuts them into
the API's ``OrgMachinesResponse``. The order is by ``updated_at`` then id, and
the cursor names the last machine returned in that order, so paging never
repeats or skips a machine that did not change meanwhile (one that did moves to
the end, where the Machines API's "point in time" caveat applies too).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Protocol, TypeVar

from pydantic import BaseModel, ConfigDict

from bodega.broker.view.core.freshness import stamp
from bodega.model.answer import Answer
from bodega.model.errors import BadRequest
from bodega.model.machine import Machine
from bodega.model.machine_config import Guest

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


class MachineOverviewConfig(Answer):
    image: str | None = None
    guest: Guest | None = None
    metadata: dict[str, str] | None = None


class OrgMachine(Answer):
    """A machine of an org's list: its overview, with its app's name."""

    id: str
    name: str | None = None
    app_name: str | None = None
    state: str | None = None
    region: str | None = None
    instance_id: str | None = None
    version: str | None = None
    private_ip: str | None = None
    created_at: str | None = None
    updated_at: str | None = None
    config: MachineOverviewConfig | None = None


class OrgMachinesPage(Answer):
    machines: list[OrgMachine]
    error_regions: list[str] = []
    last_machine_id: str | None = None
    last_updated_at: str | None = None
    next_cursor: str | None = None  # present while more machines remain


class Listed(Protocol):
    """What an org's list orders and filters: a machine or a volume."""

    @property
    def id(self) -> str: ...

    @property
    def state(self) -> str: ...

    @property
    def region(self) -> str: ...


T = TypeVar("T", bound=Listed)


def chosen(items: Iterable[T], query: OrgMachinesQuery,
           stamp_of: Callable[[T], float]) -> tuple[list[T], bool]:
    """The page's items, oldest change first (then by id), after the cursor, at most the
    query's limit; and whether more remain. Machines' and volumes' lists share it."""
    def wanted(item: T) -> bool:
        return ((query.include_deleted or item.state != "destroyed")
                and (not query.regions or item.region in query.regions)
                and (not query.states or item.state in query.states)
                and (query.updated_after is None or stamp_of(item) > query.updated_after))

    ordered = sorted((i for i in items if wanted(i)), key=lambda i: (stamp_of(i), i.id))
    if query.after is not None:
        after = query.after
        ordered = [i for i in ordered if (stamp_of(i), i.id) > after]
    picked = ordered[:query.limit]
    return picked, len(ordered) > len(picked)


def encode_cursor(at: float, item_id: str) -> str:
    """The cursor naming the last item of a page: its change time and id."""
    raw = json.dumps([at, item_id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[float, str]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        at, machine_id = json.loads(raw)
        return float(at), str(machine_id)
    except (binascii.Error, ValueError, TypeError):
        raise BadRequest("invalid_argument: cursor is not one this API gave out") from None


def org_machine(machine: Machine, summary: bool) -> OrgMachine:
    """The OrgMachine object: the machine's overview, with its app's name."""
    config = None
    if not summary and machine.config is not None:
        config = MachineOverviewConfig(image=machine.config.image, guest=machine.config.guest,
                                       metadata=machine.config.metadata)
    return OrgMachine(id=machine.id, name=machine.name, app_name=machine.app,
                      state=machine.state, region=machine.region,
                      instance_id=machine.instance_id, version=machine.version,
                      private_ip=machine.private_ip, created_at=machine.created_at,
                      updated_at=machine.updated_at, config=config)


def page(machines: list[Machine], query: OrgMachinesQuery) -> OrgMachinesPage:
    """The OrgMachinesResponse for ``machines`` (every machine of the org's apps)."""
    picked, more = chosen(machines, query, stamp)
    last = picked[-1] if picked else None
    return OrgMachinesPage(
        machines=[org_machine(m, query.summary) for m in picked],
        last_machine_id=last.id if last else None,
        last_updated_at=last.updated_at if last else None,
        next_cursor=encode_cursor(stamp(last), last.id) if last and more else None)
