"""A campaign: the cluster a user runs, many overlapping faults, clients on every host.

``make chaos`` runs one. The five hosts of ``peers.py`` serve clients on every
API and every proxy at once, the way a client with several addresses would:

- API clients create, start, stop, update, destroy, get and list machines,
  each try on a host chosen at random and, when it gets no answer, again on
  another (creates with the same idempotency key);
- readers fetch the web app through every host's proxy;
- a submitter sends jobs (``/sched/submit``, the article's shape, with an
  idempotency key) to any host's API.

Beside them rest standby pairs: a primary on every host and its standby on the
next, which the hosts' losses start and their returns stop again.

Meanwhile the faults ``plan.py`` laid out from the seed are applied on time
and healed, several at once. Every try and every fault is recorded
(``history.py``); once the last fault is healed and the cluster is quiet, the
pure checks judge the record and the workers' own stores (``invariants.py``),
and the figures are printed as the table ``docs/reliability.md`` carries.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field

import httpx

from bodega.worker.jobs.runs import RESERVATION_TTL
from tests.cluster.multihost_kit import TOKEN

from . import history, invariants
from .history import Fault, JobOutcome, Pair, Request, TaskOutcome
from .peers import REGIONS, WEB_APP, NotHealed, Peers
from .plan import DOWN, MAX_DOWN, PlannedFault, plan
from .scenario import QUIET, no_live_reservations, poll, sample_capacity
from .state import Snapshot, Violation
from .workload import READS, Client, Ledger, actor, config

TIMEOUT = 20.0  # a client's timeout on one API request
ACTORS = 16
READERS = 2
PROXY_BUDGET = 0.02  # of the requests through live proxies, what may fail (mid-failover)
CONVERGE = 60.0  # seconds from the last heal for every view to agree with the stores
SETTLE = 180.0
APP = "chaos"
PAIRS_APP = "pairs"  # a primary on every host, its standby on the next
GIVE_BACK = 60.0  # seconds for every standby to stop once its primary's host is back


@dataclass
class Report:
    seed: int
    planned: list[PlannedFault] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    requests: list[Request] = field(default_factory=list)
    jobs: list[JobOutcome] = field(default_factory=list)
    pairs: list[Pair] = field(default_factory=list)
    takeovers: int = 0  # standby starts recorded in the standbys' events
    violations: list[Violation] = field(default_factory=list)
    convergence: float | None = None
    operations: int = 0
    seconds: float = 0.0


def auth() -> dict[str, str]:
    return {"authorization": f"Bearer {TOKEN}"}


async def campaign(peers: Peers, seed: int, operations: int, faults: int) -> Report:
    report = Report(seed, planned=plan(seed, [h.shape for h in peers.hosts], faults))
    t0 = time.monotonic()
    apis = {h.api: h.name for h in peers.hosts if h.api}
    clients = [httpx.AsyncClient(base_url=url, timeout=TIMEOUT, headers=auth()) for url in apis]
    ledger = Ledger(requests=report.requests, hosts=apis, t0=t0)
    over = asyncio.Event()  # the plan has run its course
    stop = asyncio.Event()  # the clients are done too
    try:
        await create_app(clients[0], APP)
        await create_app(clients[0], PAIRS_APP)
        report.pairs = await create_pairs(clients[0])
        sampled: list[Violation] = []
        background = [asyncio.create_task(coro) for coro in (
            sample_capacity(lambda: peers.snapshot(views=False), sampled, stop, every=2.0),
            *(read_proxies(peers, ledger, stop, i) for i in range(READERS)),
            submit_jobs(clients, ledger, report.jobs, stop, random.Random(seed)))]
        rng = random.Random(seed)
        per_actor = max(1, operations // ACTORS)
        actors = asyncio.gather(*(
            actor(Client(clients, ledger, APP, random.Random(rng.random())), list(REGIONS),
                  per_actor, over, READS) for _ in range(ACTORS)))
        await run_plan(peers, report, t0, random.Random(seed + 1))
        over.set()
        await actors
        stop.set()
        await asyncio.gather(*background)
        report.violations += sampled
        report.operations = ledger.operations
        await peers.heal_all()
        healed = time.monotonic()
        await settle(peers, report, ledger, healed, clients)
    finally:
        over.set()
        stop.set()
        for client in clients:
            await client.aclose()
    report.seconds = time.monotonic() - t0
    return report


async def create_app(api: httpx.AsyncClient, name: str) -> None:
    response = await api.post("/v1/apps", json={"app_name": name, "org_slug": "personal"})
    if response.status_code not in (200, 201):
        raise RuntimeError(f"creating app {name}: {response.status_code} {response.text}")


async def create_pairs(api: httpx.AsyncClient) -> list[Pair]:
    """A started primary in every region (one host each), and its standby, created and
    never started, in the next region, as ``bodega deploy --ha`` lays them out."""
    path = f"/v1/apps/{PAIRS_APP}/machines"
    pairs = []
    for i, region in enumerate(REGIONS):
        primary = await api.post(path, json={"region": region, "config": config(PAIRS_APP)})
        primary.raise_for_status()
        standby = await api.post(path, json={
            "region": REGIONS[(i + 1) % len(REGIONS)], "skip_launch": True,
            "config": {**config(PAIRS_APP), "standbys": [primary.json()["id"]]}})
        standby.raise_for_status()
        pairs.append(Pair(primary=primary.json()["id"], standby=standby.json()["id"]))
    return pairs


# -- faults ---------------------------------------------------------------------------------
async def run_plan(peers: Peers, report: Report, t0: float, rng: random.Random) -> None:
    # One fault at a time per host, and at most MAX_DOWN hosts gone at once, as planned,
    # also when a heal takes longer than the plan allowed for (a host slow to come back):
    # the next fault there, or the next host to go, waits for it.
    held = {h.name: asyncio.Lock() for h in peers.hosts}
    gone = asyncio.Semaphore(MAX_DOWN)

    async def one(f: PlannedFault) -> None:
        await asyncio.sleep(max(0.0, t0 + f.at - time.monotonic()))
        async with contextlib.AsyncExitStack() as holds:
            if f.host is not None:
                await holds.enter_async_context(held[f.host])
            if f.kind in DOWN:
                await holds.enter_async_context(gone)
            await run_one(f)

    async def run_one(f: PlannedFault) -> None:
        start = time.monotonic() - t0
        try:
            if f.kind == "key-rotate":
                detail = await rotate_key(peers, rng)
            else:
                done = await peers.apply(f, rng)
                await asyncio.sleep(f.lasts)
                detail = f"{done.detail}; {await peers.heal(f, done)}".strip("; ")
        except NotHealed as exc:
            report.violations.append(Violation(invariant="healed", detail=(
                f"{f.kind} on {f.host} at {start:.1f}s: {exc}")))
            detail = f"not healed: {exc}"
        except Exception as exc:  # a fault that could not be applied or healed is a finding
            report.violations.append(Violation(invariant="fault-ran", detail=(
                f"{f.kind} on {f.host} at {start:.1f}s: {exc!r}"[:400])))
            detail = f"failed: {exc!r}"[:200]
        end = time.monotonic() - t0
        report.faults.append(Fault(kind=f.kind, host=f.host, start=start, end=end,
                                   detail=detail))
        print(f"  {start:6.1f}s-{end:6.1f}s {f.kind:<15} {f.host or 'all':<6} {detail}",
              flush=True)

    await asyncio.gather(*(one(f) for f in report.planned))


async def rotate_key(peers: Peers, rng: random.Random) -> str:
    """``bodega cluster key rotate`` through a host's API (another if that one is gone)."""
    order = [h for h in peers.hosts if h.api]
    rng.shuffle(order)
    said = ""
    for host in order:
        done = await asyncio.to_thread(peers.cli(host).bodega, "cluster", "key", "rotate",
                                       timeout=180)
        said = ((done.stdout if done.returncode == 0 else done.stderr).strip().splitlines()
                or [""])[0]
        if done.returncode == 0:
            return f"through {host.name}: {said[:120]}"
    return f"refused everywhere: {said[:160]}"


