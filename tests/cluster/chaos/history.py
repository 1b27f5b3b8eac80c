"""A campaign's recorded history, and the pure checks over it.

While a campaign runs (``campaign.py``), every request a client sends is a
``Request`` (which host's API or proxy, when, and what came back) and every
fault is a ``Fault`` (which host, from when until it was healed). Jobs end as
``JobOutcome``, standby ``Pair``s are judged by their final states, and the
kernel is listed before and after as ``Inventory``.
The checks below judge those records alone, with no I/O, so each is tested by
feeding it a history that breaks its rule (``tests/cluster/test_chaos_history.py``).
The machine-level rules (nothing lost, nothing twice, never over capacity)
are ``invariants.py``'s, over the workers' stores.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from pydantic import Field

from .state import Model, Violation

# Kinds of fault after which a host's API (or proxy) may fail to answer until it is healed:
# the host itself is gone, or cut off, or the process that answers is dead.
API_DOWN = frozenset({"host-kill", "link-down", "broker-kill"})
PROXY_DOWN = frozenset({"host-kill", "link-down", "proxy-kill"})
# Outcomes that are not an answer: the client gave up or the connection failed.
UNANSWERED = frozenset({"timeout", "refused", "reset", "error"})
GRACE = 5.0  # seconds after a fault is healed in which its host may still be coming back


class Fault(Model):
    kind: str
    host: str | None  # the host it hits; None for one the whole cluster takes (a key rotation)
    start: float  # seconds from the campaign's start
    end: float  # healed (the host back, the link up...); ``start`` for an instant one
    detail: str = ""


class Request(Model):
    kind: str  # create, start, stop, update, destroy, get, list, proxy, job-submit, job-status
    host: str  # whose API (or proxy) it was sent to
    start: float
    end: float
    outcome: str  # the status code, or one of UNANSWERED


class TaskOutcome(Model):
    index: int
    state: str
    exit_codes: list[int | None] = Field(default_factory=list)


class JobOutcome(Model):
    """A job a client submitted, and what the cluster said of it once quiet."""

    name: str
    acknowledged: bool  # a submit answered 200 (possibly after retries with the same key)
    state: str | None = None  # None: no host knew the job
    tasks: list[TaskOutcome] = Field(default_factory=list)


class Pair(Model):
    """A machine and the standby (``config.standbys``) that stands by for it."""

    primary: str
    standby: str


class Inventory(Model):
    """What a run could leave in the kernel, listed by name."""

    namespaces: list[str] = Field(default_factory=list)
    links: list[str] = Field(default_factory=list)
    nft_tables: list[str] = Field(default_factory=list)
    mounts: list[str] = Field(default_factory=list)
    machine_processes: list[str] = Field(default_factory=list)  # "pid machine-id"


def _disturbed(faults: Iterable[Fault], kinds: frozenset[str], host: str, start: float,
               end: float) -> bool:
    """Whether ``host`` was under one of ``kinds`` at any time in [start, end] (a fault
    counts until ``GRACE`` seconds after it was healed)."""
    return any(f.kind in kinds and f.host == host and f.start <= end and start <= f.end + GRACE
               for f in faults)


def api_answered(requests: list[Request], faults: list[Fault]) -> list[Violation]:
    """Every request to the API of a host that was up answered (any status: a 503 is an
    answer) before the client's timeout."""
    return [Violation(invariant="api-answered", detail=(
                f"{r.kind} to {r.host} at {r.start:.1f}s: {r.outcome} after "
                f"{r.end - r.start:.1f}s, with no fault on that host"))
            for r in requests
            if r.kind != "proxy" and r.outcome in UNANSWERED
            and not _disturbed(faults, API_DOWN, r.host, r.start, r.end)]


def _through_live_proxies(requests: list[Request], faults: list[Fault]) -> list[Request]:
    return [r for r in requests if r.kind == "proxy"
            and not _disturbed(faults, PROXY_DOWN, r.host, r.start, r.end)]


