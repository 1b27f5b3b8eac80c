"""The cluster's gossip keyring, kept in step on every member: the view row, the file, membership.

A node starts with the keyring it is given (its host's keyring file, or
JSON) unless its view holds a later one: the ``keyrings`` row ``gossip``,
which a rotation writes. Whenever that row changes (a rotation here, gossip
sealed with a key we hold, or anti-entropy over HTTP) and its serial is at
least ours, the node *adopts* it: membership seals with its primary and
opens with its keys from the next packet on, reports it in its metadata,
and the keyring file is rewritten so the host's next start begins there.

``rotate`` is the coordinator (any node may run it; the broker does, for
``bodega cluster key rotate``): it publishes the three keyrings of
``sealing/core/rotation.py`` in turn and waits, after each, until every live
member reports having taken it. A step that does not complete in time
stops the rotation where it is (a ``Conflict`` naming the members that lag),
which is always a keyring every live member can gossip with; running it
again finishes the job with a newer key.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Callable
from pathlib import Path

from bodega.model.errors import Conflict
from bodega.registry.member_surface import Members
from bodega.registry.membership.core.lagging import lagging
from bodega.registry.replication.core.rows import Change, Row
from bodega.registry.sealing import keyfile
from bodega.registry.sealing.core.keyring import (
    KEY_BYTES,
    REPORT_META,
    GossipKey,
    KeyReport,
    Keyring,
    KeyringDoc,
    KeyringError,
)
from bodega.registry.sealing.core.rotation import rotation_steps
from bodega.wire.public.gossip_keys import (
    KeyHolders,
    KeyListing,
    MemberKeys,
    Rotation,
    RotationStep,
)

log = logging.getLogger("bodega.registry.keys")

TABLE, KEY = "keyrings", "gossip"
POLL = 0.05


def keyring_of(row: Row | None) -> Keyring | None:
    """The keyring a ``keyrings`` row holds; None for none, a tombstone, or a bad one."""
    if row is None or row.doc is None:
        return None
    fields = {k: v for k, v in row.doc.items() if k != "name"}
    try:
        return Keyring.from_doc(KeyringDoc.model_validate(fields))
    except (ValueError, KeyringError) as exc:
        log.error("ignoring the gossip keyring row written by %s: %s", row.owner, exc)
        return None


class GossipKeys:
    def __init__(self, membership: Members, *, view_row: Callable[[], Row | None],
                 write_row: Callable[[str, str, dict[str, object]], None],
                 file: Path | None, grace: float) -> None:
        self.membership = membership
        self._row = view_row
        self._write = write_row
        self._file = file
        self._grace = grace  # after "use", for packets sealed with the old key still in flight
        self._rotating = asyncio.Lock()
        started = keyring_of(view_row())
        if started is not None and started.serial >= membership.keyring.serial:
            self.adopt(started)

    @property
    def keyring(self) -> Keyring:
        return self.membership.keyring

    def changed(self, changes: list[Change]) -> None:
        for change in changes:
            if change.new is not None and (change.new.table, change.new.key) == (TABLE, KEY):
                found = keyring_of(change.new)
                if found is not None and found.serial >= self.keyring.serial:
                    self.adopt(found)

    def adopt(self, keyring: Keyring) -> None:
        if keyring == self.keyring:
            return
        log.info("gossip keyring %d: keys %s, sealing with %s (was %d: %s)", keyring.serial,
                 ",".join(keyring.ids), keyring.primary, self.keyring.serial,
                 self.keyring.report())
        self.membership.set_keyring(keyring)
        if self._file is not None:
            try:
                keyfile.write(self._file, keyring)
            except OSError as exc:  # the view still holds it: the next start adopts it there
                log.error("cannot write the gossip keyring to %s: %s", self._file, exc)

    # ── the coordinator ──────────────────────────────────────────────────────

    async def rotate(self, *, timeout: float) -> Rotation:
        """Install a new key everywhere, seal with it everywhere, remove the others."""
        if self._rotating.locked():
            raise Conflict("a gossip key rotation is already running on this node")
        async with self._rotating:
            loop = asyncio.get_running_loop()
            before = self.keyring
            new = GossipKey(secrets.token_bytes(KEY_BYTES))
            done: list[RotationStep] = []
            expected = before
            for step in rotation_steps(before, new):
                if not self.keyring.same_keys(expected):
                    raise Conflict(f"the gossip keyring changed during the rotation (now "
                                   f"{self.keyring.report()}, serial {self.keyring.serial}): "
                                   "another rotation? Look with `bodega cluster key list`")
                keyring = Keyring(step.keyring.keys, step.keyring.primary,
                                  max(step.keyring.serial, self.keyring.serial + 1))
                self._write(TABLE, KEY, {"name": KEY, **keyring.doc().model_dump()})
                started = loop.time()
                while behind := lagging(self.membership.members(), step):
                    if loop.time() - started > timeout:
                        raise Conflict(
                            f"gossip key rotation stopped at '{step.name}': "
                            f"{', '.join(behind)} had not {step.describe()} after "
                            f"{timeout:g} s. The keyring stays {keyring.report()} (serial "
                            f"{keyring.serial}), which every live member can gossip with; run "
                            "the rotation again once they are reachable")
                    await asyncio.sleep(POLL)
                done.append(RotationStep(step=str(step.name), serial=keyring.serial,
                                         seconds=round(loop.time() - started, 3)))
                log.info("gossip key rotation: every live member %s", step.describe())
                if step.name == "use":
                    await asyncio.sleep(self._grace)
                expected = keyring
            return Rotation(new=new.id, removed=[i for i in before.ids if i != new.id],
                            steps=done, keyring=self.listing())

    def listing(self) -> KeyListing:
        # Only members that speak SWIM hold keys (an agent's tenants do not).
        members = sorted((m for m in self.membership.members() if not m.host),
                         key=lambda m: m.name)
        reports = {m.name: KeyReport.parse(m.meta.get(REPORT_META)) for m in members}
        live = [m.name for m in members if m.status.live]
        seen = list(self.keyring.ids) + sorted({i for r in reports.values()
                                                for i in r.installed} - set(self.keyring.ids))
        keys = [KeyHolders(id=i, primary=i == self.keyring.primary,
                           members=[n for n in live if i in reports[n].installed],
                           sealing=[n for n in live if reports[n].primary == i]) for i in seen]
        return KeyListing(serial=self.keyring.serial, primary=self.keyring.primary, keys=keys,
                          members=[MemberKeys(name=m.name, role=str(m.role), status=str(m.status),
                                              keys=sorted(reports[m.name].installed),
                                              primary=reports[m.name].primary)
                                   for m in members])
