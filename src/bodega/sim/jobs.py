"""Batch schedulers on Sparrow's setup: how long a job of many short tasks takes.

Workers of one slot each; jobs of ``tasks_min``..``tasks_max`` tasks (uniform)
arrive as a Poisson process at the rate that keeps ``load`` of the slots busy;
tasks last an exponential ``task_mean`` (100 ms); a message takes ``delay``
(0.5 ms) each way. A job's response time is from its arrival to its last
task's end. The schedulers (Ousterhout et al., "Sparrow", SOSP 2013):

- ``per-task``: each task samples d workers and queues on the shortest;
- ``batch``: a job samples d·m workers, its m tasks queue on the m shortest;
- ``late-binding`` (bodega's own workers): d·m reservations queue on random
  workers; a worker whose reservation reaches its head asks the job for a
  task (one round trip, the slot held meanwhile) and gets one while any is
  left, else a cancel; the first m askers get the tasks;
- ``claim`` (the article's claim mode, external workers): one queue per
  job's home; a worker that ends a task asks at once, an idle one every
  ``poll`` seconds; a claim is one round trip;
- ``omniscient``: one queue, a free slot takes the next task at once, no
  delay: the ideal the others are measured against.

A fractional d is rounded per job (or per task) at random, so d = 1.1 means a
tenth of them get a second choice. Queue lengths are read when the probe's
answer arrives (the state a scheduler would see). Pure: no clock, no I/O.
"""

from __future__ import annotations

import heapq
import math
import random
from collections import deque
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field

SCHEDULERS = ("per-task", "batch", "late-binding", "claim", "omniscient")
SAMPLING = ("per-task", "batch", "late-binding")  # the schedulers that take a probe ratio d
D_SWEPT = (1.0, 1.1, 1.5, 2.0, 3.0)  # Sparrow's probe ratios


class JobSimParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    workers: int = Field(default=1000, ge=1)
    load: float = Field(default=0.8, gt=0, lt=1)
    d: float = Field(default=2.0, ge=1, le=10)
    jobs: int = Field(default=1000, ge=1)  # measured, after the warm-up ones
    warmup: int = Field(default=200, ge=0)
    tasks_min: int = Field(default=10, ge=1)
    tasks_max: int = Field(default=100, ge=1)
    task_mean: float = Field(default=0.1, gt=0)
    delay: float = Field(default=0.0005, ge=0)  # one way
    poll: float = Field(default=0.05, gt=0)  # claim mode: an idle worker asks this often
    seed: int = 1


@dataclass(frozen=True)
class JobSimResult:
    scheduler: str
    d: float
    median: float  # job response time, seconds
    p99: float


@dataclass
class _Job:
    arrived: float
    durations: list[float]  # the tasks not yet started
    left: int  # tasks not yet finished
    measured: bool
    finished: float = 0.0


@dataclass
class _Worker:
    queue: deque[tuple[_Job, float | None]] = field(default_factory=deque)  # None: reserved
    busy: bool = False

    def length(self) -> int:
        return len(self.queue) + self.busy


@dataclass(frozen=True)
class Arrive:
    job: _Job


@dataclass(frozen=True)
class End:  # a task's end on worker w
    w: int
    job: _Job


@dataclass(frozen=True)
class Place:  # the sampled workers' lengths are back: queue the tasks on the shortest
    sampled: list[int]
    tasks: list[tuple[_Job, float]]


@dataclass(frozen=True)
class Enqueue:  # a task (duration) or a reservation (None) reaches worker w
    w: int
    job: _Job
    duration: float | None


@dataclass(frozen=True)
class Bound:  # the job's answer to a reservation's ask is back at worker w
    w: int
    job: _Job


@dataclass(frozen=True)
class Ask:  # claim mode: worker w asks the queue
    w: int


@dataclass(frozen=True)
class Claimed:  # claim mode: worker w's ask reaches the queue
    w: int


Event = Arrive | End | Place | Enqueue | Bound | Ask | Claimed


