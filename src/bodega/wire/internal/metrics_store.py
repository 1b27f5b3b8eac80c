"""What a host's metrics store and its broker share: ``endpoint.json`` and the targets.

The store (``cluster/metrics_store.py``) writes ``endpoint.json`` in its 0700 data dir
once VictoriaMetrics answers: its loopback address and the password made at that
start. The host's broker reads it at each query (``broker/prometheus/store.py``). The
broker serves the store its targets in Prometheus' HTTP service discovery shape
(``TargetGroup``: ``[{"targets": [...], "labels": {...}}]``).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict

ENDPOINT = "endpoint.json"
USER = "bodega"
TARGETS_PATH = "/v1/metrics/targets"  # on the broker's internal listener (mutual TLS)
TARGET_KINDS = ("cluster", "apps")  # the daemons (mutual TLS) and apps' [metrics] (plain)


class Endpoint(BaseModel):
    """``endpoint.json``: where the host's store answers and the password it takes."""

    model_config = ConfigDict(extra="forbid")

    url: str
    username: str = USER
    password: str


class TargetGroup(BaseModel):
    """One entry of a Prometheus HTTP service discovery answer."""

    model_config = ConfigDict(extra="forbid")

    targets: list[str]
    labels: dict[str, str] = {}


def read_endpoint(data_dir: Path) -> Endpoint | None:
    """The store's ``endpoint.json``; None when it has not written one (or not whole)."""
    try:
        return Endpoint.model_validate_json((data_dir / ENDPOINT).read_bytes())
    except (OSError, ValueError):
        return None
