"""Health checks, the pure part: what to probe, when, and what a result changes.

A machine's checks are its config's ``checks`` (by name) and each service's
``checks``, named as Fly names them (``servicecheck-00-http-8080``). The
worker's shell (``worker/ops/health.py``) probes them; this module says which
checks a config defines, when each is next due, and how the recorded states
change with a result. Results belong to one run of the machine (its
``start_seq``): a restart starts every check over at "warning", so a proxy
never trusts a result from the process before.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bodega.model.duration import parse_duration
from bodega.model.json import JsonObject
from bodega.model.machine import CheckStatus
from bodega.model.machine_config import Check, MachineConfig

DEFAULT_INTERVAL = 15.0  # fly.toml's defaults
DEFAULT_TIMEOUT = 2.0
MIN_INTERVAL = 0.1  # a probe at most ten times a second, whatever the config says
SERVICE_PREFIX = "servicecheck-"
PASSING, WARNING, CRITICAL = "passing", "warning", "critical"
WAITING = "waiting for the first check"
MAX_OUTPUT = 512  # an output is a line or two; a body is never stored whole


@dataclass(frozen=True)
class CheckSpec:
    name: str
    type: str  # tcp or http
    port: int
    interval: float
    timeout: float
    grace_period: float
    path: str = "/"
    method: str = "GET"
    protocol: str = "http"  # http or https
    headers: tuple[tuple[str, str], ...] = ()
    tls_skip_verify: bool = False
    service: bool = False  # a service's check: the proxy routes only while it passes


def _spec(name: str, check: Check, port: int | None, service: bool) -> CheckSpec | None:
    port = check.port or port
    if port is None:
        return None  # a top-level check without a port probes nothing
    kind = check.type or ("http" if check.path else "tcp")
    headers = tuple((h.name, value) for h in check.headers or [] for value in h.values)
    return CheckSpec(
        name=name, type=kind, port=port,
        interval=max(MIN_INTERVAL, parse_duration(check.interval, DEFAULT_INTERVAL)),
        timeout=max(MIN_INTERVAL, parse_duration(check.timeout, DEFAULT_TIMEOUT)),
        grace_period=parse_duration(check.grace_period, 0.0),
        path=check.path or "/", method=(check.method or "GET").upper(),
        protocol=check.protocol or "http", headers=headers,
        tls_skip_verify=bool(check.tls_skip_verify), service=service,
    )


def specs(config: MachineConfig) -> list[CheckSpec]:
    """Every check the config defines: top-level ones by name, then each service's."""
    out: list[CheckSpec] = []
    for name in sorted(config.checks or {}):
        spec = _spec(name, (config.checks or {})[name], None, service=False)
        if spec is not None:
            out.append(spec)
    index = 0
    for service in config.services or []:
        for check in service.checks or []:
            kind = check.type or ("http" if check.path else "tcp")
            port = check.port or service.internal_port
            spec = _spec(f"{SERVICE_PREFIX}{index:02d}-{kind}-{port}", check,
                          service.internal_port, service=True)
            index += 1
            if spec is not None:
                out.append(spec)
    return out


def first_due(spec: CheckSpec, started_at: float) -> float:
    """When a run's first probe is due: after the grace period."""
    return started_at + spec.grace_period


def next_due(spec: CheckSpec, ran_at: float) -> float:
    return ran_at + spec.interval


def clip_output(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= MAX_OUTPUT else line[:MAX_OUTPUT - 1] + "…"


@dataclass(frozen=True)
class CheckStates:
    """The recorded states of one run's checks: name -> {status, output, updated_at}."""

    start_seq: int
    results: Mapping[str, Mapping[str, Any]]

    def to_json(self) -> JsonObject:  # as the machine's record stores it
        return {"start_seq": self.start_seq,
                "results": {name: dict(r) for name, r in self.results.items()}}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CheckStates:
        return cls(int(data["start_seq"]), dict(data.get("results") or {}))

    def status(self, name: str) -> str | None:
        result = self.results.get(name)
        return None if result is None else str(result["status"])

    def with_result(self, name: str, status: str, output: str, at: str) -> CheckStates:
        results = dict(self.results)
        results[name] = {"status": status, "output": output, "updated_at": at}
        return CheckStates(self.start_seq, results)


def current(states: CheckStates | None, start_seq: int) -> CheckStates:
    """The states of run ``start_seq``: empty when what is recorded is a former run's."""
    if states is None or states.start_seq != start_seq:
        return CheckStates(start_seq, {})
    return states


def statuses(config: MachineConfig, states: CheckStates | None, start_seq: int,
             started: bool, created_at: str) -> list[CheckStatus]:
    """The machine object's ``checks``, as Fly returns them; [] when nothing runs them."""
    if not started:
        return []
    run = current(states, start_seq)
    out = []
    for spec in specs(config):
        result = run.results.get(spec.name)
        if result is None:
            out.append(CheckStatus(name=spec.name, status=WARNING, output=WAITING,
                                   updated_at=created_at))
        else:
            out.append(CheckStatus.model_validate({"name": spec.name, **result}))
    return out
