"""Builders for replication tests: rows, docs, an in-memory replica on a settable clock."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from bodega.registry.replication.core.hlc import Stamp
from bodega.registry.replication.core.rows import Row
from bodega.registry.replication.metrics import ReplicationMetrics
from bodega.registry.replication.replica import Replica
from bodega.registry.replication.view import View

EPOCH = 1_700_000_000.0


class Wall:
    """A wall clock tests move by hand."""

    def __init__(self, now: float = EPOCH) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def worker_doc(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "region": "ams", "url": f"http://{name}", "cordoned": False, **extra}


def machine_doc(machine_id: str, worker: str, state: str = "started",
                **extra: Any) -> dict[str, Any]:
    return {"id": machine_id, "app": "web", "name": f"m-{machine_id}", "region": "ams",
            "worker": worker, "state": state, **extra}


def app_doc(name: str, org: str = "personal") -> dict[str, Any]:
    return {"name": name, "org_slug": org}


def replica(name: str, wall: Wall | None = None, *, ttl: float = 3600.0,
            metrics: ReplicationMetrics | None = None) -> Replica:
    return Replica(name, View(":memory:"), wall=wall or Wall(), tombstone_ttl=ttl,
                   on_reject=metrics.reject if metrics else None)


def metrics() -> ReplicationMetrics:
    return ReplicationMetrics(CollectorRegistry())


def rejected(m: ReplicationMetrics, table: str, reason: str) -> float:
    return m.registry.get_sample_value(
        "bodega_registry_rows_rejected_total", {"table": table, "reason": reason}) or 0.0


def row(table: str, key: str, doc: dict[str, Any] | None, owner: str, version: int,
        wall_ms: int = 1, logical: int = 0) -> Row:
    return Row(table, key, doc, owner, version, Stamp(wall_ms, logical, owner))


# ── Hypothesis strategies: versions of the same few rows, written by a few nodes ──

NODES = ("a", "b", "c")


@st.composite
def owned_rows(draw: st.DrawFn, key: str = "w") -> Row:
    """Versions of machine ``key`` from its owner (or, rarely, a confused other node)."""
    owner = draw(st.sampled_from(NODES))
    doc = draw(st.none() | st.builds(
        lambda state, note: machine_doc(key, owner, state, note=note),
        st.sampled_from(["created", "started", "stopped"]), st.integers(0, 3)))
    return row("machines", key, doc, owner, draw(st.integers(1, 6)),
               draw(st.integers(0, 4)), draw(st.integers(0, 2)))


@st.composite
def shared_rows(draw: st.DrawFn, key: str = "app") -> Row:
    owner = draw(st.sampled_from(NODES))
    doc = draw(st.none() | st.builds(lambda org: app_doc(key, org), st.sampled_from("xyz")))
    return row("apps", key, doc, owner, draw(st.integers(1, 6)), draw(st.integers(0, 4)),
               draw(st.integers(0, 2)))
