"""Every host a peer: losing any one host, the first included, loses no API, no ingress, no join.

Five namespace hosts. Host 1 runs ``bodega up --advertise``; host 2 joins as a
server (a server token from host 1, ``--server``), host 3 as a plain peer with
the line host 1 printed; each runs a worker, a broker and a proxy. An app has
one machine on each. Then, as docs/multi-host.md says:

- host 1's link goes down: through host 2's API the app's machines are listed
  and a new one is created and started, host 3's proxy serves the app, and a
  fourth host joins through host 2 with the token host 1 printed; once host
  1's link is back, its own API shows the machine made meanwhile as started;
- the same with host 2 lost, a fifth host joining through host 1;
- every process of host 3 is killed with SIGKILL: hosts 1 and 2 serve without
  it (a machine is created and started through host 2's API and served by
  host 1's proxy), and ``bodega join`` again on host 3 (no token) brings its
  machines back.

Each loss prints how long the peers took to serve without the host (the API
listing and 10 answers in a row through a surviving proxy); the test asserts
only what happens.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import signal
import statistics
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.cluster.deploy_kit import app_dir, readable_dir
from tests.cluster.multihost_kit import MultiHost, three_hosts, until, wait_for

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")

SIZES = ("--driver", "process", "--cpus", "4", "--memory-mb", "2048")
LOSSES: list[float] = []  # seconds from each loss until the peers served without the host


@pytest.fixture(scope="module")
def peers() -> Iterator[MultiHost]:
    with readable_dir() as root, three_hosts(root, count=5) as multi:
        server_token = multi.ok("cluster", "token", "create", "--server",
                                "--description", "host 2").strip()
        first = multi.join_argv("syd")[1]
        syd = multi.start(2, "join", first, "--token", server_token, "--region", "syd",
                          "--server", *SIZES)
        lon = multi.start(3, *multi.join_argv("lon"), *SIZES)
        for host in (syd, lon):
            wait_for(host, "bodega joined")
        until(lambda: sum(1 for s in multi.alive().values() if s == "alive") >= 9,
              "three workers, three brokers and three proxies alive")
        multi.ok("deploy", "-c", str(app_dir(root, "hello", "peer")))
        multi.ok("scale", "count", "1", "--app", "peer", "--region", "ams,syd,lon")
        until(lambda: len(started(multi)) == 3, "a machine started on each host")
        yield multi
    if LOSSES:
        print(f"\nloss until served (s): {[round(t, 1) for t in LOSSES]}, "
              f"median {statistics.median(LOSSES):.1f}")


def api_of(multi: MultiHost, index: int) -> MultiHost:
    """The CLI pointed at host ``index``'s own Machines API (the same admin token): host 1's
    is on a free port, a joined host's on the default one."""
    if index == 1:
        return multi
    return dataclasses.replace(multi, api=f"http://{multi.hosts.address(index)}:4280")


def started(multi: MultiHost) -> list[dict[str, Any]]:
    return [m for m in multi.json("machine", "list", "--app", "peer")
            if m["state"] == "started"]


def answers(multi: MultiHost, index: int, tries: int = 10) -> set[str]:
    """The machines that answered through host ``index``'s proxy; empty unless all did."""
    seen = set()
    where = multi.proxy if index == 1 else f"http://{multi.hosts.address(index)}:8080"
    with httpx.Client(timeout=5) as web:
        for _ in range(tries):
            try:
                answer = web.get(f"{where}/", headers={"host": "peer.localhost"})
            except httpx.HTTPError:
                return set()
            if answer.status_code != 200:
                return set()
            seen.add(answer.text.rsplit("(", 1)[1].split(")")[0])
    return seen


def served_without(multi: MultiHost, api: int, proxy: int, since: float) -> None:
    """Wait until host ``api``'s API lists the app and host ``proxy``'s proxy answers 10
    requests in a row, and note how long that took from ``since``."""
    until(lambda: api_of(multi, api).json("machine", "list", "--app", "peer")
          and answers(multi, proxy), f"host {api}'s API and host {proxy}'s proxy serving")
    LOSSES.append(time.monotonic() - since)


def made_and_started(via: MultiHost, region: str, before: set[str]) -> str:
    """A new machine in ``region``, created and started through ``via``'s API; its id."""
    count = 1 + sum(1 for m in via.json("machine", "list", "--app", "peer")
                    if m["region"] == region)
    via.ok("scale", "count", str(count), "--app", "peer", "--region", region)
    return str(until(lambda: next((m["id"] for m in started(via)
                                   if m["id"] not in before and m["region"] == region), None),
                     f"a new machine started in {region}"))


