"""The WireGuard overlay against the plain link, machine to machine across two hosts; and
the resolver against dnsmasq (``bench.network.resolver``). One run, both figures.

Two worker hosts (network namespaces on one bridge, ``tests.cluster.netns_kit``)
run with ``--private-network``, and a broker a third. A machine on host 2 runs a
keep-alive HTTP server on every address. The same ``wrk`` (one thread, the same
connections), in alternating slices: from a machine on host 1 (in its network
namespace) to host 2's machine's private IPv6 address (routed into the WireGuard
overlay, ``wireguard-go`` here: this kernel has no WireGuard module), and from host 1
itself to that machine's IPv4 address over the plain link between the namespaces (a
route to host 2's machine subnet through host 2). The plain side starts on the host,
not in the machine, because every worker's fence drops IPv4 from another host's
machines (they meet over the overlay only); so the baseline is one veth hop shorter.
Then, five times, a machine is started and stopped on host 2 while a poller
inside host 1's machine asks its resolver for the app's name every 20 ms: how
soon the answer follows each start and stop.

    python -m bench.network.private [--duration 10] [--rounds 4] [--connections 16] [--follows 5]

Needs root, ``wrk``, ``wireguard-go``, ``wg``, ``dnsmasq`` and ``dnsperf``.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import re
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from tests.cluster.netns_kit import hosts
from tests.cluster.private_net_kit import PrivateHosts, api, new_cluster_id
from tests.python_kit import machine_python

from bench.network.resolver import measure as measure_dns
from bench.proxy.http import WrkResult, _percentile, combined
from bodega.networking.core.sixpn import Layout, cluster_prefix
from bodega.worker.host.core.names import HostNames
from bodega.worker.host.network import run

SERVER = r"""
import asyncio
RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type: text/plain\r\n\r\nhello"
class Echo(asyncio.Protocol):
    def connection_made(self, transport):
        self.transport, self.buffer = transport, b""
    def data_received(self, data):
        self.buffer += data
        while b"\r\n\r\n" in self.buffer:
            _, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
            self.transport.write(RESPONSE)
async def main():
    server = await asyncio.get_running_loop().create_server(Echo, None, 8080)
    await server.serve_forever()
asyncio.run(main())
"""


# Asks the resolver for a name every 20 ms from inside a machine; prints when the count of
# addresses changes: "<unix time> <count>".
POLLER = r"""
import socket, sys, time
from dnslib import DNSRecord
sock = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
sock.settimeout(1)
last = None
while True:
    try:
        sock.sendto(DNSRecord.question(sys.argv[2], "AAAA").pack(), (sys.argv[1], 53))
        count = len(DNSRecord.parse(sock.recvfrom(4096)[0]).rr)
    except OSError:
        count = -1
    if count != last:
        print(time.time(), count, flush=True)
        last = count
    time.sleep(0.02)
"""


@dataclass
class Seen:
    """What the poller printed: (time, count) pairs."""

    changes: list[tuple[float, int]] = field(default_factory=list)

    async def read(self, stream: asyncio.StreamReader) -> None:
        while line := await stream.readline():
            at, count = line.split()
            self.changes.append((float(at), int(count)))

    async def after(self, since: float, count: int) -> float:
        """Seconds from ``since`` until the name had ``count`` addresses (0 if it had them
        already: it answered before the API said the machine was started)."""
        before = [seen for at, seen in self.changes if at < since]
        if before and before[-1] == count:
            return 0.0
        for _ in range(600):
            for at, seen in self.changes:
                if at >= since and seen == count:
                    return at - since
            await asyncio.sleep(0.05)
        raise SystemExit(f"the name never had {count} addresses")


async def names_follow(client: httpx.AsyncClient, netns: list[str], resolver: str,
                       times: int) -> tuple[list[float], list[float]]:
    """Seconds from a machine started on host 2 to its name answering on host 1, and from
    its stop to its dropping out; ``times`` of each."""
    seen = Seen()
    poller = await asyncio.create_subprocess_exec(
        *netns, sys.executable, "-c", POLLER, resolver, "bench.internal",
        stdout=asyncio.subprocess.PIPE, stdin=asyncio.subprocess.DEVNULL)
    assert poller.stdout is not None
    reader = asyncio.create_task(seen.read(poller.stdout))
    started, stopped = [], []
    try:
        for _ in range(times):
            mid = await machine_id(client, "syd", ["sleep", "infinity"])
            started.append(await seen.after(time.time(), 3))
            (await client.post(f"/v1/apps/bench/machines/{mid}/stop")).raise_for_status()
            stopped.append(await seen.after(time.time(), 2))
            await client.delete(f"/v1/apps/bench/machines/{mid}", params={"force": "true"})
    finally:
        poller.kill()
        await poller.wait()
        reader.cancel()
    return started, stopped


async def machine_id(client: httpx.AsyncClient, region: str, argv: list[str]) -> str:
    """A machine created and started: its id."""
    made = await client.post("/v1/apps/bench/machines", json={"region": region, "config": {
        "image": "local/bench", "init": {"exec": argv}, "guest": {"cpus": 1, "memory_mb": 256}}})
    made.raise_for_status()
    mid = str(made.json()["id"])
    (await client.get(f"/v1/apps/bench/machines/{mid}/wait",
                      params={"state": "started", "timeout": 60})).raise_for_status()
    return mid


async def machine(client: httpx.AsyncClient, region: str, argv: list[str]) -> str:
    """A started machine's private address."""
    mid = await machine_id(client, region, argv)
    for _ in range(100):
        ip = (await client.get(f"/v1/apps/bench/machines/{mid}")).json().get("private_ip", "")
        if ":" in ip:
            return str(ip)
        await asyncio.sleep(0.1)
    raise SystemExit(f"machine {mid} has no private address")


