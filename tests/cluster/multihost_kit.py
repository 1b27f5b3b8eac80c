"""Three hosts as network namespaces, made a cluster the way docs/multi-host.md says.

Host 1 runs ``bodega up --advertise``; hosts 2 and 3 run the ``bodega join``
line it printed (its ``<REGION>`` filled in), each in its own namespace with
its own data dir. The test drives the cluster with the ``bodega`` CLI only,
from the test's own namespace (which reaches every host over the bridge).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from tests.cidr_kit import machine_cidr as held_cidr
from tests.cluster.netns_kit import Hosts
from tests.leftovers_kit import sweep_data_dir
from tests.poll_kit import until_sync
from tests.ports_kit import free_port

T = TypeVar("T")
TOKEN = "multi-host-admin"
CERT_LIFETIME = 90.0  # seconds; renewed at two thirds
STOP_TIMEOUT = 90.0  # seconds a stopped host is given before it is killed
JOIN_LINE = re.compile(
    r"^\s*(bodega join \S+ --token (K10\S+) --region <REGION>(?: --[a-z-]+)*)\s*$")


until = partial(until_sync, timeout=120.0, every=0.3)


@dataclass
class Host:
    index: int
    address: str
    data: Path
    log: Path
    process: subprocess.Popen[bytes] | None = None
    argv: tuple[str, ...] = ()  # what started it (without --data-dir): what starts it again

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def components(self) -> list[dict[str, Any]]:
        state = json.loads((self.data / "cluster.json").read_text())
        return list(state["components"])

    def worker_pids(self) -> dict[str, int]:
        return {c["name"]: int(c["pid"]) for c in self.components()
                if c["role"] == "worker" and c.get("pid")}


@dataclass
class MultiHost:
    hosts: Hosts
    root: Path
    api: str
    proxy: str
    join_line: str = ""
    machine_cidr: str = ""
    members: list[Host] = field(default_factory=list)
    host_env: dict[int, dict[str, str]] = field(default_factory=dict)  # more, for a host

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "BODEGA_API_URL": self.api, "BODEGA_API_TOKEN": TOKEN,
                "BODEGA_CONFIG": str(self.root / "cli.toml"), "BODEGA_SMOKE_TIME": "1"}

    def bodega(self, *args: str, timeout: float = 240.0) -> subprocess.CompletedProcess[str]:
        """The CLI a user types, on the test's own host."""
        return subprocess.run([sys.executable, "-m", "bodega", *args], env=self.env,
                              capture_output=True, text=True, timeout=timeout, check=False)

    def ok(self, *args: str) -> str:
        done = self.bodega(*args)
        assert done.returncode == 0, f"bodega {' '.join(args)}: {done.stdout}\n{done.stderr}"
        return done.stdout

    def json(self, *args: str) -> Any:
        return json.loads(self.ok(*args, "--json"))

    def start(self, index: int, *argv: str, data: Path | None = None) -> Host:
        """``bodega ARGV`` on host ``index``, in the foreground as a user runs it."""
        host = Host(index, self.hosts.address(index), data or self.root / f"host{index}",
                    self.root / f"host{index}-{len(self.members)}.out", argv=argv)
        with host.log.open("wb") as out:
            host.process = subprocess.Popen(
                self.hosts.exec(index, sys.executable, "-m", "bodega", *argv,
                                "--data-dir", str(host.data)),
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env={**os.environ, "BODEGA_CONFIG": str(self.root / f"cli{index}.toml"),
                     **self.host_env.get(index, {})})
        self.members.append(host)
        return host

    def join_argv(self, region: str) -> list[str]:
        """The printed join line's arguments, ``<REGION>`` filled in."""
        return self.join_line.replace("<REGION>", region).split()[1:]

    def run_on(self, index: int, *argv: str, timeout: float = 120.0
               ) -> subprocess.CompletedProcess[str]:
        """``bodega ARGV`` on host ``index``, to its end."""
        return subprocess.run(self.hosts.exec(index, sys.executable, "-m", "bodega", *argv),
                              capture_output=True, text=True, timeout=timeout, check=False,
                              env={**os.environ, "BODEGA_CONFIG": str(self.root / "x.toml")})

    def alive(self) -> dict[str, str]:
        return {m["name"]: m["status"] for m in self.json("cluster", "members")}

    def stop(self, *hosts: Host) -> None:
        """SIGINT (Ctrl-C) to each host's ``bodega`` at once, then each waited for, within
        90 s of the signals (what is left then is killed): hosts stop side by side, as each
        one's stop mostly waits (its servers' grace, its machines' stops)."""
        running = [p for host in hosts
                   if (p := host.process) is not None and p.poll() is None]
        for process in running:
            process.send_signal(signal.SIGINT)
        deadline = time.monotonic() + STOP_TIMEOUT
        for process in running:
            try:
                process.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def wait_for(host: Host, text: str, timeout: float = 180.0) -> str:
    def seen() -> str | None:
        assert host.process is not None
        out = host.output()
        if text in out:
            return out
        assert host.process.poll() is None, f"host {host.index} exited:\n{out[-4000:]}"
        return None
    return until(seen, f"{text!r} on host {host.index}", timeout=timeout)


