"""Machine logs on the wire: one JSON object per line (NDJSON), a bodega extension.

Workers serve one machine's log (``GET /v1/machines/{id}/logs``), brokers a
whole app's (``GET /v1/apps/{app}/logs``, fanned in from every worker holding
one of its machines); both take ``follow``, ``since`` and ``limit``. The pure
helpers here cut bytes into lines and choose which lines an answer holds.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from datetime import datetime

from pydantic import BaseModel, ConfigDict

from bodega.model.duration import parse_duration
from bodega.model.errors import BadRequest

MEDIA_TYPE = "application/x-ndjson"
DEFAULT_LIMIT = 100
MAX_LIMIT = 10_000
MAX_LINE = 16 * 1024  # a longer line is cut: a log line is not a file transfer


class LogLine(BaseModel):
    model_config = ConfigDict(extra="forbid")
    timestamp: str  # RFC 3339, UTC
    app: str
    machine_id: str
    region: str
    instance_id: str
    stream: str  # stdout (a machine's stdout and stderr share one log)
    message: str

    def ndjson(self) -> bytes:
        return self.model_dump_json().encode() + b"\n"

    def epoch(self) -> float:
        return epoch(self.timestamp)


def epoch(timestamp: str) -> float:
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


def parse_since(value: str | None, now: float | None = None) -> float | None:
    """``since``: an RFC 3339 time, or a duration back from now ("5m", "1h30m")."""
    if value is None or value == "":
        return None
    try:
        return epoch(value)
    except ValueError:
        pass
    try:
        return (time.time() if now is None else now) - parse_duration(value, 0.0)
    except ValueError:
        raise BadRequest(f"invalid_argument: since {value[:40]!r}: an RFC 3339 time or a "
                         "duration such as '5m'") from None


def parse_limit(value: str | None) -> int:
    if value is None or value == "":
        return DEFAULT_LIMIT
    if not value.isdigit() or not 1 <= int(value) <= MAX_LIMIT:
        raise BadRequest(f"invalid_argument: limit must be an integer from 1 to {MAX_LIMIT}")
    return int(value)


def split_lines(pending: bytes, data: bytes) -> tuple[list[str], bytes]:
    """Complete lines of ``pending + data``, and the unfinished tail to keep for later."""
    buffer = pending + data
    *lines, rest = buffer.split(b"\n")
    if len(rest) > MAX_LINE:  # a line without an end yet, past the limit: emit what there is
        lines.append(rest)
        rest = b""
    return [line[:MAX_LINE].decode("utf-8", "replace").rstrip("\r") for line in lines], rest


def select(lines: Iterable[LogLine], since: float | None, limit: int) -> list[LogLine]:
    """The newest ``limit`` lines at or after ``since``, oldest first (a stable sort by time)."""
    chosen = [line for line in lines if since is None or line.epoch() >= since]
    chosen.sort(key=LogLine.epoch)
    return chosen[-limit:]
