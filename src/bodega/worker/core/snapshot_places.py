"""Where a snapshot's copies go, which holder a restore fetches from, and which volumes
are due a scheduled snapshot: pure decisions over the view as the worker reads it.

A place is a worker as the view shows it. Its *host* is the host part of its URL:
workers of one ``bodega up`` share a host, workers joined from other machines do
not. A copy protects against the loss of its origin's host only when it is on
another host, so those come first; on a one-host cluster another worker of the same
host is the next best place (it survives the origin worker's data dir, not the disk).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit


@dataclass(frozen=True)
class Place:
    name: str
    url: str
    region: str
    alive: bool = True
    cordoned: bool = False

    @property
    def host(self) -> str:
        return urlsplit(self.url).hostname or self.url


@dataclass(frozen=True)
class Choice:
    name: str
    why: str  # why it ranks where it does


def copy_targets(own: Place, places: Iterable[Place], held: Iterable[str] = (),
                 want: int = 1) -> list[Choice]:
    """The ``want`` places a copy of a snapshot taken at ``own`` should go to (those in
    ``held`` have one already): alive ones only, a cordoned one (being drained) after
    the others, another host before this one, this region before others, then by name
    (so every try picks the same)."""
    have = set(held)
    ranked: list[tuple[tuple[int, int, int, str], Choice]] = []
    for p in places:
        if p.name == own.name or p.name in have or not p.alive:
            continue
        other_host = p.host != own.host
        same_region = p.region == own.region
        why = ("another host" if other_host else "another worker of this host") + (
            ", same region" if same_region else f", region {p.region}") + (
            ", cordoned" if p.cordoned else "")
        ranked.append(((int(p.cordoned), 0 if other_host else 1, 0 if same_region else 1,
                        p.name), Choice(p.name, why)))
    ranked.sort(key=lambda item: item[0])
    return [choice for _, choice in ranked[:max(0, want - len(have))]]


def fetch_order(holders: Sequence[str], places: Iterable[Place], own: Place) -> list[str]:
    """The holders of a snapshot to fetch it from, in order: alive ones only (a holder
    the view does not know is tried last: the view may be behind), this host first,
    then this region, then as given."""
    known = {p.name: p for p in places}
    ranked: list[tuple[tuple[int, int, int], str]] = []
    for index, name in enumerate(dict.fromkeys(holders)):
        if name == own.name:
            continue
        place = known.get(name)
        if place is None:
            ranked.append(((1, 2, index), name))
        elif place.alive:
            ranked.append(((0, (0 if place.host == own.host else 1)
                            + (0 if place.region == own.region else 1), index), name))
    ranked.sort(key=lambda item: item[0])
    return [name for _, name in ranked]


@dataclass(frozen=True)
class Scheduled:
    """A volume as the snapshot schedule sees it."""

    volume_id: str
    enabled: bool  # the volume's auto_backup_enabled (flyctl's --scheduled-snapshots)
    since: float  # when its newest snapshot was taken; never: when it was created


def due(volumes: Iterable[Scheduled], interval: float, now: float) -> list[str]:
    """The volumes whose scheduled snapshot is due: enabled, and none taken for
    ``interval`` seconds (a new volume's first is ``interval`` after its creation)."""
    return [v.volume_id for v in volumes if v.enabled and now - v.since >= interval]