def proxy_failures(requests: list[Request], faults: list[Fault]) -> tuple[int, int]:
    """Requests through the proxies of hosts that were up, and how many of them failed."""
    live = _through_live_proxies(requests, faults)
    return len(live), sum(1 for r in live if r.outcome != "200")


def proxy_budget(requests: list[Request], faults: list[Fault],
                 budget: float) -> list[Violation]:
    """At most ``budget`` (a fraction) of the requests sent through a live host's proxy
    failed, and some were sent at all."""
    live = _through_live_proxies(requests, faults)
    failures = Counter(r.outcome for r in live if r.outcome != "200")
    sent, failed = len(live), failures.total()
    if sent == 0:
        return [Violation(invariant="proxy-budget", detail="no request reached a live proxy")]
    if failed > budget * sent + 1e-9:  # at the budget exactly is within it
        return [Violation(invariant="proxy-budget", detail=(
            f"{failed} of {sent} requests through live proxies failed, budget "
            f"{budget:.1%} ({int(budget * sent)}): {dict(failures.most_common(5))}"))]
    return []


def converged(seconds: float | None, bound: float) -> list[Violation]:
    """Every host's view agreed with the workers' stores within ``bound`` of the last heal."""
    if seconds is None:
        return [Violation(invariant="views-converged",
                          detail=f"views never agreed with the stores (waited {bound:.0f}s)")]
    if seconds > bound:
        return [Violation(invariant="views-converged", detail=(
            f"views agreed {seconds:.1f}s after the last heal (bound {bound:.0f}s)"))]
    return []


def jobs_once(jobs: list[JobOutcome]) -> list[Violation]:
    """No acknowledged job lost; each of its tasks succeeded, with one success recorded."""
    out: list[Violation] = []
    for job in jobs:
        if not job.acknowledged:
            continue
        if job.state is None:
            out.append(Violation(invariant="job-kept", detail=(
                f"job {job.name} was acknowledged but no host knows it")))
            continue
        if job.state != "succeeded":
            out.append(Violation(invariant="job-succeeded", detail=(
                f"job {job.name} ended {job.state}")))
        for task in job.tasks:
            wins = sum(1 for code in task.exit_codes if code == 0)
            if task.state == "succeeded" and wins != 1:
                out.append(Violation(invariant="task-once", detail=(
                    f"task {task.index} of {job.name} recorded {wins} successes "
                    f"(exit codes {task.exit_codes})")))
            elif task.state != "succeeded" and job.state == "succeeded":
                out.append(Violation(invariant="task-once", detail=(
                    f"job {job.name} succeeded with task {task.index} {task.state}")))
    return out


def one_copy(pairs: list[Pair], states: dict[str, str]) -> list[Violation]:
    """Once every host is back and has settled, of each primary and its standby exactly one
    runs: the primary wins when its host returns, and a standby runs only in its place
    (``docs/deploy.md``, Standbys). ``states``: each machine's state in its worker's store."""
    out = []
    for pair in pairs:
        running = [m for m in (pair.primary, pair.standby) if states.get(m) == "started"]
        if len(running) != 1:
            out.append(Violation(invariant="one-copy", detail=(
                f"primary {pair.primary} is {states.get(pair.primary, 'gone')}, its standby "
                f"{pair.standby} is {states.get(pair.standby, 'gone')}: "
                + ("both run" if running else "neither runs"))))
    return out


def kernel_clean(before: Inventory, after: Inventory) -> list[Violation]:
    """Nothing the run made is left: every name in ``after`` was there ``before``."""
    out: list[Violation] = []
    for kind in Inventory.model_fields:
        left = sorted(set(getattr(after, kind)) - set(getattr(before, kind)))
        if left:
            out.append(Violation(invariant="kernel-clean", detail=(
                f"{len(left)} {kind.replace('_', ' ')} left: {left[:5]}")))
    return out

