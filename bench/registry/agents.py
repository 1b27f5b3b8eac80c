"""The registry at one agent per host: what a host pays to keep up with a busy fleet.

``python -m bench.registry.scale --agents [--hosts 1000] [--creates 1000] [--writers-per-host 1]``

Runs the scenario of ``sim/replication/agentsim.py`` (every host one
replica, its workers writing their rows through it, creates as a Poisson
stream across the fleet) and prints how fast a create reaches every host and
what each host spends: rows applied per second (by how they came), pulls,
gossip and sync bytes.

The simulator counts rows, not CPU (its replicas are in memory, its clock is
simulated), so the CPU is priced here, in the same run, on a real SQLite
file: 20,000 rows from as many writers as the fleet has, applied by the real
``Replica.apply`` one row per transaction (as gossip brings them) and in
batches of the simulated replies' mean size (as sync brings them), then once
more after they are held (what a copy that came by sync again costs); a
gossip packet received, one row in it (opened, decoded, its version looked
up: a copy held already goes no further, ``rowgossip.py``); and a pull with
nothing to fetch, both ends (its part that grows with the number of
writers: every writer's versions in the request, under writes every bucket
differs). Each cost times the simulated rate is a host's CPU.
"""

from __future__ import annotations

import json
import random
import resource
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bodega.registry.membership.core.messages import Direct, Message, decode, encode
from bodega.registry.replication.core.rows import Row
from bodega.registry.replication.replica import Replica
from bodega.registry.replication.view import View
from bodega.registry.sealing.core.envelope import SealedEnvelope
from bodega.registry.sync.core.rowwire import (
    decode_item,
    decode_reply,
    decode_request,
    reply_json,
    request_json,
    row_item,
)
from bodega.sim.replication.agentsim import (
    AgentLoad,
    AgentLoadReport,
    HostWriter,
    host_name,
    machine_doc,
    run,
)
from bodega.sim.swim.simnet import SIM_KEYRING

EPOCH = 1_700_000_000.0
PRICED_ROWS = 20_000


@dataclass(frozen=True)
class ApplyCosts:
    """CPU seconds per row (per pull for ``pull``), on a real SQLite file."""

    new_one: float  # a row not held, one per transaction (gossip)
    new_batch: float  # a row not held, in a batch of ``batch`` (sync)
    held_one: float  # a row already held, one per transaction
    held_batch: float
    pull: float  # a pull that fetches nothing, both ends, JSON included
    batch: int
    receive: float  # a sealed gossip packet with one row, opened and looked up


def fleet_rows(hosts: int, writers_per_host: int, count: int, seed: int) -> tuple[
        list[Row], dict[str, int]]:
    """``count`` creates from every writer of the fleet in turn, and the writers' floors."""
    rng = random.Random(seed)
    writers = [HostWriter(f"{host_name(h)}-w{j}", lambda: EPOCH)
               for h in range(hosts) for j in range(writers_per_host)]
    rows = []
    for i in range(count):
        writer = writers[i % len(writers)]
        machine_id = f"{rng.getrandbits(64):016x}"
        rows.append(writer.row("machines", machine_id,
                               machine_doc(machine_id, writer.name, f"app-{i % 97}", rng)))
    rng.shuffle(rows)  # as they arrive: interleaved, not writer by writer
    return rows, {w.name: w.floor for w in writers}


def cpu_per(fn: Callable[[], None], count: int) -> float:
    start = time.process_time()
    fn()
    return (time.process_time() - start) / max(count, 1)


def price(rows: list[Row], floors: dict[str, int], batch: int, root: Path) -> ApplyCosts:
    half = len(rows) // 2
    one, many = rows[:half], rows[half:]
    replica = Replica("agent", View(root / "agent.sqlite"), wall=lambda: EPOCH)

    def apply(batch_rows: list[Row], size: int) -> Callable[[], None]:
        def go() -> None:
            for i in range(0, len(batch_rows), size):
                part = batch_rows[i:i + size]
                replica.apply(part, floors={r.owner: floors[r.owner] for r in part})
        return go

    new_one = cpu_per(apply(one, 1), len(one))
    new_batch = cpu_per(apply(many, batch), len(many))
    held_one = cpu_per(apply(many, 1), len(many))
    held_batch = cpu_per(apply(one, batch), len(one))

    # A pull between two replicas holding the same rows: the versions of every writer
    # sent, nothing needed, an empty reply applied.
    puller = Replica("puller", View(root / "puller.sqlite"), wall=lambda: EPOCH)
    puller.apply(rows, floors=floors)
    pulls = 20

    def pull() -> None:
        for _ in range(pulls):
            request = puller.sync_request(tuple(range(64)))
            sent = decode_request(json.loads(json.dumps(request_json(request))))
            reply = replica.serve(sent)
            puller.apply_reply(decode_reply(json.loads(json.dumps(reply_json(reply)))))

    cost = cpu_per(pull, pulls)
    receive = receiving(rows[:2000], floors, replica)
    replica.view.close()
    puller.view.close()
    return ApplyCosts(new_one, new_batch, held_one, held_batch, cost, batch, receive)


