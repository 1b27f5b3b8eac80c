"""The Machine object and its events, in the Fly Machines API's shape."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

_IMAGE_RE = re.compile(
    r"^(?:(?P<registry>[a-zA-Z0-9.-]+(?::\d+)?)/)?(?P<repository>[a-z0-9._/-]+?)"
    r"(?::(?P<tag>[\w][\w.-]{0,127}))?(?:@(?P<digest>sha256:[0-9a-f]{64}))?$"
)


def image_ref(image: str) -> dict[str, Any]:
    """Split ``registry/repository:tag@digest`` the way ``image_ref`` reports it."""
    match = _IMAGE_RE.match(image)
    if not match:
        return {"registry": "", "repository": image, "tag": "", "digest": "", "labels": {}}
    registry = match.group("registry") or ""
    repository = match.group("repository")
    if registry and "." not in registry and ":" not in registry and registry != "localhost":
        # "library/alpine" style: the first part was a path segment, not a host.
        repository = f"{registry}/{repository}"
        registry = ""
    return {
        "registry": registry or "docker-hub-mirror.fly.io",
        "repository": repository,
        "tag": match.group("tag") or ("" if match.group("digest") else "latest"),
        "digest": match.group("digest") or "",
        "labels": {},
    }


@dataclass(frozen=True)
class MachineEvent:
    id: str
    type: str
    status: str
    source: str
    timestamp: int  # milliseconds since the epoch
    request: dict[str, Any] | None = None

    def to_wire(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "id": self.id, "type": self.type, "status": self.status,
            "source": self.source, "timestamp": self.timestamp,
        }
        if self.request:
            body["request"] = self.request
        return body


@dataclass(frozen=True)
class ExitStatus:
    """How a machine's main process ended."""

    exit_code: int | None
    signal: int | None = None
    oom_killed: bool = False
    requested_stop: bool = False
    exited_at: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return self.oom_killed or self.signal is not None or (self.exit_code or 0) != 0

    def to_event_request(self) -> dict[str, Any]:
        exit_event: dict[str, Any] = {
            "exit_code": self.exit_code if self.exit_code is not None else -1,
            "oom_killed": self.oom_killed,
            "requested_stop": self.requested_stop,
            "exited_at": _rfc3339(self.exited_at),
        }
        if self.signal is not None:
            exit_event["signal"] = self.signal
        return {"exit_event": exit_event}


def _rfc3339(ts: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ts, UTC).isoformat().replace("+00:00", "Z")


def rfc3339(ts: float) -> str:
    return _rfc3339(ts)
