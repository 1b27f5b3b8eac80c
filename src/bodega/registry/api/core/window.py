"""The changes a subscription keeps, and whether a client can resume from the one it saw.

A subscription numbers its changes 1, 2, 3, ... and keeps the last
``kept_changes`` of them (``limits.py``); older ones are trimmed. A client that
saw change N resumes with every change after it: possible while N+1 is still
kept (or N is the last), refused as gone once N+1 was trimmed (it must
subscribe again and start from the whole result), and refused as a mistake when
N is beyond the last change made.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


@dataclass(frozen=True)
class Kept:
    trimmed: int  # changes up to this one are no longer kept (0: none trimmed)
    last: int  # the last change made (0: none yet)

    def after(self, appended: int, keep: int) -> Kept:
        """The window once ``appended`` more changes are made and at most ``keep`` kept."""
        last = self.last + appended
        return Kept(max(self.trimmed, last - keep), last)


class Resume(StrEnum):
    REPLAY = "replay"  # every change after N is kept: send them, then live ones
    GONE = "gone"  # some change after N was trimmed
    AHEAD = "ahead"  # N was never made


def resume(seen: int, kept: Kept) -> Resume:
    if seen > kept.last:
        return Resume.AHEAD
    if seen < kept.trimmed:
        return Resume.GONE
    return Resume.REPLAY


def refusal(seen: int, kept: Kept) -> str:
    """Why a resume from ``seen`` is refused, in a line a person reads."""
    if seen > kept.last:
        return (f"invalid_argument: from={seen} is beyond this subscription's last change "
                f"({kept.last})")
    return (f"change {seen + 1} is no longer kept (the log starts after change "
            f"{kept.trimmed}): subscribe again for the whole result")
