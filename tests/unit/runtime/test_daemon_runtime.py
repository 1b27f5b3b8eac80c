"""How a daemon's interpreter runs (``runtime/lifecycle.py``: ``daemon_runtime``), seen in an
interpreter of its own, so this process keeps its own loop and collector."""

from __future__ import annotations

import json
import subprocess
import sys

from bodega.runtime.lifecycle import YOUNG_COLLECTED_AFTER

PROBE = ("import asyncio, gc, json; from bodega.runtime.lifecycle import daemon_runtime; "
         "before = gc.get_threshold(); daemon_runtime(); "
         "print(json.dumps([before, gc.get_threshold(), "
         "type(asyncio.get_event_loop_policy()).__module__]))")


def test_a_daemon_collects_its_youngest_objects_less_often_and_runs_on_uvloop() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                          check=True, timeout=60)
    before, after, policy = json.loads(done.stdout)
    assert after == [YOUNG_COLLECTED_AFTER, *before[1:]]  # the older generations as they were
    assert after[0] > before[0]
    assert policy.startswith("uvloop")
