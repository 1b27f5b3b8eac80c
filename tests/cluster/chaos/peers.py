"""The cluster a user runs, for a campaign: five namespace hosts joined with the CLI.

As ``docs/multi-host.md`` says: host 1 runs ``bodega up --advertise``; host 2
joins as a server (a server token); hosts 3 and 4 join with the line host 1
printed; host 5 joins with ``--no-broker --no-proxy`` (workers only). Every
host has one worker (4 CPUs, 2048 MB) in its own region, the private network
is on, and certificates live 90 s (so every part renews its own several times
in a run). Host 4 keeps its data on a small tmpfs: a disk that can fill. Host 3's
wall clock runs 30 s ahead of the others' (``clock.py``).

``Peers`` also knows how to break each host (``apply``) and how to mend it
(``heal``), and how to read every worker's store and every host's view from
outside (``snapshot``): a dead or stopped daemon cannot hide anything.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

from bodega.worker.host.network import run
from tests.cluster.deploy_kit import app_dir
from tests.cluster.multihost_kit import Host, MultiHost, three_hosts, until, wait_for
from tests.cluster.netns_kit import SLOW_RATE

from .clock import SKEW, SKEWED, STEPS, set_skew, skewed_clock
from .host_faults import fill
from .observe import machine_processes, read_view, read_worker
from .plan import HostShape, PlannedFault
from .state import CreateOutcome, Expectation, MachineProcess, Snapshot, Totals

REGIONS = ("ams", "syd", "lon", "fra", "mad")  # host 1 to host 5
SIZES = ("--driver", "process", "--cpus", "4", "--memory-mb", "2048")
TOTALS = Totals(millicpus=4000, memory_mb=2048)
TMPFS_MB = 160
WEB_APP = "web"  # a small HTTP server with one machine on every host, read through the proxies
LOSS_TABLE = "bodega_chaos_loss"
PEER_BACK = 30.0  # seconds for the private network to put a removed WireGuard peer back


class NotHealed(Exception):
    """What a fault found broken, or left broken: bodega did not mend it."""


@dataclass(frozen=True)
class Applied:
    """What ``Peers.apply`` did, as its ``heal`` needs it: a line for people, the process it
    signalled, the WireGuard peer it removed."""

    detail: str
    pid: int | None = None
    interface: str = ""
    peer: str = ""


@dataclass
class PeerHost:
    index: int
    host: Host  # the running ``bodega up``/``join`` (replaced when the host comes back)
    shape: HostShape
    api: str | None  # its Machines API, when it runs a broker
    proxy: str | None

    @property
    def name(self) -> str:
        return self.shape.name

    @property
    def data(self) -> Path:
        return self.host.data

    def components(self) -> list[dict[str, object]]:
        with contextlib.suppress(OSError, ValueError):
            return self.host.components()
        return []

    def pid_of(self, role: str) -> int | None:
        return next((int(str(c["pid"])) for c in self.components()
                     if c.get("role") == role and c.get("pid")), None)


@dataclass
class Peers:
    multi: MultiHost
    hosts: list[PeerHost] = field(default_factory=list)
    clock: Path | None = None  # the skewed host's libfaketime file (skewed_clock)

    def named(self, name: str) -> PeerHost:
        return next(h for h in self.hosts if h.name == name)

    def cli(self, host: PeerHost) -> MultiHost:
        """The CLI pointed at ``host``'s own API."""
        return replace(self.multi, api=host.api or self.multi.api)

    # -- breaking and mending -----------------------------------------------------------------
    def netns_pids(self, host: PeerHost) -> list[int]:
        """Every process on the host but the one holding its mounts (the host's kernel state,
        which outlives its processes; a power cut would lose that too)."""
        out = subprocess.run(["ip", "netns", "pids", self.multi.hosts.namespace(host.index)],
                             capture_output=True, text=True, check=False).stdout
        holder = self.multi.hosts.mounts.get(host.index)
        return [int(p) for p in out.split() if holder is None or int(p) != holder.pid]

    async def apply(self, fault: PlannedFault, rng: random.Random) -> Applied:
        """Break what ``fault`` says; what was done."""
        assert fault.host is not None
        host = self.named(fault.host)
        kind = fault.kind
        if kind == "host-kill":
            pids = self.netns_pids(host)
            for pid in pids:  # every bodega process of the host at once, as a crash would
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            return Applied(f"{len(pids)} processes")
        if kind == "link-down":
            await self.multi.hosts.link(host.index, up=False)
            return Applied("veth down")
        if kind == "loss-one-way":
            peer = self.named(fault.peer or "")
            rules = (f"table inet {LOSS_TABLE} {{\n chain input {{\n"
                     f"  type filter hook input priority 0;\n"
                     f"  ip saddr {peer.host.address} numgen random mod 100 < {fault.percent} "
                     "drop\n }\n}\n")
            await run(*self.multi.hosts.exec(host.index, "nft", "-f", "-"),
                      stdin=rules.encode())
            return Applied(f"{fault.percent}% of what {peer.name} sends it")
        if kind == "slow-link":
            await self.multi.hosts.slow(host.index, on=True)
            return Applied(f"{SLOW_RATE} each way")
        if kind == "clock-step":
            if self.clock is None:
                raise ValueError(f"{host.name}'s clock is not faked")
            step = rng.choice(STEPS)
            set_skew(self.clock, SKEW + step)
            return Applied(f"wall clock {step:+d} s, now {SKEW + step:+d} s off")
        if kind == "worker-stop":
            worker = host.pid_of("worker")
            if worker is None:
                return Applied("no worker running")
            try:
                os.kill(worker, signal.SIGSTOP)
            except ProcessLookupError:  # it was being restarted: its components file lagged
                return Applied(f"worker pid {worker} gone before SIGSTOP")
            return Applied(f"SIGSTOP pid {worker}", pid=worker)
        if kind == "disk-full":
            written = await asyncio.to_thread(fill, host.data / "chaos-fill")
            return Applied(f"{written >> 20} MiB written to ENOSPC")
        if kind in ("agent-kill", "broker-kill", "proxy-kill", "worker-kill"):
            role = kind.removesuffix("-kill")
            part = host.pid_of(role)
            if part is None:
                return Applied(f"no {role} running")
            with contextlib.suppress(ProcessLookupError):
                os.kill(part, signal.SIGKILL)
            return Applied(f"SIGKILL {role} pid {part}", pid=part)
        if kind == "wg-peer-remove":
            return await self.remove_wg_peer(host, rng)
        raise ValueError(f"no such fault: {kind}")

    async def heal(self, fault: PlannedFault, applied: Applied) -> str:
        """Undo ``fault``; waits until the host is back where that is up to the operator."""
        if fault.kind == "key-rotate" or fault.host is None:
            return ""
        host = self.named(fault.host)
        if fault.kind == "host-kill":
            await asyncio.to_thread(self.bring_back, host)
            return "started again on its data"
        if fault.kind == "link-down":
            await self.multi.hosts.link(host.index, up=True)
        elif fault.kind == "loss-one-way":
            await run(*self.multi.hosts.exec(host.index, "nft", "delete", "table", "inet",
                                             LOSS_TABLE), check=False)
        elif fault.kind == "slow-link":
            await self.multi.hosts.slow(host.index, on=False)
        elif fault.kind == "clock-step" and self.clock is not None:
            set_skew(self.clock, SKEW)
        elif fault.kind == "worker-stop" and applied.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(applied.pid, signal.SIGCONT)
        elif fault.kind == "disk-full":
            (host.data / "chaos-fill").unlink(missing_ok=True)
        elif fault.kind == "wg-peer-remove":
            return await self.peer_back(host, applied.interface, applied.peer)
        elif fault.kind.endswith("-kill"):
            role = fault.kind.removesuffix("-kill")
            await asyncio.to_thread(until, lambda: (p := host.pid_of(role)) is not None
                                    and p != applied.pid, f"{host.name}'s {role} restarted",
                                    timeout=90)
            return f"{role} restarted as pid {host.pid_of(role)}"
        return ""

    def bring_back(self, host: PeerHost) -> None:
        """``bodega up`` or ``bodega join`` again on the host's data, as its operator would."""
        self.multi.stop(host.host)
        host.host = self.multi.start(host.index, *host.host.argv, data=host.data)
        wait_for(host.host, "bodega is up" if host.index == 1 else "bodega joined",
                 timeout=240)

    def wg(self, host: PeerHost, *argv: str) -> str:
        return subprocess.run(self.multi.hosts.exec(host.index, "wg", *argv),
                              capture_output=True, text=True, check=False).stdout

    async def remove_wg_peer(self, host: PeerHost, rng: random.Random) -> Applied:
        """One WireGuard peer of the host's private network removed under traffic."""
        interfaces = (await asyncio.to_thread(self.wg, host, "show", "interfaces")).split()
        if not interfaces:
            raise NotHealed(f"{host.name} has no WireGuard interface: its private network "
                            "is down")
        peers = (await asyncio.to_thread(self.wg, host, "show", interfaces[0], "peers")).split()
        if not peers:
            raise NotHealed(f"{host.name}'s {interfaces[0]} has no peer")
        peer = rng.choice(peers)
        await asyncio.to_thread(self.wg, host, "set", interfaces[0], "peer", peer, "remove")
        return Applied(f"{interfaces[0]} peer {peer} removed of {len(peers)}",
                       interface=interfaces[0], peer=peer)

    async def peer_back(self, host: PeerHost, interface: str, peer: str) -> str:
        """Wait (bounded) for bodega to put a removed WireGuard peer back."""
        start = time.monotonic()
        while time.monotonic() - start < PEER_BACK:
            listed = await asyncio.to_thread(self.wg, host, "show", interface, "peers")
            if peer in listed.split():
                return f"back after {time.monotonic() - start:.1f}s"
            await asyncio.sleep(0.5)
        raise NotHealed(f"{host.name}'s WireGuard peer {peer[:8]} not back on {interface} "
                        f"within {PEER_BACK:.0f}s")

    async def heal_all(self) -> None:
        """Whatever a campaign stopped early left broken: every link up and clear, no loss,
        the skewed clock back at its skew, every stopped worker continued, every host
        running."""
        if self.clock is not None:
            set_skew(self.clock, SKEW)
        for host in self.hosts:
            await self.multi.hosts.link(host.index, up=True)
            await self.multi.hosts.slow(host.index, on=False)
            await run(*self.multi.hosts.exec(host.index, "nft", "delete", "table", "inet",
                                             LOSS_TABLE), check=False)
            (host.data / "chaos-fill").unlink(missing_ok=True)
            pid = host.pid_of("worker")
            if pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)
            if host.host.process is None or host.host.process.poll() is not None \
                    or not self.netns_pids(host):
                await asyncio.to_thread(self.bring_back, host)

    # -- reading it from outside --------------------------------------------------------------
    def worker_dirs(self) -> dict[str, Path]:
        return {f"{h.name}/{path.parent.name}": path.parent
                for h in self.hosts for path in sorted(h.data.glob("workers/*/worker.db"))}

    def view_paths(self) -> dict[str, Path]:
        return {h.name: h.data / "agent" / "registry.db" for h in self.hosts}

    def snapshot(self, creates: list[CreateOutcome] | None = None,
                 expectations: list[Expectation] | None = None, *,
                 views: bool = True) -> Snapshot:
        workers = []
        for name, path in self.worker_dirs().items():
            with contextlib.suppress(sqlite3.Error):  # a store mid-recovery: read it next time
                workers.append(read_worker(name, path, TOTALS))
        known = {m.id for w in workers for m in w.machines}
        handles = _handles(self.worker_dirs())
        found = attribute(machine_processes({}, known), handles, _parents())
        return Snapshot(workers=workers, processes=found, creates=creates or [],
                        expectations=expectations or [],
                        views=[read_view(n, p) for n, p in self.view_paths().items()]
                        if views else [])


