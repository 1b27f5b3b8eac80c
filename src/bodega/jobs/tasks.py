"""A task's life at its job's home: claims, leases, ends, retries, cancels, deadlines.

Pure: each rule takes a task, the job's policy, the time and (for backoff) a
random draw, and returns the task as it is after; a refusal raises. The home
(``worker/jobs/home.py``) applies one rule per task inside one SQLite
transaction, so of claimants racing for a task exactly one wins.

::

                  claim (one winner; attempts + 1, lease)
      queued ────────────────────────────────────────────▶ running ──release(0)──▶ succeeded
        ▲  ▲                                                 │ │ │
        │  └── release(≠0) or lease lapsed, attempts left ───┘ │ └─ release(none): given back
        │      (waits backoff: base·2^(n-1), capped, jittered)  │    (the attempt is undone)
        │                                                       │
        │      release(≠0) or lapsed, no attempts left ─────────┴──▶ failed
        │
      cancel: queued ──▶ cancelled at once; running ──▶ stopping ("cancelled"): the claimant
      is told (push, renewal answer, /sched/cancellations), and its release ends it cancelled
      deadline: queued ──▶ failed; running ──▶ stopping ("deadline"), ending failed

A lease is renewed by its claimant; a running task whose lease has lapsed is
handled like a failed attempt (its exit code is unknown: ``None``), so a
claimant that died is never waited for beyond its lease.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from enum import StrEnum

from bodega.jobs.backoff import delay
from bodega.model.errors import Conflict


class TaskState(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


TERMINAL = frozenset({TaskState.SUCCEEDED, TaskState.FAILED, TaskState.CANCELLED})
CANCELLED, DEADLINE = "cancelled", "deadline"  # why a running task is being stopped


class Verdict(StrEnum):
    """What a renewal tells the claimant."""

    OK = "ok"  # keep running: the lease is extended
    STOP = "stop"  # stop it (cancelled, or past its deadline), then release it
    LOST = "lost"  # the task is no longer yours (lapsed, requeued, ended): stop, do not release


@dataclass(frozen=True)
class Policy:
    max_attempts: int  # 0: no limit
    backoff: float
    backoff_cap: float
    lease_seconds: float
    deadline_at: float | None = None


@dataclass(frozen=True)
class Task:
    index: int
    state: TaskState = TaskState.QUEUED
    attempts: int = 0  # claims granted (a task given back undoes its claim)
    exit_codes: tuple[int | None, ...] = ()  # one per ended attempt; None: lease lapsed
    claimant: str | None = None
    ref: str | None = None  # what the claim named (a probe): asking again finds the same task
    lease_expires_at: float | None = None
    eligible_at: float = 0.0  # a queued task after a failure waits for its backoff
    started_at: float | None = None
    ended_at: float | None = None
    machine_id: str | None = None  # bodega's workers run an attempt as a machine
    stopping: str | None = None  # CANCELLED or DEADLINE: its claimant is to stop it
    reason: str = ""  # why it last ended, was requeued, or is stopping

    @property
    def finished(self) -> bool:
        return self.state in TERMINAL

    def claimable(self, now: float) -> bool:
        return self.state is TaskState.QUEUED and self.eligible_at <= now


def counts_of(tasks: Iterable[Task]) -> dict[str, int]:
    """How many of ``tasks`` are in each state (every state named, 0 when none)."""
    found = dict.fromkeys((str(s) for s in TaskState), 0)
    for task in tasks:
        found[str(task.state)] += 1
    return found


def past_deadline(policy: Policy, now: float) -> bool:
    return policy.deadline_at is not None and now >= policy.deadline_at


def claim(task: Task, policy: Policy, worker: str, now: float, ref: str | None = None) -> Task:
    """Give the task to ``worker`` with a lease; Conflict if it cannot be claimed now."""
    if task.state is TaskState.RUNNING and ref is not None and task.ref == ref \
            and task.claimant == worker:
        return task  # the same claim asked again (its answer was lost): the same task
    if task.state is not TaskState.QUEUED:
        raise Conflict(f"task {task.index} is {task.state}"
                       + (f" (claimed by {task.claimant})" if task.claimant else ""),
                       status="already_claimed" if task.state is TaskState.RUNNING else
                       "finished")
    if past_deadline(policy, now):
        raise Conflict(f"task {task.index} is past its deadline", status="finished")
    if task.eligible_at > now:
        raise Conflict(f"task {task.index} waits {task.eligible_at - now:.1f}s more after "
                       f"its failed attempt", status="backoff")
    return replace(task, state=TaskState.RUNNING, attempts=task.attempts + 1, claimant=worker,
                   ref=ref, lease_expires_at=now + policy.lease_seconds, started_at=now,
                   ended_at=None, machine_id=None, stopping=None, reason="")


def holds(task: Task, worker: str) -> bool:
    return task.state is TaskState.RUNNING and task.claimant == worker


def renew(task: Task, policy: Policy, worker: str, now: float,
          machine_id: str | None = None, attempt: int | None = None) -> tuple[Task, Verdict]:
    """The claimant's renewal: its lease extended, or told to stop, or that it lost the task.
    ``attempt`` (bodega's workers name it): a renewal of an attempt that is over is LOST,
    even when the same worker holds the next attempt."""
    if not holds(task, worker) or (attempt is not None and attempt != task.attempts):
        return task, Verdict.LOST
    renewed = replace(task, lease_expires_at=now + policy.lease_seconds,
                      machine_id=machine_id or task.machine_id)
    return renewed, Verdict.STOP if task.stopping else Verdict.OK


def release(task: Task, policy: Policy, worker: str, exit_code: int | None, now: float,
            u: float, reason: str = "", attempt: int | None = None,
            machine_id: str | None = None) -> Task:
    """The claimant says the attempt ended with ``exit_code`` (None: it gives the task back).
    ``attempt`` (bodega's workers name it): the end of an attempt that is over already (a
    report sent twice) is refused, never taken for the next attempt the same worker holds.
    ``machine_id``: the machine the attempt ran in, for a task that ended before a renewal
    named it; a task that ended keeps it, one back in the queue has none."""
    if not holds(task, worker):
        raise Conflict(f"task {task.index} is not held by {worker}"
                       + (f" (it is {task.state}"
                          + (f", held by {task.claimant})" if task.claimant else ")")),
                       status="not_claimant")
    if attempt is not None and attempt != task.attempts:
        raise Conflict(f"attempt {attempt} of task {task.index} is over: {worker} holds "
                       f"attempt {task.attempts}", status="not_claimant")
    if machine_id is not None:
        task = replace(task, machine_id=machine_id)
    if exit_code == 0:
        return _ended(task, TaskState.SUCCEEDED, 0, now, reason or "exit code 0")
    if exit_code is None and not task.stopping:
        # Given back: not a failure, the claim is undone and the task runs again at once.
        return replace(task, state=TaskState.QUEUED, attempts=max(0, task.attempts - 1),
                       claimant=None, ref=None, lease_expires_at=None, machine_id=None,
                       started_at=None, eligible_at=now, reason=reason or "given back")
    return _failed_attempt(task, policy, exit_code, now, u,
                           reason or (f"exit code {exit_code}" if exit_code is not None
                                      else "stopped"))


def lapse(task: Task, policy: Policy, now: float, u: float) -> Task | None:
    """A running task whose lease has passed, handled as a failed attempt; None if it holds."""
    if task.state is not TaskState.RUNNING or task.lease_expires_at is None \
            or task.lease_expires_at > now:
        return None
    return _failed_attempt(task, policy, None, now, u,
                           f"lease of {task.claimant} lapsed")


def cancel(task: Task, now: float) -> Task:
    """Queued: dropped at once. Running: its claimant is to stop it. Finished: unchanged."""
    if task.state is TaskState.QUEUED:
        return _ended(task, TaskState.CANCELLED, None, now, "cancelled while queued",
                      record=False)
    if task.state is TaskState.RUNNING and task.stopping is None:
        return replace(task, stopping=CANCELLED, reason="cancelled while running")
    return task


def unmet(task: Task, now: float, why: str) -> Task:
    """A job it runs after failed: a queued task fails without running; others unchanged
    (a waiting job's tasks are all queued)."""
    if task.state is TaskState.QUEUED:
        return _ended(task, TaskState.FAILED, None, now, why, record=False)
    return task


def expire(task: Task, policy: Policy, now: float) -> Task | None:
    """Past the job's deadline: queued fails at once, running is to be stopped; None if not."""
    if not past_deadline(policy, now):
        return None
    if task.state is TaskState.QUEUED:
        return _ended(task, TaskState.FAILED, None, now, "deadline exceeded while queued",
                      record=False)
    if task.state is TaskState.RUNNING and task.stopping is None:
        return replace(task, stopping=DEADLINE, reason="deadline exceeded while running")
    return None


def after_restart(task: Task, policy: Policy, now: float) -> Task:
    """The home was down: claimants could not renew, so no lease lapses before a full term
    from now."""
    if task.state is not TaskState.RUNNING or task.lease_expires_at is None:
        return task
    return replace(task, lease_expires_at=max(task.lease_expires_at, now + policy.lease_seconds))


def _ended(task: Task, state: TaskState, code: int | None, now: float, reason: str, *,
           record: bool = True) -> Task:
    codes = (*task.exit_codes, code) if record else task.exit_codes
    return replace(task, state=state, exit_codes=codes, claimant=task.claimant,
                   lease_expires_at=None, ended_at=now, stopping=None, reason=reason)


def _failed_attempt(task: Task, policy: Policy, code: int | None, now: float, u: float,
                    reason: str) -> Task:
    if task.stopping == CANCELLED:
        return _ended(task, TaskState.CANCELLED, code, now, "cancelled while running")
    if task.stopping == DEADLINE or past_deadline(policy, now):
        return _ended(task, TaskState.FAILED, code, now, f"{reason}; deadline exceeded")
    if policy.max_attempts and task.attempts >= policy.max_attempts:
        return _ended(task, TaskState.FAILED, code, now,
                      f"{reason}; {task.attempts} of {policy.max_attempts} attempts used")
    failures = len(task.exit_codes) + 1  # every earlier end of this task was a failure
    wait = delay(failures, policy.backoff, policy.backoff_cap, u)
    return replace(task, state=TaskState.QUEUED, exit_codes=(*task.exit_codes, code),
                   claimant=None, ref=None, lease_expires_at=None, machine_id=None,
                   eligible_at=now + wait, stopping=None,
                   reason=f"{reason}; retried after {wait:.1f}s")
