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
warm-up is needed; for d >= 2 it is the n -> infinity law, and the default
warm-up (``default_warmup``) gives the finite system ten mean times in
system to settle.
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
    jobs: int = Field(default=200_000, ge=1)  # measured jobs, after the warm-up ones
    warmup: int | None = Field(default=None, ge=0)  # None: ``default_warmup``
    seed: int = 1

    @property
    def warmup_jobs(self) -> int:
        return default_warmup(self) if self.warmup is None else self.warmup


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


def default_warmup(params: SupermarketParams) -> int:
    """Jobs to run before measuring: none for one choice (the start is stationary), else the
    arrivals of ten mean times in system (the start is the n -> infinity law)."""
    if params.choices == 1:
        return 0
    spell = 10.0 * expected_time(params.load, params.choices)
    return math.ceil(spell * params.load * params.servers)


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
    warmup = p.warmup_jobs
    now, total, measured = 0.0, 0.0, 0
    seen = [0] * (levels + 1)
    for job in range(warmup + p.jobs):
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
