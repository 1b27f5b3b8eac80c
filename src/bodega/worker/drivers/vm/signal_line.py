"""Signals into a vm machine: the worker's end of the init's signal line.

A VM's program is behind its own kernel; its init (``init.sh``) sends it the signals the
worker writes on the VM's second serial port (a Unix socket in ``qemu.CONTROL_DIR`` on
the host), a line each, and answers each one it took:

    worker:  signal ID NUMBER              init:  taken ID

A serial port keeps nothing for a reader that is not there yet: what the worker writes
while the guest's kernel boots, before the init opens the port, is lost (the port's FIFO
is cleared as it opens, a byte or a whole line). So the worker writes the line again
each ``RESEND_EVERY`` until the init says it took it, for up to ``OFFERED_FOR`` (the VM
may be booting); the init sends each ID's signal once (the same line again is only
answered), and one that comes before the program runs waits for it. A line cut at its
head (its first bytes lost as the port opened) is not a ``signal`` line and is dropped.

The offer goes on in a task of its own: a stop's timeout counts from the stop, not from
the VM's boot. One VM's offers go one at a time, in the order they were made (qemu
serves one connection at a time). The exec line's wake (``exec``, ``guest_exec.py``) is
a line on the same port that asks for no answer: the exec waits for its own.

A console's resize and hang-up (``guest_console.py``) are offers too, answered as a
signal is (``resize ID CONSOLE ROWS COLS``, ``hangup ID CONSOLE``): longer than the port's
16 bytes of FIFO, a line asking for no answer would lose its tail when its connection
closed, qemu dropping what it had not read yet.

A VM booted by an older init, which neither answers nor reads this line, is sent the bare
number it reads, once (``VmLaunch.init_answers_signals``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import secrets
import weakref
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path

from bodega.runtime.waits import within

log = logging.getLogger("bodega.worker.vm")

RESEND_EVERY = 0.5  # seconds between writes of a signal the init has not answered
OFFERED_FOR = 60.0  # seconds a signal is offered to a VM whose init does not answer (booting)
CONNECT_TIMEOUT = 5.0  # seconds: qemu accepts at once, or is not serving the line
LINE_LIMIT = 1 << 12  # an answer is ~24 bytes; a longer line is none of the init's
TAKEN = re.compile(rb"taken ([0-9a-f]{16})\r?\n?")


@dataclass(frozen=True)
class Offer:
    """One signal for the program of one VM, as its init is sent it; or, ``verb`` given,
    a console's resize or hang-up (``guest_console.py``), offered the same way."""

    signal: int
    offer_id: str = field(default_factory=lambda: secrets.token_hex(8))
    verb: str = "signal"
    words: tuple[str, ...] = ()  # what follows the id (none: the signal's number)

    def line(self) -> bytes:
        words = " ".join(self.words or (str(self.signal),))
        return f"{self.verb} {self.offer_id} {words}\n".encode()

    def what(self) -> str:
        return f"signal {self.signal}" if self.verb == "signal" else f"a console's {self.verb}"

    def taken_by(self, line: bytes) -> bool:
        """``line`` is the init's answer to this offer (not an earlier one's, nor garbage)."""
        found = TAKEN.fullmatch(line)
        return found is not None and found.group(1).decode() == self.offer_id


async def read_taken(reader: asyncio.StreamReader, offer: Offer) -> None:
    """Read until the init's answer to ``offer``; ``EOFError`` if qemu closed the line
    first (the VM ended)."""
    while True:
        try:
            line = await reader.readline()
        except ValueError:  # a line past LINE_LIMIT: none of the init's
            continue
        if not line.endswith(b"\n"):
            raise EOFError
        if offer.taken_by(line):
            return


async def offer_until_taken(reader: asyncio.StreamReader,
                            write: Callable[[bytes], Awaitable[None]], offer: Offer,
                            resend_every: float = RESEND_EVERY,
                            offered_for: float = OFFERED_FOR) -> bool:
    """Write ``offer`` until its answer comes, again each ``resend_every``; True once the
    init took it, False after ``offered_for`` without an answer. ``EOFError`` or
    ``OSError`` if the VM ended."""
    taken = asyncio.ensure_future(read_taken(reader, offer))

    async def offering() -> None:
        while not taken.done():
            await write(offer.line())
            await asyncio.wait({taken}, timeout=resend_every)
        taken.result()

    try:
        await within(offering(), offered_for)
        return True
    except TimeoutError:
        return False
    finally:
        taken.cancel()