def _handles(dirs: dict[str, Path]) -> dict[int, str]:
    """The pid each worker's store records for each machine it runs -> that worker."""
    out: dict[int, str] = {}
    for name, path in dirs.items():
        with contextlib.suppress(sqlite3.Error), contextlib.closing(sqlite3.connect(
                f"file:{path / 'worker.db'}?mode=ro", uri=True, timeout=10)) as db:
            for (handle,) in db.execute(
                    "SELECT handle FROM machines WHERE handle IS NOT NULL AND state = 'started'"):
                pid = json.loads(handle).get("pid")
                if pid:
                    out[int(pid)] = name
    return out


def _parents() -> dict[int, int]:
    out = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                out[int(entry.name)] = int(
                    (entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
    return out


def attribute(found: list[MachineProcess], handles: dict[int, str],
              parents: dict[int, int]) -> list[MachineProcess]:
    """Each machine process with the worker that runs it: the one whose store records it, or
    an ancestor of it, as the machine's running process (None: no worker does)."""
    out = []
    for p in found:
        pid, host = p.pid, None
        for _ in range(64):
            if pid in handles:
                host = handles[pid]
                break
            pid = parents.get(pid, 0)
            if pid <= 1:
                break
        out.append(p.model_copy(update={"host": host}))
    return out


@contextlib.contextmanager
def peers_cluster(root: Path) -> Iterator[Peers]:
    """Five hosts joined with the CLI, the web app on every one; all of it gone afterwards."""
    small = root / "host4"
    small.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={TMPFS_MB}m", "tmpfs", str(small)],
                   check=True)
    try:
        with three_hosts(root, count=5, keep_mounts=True) as multi:
            peers = Peers(multi)
            peers.clock = root / "skewed-clock.rc"
            multi.host_env[SKEWED] = skewed_clock(peers.clock)
            first = multi.members[0]
            server_token = multi.ok("cluster", "token", "create", "--server",
                                    "--description", "chaos host 2").strip()
            address = multi.join_argv("syd")[1]
            started = [
                multi.start(2, "join", address, "--token", server_token, "--region", "syd",
                            "--server", *SIZES),
                multi.start(3, *multi.join_argv("lon"), *SIZES),
                multi.start(4, *multi.join_argv("fra"), *SIZES, data=small),
                multi.start(5, *multi.join_argv("mad"), "--no-broker", "--no-proxy", *SIZES)]
            for host in started:
                wait_for(host, "bodega joined")
            peers.hosts.append(PeerHost(1, first, HostShape("host1"), multi.api, multi.proxy))
            for host in started:
                shape = HostShape(f"host{host.index}", broker=host.index != 5,
                                  proxy=host.index != 5, small_disk=host.index == 4,
                                  skewed=host.index == SKEWED)
                peers.hosts.append(PeerHost(
                    host.index, host, shape,
                    f"http://{host.address}:4280" if shape.broker else None,
                    f"http://{host.address}:8080" if shape.proxy else None))
            until(lambda: sum(1 for s in multi.alive().values() if s == "alive") >= 13,
                  "five workers, four brokers and four proxies alive",
                  timeout=240)
            multi.ok("deploy", "-c", str(app_dir(root, "hello", WEB_APP)))
            multi.ok("scale", "count", "1", "--app", WEB_APP, "--region", ",".join(REGIONS))
            until(lambda: sum(1 for m in multi.json("machine", "list", "--app", WEB_APP)
                              if m["state"] == "started") >= len(REGIONS),
                  "the web app started on every host", timeout=240)
            yield peers
    finally:
        # The small disk goes with its mount: its logs and stores are kept beside the others.
        with contextlib.suppress(shutil.Error, OSError):  # pipes and sockets are not copied
            shutil.copytree(small, root / "host4-kept", ignore_dangling_symlinks=True,
                            dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("*.sock", "*.gate", "chaos-fill"))
        for _ in range(20):
            if subprocess.run(["umount", str(small)], check=False,
                              capture_output=True).returncode == 0:
                break
            time.sleep(0.5)