class _Run:
    def __init__(self, params: JobSimParams, scheduler: str) -> None:
        self.p, self.scheduler = params, scheduler
        self.rng = random.Random(params.seed)
        self.now = 0.0
        self.events: list[tuple[float, int, Event]] = []
        self.seq = 0
        self.workers = [_Worker() for _ in range(params.workers)]
        self.central: deque[tuple[_Job, float]] = deque()  # claim and omniscient
        self.idle: list[int] = []  # omniscient: free slots
        self.to_finish = params.jobs
        self.done: list[float] = []

    def at(self, when: float, event: Event) -> None:
        self.seq += 1
        heapq.heappush(self.events, (when, self.seq, event))

    def rounded(self, x: float) -> int:
        low = math.floor(x)
        return low + (self.rng.random() < x - low)

    # -- a worker's slot ------------------------------------------------------------------------
    def next_on(self, w: int) -> None:
        worker = self.workers[w]
        if worker.busy or not worker.queue:
            return
        job, duration = worker.queue.popleft()
        worker.busy = True
        if duration is not None:
            self.at(self.now + duration, End(w, job))
        else:  # a reservation: ask its job for a task, the slot held for the round trip
            self.at(self.now + 2 * self.p.delay, Bound(w, job))

    def start(self, w: int, job: _Job) -> None:
        self.at(self.now + job.durations.pop(), End(w, job))

    def ended(self, w: int, job: _Job) -> None:
        job.left -= 1
        if job.left == 0 and job.measured:
            self.done.append(self.now - job.arrived)
            self.to_finish -= 1
        self.workers[w].busy = False
        if self.scheduler == "claim":
            self.at(self.now, Ask(w))
        elif self.scheduler == "omniscient":
            self.idle.append(w)
            self.dispatch()
        else:
            self.next_on(w)

    # -- schedulers ---------------------------------------------------------------------------
    def arrive(self, job: _Job) -> None:
        m, n = len(job.durations), self.p.workers
        if self.scheduler in ("claim", "omniscient"):
            self.central.extend((job, d) for d in job.durations)
            job.durations = []
            if self.scheduler == "omniscient":
                self.dispatch()
        elif self.scheduler == "per-task":
            for duration in job.durations:
                sampled = self.rng.sample(range(n), min(n, self.rounded(self.p.d)))
                self.at(self.now + 2 * self.p.delay, Place(sampled, [(job, duration)]))
            job.durations = []
        elif self.scheduler == "batch":
            sampled = self.rng.sample(range(n), min(n, max(m, self.rounded(self.p.d * m))))
            self.at(self.now + 2 * self.p.delay,
                    Place(sampled, [(job, d) for d in job.durations]))
            job.durations = []
        else:  # late binding
            probes = max(m, self.rounded(self.p.d * m))
            for w in self.rng.sample(range(n), min(n, probes)):
                self.at(self.now + self.p.delay, Enqueue(w, job, None))

    def place(self, sampled: list[int], tasks: list[tuple[_Job, float]]) -> None:
        shortest = sorted(sampled, key=lambda w: (self.workers[w].length(), self.rng.random()))
        for w, task in zip(shortest, tasks, strict=False):
            self.at(self.now + self.p.delay, Enqueue(w, *task))

    def dispatch(self) -> None:
        while self.idle and self.central:
            job, duration = self.central.popleft()
            self.at(self.now + duration, End(self.idle.pop(), job))

    # -- the loop -------------------------------------------------------------------------------
    def run(self) -> JobSimResult:
        p = self.p
        mean_tasks = (p.tasks_min + p.tasks_max) / 2
        rate = p.load * p.workers / (mean_tasks * p.task_mean)
        t = 0.0
        for i in range(p.warmup + p.jobs):
            t += self.rng.expovariate(rate)
            m = self.rng.randint(p.tasks_min, p.tasks_max)
            durations = [self.rng.expovariate(1 / p.task_mean) for _ in range(m)]
            self.at(t, Arrive(_Job(t, durations, m, i >= p.warmup)))
        if self.scheduler == "claim":
            for w in range(p.workers):
                self.at(self.rng.uniform(0, p.poll), Ask(w))
        self.idle = list(range(p.workers)) if self.scheduler == "omniscient" else []
        while self.to_finish > 0:
            self.now, _, event = heapq.heappop(self.events)
            self.handle(event)
        self.done.sort()
        return JobSimResult(self.scheduler, p.d, _quantile(self.done, 0.5),
                            _quantile(self.done, 0.99))

    def handle(self, event: Event) -> None:
        match event:
            case Arrive(job):
                self.arrive(job)
            case End(w, job):
                self.ended(w, job)
            case Place(sampled, tasks):
                self.place(sampled, tasks)
            case Enqueue(w, job, duration):
                self.workers[w].queue.append((job, duration))
                self.next_on(w)
            case Bound(w, job):
                if job.durations:
                    self.start(w, job)
                else:  # every task taken by earlier askers: the reservation is cancelled
                    self.workers[w].busy = False
                    self.next_on(w)
            case Ask(w):
                self.workers[w].busy = True
                self.at(self.now + self.p.delay, Claimed(w))
            case Claimed(w):  # the home decides; its answer takes another delay back
                if self.central:
                    job, duration = self.central.popleft()
                    self.at(self.now + self.p.delay + duration, End(w, job))
                else:
                    self.workers[w].busy = False
                    self.at(self.now + self.p.delay + self.p.poll, Ask(w))


def _quantile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    return values[min(len(values) - 1, int(q * len(values)))]


def simulate(params: JobSimParams, scheduler: str) -> JobSimResult:
    if scheduler not in SCHEDULERS:
        raise ValueError(f"unknown scheduler {scheduler!r}: one of {', '.join(SCHEDULERS)}")
    return _Run(params, scheduler).run()


def sweep(params: JobSimParams, loads: tuple[float, ...] = (0.8, 0.9),
          ds: tuple[float, ...] = D_SWEPT) -> list[tuple[float, JobSimResult, JobSimResult]]:
    """Every scheduler at every load (the sampling ones at every d), each with the omniscient
    one of the same load and seed: (load, result, ideal)."""
    rows: list[tuple[float, JobSimResult, JobSimResult]] = []
    for load in loads:
        ideal = simulate(params.model_copy(update={"load": load}), "omniscient")
        for scheduler in SCHEDULERS:
            for d in ds if scheduler in SAMPLING else (params.d,):
                if scheduler == "omniscient":
                    rows.append((load, ideal, ideal))
                    continue
                one = params.model_copy(update={"load": load, "d": d})
                rows.append((load, simulate(one, scheduler), ideal))
    return rows
