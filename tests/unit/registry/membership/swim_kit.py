"""Small builders for driving one ``Swim`` by hand: records, packets, clock steps."""

from __future__ import annotations

import random

from bodega.registry.membership.core.config import SwimConfig
from bodega.registry.membership.core.members import Addr, MemberRecord, Role, Status
from bodega.registry.membership.core.messages import Ack, Body, Message, Ping
from bodega.registry.membership.core.outputs import Delivered, Event, Out, Send
from bodega.registry.membership.core.swim import Swim


def addr_of(name: str) -> Addr:
    return (f"10.0.0.{sum(map(ord, name)) % 250 + 1}", 7000 + sum(map(ord, name)) % 1000)


def rec(name: str, *, inc: int = 0, gen: int = 1, status: Status = Status.ALIVE,
        by: str = "", meta: dict[str, str] | None = None) -> MemberRecord:
    return MemberRecord(name, addr_of(name), Role.WORKER, "ams", meta or {}, inc, gen, status,
                        by)


def node(name: str = "a", *, config: SwimConfig | None = None, generation: int = 1,
         seed: int = 0) -> Swim:
    return Swim(name, addr_of(name), Role.WORKER, "ams", generation=generation,
                config=config, rng=random.Random(seed))


def learn(swim: Swim, now: float, *records: MemberRecord, sender: str = "z") -> list[Out]:
    """Hand ``records`` to ``swim`` as gossip piggybacked on an empty packet."""
    return swim.receive(now, addr_of(sender), Message(sender, None, updates=records))


def deliver(swim: Swim, now: float, sender: str, body: Body, **kw: object) -> list[Out]:
    return swim.receive(now, addr_of(sender), Message(sender, body, **kw))  # type: ignore[arg-type]


def sends(outs: list[Out]) -> list[Send]:
    return [o for o in outs if isinstance(o, Send)]


def events(outs: list[Out]) -> list[Event]:
    return [o for o in outs if isinstance(o, Event)]


def delivered(outs: list[Out]) -> list[Delivered]:
    return [o for o in outs if isinstance(o, Delivered)]


def bodies(outs: list[Out], kind: type) -> list[Send]:
    return [s for s in sends(outs) if isinstance(s.message.body, kind)]


def updates_about(outs: list[Out], name: str) -> list[MemberRecord]:
    return [r for s in sends(outs) for r in s.message.updates if r.name == name]


def tick_until(swim: Swim, start: float, kind: type, *, step: float = 0.01,
               limit: float = 30.0) -> tuple[float, Send]:
    """Tick from ``start`` until a packet with a ``kind`` body goes out."""
    t = start
    while t < start + limit:
        found = bodies(swim.tick(t), kind)
        if found:
            return t, found[0]
        t = round(t + step, 6)
    raise AssertionError(f"no {kind.__name__} within {limit}s")


def ping_of(send: Send) -> Ping:
    assert isinstance(send.message.body, Ping)
    return send.message.body


def ack(swim: Swim, now: float, sender: str, seq: int) -> list[Out]:
    return deliver(swim, now, sender, Ack(seq))

