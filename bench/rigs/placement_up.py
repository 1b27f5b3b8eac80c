"""The placement bench's first line: creates through the public API of a real ``bodega up``.

One region of ``--workers-per-region`` null-driver workers, each its own process as
``bodega up`` runs it (their SQLite commits fsynced, the registry gossiping every
create, the proxy subscribed to it, the image registry beside them; with
``--up-arg=--registry-agent``, one registry agent that all of them read), in its own
data dir, on free ports and a machine range no test holds. The same generator as the
rig measures ``GET /v1/health`` (the ceiling) and ``POST /v1/apps/bench/machines``;
the CPU each component spent during the creates, and its PSS at the end of the idle
window, are read from ``/proc`` by its pid in ``cluster.json``, summed per role
(``bench/rigs/up_usage.py``). The ERROR and Traceback lines of the cluster's logs are counted
before its data dir is removed (``--keep DIR`` copies the logs there).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TextIO

from tests.cidr_kit import machine_cidr
from tests.cluster.up_kit import UpProcess, free_port
from tests.leftovers_kit import sweep_data_dir

from bench.rigs.loadgen import Result, body, run
from bench.rigs.up_usage import Rest, at_rest, cpu_by_role, log_problems, roles

# Machine ranges no test or other bench holds (tests/cidr_kit.py): 10.232-239.0.0/16.
OCTETS = (232, 240)


@dataclass(frozen=True)
class Measured:
    """One run's figures: the ceiling, the creates, CPU seconds per role, the loads."""

    ceiling: Result
    creates: Result
    cpu: dict[str, float]
    generator: float
    loads: tuple[str, str]
    rest: Rest | None = None  # what the cluster used while nothing was asked
    idle_load: str = ""  # the load average at the idle window's end
    problems: tuple[int, list[str]] = (0, [])  # ERROR/Traceback lines in the cluster's logs


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def start_spies(cluster: Path, out: Path, seconds: int) -> list[subprocess.Popen[bytes]]:
    """py-spy on the broker and on every worker for ``seconds`` (raw collapsed stacks,
    ``worker-<pid>.txt`` each): best fit fills one worker at a time, so a burst moves
    from worker to worker as each one's addresses run out."""
    out.mkdir(parents=True, exist_ok=True)
    spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or "py-spy"
    pids = roles(cluster)
    chosen = {"broker": pids["broker"][0]} | {f"worker-{pid}": pid for pid in pids["worker"]}
    return [subprocess.Popen(
        [spy, "record", "--pid", str(pid), "--rate", "100", "--duration", str(seconds),
         "--format", "raw", "--output", str(out / f"{role}.txt")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for role, pid in chosen.items()]


async def on_up(workers: int, creates: int, concurrency: int, cpus: int, memory_mb: int,
                profile: Path | None = None, idle: float = 0.0, up_args: tuple[str, ...] = (),
                keep: Path | None = None) -> Measured:
    """Start ``bodega up`` (with ``up_args`` besides the bench's own flags), create
    ``creates`` machines through its API, stop it.

    ``idle``: first measure, for that many seconds, what the cluster uses doing nothing.
    ``keep``: copy the cluster's logs there before its data dir is removed."""
    with tempfile.TemporaryDirectory(prefix="bodega-placement-") as name:
        tmp = Path(name)
        os.environ["BODEGA_CONFIG"] = str(tmp / "contexts.toml")  # not the user's contexts
        cluster = tmp / "cluster"
        up = UpProcess(
            cluster, "--regions", "ams", "--workers-per-region", str(workers),
            "--driver", "null", "--worker-cpus", str(cpus),
            "--worker-memory-mb", str(memory_mb),
            "--api-port", str(free_port()), "--proxy-port", str(free_port()),
            "--proxy-tls-port", str(free_port()),
            "--machine-cidr", machine_cidr(*OCTETS), "--log-level", "warning", *up_args)
        await up.start()
        spies: list[subprocess.Popen[bytes]] = []
        measured: Measured | None = None
        try:
            await up.until_line("bodega is up", timeout=600)
            resting = await at_rest(cluster, idle) if idle > 0 else None
            idle_load = load()
            url = up.state()["api_url"]
            auth = {"Authorization": f"Bearer {up.token()}"}
            await run(url, lambda n: ("POST", "/v1/apps", body(
                {"app_name": "bench", "org_slug": "personal"})), total=1, concurrency=1,
                headers=auth)
            create = body({"config": {"image": "bench:1", "guest": {
                "cpu_kind": "shared", "cpus": 1, "memory_mb": 256}}, "skip_launch": True})
            make_create: Callable[[int], tuple[str, str, bytes]] = \
                lambda n: ("POST", "/v1/apps/bench/machines", create)  # noqa: E731

            await run(url, lambda n: ("GET", "/v1/health", b""), total=500,
                      concurrency=concurrency, headers=auth)
            await run(url, make_create, total=200, concurrency=concurrency, headers=auth)
            ceiling = await run(url, lambda n: ("GET", "/v1/health", b""), total=creates,
                                concurrency=concurrency, headers=auth)
            first = load()
            before = cpu_by_role(cluster)
            if profile is not None:
                spies = start_spies(cluster, profile, 12)
            own = time.process_time()
            made = await run(url, make_create, total=creates, concurrency=concurrency,
                             headers=auth)
            generator = time.process_time() - own
            after = cpu_by_role(cluster)
            used = {role: after[role] - before.get(role, 0.0) for role in after}
            measured = Measured(ceiling, made, used, generator, (first, load()), resting,
                                idle_load)
        finally:
            for spy in spies:
                if spy.poll() is None:
                    spy.send_signal(signal.SIGINT)
                spy.wait(60)
            await up.end()
            problems = log_problems(cluster / "logs")
            if keep is not None and (cluster / "logs").is_dir():
                shutil.copytree(cluster / "logs", keep, dirs_exist_ok=True)
            if measured is None:  # the run failed: what the cluster said is the finding
                print_problems(problems, keep, file=sys.stderr)
            await sweep_data_dir(cluster)
        return replace(measured, problems=problems)


def print_problems(problems: tuple[int, list[str]], keep: Path | None = None,
                   file: TextIO = sys.stdout) -> None:
    count, shown = problems
    if not count:
        return
    where = f" (the logs are in {keep})" if keep else " (--keep DIR keeps the logs)"
    print(f"  the cluster's logs hold {count} ERROR/Traceback lines{where}, "
          f"the first {len(shown)}:", file=file)
    for line in shown:
        print(f"    {line}", file=file)
