"""A background worker for bodega: no services, so its first deploy also gets a standby.

It prints a line every few seconds; stop it and the proxy has nothing to route,
but when its worker host dies bodega starts the standby on another host.
"""

from __future__ import annotations

import os
import signal
import time


def tick(every: float) -> None:
    """Tick until stopped: SIGINT (bodega's default stop signal) or SIGTERM end it quietly."""
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    n = 0
    try:
        while True:
            n += 1
            print(f"tick {n}", flush=True)
            time.sleep(every)
    except KeyboardInterrupt:
        print(f"stopping after {n} ticks", flush=True)


if __name__ == "__main__":
    tick(float(os.environ.get("EVERY", "5")))