def whole(multi: MultiHost, *via: int) -> None:
    """Wait until the APIs of hosts ``via`` show every member alive: a loss test begins
    from a whole cluster, not from one still healing from the loss before (a host whose
    link came back hears of its peers again within a few gossip rounds)."""
    until(lambda: all(all(status == "alive" for status in api_of(multi, i).alive().values())
                      for i in via), f"every member alive as hosts {via} see them")


def joins_through(multi: MultiHost, index: int, through: int, region: str) -> None:
    """Host ``index`` runs the join line host 1 printed, pointed at host ``through``."""
    argv = multi.join_argv(region)
    if through != 1:  # a joined server listens on the default join port
        argv[1] = multi.hosts.address(through)
    host = multi.start(index, *argv, "--no-broker", "--no-proxy", *SIZES)
    wait_for(host, "bodega joined")
    until(lambda: any(m["region"] == region and m["status"] == "alive"
                      for m in api_of(multi, through).json("cluster", "members")),
          f"the {region} host alive")


def test_host_1_lost_its_peers_serve_create_and_let_a_host_join(peers: MultiHost) -> None:
    before = {m["id"] for m in started(peers)}
    since = time.monotonic()
    asyncio.run(peers.hosts.link(1, up=False))
    try:
        via2 = api_of(peers, 2)
        served_without(peers, api=2, proxy=3, since=since)
        listed = {m["id"]: m for m in via2.json("machine", "list", "--app", "peer")}
        assert before <= set(listed)
        until(lambda: any(m["region"] == "ams" and m.get("host_status") == "unreachable"
                          for m in via2.json("machine", "list", "--app", "peer")),
              "host 1's machine shown unreachable")
        made = made_and_started(via2, "syd", before)
        # By syd's own proxy: host 3's serves its own region's machine while it has room.
        until(lambda: made in answers(peers, 2, tries=20), "the new machine served by host 2")
        joins_through(peers, 4, through=2, region="fra")
    finally:
        asyncio.run(peers.hosts.link(1, up=True))
    until(lambda: any(m["id"] == made for m in started(peers)),
          "host 1's API showing the machine made while it was away, started")


def test_host_2_lost_its_peers_serve_create_and_let_a_host_join(peers: MultiHost) -> None:
    whole(peers, 1, 2)
    before = {m["id"] for m in started(peers)}
    since = time.monotonic()
    asyncio.run(peers.hosts.link(2, up=False))
    try:
        served_without(peers, api=1, proxy=3, since=since)
        made = made_and_started(peers, "lon", before)
        until(lambda: made in answers(peers, 3, tries=20), "the new machine served by host 3")
        joins_through(peers, 5, through=1, region="mad")
    finally:
        asyncio.run(peers.hosts.link(2, up=True))
    until(lambda: any(m["id"] == made for m in started(api_of(peers, 2))),
          "host 2's API showing the machine made while it was away, started")


def test_a_host_killed_with_sigkill_leaves_its_peers_serving_and_comes_back(
        peers: MultiHost) -> None:
    whole(peers, 1, 2)
    lon = next(h for h in peers.members if h.index == 3)
    mine = {m["id"] for m in started(peers) if m["region"] == "lon"}
    since = time.monotonic()
    pids = subprocess.run(["ip", "netns", "pids", peers.hosts.namespace(3)],
                          capture_output=True, text=True, check=True).stdout.split()
    for pid in pids:  # every process of the host at once, as a power cut would
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid), signal.SIGKILL)
    served_without(peers, api=2, proxy=1, since=since)
    until(lambda: all(m.get("host_status") == "unreachable"
                      for m in api_of(peers, 1).json("machine", "list", "--app", "peer")
                      if m["id"] in mine), "host 3's machines shown unreachable")
    made = made_and_started(api_of(peers, 2), "ams", {m["id"] for m in started(peers)})
    until(lambda: made in answers(peers, 1, tries=20), "the new machine served by host 1")
    again = peers.start(3, "join", peers.join_argv("lon")[1], *SIZES, data=lon.data)
    wait_for(again, "bodega joined")
    until(lambda: mine <= {m["id"] for m in started(peers)
                           if m.get("host_status") != "unreachable"},
          "host 3's machines started again")
    until(lambda: mine & answers(peers, 3, tries=20), "host 3's proxy serving its machines")
