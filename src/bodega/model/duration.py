"""Durations as the Fly API writes them: Go strings ("1m30s", "500ms") or integer nanoseconds."""

from __future__ import annotations

import re

_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")


def parse_duration(value: str | int | float | None, default: float) -> float:
    """Seconds from a Go duration string, or from nanoseconds when given a number."""
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        raise ValueError(f"not a duration: {value!r}")
    if isinstance(value, int | float):
        if value < 0:
            raise ValueError(f"negative duration: {value!r}")
        return float(value) / 1e9
    text = value.strip()
    if text.isdigit():
        return int(text) / 1e9
    pos = 0
    total = 0.0
    for match in _PART.finditer(text):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    if pos != len(text) or pos == 0:
        raise ValueError(f"not a duration: {value!r} (use forms like '10s', '1m30s', '500ms')")
    return total


def format_duration(seconds: float) -> str:
    if seconds == int(seconds):
        return f"{int(seconds)}s"
    return f"{round(seconds * 1000)}ms"
