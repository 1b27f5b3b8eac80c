"""A process's membership through its host's registry agent: no SWIM of its own.

On a host with an agent, the host's workers, broker and proxy are the agent's
*tenants* (``membership/core/tenants.py``): each checks in on the agent's Unix
socket about once a second (``AgentLink.check_in``), the agent gossips a
record for it (``MemberRecord.host``, the agent's address) and judges it by
its silence, and the check-in's answer carries the cluster's members whenever
they changed. So the host's twenty workers cost the cluster one SWIM member,
one prober and one gossiper, not twenty.

``TenantMembership`` offers what a daemon reads of membership (``members``,
``member``, ``status_since``, ``suspicion_deadline``, ``events``) as
``Membership`` does, from the last answer. While the agent is down it keeps
the last members it heard and checks in again every half interval; the
cluster takes the process for dead meanwhile (its agent is), and a new life
of the agent sees it come back as a new generation of itself.

The generation (its count of its own lives, in ``membership.json`` as a SWIM
member keeps it) rises at every start and at every new life of the agent, so
a record the process comes back with always wins over one the cluster holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from bodega.registry.agent.link import AgentLink, AgentUnavailable, CheckIn, Presence
from bodega.registry.membership.core.config import MembershipConfig
from bodega.registry.membership.core.members import (
    Addr,
    MemberRecord,
    MemberView,
    Role,
    change_kind,
    check_identity,
)
from bodega.registry.membership.core.messages import DecodeError, record_from_json
from bodega.registry.membership.core.outputs import Event
from bodega.registry.membership.fanout import Fanout, Listener
from bodega.registry.membership.feed import Feed
from bodega.registry.membership.statefile import SavedState, StateFile
from bodega.registry.sealing.core.keyring import Keyring
from bodega.runtime.waits import within

log = logging.getLogger("bodega.registry.tenant")


class TenantMembership:
    def __init__(self, config: MembershipConfig, link: AgentLink) -> None:
        Role(config.role)
        check_identity(config.name, (config.advertise_host or config.bind_host,
                                     config.bind_port), config.region, config.meta)
        self.config = config
        self.keyring = config.keyring  # kept for the view's keyring row; nothing to seal
        self._link = link
        self._meta = dict(config.meta)
        self._state = StateFile(config.state_path)
        self._generation = 0
        self._epoch = ""  # the agent's life the last answer came from
        self._mark = ""
        self._records: dict[str, MemberRecord] = {}
        self._since: dict[str, float] = {}  # when each member's status last changed (epoch s)
        self._suspicions: dict[str, float] = {}  # suspect name -> deadline (loop clock)
        self._addr: Addr = (config.advertise_host or config.bind_host, config.bind_port)
        self._fanout = Fanout(config.feed_capacity)
        self._heard = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    # ── lifecycle ────────────────────────────────────────────────────────────

    async def start(self) -> None:
        if self._task is not None:
            raise RuntimeError("membership is already started")
        self._renew(self._state.load().generation + 1)
        self._task = asyncio.create_task(self._run(), name=f"tenant-{self.config.name}")
        self._task.add_done_callback(_log_failure)
        # The first answer names the agent's address (this member's gossip address);
        # an agent down now is no reason not to start.
        with contextlib.suppress(TimeoutError):
            await within(self._heard.wait(), self.config.swim.tenant_interval)

    async def stop(self, *, leave: bool = True) -> None:
        """Stop; with ``leave``, first have the agent say so (it shows ``left``)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if leave and self._epoch:
            try:
                await self._link.leave(self.config.name)
            except AgentUnavailable as exc:  # the cluster takes us for dead instead
                log.info("could not say goodbye to the registry agent: %s", exc)
        await self._link.aclose()
        self._fanout.close()

    # ── what the daemons read ────────────────────────────────────────────────

    @property
    def addr(self) -> Addr:
        """The agent's gossip address: where the cluster reaches the member that speaks
        for us (the configured address until the agent first answers)."""
        return self._addr

    def members(self) -> list[MemberView]:
        records = dict(self._records)
        records[self.config.name] = self._me()
        return sorted((MemberView.of(r) for r in records.values()), key=lambda v: v.name)

    def member(self, name: str) -> MemberView | None:
        if name == self.config.name:
            return MemberView.of(self._me())
        record = self._records.get(name)
        return None if record is None else MemberView.of(record)

    def status_since(self, name: str) -> float | None:
        return None if name == self.config.name else self._since.get(name)

    def suspicion_deadline(self, name: str) -> float | None:
        return self._suspicions.get(name)

    def update_meta(self, meta: dict[str, str]) -> None:
        """New metadata for ourselves: the next check-in carries it."""
        check_identity(self.config.name, self._addr, self.config.region, meta)
        self._meta = dict(meta)

    def set_keyring(self, keyring: Keyring) -> None:
        self.keyring = keyring

    def add_listener(self, listener: Listener) -> Callable[[], None]:
        return self._fanout.add_listener(listener)

    def events(self) -> Feed[Event]:
        return self._fanout.events()

    # ── the check-ins ────────────────────────────────────────────────────────

    def _me(self) -> MemberRecord:
        current = self._records.get(self.config.name)
        if current is not None:
            return current
        return MemberRecord(self.config.name, self._addr, Role(self.config.role),
                            self.config.region, dict(self._meta), 0, self._generation)

    def _renew(self, generation: int) -> None:
        self._generation = generation
        self._state.save(SavedState(generation))  # durable before the agent gossips it

    async def _run(self) -> None:
        interval = self.config.swim.tenant_interval
        while True:
            asked = CheckIn(name=self.config.name, role=str(self.config.role),
                            region=self.config.region, meta=self._meta,
                            generation=self._generation, mark=self._mark, hold=interval)
            try:
                presence = await self._link.check_in(asked)
            except AgentUnavailable as exc:
                # Down or restarting is routine (debug); a refusal of what we said is not.
                refused = " answered 4" in str(exc)
                log.log(logging.WARNING if refused else logging.DEBUG,
                        "registry agent did not take our check-in: %s", exc)
                await asyncio.sleep(interval / 2)
                continue
            if presence.epoch != self._epoch and self._epoch:
                # A new life of the agent: it may have been taken for dead, and us with it.
                self._renew(self._generation + 1)
                self._epoch, self._mark = presence.epoch, ""
                continue
            self._epoch = presence.epoch
            try:
                self._take(presence)
            except (DecodeError, OSError) as exc:  # malformed, or our state file unwritable
                log.warning("could not take the registry agent's check-in answer: %s", exc)
                self._mark = ""
                await asyncio.sleep(interval / 2)

    def _take(self, presence: Presence) -> None:
        you = record_from_json(presence.you)
        if you.generation > self._generation:
            self._renew(you.generation)
        self._addr = you.addr
        now = asyncio.get_running_loop().time()
        self._suspicions = {n: now + left for n, left in presence.suspicions.items()}
        if presence.members is not None:
            # Merged over what we knew: an agent just restarted answers with little until
            # it has joined the cluster again, and what we heard before still stands.
            records = {**self._records,
                       **{r.name: r for r in map(record_from_json, presence.members)}}
            for name, record in records.items():
                old = self._records.get(name)
                if old == record:
                    continue
                kind = change_kind(old, record)
                if old is None or old.status is not record.status \
                        or old.generation != record.generation:
                    self._since[name] = time.time()
                if kind is not None and name != self.config.name:
                    self._fanout.deliver(Event(kind, MemberView.of(record)))
            self._records = records
            self._mark = presence.mark
        self._heard.set()


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("check-ins with the registry agent stopped", exc_info=task.exception())