async def wrk_in(prefix: list[str], url: str, connections: int, seconds: float) -> WrkResult:
    process = await asyncio.create_subprocess_exec(
        *prefix, "wrk", "-t1", f"-c{connections}",
        f"-d{max(1, round(seconds))}s", "--latency", url, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT)
    out = (await process.communicate())[0].decode()
    rate = re.search(r"Requests/sec:\s+([\d.]+)", out)
    if rate is None:
        raise SystemExit(f"wrk against {url} failed:\n{out}")
    errors = re.search(r"Socket errors:.*|Non-2xx or 3xx responses:.*", out)
    return WrkResult(float(rate.group(1)), _percentile(out, "50"), _percentile(out, "99"),
                     errors.group(0) if errors else "")


async def measure_overlay(seconds: float, rounds: int, connections: int, follows: int
                          ) -> tuple[dict[str, WrkResult], tuple[list[float], list[float]]]:
    tmp = Path(tempfile.mkdtemp(prefix="bodega-6pn-"))
    async with hosts(3) as h:
        p = PrivateHosts(h, tmp, new_cluster_id())
        layout = Layout(cluster_prefix(p.cluster_id))
        daemons = [await p.worker(1, "w1", "ams").start(), await p.worker(2, "w2", "syd").start(),
                   await p.broker(3).start()]
        try:
            async with api(daemons[2]) as client:
                for _ in range(300):
                    if len((await client.get("/v1/cluster/workers")).json()) >= 2:
                        break
                    await asyncio.sleep(0.1)
                await client.post("/v1/apps", json={"app_name": "bench", "org_slug": "personal"})
                target = await machine(client, "syd", [machine_python(), "-c", SERVER])
                source = await machine(client, "ams", ["sleep", "infinity"])
            index = {a: layout.fields(a).machine for a in (target, source)}  # type: ignore[union-attr]
            subnet1, subnet2 = (ipaddress.IPv4Network(p.subnet(i)) for i in (1, 2))
            # The machine's namespace, as its worker sees it (named in the worker's mounts).
            worker = daemons[0].process
            assert worker is not None
            netns = ["nsenter", "-t", str(worker.pid), "-m", "--", "ip", "netns", "exec",
                     HostNames(p.cluster_id).namespace(subnet1, index[source])]
            plain = str(subnet2.network_address + index[target])
            await run(*h.exec(1, "ip", "route", "replace", str(subnet2), "via", h.address(2)))
            await run(*h.exec(2, "ip", "route", "replace", str(subnet1), "via", h.address(1)))
            urls = {"overlay": f"http://[{target}]:8080/", "plain": f"http://{plain}:8080/"}
            # The plain link is driven from host 1 itself: the fence every worker keeps on its
            # bridge drops IPv4 from another host's machine (machines of different hosts
            # meet over the overlay only), but not from a host.
            sides = {"overlay": netns, "plain": h.exec(1)}
            for name, url in urls.items():  # warm-up: WireGuard's handshake, ARP and ND
                await wrk_in(sides[name], url, connections, 1)
            slices: dict[str, list[WrkResult]] = {k: [] for k in urls}
            for _ in range(rounds):
                for name, url in urls.items():
                    slices[name].append(
                        await wrk_in(sides[name], url, connections, seconds / rounds))
            async with api(daemons[2]) as client:
                follow = await names_follow(client, netns, str(layout.resolver()), follows)
            return {name: combined(found) for name, found in slices.items()}, follow
        finally:
            for d in reversed(daemons):
                await d.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--follows", type=int, default=5, help="starts and stops to time")
    args = parser.parse_args()
    paths, (started, stopped) = asyncio.run(measure_overlay(
        args.duration, args.rounds, args.connections, args.follows))
    print(f"{'path':10} {'req/s':>10} {'p50 ms':>8} {'p99 ms':>8}")
    for name, r in paths.items():
        print(f"{name:10} {r.rate:10.0f} {r.p50:8.3f} {r.p99:8.3f} {r.errors}")
    print(f"name follows a start on another host: median {statistics.median(started):.3f} s, "
          f"max {max(started):.3f} s; a stop: median {statistics.median(stopped):.3f} s, "
          f"max {max(stopped):.3f} s")
    dns = asyncio.run(measure_dns(args.duration, 20))
    for name, d in dns.items():
        print(f"dns {name:8} {d.rate:10.0f} answers/s   lost {d.lost}")


if __name__ == "__main__":
    main()