class SignalLine:
    """Signals into VMs through their inits' signal lines, one offer at a time per VM."""

    def __init__(self, resend_every: float = RESEND_EVERY,
                 offered_for: float = OFFERED_FOR) -> None:
        self.resend_every = resend_every
        self.offered_for = offered_for
        # A VM's lock lives while an offer holds or waits for it, and no longer.
        self.locks: weakref.WeakValueDictionary[str, asyncio.Lock] = \
            weakref.WeakValueDictionary()
        self.offers: set[asyncio.Task[None]] = set()  # held until done: the loop holds none

    def _lock(self, machine_id: str) -> asyncio.Lock:
        lock = self.locks.get(machine_id)
        if lock is None:
            lock = self.locks[machine_id] = asyncio.Lock()
        return lock

    async def send(self, machine_id: str, socket: Path, signal: int) -> bool:
        """Offer ``signal`` to the program of the VM whose signal line is ``socket``, until
        its init takes it; False if no VM listens there (qemu not up yet, or gone). Returns
        once the offer is made: it goes on in a task of its own."""
        return await self.offer(machine_id, socket, Offer(signal))

    async def offer(self, machine_id: str, socket: Path, offer: Offer) -> bool:
        """``send`` for any offer (a console's resize or hang-up): a line the init answers.
        A line that asks for no answer is lost past the port's 16 bytes of FIFO once its
        connection closes (qemu drops what it had not read yet): a longer one is offered."""
        lock = self._lock(machine_id)
        if lock.locked():  # an earlier offer is on the line (so qemu is up): this one next
            self._start(self._queued(lock, machine_id, socket, offer))
            return True
        await lock.acquire()  # free: taken at once
        try:
            line = await _connect(socket)
        except OSError as exc:
            lock.release()
            log.info("%s: no signal line (%s)", machine_id, exc)
            return False
        except BaseException:
            lock.release()
            raise
        self._start(self._holding(lock, machine_id, line, offer))
        return True

    async def tell(self, machine_id: str, socket: Path, text: str, *,
                   unless_busy: bool = False) -> bool:
        """Write ``text`` as one line that asks for no answer (a wake; a signal for an
        older init); False if no VM listens, or, ``unless_busy``, if an offer holds the
        line (an exec wakes its init again until it answers)."""
        lock = self._lock(machine_id)
        if unless_busy and lock.locked():
            return False
        async with lock:
            try:
                _, writer = await _connect(socket)
            except OSError as exc:
                log.info("%s: no signal line (%s)", machine_id, exc)
                return False
            try:
                writer.write(f"{text}\n".encode())
                await writer.drain()
                return True
            except OSError:
                return False
            finally:
                await _close(writer)

    def _start(self, offer: Coroutine[None, None, None]) -> None:
        task = asyncio.ensure_future(offer)
        self.offers.add(task)
        task.add_done_callback(self.offers.discard)

    async def _queued(self, lock: asyncio.Lock, machine_id: str, socket: Path,
                      offer: Offer) -> None:
        async with lock:
            try:
                line = await _connect(socket)
            except OSError as exc:
                log.info("%s: %s not sent: no signal line (%s)", machine_id, offer.what(),
                         exc)
                return
            await self._deliver(machine_id, line, offer)

    async def _holding(self, lock: asyncio.Lock, machine_id: str,
                       line: tuple[asyncio.StreamReader, asyncio.StreamWriter],
                       offer: Offer) -> None:
        try:
            await self._deliver(machine_id, line, offer)
        finally:
            lock.release()

    async def _deliver(self, machine_id: str,
                       line: tuple[asyncio.StreamReader, asyncio.StreamWriter],
                       offer: Offer) -> None:
        """Offer on the connected ``line`` until taken, then close it."""
        reader, writer = line

        async def write(data: bytes) -> None:
            writer.write(data)
            await writer.drain()

        try:
            if not await offer_until_taken(reader, write, offer, self.resend_every,
                                           self.offered_for):
                log.warning("%s: %s not taken by the VM's init in %g s", machine_id,
                            offer.what(), self.offered_for)
        except (EOFError, OSError):
            log.info("%s: the VM ended before it took %s", machine_id, offer.what())
        finally:
            await _close(writer)


async def _connect(socket: Path) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Connect to qemu's end of the line (a TimeoutError is an OSError: no VM listens)."""
    return await within(asyncio.open_unix_connection(str(socket), limit=LINE_LIMIT),
                        CONNECT_TIMEOUT)


async def _close(writer: asyncio.StreamWriter) -> None:
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