# -- clients beside the API clients ---------------------------------------------------------
async def read_proxies(peers: Peers, ledger: Ledger, stop: asyncio.Event, index: int) -> None:
    """GET the web app through every host's proxy in turn, until ``stop``."""
    proxies = [(h.name, h.proxy) for h in peers.hosts if h.proxy]
    turn = index
    async with httpx.AsyncClient(timeout=5.0) as web:
        while not stop.is_set():
            name, url = proxies[turn % len(proxies)]
            turn += 1
            start = time.monotonic()
            try:
                answer = await web.get(f"{url}/", headers={"host": f"{WEB_APP}.localhost"})
                outcome = str(answer.status_code)
            except httpx.TransportError as exc:
                outcome = type(exc).__name__
            assert ledger.requests is not None
            ledger.requests.append(Request(kind="proxy", host=name, start=start - ledger.t0,
                                           end=time.monotonic() - ledger.t0, outcome=outcome))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.1)


async def submit_jobs(clients: list[httpx.AsyncClient], ledger: Ledger, jobs: list[JobOutcome],
                      stop: asyncio.Event, rng: random.Random) -> None:
    """A job every few seconds, in the article's shape, each try on a random host."""
    client = Client(clients, ledger, APP, rng)
    while not stop.is_set():
        name = f"chaos-{uuid.uuid4().hex[:10]}"
        response, _ = await client.send("POST", "/sched/submit", "job-submit", json={
            "Name": name, "Command": "true", "Restart": True, "count": 2,
            "idempotency_key": name})
        jobs.append(JobOutcome(name=name, acknowledged=response is not None
                               and response.status_code == 200))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), rng.uniform(2.0, 4.0))


