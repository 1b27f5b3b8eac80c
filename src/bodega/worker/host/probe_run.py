"""One bounded run of an isolation's probe (a sandbox, a VM): what it printed and how it
ended, its whole process group killed when it outlives its time."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess


def probe_run(argv: list[str], timeout: float) -> tuple[int | None, str]:
    """(exit code, or None when it had to be killed; its output, stderr included)."""
    process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, start_new_session=True)
    try:
        output, _ = process.communicate(timeout=timeout)
        returncode: int | None = process.returncode
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        returncode = None
    return returncode, output.decode(errors="replace")
