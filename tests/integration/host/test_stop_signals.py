"""A daemon started with SIGINT ignored (``cmd &`` in a script) still starts programs that
SIGINT stops, and one started by ``nohup`` (SIGHUP ignored) still ignores SIGHUP itself
while what it starts does not: the ignore is not handed down."""

from __future__ import annotations

import signal
import subprocess
import sys

PROBE = """
import subprocess, sys
if sys.argv[1] == "heed":
    from bodega.runtime.lifecycle import heed_stop_signals
    heed_stop_signals()
    import os, signal
    os.kill(os.getpid(), signal.SIGHUP)  # still shrugged off by the daemon itself
status = subprocess.run(["cat", "/proc/self/status"], capture_output=True, text=True).stdout
print(next(line for line in status.splitlines() if line.startswith("SigIgn:")).split()[1])
"""


def ignored_by_a_child(mode: str) -> set[signal.Signals]:
    """The signals a program started by a process that began with SIGINT, SIGQUIT and
    SIGHUP ignored has ignored, with or without ``heed_stop_signals`` in that process."""
    def ignore() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGQUIT, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)

    out = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True,
                         check=True, preexec_fn=ignore).stdout
    mask = int(out.strip(), 16)
    return {sig for sig in (signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGHUP)
            if mask & (1 << (sig - 1))}


def test_the_ignore_a_daemon_inherited_does_not_reach_what_it_starts() -> None:
    assert ignored_by_a_child("plain") == {signal.SIGINT, signal.SIGQUIT,  # the trap itself
                                           signal.SIGHUP}
    assert ignored_by_a_child("heed") == set()
