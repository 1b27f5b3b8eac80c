"""How long a `bodega` command takes, start to exit, against a bare Python start.

A real `bodega up` (one worker with room for every machine the runs make, null
driver, its own data dir, free ports and machine range; its CLI context in a
contexts file of its own) serves the API. Each command runs as a user types it,
a new process each time, interleaved with ``python3 -c pass`` (the baseline),
after two warm-ups each: ``bodega --help``, ``bodega apps list``, ``bodega status
-a bench``, ``bodega apps create NAME`` (a new name each run) and ``bodega machine
run -a bench`` (which waits until the machine has started). Prints each median
and p90, the baseline's median beside it, the ratio of the two, and the aim where
there is one, with the load average before and after.

    python -m bench.cli.startup [--runs 30] [--flags] [--other-src DIR]

``--flags`` passes ``--api-url`` and ``--token`` instead of the context.
``--other-src DIR`` also runs the commands from another checkout's ``src/``
(say main's), interleaved with this tree's against the same cluster, so a busy
host slows both alike; both then pass flags.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

TOKEN = "bench-cli-token"
MACHINE_CIDR = "10.247.0.0/16"  # a range of its own: another cluster on this host keeps its own
BASELINE = "python3 -c pass"
# The aims, as multiples of a bare interpreter's start.
AIMS = {"bodega --help": 10.0, "bodega apps list": 25.0}

Argv = Callable[[], list[str]]  # a command's arguments, made anew for each run


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def timed(argv: list[str], env: dict[str, str]) -> float:
    began = time.perf_counter()
    done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          check=False)
    elapsed = time.perf_counter() - began
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {done.stderr.decode().strip()}")
    return elapsed


def line(name: str, times: list[float], baseline: float) -> str:
    median = statistics.median(times)
    p90 = statistics.quantiles(times, n=10)[-1]
    ratio = median / baseline
    aim = AIMS.get(name.removesuffix(" (other)"))
    verdict = "" if aim is None else f"  aim {aim:g}x: {'met' if ratio <= aim else 'NOT met'}"
    return (f"  {name:<38} {median * 1000:7.1f} ms  p90 {p90 * 1000:7.1f} ms  "
            f"baseline {baseline * 1000:5.1f} ms  {ratio:5.1f}x{verdict}")


def load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


async def until_up(up: asyncio.subprocess.Process) -> None:
    assert up.stdout is not None
    while b"bodega is up" not in (text := await asyncio.wait_for(up.stdout.readline(), 120)):
        if not text:
            raise SystemExit("bodega up exited")


def commands(args: argparse.Namespace, api: str, env: dict[str, str]
             ) -> dict[str, tuple[Argv, dict[str, str]]]:
    bodega = [sys.executable, "-m", "bodega"]
    flags = ["--api-url", api, "--token", TOKEN] if args.flags or args.other_src else []
    names = itertools.count()
    trees = [("", env)]
    if args.other_src:
        trees.append((" (other)", {**env, "PYTHONPATH": str(Path(args.other_src).resolve())}))
    found: dict[str, tuple[Argv, dict[str, str]]] = {
        BASELINE: (lambda: [sys.executable, "-c", "pass"], env)}
    for suffix, tree_env in trees:
        found[f"bodega --help{suffix}"] = (lambda: [*bodega, "--help"], tree_env)
        found[f"bodega apps list{suffix}"] = (lambda: [*bodega, "apps", "list", *flags], tree_env)
        found[f"bodega status -a bench{suffix}"] = (
            lambda: [*bodega, "status", "-a", "bench", *flags], tree_env)
        found[f"bodega apps create NAME{suffix}"] = (
            lambda: [*bodega, "apps", "create", f"bench-{next(names)}", *flags], tree_env)
        found[f"bodega machine run -a bench{suffix}"] = (
            lambda: [*bodega, "machine", "run", "-a", "bench", *flags, "--", "sleep", "1"],
            tree_env)
    return found


def measure(args: argparse.Namespace, api: str, env: dict[str, str]) -> None:
    flags = ["--api-url", api, "--token", TOKEN] if args.flags or args.other_src else []
    subprocess.run([sys.executable, "-m", "bodega", "apps", "create", "bench", *flags], env=env,
                   check=True, stdout=subprocess.DEVNULL)
    runs = commands(args, api, env)
    times: dict[str, list[float]] = {name: [] for name in runs}
    before = load()
    for _ in range(2):
        for argv, command_env in runs.values():
            timed(argv(), command_env)
    for _ in range(args.runs):
        for name, (argv, command_env) in runs.items():
            times[name].append(timed(argv(), command_env))
    baseline = statistics.median(times[BASELINE])
    print(f"{args.runs} runs each, interleaved ({'flags' if flags else 'context'}); "
          f"load average {before} before, {load()} after:")
    for name, found in times.items():
        if name != BASELINE:
            print(line(name, found, baseline))


async def main(args: argparse.Namespace) -> None:
    root = Path(tempfile.mkdtemp(prefix="bodega-bench-cli-"))
    api = free_port()
    env = {**os.environ, "BODEGA_CONFIG": str(root / "config.toml")}
    # As an installed bodega runs: bytecode compiled once and kept (the warm-ups write it),
    # output buffered.
    for name in ("BODEGA_API_URL", "BODEGA_API_TOKEN", "FLY_API_TOKEN", "BODEGA_CONTEXT",
                 "PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED"):
        env.pop(name, None)
    # Room for every machine the runs make: the null driver starts none for real.
    room = 2 * (args.runs + 2) + 8
    up = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bodega", "up", "--data-dir", str(root / "cluster"),
        "--regions", "ams", "--workers-per-region", "1", "--driver", "null",
        "--worker-cpus", str(room), "--worker-memory-mb", str(256 * room),
        "--api-port", str(api), "--proxy-port", str(free_port()),
        "--proxy-tls-port", str(free_port()), "--machine-cidr", MACHINE_CIDR,
        "--registry-port", str(free_port()), "--token", TOKEN, "--log-level", "warning",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, env=env, cwd=root)
    try:
        await until_up(up)
        await asyncio.to_thread(measure, args, f"http://127.0.0.1:{api}", env)
    finally:
        if up.returncode is None:
            up.send_signal(signal.SIGINT)
            await asyncio.wait_for(up.wait(), 120)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--flags", action="store_true",
                        help="pass --api-url and --token instead of using the context")
    parser.add_argument("--other-src", help="another checkout's src/ to measure beside this one")
    asyncio.run(main(parser.parse_args()))
