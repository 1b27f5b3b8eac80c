"""Restarting bodega on a host never restarts its machines (docs/multi-host.md, "Restarting
bodega on a host"), and a host that leaves on purpose says what it left.

Three namespace hosts, each keeping one mount namespace and seeing the cgroup hierarchies
as a real host does: host 1 runs ``bodega up --advertise``, hosts 2 and 3 the ``bodega
join`` line it printed. An app has one machine on each. While a client on host 1 reads
host 2's machine directly (its address, through no proxy, with a 2 s timeout):

- ``bodega join`` on host 2 gets SIGTERM (what systemd's stop and restart send): every
  bodega process of the host ends, the machine answers throughout, and ``bodega join``
  again on the same data dir owns it again, the same run of it (its pid unchanged);
- every bodega process of host 2 is killed with SIGKILL, ``bodega join`` first (the
  order in which its workers used to stop their machines as they saw it go): the same.

Then host 3 is stopped with Ctrl-C, which stops its machines: host 1's API shows its
machine ``stopped`` (its host unreachable), not still ``started``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.deploy_kit import app_dir, readable_dir
from tests.cluster.multihost_kit import Host, MultiHost, three_hosts, until, wait_for

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")

APP = "steady"
SIZES = ("--driver", "process", "--cpus", "4", "--memory-mb", "2048")
# A client reading one address until told to stop (its stdin closes): one GET every
# 50 ms with a 2 s timeout; prints each failure, then "answered N failed M".
READER = """
import sys, threading, time, urllib.request
url, failed, answered, done = sys.argv[1], [], [0], threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
while not done.is_set():
    try:
        with urllib.request.urlopen(url, timeout=2) as reply:
            reply.read()
            answered[0] += 1
    except Exception as exc:
        failed.append(f"{time.strftime('%H:%M:%S')} {exc!r}")
        print("failed:", failed[-1], flush=True)
    time.sleep(0.05)
print(f"answered {answered[0]} failed {len(failed)}", flush=True)
"""


@pytest.fixture(scope="module")
def hosts() -> Iterator[MultiHost]:
    with readable_dir() as root, three_hosts(root, keep_mounts=True, cgroups=True) as multi:
        for index, region in ((2, "syd"), (3, "lon")):
            multi.start(index, *multi.join_argv(region), *SIZES)
        for host in multi.members[1:]:
            wait_for(host, "bodega joined")
        until(lambda: sum(1 for s in multi.alive().values() if s == "alive") >= 9,
              "three workers, three brokers and three proxies alive")
        multi.ok("deploy", "-c", str(app_dir(root, "hello", APP)))
        multi.ok("scale", "count", "1", "--app", APP, "--region", "ams,syd,lon")
        until(lambda: {m["region"] for m in started(multi)} == {"ams", "syd", "lon"}
              and len(started(multi)) == 3, "a machine started on each host")
        yield multi


def started(multi: MultiHost) -> list[dict[str, Any]]:
    return [m for m in multi.json("machine", "list", "--app", APP)
            if m["state"] == "started"]


def machine_in(multi: MultiHost, region: str) -> dict[str, Any]:
    return next(m for m in multi.json("machine", "list", "--app", APP)
                if m["region"] == region)


def served_at(multi: MultiHost, machine_id: str) -> str:
    """Where the machine's service answers (its address on its host's bridge), from the
    cluster's view."""
    row = multi.json("query", "SELECT json_extract(doc, '$.service_host') AS service_host "
                     f"FROM machines WHERE id = '{machine_id}'")  # one row: one JSON object
    return str(row["service_host"])


def joined_host(multi: MultiHost, index: int) -> Host:
    return [h for h in multi.members if h.index == index][-1]


def bodega_processes(multi: MultiHost, index: int) -> list[int]:
    """Every bodega process of host ``index``: its ``bodega join`` and what it runs (the
    fork server, the agent, workers, broker, proxy), found by their command lines among the
    processes of the host's namespace. The machines and their launchers are not bodega."""
    pids = subprocess.run(["ip", "netns", "pids", multi.hosts.namespace(index)],
                          capture_output=True, text=True, check=True).stdout.split()
    found = []
    for pid in map(int, pids):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if b"-m bodega " in argv or b"bodega.cluster.forkserver" in argv:
            found.append(pid)
    return found


def runs(host: Host, machine_id: str) -> dict[str, int]:
    """The machine's runs on its host, each start's pid file (named by instance and start
    number) with the pid its worker recorded: a start again would add one."""
    found = {}
    for pidfile in host.data.glob(f"workers/*/machines/{machine_id}/run/*.pid"):
        with contextlib.suppress(ValueError, OSError):
            found[pidfile.name] = int(pidfile.read_text().split()[0])
    assert found, f"no run of {machine_id} under {host.data}"
    return found