async def job_outcomes(clients: list[httpx.AsyncClient], ledger: Ledger,
                       jobs: list[JobOutcome]) -> list[JobOutcome]:
    """What some host says of each job, once every acknowledged one has ended (bounded)."""
    client = Client(clients, ledger, APP, random.Random(0))
    ended = ("succeeded", "failed", "cancelled")
    latest: dict[str, JobOutcome] = {j.name: j for j in jobs}

    async def all_ended() -> bool:
        for job in jobs:
            if not job.acknowledged or latest[job.name].state in ended:
                continue
            response, _ = await client.send("GET", f"/sched/status/{job.name}", "job-status")
            if response is None or response.status_code != 200:
                latest[job.name] = job.model_copy(update={"state": None})
                continue
            body = response.json()
            latest[job.name] = job.model_copy(update={"state": body["state"], "tasks": [
                TaskOutcome(index=t["index"], state=t["state"], exit_codes=t["exit_codes"])
                for t in body.get("tasks") or []]})
        return all(j.state in ended for j in latest.values() if j.acknowledged)

    await poll(all_ended, SETTLE, interval=2.0)
    return list(latest.values())


# -- checks ---------------------------------------------------------------------------------
async def settle(peers: Peers, report: Report, ledger: Ledger, healed: float,
                 clients: list[httpx.AsyncClient]) -> None:
    creates, expectations = ledger.creates, ledger.expectations()

    async def quiet() -> bool:
        snap = await asyncio.to_thread(peers.snapshot, creates, expectations, views=False)
        return not invariants.check(snap, QUIET)

    async def agreed() -> bool:
        snap = await asyncio.to_thread(peers.snapshot, creates, expectations)
        return not invariants.views(snap)

    async def pairs_settled() -> bool:
        snap = await asyncio.to_thread(peers.snapshot, views=False)
        return not history.one_copy(report.pairs, states(snap))

    async def timed() -> None:
        if await poll(agreed, SETTLE, interval=1.0):
            report.convergence = time.monotonic() - healed

    await asyncio.gather(poll(quiet, SETTLE), timed())
    # A reservation is a leak only once its time is up: a job's take holds room longer than
    # a create's (RESERVATION_TTL against the ledger's 10 s).
    await poll(no_live_reservations(lambda: peers.snapshot(views=False)), RESERVATION_TTL + 5)
    await poll(pairs_settled, GIVE_BACK, interval=1.0)
    final = await asyncio.to_thread(peers.snapshot, creates, expectations)
    report.violations += history.one_copy(report.pairs, states(final))
    report.takeovers = await takeovers(clients, ledger, report.pairs)
    report.violations += invariants.check(final, ("capacity", "creates", "desired", "processes",
                                                  "operations"))
    if report.convergence is None:
        report.violations += invariants.views(final)
    report.violations += history.converged(report.convergence, CONVERGE)
    report.violations += history.api_answered(report.requests, report.faults)
    report.violations += history.proxy_budget(report.requests, report.faults, PROXY_BUDGET)
    # The clients' machines fill the workers: a job's tasks still queued wait for room, as
    # they would on a full cluster. Once the machines are judged, they make way.
    await destroy_all(clients[0])
    report.jobs[:] = await job_outcomes(clients, ledger, report.jobs)
    report.violations += history.jobs_once(report.jobs)


