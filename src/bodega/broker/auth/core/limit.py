"""Failed authentications, rate-limited per source address: a token bucket per address.

Each address starts with ``burst`` failures to spend; spent ones come back
at ``per_second``. A failure from an address with none left is answered 429,
with the seconds until the next one comes back, instead of 401: a client
stuck on a stale token, or a scan, is told to back off. Successes neither
spend nor wait: a valid token is never refused for its address's failures
(tokens are 256-bit random, so guessing one is hopeless anyway). A bucket
back to full is forgotten, and at most ``addresses`` are remembered (the
fullest go first), so memory stays bounded under a spray of sources.

Pure: the clock is an argument.
"""

from __future__ import annotations

from dataclasses import dataclass, field

BURST = 20.0  # failures an address may make at once
PER_SECOND = 1 / 3  # and then one every three seconds
ADDRESSES = 10_000


@dataclass
class Bucket:
    tokens: float
    at: float  # when ``tokens`` was last brought up to date


@dataclass
class FailureLimiter:
    burst: float = BURST
    per_second: float = PER_SECOND
    addresses: int = ADDRESSES
    _buckets: dict[str, Bucket] = field(default_factory=dict)

    def _level(self, address: str, now: float) -> Bucket | None:
        bucket = self._buckets.get(address)
        if bucket is None:
            return None
        bucket.tokens = min(self.burst, bucket.tokens + (now - bucket.at) * self.per_second)
        bucket.at = now
        if bucket.tokens >= self.burst:
            del self._buckets[address]  # full again: nothing to remember
            return None
        return bucket

    def retry_after(self, address: str, now: float) -> float | None:
        """None if ``address`` may try now; else seconds until it may try again."""
        bucket = self._level(address, now)
        if bucket is None or bucket.tokens >= 1:
            return None
        return (1 - bucket.tokens) / self.per_second

    def failed(self, address: str, now: float) -> None:
        """``address`` failed to authenticate: it spends one."""
        bucket = self._level(address, now)
        if bucket is None:
            if len(self._buckets) >= self.addresses:
                self._forget_fullest()
            bucket = self._buckets[address] = Bucket(self.burst, now)
        bucket.tokens = max(0.0, bucket.tokens - 1)

    def _forget_fullest(self) -> None:
        fullest = max(self._buckets, key=lambda a: self._buckets[a].tokens)
        del self._buckets[fullest]

    def __len__(self) -> int:
        return len(self._buckets)
