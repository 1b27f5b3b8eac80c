"""The supermarket model: the check that the simulator's queueing arithmetic is right.

``n`` FIFO servers, Poisson arrivals at rate ``load * n``, exponential
service of mean 1; each arrival samples ``d`` servers uniformly (with
replacement) and joins the one with the shortest queue, ties at random. As
``n`` grows, the fraction of servers with at least ``i`` jobs tends to
``s_i = load^((d^i - 1)/(d - 1))`` (Vvedenskaya, Dobrushin and Karpelevich;
Mitzenmacher), so by Little's law the mean time in system tends to

    T_d(load) = sum_{i>=1} load^((d^i - d)/(d - 1))       for d >= 2
    T_1(load) = 1 / (1 - load)                             (M/M/1)

Going from one choice to two cuts the time in system from linear in
1/(1-load) to logarithmic: the power of two choices.

Queues do not start empty: an empty start relaxes towards the stationary
state in a time that grows like 1/(1 - sqrt(load))^2 for one choice (380
time units at load 0.9, 40,000 at 0.99), so any fixed warm-up is too short
near load 1 and the mean comes out low. Each queue starts instead with a
length drawn from the stationary law, ``P(length >= i) = s_i``, the jobs in
it holding fresh exponential services (memoryless, so this is exact for the
job in service too). For one choice every server is an independent M/M/1
fed by a Poisson stream, so that start *is* the stationary state and no
warm-up is needed; for d >= 2 it is the n -> infinity law, and the finite
system gets a warm-up to settle.

How long to run (``default_run``). The mean time in system follows the
number of jobs per server, m = load * T_d, and that number wanders. Jobs
leave at the busy fraction, and an excess of jobs per server raises it by
about 1/tau, tau = dm/dload (along the stationary states, whose busy
fraction is their load): an excess drains in tau time units. tau is
1/(1-load)^2 for one choice and about 1.3/(1-load) for two (12 at load 0.9,
26 at 0.95, 139 at 0.99). A run of J jobs then has a relative standard
error of about (tau / T_d) sqrt(2 / J) on the mean: the jobs needed for a
given precision grow like 1/(1-load)^2. The default measures enough jobs
for 1 % (floor 200,000, cap 4,000,000 so that load 0.99 takes seconds, not
minutes), after a warm-up of three tau or ten mean times in system,
whichever is longer.

How to tell a run was too short (``busy_fraction_off``). Each job brings one
unit of work on average, so the busy fraction over a run is the load up to
the noise of the work and the arrival times, sqrt(load (1 + load) / J) with
the one-server probe that measures it. A run whose number of jobs per server
sits high has its busy fraction high too, and its mean time in system: off
by (tau / (load T_d)) times as much in relative terms (8 at load 0.95, 26 at
0.99). So a busy fraction off the load says the mean is off.
"""

from __future__ import annotations

import math
import random
from collections import deque
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field


class SupermarketParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    servers: int = Field(default=1000, ge=1)
    load: float = Field(default=0.9, gt=0, lt=1)  # lambda: arrivals per server per unit time
    choices: int = Field(default=2, ge=1)
    jobs: int | None = Field(default=None, ge=1)  # measured, after the warm-up; None: default
    warmup: int | None = Field(default=None, ge=0)  # None: ``default_run``'s
    seed: int = 1

    @property
    def run(self) -> RunLength:
        """The warm-up and measured jobs: those given, else ``default_run``'s."""
        chosen = default_run(self.load, self.choices, self.servers)
        return RunLength(warmup=chosen.warmup if self.warmup is None else self.warmup,
                         jobs=chosen.jobs if self.jobs is None else self.jobs)


@dataclass(frozen=True)
class RunLength:
    warmup: int  # jobs run first and not measured
    jobs: int  # jobs measured


@dataclass(frozen=True)
class SupermarketResult:
    mean_time: float  # mean time in system of the measured jobs
    at_least: tuple[float, ...]  # fraction of servers with >= i jobs, i = 1.., seen by arrivals
    expected_time: float
    expected_at_least: tuple[float, ...]


