"""``Swim.next_due``: the driver sleeps until it, so a tick before it must have nothing to do.

A node with three members that never answer probes (so probes go indirect, time
out, suspicions start and end in deaths), asked to relay pings for another
member, and given a broadcast to spread: at every step it is ticked every 10 ms up
to the time it says it is next due, and none of those ticks may send or report
anything; the tick at that time is when it acts.
"""

from __future__ import annotations

import math

from bodega.registry.membership.core.messages import Item, PingReq
from tests.unit.registry.membership.swim_kit import addr_of, deliver, learn, node, rec


def test_a_tick_before_next_due_has_nothing_to_do() -> None:
    swim = node("a", seed=3)
    assert swim.next_due() == -math.inf  # not started: tick at once
    swim.tick(0.0)
    learn(swim, 0.0, rec("b"), rec("c"), rec("d"), rec("e"))
    now, acted, seq = 0.0, 0, 0
    for step in range(300):
        if step % 25 == 5:  # another member asks us to relay a ping: a relay with a nack timer
            seq += 1
            deliver(swim, now, "e", PingReq(seq, "c", addr_of("c")))
        if step % 40 == 10:  # news to spread: gossip is due at once
            swim.broadcast(Item(f"k{step}", {"n": step}))
            assert swim.next_due() <= now + swim.config.gossip_interval
        due = swim.next_due()
        assert due < math.inf  # a probe round is always ahead
        t = now + 0.01
        while t < due:
            assert swim.tick(t) == [], f"at {t:.2f}, before next_due {due:.2f}"
            t += 0.01
        now = max(due, now)
        acted += bool(swim.tick(now))
    assert acted > 50  # probes, indirect probes, nacks, deaths, gossip: it did act
