"""The private network's resolver against dnsmasq, serving the same records; answers/s.

A network namespace of its own holds, on ``lo``: the resolver's address, a
machine's address of the network asking, and an address for dnsmasq. bodega's
resolver runs as its own process (``python -m bench.network.resolver serve``): the
code the worker runs, its directory rebuilt from registry-shaped rows as in a
worker (every 0.2 s). dnsmasq (``--no-resolv --no-hosts``) serves the same
names: ``--host-record`` and ``--txt-record`` lines. ``dnsperf`` (one client,
the same query mix, the same source address) drives each for the same time.

    python -m bench.network.resolver [--duration 10] [--machines 20]

Needs ``dnsmasq`` and ``dnsperf`` (Debian: dnsmasq-base, dnsperf) and root.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import json
import os
import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bodega.model.rows import AppRow
from bodega.networking.core.directory import directory
from bodega.networking.core.names import Directory
from bodega.networking.core.sixpn import Layout, network_field, network_key
from bodega.networking.resolver import Resolver, serve
from bodega.worker.host.network import run

LAYOUT = Layout(ipaddress.IPv6Network("fdaa:b:e::/48"))
NETWORK = network_key("personal", None)
DNSMASQ = str(LAYOUT.prefix.network_address + 4)
ASKER = str(LAYOUT.machine(1, network_field(NETWORK), 200))
REGIONS = ("ams", "syd", "fra")


def rows(machines: int) -> tuple[list[dict[str, Any]], list[AppRow]]:
    """Registry-shaped rows: ``machines`` started machines of app ``web`` on three hosts."""
    docs = [{"id": f"m{i:04d}", "app": "web", "state": "started",
             "region": REGIONS[i % 3], "config": {"metadata": {"fly_process_group": "app"}},
             "private_ip": str(LAYOUT.machine(1 + i % 3, network_field(NETWORK), 2 + i))}
            for i in range(machines)]
    return docs, [AppRow(name="web", org_slug="personal"), AppRow(name="api", org_slug="personal")]


def queries(docs: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [("web.internal", "AAAA"), ("ams.web.internal", "AAAA"),
            (f"{docs[0]['id']}.vm.web.internal", "AAAA"), ("vms.web.internal", "TXT"),
            ("_apps.internal", "TXT")]


def dnsmasq_argv(found: Directory, docs: list[dict[str, Any]]) -> list[str]:
    """dnsmasq serving what bodega's resolver answers for ``queries``."""
    argv = ["dnsmasq", "--keep-in-foreground", "--no-resolv", "--no-hosts", "--bind-interfaces",
            f"--listen-address={DNSMASQ}", "--port=53", "--user=root", "--cache-size=0",
            "--pid-file="]
    by_name: dict[str, list[str]] = {}
    for m in found.machines:
        by_name.setdefault("web.internal", []).append(m.address)
        by_name.setdefault(f"{m.region}.web.internal", []).append(m.address)
        by_name.setdefault(f"{m.id}.vm.web.internal", []).append(m.address)
    argv += [f"--host-record={name},{address}" for name, addresses in by_name.items()
             for address in addresses]
    vms = ",".join(f"{m.id} {m.region}" for m in sorted(found.machines, key=lambda m: m.id))
    argv += [f"--txt-record=vms.web.internal,{vms}", "--txt-record=_apps.internal,api,web"]
    del docs
    return argv


@dataclass(frozen=True)
class DnsResult:
    server: str
    rate: float  # answers per second
    lost: str


async def dnsperf(ns: str, server: str, query_file: Path, seconds: float) -> DnsResult:
    out = await run("ip", "netns", "exec", ns, "dnsperf", "-s", server, "-a", ASKER,
                    "-d", str(query_file), "-l", str(max(1, round(seconds))), "-c", "1",
                    "-q", "64", "-t", "2")
    rate = re.search(r"Queries per second:\s+([\d.]+)", out)
    lost = re.search(r"Queries lost:\s+(.*)", out)
    if rate is None:
        raise SystemExit(f"dnsperf against {server} failed:\n{out}")
    return DnsResult(server, float(rate.group(1)), lost.group(1).strip() if lost else "")


async def measure(seconds: float, machines: int) -> dict[str, DnsResult]:
    ns = f"bdgdns{os.getpid() % 100000}"
    docs, apps = rows(machines)
    found = directory(docs, apps, [], LAYOUT)
    tmp = Path(tempfile.mkdtemp(prefix="bodega-dns-"))
    query_file = tmp / "queries"
    query_file.write_text("".join(f"{n} {t}\n" for n, t in queries(docs)))
    procs: list[asyncio.subprocess.Process] = []
    await run("ip", "netns", "add", ns)
    try:
        batch = "link set lo up\n" + "".join(
            f"addr add {a}/128 dev lo\n" for a in (LAYOUT.resolver(), DNSMASQ, ASKER))
        await run("ip", "-n", ns, "-batch", "-", stdin=batch.encode())
        procs.append(await asyncio.create_subprocess_exec(
            "ip", "netns", "exec", ns, sys.executable, "-m", "bench.network.resolver", "serve",
            "--machines", str(machines), stdout=asyncio.subprocess.DEVNULL))
        procs.append(await asyncio.create_subprocess_exec(
            "ip", "netns", "exec", ns, *dnsmasq_argv(found, docs),
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL))
        await asyncio.sleep(1.5)  # both bind at once; a dnsperf warm-up would do as well
        results = {}
        for name, server in (("bodega", str(LAYOUT.resolver())), ("dnsmasq", DNSMASQ)):
            await dnsperf(ns, server, query_file, 1)  # warm-up
            results[name] = await dnsperf(ns, server, query_file, seconds)
        return results
    finally:
        for proc in procs:
            if proc.returncode is None:
                proc.terminate()
                await proc.wait()
        await run("ip", "netns", "del", ns, check=False)


async def serve_forever(machines: int) -> None:
    docs, apps = rows(machines)
    resolver = Resolver(LAYOUT, "ams", lambda: directory(docs, apps, [], LAYOUT))
    await serve(resolver, str(LAYOUT.resolver()))
    await asyncio.Event().wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("mode", nargs="?", default="measure", choices=("measure", "serve"))
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--machines", type=int, default=20)
    args = parser.parse_args()
    if args.mode == "serve":
        asyncio.run(serve_forever(args.machines))
        return
    results = asyncio.run(measure(args.duration, args.machines))
    for name, r in results.items():
        print(f"{name:8} {r.rate:10.0f} answers/s   lost {r.lost}")
    print(json.dumps({k: v.rate for k, v in results.items()}))


if __name__ == "__main__":
    main()
