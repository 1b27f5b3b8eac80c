"""A background worker for bodega: no services, so its first deploy also gets a standby.

It prints a line every few seconds; stop it and the proxy has nothing to route,
but when its worker host dies bodega starts the standby on another host.
"""

from __future__ import annotations

import os
import time

if __name__ == "__main__":
    every = float(os.environ.get("EVERY", "5"))
    n = 0
    while True:
        n += 1
        print(f"tick {n}", flush=True)
        time.sleep(every)
