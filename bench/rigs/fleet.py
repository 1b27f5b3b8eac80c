"""Processes for scale benchmarks: many null-driver workers in one process, and a broker.

    python bench/rigs/fleet.py workers --count 500 --prefix a --out a.json
    python bench/rigs/fleet.py broker --workers a.json,b.json --out broker.json --token T

A thousand worker processes would not fit on a small machine, so one
process hosts many real ``Worker``s (each its own SQLite store, ledger and
HTTP server; the null driver runs no processes; commits are not fsynced,
since a thousand simulated hosts share one disk, unless ``--fsync``, which makes
each commit durable as a real worker's; no registry node runs, as
a thousand gossiping nodes in two processes would measure gossip, which
``bench/registry/gossip.py`` does). The broker is the real ``Broker``, serving the
real API; its view is filled once from the workers' list, as a registry
would, and then kept current by the workers' own answers (what each has
free when it says no) and the broker's own accounting of each yes. Internal
links are plain (these workers serve no TLS); a broker given ``--tls-dir``
calls its workers over mutual TLS (``bench/machines/start.py`` does, against
a real worker process).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
import tempfile
from pathlib import Path

from bodega.broker.config import BrokerConfig
from bodega.broker.daemon import Broker
from bodega.broker.view.catalog import MemoryCatalog
from bodega.model.capacity import Totals
from bodega.runtime.lifecycle import write_json_atomic
from bodega.worker.config import WorkerConfig
from bodega.worker.daemon import Worker


async def until_signalled() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()


async def workers(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="bodega-fleet-") as tmp:
        hosted: list[Worker] = []
        for i in range(args.count):
            # Interleaved numbering across processes: equally good workers are tried in name
            # order, and that order should alternate between the processes hosting them.
            number = i * args.stride + args.offset
            config = WorkerConfig(
                name=f"{args.prefix}{number:04}", region=args.region, data_dir=Path(tmp) / str(i),
                driver="null", totals=Totals(cpus=args.cpus, memory_mb=args.memory_mb,
                                             disk_gb=100),
                network="host", machine_user=None, fsync=args.fsync,
                gossip=False)
            worker = Worker(config)
            await worker.start()
            hosted.append(worker)
        write_json_atomic(Path(args.out), [
            {"name": w.config.name, "region": w.config.region, "url": w.url,
             "totals": w.config.totals.row().doc(), "used": w.ledger.usage().row().doc(),
             "cordoned": False} for w in hosted])
        await until_signalled()
        for worker in hosted:
            with contextlib.suppress(Exception):
                await worker.stop()


async def broker(args: argparse.Namespace) -> None:
    catalog = MemoryCatalog()
    for path in args.workers.split(","):
        for doc in json.loads(Path(path).read_text()):  # noqa: ASYNC240 (read once at start)
            catalog.put("workers", doc["name"], doc)
            catalog.set_status(doc["name"], "alive")
    with tempfile.TemporaryDirectory(prefix="bodega-fleet-broker-") as tmp:
        daemon = Broker(BrokerConfig(
            name="bench-broker", data_dir=Path(tmp),
            tls_dir=Path(args.tls_dir) if args.tls_dir else None,
            admin_tokens=(args.token,), region=args.region, listen_port=0,
            policy=args.policy, sample=args.sample), catalog=catalog)
        await daemon.start()
        write_json_atomic(Path(args.out), {"url": daemon.url, "pid": os.getpid()})
        await until_signalled()
        await daemon.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="role", required=True)
    w = sub.add_parser("workers")
    w.add_argument("--count", type=int, default=100)
    w.add_argument("--prefix", default="w")
    w.add_argument("--offset", type=int, default=0)
    w.add_argument("--stride", type=int, default=1)
    w.add_argument("--region", default="ams")
    w.add_argument("--cpus", type=int, default=64)
    w.add_argument("--memory-mb", type=int, default=65536)
    w.add_argument("--out", required=True)
    w.add_argument("--fsync", action="store_true", help="commit durably, as a real worker")
    b = sub.add_parser("broker")
    b.add_argument("--workers", required=True)
    b.add_argument("--region", default="ams")
    b.add_argument("--token", required=True)
    b.add_argument("--policy", default="utility")
    b.add_argument("--sample", type=int, default=0)
    b.add_argument("--out", required=True)
    b.add_argument("--tls-dir", help="the broker's TLS identity: call workers over mutual TLS")
    args = parser.parse_args()
    try:
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    except ImportError:
        pass
    asyncio.run(workers(args) if args.role == "workers" else broker(args))
    sys.exit(0)


if __name__ == "__main__":
    main()
