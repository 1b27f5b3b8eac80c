"""The cost of the figures with ``--machines`` machines: one scrape of a worker's
``fly_instance_*`` series and one look at HAProxy's counters for the proxy's ``fly_app_*``.

The worker's side reads what a real scrape reads: each machine's cgroup files
(v1, as on this project's hosts) and, for its processes, ``/proc/<pid>/stat``,
``/proc/<pid>/io``, ``/proc/<pid>/ns/net`` and ``/proc/<pid>/net/dev`` of real
processes (``--per-machine`` ``sleep`` processes each). The cgroup files are laid
out in a scratch directory, not in the kernel's hierarchy: making hundreds of real
cgroups, and moving processes into them, would take the kernel's cgroup lock that
every machine start on this host waits on. Half the machines are image machines (their cgroup counts
cpu and io: ``cpuacct``, ``blkio``), half process machines (their processes' /proc
files are summed). The started rows are given, not read from SQLite (one indexed
SELECT of four columns).

The proxy's side parses a ``show stat`` answer with a server row per machine, turns
it into the series and renders them, as each second's look and each scrape do.

    python -m bench.machines.figures [--machines 200] [--per-machine 2] [--rounds 50]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest

from bodega.proxy.figures import AppFigures, Place
from bodega.proxy.haproxy.runtime import parse_stat
from bodega.worker.drivers.process.cgroups import Cgroups
from bodega.worker.host.usage import BLKIO_BYTES, UsageReader
from bodega.worker.ops.figures import MachineFigures, StartedRow

SCOPE = "bench"
HEADER = ("# pxname,svname,qcur,qmax,scur,smax,slim,stot,bin,bout,dreq,dresp,ereq,econ,eresp,"
          "wretr,wredis,status,weight,act,bck,chkfail,chkdown,lastchg,downtime,qlimit,pid,iid,"
          "sid,throttle,lbtot,tracked,type,rate,rate_lim,rate_max,check_status,check_code,"
          "check_duration,hrsp_1xx,hrsp_2xx,hrsp_3xx,hrsp_4xx,hrsp_5xx,hrsp_other,hanafail,"
          "req_rate,req_rate_max,req_tot,cli_abrt,srv_abrt,comp_in,comp_out,comp_byp,comp_rsp,"
          "lastsess,last_chk,last_agt,qtime,ctime,rtime,ttime")


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def lay_out(root: Path, machines: int, pids: list[list[int]]) -> None:
    """A v1 hierarchy's files for each machine: memory always, cpuacct and blkio for the
    image machines (the even ones)."""
    for i in range(machines):
        mid = f"m{i:04d}"
        memory = root / "memory" / "bodega" / SCOPE / mid
        write(memory / "cgroup.procs", "".join(f"{pid}\n" for pid in pids[i]))
        write(memory / "memory.usage_in_bytes", f"{(64 + i) << 20}\n")
        write(memory / "memory.max_usage_in_bytes", f"{(80 + i) << 20}\n")
        write(memory / "memory.limit_in_bytes", f"{256 << 20}\n")
        if i % 2 == 0:
            write(root / "cpuacct" / "bodega" / SCOPE / mid / "cpuacct.usage", f"{i * 10**9}\n")
            write(root / "blkio" / "bodega" / SCOPE / mid / BLKIO_BYTES,
                  "8:0 Read 4096\n8:0 Write 8192\n8:0 Sync 0\n8:0 Async 0\n8:0 Total 12288\n"
                  "Total 12288\n")


@contextlib.contextmanager
def sleepers(count: int) -> Iterator[list[int]]:
    processes = [subprocess.Popen(["sleep", "3600"]) for _ in range(count)]
    try:
        yield [p.pid for p in processes]
    finally:
        for p in processes:
            p.kill()
        for p in processes:
            p.wait()


def show_stat(machines: int) -> str:
    columns = HEADER[2:].split(",")
    rows = [HEADER]
    for i in range(machines):
        row = dict.fromkeys(columns, "")
        row.update(pxname="pool_0", svname=f"s{i}", scur="2", stot=str(1000 + i),
                   status="UP", lbtot=str(1000 + i), hrsp_2xx=str(900 + i), hrsp_4xx="50",
                   hrsp_5xx="1", rtime="3", ttime="5")
        rows.append(",".join(row[c] for c in columns))
    rows.append("pool_0,BACKEND," + ",".join("0" for _ in columns[2:]))
    return "\n".join(rows) + "\n\n"


def timed(work: Callable[[], object], rounds: int) -> dict[str, float]:
    """Median and 95th percentile wall time, and CPU time a round, in ms."""
    walls, cpus = [], []
    for _ in range(rounds):
        wall, cpu = time.perf_counter(), time.process_time()
        work()
        walls.append((time.perf_counter() - wall) * 1000)
        cpus.append((time.process_time() - cpu) * 1000)
    walls.sort()
    return {"median_ms": round(statistics.median(walls), 3),
            "p95_ms": round(walls[int(len(walls) * 0.95) - 1], 3),
            "cpu_ms": round(statistics.mean(cpus), 3)}


def worker_scrape(machines: int, per_machine: int, rounds: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="bodega-figures-") as name, \
            sleepers(machines * per_machine) as pids:
        root = Path(name)
        grouped = [pids[i * per_machine:(i + 1) * per_machine] for i in range(machines)]
        lay_out(root, machines, grouped)
        netns = root / "netns"  # each machine's namespace by name, as /run/netns holds it
        netns.mkdir()
        for i, group in enumerate(grouped):
            (netns / f"ns{i}").symlink_to(f"/proc/{group[-1]}/ns/net")
        rows: list[StartedRow] = [(f"m{i:04d}", f"app{i % 20}", "ams", f"ns{i}")
                                  for i in range(machines)]
        registry = CollectorRegistry()
        reader = UsageReader(Cgroups(1, SCOPE, root), netns=netns)
        registry.register(MachineFigures(lambda: rows, reader,
                                         "ams-1", lambda app: "personal"))
        text = generate_latest(registry)
        found = timed(lambda: generate_latest(registry), rounds)
        return {**found, "series": text.count(b"\nfly_instance_"), "bytes": len(text)}


def proxy_look(machines: int, rounds: int) -> dict[str, float]:
    text = show_stat(machines)
    servers = {("pool_0", f"s{i}"): (f"app{i % 20}", f"m{i:04d}") for i in range(machines)}
    places = {f"m{i:04d}": Place(f"app{i % 20}", "ams", "ams-1") for i in range(machines)}
    figures = AppFigures(lambda: places, lambda app: "personal", ("ams", "proxy"))
    registry = CollectorRegistry()
    registry.register(figures)

    def look() -> None:
        figures.observe_haproxy(parse_stat(text), servers, {"pool_0": "app0"}, 0)

    look()
    scraped = generate_latest(registry)
    return {**{f"look_{k}": v for k, v in timed(look, rounds).items()},
            **{f"scrape_{k}": v for k, v in timed(lambda: generate_latest(registry),
                                                  rounds).items()},
            "series": scraped.count(b"\nfly_"), "bytes": len(scraped)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--machines", type=int, default=200)
    parser.add_argument("--per-machine", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=50)
    args = parser.parse_args()
    worker = worker_scrape(args.machines, args.per_machine, args.rounds)
    proxy = proxy_look(args.machines, args.rounds)
    every_15s = worker["cpu_ms"] / 15_000 * 100
    print(json.dumps({"machines": args.machines, "worker_scrape": worker,
                      "worker_cpu_percent_at_15s": round(every_15s, 4),
                      "proxy": proxy}, indent=2))


if __name__ == "__main__":
    main()
