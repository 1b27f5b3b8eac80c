"""The campaign's host whose wall clock is off: how it is faked, and how a fault moves it.

Host ``SKEWED`` runs ``SKEW`` seconds ahead all run long; a ``clock-step`` fault adds one
of ``STEPS`` for a while (``Peers.apply``), then puts it back (``Peers.heal``).
"""

from __future__ import annotations

import os
from pathlib import Path

SKEWED = 3  # the host whose wall clock runs ahead, all run long
SKEW = 30  # seconds ahead
STEPS = (120, -90)  # what a clock-step fault adds to it: ahead, or behind true time


def skewed_clock(rc: Path) -> dict[str, str]:
    """The environment that sets a host's wall clock ``SKEW`` seconds ahead (libfaketime,
    from Debian's faketime), read from the file ``rc`` about once a second, so that a
    ``clock-step`` fault can move it while the host runs. time() and the like are skewed,
    in Python and in C (SQLite, OpenSSL) alike; the monotonic clock, which bodega's timers
    read, stays true, as it does on a host whose NTP is off or steps it. ``clock_shim``
    keeps Python's sleeps off a libfaketime bug that would fail them."""
    found = sorted(Path("/usr/lib").glob("*/faketime/libfaketimeMT.so.1"))
    if not found:
        raise RuntimeError("libfaketime is missing: apt-get install faketime "
                           "(scripts/host-packages does, as root)")
    set_skew(rc, SKEW)
    shim = str(Path(__file__).parent / "clock_shim")
    path = os.pathsep.join(p for p in (shim, os.environ.get("PYTHONPATH")) if p)
    return {"LD_PRELOAD": str(found[0]), "FAKETIME_TIMESTAMP_FILE": str(rc),
            "FAKETIME_CACHE_DURATION": "1", "FAKETIME_DONT_FAKE_MONOTONIC": "1",
            "PYTHONPATH": path}


def set_skew(rc: Path, seconds: int) -> None:
    """The skewed host's wall clock ``seconds`` ahead of true time from now on (behind if
    negative), written whole so a reader never sees half of it."""
    part = rc.with_suffix(".part")
    part.write_text(f"{seconds:+d}s\n")
    part.replace(rc)