async def takeovers(clients: list[httpx.AsyncClient], ledger: Ledger,
                    pairs: list[Pair]) -> int:
    """How many times the standbys were started (each was created never started): the
    takeovers the run's host losses caused, as the standbys' events record them."""
    client = Client(clients, ledger, PAIRS_APP, random.Random(0))
    count = 0
    for pair in pairs:
        response, _ = await client.send(
            "GET", f"/v1/apps/{PAIRS_APP}/machines/{pair.standby}", "get")
        if response is not None and response.status_code == 200:
            count += sum(1 for e in response.json().get("events") or []
                         if (e.get("type"), e.get("status")) == ("start", "started"))
    return count


def states(snap: Snapshot) -> dict[str, str]:
    """Each machine's state in its worker's store."""
    return {m.id: m.state for w in snap.workers for m in w.machines}


async def destroy_all(api: httpx.AsyncClient) -> None:
    listed = (await api.get(f"/v1/apps/{APP}/machines")).json()
    for machine in listed:
        await api.delete(f"/v1/apps/{APP}/machines/{machine['id']}", params={"force": "true"})


# -- the table ------------------------------------------------------------------------------
def table(report: Report) -> str:
    """The figures of a run, as markdown."""
    api = [r for r in report.requests if r.kind != "proxy"]
    unanswered = Counter(r.kind for r in api if r.outcome in history.UNANSWERED)
    by_kind = Counter(r.kind for r in api)
    sent, failed = history.proxy_failures(report.requests, report.faults)
    healed = [f for f in report.faults if f.end > f.start]
    lines = [
        f"seed {report.seed}: {report.operations} operations ({len(api)} tries), "
        f"{len(report.faults)} faults, {len(report.violations)} violations, "
        f"{report.seconds:.0f} s",
        "",
        "| fault | count | held (s, median) |",
        "|---|---|---|",
        *(f"| {kind} | {n} | {_median([f.end - f.start for f in healed if f.kind == kind])} |"
          for kind, n in Counter(f.kind for f in report.faults).most_common()),
        "",
        "| operation | tries | unanswered |",
        "|---|---|---|",
        *(f"| {kind} | {n} | {unanswered.get(kind, 0)} |" for kind, n in by_kind.most_common()),
        "",
        f"proxy: {failed} of {sent} requests through live proxies failed "
        f"(budget {PROXY_BUDGET:.0%}: {int(PROXY_BUDGET * sent)}); "
        f"{sum(1 for r in report.requests if r.kind == 'proxy')} sent in all",
        f"jobs: {sum(1 for j in report.jobs if j.acknowledged)} acknowledged of "
        f"{len(report.jobs)} submitted, "
        f"{sum(1 for j in report.jobs if j.state == 'succeeded')} succeeded",
        f"standby pairs: {len(report.pairs)}, their standbys started {report.takeovers} "
        "times in all; "
        + ("some pair had not one copy running at the end"
           if any(v.invariant == "one-copy" for v in report.violations)
           else "one copy of each running at the end"),
        "views converged " + (f"{report.convergence:.1f} s after the last heal"
                              if report.convergence is not None else "never")
        + f" (bound {CONVERGE:.0f} s)",
    ]
    return "\n".join(lines)


def _median(values: list[float]) -> str:
    if not values:
        return "-"
    ordered = sorted(values)
    return f"{ordered[len(ordered) // 2]:.1f}"