def receiving(rows: list[Row], floors: dict[str, int], replica: Replica) -> float:
    """CPU per gossip packet that carries a row: opened (sealed with the cluster key),
    decoded, and the row's version looked up in ``replica``, which holds it."""
    sender = SealedEnvelope(SIM_KEYRING, "h00000", first_seq=1, salts=lambda n: b"\1" * n)
    receiver = SealedEnvelope(SIM_KEYRING, "h00001", first_seq=1, salts=lambda n: b"\2" * n)
    packets = [sender.seal(encode(Message("h00000", Direct(row_item(r, floors[r.owner])))), 1)
               for r in rows]

    def go() -> None:
        for packet in packets:
            opened = receiver.open(packet)
            message = decode(opened.payload)
            receiver.accept(opened, message.sender)
            assert isinstance(message.body, Direct)
            row = decode_item(message.body.item)
            assert isinstance(row, Row)
            assert row.version in replica.known_of(row.owner)

    return cpu_per(go, len(packets))


def agents_main(load: AgentLoad) -> None:
    print(f"{load.hosts:,} hosts, one registry agent each; {load.creates_per_second:,.0f} "
          f"creates/s across the fleet from {load.writers_per_host} writer(s) per host; "
          f"gossip every {load.swim.gossip_interval:g} s to {load.swim.gossip_nodes}, "
          f"{load.eager_peers} eager pushes{', pushed on' if load.push_on else ''}, sync "
          f"every {load.sync_interval:g} s; "
          f"seed {load.seed}")
    wall = time.monotonic()
    report = run(load)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"simulated in {time.monotonic() - wall:.0f} s, peak RSS {rss:,.0f} MB")
    with tempfile.TemporaryDirectory() as tmp:
        rows, floors = fleet_rows(load.hosts, load.writers_per_host, PRICED_ROWS, load.seed)
        costs = price(rows, floors, max(1, round(report.rows_per_reply)), Path(tmp))
    show(report, costs)


def show(r: AgentLoadReport, c: ApplyCosts) -> None:
    late = sum(1 for t in r.reach_all if t == float("inf"))
    print(f"change reaches every host  p50 {r.percentile(.5) * 1000:5.0f} ms  "
          f"p90 {r.percentile(.9) * 1000:5.0f} ms  p99 {r.percentile(.99) * 1000:5.0f} ms  "
          f"max {max(r.reach_all) * 1000:5.0f} ms  ({r.tracked:,} creates in the "
          f"{r.load.measure:g} s window{f', {late} never' if late else ''}; aim: p99 under 1 s)")
    print(f"every host holds every row {'yes' if r.held_by_all else 'NO'} "
          f"({r.creates:,} creates; views {'identical' if r.identical else 'DIFFER'})")
    print(f"rows applied per host per s {r.applied.mean:6.0f} (host low {r.applied.low:.0f}, "
          f"high {r.applied.high:.0f}): first by gossip {r.gossip_applied:.0f}, by sync "
          f"{r.sync_applied:.0f}, written on the host {r.local_applied:.1f}")
    held = r.gossip_heard - r.gossip_applied + r.sync_received - r.sync_applied
    print(f"rows received per host per s gossip {r.gossip_heard:.0f}, sync {r.sync_received:.0f} "
          f"(held already: {held:.0f}); {r.rows_per_reply:.0f} rows per sync reply")
    print(f"pulls per host per s       {r.pulls:.1f}")
    total = r.gossip_bytes + r.sync_bytes
    print(f"bytes per host per s       {total / 1000:,.0f} KB: gossip {r.gossip_bytes / 1000:,.1f}"
          f" KB in {r.gossip_packets:.1f} packets, sync {r.sync_bytes / 1000:,.0f} KB "
          f"(JSON bodies, requests and replies)")
    print(f"apply cost (Replica.apply, SQLite file, {PRICED_ROWS:,} rows): new row "
          f"{c.new_one * 1e6:.0f} us alone, {c.new_batch * 1e6:.0f} us in batches of {c.batch}; "
          f"held row {c.held_one * 1e6:.0f} / {c.held_batch * 1e6:.0f} us; a gossip packet "
          f"received {c.receive * 1e6:.0f} us; a pull's fixed part {c.pull * 1000:.2f} ms "
          f"(both ends)")
    # A copy heard on gossip of a row held already is looked up and dropped (rowgossip.py).
    apply = ((r.gossip_applied + r.local_applied) * c.new_one + r.sync_applied * c.new_batch
             + (r.sync_received - r.sync_applied) * c.held_batch)
    receive = r.gossip_heard * c.receive
    pulls = r.pulls * c.pull  # each host makes as many pulls as it serves, on average
    print(f"CPU per host per s         applying rows {apply * 1000:.0f} ms "
          f"({apply * 100:.1f} % of a core); receiving gossip {receive * 1000:.0f} ms "
          f"({receive * 100:.1f} %); pulls' fixed part {pulls * 1000:.0f} ms "
          f"({pulls * 100:.1f} %)")
