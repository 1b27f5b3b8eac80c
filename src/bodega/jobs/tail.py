"""The last lines of what a task printed, as a job's status shows them.

Pure: from the bytes of a task's output to at most ``lines`` lines, each decoded (bytes
that are not UTF-8 replaced) and clipped, the last one kept whether or not it ended in
a newline. Only the output's last ``TAIL_BYTES`` are looked at, so a task that printed
megabytes costs its status no more than one that printed a line.
"""

from __future__ import annotations

MAX_LINES = 100  # the most a status asks for
TAIL_BYTES = 64 * 1024  # of the output looked at, from its end
LINE_CHARS = 1000  # a line longer is cut, with an ellipsis


def last_bytes(data: bytes) -> bytes:
    return data[-TAIL_BYTES:]


def tail(data: bytes, lines: int) -> list[str]:
    """The last ``lines`` lines of ``data`` (none for 0)."""
    if lines <= 0 or not data:
        return []
    text = last_bytes(data).decode("utf-8", errors="replace")
    found = text.splitlines()
    if len(data) > TAIL_BYTES and len(found) > 1:
        found = found[1:]  # the first was cut where the look began
    return [line if len(line) <= LINE_CHARS else line[:LINE_CHARS - 1] + "…"
            for line in found[-lines:]]
