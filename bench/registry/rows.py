"""Rows at fleet scale: one view holding every worker and machine of a large fleet.

``python -m bench.registry.scale --rows [--workers 1000] [--machines 100000]``

Each worker owns its ``workers`` row and its machines' rows, published as a
worker publishes them. A node that holds them all serves a new node, which
catches up through the real anti-entropy exchange (digest, then versions and
rows, ``max_sync_rows`` per reply, pulling again at once while replies come
back full); then the queries the broker and the proxy run are timed, and the
memory a node spends on the view is measured.
"""

from __future__ import annotations

import json
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bodega.registry.replication.core.rows import Row
from bodega.registry.replication.replica import DEFAULT_MAX_ROWS, Replica
from bodega.registry.replication.view import View
from bodega.registry.sync.core.peers import SYNC_INTERVAL
from bodega.registry.sync.core.rowwire import (
    digest_reply_json,
    digest_request_json,
    reply_json,
    request_json,
)
from bodega.sim.replication.agentsim import machine_doc

EPOCH = 1_700_000_000.0
APPS_PER_WORKER = 10
PULL_STEP = SYNC_INTERVAL / 4  # the pacer's step while behind


def worker_doc(name: str, machines: int) -> dict[str, Any]:
    return {"name": name, "region": f"r{hash(name) % 8}", "url": f"http://{name}.internal:4280",
            "driver": "process", "cordoned": False,
            "total": {"cpus": 64, "memory_mb": 262144, "disk_mb": 2_000_000},
            "used": {"cpus": 16, "memory_mb": 65536, "disk_mb": 200_000},
            "free": {"cpus": 48, "memory_mb": 196608, "disk_mb": 1_800_000},
            "reservations": 0, "machines": machines, "updated_at": "2026-11-23T12:00:00Z"}


def timed(fn: Callable[[], object], repeat: int) -> float:
    """Median seconds per call."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def build(root: Path, workers: int, machines: int, seed: int) -> tuple[Replica, list[str],
                                                                       int]:
    """A node holding every worker's rows, as gossip and sync would have left it."""
    rng = random.Random(seed)
    names = [f"w{i:05d}" for i in range(workers)]
    holder = Replica("holder", View(root / "holder.sqlite"), wall=lambda: EPOCH)
    published = 0
    per = machines // workers
    for w, name in enumerate(names):
        origin = Replica(name, View(":memory:"), wall=lambda: EPOCH)
        rows: list[Row] = []
        for i in range(per):
            app = f"app{(w * APPS_PER_WORKER + i % APPS_PER_WORKER) % (workers * 2)}"
            machine_id = f"{w:05x}{i:05x}{rng.getrandbits(24):06x}"
            change = origin.write("machines", machine_id, machine_doc(machine_id, name, app, rng),
                                  shared=False)
            if change is not None and change.new is not None:
                rows.append(change.new)
        change = origin.write("workers", name, worker_doc(name, per), shared=False)
        if change is not None and change.new is not None:
            rows.append(change.new)
        if w == 0:
            published = sum(len(json.dumps(r.doc, separators=(",", ":"))) for r in rows)
        holder.apply(rows, floors={name: origin.floor})
        origin.view.close()
    return holder, names, published


def catch_up(holder: Replica, newcomer: Replica) -> tuple[int, int, float, float]:
    """Pulls, bytes, CPU seconds (both sides) and the pacer's time for a new node."""
    pulls = sent = 0
    cpu = time.process_time()
    while True:
        pulls += 1
        digest = newcomer.digest_request()
        compared = holder.compare(digest)
        sent += len(json.dumps(digest_request_json(digest))) + len(json.dumps(
            digest_reply_json(compared)))
        if not compared.differ:
            break
        request = newcomer.sync_request(compared.differ)
        reply = holder.serve(request, max_rows=DEFAULT_MAX_ROWS)
        sent += len(json.dumps(request_json(request))) + len(json.dumps(reply_json(reply)))
        newcomer.apply_reply(reply)
        if not reply.more and not newcomer.behind:
            continue  # the next digest comparison ends the loop
    cpu = time.process_time() - cpu
    return pulls, sent, cpu, max(cpu, pulls * PULL_STEP / 2)  # two peers per step


def rows_main(workers: int, machines: int, seed: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        start = time.monotonic()
        holder, names, published = build(root, workers, machines, seed)
        print(f"a view of {workers:,} workers and {machines:,} machines "
              f"(built in {time.monotonic() - start:.0f} s)")
        print(f"a worker's published rows: {published / 1024:.0f} KiB of documents for "
              f"{machines // workers} machines and its workers row")
        db = holder.view.db
        pages = db.execute("PRAGMA page_count").fetchone()[0]
        page = db.execute("PRAGMA page_size").fetchone()[0]
        print(f"memory per node: view file {pages * page / 2**20:.0f} MiB on disk "
              f"(SQLite pages it reads through its cache); bookkeeping "
              f"{len(holder.known())} origins")
        newcomer = Replica("newcomer", View(root / "new.sqlite"), wall=lambda: EPOCH + 60)
        pulls, sent, cpu, took = catch_up(holder, newcomer)
        print(f"a new node catches up: {pulls} pulls, {sent / 2**20:.0f} MiB, "
              f"{cpu:.1f} s of CPU (both ends), about {took:.0f} s at two pulls per "
              f"{PULL_STEP:g} s while replies come back full")
        view = newcomer.view
        app = "app7"
        queries: list[tuple[str, Callable[[], object], int]] = [
            ("broker: machines of an app", lambda: view.select("machines", {"app": app}), 200),
            ("broker: workers (placement)", lambda: view.select("workers", {}), 20),
            ("broker: one worker", lambda: view.get("workers", names[123 % len(names)]), 2000),
            ("proxy: one worker's url", lambda: view.get("workers", names[7]), 2000),
            ("broker: every machine (index load)", lambda: view.select("machines", {}), 2),
        ]
        for label, query, repeat in queries:
            per_call = timed(query, repeat)
            print(f"  {label:40s} {per_call * 1000:8.2f} ms")
        holder.view.close()
        view.close()
