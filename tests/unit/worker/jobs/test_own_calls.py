"""A worker's jobs calls to itself are made in its own process, answering as its routes do."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from bodega.model.errors import BodegaError, Conflict
from bodega.wire.internal.jobs.calls import HomeClaim, HomeClaimAnswer
from bodega.wire.internal.jobs.worker_client import JobClient
from bodega.worker.jobs.own_calls import OwnCalls
from bodega.worker.jobs.peers import JobPeers


class Home:
    def __init__(self, outcome: Exception | None = None) -> None:
        self.outcome = outcome
        self.claims: list[tuple[str, HomeClaim]] = []

    def claim(self, job_id: str, body: HomeClaim) -> HomeClaimAnswer:
        self.claims.append((job_id, body))
        if self.outcome is not None:
            raise self.outcome
        return HomeClaimAnswer(drop=True)


def own(home: Home) -> OwnCalls:
    return OwnCalls(cast(Any, home), cast(Any, None))


async def test_the_worker_itself_is_called_in_process_and_the_others_over_http() -> None:
    peers = JobPeers("ams-1", None, lambda w: f"http://{w}.test", lambda w: True, list)
    home = Home()
    peers.own = own(home)
    try:
        assert peers.client("ams-1") is peers.own
        assert isinstance(peers.client("ams-2"), JobClient)
        answer = await peers.client("ams-1").claim_task("j1", HomeClaim(worker="ams-1"))
    finally:
        await peers.aclose()
    assert answer.drop
    assert home.claims == [("j1", HomeClaim(worker="ams-1"))]


def test_a_refusal_is_raised_as_it_is_and_any_other_error_as_a_bodega_error() -> None:
    with pytest.raises(Conflict):
        asyncio.run(own(Home(Conflict("taken", status="already_claimed"))).claim_task(
            "j1", HomeClaim(worker="w")))
    with pytest.raises(BodegaError, match="internal error: boom") as raised:
        asyncio.run(own(Home(RuntimeError("boom"))).claim_task("j1", HomeClaim(worker="w")))
    assert type(raised.value) is BodegaError
