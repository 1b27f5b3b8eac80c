"""What `bodega` prints to a pipe (a file, a program) is never wrapped or cut at 80 columns."""

from __future__ import annotations

import subprocess
import sys


def test_lines_to_a_pipe_are_never_wrapped() -> None:
    line = "release " + " ".join(f"word-{n}" for n in range(40))
    done = subprocess.run(
        [sys.executable, "-c", f"from bodega.cli.session import console; console.print({line!r})"],
        capture_output=True, text=True, check=True, timeout=60)
    assert done.stdout.splitlines() == [line]
