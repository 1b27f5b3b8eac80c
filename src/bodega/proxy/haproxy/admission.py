"""Which machines' ports accept a connect from this proxy, tried before a machine takes
a slot of HAProxy's.

``layout.admitted`` keeps a machine out of the slots until its port has accepted a
connect from here (why: there). This is its I/O. A machine wanted new gets a first
try at once, and a sync waits for it (``FIRST_TRY`` at most), so one already
listening takes its slot in the same step. One that does not accept yet is tried
again in the background, each pause doubling up to ``LONGEST_PAUSE``, until it
accepts (the data plane is then told, ``on_accepting``) or is no longer wanted. A
machine that leaves the wanted servers (stopped, cordoned, gone) is forgotten: when it
comes back its port is tried again.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping

from bodega.proxy.haproxy.core.layout import (
    AppServers,
    Endpoint,
    Layout,
    admitted,
    endpoint,
    in_slots,
)
from bodega.runtime.waits import within

FIRST_TRY = 0.3  # seconds a connect may take before the port counts as not accepting yet
FIRST_PAUSE = 0.05
LONGEST_PAUSE = 1.0


class Admission:
    def __init__(self, on_accepting: Callable[[], None]) -> None:
        self.accepting: set[Endpoint] = set()
        self._tries: dict[Endpoint, asyncio.Task[None]] = {}
        self._on_accepting = on_accepting

    async def admit(self, wanted: Mapping[str, AppServers],
                    current: Layout) -> dict[str, AppServers]:
        """``wanted`` less the machines new to a slot whose port has not accepted yet."""
        every = {endpoint(spec) for servers in wanted.values()
                 for spec in (*servers.near, *servers.far)}
        self.accepting &= every
        first = sorted(every - in_slots(current) - self.accepting - set(self._tries))
        if first:
            answers = await asyncio.gather(*(accepts(e, FIRST_TRY) for e in first))
            self.accepting |= {e for e, ok in zip(first, answers, strict=True) if ok}
        now, waiting = admitted(wanted, current, self.accepting)
        for gone in set(self._tries) - waiting:
            self._tries.pop(gone).cancel()
        for e in waiting - set(self._tries):
            self._tries[e] = asyncio.create_task(self._keep_trying(e))
        return now

    async def _keep_trying(self, e: Endpoint) -> None:
        pause = FIRST_PAUSE
        while True:
            await asyncio.sleep(pause)
            if await accepts(e, FIRST_TRY):
                break
            pause = min(pause * 2, LONGEST_PAUSE)
        self.accepting.add(e)
        self._tries.pop(e, None)
        self._on_accepting()

    async def stop(self) -> None:
        tries = list(self._tries.values())
        self._tries.clear()
        for task in tries:
            task.cancel()
        for task in tries:
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def accepts(e: Endpoint, seconds: float) -> bool:
    """Whether the machine's port accepts a TCP connect within ``seconds`` (closed at once)."""
    _, host, port = e
    try:
        _, writer = await within(asyncio.open_connection(host, port), seconds)
    except (OSError, TimeoutError):
        return False
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True
