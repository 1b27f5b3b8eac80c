"""An app's wanted count of machines, and what to do to reach it: pure, from one look.

::

    figure ──▶ wanted = clamp(ceil(sessions / target) or ceil(value), min, max)
                 │
      wanted > serving ──▶ uncordon draining ──▶ start stopped ──▶ create clones
                 │          (cheapest first: a draining machine still runs, a stopped
                 │           one has its config and image, a clone must be placed)
      wanted < serving ──▶ for scale_in_after s ──▶ cordon the idlest ──▶ (drained) stop
                 │          (the highest wanted count of that window is kept)
      otherwise ──▶ nothing

Scaling out is fast (as soon as the figure says so, then at most once per
``OUT_COOLDOWN``, the time a started machine takes to show in the view, ``MAX_STEP``
machines at a time), scaling in
is slow (the wanted count must stay lower for the setting's ``scale_in_after``) and
gentle: a machine is first taken out of the proxies' rotation (cordoned) and
stopped only once its sessions are gone (``UNSEEN_DRAIN`` after, when no proxy counts
them any more; ``DRAIN_LIMIT`` at most). Stopped, never
destroyed: the next scale-out starts it again before it creates anything. With no
figure (no metrics store, or the expression failed) only the bounds are kept.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from bodega.model.rows.autoscale import AutoscaleRow, Decision, Memory

SERVING = frozenset({"starting", "started", "restarting", "updating", "replacing"})
STARTABLE = frozenset({"stopped", "suspended", "created"})
OUT_COOLDOWN = 5.0  # seconds between two scale-outs
DRAIN_LIMIT = 60.0  # seconds a cordoned machine may keep sessions before it is stopped
# Seconds a cordoned machine whose sessions no proxy counts (no ``fly_app_concurrency``
# series) drains: time for every proxy to hear of the cordon, and to count a request it
# sent there just before. A proxy counts a cordoned machine's requests in flight on the
# HAProxy slot it left until they end, then its series ends; one reloaded meanwhile
# counts them no more, and such a request, past this, is cut by the stop.
UNSEEN_DRAIN = 10.0
# Machines added by one evaluation at most: a setting of hundreds is reached in steps, each
# placed and seen in the view before the next, not as one storm of creates.
MAX_STEP = 10


@dataclass(frozen=True)
class Seen:
    """One machine of the app, as the evaluator sees it."""

    id: str
    state: str
    cordoned: bool = False
    release: int = 0  # its fly_release_version (0: none)
    created_at: str = ""
    sessions: float | None = None  # its concurrency now, summed over every proxy


@dataclass(frozen=True)
class Stimulus:
    setting: AutoscaleRow
    machines: tuple[Seen, ...]
    # Concurrency mode: the app's sessions now, over all its machines; expression mode:
    # the expression's value. None when it could not be read (``unknown`` says why).
    figure: float | None
    memory: Memory
    now: float
    unknown: str = ""


def newest_first(machines: Iterable[Seen]) -> list[Seen]:
    return sorted(machines, key=lambda m: (m.release, m.created_at, m.id), reverse=True)


def idlest_first(machines: Iterable[Seen]) -> list[Seen]:
    """Fewest sessions first (unknown counts as many), then the oldest release."""
    return sorted(machines, key=lambda m: (math.inf if m.sessions is None else m.sessions,
                                           m.release, m.created_at, m.id))


def drained(machine: Seen, draining_for: float) -> bool:
    """A cordoned machine may stop: no session left on any proxy that counts it, its
    sessions uncounted for ``UNSEEN_DRAIN``, or drained for ``DRAIN_LIMIT`` whatever."""
    if machine.sessions is None:
        return draining_for >= UNSEEN_DRAIN
    return machine.sessions == 0 or draining_for >= DRAIN_LIMIT


def wanted_count(stimulus: Stimulus, serving: int) -> tuple[int, str]:
    """The wanted count within the bounds, and what it was read from."""
    setting = stimulus.setting
    low, high = setting.min, setting.max
    if stimulus.figure is None:
        kept = min(max(serving, low), high)
        return kept, f"no figure ({stimulus.unknown or 'unknown'}): bounds kept"
    if setting.expr:
        raw = max(0, math.ceil(stimulus.figure - 1e-9))
        figure = f"expression = {stimulus.figure:g}"
    else:
        target = setting.concurrency or 1.0
        raw = math.ceil(stimulus.figure / target - 1e-9)
        figure = (f"{stimulus.figure:g} sessions over {_machines(serving)} "
                  f"(target {target:g} a machine)")
    wanted = min(max(raw, low), high)
    if wanted != raw:
        figure += f", {raw} clamped to [{low}, {high}]"
    return wanted, figure


def decide(stimulus: Stimulus) -> tuple[Decision, Memory]:
    """What to do now, and what the next evaluation must remember."""
    now, memory = stimulus.now, stimulus.memory
    by_id = {m.id: m for m in stimulus.machines}
    # Draining: cordoned by an earlier scale-in and still running (a machine stopped or
    # uncordoned by someone else is no longer ours to drain).
    draining = {mid: since for mid, since in memory.draining.items()
                if (m := by_id.get(mid)) is not None and m.cordoned and m.state in SERVING}
    serving = [m for m in stimulus.machines if m.state in SERVING and not m.cordoned]
    wanted, figure = wanted_count(stimulus, len(serving))
    base = {"wanted": wanted, "serving": len(serving), "figure": figure, "at": now}

    if wanted > len(serving):
        since_out = None if memory.last_out is None else now - memory.last_out
        if since_out is not None and since_out < OUT_COOLDOWN:
            decision = Decision(**base, reason=f"scale out to {wanted} after the cooldown "
                                f"({since_out:.1f} of {OUT_COOLDOWN:g} s)")
            return decision, memory.model_copy(update={"draining": draining})
        need = min(wanted - len(serving), MAX_STEP)
        back = [m.id for m in newest_first(by_id[d] for d in draining)][:need]
        startable = [m for m in stimulus.machines if m.state in STARTABLE and not m.cordoned]
        start = [m.id for m in newest_first(startable)][:need - len(back)]
        create = need - len(back) - len(start)
        steps = [s for s in (_count(len(back), "draining machine", "taken back"),
                             _count(len(start), "stopped machine", "started"),
                             _count(create, "clone", "created")) if s]
        step = "" if need == wanted - len(serving) else f" ({MAX_STEP} at a time)"
        decision = Decision(**base, uncordon=tuple(back), start=tuple(start), create=create,
                            reason=f"scale out from {len(serving)} to {wanted}{step}: "
                                   + ", ".join(steps))
        left = {k: v for k, v in draining.items() if k not in back}
        return decision, Memory(draining=left, last_out=now, last_in=memory.last_in)

    stop = tuple(mid for mid, since in sorted(draining.items())
                 if drained(by_id[mid], now - since))
    left = {k: v for k, v in draining.items() if k not in stop}
    stopping = (f"; stop {len(stop)} drained: " + ", ".join(stop)) if stop else ""
    if wanted < len(serving):
        below = memory.below_since if memory.below_since is not None else now
        peak = max(memory.peak_since, wanted) if memory.below_since is not None else wanted
        waited = now - below
        if waited < stimulus.setting.scale_in_after:
            reason = (f"{len(serving)} serving, {peak} wanted: scale in once that holds for "
                      f"{stimulus.setting.scale_in_after:g} s ({waited:.1f} s so far)")
            return (Decision(**base, stop=stop, reason=reason + stopping),
                    Memory(below_since=below, peak_since=peak, draining=left,
                           last_out=memory.last_out, last_in=memory.last_in))
        cordon = tuple(m.id for m in idlest_first(serving))[:len(serving) - peak]
        reason = (f"scale in from {len(serving)} to {peak}: {peak} or fewer wanted for "
                  f"{waited:.0f} s; cordon {', '.join(cordon)}, stopped once drained")
        return (Decision(**base, cordon=cordon, stop=stop, reason=reason + stopping),
                Memory(draining={**left, **dict.fromkeys(cordon, now)},
                       last_out=memory.last_out, last_in=now))
    reason = f"steady at {len(serving)}" + (f", {len(left)} draining" if left else "")
    return (Decision(**base, stop=stop, reason=reason + stopping),
            Memory(draining=left, last_out=memory.last_out,
                   last_in=now if stop else memory.last_in))


def _machines(n: int) -> str:
    return f"{n} machine" + ("" if n == 1 else "s")


def _count(n: int, what: str, done: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'} {done}" if n else ""