@contextlib.contextmanager
def three_hosts(root: Path, *up_args: str, count: int = 3,
                keep_mounts: bool = False, cgroups: bool = False) -> Iterator[MultiHost]:
    """``up_args``: more flags for host 1's ``bodega up --advertise``; ``count``: namespaces
    made, host 1 started (the others are the test's to start); ``keep_mounts``: each host
    keeps one mount namespace, as a real host does, so a host whose every bodega process
    died still has the namespaces its machines were given, and ``/run/netns`` and
    ``/run/wireguard`` of its own (``Hosts.keep_mounts``); ``cgroups`` (with it): each host
    also sees the cgroup hierarchies, so its workers run images."""
    hosts = Hosts()
    asyncio.run(hosts.setup(count))
    if keep_mounts:
        for index in range(1, count + 1):
            hosts.keep_mounts(index, own_run_dirs=True, cgroups=cgroups)
    api, proxy, joins = free_port(), free_port(), free_port()
    cluster = MultiHost(hosts, root, f"http://{hosts.address(1)}:{api}",
                        f"http://{hosts.address(1)}:{proxy}",
                        machine_cidr=held_cidr(150, 200))
    try:
        first = cluster.start(1, "up", "--advertise", hosts.address(1), "--regions", "ams",
                              "--workers-per-region", "1", "--worker-cpus", "4",
                              "--worker-memory-mb", "2048", "--api-port", str(api),
                              "--proxy-port", str(proxy), "--join-port", str(joins),
                              "--machine-cidr", cluster.machine_cidr, "--token", TOKEN,
                              "--registry-port", "0", "--driver", "process",
                              # Short enough that joined hosts renew theirs while the module
                              # runs: through host 1's broker, across the network.
                              "--cert-validity", f"{CERT_LIFETIME:g}s", *up_args)
        # The join line ends the banner: waited for itself, not for the banner's first
        # line, which a loaded host may print a read before the rest.
        out = wait_for(first, "--region <REGION>")
        lines = [m for line in out.splitlines() if (m := JOIN_LINE.match(line))]
        assert lines, f"no join line printed:\n{out}"
        cluster.join_line = lines[0][1]
        yield cluster
    finally:
        cluster.stop(*cluster.members)
        for host in cluster.members:
            asyncio.run(sweep_data_dir(host.data))
        # What outlived its host (a wireguard-go of a killed worker).
        for index in range(1, count + 1):
            pids = subprocess.run(["ip", "netns", "pids", hosts.namespace(index)],
                                  capture_output=True, text=True, check=False).stdout
            for pid in pids.split():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)
        asyncio.run(hosts.teardown())
