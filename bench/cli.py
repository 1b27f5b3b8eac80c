"""How long a `bodega` command takes, start to exit, against a bare Python start.

A real `bodega up` (one worker, null driver, its own data dir and free ports;
its CLI context in a contexts file of its own) serves the API. Each command
runs as a user types it, a new process each time: ``bodega --help``,
``bodega status -a bench`` and ``bodega apps list`` (which find the cluster
through its context), interleaved with ``python3 -c pass`` (the baseline),
after two warm-ups each. Prints each median and p90, and the ratio of the
median to the baseline's.

    python -m bench.cli [--runs 30] [--flags] [--other-src DIR]

``--flags`` passes ``--api-url`` and ``--token`` instead of the context.
``--other-src DIR`` also runs the three commands from another checkout's
``src/`` (say main's, which may have no contexts: both then pass flags),
interleaved with this tree's against the same cluster, so a busy host slows
both alike.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TOKEN = "bench-cli-token"


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
    return (f"  {name:<30} {median * 1000:7.1f} ms  p90 {p90 * 1000:7.1f} ms  "
            f"{median / baseline:5.1f}x the baseline")


async def until_up(up: asyncio.subprocess.Process) -> None:
    assert up.stdout is not None
    while b"bodega is up" not in (text := await asyncio.wait_for(up.stdout.readline(), 120)):
        if not text:
            raise SystemExit("bodega up exited")


def measure(args: argparse.Namespace, api: str, env: dict[str, str]) -> None:
    bodega = [sys.executable, "-m", "bodega"]
    flags = ["--api-url", api, "--token", TOKEN] if args.flags or args.other_src else []
    subprocess.run([*bodega, "apps", "create", "bench", *flags], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    trees = [("", env)]
    if args.other_src:
        trees.append((" (other)", {**env, "PYTHONPATH": str(Path(args.other_src).resolve())}))
    commands: dict[str, tuple[list[str], dict[str, str]]] = {
        "python3 -c pass": ([sys.executable, "-c", "pass"], env)}
    for suffix, tree_env in trees:
        commands[f"bodega --help{suffix}"] = ([*bodega, "--help"], tree_env)
        commands[f"bodega status -a bench{suffix}"] = (
            [*bodega, "status", "-a", "bench", *flags], tree_env)
        commands[f"bodega apps list{suffix}"] = ([*bodega, "apps", "list", *flags], tree_env)
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(2):
        for argv, command_env in commands.values():
            timed(argv, command_env)
    for _ in range(args.runs):
        for name, (argv, command_env) in commands.items():
            times[name].append(timed(argv, command_env))
    baseline = statistics.median(times["python3 -c pass"])
    print(f"{args.runs} runs each, interleaved ({'flags' if flags else 'context'}):")
    for name, found in times.items():
        print(line(name, found, baseline))


async def main(args: argparse.Namespace) -> None:
    root = Path(tempfile.mkdtemp(prefix="bodega-bench-cli-"))
    api = free_port()
    env = {**os.environ, "BODEGA_CONFIG": str(root / "config.toml")}
    for name in ("BODEGA_API_URL", "BODEGA_API_TOKEN", "FLY_API_TOKEN", "BODEGA_CONTEXT"):
        env.pop(name, None)
    up = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bodega", "up", "--data-dir", str(root / "cluster"),
        "--regions", "ams", "--workers-per-region", "1", "--driver", "null",
        "--api-port", str(api), "--proxy-port", str(free_port()),
        "--proxy-tls-port", str(free_port()),
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
