"""Request ids shaped like ULIDs, cheap enough to give every proxied request one."""

from __future__ import annotations

import os
import time


class RequestIds:
    """Request ids shaped like ULIDs (time first, so they sort), cheap enough for every request.

    The random part is drawn once per millisecond and then counted up, as
    monotonic ULID generators do; a full ULID per request was a noticeable
    share of the proxy's time.
    """

    def __init__(self) -> None:
        self._ms = -1
        self._counter = 0

    def next(self) -> bytes:
        ms = int(time.time() * 1000)
        if ms != self._ms:
            self._ms = ms
            self._counter = int.from_bytes(os.urandom(10), "big") >> 8
        else:
            self._counter += 1
        return _crockford((ms << 80) | (self._counter & ((1 << 80) - 1)))


_ALPHABET = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def _crockford(value: int) -> bytes:
    out = bytearray(26)
    for i in range(25, -1, -1):
        out[i] = _ALPHABET[value & 31]
        value >>= 5
    return bytes(out)