def expected_fraction(load: float, choices: int, i: int) -> float:
    """s_i: the limiting fraction of servers with at least ``i`` jobs."""
    if choices == 1:
        return float(load**i)
    return float(load ** ((choices**i - 1) / (choices - 1)))


def expected_time(load: float, choices: int) -> float:
    """T_d(load): the limiting mean time in system (service time included)."""
    if not 0 < load < 1:
        raise ValueError("load must be between 0 and 1 (exclusive)")
    if choices < 1:
        raise ValueError("choices must be at least 1")
    if choices == 1:
        return 1.0 / (1.0 - load)
    total, i = 0.0, 1
    while True:
        term = float(load ** ((choices**i - choices) / (choices - 1)))
        total += term
        if term < 1e-15:
            return total
        i += 1


TARGET_ERROR = 0.01  # the default run's relative standard error of the mean time in system
MIN_JOBS = 200_000  # below this the s_i estimates are noisy even where the mean is not
MAX_JOBS = 4_000_000  # about 10 s at 400,000 jobs/s: load 0.99 takes seconds, not minutes


def relaxation_time(load: float, choices: int) -> float:
    """tau = dm/dload, m = load * T_d(load) the jobs per server: the time an excess of them
    takes to drain (1/(1-load)^2 for one choice, about 1.3/(1-load) for two)."""
    if choices == 1:
        return 1.0 / (1.0 - load) ** 2
    # d/dload of sum_i s_i = sum_i e_i load^(e_i - 1), e_i = (d^i - 1)/(d - 1).
    total, i = 0.0, 1
    while True:
        power = (choices**i - 1) / (choices - 1)
        term = float(power * load ** (power - 1))
        total += term
        if term < 1e-15:
            return total
        i += 1


def mean_time_error(load: float, choices: int, servers: int, jobs: int) -> float:
    """The expected relative standard error of the mean time in system over ``jobs`` jobs."""
    if choices == 1:
        # Each server is its own M/M/1 queue, started stationary: a mean over a run is never
        # further off than the start itself, 1/sqrt(load n) of it.
        return min(long_run_error(load, choices, jobs), 1 / math.sqrt(load * servers))
    return long_run_error(load, choices, jobs)


def long_run_error(load: float, choices: int, jobs: int) -> float:
    """The relative standard error of the mean over a run much longer than tau."""
    if choices == 1:
        # Whitt: the time average of an M/M/1 queue's length over L time units has variance
        # 2 load (1 + load) / ((1 - load)^4 L); over n servers, with J = load n L.
        return math.sqrt(2 * (1 + load) / jobs) / (1 - load)
    # The jobs per server relax like an Ornstein-Uhlenbeck process with time constant tau,
    # pushed by arrivals and departures (2 load n per unit time): its time average over L
    # has variance 2 load tau^2 / (n L) = 2 (load tau)^2 / J, against a mean of load T_d.
    return relaxation_time(load, choices) / expected_time(load, choices) * math.sqrt(2 / jobs)


def default_run(load: float, choices: int, servers: int) -> RunLength:
    """Enough measured jobs for ``TARGET_ERROR`` on the mean, within ``MIN_JOBS`` and
    ``MAX_JOBS``; no warm-up for one choice (the start is stationary), else the arrivals of
    three relaxation times or ten mean times in system, whichever is longer (the start is
    the n -> infinity law, and the finite system's jobs per server settle in tau)."""
    needed = (long_run_error(load, choices, 1) / TARGET_ERROR) ** 2  # the error goes as 1/sqrt(J)
    if mean_time_error(load, choices, servers, MIN_JOBS) <= TARGET_ERROR:
        needed = MIN_JOBS  # one choice over many servers: the stationary start is enough
    jobs = min(max(1000 * math.ceil(needed / 1000), MIN_JOBS), MAX_JOBS)
    if choices == 1:
        return RunLength(warmup=0, jobs=jobs)
    spell = max(3 * relaxation_time(load, choices), 10 * expected_time(load, choices))
    return RunLength(warmup=math.ceil(spell * load * servers), jobs=jobs)


