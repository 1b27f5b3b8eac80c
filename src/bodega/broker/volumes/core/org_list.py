"""``GET /v1/orgs/{org_slug}/volumes``: every volume of an org's apps, oldest change first.

Pure, like ``machines/core/org_list.py``, whose query, order and cursor it shares
(``include_deleted``, ``region``, ``state``, ``summary``, ``updated_after``,
``cursor``, ``limit`` up to 1000): the handler gathers the volumes of the org's apps
the caller may see, and ``page`` filters, orders by ``updated_at`` then id, and cuts
them into the API's ``OrgVolumesResponse``. The cursor names the last volume returned in that order.
``summary`` leaves out the block counters (bodega fills none of them anyway).
"""

from __future__ import annotations

from datetime import datetime

from bodega.broker.machines.core.org_list import OrgMachinesQuery, chosen, encode_cursor
from bodega.model.answer import Answer
from bodega.model.volume import Volume


class OrgVolume(Volume):
    """A volume of an org's list: the API's Volume with its app's name and last change."""

    app_name: str | None = None


class OrgVolumesPage(Answer):
    volumes: list[OrgVolume]
    last_volume_id: str | None = None
    last_updated_at: str | None = None
    next_cursor: str | None = None  # present while more volumes remain


def stamp(volume: Volume) -> float:
    """``updated_at`` (else ``created_at``) as seconds; none, or a bad one, is the oldest."""
    when = volume.updated_at or volume.created_at
    try:
        return datetime.fromisoformat(when.replace("Z", "+00:00")).timestamp() if when else 0.0
    except ValueError:
        return 0.0


def org_volume(volume: Volume, summary: bool) -> OrgVolume:
    fields = volume.public().model_dump(exclude_none=True)
    if summary:
        for name in ("block_size", "blocks", "blocks_avail", "blocks_free", "bytes_total",
                     "bytes_used"):
            fields.pop(name, None)
    return OrgVolume(**fields, app_name=volume.app,
                     updated_at=volume.updated_at or volume.created_at or None)


def page(volumes: list[Volume], query: OrgMachinesQuery) -> OrgVolumesPage:
    """The OrgVolumesResponse for ``volumes`` (every volume of the org's apps)."""
    picked, more = chosen(volumes, query, stamp)
    last = picked[-1] if picked else None
    return OrgVolumesPage(
        volumes=[org_volume(v, query.summary) for v in picked],
        last_volume_id=last.id if last else None,
        last_updated_at=(last.updated_at or last.created_at or None) if last else None,
        next_cursor=encode_cursor(stamp(last), last.id) if last and more else None)
