"""The example apps end quietly when bodega stops them (SIGINT by default, or SIGTERM):
one line, exit code 0, no traceback in the machine's log."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.ports_kit import free_port as free_port

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"




def until_line(process: subprocess.Popen[str], text: str) -> None:
    assert process.stdout is not None
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if text in line:
            return
    raise AssertionError(f"no {text!r} from {process.args!r}")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize(("script", "ready"), [("hello/app.py", "listening on"),
                                               ("worker/worker.py", "tick 1"),
                                               ("echo/app.py", "listening on")])
def test_an_example_stopped_by_bodega_says_one_line_and_no_traceback(
        script: str, ready: str, sig: signal.Signals) -> None:
    env = {**os.environ, "PORT": str(free_port()), "EVERY": "0.05"}
    process = subprocess.Popen([sys.executable, "-u", str(EXAMPLES / script)], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        until_line(process, ready)
        process.send_signal(sig)
        rest, _ = process.communicate(timeout=20)
    finally:
        process.kill()
    assert process.returncode == 0, rest
    assert "Traceback" not in rest
    assert "stopping" in rest
