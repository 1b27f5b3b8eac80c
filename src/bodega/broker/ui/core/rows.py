"""The view's rows as the dashboard reads them: a worker, a machine, each a frozen value.

The registry holds rows as JSON documents written by the workers that own them
(``worker/publish.py``). The dashboard reads only what it draws, parsed once
here: a row it cannot read is left out (and the rest still drawn), never
half-drawn. Pure: no I/O, so the screens built on these are tested by feeding rows.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bodega.broker.view.core.host_status import OK, check_status
from bodega.model.capacity import Ask, Totals, Usage
from bodega.model.rows import WorkerRow
from bodega.model.states import RELEASES_COMPUTE

# Guest defaults of the Machines API (``model.machine_config.Guest``): a config without a
# guest gets one shared cpu and 256 MB.
DEFAULT_CPUS = 1
DEFAULT_MEMORY_MB = 256
_DIGITS = re.compile(r"(\d+)")
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def natural(name: str) -> tuple[tuple[int, int | str], ...]:
    """Sorts ``ams-2`` before ``ams-10``."""
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in _DIGITS.split(name) if p)


def dom_key(name: str) -> str:
    """A name made safe for an element id and an event name (workers are DNS-like already)."""
    return _UNSAFE.sub("_", name)


@dataclass(frozen=True)
class CheckView:
    name: str
    status: str  # passing, warning, critical
    output: str = ""


@dataclass(frozen=True)
class MachineSlice:
    """One machine as the dashboard draws it: where it is, its state, what it holds."""

    id: str
    name: str
    app: str
    state: str
    region: str
    worker: str
    cpu_kind: str
    cpus: int
    memory_mb: int
    process_group: str
    release: str | None
    checks: tuple[CheckView, ...]
    updated_at: str
    host_status: str = OK  # its worker's, by membership: ok, unreachable or unknown

    @property
    def holds(self) -> bool:
        """Holds cpu and memory on its host: every state but stopped, failed, destroyed."""
        return self.state not in RELEASES_COMPUTE

    @property
    def ask(self) -> Ask:
        return Ask(cpu_kind=self.cpu_kind, cpus=self.cpus, memory_mb=self.memory_mb)

    @property
    def key(self) -> str:
        return dom_key(self.id)


@dataclass(frozen=True)
class WorkerView:
    """A worker's published row, with membership's verdict on it."""

    name: str
    region: str
    status: str  # alive, suspect, dead, left; unknown: membership has not heard of it
    cordoned: bool
    totals: Totals
    used: Usage
    reservations: int
    machines: int
    images: int  # images (digests) its cache holds
    image_disk_gb: int | None  # disk the cache takes; None: the worker does not say
    driver: str
    updated_at: str
    cordon_reason: str = ""  # ``draining`` while a drain moves its machines off

    @property
    def key(self) -> str:
        return dom_key(self.name)

    @property
    def condition(self) -> str:
        """What an operator should see first: dead/suspect/left over draining or cordoned
        over alive."""
        if self.status != "alive":
            return self.status
        if self.cordoned:
            return "draining" if self.cordon_reason == "draining" else "cordoned"
        return "alive"


def _checks(raw: Any, host: str) -> tuple[CheckView, ...]:
    if not isinstance(raw, list):
        return ()
    return tuple(CheckView(str(c.get("name", "")), check_status(str(c.get("status", "")), host),
                           str(c.get("output", ""))[:500])
                 for c in raw if isinstance(c, Mapping))


def machine_slice(doc: Mapping[str, Any], host: str | None = None) -> MachineSlice | None:
    """A ``machines`` row (or a machine the API returned); None if it cannot be read.
    ``host``: its worker's status (``view.host_status``); None takes the doc's."""
    try:
        host = host or str(doc.get("host_status") or OK)
        config = doc.get("config") or doc.get("incomplete_config") or {}
        guest = config.get("guest") or {}
        metadata = config.get("metadata") or {}
        release = metadata.get("fly_release_version")
        return MachineSlice(
            id=str(doc["id"]), name=str(doc.get("name", "")), app=str(doc.get("app", "")),
            state=str(doc.get("state", "")), region=str(doc.get("region", "")),
            worker=str(doc.get("worker", "")),
            cpu_kind=str(guest.get("cpu_kind") or "shared"),
            cpus=int(guest.get("cpus") or DEFAULT_CPUS),
            memory_mb=int(guest.get("memory_mb") or DEFAULT_MEMORY_MB),
            process_group=str(metadata.get("fly_process_group") or "app"),
            release=None if release is None else str(release),
            checks=_checks(doc.get("checks"), host), updated_at=str(doc.get("updated_at", "")),
            host_status=host)
    except (KeyError, TypeError, ValueError, AttributeError):
        return None


def worker_view(row: WorkerRow, status: str | None) -> WorkerView:
    """A ``workers`` row; ``status`` is membership's (None: never heard of)."""
    return WorkerView(
        name=row.name, region=row.region, status=status or "unknown", cordoned=row.cordoned,
        totals=Totals.from_row(row.totals), used=Usage.from_row(row.used),
        reservations=row.reservations, machines=row.machines,
        images=sum(1 for i in row.images or () if i.startswith("sha256:")),
        image_disk_gb=row.image_disk_gb, driver=row.driver, updated_at=row.updated_at or "",
        cordon_reason=(row.cordon_reason or "") if row.cordoned else "")
