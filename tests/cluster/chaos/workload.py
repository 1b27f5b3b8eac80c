"""Clients of the public API: concurrent creates, starts, stops, updates and destroys.

Each actor owns the machines it created and sends one request at a time per
machine, as a deploy tool would, to either broker; on no answer (connection
refused or reset, a 5xx) it retries on the other broker, creates with the
same idempotency key. What it was told becomes the ``CreateOutcome`` and
``Expectation`` records the invariants are checked against: a definite answer
(2xx, 4xx) pins the state, an unanswered request allows either state.
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx

from .history import Request
from .state import CreateOutcome, Expectation

MACHINE_SIZE = {"cpus": 1, "memory_mb": 256, "cpu_kind": "shared"}
ATTEMPTS = 5
MORE = 6
TARGET = {"start": "started", "stop": "stopped", "update": "started", "destroy": "destroyed"}
CHANGES = {"stop": 3, "start": 3, "update": 1, "destroy": 2}
READS = {**CHANGES, "get": 6, "list": 2}  # a campaign's mix: clients also look, as tools do


def config(marker: str, generation: int = 0) -> dict[str, Any]:
    return {"image": "local/sleep", "guest": MACHINE_SIZE,
            "init": {"exec": ["sleep", "3600"]},
            "env": {"CHAOS_RUN": marker, "GENERATION": str(generation)}}


@dataclass
class Ledger:
    """Everything the clients were told, shared by the actors of one scenario."""

    creates: list[CreateOutcome] = field(default_factory=list)
    allowed: dict[str, set[str]] = field(default_factory=dict)
    answers: Counter[str] = field(default_factory=Counter)
    operations: int = 0
    history: dict[str, list[str]] = field(default_factory=dict)  # machine -> what it was told
    requests: list[Request] | None = None  # every try, when a campaign records them
    hosts: dict[str, str] = field(default_factory=dict)  # API base URL -> host name
    t0: float = field(default_factory=time.monotonic)

    def record(self, kind: str, api: httpx.AsyncClient, start: float, outcome: str) -> None:
        if self.requests is not None:
            url = str(api.base_url).rstrip("/")
            self.requests.append(Request(kind=kind, host=self.hosts.get(url, url),
                                         start=start - self.t0,
                                         end=time.monotonic() - self.t0, outcome=outcome))

    def expectations(self) -> list[Expectation]:
        return [Expectation(machine_id=m, states=sorted(s), history=self.history.get(m, [])[-4:])
                for m, s in self.allowed.items()]


@dataclass
class Client:
    apis: list[httpx.AsyncClient]
    ledger: Ledger
    app: str
    rng: random.Random

    async def send(self, method: str, path: str, kind: str = "",
                   **kw: Any) -> tuple[httpx.Response | None, bool]:
        """The answer of the first broker that gives a definite one (None if none did), and
        whether an earlier try went unanswered: it may have happened, whatever the answer."""
        self.ledger.operations += 1
        first = self.rng.randrange(len(self.apis))
        unanswered = False
        for attempt in range(ATTEMPTS):
            api = self.apis[(first + attempt) % len(self.apis)]
            start = time.monotonic()
            try:
                response = await api.request(method, path, **kw)
            except httpx.TransportError as exc:
                self.ledger.answers[type(exc).__name__] += 1
                self.ledger.record(kind, api, start, unanswered_as(exc))
            else:
                self.ledger.answers[str(response.status_code)] += 1
                self.ledger.record(kind, api, start, str(response.status_code))
                if response.status_code < 500:
                    return response, unanswered
            unanswered = True
            await asyncio.sleep(0.3 * (attempt + 1))
        return None, True

    async def create(self, region: str) -> str | None:
        key = f"chaos-{uuid.uuid4().hex[:16]}"
        response, unsure = await self.send(
            "POST", f"/v1/apps/{self.app}/machines", "create", headers={"idempotency-key": key},
            json={"region": region, "config": config(self.app)})
        outcome = CreateOutcome(key=key, app=self.app)
        if response is not None and response.status_code == 200:
            machine = str(response.json()["id"])
            outcome = CreateOutcome(key=key, app=self.app, machine_id=machine)
            self.ledger.allowed[machine] = {"started"}
            self.ledger.history[machine] = [f"create 200 {key}"]
        elif response is not None and not unsure:
            # A refusal after a try that got no answer proves nothing: that try may have
            # made the machine on a worker the refusing broker cannot reach.
            outcome = CreateOutcome(key=key, app=self.app, failed=True)
        self.ledger.creates.append(outcome)
        return outcome.machine_id

    async def act(self, action: str, machine: str, generation: int) -> bool:
        """Send ``action``; True if the machine may still be used afterwards."""
        path = f"/v1/apps/{self.app}/machines/{machine}"
        if action == "destroy":
            response, unsure = await self.send("DELETE", path, action, params={"force": "true"})
        elif action == "update":
            response, unsure = await self.send("POST", path, action, json={"config": config(
                self.app, generation)})
        else:
            response, unsure = await self.send("POST", f"{path}/{action}", action, json={})
        before = self.ledger.allowed[machine]
        told = "none" if response is None else f"{response.status_code} {response.text[:80]}"
        self.ledger.history[machine].append(f"{action}: {told}{' (after no answer)' * unsure}")
        if response is None or (unsure and response.status_code >= 400):
            # Unanswered, or refused only after a try that got no answer: either may be true.
            self.ledger.allowed[machine] = before | {TARGET[action]}
        elif response.status_code == 200:
            self.ledger.allowed[machine] = {TARGET[action]}
        elif action == "destroy" and response.status_code == 404 and "destroyed" in before:
            self.ledger.allowed[machine] = {"destroyed"}
        return action != "destroy" or response is None or response.status_code >= 400


    async def look(self, action: str, machine: str) -> None:
        """A read: the machine (``get``) or the app's machines (``list``); nothing it says
        changes what the machine may be."""
        path = f"/v1/apps/{self.app}/machines"
        await self.send("GET", f"{path}/{machine}" if action == "get" else path, action)


def unanswered_as(exc: httpx.TransportError) -> str:
    """How a try that got no answer is recorded (``history.UNANSWERED``)."""
    if isinstance(exc, httpx.TimeoutException):
        return "timeout"
    if isinstance(exc, httpx.ConnectError):
        return "refused"
    if isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError | httpx.WriteError):
        return "reset"
    return "error"


async def actor(client: Client, regions: list[str], operations: int,
                until: asyncio.Event | None, mix: dict[str, int] = CHANGES) -> None:
    """``operations`` requests, and more while ``until`` is not set (at most ``MORE`` times as
    many), so a fault on a fixed schedule always has traffic to hit."""
    mine: list[str] = []
    generation = 0
    while generation < operations or (
            until is not None and not until.is_set() and generation < operations * MORE):
        generation += 1
        if len(mine) < 2 or client.rng.random() < 0.3:
            made = await client.create(client.rng.choice(regions))
            if made:
                mine.append(made)
            continue
        machine = client.rng.choice(mine)
        action = client.rng.choices(list(mix), list(mix.values()))[0]
        if action in ("get", "list"):
            await client.look(action, machine)
        elif not await client.act(action, machine, generation):
            mine.remove(machine)


async def drive(apis: list[httpx.AsyncClient], app: str, regions: list[str], *,
                actors: int, operations: int, seed: int,
                until: asyncio.Event | None = None) -> Ledger:
    """``actors`` clients, each sending ``operations`` requests (or more, until ``until``);
    what they were told."""
    ledger = Ledger()
    rng = random.Random(seed)
    await asyncio.gather(*(
        actor(Client(apis, ledger, app, random.Random(rng.random())), regions, operations, until)
        for _ in range(actors)))
    return ledger
