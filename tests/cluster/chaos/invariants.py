"""The invariants, as pure functions of a ``Snapshot``: each returns the violations it sees.

A snapshot is taken once the cluster is quiet (faults healed, clients done),
except ``capacity`` which is also sampled while the faults are on: a worker
must never be over its totals, not merely end under them.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable

from .state import Snapshot, StoredMachine, Violation

# Machine states in which the machine's program is meant to be running.
RUNNING = frozenset({"started"})
GONE = "destroyed"


def capacity(s: Snapshot) -> list[Violation]:
    """No worker committed past its totals: by its ledger, and by the processes on it."""
    out: list[Violation] = []
    sizes = {m.id: m for w in s.workers for m in w.machines}
    running: dict[str, set[str]] = defaultdict(set)
    for p in s.processes:
        if p.host is not None and p.machine_id in sizes:
            running[p.host].add(p.machine_id)
    for w in s.workers:
        held = [m for m in w.machines if m.holds_compute]
        live = [r for r in w.reservations if r.live]
        cpu = sum(m.millicpus for m in held) + sum(r.millicpus for r in live)
        mem = sum(m.memory_mb for m in held) + sum(r.memory_mb for r in live)
        if cpu > w.totals.millicpus or mem > w.totals.memory_mb:
            out.append(Violation(invariant="capacity", detail=(
                f"{w.name} ledger holds {cpu} millicpus/{mem} MB of "
                f"{w.totals.millicpus}/{w.totals.memory_mb}")))
        procs = [sizes[i] for i in running.get(w.name, set())]
        cpu = sum(m.millicpus for m in procs)
        mem = sum(m.memory_mb for m in procs)
        if cpu > w.totals.millicpus or mem > w.totals.memory_mb:
            out.append(Violation(invariant="capacity", detail=(
                f"{w.name} runs {len(procs)} machines using {cpu} millicpus/{mem} MB of "
                f"{w.totals.millicpus}/{w.totals.memory_mb}")))
    return out


def creates(s: Snapshot) -> list[Violation]:
    """A create that answered names one machine; one that was refused left nothing behind."""
    out: list[Violation] = []
    where: dict[str, list[str]] = defaultdict(list)
    by_key: Counter[tuple[str, str]] = Counter()
    for w in s.workers:
        for m in w.machines:
            where[m.id].append(w.name)
            if m.idempotency_key:
                by_key[(m.app, m.idempotency_key)] += 1
    for c in s.creates:
        if c.machine_id is not None and len(where.get(c.machine_id, [])) != 1:
            out.append(Violation(invariant="created-exists", detail=(
                f"create {c.key} answered {c.machine_id}, held by {where.get(c.machine_id, [])}")))
        if c.failed and by_key[(c.app, c.key)]:
            out.append(Violation(invariant="failed-create-clean", detail=(
                f"create {c.key} was refused but left {by_key[(c.app, c.key)]} machine(s)")))
    for (app, key), count in by_key.items():
        if count > 1:
            out.append(Violation(invariant="created-once", detail=(
                f"{count} machines for idempotency key {key} of app {app}")))
    for w in s.workers:
        for r in w.reservations:
            if r.live:
                out.append(Violation(invariant="failed-create-clean", detail=(
                    f"{w.name} still holds reservation {r.id} once quiet")))
    return out


def desired(s: Snapshot) -> list[Violation]:
    """Every machine a client was answered about is in a state that answer allows."""
    states = {m.id: m.state for w in s.workers for m in w.machines}
    return [Violation(invariant="desired-state", detail=(
                f"{e.machine_id} is {states.get(e.machine_id, 'missing')}, "
                f"expected one of {sorted(e.states)}; told {e.history}"))
            for e in s.expectations
            if states.get(e.machine_id, "missing") not in e.states
            and not (GONE in e.states and e.machine_id not in states)]


def processes(s: Snapshot) -> list[Violation]:
    """A process runs exactly for each machine recorded as running, on its own host."""
    out: list[Violation] = []
    owner: dict[str, tuple[str, StoredMachine]] = {
        m.id: (w.name, m) for w in s.workers for m in w.machines}
    seen: dict[str, set[str | None]] = defaultdict(set)
    for p in s.processes:
        seen[p.machine_id].add(p.host)
        recorded = owner.get(p.machine_id)
        if recorded is None or recorded[1].state not in RUNNING:
            state = recorded[1].state if recorded else "unknown"
            out.append(Violation(invariant="orphan-process", detail=(
                f"pid {p.pid} runs machine {p.machine_id} which is {state}")))
        elif p.host != recorded[0]:
            out.append(Violation(invariant="orphan-process", detail=(
                f"pid {p.pid} of {p.machine_id} runs on {p.host}, recorded on {recorded[0]}")))
    for machine_id, (worker, m) in owner.items():
        if m.state in RUNNING and worker not in seen.get(machine_id, set()):
            out.append(Violation(invariant="running-has-process", detail=(
                f"{machine_id} on {worker} is {m.state} but no process of it runs")))
    return out


def operations(s: Snapshot) -> list[Violation]:
    return [Violation(invariant="ops-finished", detail=f"{w.name}: {op}")
            for w in s.workers for op in w.unfinished_ops]


def views(s: Snapshot) -> list[Violation]:
    """Every node's registry view holds the live machines the workers' stores hold."""
    truth = {m.id: m.state for w in s.workers for m in w.machines if m.state != GONE}
    out: list[Violation] = []
    for v in s.views:
        live = {k: st for k, st in v.machines.items() if st != GONE}
        if live != truth:
            missing = sorted(set(truth) - set(live))
            extra = sorted(set(live) - set(truth))
            stale = sorted(k for k in set(live) & set(truth) if live[k] != truth[k])
            out.append(Violation(invariant="views-converged", detail=(
                f"{v.node}: missing {missing[:5]} extra {extra[:5]} stale {stale[:5]} "
                f"({len(missing)}/{len(extra)}/{len(stale)})")))
    return out


CHECKS: dict[str, Callable[[Snapshot], list[Violation]]] = {
    "capacity": capacity, "creates": creates, "desired": desired,
    "processes": processes, "operations": operations, "views": views,
}


def check(s: Snapshot, only: tuple[str, ...] = tuple(CHECKS)) -> list[Violation]:
    return [v for name in only for v in CHECKS[name](s)]