class Reader:
    """A client on host 1 reading one address every 50 ms, printing to a file as it goes."""

    def __init__(self, multi: MultiHost, url: str, out: Path) -> None:
        self.out = out
        with out.open("w") as printed:
            self.process = subprocess.Popen(multi.hosts.exec(1, sys.executable, "-c", READER,
                                                             url),
                                            stdin=subprocess.PIPE, stdout=printed, text=True)

    def failures(self) -> list[str]:
        return [line for line in self.out.read_text().splitlines()
                if line.startswith("failed:")]

    def end(self) -> list[str]:
        self.process.communicate("", timeout=30)
        return self.out.read_text().splitlines()


@contextlib.contextmanager
def reading(multi: MultiHost, url: str) -> Iterator[Reader]:
    """A client on host 1 reading ``url`` for as long as the block runs; it must have
    answered every request once it has stopped."""
    reader = Reader(multi, url, multi.root / f"reader-{time.monotonic_ns()}.out")
    try:
        time.sleep(1.0)
        assert reader.process.poll() is None, reader.out.read_text()
        yield reader
    finally:
        printed = reader.end()
    assert printed, "the reader printed nothing"
    assert printed[-1].startswith("answered"), printed
    assert printed[-1].endswith(" failed 0"), printed


def running(multi: MultiHost, index: int) -> Host:
    """Host ``index``'s ``bodega join``, started again on its data dir if an earlier test
    left it stopped."""
    host = joined_host(multi, index)
    if host.process is not None and host.process.poll() is None:
        return host
    again = multi.start(index, "join", multi.join_argv("syd")[1], *SIZES, data=host.data)
    wait_for(again, "bodega joined")
    return again


def restart_and_check(multi: MultiHost, host: Host, machine: dict[str, Any],
                      before: dict[str, int]) -> None:
    """``bodega join`` again on the host's data dir; the machine is its worker's again."""
    again = multi.start(host.index, "join", multi.join_argv("syd")[1], *SIZES, data=host.data)
    wait_for(again, "bodega joined")
    until(lambda: any(m["id"] == machine["id"] and m.get("host_status") == "ok"
                      for m in started(multi)), "the machine started, its host ok again")
    assert runs(again, machine["id"]) == before, "the machine was started again"


def test_sigterm_stops_bodega_and_leaves_the_machine_serving(hosts: MultiHost) -> None:
    host = running(hosts, 2)
    machine = machine_in(hosts, "syd")
    before = runs(host, machine["id"])
    with reading(hosts, f"http://{served_at(hosts, machine['id'])}:8080/") as reader:
        assert host.process is not None
        host.process.send_signal(signal.SIGTERM)
        host.process.wait(90)
        until(lambda: not bodega_processes(hosts, 2), "every bodega process of host 2 gone")
        time.sleep(2.0)  # the machine serves on, bodega down
        assert reader.failures() == [], "the machine stopped with bodega"
        assert all(os.path.exists(f"/proc/{pid}") for pid in before.values())
        assert "leaving its machines running" in host.output()
        restart_and_check(hosts, host, machine, before)


def test_sigkill_of_every_bodega_process_leaves_the_machine_serving(hosts: MultiHost) -> None:
    host = running(hosts, 2)
    machine = machine_in(hosts, "syd")
    before = runs(host, machine["id"])
    with reading(hosts, f"http://{served_at(hosts, machine['id'])}:8080/") as reader:
        assert host.process is not None
        others = [p for p in bodega_processes(hosts, 2) if p != host.process.pid]
        assert others, "no component of host 2 found"
        host.process.kill()  # the supervisor first: its components see it gone
        host.process.wait()
        time.sleep(3.0)  # what a component does when its supervisor is gone, it has done
        for left in [*others, *bodega_processes(hosts, 2)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(left, signal.SIGKILL)
        until(lambda: not bodega_processes(hosts, 2), "every bodega process of host 2 gone")
        assert reader.failures() == [], "the machine stopped with bodega"
        assert all(os.path.exists(f"/proc/{pid}") for pid in before.values())
        restart_and_check(hosts, host, machine, before)


def test_a_host_stopped_with_ctrl_c_shows_its_machine_stopped(hosts: MultiHost) -> None:
    host = joined_host(hosts, 3)
    machine = machine_in(hosts, "lon")
    hosts.stop(host)  # SIGINT, as Ctrl-C: its machines stop with it
    shown = until(lambda: (m := machine_in(hosts, "lon")).get("host_status") == "unreachable"
                  and m, "host 3 shown unreachable")
    assert shown["id"] == machine["id"]
    time.sleep(3.0)  # longer than gossip takes: what is shown now is what stays
    assert machine_in(hosts, "lon")["state"] == "stopped"
    assert "stopping bodega and its machines" in host.output()
