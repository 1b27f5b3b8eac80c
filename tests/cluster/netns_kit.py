"""Hosts for tests: network namespaces on one bridge, each with its own address.

Every "host" is a namespace with one veth on a bridge in the test's own
namespace (which gets ``.254`` on it, so the test can reach every host).
Daemons run inside with ``ip netns exec``. ``partition`` drops traffic
between two groups with nftables inside the namespaces; ``heal`` removes it.
``lose`` drops a random share of the packets a host receives on one UDP port
(gossip), and ``stop_losing`` lifts it.

``ip netns exec`` gives each command a mount namespace of its own, which mounts
made inside never leave: a worker's machine namespaces (``ip netns add``
mounts them) are then seen by that worker alone. ``keep_mounts`` gives a host
one mount namespace that every command run on it after shares, as a real
host's commands share the host's: what one command mounts, the next sees.
Everything is created under names unique to the test process and removed
at the end.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

from bodega.worker.host.network import run
from tests.cidr_kit import octet

PARTITION_TABLE = "bodega_partition"
LOSS_TABLE = "bodega_loss"
SLOW_RATE = "1mbit"  # a congested link (Hosts.slow)
SLOW_QUEUE = "250ms"


@dataclass
class Hosts:
    tag: str = field(default_factory=lambda: f"{os.getpid() % 1000}")
    octet: int = field(default_factory=lambda: octet(211, 240))  # 209, 210: the README's
    names: list[str] = field(default_factory=list)
    mounts: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def bridge(self) -> str:
        return f"btb{self.tag}"

    def address(self, index: int) -> str:
        return f"10.{self.octet}.0.{index}"

    def namespace(self, index: int) -> str:
        return f"bdgt-{self.tag}-{index}"

    async def setup(self, count: int) -> None:
        await self.teardown()
        await run("ip", "link", "add", self.bridge, "type", "bridge")
        await run("ip", "addr", "add", f"{self.address(254)}/24", "dev", self.bridge)
        await run("ip", "link", "set", self.bridge, "up")
        for index in range(1, count + 1):
            ns, veth = self.namespace(index), f"btv{self.tag}-{index}"
            await run("ip", "netns", "add", ns)
            await run("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0",
                      "netns", ns)
            await run("ip", "link", "set", veth, "master", self.bridge, "up")
            batch = (f"addr add {self.address(index)}/24 dev eth0\nlink set eth0 up\n"
                     "link set lo up\n")
            await run("ip", "-n", ns, "-batch", "-", stdin=batch.encode())
            self.names.append(ns)

    def exec(self, index: int, *argv: str) -> list[str]:
        """The argv that runs ``argv`` on host ``index``."""
        holder = self.mounts.get(index)
        if holder is not None:
            return ["nsenter", f"--target={holder.pid}", "--mount", "--net", *argv]
        return ["ip", "netns", "exec", self.namespace(index), *argv]

    def keep_mounts(self, index: int, *, own_run_dirs: bool = False,
                    cgroups: bool = False) -> None:
        """From now on, every command on host ``index`` shares one mount namespace: the one
        ``ip netns exec`` makes (its ``/sys`` the host's), held by a process that sleeps.

        ``own_run_dirs``: the host also gets a ``/run/netns`` and a ``/run/wireguard`` of
        its own, as a real host has, where it would otherwise share the test's (and every
        other host's): what a host lists or sweeps there is its own machines' namespaces,
        and ``wg show interfaces`` on it lists its own WireGuard interfaces (wireguard-go's
        control sockets), not every host's.

        ``cgroups``: the host sees the cgroup hierarchies at ``/sys/fs/cgroup`` as a real
        host does (``ip netns exec`` mounts a ``/sys`` of its own, which has none): each
        hierarchy the test's host mounts there is mounted again, the same hierarchy (the
        same controllers), so its workers limit machines and run images."""
        holder = subprocess.Popen(self.exec(index, "sleep", "infinity"))
        for _ in range(500):  # until ip netns exec has made it and exec'd the sleep
            with contextlib.suppress(OSError):
                if Path(f"/proc/{holder.pid}/comm").read_text().strip() == "sleep":
                    break
            time.sleep(0.01)
        else:
            holder.kill()
            raise AssertionError(f"host {index}'s mount namespace never came up")
        self.mounts[index] = holder
        if own_run_dirs:
            # Private first, so that what the host mounts from now on stays its own.
            subprocess.run(["nsenter", f"--target={holder.pid}", "--mount", "sh", "-ec",
                            "mount --make-rprivate /\n"
                            "for d in /run/netns /run/wireguard; do mkdir -p $d;"
                            " mount -t tmpfs -o size=1m,mode=755 run $d; done"], check=True)
        if cgroups:
            subprocess.run(["nsenter", f"--target={holder.pid}", "--mount", "sh", "-ec",
                            cgroup_script(Path("/proc/self/mountinfo").read_text())],
                           check=True)

    async def partition(self, group: list[int], others: list[int]) -> None:
        """No packet between ``group`` and ``others``, either way (both sides drop)."""
        for side, away in ((group, others), (others, group)):
            addresses = ", ".join(self.address(i) for i in away)
            rules = (f"table inet {PARTITION_TABLE} {{\n"
                     f"  chain input {{ type filter hook input priority 0; "
                     f"ip saddr {{ {addresses} }} drop; }}\n"
                     f"  chain output {{ type filter hook output priority 0; "
                     f"ip daddr {{ {addresses} }} drop; }}\n}}\n")
            for index in side:
                await run("ip", "netns", "exec", self.namespace(index), "nft", "-f", "-",
                          stdin=rules.encode())

    async def link(self, index: int, up: bool) -> None:
        """Host ``index``'s cable plugged out (``up=False``) or back in: its veth on the
        bridge goes down, so nothing reaches it and it reaches nothing, the test included."""
        await run("ip", "link", "set", f"btv{self.tag}-{index}", "up" if up else "down")

    async def slow(self, index: int, on: bool) -> None:
        """Host ``index``'s link congested (``on``) or clear again: each way, at most
        ``SLOW_RATE``, with up to ``SLOW_QUEUE`` of packets queued behind and the rest
        dropped (a token bucket: this kernel has no netem for a fixed delay)."""
        ends = [(["tc", "qdisc"], f"btv{self.tag}-{index}"),  # into the host
                (self.exec(index, "tc", "qdisc"), "eth0")]  # out of it
        for argv, device in ends:
            if on:
                await run(*argv, "replace", "dev", device, "root", "tbf", "rate", SLOW_RATE,
                          "burst", "16kb", "latency", SLOW_QUEUE)
            else:
                await run(*argv, "del", "dev", device, "root", check=False)

    async def lose(self, indices: list[int], percent: int, udp_port: int) -> None:
        """Each of these hosts drops ``percent``% of the UDP packets it gets on ``udp_port``."""
        if not 0 <= percent <= 100:
            raise ValueError(f"loss must be 0-100%, got {percent}")
        rules = (f"table inet {LOSS_TABLE} {{\n chain input {{\n"
                 f"  type filter hook input priority 0;\n"
                 f"  udp dport {udp_port} numgen random mod 100 < {percent} drop\n }}\n}}\n")
        for index in indices:
            await run("ip", "netns", "exec", self.namespace(index), "nft", "-f", "-",
                      stdin=rules.encode())

    async def stop_losing(self) -> None:
        for ns in self.names:
            await run("ip", "netns", "exec", ns, "nft", "delete", "table", "inet", LOSS_TABLE,
                      check=False)

    async def heal(self) -> None:
        for ns in self.names:
            await run("ip", "netns", "exec", ns, "nft", "delete", "table", "inet",
                      PARTITION_TABLE, check=False)

    async def teardown(self) -> None:
        for holder in self.mounts.values():
            holder.kill()
            holder.wait()
        self.mounts.clear()
        # Each host's link first: deleting its namespace's name frees the namespace (and the
        # link with it) only once no process is left in it, and a process of the last module
        # still dying there would leave the link in the way of the next module's of this tag.
        links = "".join(f"link del btv{self.tag}-{index}\n" for index in range(1, 16))
        await run("ip", "-force", "-batch", "-", stdin=links.encode(), check=False)
        for index in range(1, 16):
            await run("ip", "netns", "del", self.namespace(index), check=False)
        await run("ip", "link", "del", self.bridge, check=False)
        self.names.clear()


def cgroup_script(mountinfo: str, root: str = "/sys/fs/cgroup") -> str:
    """The shell lines that mount, under ``root``, the cgroup hierarchies ``mountinfo`` shows
    there: a tmpfs, then each hierarchy with its own options (mounting a v1 hierarchy with the
    controllers of one already mounted is that hierarchy again)."""
    lines = [f"mount -t tmpfs -o mode=755 cgroup {root}"]
    for line in mountinfo.splitlines():
        fields = line.split()
        separator = fields.index("-")
        point, kind, options = fields[4], fields[separator + 1], fields[separator + 3]
        if kind in ("cgroup", "cgroup2") and point.startswith(root + "/"):
            lines.append(f"mkdir -p {point} && mount -t {kind} -o {options} {kind} {point}")
    return "\n".join(lines) + "\n"


@contextlib.asynccontextmanager
async def hosts(count: int) -> AsyncIterator[Hosts]:
    h = Hosts()
    await h.setup(count)
    try:
        yield h
    finally:
        await asyncio.sleep(0)
        await h.teardown()
