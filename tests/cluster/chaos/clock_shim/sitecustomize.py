"""Loaded first by every Python process on the host whose clock a campaign skews.

Debian's libfaketime (0.9.10) fails an absolute sleep on the monotonic clock with
EINVAL when told to leave that clock alone (libfaketime issue 426), and Python 3.11's
``time.sleep`` (and so ``subprocess``'s waits) sleeps exactly that way. A sleep here
waits in ``select`` instead, which takes a relative timeout and is not faked: the host's
processes then see only what the skew is meant to show, a wall clock that is off.
"""

import select
import time
from typing import SupportsIndex


def _sleep(seconds: float | SupportsIndex) -> None:
    select.select([], [], [], float(seconds))


time.sleep = _sleep
