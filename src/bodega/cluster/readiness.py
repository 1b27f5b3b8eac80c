"""When ``bodega up`` may say "bodega is up": a create would work now.

That is two facts: the broker's ``GET /v1/health`` answers 200 and ready (a
200 without a ``ready`` key, from a broker that predates it, counts as ready),
and the broker sees every worker alive through gossip. ``judge`` decides from
what was observed; ``observe`` is the thin shell that asks the broker.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import aiohttp
from pydantic import BaseModel, ConfigDict, StrictBool, ValidationError

from bodega.model.errors import BodegaError
from bodega.wire.public.machines_client import MachinesClient


class BrokerHealth(BaseModel):
    """What ``bodega up`` reads of the broker's ``GET /v1/health`` answer.

    A key it does not know is ignored; ``ok`` and ``ready`` count only when they are
    ``true`` itself (a broker that predates ``ready`` leaves it out: ready).
    """

    model_config = ConfigDict(extra="ignore", frozen=True)

    ok: StrictBool = True
    ready: StrictBool = True
    error: str | None = None  # why not, when it is not ready

    @classmethod
    def read(cls, body: object) -> BrokerHealth:
        """The answer's body as health; one of no shape health has is not ready."""
        try:
            return cls.model_validate(body if isinstance(body, dict) else {"ready": False})
        except ValidationError:
            return cls(ready=False)


@dataclass(frozen=True)
class Observed:
    health_status: int | None  # None: the broker did not answer at all
    health: BrokerHealth
    alive_workers: frozenset[str]
    error: str = ""  # why the broker could not be asked, when it could not


@dataclass(frozen=True)
class NotReady:
    what: str  # one phrase: what is not ready
    log_file: Path  # where to look

    def line(self) -> str:
        return f"{self.what} (log: {self.log_file})"


def judge(seen: Observed, workers: dict[str, Path], broker_log: Path) -> NotReady | None:
    """None when creates can work; otherwise the first thing that is not ready."""
    if seen.health_status is None:
        return NotReady(f"the broker does not answer ({seen.error or 'no answer'})", broker_log)
    if seen.health_status != 200 or not (seen.health.ready and seen.health.ok):
        why = seen.health.error or f"HTTP {seen.health_status}"
        return NotReady(f"the broker is not ready: {why}", broker_log)
    missing = sorted(name for name in workers if name not in seen.alive_workers)
    if missing:
        return NotReady(f"the broker sees {len(workers) - len(missing)} of {len(workers)} "
                        f"workers alive; not yet {missing[0]}", workers[missing[0]])
    return None


async def observe(broker_url: str, token: str) -> Observed:
    """Ask the broker for its health, then (once healthy) for the workers it sees alive."""
    async with MachinesClient(broker_url, token, timeout=5) as api:
        try:
            async with api.http.get(broker_url.rstrip("/") + "/v1/health",
                                    timeout=aiohttp.ClientTimeout(total=5)) as response:
                status = response.status
                body = await response.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            return Observed(None, BrokerHealth(), frozenset(),
                            f"{exc.__class__.__name__} {exc}".strip())
        health = BrokerHealth.read(body)
        if status != 200:
            return Observed(status, health, frozenset())
        try:
            workers = await api.workers()
        except BodegaError as err:
            return Observed(None, health, frozenset(), err.message)
    alive = frozenset(w.name for w in workers if w.status == "alive")
    return Observed(status, health, alive)
