"""Commands timed from fork to exit, run after run in turn, and their medians beside a
baseline's: what ``bench.machines.user_switch`` and ``bench.machines.start_chain`` print."""

from __future__ import annotations

import os
import statistics
import subprocess
import time

ENV = {"PATH": os.defpath}  # as a machine's wrapper runs them: PATH alone


def timed(argv: list[str], stdin: bytes | None = None) -> float:
    """Seconds from fork to exit of ``argv``, from ``/``, given ``stdin``."""
    began = time.perf_counter()
    subprocess.run(argv, input=stdin, env=ENV, cwd="/", check=True)
    return time.perf_counter() - began


def report(heading: str, times: dict[str, list[float]], baseline: str) -> None:
    """Each command's median, and how much over ``baseline``'s, under ``heading``."""
    bare = statistics.median(times[baseline])
    width = max(len(name) for name in times)
    print(f"{heading}, {len(times[baseline])} runs interleaved, median "
          f"(load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}):")
    for name, samples in times.items():
        median = statistics.median(samples)
        print(f"  {name:<{width}} {median * 1000:6.3f} ms  "
              f"{(median - bare) * 1000:+6.3f} ms over {baseline}")
