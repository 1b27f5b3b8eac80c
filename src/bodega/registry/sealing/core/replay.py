"""Replay windows: each sender's packets are let in once, as IPsec and WireGuard do.

A sender numbers its packets (``seq``) within its *generation*, which rises
on every start of the process (``statefile.py``); its first seq is the
wall clock in nanoseconds, so even a start that lost its generation write
numbers above everything its earlier life sent. A receiver keeps, per
sender, the generation it last let in and a window over the highest seq
let in and the ``WINDOW`` below it (RFC 6479's bitmap as one integer):

- a higher generation: the sender restarted; a fresh window starts there,
  so a restarted member is never locked out by its old numbers;
- a lower generation: a packet of an earlier life, a replay;
- the same generation: above the window, new; inside it, new unless its
  bit is set; below it, too old to tell, so refused.

A sender's seq counts every packet it sends to anyone, so two packets to
one receiver are as far apart as the packets sent between them: 2048
leaves room for reordering far beyond what a network does to datagrams.

Windows change only for packets that authenticated (``envelope.py`` asks
``fresh`` before opening, to spend no decryption on a known replay, and
``accept`` after). The table is bounded: past ``max_senders`` the sender
heard from least recently is forgotten.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

WINDOW = 2048
MAX_SENDERS = 65_536


@dataclass
class Window:
    generation: int
    top: int  # the highest seq let in
    bits: int = 1  # bit i: seq top - i was let in

    def fresh(self, seq: int) -> bool:
        if seq > self.top:
            return True
        behind = self.top - seq
        return behind < WINDOW and not self.bits >> behind & 1

    def accept(self, seq: int) -> None:
        if seq > self.top:
            shift = seq - self.top
            self.bits = 1 if shift >= WINDOW else (self.bits << shift | 1) & ((1 << WINDOW) - 1)
            self.top = seq
        else:
            self.bits |= 1 << (self.top - seq)


class ReplayGuard:
    """Every sender's window, by sender id (``seal.sender_id``)."""

    def __init__(self, max_senders: int = MAX_SENDERS) -> None:
        self._windows: OrderedDict[bytes, Window] = OrderedDict()
        self._max = max_senders

    def __len__(self) -> int:
        return len(self._windows)

    def fresh(self, sender: bytes, generation: int, seq: int) -> bool:
        """Whether (generation, seq) may be a packet ``sender`` has not sent us yet."""
        window = self._windows.get(sender)
        if window is None or generation > window.generation:
            return True
        return generation == window.generation and window.fresh(seq)

    def accept(self, sender: bytes, generation: int, seq: int) -> None:
        """Record an authentic packet (one ``fresh`` said was new)."""
        window = self._windows.get(sender)
        if window is None or generation > window.generation:
            self._windows[sender] = Window(generation, seq)
            self._windows.move_to_end(sender)
            if len(self._windows) > self._max:
                self._windows.popitem(last=False)
        elif generation == window.generation:
            window.accept(seq)
            self._windows.move_to_end(sender)

    def forget(self, sender: bytes) -> None:
        self._windows.pop(sender, None)
