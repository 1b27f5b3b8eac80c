"""A jobs pass: leave to submit one app's jobs straight to their homes, for a few minutes.

A broker that checked a caller's token for an app hands it a pass
(``POST /sched/pass``): ``bdj_<app>.<expiry>.<tag>``, the tag an HMAC of app and
expiry (whole Unix seconds) under the key ``identity_keys`` derives for this one
purpose. A worker's jobs door (``worker/jobs/door.py``) checks the tag and the
expiry without a lookup, as a broker checks a machine's token: only brokers and
workers hold the key, so a pass is proof that a broker let its holder submit
jobs to that app until then. It is good for nothing else: no status, no cancel,
no machine, no other app.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from dataclasses import dataclass

PREFIX = "bdj_"
TTL = 600.0  # seconds a pass is good for
CHECKED_HELD = 64  # passes whose tag was found good, kept: a client sends one for minutes


@dataclass(frozen=True)
class JobPass:
    app: str
    expires_at: int  # Unix seconds


class JobPasses:
    def __init__(self, key: bytes) -> None:
        """``key``: ``identity_keys(...).job_pass``."""
        self._key = key
        self._checked: dict[str, JobPass] = {}  # a pass as sent -> what its good tag grants

    def _tag(self, app: str, expires_at: int) -> str:
        mac = hmac.new(self._key, f"{app}/{expires_at}".encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(mac).decode().rstrip("=")

    def mint(self, app: str, now: float, ttl: float = TTL) -> str:
        """A pass for ``app`` good until ``now + ttl``, as its holder sends it."""
        expires_at = int(now + ttl)
        return f"{PREFIX}{app}.{expires_at}.{self._tag(app, expires_at)}"

    def check(self, raw: str, now: float) -> JobPass | None:
        """What ``raw`` lets its holder do, if it is this cluster's and not expired; None
        otherwise (a forged, malformed or expired pass alike). A pass whose tag was found
        good is not computed again: only its expiry is checked at each use."""
        if (known := self._checked.get(raw)) is not None:
            return known if known.expires_at > now else None
        if not raw.startswith(PREFIX):
            return None
        parts = raw[len(PREFIX):].split(".")
        if len(parts) != 3 or not all(parts) or not parts[1].isdigit():
            return None
        app, expiry, tag = parts
        if not hmac.compare_digest(tag.encode(), self._tag(app, int(expiry)).encode()):
            return None
        granted = JobPass(app, int(expiry))
        if len(self._checked) >= CHECKED_HELD:
            self._checked.clear()  # passes come and go every few minutes: start again
        self._checked[raw] = granted
        return granted if granted.expires_at > now else None