def busy_error(load: float, jobs: int) -> float:
    """The standard error of the busy fraction measured over ``jobs`` jobs. The work done is
    the work brought, 2 / J in relative variance from the J services and the arrival times;
    the one server probed per arrival adds (1 - load) / (load J). In all,
    load^2 (2 + (1 - load) / load) / J = load (1 + load) / J."""
    return math.sqrt(load * (1 + load) / jobs)


def busy_tolerance(params: SupermarketParams) -> float:
    """How far a run's busy fraction may stray from its load: three standard errors of a run
    of the default length, or of its own if longer. A shorter run is held to the default's
    (its own, wider, would excuse the very error it is too short to avoid); beyond three
    standard errors a default run warns about once in 370."""
    chosen = default_run(params.load, params.choices, params.servers)
    return 3 * busy_error(params.load, max(params.run.jobs, chosen.jobs))


def busy_fraction_off(busy: float, params: SupermarketParams) -> bool:
    """Whether a run's busy fraction says its mean time in system is off too."""
    return abs(busy - params.load) > busy_tolerance(params)


def stationary_length(rng: random.Random, load: float, choices: int) -> int:
    """A queue length drawn from the stationary law ``P(length >= i) = s_i``."""
    u = 1.0 - rng.random()  # in (0, 1]
    if choices == 1:  # geometric: P(length >= i) = load^i
        return int(math.log(u) / math.log(load))
    length = 0
    while u < expected_fraction(load, choices, length + 1):
        length += 1
    return length


def stationary_queues(rng: random.Random, params: SupermarketParams) -> list[deque[float]]:
    """Every server's queue at time 0, as the departure times of the jobs in it."""
    queues: list[deque[float]] = []
    for _ in range(params.servers):
        queue: deque[float] = deque()
        done = 0.0
        for _ in range(stationary_length(rng, params.load, params.choices)):
            done += rng.expovariate(1.0)
            queue.append(done)
        queues.append(queue)
    return queues


def simulate(params: SupermarketParams, levels: int = 4) -> SupermarketResult:
    """Run the model; each arrival also records, before joining, the queue lengths of one
    uniformly chosen server (Poisson arrivals see time averages), which estimates s_i."""
    p, rng = params, random.Random(params.seed)
    # Each server's queue, as the departure times of the jobs in it (FIFO: increasing).
    queues = stationary_queues(rng, p)
    rate = p.load * p.servers
    run = p.run
    warmup = run.warmup
    now, total, measured = 0.0, 0.0, 0
    seen = [0] * (levels + 1)
    for job in range(warmup + run.jobs):
        now += rng.expovariate(rate)
        best, best_len = -1, -1
        for _ in range(p.choices):
            k = rng.randrange(p.servers)
            queue = queues[k]
            while queue and queue[0] <= now:
                queue.popleft()
            if best < 0 or len(queue) < best_len or (len(queue) == best_len
                                                     and rng.random() < 0.5):
                best, best_len = k, len(queue)
        probe = queues[rng.randrange(p.servers)]
        while probe and probe[0] <= now:
            probe.popleft()
        queue = queues[best]
        done = max(now, queue[-1] if queue else now) + rng.expovariate(1.0)
        queue.append(done)
        if job >= warmup:
            measured += 1
            total += done - now
            for i in range(1, min(len(probe), levels) + 1):
                seen[i] += 1
    return SupermarketResult(
        mean_time=total / measured,
        at_least=tuple(seen[i] / measured for i in range(1, levels + 1)),
        expected_time=expected_time(p.load, p.choices),
        expected_at_least=tuple(expected_fraction(p.load, p.choices, i)
                                for i in range(1, levels + 1)))
