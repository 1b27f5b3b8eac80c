"""What a simulation is told (``SimConfig``) and what it measures (``RunResult``, ``Sample``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field


class SimConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    brokers: int = Field(default=3, ge=1)
    gossip_delay: float = Field(default=2.0, ge=0)  # seconds until a change reaches a broker
    jitter: float = Field(default=0.5, ge=0, le=1)  # each delay is drawn in delay * (1 ± jitter)
    max_attempts: int = Field(default=8, ge=1)  # workers asked before the create fails
    sample_every: float = Field(default=300.0, gt=0)  # seconds between utilization samples
    warmup: float = Field(default=0.0, ge=0)  # samples before this are left out of measures
    routing: Literal["random", "round-robin"] = "random"  # which broker gets each create
    start_seconds: float = Field(default=2.0, ge=0)  # a create whose image is cached
    pull_seconds: float = Field(default=20.0, ge=0)  # added when the host lacks the image
    detect_seconds: float = Field(default=5.0, ge=0)  # until membership says a host is dead
    recreate_after: float = Field(default=60.0, ge=0)  # lost, no standby: created again
    seed: int = 1


@dataclass
class Sample:
    time: float
    utilization: npt.NDArray[np.float64]  # per host
    machines: npt.NDArray[np.int64]  # running machines per host: what its death takes down
    unprotected: npt.NDArray[np.int64]  # of those, machines with no standby on another host


@dataclass
class RunResult:
    policy: str
    config: SimConfig
    hosts: list[str]
    creates: int = 0  # the trace's and the re-creates of lost machines
    placed: int = 0
    rejected: int = 0
    rejected_with_room: int = 0  # rejected while some host in the region had room for it
    refusals: int = 0  # a worker said no to a broker that thought it had room
    unreachable: int = 0  # a broker asked a dead host it still believed alive
    standbys: int = 0
    standbys_rejected: int = 0
    pulls: int = 0  # creates that pulled the image
    create_seconds: list[float] = field(default_factory=list)
    host_deaths: int = 0
    machines_lost: int = 0
    takeovers: int = 0  # lost machines whose standby started
    takeovers_failed: int = 0  # a standby that could not start (its host full or dead)
    recreated: int = 0  # lost machines created again elsewhere
    recreates_rejected: int = 0
    decision_seconds: list[float] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)
